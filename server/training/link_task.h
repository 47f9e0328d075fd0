// Link prediction on node vectors the curator holds: the Hadamard product
// of two node vectors into logistic regression or an MLP, trained with
// early stopping on its validation pairs and scored by test ROC-AUC.
// (tasks.h gathers this task and node classification, node_task.h.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/graph/graph.h"
#include "server/training/nn.h"
#include "server/training/options.h"
#include "server/training/trainer.h"

namespace ldpgraph::training {

// The settings: LinkLossKind, LinkModelConfig and the automatic batching
// rules' constants (kLinkFullBatchEntries, kLinkAutoBatchPairs): options.h.

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
