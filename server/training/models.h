// The models: a multi-layer perceptron (PrivGE's classifier on the
// propagated embedding Z, and its link scorer), and two-layer graph networks
// (GCN and GraphSAGE with mean aggregation, LPGNN's models on KProp-
// aggregated features). Full-batch, forward and backward by hand over Eigen.
//
// Every layer l maps its input H through dropout (input_dropout on the
// features, dropout on every later layer's input), a linear map, and the
// activation (not after the last layer, whose output is the logits or the
// score). Kipf & Welling's GCN drops both; LPGNN drops after the activation
// only.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <Eigen/Sparse>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/graph/graph.h"
#include "common/random/random.h"
#include "server/training/nn.h"
#include "server/training/options.h"
#include "server/training/propagated_input.h"

namespace ldpgraph::training {

struct MlpConfig {
  int input_dim = 0;
  int hidden_dim = 64;
  int output_dim = 0;
  int layers = 2;  // linear layers; 1 is logistic/softmax regression
  double dropout = 0.5;  // on the input of every layer after the first
  Activation activation = Activation::kRelu;
  double input_dropout = 0.0;  // on the input features
  int threads = 1;  // for the layers' products (>= 1); results do not vary
};

// INVALID_ARGUMENT naming the field for dims < 1, layers < 1, either
// dropout outside [0, 1).
absl::Status ValidateMlpConfig(const MlpConfig& c);

// How a layer of a released model mixes its input rows (ModelWeights).
enum class LayerAggregation {
  kNone,  // an MLP layer: H W + b, every row on its own
  kGcn,   // A_gcn (H W) + b (GraphOperators::gcn)
  kMean,  // H W_self + (A_mean H) W_neigh + b (GraphOperators::mean)
};

// A trained model's parameters in double, for analyses that evaluate it
// outside training (the LinkTeller attack, server/training/linkteller.h).
// Layer l maps H (n x in) to aggregation(H) as above, then the activation
// on every layer but the last, whose output is the logits. Inference mode:
// no dropout.
struct ModelWeights {
  LayerAggregation aggregation = LayerAggregation::kNone;
  Activation activation = Activation::kRelu;
  struct Layer {
    Mat<double> self;   // in x out: W (kNone, kGcn) or W_self (kMean)
    Mat<double> neigh;  // in x out for kMean, empty otherwise
    RowVec<double> bias;  // 1 x out
  };
  std::vector<Layer> layers;
};

template <typename S>
struct SparseInput;

// The column standardisation X' = (x - 1 mean^T) diag(scale) of a block of
// `rows` rows of x as a propagation of 0 steps (propagated_input.h), for
// SparseInput and Mlp's sparse Forward. mean and scale: one entry per
// column.
template <typename S>
InputPropagation<S> ColumnStandardisation(Eigen::Index rows,
                                          const std::vector<double>& mean,
                                          const std::vector<double>& scale);

template <typename S>
class Mlp {
 public:
  // c must be valid (ValidateMlpConfig); weights drawn from rng.
  Mlp(const MlpConfig& c, PublicRandom& rng);

  // Output (n x output_dim) for input x (n x input_dim). Training mode draws
  // dropout masks from rng and keeps what Backward needs; x must then stay
  // alive until Backward.
  const Mat<S>& Forward(const Mat<S>& x, bool training, PublicRandom* rng);
  // The same map over sparse rows (SparseInput, declared below: the rows
  // and their transpose), read through x.propagation when set: the first
  // layer's products are InputProduct and InputTransposeProduct
  // (propagated_input.h), so that X' = (x - 1 mu^T) D, PrivGE's
  // standardised Z, is never formed; they cost nnz(x) x width. A
  // propagation of 0 steps (the only kind that reads a subset of the rows
  // on its own, e.g. a mini-batch) maps each row by itself. Needs config().input_dropout 0 (the dense Forward's
  // masks fall on X', whose zeros are not x's). x must outlive the matching
  // Backward call, which then cannot return d_x.
  const Mat<S>& Forward(const SparseInput<S>& x, bool training,
                        PublicRandom* rng);

  // From dL/doutput of the last training Forward, sets every parameter's
  // gradient; writes dL/dx when d_x is not null.
  void Backward(const Mat<S>& d_output, Mat<S>* d_x = nullptr);

  std::vector<Param<S>*> Params();
  const MlpConfig& config() const { return config_; }
  // The current parameters (aggregation kNone).
  ModelWeights Weights() const;

 private:
  // Layers first.. on h (the activation of layer first - 1, or the input).
  const Mat<S>& ForwardFrom(int first, const Mat<S>* h, bool training,
                            PublicRandom* rng);

