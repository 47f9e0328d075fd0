#include "common/observability/metrics.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/stopwatch.h"

namespace ldpgraph::observability {
namespace {

bool IsMetricNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         c == ':';
}
bool IsLabelNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool IsValidMetricName(const std::string& name) {
  if (name.empty() || !IsMetricNameStart(name[0])) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return IsMetricNameStart(c) || IsDigit(c); });
}

// [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (reserved for internal use).
bool IsValidLabelName(const std::string& name) {
  if (name.empty() || !IsLabelNameStart(name[0])) return false;
  if (name.size() >= 2 && name[0] == '_' && name[1] == '_') return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return IsLabelNameStart(c) || IsDigit(c); });
}

// A sample value or an le bound as the text format wants it.
std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  constexpr double kExactIntegers = 9007199254740992.0;  // 2^53
  if (v == std::trunc(v) && std::fabs(v) < kExactIntegers) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  // Shortest digits that read back exactly: plain decimals from 1e-4 to
  // 1e21 (0.0005, not 5e-04), exponents outside (1e-05, 1e+300).
  char buf[64];
  const double magnitude = std::fabs(v);
  const std::chars_format format = magnitude >= 1e-4 && magnitude < 1e21
                                       ? std::chars_format::fixed
                                       : std::chars_format::general;
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v, format);
  if (ec != std::errc()) return "NaN";  // cannot happen with 64 bytes
  return std::string(buf, end);
}

void AppendEscaped(const std::string& text, bool escape_quote,
                   std::string* out) {
  for (char c : text) {
    switch (c) {
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '"':
        out->append(escape_quote ? "\\\"" : "\"");
        break;
      default:
        out->push_back(c);
    }
  }
}

// Adds v to an atomic double. std::atomic<double>::fetch_add is a
// compare-exchange loop in libstdc++; named here for the reader.
void AtomicAdd(std::atomic<double>& a, double v) {
  a.fetch_add(v, std::memory_order_relaxed);
}

// The formatted le label of every bucket of bounds, +Inf last.
std::vector<std::string> LeLabels(const std::vector<double>& bounds) {
  std::vector<std::string> le;
  le.reserve(bounds.size() + 1);
  for (double b : bounds) {
    le.push_back(absl::StrCat("le=\"", FormatValue(b), "\""));
  }
  le.push_back("le=\"+Inf\"");
  return le;
}

// Checks what AddHistogram and AddHistogramCallback check beyond the names,
// and drops a last bound of +Inf.
absl::Status ValidateHistogram(const std::string& name,
                               const std::vector<std::string>& label_names,
                               std::vector<double>& bounds) {
  for (const std::string& label : label_names) {
    if (label == "le") {
      return absl::InvalidArgumentError(absl::StrCat(
          "histogram ", name, ": the label name le is reserved for buckets"));
    }
  }
  if (!bounds.empty() && std::isinf(bounds.back()) && bounds.back() > 0) {
    bounds.pop_back();
  }
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && !(bounds[i - 1] < bounds[i]))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "histogram ", name, ": bucket bounds must be finite and strictly "
          "increasing; bound ", i, " is ", FormatValue(bounds[i])));
    }
  }
  return absl::OkStatus();
}

// The sample names a histogram family writes.
std::vector<std::string> HistogramSampleNames(const std::string& name) {
  return {name, name + "_bucket", name + "_sum", name + "_count"};
}

// The samples of a labelled callback that can be rendered, sorted by label
// values: those with one value per label name, each tuple once (the first
// of a repeated tuple kept, as the sort is stable).
template <typename Value>
std::vector<std::pair<LabelValues, Value>> RenderableSamples(
    std::vector<std::pair<LabelValues, Value>> samples, size_t arity) {
  samples.erase(std::remove_if(samples.begin(), samples.end(),
                               [arity](const auto& s) {
                                 return s.first.size() != arity;
                               }),
                samples.end());
  std::stable_sort(
      samples.begin(), samples.end(),
      [](const auto& a, const auto& b) { return a.first < b.first; });
  samples.erase(std::unique(samples.begin(), samples.end(),
                            [](const auto& a, const auto& b) {
                              return a.first == b.first;
                            }),
                samples.end());
  return samples;
}

// A counter or a gauge read through a callback at render time: labelled
// samples, or the one sample of a family without labels (SingleSample).
class SampleCallbackFamily final : public MetricFamily {
 public:
  using Read = std::function<MetricsRegistry::CounterSamples()>;
  // type: the family's # TYPE, "counter" or "gauge".
  SampleCallbackFamily(const char* type, std::string name, std::string help,
                       std::vector<std::string> label_names, Read read)
      : MetricFamily(std::move(name), std::move(help), std::move(label_names)),
        type_(type),
        read_(std::move(read)) {}

