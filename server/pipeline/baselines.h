// The baselines a node-task result stands beside: what the curator learns
// without the private features, computed the same way as the method, so
// that a result can say what its budget bought.
//
//  kFeatureFree ("feature-free"): no private data at all. Every node gets
//    i.i.d. N(0, 1) features of the dataset's width, drawn from a public
//    seed; the method then runs on them as on raw features (mechanism
//    none), with the same split, model, training and tuning, standardised
//    after propagation. LPGNN and UPGNET aggregate them by HOA (K the run's
//    feature_steps under HOA, else kFeatureFreeSteps): K KProp steps alone
//    wash random features out to each component's constant, where HOA
//    keeps the positional signal of every scale (the independent
//    re-evaluation of LDP graph learning defines it so: random features,
//    HOA, the same GNN).
//  kGraphLabels ("graph-labels"): label propagation (Zhou et al., "Learning
//    with Local and Global Consistency", NIPS 2003) from the training
//    labels the run would hold (its label reports, under a label budget)
//    over D^-1/2 A D^-1/2, no features: F <- alpha S F + (1 - alpha) Y for
//    kLabelPropagationSteps steps, alpha chosen per run from
//    kLabelPropagationAlphas by validation accuracy (against the
//    validation labels the run holds).
//  kRaw ("raw"): the method on the raw features (mechanism none), the
//    labels as the run holds them: the features' privacy cost alone. LPGNN
//    takes its settings table's row for raw features (the authors'
//    non-private settings), as `ldpgraph eval --mechanism none` does.
//
// Attacks and defences are left out of every baseline (they act on
// reports). A central-DP release method (SE-PrivGEmb, DPNE) has no
// features: kFeatureFree does not apply to it.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/dataset/dataset.h"
#include "common/linalg/matrix.h"
#include "common/names.h"
#include "server/pipeline/config.h"
#include "server/pipeline/pipeline.h"

namespace ldpgraph::pipeline {

// The baselines and their names (Baseline, kBaselineNames): config.h.

// "feature_free", "graph_labels", "raw".
absl::string_view BaselineKey(Baseline b);

// The baselines' models stop after this many epochs without a better
// validation score (the method may train longer, LPGNN's published rule
// every epoch): the two trained baselines together then cost about 0.7 of
// the method's 500 epochs. Measured on cora, UPGNET at eps 1, 10 runs
// paired (docs/papers.md, "UPGNET and the graph alone"): against a
// patience of 100, feature-free +0.12 +- 0.09 and raw +0.12 +- 0.18
// points (standard errors), for 69% of the time. Under a label budget the
// published rule keeps every epoch, as the method's.
inline constexpr int kBaselinePatience = 50;

// HOA's K for the feature-free baseline of a method that does not
// aggregate by HOA itself (UPGNET's default).
inline constexpr int kFeatureFreeSteps = 32;
inline constexpr int kLabelPropagationSteps = 100;
inline constexpr double kLabelPropagationAlphas[] = {0.5, 0.8, 0.9, 0.99};

// Whether b applies beside c (node task; kFeatureFree not for a release).
bool BaselineApplies(const PipelineConfig& c, Baseline b);

// The configuration baseline b runs beside a run of c (kFeatureFree,
// kRaw; kGraphLabels has no model, kNoGraph is c itself). INVALID_ARGUMENT
// when b does not apply.
absl::StatusOr<PipelineConfig> BaselineConfig(const PipelineConfig& c,
                                              Baseline b);

// n x d i.i.d. N(0, 1) entries, every one stored, from a public generator
// seeded by seed: not private data, and not private noise.
SparseRows FeatureFreeFeatures(size_t n, size_t d, uint64_t seed);

// Run `run` of baseline b beside c on d, with c's split of (seed, run),
// over graph (null: d.graph; else the graph the run learned on, a private
// one, with d.graph's node count; kNoGraph: a graph of no edge). RunResult::metric is its test accuracy;
// kGraphLabels fills metric, micro_f1, macro_f1, confusion, train_seconds
// and tuning (each alpha's validation accuracy, and the one kept).
absl::StatusOr<RunResult> RunBaseline(const Dataset& d,
                                      const PipelineConfig& c, Baseline b,
                                      uint64_t seed, int run,
                                      const Graph* graph = nullptr);

// Baseline b beside a deployed curator's evaluation (RunPipelineOnCollected
// of c on public_data and collected, run 0 of seed), from what that
// curator holds: kFeatureFree trains on random features in place of the
// collected estimates, with the same label reports and untrusted nodes;
// kGraphLabels propagates the labels the run trains on (the label reports
// when collected, else public_data's) with the untrusted nodes and the
// nodes without a label report left out of training and validation;
// kNoGraph runs c on the same collected reports and labels over a graph of
// no edge (what the graph adds; beside a graph released under edge LDP,
// whether it adds at all). INVALID_ARGUMENT for kRaw (a deployed curator holds no raw features) and
// where b does not apply.
absl::StatusOr<RunResult> RunCollectedBaseline(const Dataset& public_data,
                                               const PipelineConfig& c,
                                               Baseline b,
                                               const Collected& collected,
                                               uint64_t seed);

// Label propagation on a split: targets[i] the label of train[i] (-1: none,
// left out), the validation nodes scored against validation_targets. What
// RunBaseline's kGraphLabels runs; for callers that hold the labels
// themselves (the curator's evaluate stage).
struct LabelPropagationResult {
  std::vector<int32_t> predictions;  // every node's class
  double alpha = 0;                  // the one kept
  std::vector<double> validation;    // per kLabelPropagationAlphas
  // SmoothPredictions' mixtures: the weight of the model's posteriors kept
  // (0: none kept), and each kSmoothMixWeights' validation accuracy.
  double mix = 0;
  std::vector<double> mix_validation;
};

// SmoothPredictions' other candidates: the model's posteriors weighted w
// and label propagation's row-normalised scores (alpha 0.9) 1 - w.
inline constexpr double kSmoothMixWeights[] = {0.25, 0.5, 0.75};
// C&S's smoothing step (Huang et al., "Combining Label Propagation and
// Simple Models Out-performs Graph Neural Networks", ICLR 2021) on a
// model's class posteriors (rows = nodes): Z0 the posteriors with each
// training node's row set to its label's one-hot, then
// Z <- alpha S Z + (1 - alpha) Z0 for kLabelPropagationSteps steps, alpha
// chosen from 0 (the model's own predictions) and kLabelPropagationAlphas
// by validation accuracy (the first best on a tie), or a mixture of the
// posteriors and label propagation's scores (kSmoothMixWeights) when one
// validates better still. The labels it spreads
// are the ones the curator trains on: post-processing, no privacy cost.
// validation in the result has one entry per candidate, 0 first.
absl::StatusOr<LabelPropagationResult> SmoothPredictions(
    const Graph& graph, const DenseMatrix& posteriors,
    const std::vector<uint32_t>& train,
    const std::vector<int32_t>& train_targets,
    const std::vector<uint32_t>& validation,
    const std::vector<int32_t>& validation_targets, int threads);

absl::StatusOr<LabelPropagationResult> PropagateLabels(
    const Graph& graph, int classes, const std::vector<uint32_t>& train,
    const std::vector<int32_t>& train_targets,
    const std::vector<uint32_t>& validation,
    const std::vector<int32_t>& validation_targets, int threads);

}  // namespace ldpgraph::pipeline
