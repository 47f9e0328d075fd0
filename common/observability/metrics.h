// Prometheus metrics for the curator and the agent hosts: counters, gauges
// and histograms in labelled families, rendered in the Prometheus text
// exposition format 0.0.4 (docs/operators.md, "Metrics and health").
//
// Registration happens once at startup with constant names and returns a
// family; a family hands out one child per tuple of label values:
//
//   ASSIGN_OR_RETURN(Counter* reports,
//                    registry.AddCounter("ldpgraph_reports_received_total",
//                                        "Reports received.", {"mechanism"}));
//   Counter::Child* hds = reports->With({"hds"});  // keep it: cheap hot path
//   hds->Increment();
//
// A value that already lives elsewhere (a counter of the curator's core, a
// ledger) is exported by a callback family instead, read at every Render:
// AddGaugeCallback, AddCounterCallback, AddHistogramCallback.
//
// Updating a child is lock-free (relaxed atomics); With() takes the family's
// lock and is meant for setup or for rare, bounded label sets. Label values
// must come from a small bounded set (mechanism names, status codes): every
// distinct tuple is a child that lives as long as the registry.
//
// No gRPC and no HTTP here; http_endpoint.h serves Render() over HTTP.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace ldpgraph::observability {

// One value per label name of a family, in the order the names were given.
using LabelValues = std::vector<std::string>;

// What every family has in common. Not used directly: see Counter, Gauge and
// Histogram. Thread-safe.
class MetricFamily {
 public:
  virtual ~MetricFamily() = default;
  MetricFamily(const MetricFamily&) = delete;
  MetricFamily& operator=(const MetricFamily&) = delete;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  // Appends this family's # HELP, # TYPE and sample lines to *out, children
  // sorted by their label values.
  virtual void RenderTo(std::string* out) const = 0;

 protected:
  MetricFamily(std::string name, std::string help,
               std::vector<std::string> label_names)
      : name_(std::move(name)),
        help_(std::move(help)),
        label_names_(std::move(label_names)) {}

  // Stops the process with a message naming the family if values does not
  // have one value per label name: a programming error fixed at the call
  // site, never a matter of input.
  void CheckArity(const LabelValues& values) const;
  // Appends `{name="value",...}` (nothing for a family without labels); extra
  // is a last label already formatted (the histogram's le), or empty.
  void AppendLabels(const LabelValues& values, const std::string& extra,
                    std::string* out) const;
  void AppendHeader(const char* type, std::string* out) const;
  // Appends the sample line `name{labels} value` of one child.
  void AppendSample(const LabelValues& values, double value,
                    std::string* out) const;
  // Appends one histogram's lines: its buckets (cumulative, the le labels
  // taken from le, one per entry of counts, +Inf last), _sum and _count.
  // counts per bucket are not cumulative.
  void AppendHistogram(const LabelValues& values,
                       const std::vector<std::string>& le,
                       const std::vector<uint64_t>& counts, double sum,
                       std::string* out) const;

  mutable absl::Mutex mu_;

 private:
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
};

// A family whose children, one per tuple of label values, are made on first
// use and live as long as the family: what Counter, Gauge and Histogram
// share. Not used directly. Thread-safe.
template <typename ChildT>
class LabelledFamily : public MetricFamily {
 public:
  using Child = ChildT;

  // The child for values, created on first use (a counter or gauge at 0, a
  // histogram without observations); the same pointer on every call. Stops
  // the process if values.size() != label_names().size().
  Child* With(const LabelValues& values) ABSL_LOCKS_EXCLUDED(mu_) {
    CheckArity(values);
    absl::MutexLock lock(&mu_);
    auto it = children_.find(values);
    if (it == children_.end()) it = children_.emplace(values, NewChild()).first;
    return it->second.get();
  }

 protected:
  using MetricFamily::MetricFamily;

  // A new child, as With() adds it.
  virtual std::unique_ptr<Child> NewChild() const = 0;

  // Calls visit(values, child) for every child, sorted by label values,
  // holding the family's lock.
  template <typename Visit>
  void ForEachChild(Visit visit) const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    for (const auto& [values, child] : children_) visit(values, *child);
  }

 private:
  std::map<LabelValues, std::unique_ptr<Child>> children_ ABSL_GUARDED_BY(mu_);
};

// A family of children that hold one value each, rendered as one sample per
// child: what Counter and Gauge share. Not used directly. Thread-safe.
template <typename ChildT>
class ValueFamily : public LabelledFamily<ChildT> {
 public:
  void RenderTo(std::string* out) const override {
    this->AppendHeader(type_, out);
    this->ForEachChild([this, out](const LabelValues& values,
                                   const ChildT& child) {
      this->AppendSample(values, child.Value(), out);
    });
  }

 protected:
  // type: the family's # TYPE, "counter" or "gauge".
  ValueFamily(const char* type, std::string name, std::string help,
              std::vector<std::string> label_names)
      : LabelledFamily<ChildT>(std::move(name), std::move(help),
                               std::move(label_names)),
        type_(type) {}

