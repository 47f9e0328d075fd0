#include "server/pipeline/report_screen.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ldpgraph::pipeline {
namespace {

// log C(n, k).
double LogChoose(double n, double k) {
  return std::lgamma(n + 1) - std::lgamma(k + 1) - std::lgamma(n - k + 1);
}

// Terms of the binomial tail are summed until they fall this far (in log)
// below the level; the rest is bounded geometrically.
constexpr double kLogMargin = 40.0;

}  // namespace

absl::Status ValidateScreenAlpha(double alpha) {
  if (!(alpha > 0 && alpha < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("screen-alpha must be in (0, 1), got ", alpha));
  }
  return absl::OkStatus();
}

absl::Status ParseDefenceFlags(const CliArgs& a, Defence* defence,
                               double* alpha) {
  if (auto d = a.Get("defence")) {
    ASSIGN_OR_RETURN(*defence, kDefenceNames.Parse(*d, "--defence"));
  }
  ASSIGN_OR_RETURN(auto level, a.GetDouble("screen-alpha"));
  if (level) {
    if (*defence != Defence::kScreen) {
      return absl::InvalidArgumentError(
          "--screen-alpha needs --defence screen");
    }
    absl::Status valid = ValidateScreenAlpha(*level);
    if (!valid.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--", valid.message()));
    }
    *alpha = *level;
  }
  return absl::OkStatus();
}

uint64_t BinomialUpperQuantile(uint64_t n, double p, double level) {
  if (n == 0 || p <= 0) return 0;
  if (p >= 1) return n;
  const double mean = n * p, sd = std::sqrt(mean * (1 - p));
  // Below mean - 10 sd the lower tail is < e^-50: P(X >= start) is 1 for any
  // level this is asked about, so the quantile lies above start.
  const uint64_t start = static_cast<uint64_t>(std::max(0.0, mean - 10 * sd));
  const double lp = std::log(p), lq = std::log1p(-p);
  const double log_level = std::log(level);
  std::vector<double> pmf;  // pmf[i] = P(X = start + i)
  double rest = 0;          // bound on P(X > start + pmf.size() - 1)
  for (uint64_t i = start;; ++i) {
    const double lpmf = LogChoose(static_cast<double>(n), static_cast<double>(i)) +
                        i * lp + (n - i) * lq;
    pmf.push_back(std::exp(lpmf));
    if (i == n) break;
    // Past the mode the ratio pmf(i+1)/pmf(i) falls with i: the terms left
    // out are at most pmf(i) r / (1 - r), r the ratio at i.
    const double r = static_cast<double>(n - i) / (i + 1) * p / (1 - p);
    if (i > mean && r < 1 && lpmf < log_level - kLogMargin) {
      rest = pmf.back() * r / (1 - r);
      break;
    }
  }
  // Walk down from the top: tail = P(X > start + i).
  double tail = rest;
  uint64_t t = start + pmf.size() - 1;
  for (size_t i = pmf.size() - 1; i > 0; --i) {
    const double above = tail + pmf[i];  // P(X > start + i - 1)
    if (above > level) break;
    tail = above;
    t = start + i - 1;
  }
  return t;
}

double HypergeometricTailAtLeast(int d, int m, int k, int h) {
  const int top = std::min(m, k);
  if (h <= std::max(0, k - (d - m))) return 1.0;
  double sum = 0;
  const double total = LogChoose(d, k);
  for (int j = h; j <= top; ++j) {
    sum += std::exp(LogChoose(m, j) + LogChoose(d - m, k - j) - total);
  }
  return std::min(1.0, sum);
}

