// Randomized response on a node's neighbour bit vector (Qin et al.,
// "Generating synthetic decentralized social graphs with local differential
// privacy", CCS 2017). Formulas: mechanisms.md.
//
// Each of the n - 1 bits of node v's adjacency row (every node but v) is
// flipped with probability q = 1 / (1 + e^eps): a true neighbour is reported
// with probability p = e^eps / (1 + e^eps), a non-neighbour with q. The
// report is the set of nodes whose reported bit is 1, ascending, produced in
// O(deg + output) time by skipping over non-neighbours with geometric gaps:
// the n bits are never materialised. eps-edge LDP for each bit of the row.
// On sparse graphs the output is dense (about q n nodes): an honest baseline.
//
// Estimator (curator): an unbiased estimate of the bit a_vu from the
// reported bit r is (r - q) / (p - q); of the degree,
// (|report| - q (n - 1)) / (p - q).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/random/random.h"

namespace ldpgraph {

class EdgeRandomizedResponse {
 public:
  // epsilon finite and > 0; nodes n >= 2.
  static absl::StatusOr<std::unique_ptr<EdgeRandomizedResponse>> Create(
      double epsilon, uint32_t nodes);

  double epsilon() const { return epsilon_; }
  uint32_t nodes() const { return nodes_; }
  double keep_probability() const { return p_; }
  double flip_probability() const { return q_; }

  // The reported neighbour set of node v given its true neighbours
  // (strictly ascending, in [0, n), not v). INVALID_ARGUMENT naming the
  // offending entry otherwise.
  absl::StatusOr<std::vector<uint32_t>> Perturb(
      uint32_t v, absl::Span<const uint32_t> neighbours,
      RandomSource& rng) const;

  // Checks a report of node v: strictly ascending, in [0, n), never v.
  absl::Status ValidateReport(uint32_t v,
                              absl::Span<const uint32_t> reported) const;

  // (r - q) / (p - q) for a reported bit r.
  double UnbiasedBit(bool reported) const;
  // Unbiased estimate of v's degree from the size of its report.
  double EstimateDegree(size_t reported_count) const;

 private:
  EdgeRandomizedResponse(double epsilon, uint32_t nodes);

  double epsilon_;
  uint32_t nodes_;
  double p_;
  double q_;
  double log1m_q_;  // log(1 - q), for geometric gaps
};

}  // namespace ldpgraph
