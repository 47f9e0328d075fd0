// DPNE ("DPNE: Differentially Private Network Embedding", Xu, Yuan, Wu and
// Phan, 2018): DeepWalk as matrix factorisation, M ~ W H^T with
// M = log((P + P^2) / 2) on its non-zero entries, made differentially
// private by objective perturbation on W.
//
//  1. M is built sparse (server/embedding/proximity.h); Omega is the set of
//     its non-zero entries (the log of a zero entry is not defined).
//  2. H (the context matrix, kept private) and a first W are learnt
//     without noise by minimising
//       sum_{(i,j) in Omega} (m_ij - w_i . h_j)^2 + lambda ||W||^2 + mu ||H||^2
//     with alternating least squares (each row's ridge problem solved
//     exactly), `sweeps` times. H's rows are then scaled so that the
//     largest has norm 1 (the proof's ||h_j|| <= 1).
//  3. With H fixed, each w_i minimises the perturbed objective
//       sum_{j in Omega_i} (m_ij - w_i . h_j)^2 + lambda ||w_i||^2 + w_i . eta_i
//     in closed form, eta_i drawn independently per node with density
//     proportional to exp(-epsilon ||eta|| / (2 Delta)) (norm
//     Gamma(dim, 2 Delta / epsilon), direction uniform;
//     common/dp/continuous_noise.h). Delta is the paper's sqrt(2) unless
//     the caller sets another. W is released; H is not.
//
// The paper's implementation perturbs with |sum_i w_i . eta_i|; this uses
// the linear term its Theorem 1 proves. What Theorem 1's guarantee covers,
// and where its proof does not hold (log of M, the sensitivity bound, H
// learnt from the same graph), is in server/embedding/README.md.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/graph/graph.h"
#include "common/linalg/matrix.h"
#include "common/random/random.h"
#include "server/embedding/release_config.h"

namespace ldpgraph::embedding {

// The settings (DpneConfig) and ValidateDpneConfig: release_config.h.

struct DpneResult {
  DenseMatrix embedding;  // W, n x dim: the release
  double epsilon = 0;     // 0 when not private
  size_t omega = 0;       // |Omega|, the non-zeros of M
  size_t matrix_bytes = 0;  // memory of the sparse M
  double objective = 0;     // the unperturbed objective at the released W
  double seconds = 0;
  std::string noise_source;  // noise.name(), or "none" when not private
};

// INVALID_ARGUMENT for a graph with no edge or a bad config. noise draws
// eta (the privacy noise); init_seed seeds the public initialisation of
// the factorisation (H does not depend on noise, so the same graph and
// init_seed give the same H with and without private_release).
//
// Draw order, for replaying a seeded run: when private_release, noise gives
// exactly eta_0, eta_1, ..., eta_{n-1} in node order, each one call of
// dp::ObjectivePerturbationNoise(dim, epsilon / (2 * sensitivity), noise),
// and nothing else; when not private, noise is not read.
absl::StatusOr<DpneResult> TrainDpne(const Graph& g, const DpneConfig& c,
                                     RandomSource& noise, uint64_t init_seed);

}  // namespace ldpgraph::embedding
