#include "server/training/models.h"

#include <cassert>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace ldpgraph::training {
namespace {

absl::Status ValidateCommon(int input, int hidden, int output, int layers,
                            double dropout, double input_dropout) {
  if (!(input_dropout >= 0.0 && input_dropout < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("input dropout must be in [0, 1), got ", input_dropout));
  }
  if (input < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("input dimension must be >= 1, got ", input));
  }
  if (output < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("output dimension must be >= 1, got ", output));
  }
  if (layers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("layers must be >= 1, got ", layers));
  }
  if (layers > 1 && hidden < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("hidden size must be >= 1, got ", hidden));
  }
  if (!(dropout >= 0.0 && dropout < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dropout must be in [0, 1), got ", dropout));
  }
  return absl::OkStatus();
}

int LayerIn(int l, int input, int hidden) { return l == 0 ? input : hidden; }
int LayerOut(int l, int layers, int hidden, int output) {
  return l == layers - 1 ? output : hidden;
}

}  // namespace

absl::Status ValidateMlpConfig(const MlpConfig& c) {
  if (c.threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads must be >= 1, got ", c.threads));
  }
  return ValidateCommon(c.input_dim, c.hidden_dim, c.output_dim, c.layers,
                        c.dropout, c.input_dropout);
}

absl::Status ValidateGnnConfig(const GnnConfig& c) {
  if (c.threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads must be >= 1, got ", c.threads));
  }
  return ValidateCommon(c.input_dim, c.hidden_dim, c.output_dim, c.layers,
                        c.dropout, c.input_dropout);
}

template <typename S>
Mlp<S>::Mlp(const MlpConfig& c, PublicRandom& rng) : config_(c) {
  for (int l = 0; l < c.layers; ++l) {
    linear_.emplace_back(LayerIn(l, c.input_dim, c.hidden_dim),
                         LayerOut(l, c.layers, c.hidden_dim, c.output_dim),
                         rng, c.threads);
    dropout_.emplace_back(l == 0 ? c.input_dropout : c.dropout, c.threads);
  }
  in_.resize(c.layers);
  pre_.resize(c.layers);
  act_.resize(c.layers);
  infer_pre_.resize(c.layers);
  infer_act_.resize(c.layers);
}

template <typename S>
const Mat<S>& Mlp<S>::Forward(const Mat<S>& x, bool training,
                              PublicRandom* rng) {
  if (training) sparse_x_ = nullptr;
  return ForwardFrom(0, &x, training, rng);
}

template <typename S>
const Mat<S>& Mlp<S>::Forward(const SparseInput<S>& x, bool training,
                              PublicRandom* rng) {
  assert(config_.input_dropout == 0.0);
  std::vector<Mat<S>>& pre = training ? pre_ : infer_pre_;
  std::vector<Mat<S>>& act = training ? act_ : infer_act_;
  if (training) sparse_x_ = &x;
  InputProduct(x.x, x.propagation ? &*x.propagation : nullptr,
               linear_[0].weight().value, &pre[0], config_.threads);
  pre[0].rowwise() += linear_[0].bias().value.row(0);
  if (config_.layers == 1) return pre[0];
  ActivationForward(config_.activation, pre[0], &act[0], config_.threads);
  return ForwardFrom(1, &act[0], training, rng);
}

template <typename S>
const Mat<S>& Mlp<S>::ForwardFrom(int first, const Mat<S>* h, bool training,
                                  PublicRandom* rng) {
  // Training and inference keep their own buffers: alternating between the
  // training rows and the validation rows then reallocates nothing.
  std::vector<Mat<S>>& pre = training ? pre_ : infer_pre_;
  std::vector<Mat<S>>& act = training ? act_ : infer_act_;
  const int last = config_.layers - 1;
  for (int l = first; l <= last; ++l) {
    const Mat<S>& in = dropout_[l].Forward(*h, training, rng);
    if (training) in_[l] = &in;
    linear_[l].Forward(in, &pre[l]);
    if (l == last) return pre[l];
    ActivationForward(config_.activation, pre[l], &act[l], config_.threads);
    h = &act[l];
  }
  return pre[last];
}

