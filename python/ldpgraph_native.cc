// ldpgraph._native: the C++ feature mechanisms and label randomized response
// on NumPy arrays, for the Python package (python/ldpgraph). The Python
// layer (ldpgraph/mechanisms.py) documents the public functions; this file
// converts arrays, runs the mechanisms of common/mechanisms over the rows in
// parallel with the GIL released, and turns a non-OK absl::Status into
// ValueError (INVALID_ARGUMENT, OUT_OF_RANGE) or RuntimeError (the rest).
//
// Reports as arrays: perturb returns an n x d float64 array holding each
// row's report densely, NaN where a dimension was not reported; a bit
// mechanism's bit is 0.0 or 1.0. estimate reads the same layout back into
// SparseReports, so a report array can be saved, sliced or filtered with
// NumPy in between.
//
// Randomness: without a seed, every row's noise comes from OpenSSL's CSPRNG
// (ThreadSecureRandom). With a seed, row i draws from
// SeededRandomForTesting(NodeNoiseSeed(seed, i)): reproducible whatever the
// thread count, and NOT differentially private.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/mechanisms/label_rr.h"
#include "common/parallel.h"
#include "common/random/random.h"

namespace py = pybind11;

namespace ldpgraph::python {
namespace {

using DoubleArray = py::array_t<double, py::array::c_style | py::array::forcecast>;
using IntArray = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

// Rows per parallel task: fixed, so that task boundaries never depend on
// the thread count.
constexpr size_t kRowsPerTask = 256;

// Raises the Python exception for a non-OK status.
void ThrowIfError(const absl::Status& s) {
  if (s.ok()) return;
  const std::string message(s.message());
  if (s.code() == absl::StatusCode::kInvalidArgument ||
      s.code() == absl::StatusCode::kOutOfRange) {
    throw py::value_error(message);
  }
  throw std::runtime_error(message);
}

// The first error of a parallel loop, by row: the lowest failing row wins,
// so the message does not depend on scheduling.
class FirstError {
 public:
  void Record(size_t row, const absl::Status& s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (row < row_) {
      row_ = row;
      status_ = absl::Status(s.code(), absl::StrCat("row ", row, ": ", s.message()));
    }
  }
  const absl::Status& status() const { return status_; }

 private:
  std::mutex mu_;
  size_t row_ = std::numeric_limits<size_t>::max();
  absl::Status status_;
};

// The randomness of one task of rows: the secure generator, or per-row
// seeded streams (see the file comment).
class RowRandom {
 public:
  static absl::StatusOr<RowRandom> Create(std::optional<uint64_t> seed) {
    RowRandom r;
    r.seed_ = seed;
    if (!seed) {
      auto secure = ThreadSecureRandom::Create();
      if (!secure.ok()) return secure.status();
      r.secure_ = std::move(*secure);
    }
    return r;
  }
  // The source row's draws come from.
  RandomSource& For(size_t row) {
    if (!seed_) return *secure_;
    seeded_.emplace(NodeNoiseSeed(*seed_, static_cast<uint32_t>(row)));
    return *seeded_;
  }