  MlpConfig config_;
  const SparseInput<S>* sparse_x_ = nullptr;  // the last training Forward's
  std::vector<Linear<S>> linear_;
  std::vector<Dropout<S>> dropout_;
  // Per layer: the input after dropout (x itself when nothing was dropped),
  // the pre-activation, the activation.
  std::vector<const Mat<S>*> in_;
  std::vector<Mat<S>> pre_, act_;
  std::vector<Mat<S>> infer_pre_, infer_act_;  // inference's own buffers
  Mat<S> g_, d_in_;                            // Backward's
  std::vector<Mat<S>> scratch_;                // Backward's, sparse input
};

enum class GnnKind { kGcn, kSage };

struct GnnConfig {
  GnnKind kind = GnnKind::kGcn;
  int input_dim = 0;
  int hidden_dim = 16;
  int output_dim = 0;
  int layers = 2;
  double dropout = 0.5;  // on the input of every layer after the first
  Activation activation = Activation::kSelu;
  double input_dropout = 0.0;  // on the input features
  int threads = 1;  // for the layers' products (>= 1); results do not vary
  WeightInit init = WeightInit::kGlorot;
};

absl::Status ValidateGnnConfig(const GnnConfig& c);

// The operators a graph network multiplies by, built once per graph:
// GCN's D~^-1/2 (A + I) D~^-1/2 (symmetric), and the neighbour mean
// D^-1 A (a node with no neighbours gets a zero row) with its transpose.
// On a weighted graph A is the weight matrix A_w and D the weighted degree
// (row sums of A_w): GCN's D~^-1/2 (A_w + I) D~^-1/2 with D~ = D + 1 (the
// added self loop weighing 1; a stored one keeps its weight), and the
// weighted mean D^-1 A_w. Unweighted graphs give the unweighted operators
// bit for bit (every weight 1), as does a graph whose weights are all 1.
template <typename S>
struct GraphOperators {
  SpMat<S> gcn;
  SpMat<S> mean;
  SpMat<S> mean_transpose;
};

template <typename S>
GraphOperators<S> BuildGraphOperators(const Graph& g);
// Only those a model of `kind` reads: gcn (kGcn), or mean and its
// transpose (kSage); the others left empty. The same entries.
template <typename S>
GraphOperators<S> BuildGraphOperators(const Graph& g, GnnKind kind);

// D^-1/2 A D^-1/2 without self loops (LPGNN's label operator: KProp with
// KPropNorm::kSymmetric as a matrix), except that a node with no neighbours
// gets a 1 on the diagonal and keeps its value, as KProp does. Symmetric.
// Weighted: D^-1/2 A_w D^-1/2 with D the weighted degree.
template <typename S>
SpMat<S> BuildSymmetricOperator(const Graph& g);

// Sparse node features for Gnn::Forward: x (row-major, compressed) and its
// transpose (d x n, row-major), built once; the first layer's weight
// gradients read the transpose. With a propagation the first layer reads
// X' = (P^K (fill + x) - 1 mu^T) D (propagated_input.h), x holding Delta,
// and never forms it.
// Moves swap (Eigen 3.4's SparseMatrix copies on a move).
template <typename S>
struct SparseInput {
  explicit SparseInput(SpMat<S> m);
  SparseInput(SpMat<S> m, InputPropagation<S> p);
  SparseInput(SparseInput&& o) noexcept {
    x.swap(o.x);
    xt.swap(o.xt);
    propagation.swap(o.propagation);
  }
  SpMat<S> x;
  SpMat<S> xt;
  std::optional<InputPropagation<S>> propagation;
};

// A graph network over all n nodes at once.
//  GCN layer:       H' = A_gcn (drop(H) W) + b
//  GraphSAGE layer: H' = drop(H) W_self + (A_mean drop(H)) W_neigh + b
template <typename S>
class Gnn {
 public:
  // c valid (ValidateGnnConfig); ops must outlive the model.
  Gnn(const GnnConfig& c, const GraphOperators<S>* ops, PublicRandom& rng);

  const Mat<S>& Forward(const Mat<S>& x, bool training, PublicRandom* rng);
  // The same map over sparse features x (row-major; the values the dense x
  // would hold): the first layer's products cost nnz(x) x width, not
  // n x d x width. x must outlive the matching Backward call, which then
  // cannot return d_x. Input dropout draws one mask entry per stored value
  // (a zero stays zero either way), so its masks differ from the dense
  // path's draws for the same seed. With x.propagation it masks Delta's
  // stored values, before P^K: the fill is never dropped, and the entries
  // dropped are the estimates', not those of the propagated X'.
  const Mat<S>& Forward(const SparseInput<S>& x, bool training,
                        PublicRandom* rng);
  void Backward(const Mat<S>& d_output, Mat<S>* d_x = nullptr);
  std::vector<Param<S>*> Params();
  // The current parameters (aggregation kGcn or kMean); they answer over
  // the operators of the graph this model was built with.
  ModelWeights Weights() const;

 private:
  // GraphSAGE layer l aggregates its input before W_neigh when the input is
  // no wider than the output, else after (A (H W_neigh)), the cheaper order.
  bool NeighboursFirst(int l) const {
    const int in = l == 0 ? config_.input_dim : config_.hidden_dim;
    const int out =
        l == config_.layers - 1 ? config_.output_dim : config_.hidden_dim;
    return in <= out;
  }

  // Layer 0 over the sparse input (sparse_x_), and its gradients.
  void SparseFirstLayer();
  void SparseFirstLayerBackward(const Mat<S>& g);
  const Mat<S>& ForwardFrom(int first, const Mat<S>* h, bool training,
                            PublicRandom* rng);

  GnnConfig config_;
  const GraphOperators<S>* ops_;
  // The last Forward's sparse input and its transpose (after input
  // dropout: dropped_ and dropped_t_); null after a dense Forward.
  const SpMat<S>* sparse_x_ = nullptr;
  const SpMat<S>* sparse_xt_ = nullptr;
  const InputPropagation<S>* propagation_ = nullptr;  // the input's, if any
  SpMat<S> dropped_, dropped_t_;
  std::vector<Linear<S>> self_;   // GCN: the layer's W and b
  std::vector<Linear<S>> neigh_;  // GraphSAGE only: W_neigh (its bias unused)
  std::vector<Dropout<S>> dropout_;
  std::vector<const Mat<S>*> in_;
  std::vector<Mat<S>> agg_, pre_, act_;
};

}  // namespace ldpgraph::training