template <typename S>
void Mlp<S>::Backward(const Mat<S>& d_output, Mat<S>* d_x) {
  g_ = d_output;
  for (int l = config_.layers - 1; l >= 0; --l) {
    if (l != config_.layers - 1) {
      ActivationBackward(config_.activation, pre_[l], act_[l], &g_,
                         config_.threads);
    }
    if (l == 0 && sparse_x_ != nullptr) {
      assert(d_x == nullptr);  // no input gradient over sparse input
      const SparseInput<S>& x = *sparse_x_;
      InputTransposeProduct(x.xt, x.propagation ? &*x.propagation : nullptr,
                            g_, &linear_[0].weight().grad, config_.threads);
      ParallelColumnSum(g_, &linear_[0].bias().grad, config_.threads,
                        &scratch_);
      return;
    }
    const bool need_input = l > 0 || d_x != nullptr;
    linear_[l].Backward(*in_[l], g_, need_input ? &d_in_ : nullptr);
    if (!need_input) break;
    dropout_[l].Backward(&d_in_);
    g_.swap(d_in_);
  }
  if (d_x != nullptr) *d_x = g_;
}

template <typename S>
InputPropagation<S> ColumnStandardisation(Eigen::Index rows,
                                          const std::vector<double>& mean,
                                          const std::vector<double>& scale) {
  // P = I over the rows, K = 0: u - 1 = 0 and no product by P.
  SpMat<S> identity(rows, rows);
  identity.setIdentity();
  return MakeInputPropagation<S>(std::move(identity), 0, 0.0,
                                 static_cast<int>(mean.size()), mean, scale);
}

template <typename S>
std::vector<Param<S>*> Mlp<S>::Params() {
  std::vector<Param<S>*> out;
  for (auto& l : linear_) {
    out.push_back(&l.weight());
    out.push_back(&l.bias());
  }
  return out;
}

template <typename S>
ModelWeights Mlp<S>::Weights() const {
  ModelWeights w;
  w.aggregation = LayerAggregation::kNone;
  w.activation = config_.activation;
  for (const Linear<S>& l : linear_) {
    w.layers.push_back({l.weight().value.template cast<double>(), {},
                        l.bias().value.row(0).template cast<double>()});
  }
  return w;
}

// The operators asked for (BuildGraphOperators' two forms).
template <typename S>
GraphOperators<S> BuildGraphOperators(const Graph& g, bool with_gcn,
                                      bool with_mean);

template <typename S>
GraphOperators<S> BuildGraphOperators(const Graph& g) {
  return BuildGraphOperators<S>(g, true, true);
}

template <typename S>
GraphOperators<S> BuildGraphOperators(const Graph& g, GnnKind kind) {
  return BuildGraphOperators<S>(g, kind == GnnKind::kGcn,
                                kind == GnnKind::kSage);
}

template <typename S>
GraphOperators<S> BuildGraphOperators(const Graph& g, bool with_gcn,
                                      bool with_mean) {
  const int64_t n = g.num_nodes();
  GraphOperators<S> ops;
  std::vector<Eigen::Triplet<S, int64_t>> gcn, mean;
  if (with_gcn) gcn.reserve(2 * g.num_edges() + n);
  if (with_mean) mean.reserve(2 * g.num_edges());
  std::vector<double> inv_sqrt(n);
  for (int64_t v = 0; v < n; ++v) {
    // D~ counts the added self loop of weight 1 (a stored self loop keeps
    // its weight and is not doubled). Unweighted, weighted_degree is the
    // degree exactly.
    const bool has_loop = g.HasEdge(v, v);
    inv_sqrt[v] = 1.0 / std::sqrt(g.weighted_degree(v) + (has_loop ? 0 : 1));
  }
  for (int64_t v = 0; v < n; ++v) {
    auto nb = g.neighbors(v);
    // Unweighted, every w is 1 and row_weight the degree: the entries are
    // bit for bit those of the unweighted formulas.
    const double row_weight = g.weighted_degree(v);
    bool has_loop = false;
    for (size_t i = 0; i < nb.size(); ++i) {
      const NodeId u = nb[i];
      const double w = g.weight(v, i);
      has_loop |= (u == v);
      if (with_gcn) gcn.emplace_back(v, u, S(w * inv_sqrt[v] * inv_sqrt[u]));
      if (with_mean) mean.emplace_back(v, u, S(w / row_weight));
    }
    if (with_gcn && !has_loop) {
      gcn.emplace_back(v, v, S(inv_sqrt[v] * inv_sqrt[v]));
    }
  }
  if (with_gcn) {
    ops.gcn.resize(n, n);
    ops.gcn.setFromTriplets(gcn.begin(), gcn.end());
  }
  if (with_mean) {
    ops.mean.resize(n, n);
    ops.mean.setFromTriplets(mean.begin(), mean.end());
    ops.mean_transpose = ops.mean.transpose();
  }
  return ops;
}