absl::StatusOr<ScreenResult> ScreenReports(const ReportedDims& reports, int d,
                                           int k, double alpha) {
  RETURN_IF_ERROR(ValidateScreenAlpha(alpha));
  if (d < 1 || k < 1 || k > d) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the screen needs 1 <= k <= d, got k = ", k, ", d = ", d));
  }
  ScreenResult s;
  s.alpha = alpha;
  s.dimension = d;
  s.sampled = k;
  s.reports = reports.size();
  if (k == d) return s;  // every dimension in every report: nothing to count
  s.applicable = true;
  // 1. The count of each dimension.
  std::vector<uint64_t> count(d, 0);
  for (size_t i = 0; i < reports.size(); ++i) {
    absl::Span<const uint32_t> row = reports.row(i);
    bool ascending = true;
    for (size_t j = 1; j < row.size(); ++j) ascending &= row[j - 1] < row[j];
    if (row.size() != static_cast<size_t>(k) || !ascending ||
        (!row.empty() && row.back() >= static_cast<uint32_t>(d))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the report of node ", reports.nodes[i], " holds ", row.size(),
          " dimensions; the screen needs ", k,
          " distinct ones, ascending, below ", d));
    }
    for (uint32_t j : row) ++count[j];
  }
  // 2. Over-reported dimensions: Binomial(n, k/d) at alpha / d.
  s.count_threshold = BinomialUpperQuantile(
      s.reports, static_cast<double>(k) / d, alpha / d);
  std::vector<char> marked(d, 0);
  for (int j = 0; j < d; ++j) {
    if (count[j] > s.count_threshold) {
      marked[j] = 1;
      s.overreported.push_back(static_cast<uint32_t>(j));
    }
  }
  const int m = static_cast<int>(s.overreported.size());
  if (m == 0) return s;
  // 3. Reports on improbably many (or only) over-reported dimensions.
  int h = 1;
  while (h <= std::min(k, m) && HypergeometricTailAtLeast(d, m, k, h) > alpha) {
    ++h;
  }
  s.hit_threshold = std::min(k, h);
  for (size_t i = 0; i < reports.size(); ++i) {
    int hits = 0;
    for (uint32_t j : reports.row(i)) hits += marked[j];
    if (hits >= s.hit_threshold) s.flagged.push_back(reports.nodes[i]);
  }
  std::sort(s.flagged.begin(), s.flagged.end());
  return s;
}

bool ScreenApplies(const FeatureMechanism& mech) {
  switch (mech.kind()) {
    case MechanismKind::kHds:
    case MechanismKind::kMultiBit:
    case MechanismKind::kPiecewise:
    case MechanismKind::kLaplace:
      return mech.sampled() < mech.dimension();
    case MechanismKind::kSquareWave:
    case MechanismKind::kOneBit:
      return false;
  }
  return false;
}

absl::StatusOr<ScreenResult> ScreenReports(const ReportedDims& reports,
                                           const FeatureMechanism& mech,
                                           double alpha) {
  if (!ScreenApplies(mech)) {
    RETURN_IF_ERROR(ValidateScreenAlpha(alpha));
    ScreenResult s;
    s.alpha = alpha;
    s.dimension = mech.dimension();
    s.sampled = mech.sampled();
    s.reports = reports.size();
    return s;
  }
  return ScreenReports(reports, mech.dimension(), mech.sampled(), alpha);
}

SparseRows WithEmptyRows(const SparseRows& rows,
                         absl::Span<const uint32_t> nodes) {
  SparseRows out;
  out.cols = rows.cols;
  size_t next = 0;
  for (size_t v = 0; v < rows.rows; ++v) {
    if (next < nodes.size() && nodes[next] == v) {
      out.AppendRow({}, {});
      ++next;
    } else {
      out.AppendRow(rows.row_indices(v), rows.row_values(v));
    }
  }
  return out;
}

nlohmann::json ScreenToJson(const ScreenResult& s) {
  nlohmann::json j = {{"screen", s.applicable ? "applied" : "not applicable"},
                      {"alpha", s.alpha},
                      {"reports", s.reports}};
  if (s.applicable) {
    j["overreported_dims"] = s.overreported.size();
    j["overreported"] = s.overreported;
    j["count_threshold"] = s.count_threshold;
    j["hit_threshold"] = s.hit_threshold;
    j["flagged_nodes"] = s.flagged.size();
    j["flagged"] = s.flagged;
  }
  return j;
}

}  // namespace ldpgraph::pipeline
