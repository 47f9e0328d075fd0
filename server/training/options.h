// The settings of the models the curator trains, apart from the training
// code: activations, initialisation, Adam's options, the training loop's
// options (trainer.h), and the node and link tasks' model settings with
// their automatic batching rules (tasks.h). Plain structs and constants,
// header only: its library, ldpgraph::training_options, is what a caller
// links to hold, set or print these settings without training (the
// pipeline's configuration, ldpctl). ldpgraph::training links it publicly,
// and nn.h, trainer.h, models.h and tasks.h include this header.
#pragma once

#include <cstddef>

namespace ldpgraph::training {

// A layer's nonlinearity (nn.h: its forward and backward, SELU's
// constants).
enum class Activation { kRelu, kSelu };

// How a Linear layer starts. kGlorot: W ~ U(+-sqrt(6 / (in + out))), b = 0.
// kTorch: W and b ~ U(+-1 / sqrt(in)), PyTorch's and PyG's default for a
// linear layer (kaiming_uniform with a = sqrt(5)).
enum class WeightInit { kGlorot, kTorch };

// Adam's settings (Adam, nn.h).
struct AdamOptions {
  double learning_rate = 0.01;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  // L2 penalty added to the gradient (PyTorch's Adam weight_decay), on every
  // parameter.
  double weight_decay = 0.0;
};

// Which epoch's parameters the loop keeps.
//  kBestScore: the best validation score, ties to the lower loss.
//  kNoisyLabelsCapped: LPGNN's rule for labels seen through randomized
//    response (Sajadmanesh and Gatica-Perez's public code), where score and
//    train_score are accuracies against the noisy reports and no model can
//    honestly agree with more than the channel keeps (score_cap, T[0][0]):
//    an epoch replaces the best when its validation loss is lower, its
//    validation accuracy higher but at most score_cap, and its training
//    accuracy higher but at most 1.05 score_cap. The first epoch is kept
//    until one does.
enum class SelectionRule { kBestScore, kNoisyLabelsCapped };

// The training loop's options (TrainWithEarlyStopping, trainer.h).
struct TrainOptions {
  int max_epochs = 500;
  // Stop once this many epochs pass without a better validation score.
  int patience = 50;
  // Never stop before this many epochs.
  int min_epochs = 0;
  AdamOptions adam;
  // Decay on a plateau: once decay_patience epochs pass without a better
  // validation score, go back to the best epoch's parameters and multiply
  // the learning rate by decay_factor, at most max_decays times; patience
  // then counts from the last decay. decay_patience 0: off.
  int decay_patience = 0;
  double decay_factor = 0.5;
  int max_decays = 0;
  SelectionRule selection = SelectionRule::kBestScore;
  double score_cap = 1.0;  // kNoisyLabelsCapped only
};

// The graph models' sparse input rule (Gnn, models.h).
// Whether the first layer should read x sparse: when at most
// kSparseInputDensity of its entries are non-zero (a sparse product costs a
// few times a dense one per entry it touches).
inline constexpr double kSparseInputDensity = 0.125;

// The node task's model (TrainNodeClassifier, tasks.h).
enum class NodeModelKind { kMlp, kGcn, kSage };

// The MLP's default bounds on an epoch (NodeModelConfig): 2^19 training
// rows stepped through (128 batches of 4,096) and 2^18 validation rows
// scored. Accuracy on 2^18 rows has a standard error under 0.001, finer
// than the differences the early stop acts on.
inline constexpr int kNodeEpochRows = 1 << 19;
inline constexpr int kNodeValidationRows = 1 << 18;

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
  // The MLP's work per epoch, bounded so that it stops growing with the
  // graph. With mini-batches an epoch steps through at most
  // batched_epoch_rows training rows: every epoch reshuffles all of them
  // and takes the first batched_epoch_rows. Every epoch scores at most
  // validation_rows validation rows: a sample drawn once from the seed,
  // the same for every epoch (the test set is always scored whole). 0:
  // every row. The defaults (kNodeEpochRows, kNodeValidationRows) bind
  // above a million nodes at the default 50/25/25 split; below, training
  // is as before, bit for bit.
  int batched_epoch_rows = kNodeEpochRows;
  int validation_rows = kNodeValidationRows;
  // Graph models: the first layer reads the features as a sparse matrix
  // when at most this share of them is non-zero (0: always dense). Same
  // model; floating-point sums in another order, and input dropout draws
  // its masks per stored value. The MLP on PrivGE's Z: the same share
  // decides whether Z is held as compressed rows (MlpSparseBound,
  // mlp_rows.h).
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

// The link task's scorer (TrainLinkPredictor, tasks.h).
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

}  // namespace ldpgraph::training