template <typename S>
SpMat<S> BuildSymmetricOperator(const Graph& g) {
  const int64_t n = g.num_nodes();
  std::vector<double> inv_sqrt(n);
  for (int64_t v = 0; v < n; ++v) {
    inv_sqrt[v] =
        g.degree(v) > 0 ? 1.0 / std::sqrt(g.weighted_degree(v)) : 0.0;
  }
  std::vector<Eigen::Triplet<S, int64_t>> entries;
  entries.reserve(2 * g.num_edges() + 1);
  for (int64_t v = 0; v < n; ++v) {
    if (g.degree(v) == 0) entries.emplace_back(v, v, S(1));
    auto nb = g.neighbors(v);
    for (size_t i = 0; i < nb.size(); ++i) {
      entries.emplace_back(
          v, nb[i], S(g.weight(v, i) * inv_sqrt[v] * inv_sqrt[nb[i]]));
    }
  }
  SpMat<S> out(n, n);
  out.setFromTriplets(entries.begin(), entries.end());
  return out;
}

template <typename S>
Gnn<S>::Gnn(const GnnConfig& c, const GraphOperators<S>* ops,
            PublicRandom& rng)
    : config_(c), ops_(ops) {
  for (int l = 0; l < c.layers; ++l) {
    const int in = LayerIn(l, c.input_dim, c.hidden_dim);
    const int out = LayerOut(l, c.layers, c.hidden_dim, c.output_dim);
    self_.emplace_back(in, out, rng, c.threads, c.init);
    if (c.kind == GnnKind::kSage) {
      neigh_.emplace_back(in, out, rng, c.threads, c.init);
      // PyG's SAGEConv has one bias (its lin_l's): W_neigh's stays unused.
      neigh_.back().bias().value.setZero();
    }
    dropout_.emplace_back(l == 0 ? c.input_dropout : c.dropout, c.threads);
  }
  in_.resize(c.layers);
  agg_.resize(c.layers);
  pre_.resize(c.layers);
  act_.resize(c.layers);
}

template <typename S>
SparseInput<S>::SparseInput(SpMat<S> m) {
  x.swap(m);
  x.makeCompressed();
  xt = x.transpose();
  xt.makeCompressed();
}

template <typename S>
SparseInput<S>::SparseInput(SpMat<S> m, InputPropagation<S> p)
    : SparseInput(std::move(m)) {
  propagation.emplace(std::move(p));
}

template <typename S>
const Mat<S>& Gnn<S>::Forward(const Mat<S>& x, bool training,
                              PublicRandom* rng) {
  sparse_x_ = sparse_xt_ = nullptr;
  propagation_ = nullptr;
  return ForwardFrom(0, &x, training, rng);
}

template <typename S>
const Mat<S>& Gnn<S>::Forward(const SparseInput<S>& x, bool training,
                              PublicRandom* rng) {
  sparse_x_ = &x.x;
  sparse_xt_ = &x.xt;
  propagation_ = x.propagation ? &*x.propagation : nullptr;
  if (training && config_.input_dropout > 0) {
    dropped_ = x.x;
    if (dropout_[0].ForwardValues(x.x.valuePtr(), dropped_.valuePtr(),
                                  x.x.nonZeros(), training, rng)) {
      dropped_t_ = dropped_.transpose();
      sparse_x_ = &dropped_;
      sparse_xt_ = &dropped_t_;
    }
  }
  SparseFirstLayer();
  if (config_.layers == 1) return pre_[0];
  ActivationForward(config_.activation, pre_[0], &act_[0], config_.threads);
  return ForwardFrom(1, &act_[0], training, rng);
}