  void RenderTo(std::string* out) const override {
    AppendHeader(type_, out);
    for (const auto& [values, value] :
         RenderableSamples(read_(), label_names().size())) {
      AppendSample(values, value, out);
    }
  }

 private:
  const char* const type_;
  const Read read_;
};

// The samples of a family without labels whose one value is read().
SampleCallbackFamily::Read SingleSample(std::function<double()> read) {
  return [read = std::move(read)]() -> MetricsRegistry::CounterSamples {
    return {{LabelValues{}, read()}};
  };
}

// A histogram read through a callback at render time.
class HistogramCallbackFamily final : public MetricFamily {
 public:
  using Read = std::function<MetricsRegistry::HistogramSamples()>;
  HistogramCallbackFamily(std::string name, std::string help,
                          std::vector<std::string> label_names,
                          std::vector<double> bounds, Read read)
      : MetricFamily(std::move(name), std::move(help), std::move(label_names)),
        le_(LeLabels(bounds)),
        read_(std::move(read)) {}

  void RenderTo(std::string* out) const override {
    AppendHeader("histogram", out);
    for (const auto& [values, snapshot] :
         RenderableSamples(read_(), label_names().size())) {
      if (snapshot.bucket_counts.size() != le_.size()) continue;
      AppendHistogram(values, le_, snapshot.bucket_counts, snapshot.sum, out);
    }
  }

 private:
  const std::vector<std::string> le_;  // one per bucket, +Inf last
  const Read read_;
};

absl::Status ValidateNames(const std::string& name,
                           const std::vector<std::string>& label_names) {
  if (!IsValidMetricName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric name \"", name,
                     "\" does not match [a-zA-Z_:][a-zA-Z0-9_:]*"));
  }
  for (size_t i = 0; i < label_names.size(); ++i) {
    const std::string& label = label_names[i];
    if (!IsValidLabelName(label)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metric ", name, ": label name \"", label,
          "\" does not match [a-zA-Z_][a-zA-Z0-9_]* or starts with __"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (label_names[j] == label) {
        return absl::InvalidArgumentError(absl::StrCat(
            "metric ", name, ": label name \"", label, "\" repeats"));
      }
    }
  }
  return absl::OkStatus();
}

// Unix time the process started: /proc/stat's btime plus /proc/self/stat's
// starttime (field 22, in clock ticks after boot). nullopt where unreadable.
std::optional<double> ProcessStartTime() {
  std::ifstream stat("/proc/self/stat");
  std::string line;
  if (!std::getline(stat, line)) return std::nullopt;
  // The command name (field 2) is in parentheses and may hold spaces.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 1));
  std::string field;
  // Fields 3..22 follow the parenthesis.
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> field)) return std::nullopt;
  }
  const double start_ticks = std::strtod(field.c_str(), nullptr);
  std::ifstream proc_stat("/proc/stat");
  while (std::getline(proc_stat, line)) {
    if (line.rfind("btime ", 0) == 0) {
      const double boot = std::strtod(line.c_str() + 6, nullptr);
      const long ticks = sysconf(_SC_CLK_TCK);
      if (boot <= 0 || ticks <= 0) return std::nullopt;
      return boot + start_ticks / static_cast<double>(ticks);
    }
  }
  return std::nullopt;
}

// Resident set size in bytes from /proc/self/statm (its second field, in
// pages); NaN where unreadable.
double ResidentMemoryBytes() {
  std::ifstream statm("/proc/self/statm");
  double size_pages = 0;
  double resident_pages = 0;
  if (!(statm >> size_pages >> resident_pages)) return std::nan("");
  const long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) return std::nan("");
  return resident_pages * static_cast<double>(page);
}

double UnixNow() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// --- MetricFamily ------------------------------------------------------------

void MetricFamily::CheckArity(const LabelValues& values) const {
  if (values.size() == label_names_.size()) return;
  std::fprintf(stderr,
               "metric %s: %zu label values given for the %zu labels (%s)\n",
               name_.c_str(), values.size(), label_names_.size(),
               absl::StrJoin(label_names_, ",").c_str());
  std::abort();
}

void MetricFamily::AppendLabels(const LabelValues& values,
                                const std::string& extra,
                                std::string* out) const {
  if (values.empty() && extra.empty()) return;
  out->push_back('{');
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out->push_back(',');
    absl::StrAppend(out, label_names_[i], "=\"");
    AppendEscaped(values[i], /*escape_quote=*/true, out);
    out->push_back('"');
  }
  if (!extra.empty()) {
    if (!values.empty()) out->push_back(',');
    out->append(extra);
  }
  out->push_back('}');
}

