// Report screening: a curator-side defence against data-poisoning agents
// under the feature mechanisms that sample dimensions (HDS, Multi-bit, and
// Piecewise or Laplace with k < d).
//
// The attack it answers: the maximal-gain attack of Cao, Jia and Gong ("Data
// Poisoning Attacks to Local Differential Privacy Protocols", USENIX
// Security 2021) adapted to graph LDP. A malicious node sends a well-formed
// report whose k sampled dimensions all lie in a small target set of R
// dimensions (those most indicative of a target class) with maximal values.
//
// The test: an honest agent draws its k dimensions uniformly without
// replacement, independently of its private data, so over n honest reports
// each dimension's count is exactly Binomial(n, k/d), a distribution the
// curator knows. The screen
//  1. counts how often each dimension is reported;
//  2. marks a dimension over-reported when its count exceeds the
//     Binomial(n, k/d) upper quantile at level alpha / d (Bonferroni over
//     the d dimensions: with honest reports only, no dimension is marked
//     with probability >= 1 - alpha). The tail is summed exactly from the
//     pmf in log space, plus a geometric bound on the terms left out (which
//     only makes the quantile larger, never smaller);
//  3. with m dimensions marked, an honest report's number of marked
//     dimensions is Hypergeometric(d, m, k). A report is flagged when that
//     number is at least h = min(k, h_alpha), h_alpha the smallest h >= 1
//     with P(H >= h) <= alpha: a report on improbably many marked dimensions,
//     or on marked dimensions only (for k = 1: its one dimension is marked;
//     a single index carries no more evidence than that).
// The curator then treats a flagged node as a silent one (an empty feature
// row) and, not trusting it, leaves it out of training and validation.
//
// What it does not catch, or costs:
//  - an attacker who spreads its reports uniformly over the d dimensions is
//    not detected (and gains little on any one dimension);
//  - a target set so large, or attackers so few, that no count passes the
//    alpha / d quantile goes unseen;
//  - label-only attacks (randomized response always reporting the target
//    class) are not detected: a label report is one value of the class
//    range, every value as possible as another;
//  - honest reports that happen to sample enough marked dimensions are
//    flagged too (collateral): about n k m / d of them when k = 1, far
//    fewer for larger k.
// Mechanisms without sampling (the square wave, one-bit, Laplace with
// k = d; Piecewise with k = d) report every dimension: there is nothing to
// count, and the screen is a no-op ("screen": "not applicable").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/dp/tails.h"
#include "common/linalg/matrix.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/names.h"
#include "server/pipeline/defences.h"

namespace ldpgraph::pipeline {

// The defences themselves (Defences, --defence, --screen-alpha and the
// screen's default level): server/pipeline/defences.h.

// The sampled dimensions of a set of reports, one row per report, with the
// node that sent it (rows in any order; a node at most once).
struct ReportedDims {
  std::vector<uint32_t> nodes;
  std::vector<uint64_t> offsets{0};
  std::vector<uint32_t> dims;

  // Adds the report of node, its dimensions strictly ascending.
  void Add(uint32_t node, absl::Span<const uint32_t> report_dims) {
    nodes.push_back(node);
    dims.insert(dims.end(), report_dims.begin(), report_dims.end());
    offsets.push_back(dims.size());
  }
  size_t size() const { return nodes.size(); }
  absl::Span<const uint32_t> row(size_t i) const {
    return absl::Span<const uint32_t>(dims.data() + offsets[i],
                                      offsets[i + 1] - offsets[i]);
  }
};

// What one screen found.
struct ScreenResult {
  // False for a mechanism without sampling: nothing is counted or flagged.
  bool applicable = false;
  double alpha = kDefaultScreenAlpha;
  int dimension = 0;  // d
  int sampled = 0;    // k
  size_t reports = 0;  // n
  // A dimension is over-reported when its count exceeds this.
  uint64_t count_threshold = 0;
  // The over-reported dimensions, ascending.
  std::vector<uint32_t> overreported;
  // A report is flagged when at least this many of its dimensions are
  // over-reported (0 when no dimension is).
  int hit_threshold = 0;
  // The flagged nodes, ascending.
  std::vector<uint32_t> flagged;
};

// The screen of reports from a mechanism that samples k of d dimensions
// (d >= 1, 1 <= k <= d; k = d means no sampling: not applicable) at level
// alpha. INVALID_ARGUMENT for bad parameters, or for a report that does not
// hold exactly k distinct ascending dimensions below d (naming its node).
absl::StatusOr<ScreenResult> ScreenReports(const ReportedDims& reports, int d,
                                           int k, double alpha);

// Whether mech's reports sample dimensions uniformly (k < d): HDS,
// Multi-bit, and Piecewise or Laplace with k < d.
bool ScreenApplies(const FeatureMechanism& mech);

// ScreenReports with mech's d and k; not applicable (and the reports
// unread) when !ScreenApplies(mech).
absl::StatusOr<ScreenResult> ScreenReports(const ReportedDims& reports,
                                           const FeatureMechanism& mech,
                                           double alpha);

// rows with the rows of the given nodes (ascending, < rows.rows) emptied,
// as a silent node's row is.
SparseRows WithEmptyRows(const SparseRows& rows,
                         absl::Span<const uint32_t> nodes);

// {"screen": "applied" | "not applicable", "alpha", "reports",
//  "overreported_dims" (count), "overreported" (the dims), "count_threshold",
//  "hit_threshold", "flagged_nodes" (count), "flagged" (the node ids)}; the
// last six only when applied.
nlohmann::json ScreenToJson(const ScreenResult& s);

// The tails the screen is built on (common/dp/tails.h).
using ::ldpgraph::BinomialUpperQuantile;
using ::ldpgraph::HypergeometricTailAtLeast;

}  // namespace ldpgraph::pipeline