// Layer 0 in the cheaper order whatever the widths: X W first (nnz x out;
// with a propagation, X' W as propagated_input.h forms it), then the graph
// operator at the output's width.
template <typename S>
void Gnn<S>::SparseFirstLayer() {
  const int threads = config_.threads;
  const SpMat<S>& x = *sparse_x_;
  const InputPropagation<S>* p = propagation_;
  Mat<S> tmp;
  if (config_.kind == GnnKind::kGcn) {
    InputProduct(x, p, self_[0].weight().value, &tmp, threads);
    ParallelProduct(ops_->gcn, tmp, &pre_[0], threads);
  } else {
    InputProduct(x, p, self_[0].weight().value, &pre_[0], threads);
    InputProduct(x, p, neigh_[0].weight().value, &tmp, threads);
    ParallelProduct(ops_->mean, tmp, &agg_[0], threads);
    pre_[0] += agg_[0];
  }
  pre_[0].rowwise() += self_[0].bias().value.row(0);
}

// Gradients of layer 0 over the sparse input: d/dW = X^T (A^T g), formed
// as the transpose X^T (d x n) times the n x out gradient (X'^T with a
// propagation).
template <typename S>
void Gnn<S>::SparseFirstLayerBackward(const Mat<S>& g) {
  const int threads = config_.threads;
  std::vector<Mat<S>> scratch;
  Mat<S> t;
  ParallelColumnSum(g, &self_[0].bias().grad, threads, &scratch);
  const InputPropagation<S>* p = propagation_;
  if (config_.kind == GnnKind::kGcn) {
    ParallelProduct(ops_->gcn, g, &t, threads);  // A symmetric
    InputTransposeProduct(*sparse_xt_, p, t, &self_[0].weight().grad,
                          threads);
  } else {
    InputTransposeProduct(*sparse_xt_, p, g, &self_[0].weight().grad,
                          threads);
    ParallelProduct(ops_->mean_transpose, g, &t, threads);
    InputTransposeProduct(*sparse_xt_, p, t, &neigh_[0].weight().grad,
                          threads);
  }
}

template <typename S>
const Mat<S>& Gnn<S>::ForwardFrom(int first, const Mat<S>* h, bool training,
                                  PublicRandom* rng) {
  const int last = config_.layers - 1;
  const int threads = config_.threads;
  Mat<S> tmp;
  for (int l = first; l <= last; ++l) {
    in_[l] = &dropout_[l].Forward(*h, training, rng);
    const Mat<S>& in = *in_[l];
    if (config_.kind == GnnKind::kGcn) {
      // A (H W) + b: multiply by W first, the narrower side.
      ParallelProduct(in, self_[l].weight().value, &tmp, threads);
      ParallelProduct(ops_->gcn, tmp, &pre_[l], threads);
      pre_[l].rowwise() += self_[l].bias().value.row(0);
    } else if (NeighboursFirst(l)) {
      // (A H) W_neigh, the aggregate formed at the input's width.
      ParallelProduct(ops_->mean, in, &agg_[l], threads);
      self_[l].Forward(in, &pre_[l]);
      ParallelProduct(agg_[l], neigh_[l].weight().value, &tmp, threads);
      pre_[l] += tmp;
    } else {
      // A (H W_neigh): the same map, the aggregate formed at the narrower
      // output width (a wide input's n x d aggregate costs d/out as much).
      self_[l].Forward(in, &pre_[l]);
      ParallelProduct(in, neigh_[l].weight().value, &tmp, threads);
      ParallelProduct(ops_->mean, tmp, &agg_[l], threads);
      pre_[l] += agg_[l];
    }
    if (l == last) return pre_[l];
    ActivationForward(config_.activation, pre_[l], &act_[l],
                      config_.threads);
    h = &act_[l];
  }
  return pre_[last];
}

