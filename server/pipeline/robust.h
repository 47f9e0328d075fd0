// The robust defence (--defence robust): trimmed-label retraining, a
// curator-side defence against poisoned labels and features that does not
// rely on the reports' sampled dimensions being uniform.
//
// The attacks it answers: an attacker whose nodes report the target class t
// as their label (maximal-gain, adaptive, labels-only; input through
// randomized response), or whose feature reports drag its own row towards
// t. Neither is visible in the reports alone: a label report is one value
// of the class range, and the adaptive and input attackers' feature reports
// keep the screen's counts (report_screen.h) where honest ones put them.
//
// What it does: the pipeline trains once as configured, and reads the first
// model's class posteriors for every node. Its predictions over all n nodes
// (test nodes included, whose labels no attacker reports) give each class's
// share pi_c; a label report of class c then has probability
//    q_c = keep pi_c + other (1 - pi_c)
// under randomized response (keep, other: the mechanism's probabilities;
// q_c = pi_c for the curator's own labels). A class whose reports among the
// N training and validation nodes exceed BinomialUpperQuantile(N, q_c,
// alpha / classes) is over-reported: more nodes claim it than the graph
// and the features support. The nodes that report an over-reported class
// the first model does not predict for them are dropped from the training
// and validation sets (so that, under LPGNN, their reports no longer vote
// in their neighbours' label propagation either), and the model is trained
// again from the same seed on what is left. With no class over-reported
// nothing is dropped and the first model stands: an honest run costs one
// pass over the posteriors. Test nodes are never touched.
//
// The rule is a class-targeted form of trimmed-loss training (Shen and
// Sanghavi, "Learning with Bad Training Data via Iterative Trimmed Loss
// Minimization", ICML 2019): an attacker's label t sits on a node whose
// features and neighbourhood speak for another class, so the first model
// contradicts it. Dropping every contradicted label instead (any class)
// was tried and measured worse: the attacked first model over-predicts t,
// and dropping the honest labels it contradicts confirms its own bias.
//
// Why not a trimmed mean or a median over neighbours in the propagation
// step: a sampled mechanism's estimate of a node is k of d dimensions,
// scaled by d/k; the coordinate-wise median over a neighbourhood is then 0
// almost everywhere, and a trimmed mean drops exactly the few non-zero
// entries that carry the honest signal. Under Multi-bit at small m a
// crafted row has the same norm as an honest one, so clipping a neighbour's
// influence does not separate them either.
//
// Label reports only: a run on the curator's own labels (PrivGE, LPGNN
// without a label budget) has no label an attacker reports, and the
// defence is a no-op ("robust": "not applicable"); a feature-only attacker
// is the screen's.
//
// What it costs: under attack, a second training, and the honest reports of
// the over-reported class the first model gets wrong are dropped too. What
// it misses: attackers the first model already predicts as t (its bias
// grows with their share), and an attacker whose excess of t reports stays
// under the binomial threshold. Measured with and without attackers in
// tests/bench/poisoning_bench.py.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/linalg/matrix.h"

namespace ldpgraph::pipeline {

// The level of the over-reported class test (fixed: the deployment's
// evaluate stage and ldpgraph eval must agree on it).
inline constexpr double kRobustAlpha = 1e-3;

// The nodes among `nodes` whose label the posteriors contradict: label[v]
// (labels indexed by node id; a node with label < 0 is never dropped) is
// not the arg-max of posteriors row v (ties to the lower class, as the
// classifier predicts). Ascending. INVALID_ARGUMENT for a node beyond the
// posteriors' rows or the labels, or a label >= the posteriors' columns.
absl::StatusOr<std::vector<uint32_t>> ContradictedNodes(
    const DenseMatrix& posteriors, absl::Span<const uint32_t> nodes,
    absl::Span<const int32_t> labels);

// The classes whose reports among `nodes` (their labels, label >= 0) exceed
// what the posteriors' predictions over every row support (see the file
// comment): keep and other are randomized response's probabilities (1 and
// 0 for the curator's own labels), alpha in (0, 1) the level. Ascending.
// INVALID_ARGUMENT as ContradictedNodes, or for probabilities outside
// [0, 1].
absl::StatusOr<std::vector<int>> OverReportedClasses(
    const DenseMatrix& posteriors, absl::Span<const uint32_t> nodes,
    absl::Span<const int32_t> labels, double keep, double other,
    double alpha);

// What the robust defence did, for the run's JSON ("robust"): {"dropped"
// (count), "dropped_train", "dropped_validation", "dropped_nodes" (the
// ids), "first_validation" (the first model's validation accuracy),
// "overreported_classes"}; with
// `malicious` (a simulation's attacker nodes, one flag per node; empty when
// unknown) also "malicious" and "malicious_dropped".
nlohmann::json RobustToJson(const std::vector<uint32_t>& dropped,
                            size_t dropped_train, size_t dropped_validation,
                            double first_validation,
                            const std::vector<int>& overreported,
                            const std::vector<bool>& malicious);

}  // namespace ldpgraph::pipeline