void MetricFamily::AppendHeader(const char* type, std::string* out) const {
  absl::StrAppend(out, "# HELP ", name_, " ");
  AppendEscaped(help_, /*escape_quote=*/false, out);
  absl::StrAppend(out, "\n# TYPE ", name_, " ", type, "\n");
}

void MetricFamily::AppendSample(const LabelValues& values, double value,
                                std::string* out) const {
  out->append(name_);
  AppendLabels(values, "", out);
  absl::StrAppend(out, " ", FormatValue(value), "\n");
}

void MetricFamily::AppendHistogram(const LabelValues& values,
                                   const std::vector<std::string>& le,
                                   const std::vector<uint64_t>& counts,
                                   double sum, std::string* out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    cumulative += counts[i];
    absl::StrAppend(out, name_, "_bucket");
    AppendLabels(values, le[i], out);
    absl::StrAppend(out, " ", cumulative, "\n");
  }
  absl::StrAppend(out, name_, "_sum");
  AppendLabels(values, "", out);
  absl::StrAppend(out, " ", FormatValue(sum), "\n");
  absl::StrAppend(out, name_, "_count");
  AppendLabels(values, "", out);
  absl::StrAppend(out, " ", cumulative, "\n");
}

// --- Counter and Gauge -------------------------------------------------------

void CounterChild::Increment(double v) {
  if (!(v >= 0)) return;  // negative or NaN
  AtomicAdd(value_, v);
}

void GaugeChild::Increment(double v) { AtomicAdd(value_, v); }

void GaugeChild::SetToCurrentTime() { Set(UnixNow()); }

// --- Histogram ---------------------------------------------------------------

HistogramChild::HistogramChild(const std::vector<double>* bounds)
    : bounds_(bounds),
      counts_(new std::atomic<uint64_t>[bounds->size() + 1]) {
  for (size_t i = 0; i <= bounds_->size(); ++i) {
    counts_[i].store(0, std::memory_order_relaxed);
  }
}

void HistogramChild::Observe(double v) {
  if (std::isnan(v)) return;
  // First bound >= v; past the end is the +Inf bucket.
  const size_t bucket =
      std::lower_bound(bounds_->begin(), bounds_->end(), v) - bounds_->begin();
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(sum_, v);
}

uint64_t HistogramChild::Count() const {
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_->size(); ++i) {
    total += counts_[i].load(std::memory_order_relaxed);
  }
  return total;
}

std::vector<uint64_t> HistogramChild::BucketCounts() const {
  std::vector<uint64_t> counts(bounds_->size() + 1);
  for (size_t i = 0; i < counts.size(); ++i) {
    counts[i] = counts_[i].load(std::memory_order_relaxed);
  }
  return counts;
}

std::unique_ptr<HistogramChild> Histogram::NewChild() const {
  return std::unique_ptr<HistogramChild>(new HistogramChild(&bounds_));
}

void Histogram::RenderTo(std::string* out) const {
  AppendHeader("histogram", out);
  const std::vector<std::string> le = LeLabels(bounds_);
  ForEachChild([&](const LabelValues& values, const HistogramChild& child) {
    // One snapshot of the buckets, so _count equals the +Inf bucket.
    AppendHistogram(values, le, child.BucketCounts(), child.Sum(), out);
  });
}

HistogramSnapshot HistogramSnapshot::Of(
    const std::vector<double>& bounds,
    const std::vector<double>& observations) {
  size_t n = bounds.size();
  if (n > 0 && std::isinf(bounds.back()) && bounds.back() > 0) --n;
  const auto end = bounds.begin() + static_cast<std::ptrdiff_t>(n);
  HistogramSnapshot out;
  out.bucket_counts.assign(n + 1, 0);
  for (double v : observations) {
    if (std::isnan(v)) continue;
    ++out.bucket_counts[std::lower_bound(bounds.begin(), end, v) -
                        bounds.begin()];
    out.sum += v;
  }
  return out;
}

// --- buckets -----------------------------------------------------------------

std::vector<double> LatencySecondsBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
          0.25,  0.5,    1,     2.5,  5,     10};
}

absl::StatusOr<std::vector<double>> ExponentialBuckets(double start,
                                                       double factor,
                                                       int count) {
  if (!(start > 0) || !std::isfinite(start) || !(factor > 1) ||
      !std::isfinite(factor) || count < 1 || count > 1000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ExponentialBuckets(start=", start, ", factor=", factor,
        ", count=", count,
        "): need finite start > 0, finite factor > 1, 1 <= count <= 1000"));
  }
  std::vector<double> bounds;
  bounds.reserve(count);
  double b = start;
  for (int i = 0; i < count; ++i, b *= factor) {
    if (!std::isfinite(b)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ExponentialBuckets(start=", start, ", factor=", factor,
          ", count=", count, "): bound ", i, " overflows"));
    }
    bounds.push_back(b);
  }
  return bounds;
}

