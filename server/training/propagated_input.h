// A graph network's first-layer input that was propagated and
// standardised but is never formed: LPGNN's KProp on wide sparse features
// (Gnn's sparse Forward, models.h, reads it through SparseInput).
//
//   X' = (P^K X - 1 mu^T) D,    X = fill 1 1^T + Delta
//
// P (n x n) is one KProp step as a matrix (KPropOperator, server/
// propagation), K the steps, X (n x d) the estimated features held as a
// constant `fill` on every entry (Multi-bit's (alpha + beta) / 2 on the
// d - m unreported dimensions of each row; 0 for plain sparse features)
// plus the sparse Delta, and mu, D = diag(scale) the column standardisation
// of P^K X (mu = 0 and D = I without one). Everything before the first
// nonlinearity is linear in X, so the first layer's products are formed
// right to left, KProp moved to the layer's narrow width:
//
//   X' W   = P^K (Delta (D W)) + (u - 1) (fill 1^T D W) + 1 (o^T D W)
//   X'^T G = D [Delta^T (P^T)^K G + fill 1 ((u - 1)^T G) + o (1^T G)]
//
// with u = P^K 1 (1 for the mean step, whose rows sum to 1) and o = fill 1 -
// mu, written around u - 1 and fill - mu so that no two large terms cancel
// in float. The rank-one terms are added up in double.
//
// Cost of a product at width w: nnz(Delta) w + K nnz(P) w, plus d w; memory:
// Delta and its transpose, P and P^T, and a few n x w and d x w matrices,
// never n x d. Results are the same bits for any thread count (the products
// split rows at fixed boundaries; the sums over nodes run on one thread).
#pragma once

#include <utility>
#include <vector>

#include <Eigen/Dense>

#include "server/training/nn.h"

namespace ldpgraph::training {

// P, K, fill and the standardisation of X' (above). Moves swap (Eigen
// 3.4's SparseMatrix copies on a move), so handing one over copies nothing.
template <typename S>
struct InputPropagation {
  InputPropagation() = default;
  InputPropagation(const InputPropagation&) = default;
  InputPropagation& operator=(const InputPropagation&) = default;
  InputPropagation(InputPropagation&& o) noexcept { Swap(o); }
  InputPropagation& operator=(InputPropagation&& o) noexcept {
    Swap(o);
    return *this;
  }
  void Swap(InputPropagation& o) noexcept {
    op.swap(o.op);
    op_t.swap(o.op_t);
    std::swap(steps, o.steps);
    std::swap(fill, o.fill);
    u_minus_one.swap(o.u_minus_one);
    offset.swap(o.offset);
    scale.swap(o.scale);
  }

  SpMat<S> op;    // P, n x n
  SpMat<S> op_t;  // P^T; empty when P is symmetric bit for bit
  const SpMat<S>& transposed() const { return op_t.size() > 0 ? op_t : op; }
  int steps = 0;  // K >= 0
  double fill = 0;
  Eigen::VectorXd u_minus_one;  // P^K 1 - 1, n entries
  Eigen::VectorXd offset;       // o_j = fill - mu_j, d entries
  Eigen::VectorXd scale;        // D's diagonal, d entries; empty: D = I
};

// The propagation of d-column features over op (n x n, its rows and
// columns the nodes), K = steps >= 0 and the fill; mean and scale the
// standardisation's mu and D (both d entries), or both empty for none. u is
// evaluated in double over op's entries. op is taken over (swapped out).
template <typename S>
InputPropagation<S> MakeInputPropagation(SpMat<S>&& op, int steps,
                                         double fill, int cols,
                                         const std::vector<double>& mean,
                                         const std::vector<double>& scale);

// out = X' w (n x w.cols()) for x = Delta (n x d, as the layer reads it:
// after input dropout) and w (d x width). p null: out = x w, the plain
// sparse product.
template <typename S>
void InputProduct(const SpMat<S>& x, const InputPropagation<S>* p,
                  const Mat<S>& w, Mat<S>* out, int threads);

// out = X'^T g (d x g.cols()) for xt = Delta^T (d x n, the same Delta as
// the forward pass) and g (n x width). p null: out = xt g.
template <typename S>
void InputTransposeProduct(const SpMat<S>& xt, const InputPropagation<S>* p,
                           const Mat<S>& g, Mat<S>* out, int threads);

}  // namespace ldpgraph::training
