#include "server/pipeline/report_screen.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ldpgraph::pipeline {

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
