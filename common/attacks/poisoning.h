// Data poisoning of an LDP collection: the maximal-gain attack (MGA) of
// Cao, Jia and Gong, "Data Poisoning Attacks to Local Differential Privacy
// Protocols" (USENIX Security 2021), adapted to graph learning. A
// SIMULATION of malicious agents, for measuring what an attacker gains; an
// honest agent never uses it.
//
// Threat model. An attacker controls a fraction of the nodes (their agents
// run its code) and wants the curator's classifier to predict a target
// class t. Its agents send well-formed reports: the mechanism's wire format,
// value domain and number of sampled dimensions, each spending the budget an
// honest answer spends. The curator cannot tell them from honest reports by
// format (FeatureMechanism::ValidateReport, the wire codec's checks) since
// LDP hides every honest input; only their statistics differ. The attacker
// knows the public configuration (mechanism, epsilon, k, range, classes) and
// the raw records (scaled features, labels) of the nodes it controls, pooled
// across them: one attacker, colluding agents. It does not see honest nodes'
// data, the curator's split or its model. Edge reports are out of scope:
// malicious nodes answer edge questions honestly with their true neighbours.
//
// The attack. Target items: the R feature dimensions most indicative of t in
// the attacker's own records (TargetDims). Each malicious report puts the
// mechanism's maximal output on sampled target dimensions, so that the
// curator's estimate of those dimensions is as large as one report can make
// it:
//  - HDS (and the 1-d square wave): the k reported dimensions drawn
//    uniformly without replacement from the R targets (R < k: all R targets
//    and k - R other dimensions, uniformly), each with the top point of the
//    square wave's output grid (<= 1 + b); the other dimensions, if any,
//    carry 0, the centre of the range.
//  - Multi-bit: the m dimensions chosen the same way, every bit +1 (the
//    rectifier's largest value); other dimensions, if any, a fair coin.
//  - Piecewise: the k dimensions chosen the same way, the top point of the
//    output grid (<= C); other dimensions 0.
//  - One-bit (dense): 1 on every target dimension; the other dimensions
//    perturbed honestly from the node's own values.
//  - Laplace: UNIMPLEMENTED. Its output domain is unbounded, so there is no
//    maximal report (any finite value passes the curator's checks).
//  - Label k-ary randomized response: always t, the output that maximises
//    t's estimated frequency.
// The attack's randomness (which target dimensions, coins) comes from the
// RandomSource the node would have perturbed with, so a seeded simulation
// replays it exactly.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/matrix.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/mechanisms/label_rr.h"
#include "common/random.h"

namespace ldpgraph::poisoning {

// The attack's public settings (a simulation's configuration).
struct AttackSettings {
  // The fraction of nodes the attacker controls, in [0, 1); 0 is no attack.
  double fraction = 0;
  // The target class t, >= 0 (and below the dataset's class count).
  int target_class = 0;
  // R, the number of target feature dimensions, >= 1 (capped at d).
  int target_dims = 10;

  // INVALID_ARGUMENT naming the setting and its rule.
  absl::Status Validate() const;
};

// The nodes the attacker controls among 0..n-1 (ascending): those drawn by
// SimulatedMalicious(seed, v, s.fraction) (common/seed_mix.h), minus those
// for which offline(v) holds (an offline node sends nothing; default none).
std::vector<uint32_t> MaliciousNodes(
    uint32_t n, uint64_t seed, double fraction,
    absl::FunctionRef<bool(uint32_t)> offline = [](uint32_t) { return false; });

// The R dimensions most indicative of class t in the attacker's records:
// score_j = mean of x_j over its nodes labelled t minus the mean over its
// other labelled nodes (a mean over no node is 0; unlabelled nodes, label
// < 0, count in neither); the R highest scores, ties to the lower index,
// returned ascending. R is capped at x.cols. x: the scaled feature rows of
// every node (rows indexed by node id); labels: one per row; nodes: the
// attacker's, each < x.rows. INVALID_ARGUMENT for mismatched sizes, a node
// out of range, t < 0 or R < 1.
absl::StatusOr<std::vector<uint32_t>> TargetDims(
    const SparseRows& x, absl::Span<const int32_t> labels,
    absl::Span<const uint32_t> nodes, int target_class, int target_dims);

// What the attacker's agents send in place of the mechanisms' answers.
// Immutable and thread-safe; randomness is supplied per call.
class Adversary {
 public:
  // target_class >= 0; target_dims non-empty, strictly ascending.
  // INVALID_ARGUMENT otherwise.
  static absl::StatusOr<std::unique_ptr<Adversary>> Create(
      int target_class, std::vector<uint32_t> target_dims);

  int target_class() const { return target_class_; }
  const std::vector<uint32_t>& target_dims() const { return target_dims_; }

  // The crafted feature report of a node whose true (scaled) vector is x,
  // valid under mech (see the header comment per mechanism). INVALID_ARGUMENT
  // for a wrong length, a NaN or a target dimension >= d; UNIMPLEMENTED for
  // Laplace.
  absl::StatusOr<SparseReport> CraftFeatureReport(
      const FeatureMechanism& mech, absl::Span<const double> x,
      RandomSource& rng) const;

  // The crafted label report: t. INVALID_ARGUMENT if t is not one of rr's
  // classes.
  absl::StatusOr<int> CraftLabel(const LabelRandomizedResponse& rr) const;

 private:
  Adversary(int target_class, std::vector<uint32_t> target_dims)
      : target_class_(target_class), target_dims_(std::move(target_dims)) {}

  // k of d dimensions, ascending: k of the targets below d uniformly without
  // replacement, or all of them and k - R others uniformly. in_target[i]
  // says whether the i-th returned dimension is a target.
  std::vector<uint32_t> ChooseDims(uint32_t d, uint32_t k, RandomSource& rng,
                                   std::vector<bool>* in_target) const;

  int target_class_;
  std::vector<uint32_t> target_dims_;
};

}  // namespace ldpgraph::poisoning
