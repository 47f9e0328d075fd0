#include "server/training/linkteller.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "server/training/losses.h"

namespace ldpgraph::training {

// Per-thread scratch: the accumulator of a sparse change (rows in order of
// first appearance, pos[v] its index or -1), and a dense influence vector
// (zero between sources).
struct LinkTeller::Workspace {
  explicit Workspace(size_t n) : pos(n, -1), influence(n, 0.0) {}
  std::vector<int64_t> pos;
  std::vector<uint32_t> rows;
  std::vector<double> acc;
  Eigen::Index cols = 0;
  std::vector<double> influence;
};

namespace {

absl::Status CheckLayers(const ModelWeights& w, Eigen::Index input_dim) {
  if (w.layers.empty()) {
    return absl::InvalidArgumentError("the model has no layers");
  }
  Eigen::Index in = input_dim;
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const ModelWeights::Layer& layer = w.layers[l];
    const Eigen::Index out = layer.self.cols();
    if (layer.self.rows() != in || out < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer ", l, "'s weight is ", layer.self.rows(), " x ", out,
          "; its input is ", in, " wide"));
    }
    if (layer.bias.cols() != out) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer ", l, "'s bias has ", layer.bias.cols(), " entries for ",
          out, " outputs"));
    }
    const bool mean = w.aggregation == LayerAggregation::kMean;
    if (mean && (layer.neigh.rows() != in || layer.neigh.cols() != out)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer ", l, "'s neighbour weight is ", layer.neigh.rows(), " x ",
          layer.neigh.cols(), ", not ", in, " x ", out));
    }
    if (!layer.self.allFinite() || !layer.bias.allFinite() ||
        (mean && !layer.neigh.allFinite())) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer ", l, " has a NaN or infinite parameter"));
    }
    in = out;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LinkTeller> LinkTeller::Create(const QueriedModel& m,
                                              double delta) {
  if (m.weights == nullptr || m.graph == nullptr || m.features == nullptr) {
    return absl::InvalidArgumentError(
        "LinkTeller needs the model's weights, graph and features");
  }
  if (!(delta > 0) || !std::isfinite(delta)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the influence step delta must be finite and > 0, got ",
                     delta));
  }
  const Mat<double>& x = *m.features;
  const size_t n = m.graph->num_nodes();
  if (static_cast<size_t>(x.rows()) != n || n == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the features have ", x.rows(), " rows for a graph of ", n,
        " nodes"));
  }
  if (!x.allFinite()) {
    return absl::InvalidArgumentError("the features contain NaN or infinity");
  }
  if (m.feature_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "feature steps must be >= 0, got ", m.feature_steps));
  }
  if (m.feature_steps > 0 &&
      (m.feature_operator == nullptr ||
       static_cast<size_t>(m.feature_operator->rows()) != n ||
       static_cast<size_t>(m.feature_operator->cols()) != n)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "feature steps need an n x n feature operator (n = ", n, ")"));
  }
  RETURN_IF_ERROR(CheckLayers(*m.weights, x.cols()));
  LinkTeller t;
  t.n_ = n;
  t.delta_ = delta;
  t.weights_ = *m.weights;
  t.x_ = m.features;
  t.steps_ = m.feature_steps;
  if (t.steps_ > 0) t.t_transpose_ = m.feature_operator->transpose();
  if (t.weights_.aggregation != LayerAggregation::kNone) {
    t.ops_ = BuildGraphOperators<double>(*m.graph);
  }
  // The base forward pass. Layer 0 multiplies X by its weights first and
  // propagates the narrow product: (T^K X) W = T^K (X W).
  const size_t layers = t.weights_.layers.size();
  t.pre_.resize(layers);
  t.act_.resize(layers);
  for (size_t l = 0; l < layers; ++l) {
    const ModelWeights::Layer& w = t.weights_.layers[l];
    const Mat<double>& in = l == 0 ? x : t.act_[l - 1];
    const bool mean = t.weights_.aggregation == LayerAggregation::kMean;
    Mat<double> self = in * w.self, neigh;
    if (mean) neigh = in * w.neigh;
    for (int k = 0; l == 0 && k < t.steps_; ++k) {
      self = *m.feature_operator * self;
      if (mean) neigh = *m.feature_operator * neigh;
    }
    switch (t.weights_.aggregation) {
      case LayerAggregation::kNone: t.pre_[l] = self; break;
      case LayerAggregation::kGcn: t.pre_[l] = t.ops_.gcn * self; break;
      case LayerAggregation::kMean:
        t.pre_[l] = self + t.ops_.mean * neigh;
        break;
    }
    t.pre_[l].rowwise() += w.bias;
    if (l + 1 < layers) {
      ActivationForward(t.weights_.activation, t.pre_[l], &t.act_[l]);
    }
  }
  t.posteriors_ = Softmax(t.pre_.back());
  return t;
}

