// SE-PrivGEmb ("Structure-Preference Enabled Graph Embedding Generation
// under Differential Privacy"): skip-gram with negative sampling over
// (edge, negatives) subgraphs, trained by DP-SGD with per-subgraph gradient
// clipping, Gaussian noise on the rows a batch touched, and an RDP
// accountant that stops training before the target (epsilon, delta).
//
// Algorithm (the SE-PrivGEmb paper, Algorithms 1 and 2):
//  1. Subgraphs: every undirected edge {u, v} gives one example
//     (u, v, n_1..n_k): u the centre, v the positive context (orientation
//     drawn at random), n_i negatives drawn with probability proportional
//     to the proximity mass s(j) (server/embedding/proximity.h), redrawn
//     while n_i is u or a neighbour of u. Drawn once, before training.
//  2. Each step samples `batch_size` examples WITHOUT replacement from the
//     N = |E| examples (gamma = batch_size / N). For each example the loss
//     is -log sig(w_u . c_v) - sum_i log sig(-w_u . c_{n_i}); its gradient
//     touches row u of W (centre vectors) and rows v, n_1..n_k of C
//     (context vectors). Private training clips each example's whole
//     gradient (all those rows together) to L2 norm `clip`, sums the
//     clipped gradients, adds N(0, (noise_multiplier * clip)^2) to every
//     coordinate of every row the batch touched (NoisedRows::kTouched, the
//     paper's choice) or of every row (kAll), divides by batch_size and
//     takes a step of the chosen optimizer (Optimizer below: SGD, or Adam
//     as the published code uses).
//  3. Accounting: two datasets of examples that differ by replacing one
//     example change the clipped sum by at most 2 * clip, so a step is the
//     Gaussian mechanism with multiplier noise_multiplier / 2 relative to
//     that sensitivity, amplified by sampling without replacement
//     (common/dp/rdp_accountant.h). Training runs whole steps until
//     max_epochs (or max_steps) or until one more step would take the
//     guarantee past (target_epsilon, target_delta); the result reports the
//     guarantee of the steps actually taken. The optimizer only
//     post-processes the noised gradient (its state is a function of the
//     noised gradients released so far), so SGD and Adam are accounted
//     alike.
//
// The published code of SE-PrivGEmb clips the batch's mean gradient once, W's
// and C's parts separately (one replaced example then moves it by up to
// 2 sqrt 2 C, accounted as C); here each example's gradient is clipped to C
// over all its rows, so the sum moves by at most 2 C, as accounted above.
// What the guarantee covers (one edge's example, not a node; the negative
// distribution and the touched rows depend on the graph) is stated in
// server/embedding/README.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "common/dp/rdp_accountant.h"
#include "common/graph/graph.h"
#include "common/linalg/matrix.h"
#include "common/random/random.h"
#include "server/embedding/proximity.h"
#include "server/embedding/release_config.h"

namespace ldpgraph::embedding {

// The settings (SePrivGEmbConfig, NoisedRows, Optimizer and its names) and
// ValidateSePrivGEmbConfig: release_config.h.

struct SePrivGEmbResult {
  DenseMatrix centre;   // W, n x dim: the released node embedding
  DenseMatrix context;  // C, n x dim: released too (the paper releases both)
  int64_t steps = 0;
  double epochs = 0;    // steps / steps_per_epoch
  // The steps allowed before the budget: max_steps, or max_epochs epochs.
  int64_t step_cap = 0;
  bool stopped_by_budget = false;
  // Private training: the accountant after the steps taken and its
  // guarantee at target_delta (epsilon <= target_epsilon).
  std::optional<dp::RdpAccountant> accountant;
  std::optional<dp::DpGuarantee> guarantee;
  std::vector<double> epoch_loss;  // mean example loss of each epoch
  double seconds = 0;
  std::string noise_source;  // the RandomSource's name
};

// Progress: (steps done, steps planned).
using StepProgress = absl::FunctionRef<void(int64_t, int64_t)>;

// Trains on g (no isolated-node requirement; a graph with no edge is
// INVALID_ARGUMENT). noise draws the example subgraphs' negatives, the
// batches and the Gaussian noise (all of which the guarantee needs
// secret); init_seed seeds the public initialisation of W (uniform in
// +-0.5/dim) and C (zeros).
absl::StatusOr<SePrivGEmbResult> TrainSePrivGEmb(const Graph& g,
                                                 const SePrivGEmbConfig& c,
                                                 RandomSource& noise,
                                                 uint64_t init_seed);
absl::StatusOr<SePrivGEmbResult> TrainSePrivGEmb(const Graph& g,
                                                 const SePrivGEmbConfig& c,
                                                 RandomSource& noise,
                                                 uint64_t init_seed,
                                                 StepProgress progress);

}  // namespace ldpgraph::embedding
