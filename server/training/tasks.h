// The two learning tasks on features the curator holds (estimated,
// propagated): node classification (MLP, GCN or GraphSAGE; clean labels or
// labels seen through randomized response) and link prediction (the
// Hadamard product of two node vectors into logistic regression or an MLP).
// Each trains with early stopping on its validation set and scores the best
// checkpoint on the test set.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/graph/graph.h"
#include "server/training/models.h"
#include "server/training/trainer.h"

namespace ldpgraph::training {

enum class NodeModelKind { kMlp, kGcn, kSage };

struct NodeModelConfig {
  NodeModelKind kind = NodeModelKind::kMlp;
  int hidden_dim = 64;
  int layers = 2;
  double dropout = 0.5;
  Activation activation = Activation::kRelu;
  double input_dropout = 0.0;
  TrainOptions train;
  // MLP only: training rows per Adam step. 0: full batch (the papers'
  // setting); n > 0: mini-batches of n rows, reshuffled every epoch; -1
  // (default): full batch while the training rows hold at most
  // kNodeFullBatchEntries features, else kNodeAutoBatchRows. With
  // mini-batches, batched_max_epochs, batched_patience and
  // batched_learning_rate replace train's epochs, patience and rate.
  int batch_rows = -1;
  int batched_max_epochs = 100;
  int batched_patience = 10;
  double batched_learning_rate = 0.001;
  // Graph models: the first layer reads the features as a sparse matrix
  // when at most this share of them is non-zero (0: always dense). Same
  // model; floating-point sums in another order, and input dropout draws
  // its masks per stored value.
  double sparse_input_density = kSparseInputDensity;
  // Graph models: how the layers start (kTorch: PyTorch's and PyG's
  // default, as LPGNN's code runs).
  WeightInit init = WeightInit::kGlorot;
  // Worker threads for the models' products; 0 = every core. Results do
  // not depend on it.
  int threads = 0;
};

// The node MLP's automatic batching rule (NodeModelConfig::batch_rows):
// full batch up to 2^24 feature entries in the training rows (pubmed's
// 9,858 x 500 is 4.9 M), beyond that batches of 4,096 rows.
inline constexpr size_t kNodeFullBatchEntries = size_t{1} << 24;
inline constexpr int kNodeAutoBatchRows = 4096;

// The batch size c implies for `rows` training rows of `dim` features: 0
// for full batch (always, for the graph models).
int NodeBatchRows(const NodeModelConfig& c, size_t rows, size_t dim);

// What the classifier sees. Row v of features is node v (n rows); graph is
// needed by GCN and GraphSAGE (n nodes). Node lists hold distinct ids < n.
struct NodeTaskData {
  const Mat<float>* features = nullptr;
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
absl::StatusOr<NodeTaskResult> TrainNodeClassifier(const NodeTaskData& data,
                                                   const NodeModelConfig& c,
                                                   uint64_t seed);

enum class LinkLossKind { kPairwise, kLogistic };

// The automatic batching rule (LinkModelConfig::batch_pairs): full batch up
// to 2^26 feature entries (256 MiB of floats) over all training pairs, and
// the most rows formed at once in any case; beyond it, batches of 512 edges.
inline constexpr size_t kLinkFullBatchEntries = size_t{1} << 26;
inline constexpr int kLinkAutoBatchPairs = 512;


struct LinkModelConfig {
  // 1: logistic regression on z_u * z_v; 2 or more: an MLP on it.
  int layers = 1;
  int hidden_dim = 64;
  double dropout = 0.0;
  Activation activation = Activation::kRelu;
  double input_dropout = 0.0;
  LinkLossKind loss = LinkLossKind::kPairwise;
  // Standardise each column of the Hadamard features with the training
  // pairs' mean and standard deviation (the same map applied to validation
  // and test pairs). A per-column affine map that the scorer could undo: it
  // changes the conditioning of the optimisation, not the model class.
  bool standardize_features = true;
  // Training edges per Adam step. 0: full batch, one step per epoch on
  // every training pair (the setting the link experiments of the papers
  // use). n > 0: mini-batches of n edges and n non-edges, reshuffled every
  // epoch, which on a large graph reaches the same AUC in far fewer passes
  // over the pairs. -1 (default): full batch while the training pairs'
  // features fit kLinkFullBatchEntries floats, else kLinkAutoBatchPairs.
  int batch_pairs = -1;
  // The most feature entries (rows x d floats) formed at once, and the
  // automatic rule's threshold (at least one row is formed).
  size_t feature_entries = kLinkFullBatchEntries;
  TrainOptions train;
  // With mini-batches (an epoch is then one pass over the training pairs),
  // these replace train.max_epochs, train.patience and the learning rate;
  // the optimiser's other options stay train.adam's.
  int batched_max_epochs = 100;
  int batched_patience = 5;
  // Adam's step size with mini-batches (hundreds of steps per epoch want a
  // smaller one than the full batch's single step).
  double batched_learning_rate = 0.001;
  // With mini-batches, the step size decays on a plateau
  // (TrainOptions::decay_patience): after batched_decay_patience passes
  // without a better validation ROC-AUC, back to the best pass's scorer
  // with the step size times batched_decay_factor, at most
  // batched_max_decays times; batched_patience then counts from the last
  // decay. Mini-batch noise at a fixed step size costs accuracy against full
  // batch; the decays take it away. batched_max_decays 0: a fixed step.
  int batched_decay_patience = 1;
  double batched_decay_factor = 0.5;
  int batched_max_decays = 4;
  // Worker threads forming the pair features and for the scorer's
  // products; 0 = every core. Results do not depend on it.
  int threads = 0;
};

// The batch size c implies for a training set of `positives` edges (and as
// many non-edges) over dim-dimensional embeddings: 0 for full batch.
int LinkBatchPairs(const LinkModelConfig& c, size_t positives, size_t dim);

struct LinkTaskData {
  const Mat<float>* embeddings = nullptr;  // n x d
  std::vector<Edge> train_positive, train_negative;
  std::vector<Edge> validation_positive, validation_negative;
  std::vector<Edge> test_positive, test_negative;
};

struct LinkTaskResult {
  double test_auc = 0;
  TrainReport training;
  int batch_pairs = 0;  // the batch size used, 0 for full batch
};

// Trains a link scorer on the Hadamard features of the training pairs (the
// pairwise loss needs as many negatives as positives), early-stops on
// validation ROC-AUC, and returns the test ROC-AUC. The features z_u * z_v
// are formed chunk by chunk as they are needed: memory is the embeddings
// plus O(chunk x d), never O(pairs x d).
absl::StatusOr<LinkTaskResult> TrainLinkPredictor(const LinkTaskData& data,
                                                  const LinkModelConfig& c,
                                                  uint64_t seed);

// Rows [z_u * z_v] for each pair.
Mat<float> HadamardFeatures(const Mat<float>& z, const std::vector<Edge>& a,
                            const std::vector<Edge>& b = {});

}  // namespace ldpgraph::training
