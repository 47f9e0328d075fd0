// The settings of a structure-embedding release, apart from the training
// that runs them: each method's settings (SE-PrivGEmb's, DPNE's) with its
// validator and its names (proximity, optimizer), the release methods and
// their names, and ReleaseConfig with ValidateReleaseConfig. Their library,
// ldpgraph::release_config, is what a caller links to name, check or print
// a release's settings without training one (the pipeline's configuration,
// ldpctl); ldpgraph::embedding links it publicly, and proximity.h,
// se_privgemb.h, dpne.h and release.h include this header.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/names.h"
#include "common/wire/names.h"
#include "ldpgraph/v1/pipeline.pb.h"

namespace ldpgraph::embedding {

// What SE-PrivGEmb draws its negatives by: a node's proximity mass s(j)
// (ProximityMass, proximity.h, where P and M are defined).
enum class Proximity {
  kDegree,    // s(j) = d_j
  kDeepWalk,  // s(j) = sum_i M(i, j), M = (P + P^2) / 2
  kUniform,   // s(j) = 1: independent of the graph
};

// The names "degree", "deepwalk" and "uniform" (--proximity); Parse fails
// with INVALID_ARGUMENT "proximity must be one of degree, deepwalk,
// uniform, got '<name>'".
inline constexpr auto kProximityNames = MakeNameTable<Proximity>(
    "proximity", {{Proximity::kDegree, "degree"},
                  {Proximity::kDeepWalk, "deepwalk"},
                  {Proximity::kUniform, "uniform"}});
inline absl::StatusOr<Proximity> ParseProximity(absl::string_view name) {
  return kProximityNames.Parse(name);
}
inline absl::string_view ProximityName(Proximity p) {
  return kProximityNames.Name(p);
}

// SE-PrivGEmb's settings (se_privgemb.h: the algorithm they drive).
enum class NoisedRows { kTouched, kAll };

// How a step moves the rows by the noised mean gradient
// g = (sum of clipped gradients + noise) / batch_size:
//  - kSgd: row -= learning_rate * g, only the rows the batch touched (every
//    row under NoisedRows::kAll);
//  - kAdam: Adam (Kingma and Ba, ICLR'15, Algorithm 1; beta1 0.9, beta2
//    0.999, epsilon 1e-8, bias-corrected as PyTorch's torch.optim.Adam)
//    on the whole of W and C, a row the batch did not touch having
//    gradient zero that step: its moments decay and it keeps moving on
//    them, as under the published code's TensorFlow AdamOptimizer on dense
//    gradients. Computed without touching every row every step
//    (internal::RowSparseAdam, se_privgemb_step.h).
enum class Optimizer { kSgd, kAdam };

// The names "sgd" and "adam" (--release-optimizer); Parse fails with
// INVALID_ARGUMENT "optimizer must be one of sgd, adam, got '<name>'".
inline constexpr auto kOptimizerNames = MakeNameTable<Optimizer>(
    "optimizer", {{Optimizer::kSgd, "sgd"}, {Optimizer::kAdam, "adam"}});
inline absl::StatusOr<Optimizer> ParseOptimizer(absl::string_view name) {
  return kOptimizerNames.Parse(name);
}
inline absl::string_view OptimizerName(Optimizer o) {
  return kOptimizerNames.Name(o);
}

struct SePrivGEmbConfig {
  int dim = 128;
  int negatives = 5;            // k
  int batch_size = 16;          // examples per step
  Optimizer optimizer = Optimizer::kSgd;
  // The optimizer's rate. SGD moves a row by rate * (its summed clipped
  // gradients + noise) / batch_size. With C starting at zero, the number of
  // steps is what gets SGD off the ground: batch 16 and rate 0.5 learn on a
  // generated graph (node accuracy 0.82, link AUC 0.76 without noise) where
  // batch 128 and rate 2 stay at chance in 50 epochs. Adam's step does not
  // scale with the gradient (the published code: Adam, rate 0.1).
  double learning_rate = 0.5;
  int max_epochs = 50;          // an epoch is ceil(N / batch_size) steps
  // Set: at most this many steps, whatever max_epochs says (the published
  // code's "epochs" are single batches: its 500 are 500 steps).
  std::optional<int64_t> max_steps;
  Proximity proximity = Proximity::kDeepWalk;
  // false: plain skip-gram, no clipping and no noise (the non-private
  // baseline); the fields below are then ignored.
  bool private_training = true;
  double clip = 1.0;            // C
  double noise_multiplier = 5.0;  // sigma: noise std is sigma * C
  NoisedRows noised_rows = NoisedRows::kTouched;
  double target_epsilon = 1.0;
  double target_delta = 1e-5;
};

// INVALID_ARGUMENT naming the bad field (max_steps, when set, must be
// >= 1).
absl::Status ValidateSePrivGEmbConfig(const SePrivGEmbConfig& c);

// DPNE's settings (dpne.h: the algorithm they drive).
struct DpneConfig {
  int dim = 100;          // k (the paper's tables use 100)
  // Weight of ||W||^2. The paper uses 0.001; with the exact minimiser of
  // step 3, lambda is what bounds the part of eta that a node's few
  // entries of M do not constrain (it is divided by 2 lambda), so ldpgraph
  // defaults to 10 (measured on cora, server/embedding/README.md "DPNE"; the
  // paper's value: --lambda 0.001).
  double lambda = 10.0;
  double mu = 0.001;      // weight of ||H||^2
  int sweeps = 10;        // ALS sweeps for step 2
  // false: the non-private factorisation (step 3 without eta).
  bool private_release = true;
  double epsilon = 1.0;
  double sensitivity = 1.4142135623730951;  // Delta
};

// INVALID_ARGUMENT naming the bad field.
absl::Status ValidateDpneConfig(const DpneConfig& c);

// The release (release.h: ReleaseEmbedding trains it).

// The central-DP release methods: two of the pipeline's methods (the admin
// API's PipelineMethod, proto/ldpgraph/v1/pipeline.proto), numbered as
// there, so that each converts to the other without a table of its own.
enum class ReleaseMethod {
  kSePrivGemb = v1::PIPELINE_METHOD_SE_PRIVGEMB,
  kDpne = v1::PIPELINE_METHOD_DPNE,
};

// The pipeline method of a release method.
constexpr v1::PipelineMethod ToPipelineMethod(ReleaseMethod m) {
  return static_cast<v1::PipelineMethod>(m);
}
// The release method of a pipeline method; nullopt for a method that is
// not a release (privge, lpgnn, UNSPECIFIED, a number the proto lacks).
constexpr std::optional<ReleaseMethod> ReleaseMethodOf(v1::PipelineMethod m) {
  switch (m) {
    case v1::PIPELINE_METHOD_SE_PRIVGEMB:
      return ReleaseMethod::kSePrivGemb;
    case v1::PIPELINE_METHOD_DPNE:
      return ReleaseMethod::kDpne;
    default:
      return std::nullopt;
  }
}

// The names "se-privgemb" and "dpne": the pipeline methods' own
// (wire::kPipelineMethodNames, the one table of the methods' names). Parse
// fails with INVALID_ARGUMENT "release method must be one of se-privgemb,
// dpne, got '<name>'".
inline constexpr auto kReleaseMethodNames = MakeNameTable<ReleaseMethod>(
    "release method",
    {{ReleaseMethod::kSePrivGemb,
      wire::kPipelineMethodNames.Name(
          ToPipelineMethod(ReleaseMethod::kSePrivGemb))},
     {ReleaseMethod::kDpne,
      wire::kPipelineMethodNames.Name(
          ToPipelineMethod(ReleaseMethod::kDpne))}});
inline absl::StatusOr<ReleaseMethod> ParseReleaseMethod(absl::string_view name) {
  return kReleaseMethodNames.Parse(name);
}
inline absl::string_view ReleaseMethodName(ReleaseMethod m) {
  return kReleaseMethodNames.Name(m);
}

struct ReleaseConfig {
  ReleaseMethod method = ReleaseMethod::kSePrivGemb;
  // false: the non-private version (no clipping, no noise), for baselines;
  // epsilon and delta are then ignored.
  bool private_release = true;
  double epsilon = 1.0;
  // SE-PrivGEmb's delta (DPNE is pure epsilon-DP by its paper's analysis).
  double delta = 1e-5;
  // Method settings; their own budget fields are overwritten by epsilon,
  // delta and private_release above.
  SePrivGEmbConfig se_privgemb;
  DpneConfig dpne;
};

// INVALID_ARGUMENT naming the bad setting.
absl::Status ValidateReleaseConfig(const ReleaseConfig& c);

// The method's own settings of c, their budget fields set from c's
// private_release, epsilon and delta: SE-PrivGEmb's private_training,
// target_epsilon and target_delta; DPNE's private_release and epsilon.
// What ValidateReleaseConfig checks and ReleaseEmbedding trains with.
SePrivGEmbConfig SePrivGEmbConfigOf(const ReleaseConfig& c);
DpneConfig DpneConfigOf(const ReleaseConfig& c);

}  // namespace ldpgraph::embedding