 private:
  RowRandom() = default;
  std::optional<uint64_t> seed_;
  std::unique_ptr<RandomSource> secure_;
  std::optional<SeededRandomForTesting> seeded_;
};

// A 2-D array's shape, or ValueError naming the argument.
std::pair<size_t, size_t> Shape2D(const py::array& a, const char* what) {
  if (a.ndim() != 2) {
    throw py::value_error(absl::StrCat(
        what, " must be a 2-D array (rows x dimensions), got ", a.ndim(),
        " dimension(s); reshape a single column with x.reshape(-1, 1)"));
  }
  if (a.shape(0) > std::numeric_limits<uint32_t>::max()) {
    throw py::value_error(absl::StrCat(what, " has more than 2^32 - 1 rows"));
  }
  return {static_cast<size_t>(a.shape(0)), static_cast<size_t>(a.shape(1))};
}

std::vector<py::ssize_t> Shape(size_t n, size_t d) {
  return {static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(d)};
}

// Builds the mechanism; ValueError for an unknown name or bad parameters.
std::unique_ptr<FeatureMechanism> Mechanism(const std::string& name,
                                            double epsilon, size_t dimension,
                                            double low, double high,
                                            std::optional<int> sampled) {
  // Python spells square-wave with an underscore; accept both.
  auto kind = ParseMechanismName(absl::StrReplaceAll(name, {{"_", "-"}}));
  ThrowIfError(kind.status());
  if (dimension < 1 || dimension > static_cast<size_t>(std::numeric_limits<int>::max())) {
    throw py::value_error(absl::StrCat(
        "the dimension (number of columns) must be >= 1, got ", dimension));
  }
  MechanismSpec spec;
  spec.kind = *kind;
  spec.epsilon = epsilon;
  spec.dimension = static_cast<int>(dimension);
  spec.sampled = sampled;
  spec.alpha = low;
  spec.beta = high;
  auto m = CreateFeatureMechanism(spec);
  ThrowIfError(m.status());
  return std::move(*m);
}

// Runs body(row, rng) over rows [0, n) in fixed tasks on `threads` workers
// with the GIL released, then raises the first failing row's error.
template <typename Body>
void ForEachRow(size_t n, int threads, std::optional<uint64_t> seed, Body&& body) {
  FirstError error;
  {
    py::gil_scoped_release release;
    const size_t tasks = (n + kRowsPerTask - 1) / kRowsPerTask;
    ParallelFor(tasks, ResolveThreads(threads), [&](int, size_t task) {
      const size_t begin = task * kRowsPerTask;
      const size_t end = std::min(n, begin + kRowsPerTask);
      auto random = RowRandom::Create(seed);
      if (!random.ok()) {
        error.Record(begin, random.status());
        return;
      }
      for (size_t row = begin; row < end; ++row) {
        absl::Status s = body(row, random->For(row));
        if (!s.ok()) {
          error.Record(row, s);
          return;
        }
      }
    });
  }
  ThrowIfError(error.status());
}

DoubleArray Perturb(const DoubleArray& x, const std::string& mechanism,
                    double epsilon, double low, double high,
                    std::optional<int> sampled, std::optional<uint64_t> seed,
                    int threads) {
  const auto [n, d] = Shape2D(x, "X");
  auto m = Mechanism(mechanism, epsilon, d, low, high, sampled);
  DoubleArray out(Shape(n, d));
  const double* in = x.data();
  double* o = out.mutable_data();
  ForEachRow(n, threads, seed, [&](size_t row, RandomSource& rng) -> absl::Status {
    auto report = m->Perturb(absl::MakeConstSpan(in + row * d, d), rng);
    if (!report.ok()) return report.status();
    double* r = o + row * d;
    std::fill(r, r + d, std::numeric_limits<double>::quiet_NaN());
    for (size_t i = 0; i < report->size(); ++i) {
      r[report->index(i)] = m->bit_reports() ? (report->bits[i] ? 1.0 : 0.0)
                                             : report->values[i];
    }
    return absl::OkStatus();
  });
  return out;
}

// Row `row` of a report array (see the file comment) as a SparseReport.
absl::StatusOr<SparseReport> ReportOfRow(const FeatureMechanism& m,
                                         const double* r, size_t d) {
  SparseReport report;
  report.dimension = static_cast<uint32_t>(d);
  report.dense = m.dense_reports();
  for (size_t j = 0; j < d; ++j) {
    if (std::isnan(r[j])) {
      if (report.dense) {
        return absl::InvalidArgumentError(absl::StrCat(
            MechanismName(m.kind()), " reports every dimension; column ", j,
            " is NaN (not reported)"));
      }
      continue;
    }
    if (!report.dense) report.indices.push_back(static_cast<uint32_t>(j));
    if (m.bit_reports()) {
      if (r[j] != 0.0 && r[j] != 1.0) {
        return absl::InvalidArgumentError(absl::StrCat(
            MechanismName(m.kind()), " reports bits: column ", j,
            " must be 0, 1 or NaN, got ", r[j]));
      }
      report.bits.push_back(r[j] == 1.0);
    } else {
      report.values.push_back(r[j]);
    }
  }
  return report;
}

DoubleArray Estimate(const DoubleArray& reports, const std::string& mechanism,
                     double epsilon, double low, double high,
                     std::optional<int> sampled, int threads) {
  const auto [n, d] = Shape2D(reports, "reports");
  auto m = Mechanism(mechanism, epsilon, d, low, high, sampled);
  DoubleArray out(Shape(n, d));
  const double* in = reports.data();
  double* o = out.mutable_data();
  // Estimation draws no randomness; the seed only avoids making a source.
  ForEachRow(n, threads, uint64_t{0}, [&](size_t row, RandomSource&) -> absl::Status {
    auto report = ReportOfRow(*m, in + row * d, d);
    if (!report.ok()) return report.status();
    double* r = o + row * d;
    std::fill(r, r + d, 0.0);
    return m->Estimate(*report, absl::MakeSpan(r, d));
  });
  return out;
}

// EstimateMean and EstimateVariance of every entry of x (its shape).
py::tuple Moments(const DoubleArray& x, const std::string& mechanism,
                  double epsilon, int dimension, double low, double high,
                  std::optional<int> sampled) {
  if (dimension < 1) {
    throw py::value_error(absl::StrCat("dimension must be >= 1, got ", dimension));
  }
  auto m = Mechanism(mechanism, epsilon, static_cast<size_t>(dimension), low,
                     high, sampled);
  DoubleArray mean(x.request().shape), var(x.request().shape);
  const double* in = x.data();
  for (py::ssize_t i = 0; i < x.size(); ++i) {
    if (std::isnan(in[i])) {
      throw py::value_error(absl::StrCat("x[", i, "] (flat index) is NaN"));
    }
    const double c = m->Clip(in[i]);
    mean.mutable_data()[i] = m->EstimateMean(c);
    var.mutable_data()[i] = m->EstimateVariance(c);
  }
  return py::make_tuple(mean, var);
}

std::unique_ptr<LabelRandomizedResponse> LabelMechanism(double epsilon, int classes) {
  auto m = LabelRandomizedResponse::Create(epsilon, classes);
  ThrowIfError(m.status());
  return std::move(*m);
}

IntArray PerturbLabels(const IntArray& labels, int classes, double epsilon,
                       std::optional<uint64_t> seed, int threads) {
  if (labels.ndim() != 1) {
    throw py::value_error(absl::StrCat("labels must be a 1-D array, got ",
                                       labels.ndim(), " dimension(s)"));
  }
  auto m = LabelMechanism(epsilon, classes);
  const size_t n = static_cast<size_t>(labels.shape(0));
  IntArray out(std::vector<py::ssize_t>{static_cast<py::ssize_t>(n)});
  const int64_t* in = labels.data();
  int64_t* o = out.mutable_data();
  ForEachRow(n, threads, seed, [&](size_t row, RandomSource& rng) -> absl::Status {
    if (in[row] < 0 || in[row] >= classes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "label ", in[row], " is outside [0, ", classes, ")"));
    }
    auto r = m->Perturb(static_cast<int>(in[row]), rng);
    if (!r.ok()) return r.status();
    o[row] = *r;
    return absl::OkStatus();
  });
  return out;
}

