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
};

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
  // Return every node's logits (NodeTaskResult::outputs); off by default, so
  // other callers pay nothing.
  bool keep_outputs = false;
};

struct NodeTaskResult {
  double test_accuracy = 0;
  double test_micro_f1 = 0;
  double test_macro_f1 = 0;
  TrainReport training;
  // With keep_outputs: the logits of every node (n x classes, row v = node
  // v), inference mode, from the checkpoint the test set is scored with.
  std::optional<Mat<float>> outputs;
};

// Validates data and config (INVALID_ARGUMENT naming what is wrong), trains
// from `seed` (initial weights, dropout), and scores the test nodes.
absl::StatusOr<NodeTaskResult> TrainNodeClassifier(const NodeTaskData& data,
                                                   const NodeModelConfig& c,
                                                   uint64_t seed);

enum class LinkLossKind { kPairwise, kLogistic };

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
  TrainOptions train;
};

struct LinkTaskData {
  const Mat<float>* embeddings = nullptr;  // n x d
  std::vector<Edge> train_positive, train_negative;
  std::vector<Edge> validation_positive, validation_negative;
  std::vector<Edge> test_positive, test_negative;
};

struct LinkTaskResult {
  double test_auc = 0;
  TrainReport training;
};

// Trains a link scorer on the Hadamard features of the training pairs (the
// pairwise loss needs as many negatives as positives), early-stops on
// validation ROC-AUC, and returns the test ROC-AUC.
absl::StatusOr<LinkTaskResult> TrainLinkPredictor(const LinkTaskData& data,
                                                  const LinkModelConfig& c,
                                                  uint64_t seed);

// Rows [z_u * z_v] for each pair.
Mat<float> HadamardFeatures(const Mat<float>& z, const std::vector<Edge>& a,
                            const std::vector<Edge>& b = {});

}  // namespace ldpgraph::training
