// The node task of a run (internal::RunNode) as a sequence of steps: the
// split, the poisoning, the collected features (or the release) and label
// reports, LPGNN's tuning and NFR, the training (with PrivGE's choice of
// propagation or LPGNN's choice of inputs), the robust defence's
// retraining, the smoothing, and the result's figures. The propagation,
// training and choices the steps run are node_propagation.cc's,
// node_training.cc's and node_selection.cc's.
#include <algorithm>
#include <iterator>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/dataset/splits.h"
#include "common/status_macros.h"
#include "server/pipeline/internal/deferred_kprop.h"
#include "server/pipeline/internal/node_task.h"
#include "server/pipeline/nfr.h"

namespace ldpgraph::pipeline::internal {
namespace {

// What one run of the node task builds up, step by step. `in` points at
// the split, the release or estimates and the label reports held here: a
// NodeRun is neither copied nor moved.
struct NodeRun {
  NodeRun() = default;
  NodeRun(const NodeRun&) = delete;
  NodeRun& operator=(const NodeRun&) = delete;

  // The collection's figures (perturb_seconds, noise_source, screen; a
  // release's propagate_seconds and release), for the run's result.
  RunResult collection;
  NodeSplit split;
  std::unique_ptr<Poisoning> poisoning;
  DenseMatrix release;
  SparseRows x;
  LabelReports labels;
  NodeRunInputs in{};
};

// Leaves the nodes v with leave(v) out of split's training and validation
// nodes (the test nodes stay: they are scored against the true labels).
template <typename Leave>
void LeaveOutOfTraining(NodeSplit* split, Leave leave) {
  for (auto* list : {&split->train, &split->validation}) {
    std::erase_if(*list, leave);
  }
}

// With collected label reports, only the nodes whose report the curator
// holds can train or select: the others leave split's training and
// validation nodes. Returns collected then; null without label reports.
absl::StatusOr<const Collected*> KeepReportedNodes(const Dataset& d,
                                                   const Collected* collected,
                                                   NodeSplit* split) {
  if (collected == nullptr || !collected->label_reports) {
    return static_cast<const Collected*>(nullptr);
  }
  const auto& reports = *collected->label_reports;
  if (reports.size() != d.graph.num_nodes()) {
    return absl::InvalidArgumentError("collected label reports: wrong size");
  }
  LeaveOutOfTraining(split, [&](NodeId v) { return reports[v] < 0; });
  if (split->train.empty() || split->validation.empty()) {
    return absl::FailedPreconditionError(
        "no label reports among the training or validation nodes");
  }
  return collected;
}

// The poisoning attack a simulated run (no collected reports) plays when
// c.attack_fraction > 0; null otherwise.
absl::StatusOr<std::unique_ptr<Poisoning>> RunPoisoning(
    const Dataset& d, const PipelineConfig& c, const Collected* collected,
    const RunOverrides& overrides, uint64_t seed) {
  std::unique_ptr<Poisoning> poisoning;
  if (collected == nullptr && c.attack_fraction > 0) {
    if (overrides.features != nullptr) {
      return absl::InvalidArgumentError(
          "the poisoning attack is simulated on the run's own reports; it "
          "does not apply to overriding features");
    }
    ASSIGN_OR_RETURN(poisoning, PreparePoisoning(d, c, seed));
  }
  return poisoning;
}

// Leaves the untrusted nodes out of the split's training and validation
// nodes (the test nodes stay: they are scored against the true labels).
// FAILED_PRECONDITION when none of either is left.
absl::Status DropUntrusted(const std::vector<uint32_t>& untrusted,
                           NodeSplit* split) {
  if (untrusted.empty()) return absl::OkStatus();
  LeaveOutOfTraining(split, [&](NodeId v) {
    return std::binary_search(untrusted.begin(), untrusted.end(), v);
  });
  if (split->train.empty() || split->validation.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the report screen left no training or validation node (",
        untrusted.size(), " nodes flagged)"));
  }
  return absl::OkStatus();
}

// What the classifier learns from, into s: c's central-DP release of the
// curator's graph, or the features the curator collects, with the nodes it
// does not trust (the screen's, and overrides.untrusted) out of the split.
absl::Status CollectNodeInputs(const Dataset& d, const PipelineConfig& c,
                               const Collected* collected,
                               const RunOverrides& overrides, uint64_t seed,
                               int run, NoiseStreams& noise, NodeRun* s) {
  if (IsReleaseMethod(c.method)) {
    ASSIGN_OR_RETURN(s->release, RunRelease(*s->in.graph, c, seed, run,
                                            &s->collection));
    s->in.release = &s->release;
    return absl::OkStatus();
  }
  std::vector<uint32_t> untrusted;
  // LPGNN holds the estimates against a fill (Multi-bit's value on the
  // unreported dimensions), so that they stay as sparse as the reports.
  ASSIGN_OR_RETURN(
      s->x, CollectFeatures(d, c, collected, overrides.features,
                            s->poisoning.get(), noise, &s->collection,
                            &untrusted,
                            IsGnnMethod(c.method) ? &s->in.x_fill : nullptr));
  RETURN_IF_ERROR(UnbiasHdsForLpgnn(d, c, &s->x, &s->in.x_fill));
  s->in.x = &s->x;
  if (overrides.untrusted != nullptr) {
    std::vector<uint32_t> both;
    std::set_union(untrusted.begin(), untrusted.end(),
                   overrides.untrusted->begin(), overrides.untrusted->end(),
                   std::back_inserter(both));
    untrusted = std::move(both);
  }
  return DropUntrusted(untrusted, &s->split);
}

// The tuning's figures: its candidates, and the steps (and NFR's tau, when
// tuned) it kept.
nlohmann::json StepsJson(const PipelineConfig& c, const StepTuning& steps,
                         nlohmann::json candidates) {
  nlohmann::json j = {{"candidates", std::move(candidates)},
                      {"feature_steps", steps.feature_steps},
                      {"label_steps", steps.label_steps}};
  if (!c.tune_nfr.empty()) j["nfr_tau"] = steps.nfr_tau;
  return j;
}

// LPGNN's inputs chosen (TrainOnInputs) with `chosen` and the steps kept.
// *tuning (the steps' candidates; null when untuned) becomes the inputs'
// figures, the steps' under "steps".
absl::StatusOr<RunResult> TrainOnChosenInputs(
    const NodeRunInputs& in, const PipelineConfig& c,
    const PipelineConfig& chosen, const StepTuning& steps,
    uint64_t model_seed, uint64_t positional_seed, nlohmann::json* tuning) {
  nlohmann::json inputs_tuning;
  ASSIGN_OR_RETURN(RunResult t,
                   TrainOnInputs(in, chosen, steps.feature_steps,
                                 steps.label_steps, model_seed,
                                 positional_seed, &inputs_tuning));
  if (!tuning->is_null()) {
    // The steps (and NFR) were tuned on the reports first.
    inputs_tuning["steps"] = StepsJson(c, steps, std::move(*tuning));
  }
  *tuning = std::move(inputs_tuning);
  return t;
}

// The run's model, trained with *chosen: PrivGE's propagation chosen
// (kAuto), LPGNN's inputs chosen (NodeInputs other than kReports), or as
// configured. *kept_features gets the features the robust defence
// retrains on; *tuning holds the steps' candidates, and then the figures.
absl::StatusOr<RunResult> TrainChosenModel(
    const NodeRunInputs& in, const PipelineConfig& c, const StepTuning& steps,
    uint64_t seed, int run, uint64_t model_seed, PipelineConfig* chosen,
    std::optional<NodeFeatures>* kept_features, nlohmann::json* tuning) {
  if (c.method == v1::PIPELINE_METHOD_PRIVGE &&
      c.propagation == NodePropagation::kAuto && in.release == nullptr) {
    return ChoosePropagation(in, c, steps.feature_steps, steps.label_steps,
                             model_seed, chosen, kept_features, tuning);
  }
  if (IsGnnMethod(c.method) && c.inputs != NodeInputs::kReports &&
      in.x != nullptr) {
    return TrainOnChosenInputs(in, c, *chosen, steps, model_seed,
                               StageSeed(seed, run, Stage::kBaseline),
                               tuning);
  }
  ASSIGN_OR_RETURN(NodeFeatures features,
                   PropagateNode(in, c, steps.feature_steps));
  ASSIGN_OR_RETURN(RunResult t,
                   TrainNodeOnce(in, *chosen, features, steps.label_steps,
                                 false, model_seed));
  if (c.defences.robust) *kept_features = std::move(features);
  return t;
}

// t as the run's result: with the collection's figures (and a release's),
// and the tuning's.
void AddRunFigures(const PipelineConfig& c, const StepTuning& steps,
                   nlohmann::json tuning, RunResult* collection,
                   RunResult* t) {
  t->perturb_seconds = collection->perturb_seconds;
  t->noise_source = collection->noise_source;
  t->screen = std::move(collection->screen);
  if (IsReleaseMethod(c.method)) {
    t->propagate_seconds = collection->propagate_seconds;
    t->release = std::move(collection->release);
  }
  if (tuning.is_object()) {
    t->tuning = std::move(tuning);
  } else if (!tuning.is_null()) {
    t->tuning = StepsJson(c, steps, std::move(tuning));
    if (steps.tune_model) {
      t->tuning["learning_rate"] = steps.model.train.adam.learning_rate;
      t->tuning["weight_decay"] = steps.model.train.adam.weight_decay;
      t->tuning["dropout"] = steps.model.dropout;
    }
  }
}

}  // namespace