// The unbiased estimate of the class counts: the sum over reports of
// LabelRandomizedResponse::UnbiasedOneHot. Sequential: O(n c), cheap.
DoubleArray EstimateLabelCounts(const IntArray& reports, int classes,
                                double epsilon) {
  if (reports.ndim() != 1) {
    throw py::value_error(absl::StrCat("reports must be a 1-D array, got ",
                                       reports.ndim(), " dimension(s)"));
  }
  auto m = LabelMechanism(epsilon, classes);
  DoubleArray counts(std::vector<py::ssize_t>{classes});
  double* c = counts.mutable_data();
  std::fill(c, c + classes, 0.0);
  const int64_t* in = reports.data();
  for (py::ssize_t i = 0; i < reports.shape(0); ++i) {
    if (in[i] < 0 || in[i] >= classes) {
      throw py::value_error(absl::StrCat("reports[", i, "] = ", in[i],
                                         " is outside [0, ", classes, ")"));
    }
    auto one_hot = m->UnbiasedOneHot(static_cast<int>(in[i]));
    ThrowIfError(one_hot.status());
    for (int j = 0; j < classes; ++j) c[j] += (*one_hot)[j];
  }
  return counts;
}

}  // namespace
}  // namespace ldpgraph::python

PYBIND11_MODULE(_native, m) {
  using namespace ldpgraph::python;
  namespace py = pybind11;
  m.doc() = "ldpgraph's C++ mechanisms on NumPy arrays (see ldpgraph.mechanisms)";
  m.def("perturb", &Perturb, py::arg("x"), py::arg("mechanism"),
        py::arg("epsilon"), py::arg("low"), py::arg("high"),
        py::arg("sampled"), py::arg("seed"), py::arg("threads"));
  m.def("estimate", &Estimate, py::arg("reports"), py::arg("mechanism"),
        py::arg("epsilon"), py::arg("low"), py::arg("high"),
        py::arg("sampled"), py::arg("threads"));
  m.def("moments", &Moments, py::arg("x"), py::arg("mechanism"),
        py::arg("epsilon"), py::arg("dimension"), py::arg("low"),
        py::arg("high"), py::arg("sampled"));
  m.def("perturb_labels", &PerturbLabels, py::arg("labels"), py::arg("classes"),
        py::arg("epsilon"), py::arg("seed"), py::arg("threads"));
  m.def("estimate_label_counts", &EstimateLabelCounts, py::arg("reports"),
        py::arg("classes"), py::arg("epsilon"));
}