  std::unique_ptr<ChildT> NewChild() const override {
    return std::make_unique<ChildT>();
  }

 private:
  const char* const type_;
};

// One counter (Counter::Child). Thread-safe and lock-free; lives as long as
// the registry.
class CounterChild {
 public:
  // Adds v. v must be >= 0: a negative or NaN v is ignored, since a
  // counter that went down would read as a restart.
  void Increment(double v = 1);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// A family of monotonically increasing counters.
class Counter final : public ValueFamily<CounterChild> {
 private:
  friend class MetricsRegistry;
  Counter(std::string name, std::string help,
          std::vector<std::string> label_names)
      : ValueFamily("counter", std::move(name), std::move(help),
                    std::move(label_names)) {}
};

// One gauge (Gauge::Child). Thread-safe and lock-free; lives as long as the
// registry.
class GaugeChild {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Increment(double v = 1);
  void Decrement(double v = 1) { Increment(-v); }
  // Sets the gauge to the current Unix time in seconds.
  void SetToCurrentTime();
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// A family of values that go up and down.
class Gauge final : public ValueFamily<GaugeChild> {
 private:
  friend class MetricsRegistry;
  Gauge(std::string name, std::string help,
        std::vector<std::string> label_names)
      : ValueFamily("gauge", std::move(name), std::move(help),
                    std::move(label_names)) {}
};

// One histogram (Histogram::Child). Observe is thread-safe and lock-free;
// lives as long as the registry. A render taken while observations land may
// see a sum that lags the counts by those observations; the buckets and
// _count always agree with each other.
class HistogramChild {
 public:
  // Counts v in the first bucket whose upper bound is >= v (the +Inf
  // bucket past the last bound) and adds it to the sum. NaN is ignored.
  void Observe(double v);
  // Observations so far, and their sum.
  uint64_t Count() const;
  double Sum() const { return sum_.load(std::memory_order_relaxed); }
  // Observations per bucket, not cumulative; the last is the +Inf bucket.
  std::vector<uint64_t> BucketCounts() const;

 private:
  friend class Histogram;
  explicit HistogramChild(const std::vector<double>* bounds);
  const std::vector<double>* bounds_;  // the family's, without +Inf
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_->size() + 1
  std::atomic<double> sum_{0};
};

// A family of histograms sharing one set of bucket upper bounds.
class Histogram final : public LabelledFamily<HistogramChild> {
 public:
  // The upper bounds given at registration, strictly increasing, without the
  // implicit +Inf.
  const std::vector<double>& bounds() const { return bounds_; }

  void RenderTo(std::string* out) const override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class MetricsRegistry;
  Histogram(std::string name, std::string help,
            std::vector<std::string> label_names, std::vector<double> bounds)
      : LabelledFamily(std::move(name), std::move(help),
                       std::move(label_names)),
        bounds_(std::move(bounds)) {}
  std::unique_ptr<HistogramChild> NewChild() const override;
  const std::vector<double> bounds_;
};

// One histogram's state as a callback family reports it
// (MetricsRegistry::AddHistogramCallback).
struct HistogramSnapshot {
  // Observations per bucket, not cumulative: one entry per bound of the
  // family, then the +Inf bucket.
  std::vector<uint64_t> bucket_counts;
  // The sum of the observations.
  double sum = 0;

