// The node task's training (TrainNodeOnce) and what follows it: the test
// set's scores, the robust defence's retraining, and the smoothing of the
// model's predictions.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status_macros.h"
#include "server/pipeline/baselines.h"
#include "server/pipeline/internal/node_task.h"
#include "server/pipeline/robust.h"
#include "server/training/metrics.h"
#include "server/training/tasks.h"

namespace ldpgraph::pipeline::internal {
namespace {

// Tuning candidates stop after this many epochs without a better one (the
// patience of LPGNN's own trainer).
constexpr int kTuningPatience = 100;

// Row-wise softmax of logits, as the class posteriors a release shows.
DenseMatrix Posteriors(const Mat<float>& logits) {
  DenseMatrix p(logits.rows(), logits.cols());
  for (Eigen::Index i = 0; i < logits.rows(); ++i) {
    const float top = logits.row(i).maxCoeff();
    double sum = 0;
    for (Eigen::Index j = 0; j < logits.cols(); ++j) {
      sum += std::exp(static_cast<double>(logits(i, j) - top));
    }
    for (Eigen::Index j = 0; j < logits.cols(); ++j) {
      p.at(i, j) = static_cast<float>(
          std::exp(static_cast<double>(logits(i, j) - top)) / sum);
    }
  }
  return p;
}

// r's confusion matrix from predictions against the true labels (aligned),
// and its target_rate with c.attack_class.
absl::Status ScoreConfusion(const std::vector<int32_t>& predicted,
                            const std::vector<int32_t>& truth, int classes,
                            const PipelineConfig& c, RunResult* r) {
  r->confusion = ConfusionMatrix(predicted, truth, classes);
  if (c.attack_class) {
    ASSIGN_OR_RETURN(r->target_rate,
                     TargetRate(r->confusion, *c.attack_class));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::vector<uint32_t>> ConfusionMatrix(
    const std::vector<int32_t>& predicted, const std::vector<int32_t>& truth,
    int classes) {
  std::vector<std::vector<uint32_t>> m(classes,
                                       std::vector<uint32_t>(classes, 0));
  for (size_t i = 0; i < predicted.size() && i < truth.size(); ++i) {
    if (truth[i] >= 0 && truth[i] < classes && predicted[i] >= 0 &&
        predicted[i] < classes) {
      ++m[truth[i]][predicted[i]];
    }
  }
  return m;
}

absl::Status ScoreTestPredictions(const std::vector<int32_t>& predicted,
                                  const std::vector<int32_t>& truth,
                                  int classes, const PipelineConfig& c,
                                  RunResult* r) {
  ASSIGN_OR_RETURN(r->metric, training::Accuracy(predicted, truth));
  ASSIGN_OR_RETURN(r->micro_f1, training::MicroF1(predicted, truth, classes));
  ASSIGN_OR_RETURN(r->macro_f1, training::MacroF1(predicted, truth, classes));
  return ScoreConfusion(predicted, truth, classes, c, r);
}

absl::StatusOr<RunResult> TrainNodeOnce(const NodeRunInputs& in,
                                        const PipelineConfig& c,
                                        const NodeFeatures& propagated,
                                        int label_steps, bool tuning,
                                        uint64_t model_seed) {
  const Dataset& d = *in.d;
  const Graph& graph = *in.graph;
  const NodeSplit& split = *in.split;
  RunResult r;
  r.propagate_seconds = propagated.propagate_seconds;
  const Mat<float>& features = propagated.features;

  training::NodeTaskData data;
  data.features = propagated.deferred || propagated.rows || propagated.file
                      ? nullptr
                      : &features;
  data.sparse_features = propagated.deferred.get();
  data.feature_rows = propagated.rows.get();
  data.feature_file = propagated.file.get();
  data.feature_mean = propagated.mean;
  data.feature_scale = propagated.scale;
  if ((propagated.rows || propagated.file) && !propagated.mean.empty()) {
    data.feature_clip = c.standardize_clip;
  }
  data.graph = &graph;
  data.classes = d.meta.classes;
  data.keep_outputs = c.keep_node_outputs && !tuning;
  data.keep_model = c.keep_node_model && !tuning;
  data.train.assign(split.train.begin(), split.train.end());
  data.validation.assign(split.validation.begin(), split.validation.end());
  data.test.assign(split.test.begin(), split.test.end());
  for (NodeId v : split.test) data.test_truth.push_back(d.labels[v]);
  training::NodeModelConfig model = c.node_model;
  model.threads = c.threads;
  if (in.labels != nullptr) {
    ASSIGN_OR_RETURN(NoisyLabels labels,
                     DenoiseLabels(d, graph, split, c, d.meta.classes,
                                   *in.labels, label_steps, !tuning));
    data.train_targets = std::move(labels.train);
    data.validation_targets = std::move(labels.validation);
    data.transition = in.labels->transition;
    if (c.label_denoising == LabelDenoising::kPublished) {
      data.propagate_predictions = true;
      data.label_steps = label_steps;
      data.train_reports = std::move(labels.train_reports);
      // LPGNN's rule, every epoch of the budget (no early stopping) unless
      // tuning.
      model.train.selection = training::SelectionRule::kNoisyLabelsCapped;
      model.train.patience =
          tuning ? std::min(model.train.max_epochs, kTuningPatience)
                 : model.train.max_epochs;
    }
    r.label_agreement = labels.agreement;
    r.label_agreement_raw = labels.agreement_raw;
  } else {
    for (NodeId v : split.train) data.train_targets.push_back(d.labels[v]);
    for (NodeId v : split.validation) {
      data.validation_targets.push_back(d.labels[v]);
    }
  }
  ASSIGN_OR_RETURN(training::NodeTaskResult t,
                   training::TrainNodeClassifier(data, model, model_seed));
  r.metric = t.test_accuracy;
  r.micro_f1 = t.test_micro_f1;
  r.macro_f1 = t.test_macro_f1;
  RETURN_IF_ERROR(ScoreConfusion(t.test_predictions, data.test_truth,
                                 d.meta.classes, c, &r));
  r.training = t.training;
  r.train_seconds = t.training.seconds;
  if (t.outputs) r.node_outputs = Posteriors(*t.outputs);
  if (t.model) {
    r.node_model =
        std::make_shared<const training::ModelWeights>(std::move(*t.model));
  }
  return r;
}

absl::StatusOr<RunResult> RobustRetrain(const NodeRunInputs& in,
                                        const PipelineConfig& c,
                                        const NodeFeatures& propagated,
                                        int label_steps, uint64_t model_seed,
                                        const Poisoning* poisoning,
                                        RunResult first) {
  if (in.labels == nullptr) {
    // The curator's own labels: nothing for an attacker to report.
    if (!c.keep_node_outputs) first.node_outputs.reset();
    first.robust = {{"robust", "not applicable"}};
    return first;
  }
  const std::vector<int32_t>& labels = in.labels->reported;
  std::vector<uint32_t> candidates(in.split->train.begin(),
                                   in.split->train.end());
  candidates.insert(candidates.end(), in.split->validation.begin(),
                    in.split->validation.end());
  if (!first.node_outputs) {
    return absl::InternalError("robust: the first model kept no outputs");
  }
  // Randomized response's probabilities.
  double keep = 1, other = 0;
  if (in.labels->transition.rows() > 1) {
    keep = in.labels->transition(0, 0);
    other = in.labels->transition(0, 1);
  }
  ASSIGN_OR_RETURN(const std::vector<int> overreported,
                   OverReportedClasses(*first.node_outputs, candidates, labels,
                                       keep, other, kRobustAlpha));
  ASSIGN_OR_RETURN(std::vector<uint32_t> contradicted,
                   ContradictedNodes(*first.node_outputs, candidates, labels));
  std::vector<uint32_t> dropped;
  for (uint32_t v : contradicted) {
    if (std::binary_search(overreported.begin(), overreported.end(),
                           labels[v])) {
      dropped.push_back(v);
    }
  }
  NodeSplit split = *in.split;
  auto drop = [&](std::vector<NodeId>* list) {
    const size_t before = list->size();
    std::erase_if(*list, [&](NodeId v) {
      return std::binary_search(dropped.begin(), dropped.end(), v);
    });
    return before - list->size();
  };
  const size_t dropped_train = drop(&split.train);
  const size_t dropped_validation = drop(&split.validation);
  nlohmann::json figures = RobustToJson(
      dropped, dropped_train, dropped_validation,
      first.training.best_validation, overreported,
      poisoning != nullptr ? poisoning->malicious : std::vector<bool>());
  if (dropped.empty() || split.train.empty() || split.validation.empty()) {
    figures["robust"] = "applied";
    figures["retrained"] = false;
    if (!c.keep_node_outputs) first.node_outputs.reset();
    first.robust = std::move(figures);
    return first;
  }
  NodeRunInputs retrain = in;
  retrain.split = &split;
  ASSIGN_OR_RETURN(RunResult second,
                   TrainNodeOnce(retrain, c, propagated, label_steps, false,
                                 model_seed));
  figures["robust"] = "applied";
  figures["retrained"] = true;
  second.robust = std::move(figures);
  second.train_seconds += first.train_seconds;
  return second;
}

absl::Status Smooth(const Dataset& d, const Graph& graph,
                    const NodeSplit& split, const LabelReports* labels,
                    const PipelineConfig& c, RunResult* t) {
  if (!t->node_outputs) {
    return absl::InternalError("smooth: the model kept no outputs");
  }
  const std::vector<int32_t>& held =
      labels != nullptr ? labels->reported : d.labels;
  const std::vector<uint32_t> train(split.train.begin(), split.train.end());
  const std::vector<uint32_t> validation(split.validation.begin(),
                                         split.validation.end());
  std::vector<int32_t> train_targets, validation_targets;
  for (uint32_t v : train) train_targets.push_back(held[v]);
  for (uint32_t v : validation) validation_targets.push_back(held[v]);
  ASSIGN_OR_RETURN(
      const LabelPropagationResult s,
      SmoothPredictions(graph, *t->node_outputs, train, train_targets,
                        validation, validation_targets, c.threads));
  const int classes = d.meta.classes;
  std::vector<int32_t> predicted, truth;
  for (NodeId v : split.test) {
    predicted.push_back(s.predictions[v]);
    truth.push_back(d.labels[v]);
  }
  nlohmann::json candidates = nlohmann::json::array();
  for (size_t i = 0; i < s.validation.size(); ++i) {
    candidates.push_back(
        {{"alpha", i == 0 ? 0.0 : kLabelPropagationAlphas[i - 1]},
         {"validation", s.validation[i]}});
  }
  for (size_t i = 0; i < s.mix_validation.size(); ++i) {
    candidates.push_back({{"mix", kSmoothMixWeights[i]},
                          {"validation", s.mix_validation[i]}});
  }
  t->smooth = {{"alpha", s.alpha},
               {"mix", s.mix},
               {"candidates", std::move(candidates)},
               {"accuracy_before", t->metric}};
  if (predicted.empty()) return absl::OkStatus();
  return ScoreTestPredictions(predicted, truth, classes, c, t);
}

}  // namespace ldpgraph::pipeline::internal
