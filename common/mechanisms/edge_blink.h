// Blink's local randomizer (Zhu, Li, Hu, Chen and Xu, "Blink: Link Local
// Differential Privacy in Graph Neural Networks via Bayesian Estimation",
// CCS 2023): what one node reports. The curator's side (the beta-model
// prior, the posteriors and the estimated graph) is in common/edges/blink.h;
// the wire codec (common/wire/codec.h) checks specs and reports with
// BlinkClient, and agents report through it, as MECHANISM_KIND_EDGE_BLINK.
//
// Budget (node v, total eps, split delta in (0, 1)):
//   eps_d = delta * eps        the degree
//   eps_a = (1 - delta) * eps  the adjacency bits
// delta = 0 (no degree reported, a flat prior) is not supported: the prior
// is the whole point, and a degree report at delta -> 0 is pure noise.
//
// Client (BlinkClient): the n - 1 bits of v's row through randomized
// response at eps_a (EdgeRandomizedResponse: each bit flipped with
// probability p = 1 / (1 + e^eps_a)), reported as the ascending list of
// nodes whose bit reads 1; and deg(v) + Laplace noise of scale 1 / eps_d,
// drawn as in LaplaceMechanism (a discrete Laplace on a power-of-two grid of
// granularity g <= 1, so the integer degree lies on the grid and the release
// is exactly eps_d-DP for sensitivity 1). Adding or removing one edge of v
// changes one bit and the degree by 1: eps-edge LDP by sequential
// composition.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/mechanisms/edge_rr.h"
#include "common/random/random.h"

namespace ldpgraph {

// The privacy parameters, public configuration.
struct BlinkParams {
  double epsilon = 1.0;  // total eps per node, finite and > 0
  double delta = 0.1;    // the degree's share of eps, in (0, 1)

  // INVALID_ARGUMENT naming the parameter and the rule.
  absl::Status Validate() const;
  double degree_epsilon() const { return delta * epsilon; }
  double adjacency_epsilon() const { return (1.0 - delta) * epsilon; }
  // The grid of the noisy degree, as LaplaceMechanism's: the power of two
  // at least (1 / eps_d) 2^-30, at most 1 so that every integer degree is
  // on it. Valid params only (Validate).
  double degree_granularity() const;
};

// What node v sends the curator.
struct BlinkReport {
  std::vector<uint32_t> neighbours;  // nodes whose reported bit is 1, ascending
  double noisy_degree = 0;           // deg(v) + Laplace(1 / eps_d)
};

// One node's side. Immutable after Create; thread-compatible (each call
// takes the caller's RandomSource).
class BlinkClient {
 public:
  // INVALID_ARGUMENT for invalid params or nodes < 3.
  static absl::StatusOr<std::unique_ptr<BlinkClient>> Create(
      const BlinkParams& params, uint32_t nodes);

  // v's report given its true neighbours (strictly ascending, in [0, n),
  // not v; INVALID_ARGUMENT naming the entry otherwise). All noise from rng.
  absl::StatusOr<BlinkReport> Report(uint32_t v,
                                     absl::Span<const uint32_t> neighbours,
                                     RandomSource& rng) const;

  const BlinkParams& params() const { return params_; }
  // The grid of the noisy degree: a power of two <= 1.
  double degree_granularity() const { return granularity_; }
  // p = 1 / (1 + e^eps_a), the flip probability of each bit.
  double flip_probability() const { return rr_->flip_probability(); }

 private:
  BlinkClient(const BlinkParams& params,
              std::unique_ptr<EdgeRandomizedResponse> rr);

  BlinkParams params_;
  std::unique_ptr<EdgeRandomizedResponse> rr_;
  double granularity_;
};

}  // namespace ldpgraph
