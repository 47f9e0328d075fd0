#include "server/pipeline/robust.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/dp/tails.h"

namespace ldpgraph::pipeline {

absl::StatusOr<std::vector<uint32_t>> ContradictedNodes(
    const DenseMatrix& posteriors, absl::Span<const uint32_t> nodes,
    absl::Span<const int32_t> labels) {
  std::vector<uint32_t> out;
  const size_t classes = posteriors.cols;
  for (uint32_t v : nodes) {
    if (v >= posteriors.rows || v >= labels.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "robust: node ", v, " is beyond the ", posteriors.rows,
          " posterior rows or the ", labels.size(), " labels"));
    }
    const int32_t y = labels[v];
    if (y < 0) continue;
    if (static_cast<size_t>(y) >= classes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "robust: node ", v, "'s label ", y, " is not one of ", classes,
          " classes"));
    }
    size_t best = 0;
    for (size_t k = 1; k < classes; ++k) {
      if (posteriors.at(v, k) > posteriors.at(v, best)) best = k;
    }
    if (best != static_cast<size_t>(y)) out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<std::vector<int>> OverReportedClasses(
    const DenseMatrix& posteriors, absl::Span<const uint32_t> nodes,
    absl::Span<const int32_t> labels, double keep, double other,
    double alpha) {
  if (!(keep >= 0 && keep <= 1 && other >= 0 && other <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "robust: probabilities must be in [0, 1], got keep ", keep,
        ", other ", other));
  }
  const size_t classes = posteriors.cols;
  if (classes == 0 || posteriors.rows == 0) return std::vector<int>();
  // Each class's share of the predictions over every row.
  std::vector<double> share(classes, 0.0);
  for (size_t v = 0; v < posteriors.rows; ++v) {
    size_t best = 0;
    for (size_t k = 1; k < classes; ++k) {
      if (posteriors.at(v, k) > posteriors.at(v, best)) best = k;
    }
    share[best] += 1.0 / posteriors.rows;
  }
  std::vector<uint64_t> reported(classes, 0);
  uint64_t total = 0;
  for (uint32_t v : nodes) {
    if (v >= labels.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "robust: node ", v, " is beyond the ", labels.size(), " labels"));
    }
    const int32_t y = labels[v];
    if (y < 0) continue;
    if (static_cast<size_t>(y) >= classes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "robust: node ", v, "'s label ", y, " is not one of ", classes,
          " classes"));
    }
    ++reported[y];
    ++total;
  }
  std::vector<int> out;
  for (size_t c = 0; c < classes; ++c) {
    const double q = std::clamp(keep * share[c] + other * (1 - share[c]), 0.0,
                                1.0);
    if (reported[c] > BinomialUpperQuantile(total, q, alpha / classes)) {
      out.push_back(static_cast<int>(c));
    }
  }
  return out;
}

nlohmann::json RobustToJson(const std::vector<uint32_t>& dropped,
                            size_t dropped_train, size_t dropped_validation,
                            double first_validation,
                            const std::vector<int>& overreported,
                            const std::vector<bool>& malicious) {
  nlohmann::json j = {{"dropped", dropped.size()},
                      {"overreported_classes", overreported},
                      {"dropped_train", dropped_train},
                      {"dropped_validation", dropped_validation},
                      {"first_validation", first_validation},
                      {"dropped_nodes", dropped}};
  if (!malicious.empty()) {
    size_t m = 0, caught = 0;
    for (bool b : malicious) m += b;
    for (uint32_t v : dropped) caught += v < malicious.size() && malicious[v];
    j["malicious"] = m;
    j["malicious_dropped"] = caught;
  }
  return j;
}

}  // namespace ldpgraph::pipeline
