#include "server/training/propagated_input.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace ldpgraph::training {
namespace {

// y := (y + (u - 1) r + 1 s) row by row, in double before rounding; r and
// s are 1 x width.
template <typename S>
void AddRankOne(const Eigen::VectorXd& u_minus_one, const Eigen::RowVectorXd& r,
                const Eigen::RowVectorXd& s, Mat<S>* y, int threads) {
  const RowParts parts(y->rows());
  const Eigen::Index width = y->cols();
  ParallelFor(parts.count, threads, [&](int, size_t p) {
    for (Eigen::Index i = parts.begin(p); i < parts.begin(p + 1); ++i) {
      const double ui = u_minus_one[i];
      for (Eigen::Index c = 0; c < width; ++c) {
        (*y)(i, c) = static_cast<S>(double((*y)(i, c)) + ui * r[c] + s[c]);
      }
    }
  });
}

// `steps` products by op, in place on *y (next is scratch).
template <typename S>
void Propagate(const SpMat<S>& op, int steps, Mat<S>* y, Mat<S>* next,
               int threads) {
  for (int k = 0; k < steps; ++k) {
    ParallelProduct(op, *y, next, threads);
    y->swap(*next);
  }
}

}  // namespace

template <typename S>
InputPropagation<S> MakeInputPropagation(SpMat<S>&& op, int steps,
                                         double fill, int cols,
                                         const std::vector<double>& mean,
                                         const std::vector<double>& scale) {
  assert(op.rows() == op.cols() && steps >= 0);
  assert(mean.size() == scale.size());
  assert(mean.empty() || mean.size() == static_cast<size_t>(cols));
  InputPropagation<S> p;
  op.makeCompressed();
  p.op_t = op.transpose();
  p.op_t.makeCompressed();
  // KProp's symmetric step is symmetric bit for bit on an unweighted graph
  // (w_vu / sqrt(d_u) / sqrt(d_v) multiplies the same factors): one copy.
  const auto same = [](const SpMat<S>& a, const SpMat<S>& b) {
    const Eigen::Index nnz = a.nonZeros();
    return nnz == b.nonZeros() &&
           std::equal(a.outerIndexPtr(), a.outerIndexPtr() + a.rows() + 1,
                      b.outerIndexPtr()) &&
           std::equal(a.innerIndexPtr(), a.innerIndexPtr() + nnz,
                      b.innerIndexPtr()) &&
           std::equal(a.valuePtr(), a.valuePtr() + nnz, b.valuePtr());
  };
  if (same(op, p.op_t)) p.op_t = SpMat<S>();
  p.steps = steps;
  p.fill = fill;
  const Eigen::Index n = op.rows();
  Eigen::VectorXd u = Eigen::VectorXd::Ones(n), next(n);
  for (int k = 0; k < steps; ++k) {
    for (Eigen::Index v = 0; v < n; ++v) {
      double acc = 0;
      for (typename SpMat<S>::InnerIterator it(op, v); it; ++it) {
        acc += double(it.value()) * u[it.col()];
      }
      next[v] = acc;
    }
    u.swap(next);
  }
  p.u_minus_one = u.array() - 1.0;
  p.offset = Eigen::VectorXd::Constant(cols, fill);
  if (!mean.empty()) {
    p.scale.resize(cols);
    for (int j = 0; j < cols; ++j) {
      p.offset[j] = fill - mean[j];
      p.scale[j] = scale[j];
    }
  }
  p.op.swap(op);
  return p;
}

template <typename S>
void InputProduct(const SpMat<S>& x, const InputPropagation<S>* p,
                  const Mat<S>& w, Mat<S>* out, int threads) {
  if (p == nullptr) {
    ParallelProduct(x, w, out, threads);
    return;
  }
  const Eigen::Index d = w.rows(), width = w.cols();
  // D W, and in double fill 1^T D W and o^T D W.
  Mat<S> dw(d, width);
  Eigen::RowVectorXd r = Eigen::RowVectorXd::Zero(width), s = r;
  for (Eigen::Index j = 0; j < d; ++j) {
    const double scale = p->scale.size() > 0 ? p->scale[j] : 1.0;
    for (Eigen::Index c = 0; c < width; ++c) {
      const S v = p->scale.size() > 0 ? static_cast<S>(scale * w(j, c))
                                      : w(j, c);
      dw(j, c) = v;
      r[c] += double(v);
      s[c] += p->offset[j] * double(v);
    }
  }
  r *= p->fill;
  Mat<S> next;
  ParallelProduct(x, dw, out, threads);
  Propagate(p->op, p->steps, out, &next, threads);
  if (!r.isZero(0) || !s.isZero(0)) {
    AddRankOne(p->u_minus_one, r, s, out, threads);
  }
}

template <typename S>
void InputTransposeProduct(const SpMat<S>& xt, const InputPropagation<S>* p,
                           const Mat<S>& g, Mat<S>* out, int threads) {
  if (p == nullptr) {
    ParallelProduct(xt, g, out, threads);
    return;
  }
  const Eigen::Index n = g.rows(), width = g.cols();
  // (u - 1)^T g and 1^T g in double, on one thread (a fixed order).
  Eigen::RowVectorXd a = Eigen::RowVectorXd::Zero(width), b = a;
  for (Eigen::Index i = 0; i < n; ++i) {
    const double ui = p->u_minus_one[i];
    for (Eigen::Index c = 0; c < width; ++c) {
      a[c] += ui * double(g(i, c));
      b[c] += double(g(i, c));
    }
  }
  a *= p->fill;
  if (p->steps == 0) {
    ParallelProduct(xt, g, out, threads);
  } else {
    Mat<S> q, next;
    ParallelProduct(p->transposed(), g, &q, threads);
    Propagate(p->transposed(), p->steps - 1, &q, &next, threads);
    ParallelProduct(xt, q, out, threads);
  }
  const bool scaled = p->scale.size() > 0;
  for (Eigen::Index j = 0; j < out->rows(); ++j) {
    const double o = p->offset[j], scale = scaled ? p->scale[j] : 1.0;
    for (Eigen::Index c = 0; c < width; ++c) {
      (*out)(j, c) = static_cast<S>(
          (double((*out)(j, c)) + a[c] + o * b[c]) * scale);
    }
  }
}

template InputPropagation<float> MakeInputPropagation<float>(
    SpMat<float>&&, int, double, int, const std::vector<double>&,
    const std::vector<double>&);
template InputPropagation<double> MakeInputPropagation<double>(
    SpMat<double>&&, int, double, int, const std::vector<double>&,
    const std::vector<double>&);
template void InputProduct<float>(const SpMat<float>&,
                                  const InputPropagation<float>*,
                                  const Mat<float>&, Mat<float>*, int);
template void InputProduct<double>(const SpMat<double>&,
                                   const InputPropagation<double>*,
                                   const Mat<double>&, Mat<double>*, int);
template void InputTransposeProduct<float>(const SpMat<float>&,
                                           const InputPropagation<float>*,
                                           const Mat<float>&, Mat<float>*,
                                           int);
template void InputTransposeProduct<double>(const SpMat<double>&,
                                            const InputPropagation<double>*,
                                            const Mat<double>&, Mat<double>*,
                                            int);

}  // namespace ldpgraph::training
