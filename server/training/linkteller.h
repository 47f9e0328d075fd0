// LinkTeller's influence attack on a released graph model (Wu, Yang, Pan
// and Yuan, "LinkTeller: Recovering Private Edges from Graph Neural
// Networks via Influence Analysis", IEEE S&P 2022).
//
// Threat model. The adversary may query the released model, which answers
// over the graph it was trained on, with node features of its choice, and
// reads every node's class posteriors. To score a pair (u, v) it scales u's
// input row, x_u -> (1 + delta) x_u, and measures how far v's posteriors
// move, normalised by delta:
//   I(u -> v) = || softmax(f(X'))_v - softmax(f(X))_v ||_2 / delta.
// A pair's score is I(u -> v) + I(v -> u) (the paper's "sum"
// symmetrisation); edges have large influence. DirectedScores keeps the two
// directions apart, for an adversary that queries a sample of sources only.
//
// The model here: `feature_steps` steps of a fixed linear feature operator T
// (LPGNN's KProp, server/propagation KPropOperator) and then the layers of
// ModelWeights (an MLP, GCN or GraphSAGE) over the graph's operators
// (BuildGraphOperators). Everything is evaluated in double.
//
// Cost. Scaling row u changes T^K X only in the rows of p = T^K e_u (u's
// K-hop ball), and every layer that aggregates widens the changed rows by
// one hop: the attack computes the change of exactly those rows, never a
// full forward pass per source, from one full forward pass of the base.
// Layer 0's change is rank one, (A p) (delta x_u W). Nodes beyond the
// receptive field (K + the aggregating layers' hops) get influence exactly
// 0, and an MLP without KProp influences no node but itself.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/graph/graph.h"
#include "server/training/models.h"
#include "server/training/nn.h"

namespace ldpgraph::training {

// LinkTeller's default influence step (its authors' code).
inline constexpr double kLinkTellerDelta = 1e-4;

// The released model as the adversary queries it. Pointers must outlive the
// LinkTeller built from it.
struct QueriedModel {
  const ModelWeights* weights = nullptr;
  // The graph the model answers over (its layers' operators); n nodes.
  const Graph* graph = nullptr;
  // X, n x d: the input rows the adversary scales.
  const Mat<double>* features = nullptr;
  // T, n x n, applied feature_steps times to X before the layers (unused,
  // may be null, when feature_steps is 0).
  const SpMat<double>* feature_operator = nullptr;
  int feature_steps = 0;
};

class LinkTeller {
 public:
  // INVALID_ARGUMENT naming what is wrong: a missing member, no layers,
  // mismatched shapes (X's columns, layers' widths, T or the graph not n x
  // n), feature_steps < 0, X not finite, delta not finite and > 0.
  static absl::StatusOr<LinkTeller> Create(const QueriedModel& m,
                                           double delta = kLinkTellerDelta);

  // I(u -> v) for every node v whose output scaling row u can change (v = u
  // included), as (v, influence); every other node's influence is exactly
  // 0. u < n.
  std::vector<std::pair<uint32_t, double>> InfluenceOf(uint32_t u) const;

  // Both directions of each pair (u != v, both < n; else INVALID_ARGUMENT
  // naming the position): slot 2i holds I(u -> v) and slot 2i + 1
  // I(v -> u) of pairs[i] = (u, v), NaN where the direction's source is not
  // among `sources` (when given: n flags, true for a source). Each source's
  // influence is computed once, sources split across `threads` (>= 1); the
  // result does not depend on the thread count.
  absl::StatusOr<std::vector<double>> DirectedScores(
      const std::vector<Edge>& pairs, const std::vector<bool>* sources,
      int threads) const;

  // The score I(u -> v) + I(v -> u) of each pair (the paper's "sum"
  // symmetrisation), every node a source; errors as DirectedScores.
  absl::StatusOr<std::vector<double>> Scores(const std::vector<Edge>& pairs,
                                             int threads) const;

  size_t nodes() const { return n_; }

 private:
  struct Workspace;
  // Rows of a sparse change (row ids and their values, rows x cols).
  struct RowDelta {
    std::vector<uint32_t> rows;
    Mat<double> values;
  };

  LinkTeller() = default;
  void Influence(uint32_t u, Workspace& ws,
                 std::vector<std::pair<uint32_t, double>>* out) const;
  // op * d over d's rows (op_transpose's row r lists the rows r feeds), or
  // d itself when op_transpose is null, added into ws's accumulator.
  void Accumulate(const SpMat<double>* op_transpose, const RowDelta& d,
                  Workspace& ws) const;
  RowDelta TakeAccumulated(Workspace& ws) const;

  size_t n_ = 0;
  double delta_ = 0;
  ModelWeights weights_;
  const Mat<double>* x_ = nullptr;  // X
  SpMat<double> t_transpose_;     // T^T
  int steps_ = 0;
  GraphOperators<double> ops_;    // gcn is symmetric; mean_transpose used
  // The base forward pass: per layer the pre-activation and activation
  // (the last layer's pre-activation is the logits), and the posteriors.
  std::vector<Mat<double>> pre_, act_;
  Mat<double> posteriors_;
};

}  // namespace ldpgraph::training
