// Data poisoning of an LDP collection, adapted to graph learning from Cao,
// Jia and Gong, "Data Poisoning Attacks to Local Differential Privacy
// Protocols" (USENIX Security 2021: input manipulation and the maximal-gain
// attack, MGA), with an attacker that knows the curator's screen, one that
// poisons labels alone, and one that poisons edge reports (He et al.,
// "Devil's Hand", 2025: fake nodes matched to targets; the edge reports are
// crafted in common/attacks/edge_poisoning.h). A SIMULATION of malicious
// agents, for measuring what an attacker gains; an honest agent never uses
// it.
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
// data, the curator's split or its model.
//
// The attackers (AttackKind, --attack):
//  maximal-gain  output manipulation: the crafted reports below, features
//                and labels (the label always t).
//  input         input manipulation: a fake record perturbed honestly by
//                the mechanism: features at the top of the public range on
//                the target dimensions and at the bottom elsewhere, label t
//                through randomized response. Its reports are distributed
//                exactly as an honest node's with that record would be, so
//                no test on the reports alone can tell them apart.
//  adaptive      maximal gain by an attacker that knows the screen
//                (server/pipeline/report_screen.h: its level alpha, n, d, k
//                are public) and keeps every target dimension's expected
//                count under the screen's threshold: AdaptiveTargetCount
//                widens the target set until the attacker's k-sampled
//                reports spread over it stay below the threshold, less
//                three standard deviations of the counts. The label is t.
//  labels-only   features perturbed honestly from the node's own record;
//                the label always t (no feature report gives it away).
//  fake-edges    features and label as input's (a record matched to class
//                t, perturbed honestly), and edge reports that claim edges
//                to victims and the largest noisy degree
//                (common/attacks/edge_poisoning.h).
// Edge reports of the other attackers are honest.
//
// The maximal-gain attack. Target items: the R feature dimensions most indicative of t in
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
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/attacks/attack_settings.h"
#include "common/linalg/matrix.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/mechanisms/label_rr.h"
#include "common/names.h"
#include "common/random/random.h"

namespace ldpgraph::poisoning {

// The attackers (AttackKind, kAttackNames), --attack's help and the
// attack's settings (AttackSettings): common/attacks/attack_settings.h.

// The nodes the attacker controls among 0..n-1 (ascending): those drawn by
// SimulatedMalicious(seed, v, s.fraction) (common/random/seed_mix.h), minus those
// for which offline(v) holds (an offline node sends nothing; default none).
std::vector<uint32_t> MaliciousNodes(
    uint32_t n, uint64_t seed, double fraction,
    absl::FunctionRef<bool(uint32_t)> offline = [](uint32_t) { return false; });

// Every dimension of x ranked by how indicative of class t it is in the
// attacker's records (the score of TargetDims, highest first, ties to the
// lower index). Errors as TargetDims.
absl::StatusOr<std::vector<uint32_t>> RankDims(
    const SparseRows& x, absl::Span<const int32_t> labels,
    absl::Span<const uint32_t> nodes, int target_class);

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

// The risk the adaptive attacker accepts that any of its targets is marked
// over-reported.
inline constexpr double kAdaptiveRisk = 0.05;

// The number of target dimensions the adaptive attacker uses: the smallest
// R' >= r (capped at d) such that its `malicious` reports, each on k of the
// R' targets, leave every target under the screen's count threshold
// T = BinomialUpperQuantile(n, k/d, alpha/d) but for a risk of kAdaptiveRisk
// over all R' targets: R' P(C > T) <= kAdaptiveRisk, a target's count C
// taken as Poisson with mean (n - malicious) k/d + malicious min(1, k/R')
// (a sum of binomials has a smaller variance: the bound is conservative);
// d when no R' < d meets it (the reports then spread over every dimension).
// n >= malicious, 1 <= k <= d, alpha in (0, 1); k == d: r (nothing is
// screened).
int AdaptiveTargetCount(uint64_t n, uint64_t malicious, int d, int k,
                        double alpha, int r);

// What the adaptive attacker knows of the screen and of itself: the
// number of nodes n (public), its own count, the screen's level alpha, and
// every dimension ranked (RankDims) to widen its targets from.
struct AdaptivePlan {
  uint64_t nodes = 0;
  uint64_t malicious = 0;
  double alpha = 1e-3;
  std::vector<uint32_t> ranking;
};

// What the attacker's agents send in place of the mechanisms' answers.
// Immutable and thread-safe; randomness is supplied per call.
class Adversary {
 public:
  // target_class >= 0; target_dims non-empty, strictly ascending; kAdaptive
  // needs a plan (nodes >= malicious, alpha in (0, 1), a ranking of
  // distinct dimensions that starts with the targets' set). INVALID_ARGUMENT
  // otherwise.
  static absl::StatusOr<std::unique_ptr<Adversary>> Create(
      int target_class, std::vector<uint32_t> target_dims,
      AttackKind kind = AttackKind::kMaximalGain,
      std::optional<AdaptivePlan> plan = std::nullopt);

  // The target dimensions the adaptive attacker uses against mech: the
  // first AdaptiveTargetCount(...) of the ranking below mech's d,
  // ascending; target_dims() for the other attackers.
  std::vector<uint32_t> TargetsFor(const FeatureMechanism& mech) const;

  AttackKind kind() const { return kind_; }
  int target_class() const { return target_class_; }
  const std::vector<uint32_t>& target_dims() const { return target_dims_; }

  // The feature report of an attacker's node whose true (scaled) vector is
  // x, valid under mech: crafted (maximal-gain, adaptive; see the header
  // comment per mechanism), the fake record's honest perturbation (input,
  // fake-edges) or x's (labels-only). INVALID_ARGUMENT for a wrong length, a
  // NaN or a target dimension >= d; UNIMPLEMENTED for Laplace under
  // maximal-gain and adaptive.
  absl::StatusOr<SparseReport> CraftFeatureReport(
      const FeatureMechanism& mech, absl::Span<const double> x,
      RandomSource& rng) const;

  // The fake record of input and fake-edges: the top of mech's range on the
  // target dimensions below d, the bottom elsewhere.
  std::vector<double> FakeRecord(const FeatureMechanism& mech) const;

  // The label report: t (maximal-gain, adaptive, labels-only), or t through
  // rr from rng (input, fake-edges). INVALID_ARGUMENT if t is not one of
  // rr's classes.
  absl::StatusOr<int> CraftLabel(const LabelRandomizedResponse& rr,
                                 RandomSource& rng) const;

 private:
  Adversary(int target_class, std::vector<uint32_t> target_dims,
            AttackKind kind, std::optional<AdaptivePlan> plan)
      : kind_(kind),
        target_class_(target_class),
        target_dims_(std::move(target_dims)),
        plan_(std::move(plan)) {}

  // k of d dimensions, ascending: k of the targets (ascending, below d)
  // uniformly without replacement, or all of them and k - R others
  // uniformly. in_target[i] says whether the i-th returned dimension is a
  // target.
  static std::vector<uint32_t> ChooseDims(
      const std::vector<uint32_t>& targets, uint32_t d, uint32_t k,
      RandomSource& rng, std::vector<bool>* in_target);

  AttackKind kind_;
  int target_class_;
  std::vector<uint32_t> target_dims_;
  std::optional<AdaptivePlan> plan_;
};

}  // namespace ldpgraph::poisoning