void LinkTeller::Accumulate(const SpMat<double>* op_transpose,
                            const RowDelta& d, Workspace& ws) const {
  ws.cols = d.values.cols();
  auto add = [&](uint32_t v, double w, Eigen::Index i) {
    if (ws.pos[v] < 0) {
      ws.pos[v] = static_cast<int64_t>(ws.rows.size());
      ws.rows.push_back(v);
      ws.acc.resize(ws.acc.size() + ws.cols, 0.0);
    }
    double* row = ws.acc.data() + ws.pos[v] * ws.cols;
    for (Eigen::Index j = 0; j < ws.cols; ++j) row[j] += w * d.values(i, j);
  };
  for (size_t i = 0; i < d.rows.size(); ++i) {
    const uint32_t r = d.rows[i];
    if (op_transpose == nullptr) {
      add(r, 1.0, static_cast<Eigen::Index>(i));
      continue;
    }
    for (SpMat<double>::InnerIterator it(*op_transpose, r); it; ++it) {
      add(static_cast<uint32_t>(it.col()), it.value(),
          static_cast<Eigen::Index>(i));
    }
  }
}

LinkTeller::RowDelta LinkTeller::TakeAccumulated(Workspace& ws) const {
  RowDelta out;
  out.rows = ws.rows;
  out.values = Eigen::Map<const Mat<double>>(
      ws.acc.data(), static_cast<Eigen::Index>(ws.rows.size()), ws.cols);
  for (uint32_t v : ws.rows) ws.pos[v] = -1;
  ws.rows.clear();
  ws.acc.clear();
  return out;
}

void LinkTeller::Influence(uint32_t u, Workspace& ws,
                           std::vector<std::pair<uint32_t, double>>* out)
    const {
  // p = T^K e_u: the rows of T^K X that scaling x_u changes, and by how much
  // (times delta x_u).
  RowDelta p{{u}, Mat<double>::Ones(1, 1)};
  for (int k = 0; k < steps_; ++k) {
    Accumulate(&t_transpose_, p, ws);
    p = TakeAccumulated(ws);
  }
  const RowVec<double> dx = delta_ * x_->row(u);
  const size_t layers = weights_.layers.size();
  const bool mean = weights_.aggregation == LayerAggregation::kMean;
  RowDelta act;  // the change of the previous layer's activation
  for (size_t l = 0; l < layers; ++l) {
    const ModelWeights::Layer& w = weights_.layers[l];
    RowDelta pre;
    if (l == 0) {
      // Rank one per weight: aggregate p's single column, then multiply by
      // delta x_u W (kMean: column 0 the coefficient of delta x_u W_self,
      // column 1 of delta x_u W_neigh).
      if (mean) {
        const Eigen::Index rows = static_cast<Eigen::Index>(p.rows.size());
        RowDelta own{p.rows, Mat<double>::Zero(rows, 2)};
        own.values.col(0) = p.values.col(0);
        RowDelta spread{p.rows, Mat<double>::Zero(rows, 2)};
        spread.values.col(1) = p.values.col(0);
        Accumulate(nullptr, own, ws);
        Accumulate(&ops_.mean_transpose, spread, ws);
      } else {
        Accumulate(weights_.aggregation == LayerAggregation::kGcn ? &ops_.gcn
                                                                  : nullptr,
                   p, ws);
      }
      RowDelta coef = TakeAccumulated(ws);
      pre.rows = std::move(coef.rows);
      pre.values = coef.values.col(0) * (dx * w.self);
      if (mean) pre.values += coef.values.col(1) * (dx * w.neigh);
    } else {
      // The change of H W_self (and H W_neigh) over the changed rows of H.
      RowDelta self{act.rows, act.values * w.self}, neigh;
      if (mean) neigh = {act.rows, act.values * w.neigh};
      switch (weights_.aggregation) {
        case LayerAggregation::kNone: Accumulate(nullptr, self, ws); break;
        case LayerAggregation::kGcn: Accumulate(&ops_.gcn, self, ws); break;
        case LayerAggregation::kMean:
          Accumulate(nullptr, self, ws);
          Accumulate(&ops_.mean_transpose, neigh, ws);
          break;
      }
      pre = TakeAccumulated(ws);
    }
    const Eigen::Index rows = static_cast<Eigen::Index>(pre.rows.size());
    // The changed rows' new values.
    Mat<double> moved(rows, pre.values.cols());
    for (Eigen::Index i = 0; i < rows; ++i) {
      moved.row(i) = pre_[l].row(pre.rows[i]) + pre.values.row(i);
    }
    if (l + 1 < layers) {
      act.rows = std::move(pre.rows);
      ActivationForward(weights_.activation, moved, &act.values);
      for (Eigen::Index i = 0; i < rows; ++i) {
        act.values.row(i) -= act_[l].row(act.rows[i]);
      }
      continue;
    }
    const Mat<double> moved_posteriors = Softmax(moved);
    out->clear();
    for (Eigen::Index i = 0; i < rows; ++i) {
      const double change =
          (moved_posteriors.row(i) - posteriors_.row(pre.rows[i])).norm();
      out->emplace_back(pre.rows[i], change / delta_);
    }
  }
}