// --- MetricsRegistry ---------------------------------------------------------

absl::Status MetricsRegistry::Register(
    std::unique_ptr<MetricFamily> family,
    const std::vector<std::string>& sample_names) {
  RETURN_IF_ERROR(ValidateNames(family->name(), family->label_names()));
  absl::MutexLock lock(&mu_);
  for (const std::string& sample : sample_names) {
    if (std::find(taken_.begin(), taken_.end(), sample) != taken_.end()) {
      return absl::AlreadyExistsError(absl::StrCat(
          "metric ", family->name(), ": the name ", sample,
          " is already registered"));
    }
  }
  taken_.insert(taken_.end(), sample_names.begin(), sample_names.end());
  families_.push_back(std::move(family));
  return absl::OkStatus();
}

namespace {

absl::Status NoCallback(const std::string& name) {
  return absl::InvalidArgumentError(
      absl::StrCat("metric ", name, ": no callback given"));
}

}  // namespace

template <typename Family>
absl::StatusOr<Family*> MetricsRegistry::AddFamily(
    std::unique_ptr<Family> family,
    const std::vector<std::string>& sample_names) {
  if (family->label_names().empty()) family->With({});
  Family* out = family.get();
  RETURN_IF_ERROR(Register(std::move(family), sample_names));
  return out;
}

absl::StatusOr<Counter*> MetricsRegistry::AddCounter(
    const std::string& name, const std::string& help,
    const std::vector<std::string>& label_names) {
  return AddFamily(
      std::unique_ptr<Counter>(new Counter(name, help, label_names)), {name});
}

absl::StatusOr<Gauge*> MetricsRegistry::AddGauge(
    const std::string& name, const std::string& help,
    const std::vector<std::string>& label_names) {
  return AddFamily(std::unique_ptr<Gauge>(new Gauge(name, help, label_names)),
                   {name});
}

absl::StatusOr<Histogram*> MetricsRegistry::AddHistogram(
    const std::string& name, const std::string& help,
    const std::vector<std::string>& label_names, std::vector<double> bounds) {
  RETURN_IF_ERROR(ValidateHistogram(name, label_names, bounds));
  return AddFamily(std::unique_ptr<Histogram>(new Histogram(
                       name, help, label_names, std::move(bounds))),
                   HistogramSampleNames(name));
}

absl::Status MetricsRegistry::AddGaugeCallback(const std::string& name,
                                               const std::string& help,
                                               std::function<double()> read) {
  if (!read) return NoCallback(name);
  return Register(std::make_unique<SampleCallbackFamily>(
                      "gauge", name, help, std::vector<std::string>{},
                      SingleSample(std::move(read))),
                  {name});
}

absl::Status MetricsRegistry::AddCounterCallback(
    const std::string& name, const std::string& help,
    std::function<double()> read) {
  if (!read) return NoCallback(name);
  return AddCounterCallback(name, help, {}, SingleSample(std::move(read)));
}

absl::Status MetricsRegistry::AddCounterCallback(
    const std::string& name, const std::string& help,
    const std::vector<std::string>& label_names,
    std::function<CounterSamples()> read) {
  if (!read) return NoCallback(name);
  return Register(std::make_unique<SampleCallbackFamily>(
                      "counter", name, help, label_names, std::move(read)),
                  {name});
}

absl::Status MetricsRegistry::AddHistogramCallback(
    const std::string& name, const std::string& help,
    const std::vector<std::string>& label_names, std::vector<double> bounds,
    std::function<HistogramSamples()> read) {
  if (!read) return NoCallback(name);
  RETURN_IF_ERROR(ValidateHistogram(name, label_names, bounds));
  return Register(std::make_unique<HistogramCallbackFamily>(
                      name, help, label_names, std::move(bounds),
                      std::move(read)),
                  HistogramSampleNames(name));
}

std::string MetricsRegistry::Render() const {
  std::string out;
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& family : families_) family->RenderTo(&out);
  return out;
}

absl::Status RegisterProcessMetrics(MetricsRegistry& registry) {
  const double start = ProcessStartTime().value_or(UnixNow());
  RETURN_IF_ERROR(registry.AddGaugeCallback(
      "process_start_time_seconds",
      "Start time of the process since unix epoch in seconds.",
      [start] { return start; }));
  return registry.AddGaugeCallback("process_resident_memory_bytes",
                                   "Resident memory size in bytes.",
                                   ResidentMemoryBytes);
}

// --- ScopedTimer -------------------------------------------------------------

double ScopedTimer::Stop() {
  if (stopped_) return 0;
  stopped_ = true;
  const double seconds = SecondsSince(start_);
  if (child_ != nullptr) child_->Observe(seconds);
  return seconds;
}

}  // namespace ldpgraph::observability