  // observations bucketed over bounds as Histogram::Child::Observe buckets
  // them (the first bucket whose bound is >= v, +Inf past the last); NaN is
  // left out. bounds must be strictly increasing, as the family's; a last
  // bound of +Inf is dropped, as AddHistogram drops it.
  static HistogramSnapshot Of(const std::vector<double>& bounds,
                              const std::vector<double>& observations);
};

// Bucket bounds for latencies in seconds, 1 ms to 10 s (the Prometheus
// clients' defaults with 1 ms and 2.5 ms added).
std::vector<double> LatencySecondsBuckets();

// count bounds start, start*factor, start*factor^2, ...
// INVALID_ARGUMENT unless start > 0 and finite, factor > 1 and finite and
// 1 <= count <= 1000.
absl::StatusOr<std::vector<double>> ExponentialBuckets(double start,
                                                       double factor,
                                                       int count);

// The families of one process, rendered in the order they were registered.
// Thread-safe: families may be added while another thread renders. Owns its
// families and their children; the pointers it returns stay valid, at the
// same address, until the registry is destroyed.
class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Registers a family. Errors, each naming the offending name:
  //  INVALID_ARGUMENT if name does not match [a-zA-Z_:][a-zA-Z0-9_:]*, a label
  //    name does not match [a-zA-Z_][a-zA-Z0-9_]* or starts with "__", or a
  //    label name repeats;
  //  ALREADY_EXISTS if name, or a sample name the family would write (for a
  //    histogram: name_bucket, name_sum, name_count), is taken already.
  // A family without labels starts with its one child at 0, so it is
  // rendered before its first update.
  absl::StatusOr<Counter*> AddCounter(const std::string& name,
                                      const std::string& help,
                                      const std::vector<std::string>& label_names)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<Gauge*> AddGauge(const std::string& name,
                                  const std::string& help,
                                  const std::vector<std::string>& label_names)
      ABSL_LOCKS_EXCLUDED(mu_);
  // As AddCounter; also INVALID_ARGUMENT if a label is named "le" or the
  // bounds are not strictly increasing and free of NaN. A last bound of +Inf
  // is dropped (the +Inf bucket is always there); any other infinity is
  // rejected. Empty bounds are allowed: only the +Inf bucket.
  absl::StatusOr<Histogram*> AddHistogram(
      const std::string& name, const std::string& help,
      const std::vector<std::string>& label_names, std::vector<double> bounds)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A gauge without labels whose value is read(), called at every Render on
  // the rendering thread. read must be thread-safe and must not call into
  // this registry. Errors as AddGauge.
  absl::Status AddGaugeCallback(const std::string& name,
                                const std::string& help,
                                std::function<double()> read)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A counter without labels whose value is read(), called at every Render
  // on the rendering thread. read must be thread-safe, must not call into
  // this registry, and should return a value >= 0 that never decreases
  // while the process lives (what it returns is rendered as is). Errors as
  // AddCounter, and INVALID_ARGUMENT for an empty read.
  absl::Status AddCounterCallback(const std::string& name,
                                  const std::string& help,
                                  std::function<double()> read)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A labelled counter family whose samples are read() at every Render: one
  // (label values, value) pair per child, in any order (they are rendered
  // sorted by label values). A pair whose values do not have one value per
  // label name, or whose label values repeat an earlier pair's, is left
  // out: a programming error, but one that must not stop the process at
  // scrape time. read's contract and the errors as the unlabelled variant.
  using CounterSamples = std::vector<std::pair<LabelValues, double>>;
  absl::Status AddCounterCallback(const std::string& name,
                                  const std::string& help,
                                  const std::vector<std::string>& label_names,
                                  std::function<CounterSamples()> read)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A histogram family whose children are read() at every Render, for
  // observations gathered elsewhere (HistogramSnapshot::Of buckets them).
  // Bounds as AddHistogram. A pair is left out, as for AddCounterCallback,
  // if its label values have the wrong arity or repeat, or if its
  // bucket_counts do not hold one entry per bound (a last +Inf dropped)
  // plus one. read must be thread-safe and must not call into this
  // registry. What it returns is rendered as is: the counts of a
  // distribution of events never decrease, but a distribution of state
  // recomputed at every render (what OpenMetrics calls a gauge histogram,
  // which format 0.0.4 cannot mark) may move observations between buckets,
  // and is queried without rate(). Errors as AddHistogram, and
  // INVALID_ARGUMENT for an empty read.
  using HistogramSamples = std::vector<std::pair<LabelValues, HistogramSnapshot>>;
  absl::Status AddHistogramCallback(const std::string& name,
                                    const std::string& help,
                                    const std::vector<std::string>& label_names,
                                    std::vector<double> bounds,
                                    std::function<HistogramSamples()> read)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The text exposition format 0.0.4: for every family in registration
  // order its # HELP and # TYPE lines, then its samples. HELP text escapes
  // backslash and newline; label values escape backslash, double quote and
  // newline. Values print as integers when they are whole and below 2^53,
  // otherwise in the shortest digits that read back exactly (plain decimals
  // from 1e-4 to 1e21, an exponent outside: 0.0005, 1e-05); +Inf, -Inf, NaN.
  std::string Render() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Checks the names, reserves the sample names, then stores the family
  // (dropped on an error).
  absl::Status Register(std::unique_ptr<MetricFamily> family,
                        const std::vector<std::string>& sample_names)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Makes the child of a family without labels, so that it renders before
  // its first update, then registers the family; the family, or Register's
  // error.
  template <typename Family>
  absl::StatusOr<Family*> AddFamily(
      std::unique_ptr<Family> family,
      const std::vector<std::string>& sample_names) ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<MetricFamily>> families_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> taken_ ABSL_GUARDED_BY(mu_);  // sample names
};

// Registers the standard process metrics on registry:
//  process_start_time_seconds     Unix time the process started (from
//                                 /proc/self/stat and /proc/stat; the time of
//                                 this call where those cannot be read);
//  process_resident_memory_bytes  resident set size, read from
//                                 /proc/self/statm at every render (NaN where
//                                 it cannot be read).
// Errors as AddGauge (ALREADY_EXISTS when called twice).
absl::Status RegisterProcessMetrics(MetricsRegistry& registry);

// Observes the seconds between its construction and its destruction (or
// Stop) into a histogram child. A null child makes it a no-op. Not
// thread-safe; one per timed operation.
class ScopedTimer {
 public:
  explicit ScopedTimer(Histogram::Child* child)
      : child_(child), start_(std::chrono::steady_clock::now()) {}
  ~ScopedTimer() { Stop(); }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

  // Observes the elapsed seconds now and returns them; later calls and the
  // destructor observe nothing more and return 0.
  double Stop();

 private:
  Histogram::Child* child_;
  const std::chrono::steady_clock::time_point start_;
  bool stopped_ = false;
};

}  // namespace ldpgraph::observability