template <typename S>
void Gnn<S>::Backward(const Mat<S>& d_output, Mat<S>* d_x) {
  const int threads = config_.threads;
  Mat<S> g = d_output, d_in, t;
  std::vector<Mat<S>> scratch;
  for (int l = config_.layers - 1; l >= 0; --l) {
    if (l != config_.layers - 1) {
      ActivationBackward(config_.activation, pre_[l], act_[l], &g,
                         config_.threads);
    }
    if (l == 0 && sparse_x_ != nullptr) {
      assert(d_x == nullptr);  // no input gradient over sparse input
      SparseFirstLayerBackward(g);
      break;
    }
    const bool need_input = l > 0 || d_x != nullptr;
    if (config_.kind == GnnKind::kGcn) {
      ParallelColumnSum(g, &self_[l].bias().grad, threads, &scratch);
      // A is symmetric: A^T g = A g.
      ParallelProduct(ops_->gcn, g, &t, threads);
      ParallelTransposeProduct(*in_[l], t, &self_[l].weight().grad, threads,
                               &scratch);
      if (need_input) {
        ParallelProduct(t, Mat<S>(self_[l].weight().value.transpose()),
                        &d_in, threads);
      }
    } else if (NeighboursFirst(l)) {
      self_[l].Backward(*in_[l], g, need_input ? &d_in : nullptr);
      ParallelTransposeProduct(agg_[l], g, &neigh_[l].weight().grad, threads,
                               &scratch);
      if (need_input) {
        ParallelProduct(g, Mat<S>(neigh_[l].weight().value.transpose()), &t,
                        threads);
        Mat<S> back;
        ParallelProduct(ops_->mean_transpose, t, &back, threads);
        d_in += back;
      }
    } else {
      // d(A H W)/dW = H^T (A^T g); d/dH = (A^T g) W^T.
      self_[l].Backward(*in_[l], g, need_input ? &d_in : nullptr);
      ParallelProduct(ops_->mean_transpose, g, &t, threads);
      ParallelTransposeProduct(*in_[l], t, &neigh_[l].weight().grad, threads,
                               &scratch);
      if (need_input) {
        Mat<S> back;
        ParallelProduct(t, Mat<S>(neigh_[l].weight().value.transpose()), &back,
                        threads);
        d_in += back;
      }
    }
    if (!need_input) break;
    dropout_[l].Backward(&d_in);
    g.swap(d_in);
  }
  if (d_x != nullptr) *d_x = std::move(g);
}

template <typename S>
std::vector<Param<S>*> Gnn<S>::Params() {
  std::vector<Param<S>*> out;
  for (size_t l = 0; l < self_.size(); ++l) {
    out.push_back(&self_[l].weight());
    out.push_back(&self_[l].bias());
    if (config_.kind == GnnKind::kSage) out.push_back(&neigh_[l].weight());
  }
  return out;
}

template <typename S>
ModelWeights Gnn<S>::Weights() const {
  ModelWeights w;
  const bool sage = config_.kind == GnnKind::kSage;
  w.aggregation = sage ? LayerAggregation::kMean : LayerAggregation::kGcn;
  w.activation = config_.activation;
  for (size_t l = 0; l < self_.size(); ++l) {
    ModelWeights::Layer layer{self_[l].weight().value.template cast<double>(),
                              {},
                              self_[l].bias().value.row(0).template cast<double>()};
    if (sage) layer.neigh = neigh_[l].weight().value.template cast<double>();
    w.layers.push_back(std::move(layer));
  }
  return w;
}

template class Mlp<float>;
template class Mlp<double>;
template InputPropagation<float> ColumnStandardisation<float>(
    Eigen::Index, const std::vector<double>&, const std::vector<double>&);
template InputPropagation<double> ColumnStandardisation<double>(
    Eigen::Index, const std::vector<double>&, const std::vector<double>&);
template class Gnn<float>;
template class Gnn<double>;
template struct SparseInput<float>;
template struct SparseInput<double>;
template GraphOperators<float> BuildGraphOperators<float>(const Graph&);
template GraphOperators<double> BuildGraphOperators<double>(const Graph&);
template GraphOperators<float> BuildGraphOperators<float>(const Graph&,
                                                          GnnKind);
template GraphOperators<double> BuildGraphOperators<double>(const Graph&,
                                                            GnnKind);
template SpMat<float> BuildSymmetricOperator<float>(const Graph&);
template SpMat<double> BuildSymmetricOperator<double>(const Graph&);

}  // namespace ldpgraph::training
