// Node classification on features the curator holds (estimated,
// propagated): an MLP, GCN or GraphSAGE trained on clean labels or on
// labels seen through randomized response, with early stopping on its
// validation set, the best checkpoint scored on the test set.
// (tasks.h gathers this task and link prediction, link_task.h.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/graph/graph.h"
#include "common/linalg/matrix.h"
#include "server/training/models.h"
#include "server/training/options.h"
#include "server/training/row_file.h"
#include "server/training/trainer.h"

namespace ldpgraph::training {

// The settings: NodeModelKind, NodeModelConfig and the automatic batching
// rule's constants (kNodeFullBatchEntries, kNodeAutoBatchRows): options.h.

// The batch size c implies for `rows` training rows of `dim` features: 0
// for full batch (always, for the graph models).
int NodeBatchRows(const NodeModelConfig& c, size_t rows, size_t dim);

// What the classifier sees. Row v of features is node v (n rows); graph is
// needed by GCN and GraphSAGE (n nodes). Node lists hold distinct ids < n.
struct NodeTaskData {
  const Mat<float>* features = nullptr;
  // GCN and GraphSAGE: the features as the first layer's sparse input in
  // place of `features` (set one of the two), e.g. with a deferred KProp
  // (SparseInput, models.h); n is its row count. Must outlive the call.
  const SparseInput<float>* sparse_features = nullptr;
  // The MLP: the features as compressed rows in place of `features` (set
  // one of the three; PrivGE's propagated Z when mostly zeros), read as
  // X' = (x - 1 feature_mean^T) diag(feature_scale) when those are set (one
  // entry per column each), as x otherwise. The MLP folds the map into its
  // first layer (Mlp's sparse Forward) and gathers, as SparseInput, only
  // the rows a step, a validation pass or a prediction reads, so no n x d
  // matrix is formed. Needs input_dropout 0 and no propagate_predictions.
  const SparseRows* feature_rows = nullptr;
  // The MLP: the features as a file of rows (row_file.h) in place of the
  // others (set one of the four; PrivGE's Z on wide feature sets), read as
  // X' = clamp((x - feature_mean) feature_scale, +-feature_clip) entry by
  // entry (Standardize's arithmetic) when those are set, as x otherwise; a
  // batch, a validation chunk or a prediction chunk is read at a time. No
  // propagate_predictions. A read error ends the training with it.
  const RowFile* feature_file = nullptr;
  std::vector<double> feature_mean, feature_scale;
  // With feature_mean and feature_scale, > 0: feature_rows: a stored value
  // whose X' entry passes +-feature_clip is clamped to it (its value to
  // mean +- clip / scale); an absent one, X' = -mean * scale, is not.
  // feature_file: every entry is clamped. 0: no clamp.
  double feature_clip = 0;
  const Graph* graph = nullptr;
  int classes = 0;
  std::vector<uint32_t> train, validation, test;
  // The labels the curator trains and selects with, aligned with train and
  // validation: true labels, or labels after randomized response (and
  // denoising). Each in [0, classes).
  std::vector<int32_t> train_targets, validation_targets;
  // Ground truth for the test nodes, used only to score.
  std::vector<int32_t> test_truth;
  // When set (classes x classes, row a = P(observed | true a)), training and
  // validation use forward-corrected cross-entropy through it.
  std::optional<Mat<float>> transition;
  // LPGNN's published training on noisy labels (needs transition and the
  // graph, with any model): each epoch the model's beliefs about every node
  // go through the channel and `label_steps` steps of the symmetric label
  // operator (PropagatedForwardCorrectedCrossEntropy) before the loss
  // against train_targets, which are then argmax softmax(A^K Y) of the
  // reports. train_reports (aligned with train) are the raw reports the
  // training accuracy of SelectionRule::kNoisyLabelsCapped is measured
  // against; validation_targets should be the raw reports too. Full batch.
  bool propagate_predictions = false;
  int label_steps = 0;
  std::vector<int32_t> train_reports;
  // Return every node's logits (NodeTaskResult::outputs); off by default, so
  // other callers pay nothing.
  bool keep_outputs = false;
  // Return the trained model's parameters (NodeTaskResult::model); off by
  // default.
  bool keep_model = false;
};

struct NodeTaskResult {
  int batch_rows = 0;  // the batch size used, 0 for full batch
  // The validation rows scored every epoch (NodeModelConfig::validation_rows).
  size_t validation_rows = 0;
  // Mini-batches: the training rows each epoch steps through
  // (NodeModelConfig::batched_epoch_rows); 0 for full batch.
  size_t epoch_rows = 0;
  double test_accuracy = 0;
  double test_micro_f1 = 0;
  double test_macro_f1 = 0;
  // The predicted class of each test node, aligned with data.test.
  std::vector<int32_t> test_predictions;
  TrainReport training;
  // With keep_outputs: the logits of every node (n x classes, row v = node
  // v), inference mode, from the checkpoint the test set is scored with.
  std::optional<Mat<float>> outputs;
  // With keep_model: the parameters of that same checkpoint (kNone for the
  // MLP, kGcn or kMean for the graph models over data.graph).
  std::optional<ModelWeights> model;
};

// Validates data and config (INVALID_ARGUMENT naming what is wrong), trains
// from `seed` (initial weights, dropout), and scores the test nodes. With
// c.train.selection == kNoisyLabelsCapped (needs the transition) the cap is
// the transition's T[0][0], the channel's keep probability; the training
// score is the accuracy of each epoch's training-mode predictions against
// train_reports (or train_targets when those are empty).
// The MLP's memory beyond its features: the training rows gathered once
// with full batches (at most kNodeFullBatchEntries of them, by the batching
// rule), else one mini-batch at a time; the validation rows gathered once
// when they hold at most kNodeFullBatchEntries entries, else read in chunks
// of that many every epoch, as every prediction is.
absl::StatusOr<NodeTaskResult> TrainNodeClassifier(const NodeTaskData& data,
                                                   const NodeModelConfig& c,
                                                   uint64_t seed);

}  // namespace ldpgraph::training
