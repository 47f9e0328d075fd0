// Internal to the node task (internal::RunNode): what its sources share.
// node_task.cc runs a run's steps; node_propagation.cc makes the
// classifier's input; node_training.cc trains, scores, retrains (robust
// defence) and smooths; node_selection.cc picks among candidates (LPGNN's
// tuning, PrivGE's propagation, the inputs). Not part of the library's
// interface: callers use pipeline.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/dataset/dataset.h"
#include "common/dataset/splits.h"
#include "common/graph/graph.h"
#include "common/linalg/matrix.h"
#include "server/pipeline/config.h"
#include "server/pipeline/feature_reports.h"
#include "server/pipeline/internal/stages.h"
#include "server/pipeline/pipeline.h"
#include "server/training/models.h"
#include "server/training/options.h"
#include "server/training/row_file.h"

namespace ldpgraph::pipeline::internal {

// What one node-task training needs besides its (K_x, K_y): the run's
// split, graph, collected features and label reports.
struct NodeRunInputs {
  const Dataset* d;
  const Graph* graph;
  const NodeSplit* split;
  const SparseRows* x;  // estimated features (PrivGE, LPGNN)
  const DenseMatrix* release;  // SE-PrivGEmb, DPNE: the embedding
  const LabelReports* labels;  // with a label budget
  // LPGNN: x is held against this fill (CollectFeatures): an absent entry
  // holds it. 0 for the others.
  float x_fill = 0;
};

// The classifier's input: the release, or the estimates propagated (LPGNN:
// feature_steps KProp steps; PrivGE: PPR), standardised when c says so.
struct NodeFeatures {
  Mat<float> features;
  double propagate_seconds = 0;
  // When set, features is empty: the estimates with their KProp and
  // standardisation deferred into the first layer (deferred_kprop.h).
  std::shared_ptr<const training::SparseInput<float>> deferred;
  // When set, features is empty: PrivGE's Z as compressed rows, with its
  // column standardisation for the MLP to fold in (mean and scale empty
  // without one). See PropagatePpr.
  std::shared_ptr<const SparseRows> rows;
  // When set, features is empty: PrivGE's Z as a file of rows, with its
  // column standardisation for the MLP to apply as it reads (mean and
  // scale empty without one). See PropagateToFile.
  std::shared_ptr<const training::RowFile> file;
  std::vector<double> mean, scale;
};

// --- Propagation (node_propagation.cc) ---

// The classifier's input for in, with feature_steps propagation steps
// (NodeFeatures). INTERNAL for PrivGE's propagation kAuto (a caller
// resolves it first: ChoosePropagation).
absl::StatusOr<NodeFeatures> PropagateNode(const NodeRunInputs& in,
                                           const PipelineConfig& c,
                                           int feature_steps);

// --- Training (node_training.cc) ---

// Trains on `features` (PropagateNode) with the targets of label_steps and
// scores the test set. tuning: only the training reports spread
// (DenoiseLabels) and LPGNN's rule runs with the published trainer's
// patience of 100 epochs.
absl::StatusOr<RunResult> TrainNodeOnce(const NodeRunInputs& in,
                                        const PipelineConfig& c,
                                        const NodeFeatures& propagated,
                                        int label_steps, bool tuning,
                                        uint64_t model_seed);

// The robust defence (robust.h) after a first training `first` (its
// node_outputs kept): the training and validation nodes whose label it
// contradicts are left out and the model trained again on `propagated`
// with c (which says whether to keep outputs). The figures go to
// RunResult::robust; the first model is kept when nothing is dropped or
// nothing would be left to train or select on (robust "retrained": false).
absl::StatusOr<RunResult> RobustRetrain(const NodeRunInputs& in,
                                        const PipelineConfig& c,
                                        const NodeFeatures& propagated,
                                        int label_steps, uint64_t model_seed,
                                        const Poisoning* poisoning,
                                        RunResult first);

// c.smooth on t's posteriors (SmoothPredictions) with the labels the run
// holds for split's training and validation nodes (the label reports under
// a label budget): t's test figures become the smoothed predictions'.
absl::Status Smooth(const Dataset& d, const Graph& graph,
                    const NodeSplit& split, const LabelReports* labels,
                    const PipelineConfig& c, RunResult* t);

// --- Selection (node_selection.cc) ---

// What LPGNN's tuning (c.tune_*) keeps: the steps, NFR's tau and the
// model's settings the run trains with (the configured ones without a
// tuning), and the candidates' figures.
struct StepTuning {
  int feature_steps = 0;
  int label_steps = 0;
  double nfr_tau = 0;
  training::NodeModelConfig model;
  // Whether the candidates vary the model's settings (c.tune_learning_rate,
  // c.tune_weight_decay, c.tune_dropout).
  bool tune_model = false;
  // One row per candidate; null when nothing was tuned.
  nlohmann::json candidates;
};

// LPGNN's tuning, when c asks for one: every candidate on this run's split
// and reports (in; x its estimates before NFR), scored by its selected
// epoch's validation accuracy (against the reports when the labels are
// noisy); the first best wins. Otherwise c's own settings, untuned.
absl::StatusOr<StepTuning> TuneSteps(const NodeRunInputs& in,
                                     const SparseRows& x,
                                     const PipelineConfig& c,
                                     uint64_t model_seed);

// PrivGE's propagation kAuto: both propagations (PPR only up to
// c.auto_ppr_max_nodes) on this run's split and reports, each trained with
// *chosen; the better validation wins (PPR, the paper's, on a tie).
// chosen->propagation becomes the winner's, *kept_features (with the robust
// defence) its features, *tuning the candidates' figures. The run's cost is
// both candidates'.
absl::StatusOr<RunResult> ChoosePropagation(
    const NodeRunInputs& in, const PipelineConfig& c, int feature_steps,
    int label_steps, uint64_t model_seed, PipelineConfig* chosen,
    std::optional<NodeFeatures>* kept_features, nlohmann::json* tuning);

// NodeInputs other than kReports: the candidates (kAuto: reports,
// positional, both; else the one asked) each aggregated and trained, the
// positional ones standardised after aggregation; the best validation wins
// (the first on a tie). The run's cost is every candidate's.
absl::StatusOr<RunResult> TrainOnInputs(const NodeRunInputs& in,
                                        const PipelineConfig& c,
                                        int feature_steps, int label_steps,
                                        uint64_t model_seed,
                                        uint64_t positional_seed,
                                        nlohmann::json* tuning);

}  // namespace ldpgraph::pipeline::internal