absl::StatusOr<NodeSplit> RunNodeSplit(const Dataset& d,
                                       const PipelineConfig& c, uint64_t seed,
                                       int run) {
  if (c.planetoid_split) return PlanetoidSplit(d);
  return RandomNodeSplit(d.labels, c.train_fraction, c.validation_fraction,
                         StageSeed(seed, c.fixed_split ? 0 : run,
                                   Stage::kSplit));
}

absl::StatusOr<RunResult> RunNode(const Dataset& d, const PipelineConfig& c,
                                  const Collected* collected, uint64_t seed,
                                  int run, const RunOverrides& overrides) {
  NodeRun s;
  // The graph the curator holds: the dataset's, or the caller's replacement.
  const Graph& graph =
      overrides.graph != nullptr ? *overrides.graph : d.graph;
  ASSIGN_OR_RETURN(s.split, RunNodeSplit(d, c, seed, run));
  ASSIGN_OR_RETURN(const Collected* labels_collected,
                   KeepReportedNodes(d, collected, &s.split));
  ASSIGN_OR_RETURN(NoiseStreams noise,
                   NoiseStreams::Create(c, NoiseSeed(seed, run),
                                        collected || IsReleaseMethod(c.method)
                                            ? 0
                                            : d.graph.num_nodes()));
  ASSIGN_OR_RETURN(s.poisoning,
                   RunPoisoning(d, c, collected, overrides, seed));
  s.in = {&d, &graph, &s.split, nullptr, nullptr, nullptr};
  RETURN_IF_ERROR(
      CollectNodeInputs(d, c, collected, overrides, seed, run, noise, &s));
  if (c.label_epsilon) {
    ASSIGN_OR_RETURN(s.labels, PerturbLabels(d, s.split, c, d.meta.classes,
                                             labels_collected,
                                             s.poisoning.get(), noise));
    s.in.labels = &s.labels;
  }
  const uint64_t model_seed = StageSeed(seed, run, Stage::kModel);
  ASSIGN_OR_RETURN(StepTuning steps, TuneSteps(s.in, s.x, c, model_seed));
  if (steps.nfr_tau > 0 && s.in.x != nullptr) {
    ASSIGN_OR_RETURN(const double threshold,
                     NfrThreshold(c, d, steps.nfr_tau));
    ApplyNfr(threshold, &s.x, &s.in.x_fill);
  }
  // The robust defence and the smoothing read the model's posteriors.
  PipelineConfig chosen = c;
  chosen.node_model = steps.model;
  if (c.defences.robust || c.smooth) chosen.keep_node_outputs = true;
  std::optional<NodeFeatures> kept_features;
  nlohmann::json tuning = std::move(steps.candidates);
  ASSIGN_OR_RETURN(RunResult t,
                   TrainChosenModel(s.in, c, steps, seed, run, model_seed,
                                    &chosen, &kept_features, &tuning));
  if (c.defences.robust) {
    chosen.keep_node_outputs = c.keep_node_outputs || c.smooth;
    ASSIGN_OR_RETURN(t, RobustRetrain(s.in, chosen, *kept_features,
                                      steps.label_steps, model_seed,
                                      s.poisoning.get(), std::move(t)));
  }
  if (c.smooth) {
    RETURN_IF_ERROR(Smooth(d, graph, s.split, s.in.labels, c, &t));
    if (!c.keep_node_outputs) t.node_outputs.reset();
  }
  if (c.keep_node_model && s.in.x != nullptr) {
    t.node_features = std::make_shared<const SparseRows>(
        s.in.x_fill == 0.0f ? std::move(s.x) : WithoutFill(s.x, s.in.x_fill));
  }
  AddRunFigures(c, steps, std::move(tuning), &s.collection, &t);
  return t;
}

}  // namespace ldpgraph::pipeline::internal