std::vector<std::pair<uint32_t, double>> LinkTeller::InfluenceOf(
    uint32_t u) const {
  Workspace ws(n_);
  std::vector<std::pair<uint32_t, double>> out;
  Influence(u, ws, &out);
  return out;
}

absl::StatusOr<std::vector<double>> LinkTeller::DirectedScores(
    const std::vector<Edge>& pairs, const std::vector<bool>* is_source,
    int threads) const {
  if (is_source != nullptr && is_source->size() != n_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the source flags cover ", is_source->size(), " nodes, not ", n_));
  }
  if (threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads must be >= 1, got ", threads));
  }
  // Each node's pairs: (the other end, the slot of this direction).
  std::vector<std::vector<std::pair<uint32_t, size_t>>> of(n_);
  for (size_t i = 0; i < pairs.size(); ++i) {
    const Edge& e = pairs[i];
    if (e.u >= n_ || e.v >= n_ || e.u == e.v) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pair ", i, " (", e.u, ", ", e.v, ") is not two distinct nodes of ",
          n_));
    }
    of[e.u].emplace_back(e.v, 2 * i);
    of[e.v].emplace_back(e.u, 2 * i + 1);
  }
  std::vector<uint32_t> sources;
  for (uint32_t v = 0; v < n_; ++v) {
    if (!of[v].empty() && (is_source == nullptr || (*is_source)[v])) {
      sources.push_back(v);
    }
  }
  // I(u -> v) in slot 2i (u the pair's first node) or 2i + 1: each slot is
  // written by one source, so threads never share one.
  std::vector<double> directed(2 * pairs.size(),
                               std::numeric_limits<double>::quiet_NaN());
  std::vector<Workspace> ws(threads, Workspace(n_));
  std::vector<std::vector<std::pair<uint32_t, double>>> found(threads);
  ParallelFor(sources.size(), threads, [&](int w, size_t s) {
    const uint32_t u = sources[s];
    Influence(u, ws[w], &found[w]);
    std::vector<double>& dense = ws[w].influence;
    for (const auto& [v, value] : found[w]) dense[v] = value;
    for (const auto& [v, slot] : of[u]) directed[slot] = dense[v];
    for (const auto& [v, value] : found[w]) dense[v] = 0.0;
  });
  return directed;
}

absl::StatusOr<std::vector<double>> LinkTeller::Scores(
    const std::vector<Edge>& pairs, int threads) const {
  ASSIGN_OR_RETURN(std::vector<double> directed,
                   DirectedScores(pairs, nullptr, threads));
  std::vector<double> out(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    out[i] = directed[2 * i] + directed[2 * i + 1];
  }
  return out;
}

}  // namespace ldpgraph::training
