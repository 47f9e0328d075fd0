#include "server/embedding/dpne.h"

#include <chrono>
#include <cmath>
#include <utility>
#include <vector>

#include "Eigen/Cholesky"
#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "common/dp/continuous_noise.h"
#include "common/status_macros.h"
#include "common/stopwatch.h"
#include "server/embedding/proximity.h"

namespace ldpgraph::embedding {
namespace {

using RowMatrix =
    Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// One side of the factorisation seen from the other: row r of the
// objective pairs factor row r with the rows idx(r) of the other factor,
// with targets val(r). For W these are the rows of log M (CSR), for H its
// columns (the transpose, built once).
struct Pattern {
  std::vector<uint64_t> offsets;  // rows + 1
  std::vector<uint32_t> indices;
  std::vector<float> values;

  size_t rows() const { return offsets.size() - 1; }
};

Pattern FromRows(SparseRows m) {
  Pattern p;
  p.offsets = std::move(m.offsets);
  p.indices = std::move(m.indices);
  p.values = std::move(m.values);
  return p;
}

// The transpose (counting sort by column): column j of p as row j.
Pattern Transpose(const Pattern& p, size_t cols) {
  Pattern t;
  t.offsets.assign(cols + 1, 0);
  for (uint32_t j : p.indices) ++t.offsets[j + 1];
  for (size_t j = 0; j < cols; ++j) t.offsets[j + 1] += t.offsets[j];
  t.indices.resize(p.indices.size());
  t.values.resize(p.values.size());
  std::vector<uint64_t> next(t.offsets.begin(), t.offsets.end() - 1);
  for (size_t i = 0; i < p.rows(); ++i) {
    for (uint64_t q = p.offsets[i]; q < p.offsets[i + 1]; ++q) {
      const uint64_t at = next[p.indices[q]]++;
      t.indices[at] = static_cast<uint32_t>(i);
      t.values[at] = p.values[q];
    }
  }
  return t;
}

// One row's ridge problem and its scratch, sized once. Row r pairs with
// the rows f_j (j in idx(r)) of the other factor, gathered as the c x k
// matrix G, and the targets v; the solution is
//   x = (G^T G + reg I)^{-1} (G^T v - s)
// for a shift s (the perturbation eta / 2, or none). Two exact forms:
//   c >= k: the k x k system as written;
//   c <  k: with K = G G^T + reg I (c x c, Woodbury),
//           x = G^T K^{-1} (v + G s / reg) - s / reg,
// which costs c^2 k + c^3 / 3 instead of c k^2 + k^3 / 3: most rows of a
// sparse graph's M have fewer non-zeros than k. c = 0 (an isolated node)
// gives x = -s / reg.
class RidgeSolver {
 public:
  explicit RidgeSolver(int dim) : k_(dim), x_(dim) {}

  // Gathers row r of p against `other`.
  void Gather(const Pattern& p, size_t r, const RowMatrix& other) {
    const uint64_t begin = p.offsets[r];
    c_ = static_cast<Eigen::Index>(p.offsets[r + 1] - begin);
    if (g_.rows() < c_) {
      g_.resize(c_, k_);
      v_.resize(c_);
    }
    for (Eigen::Index q = 0; q < c_; ++q) {
      g_.row(q) = other.row(p.indices[begin + q]);
      v_[q] = p.values[begin + q];
    }
  }

  // The solution for the gathered row; shift may be null (s = 0). reg > 0,
  // so both systems are symmetric positive definite.
  const Eigen::VectorXd& Solve(double reg, const double* shift) {
    const auto g = g_.topRows(c_);
    const auto v = v_.head(c_);
    if (c_ >= k_) {
      a_.setZero(k_, k_);
      a_.selfadjointView<Eigen::Lower>().rankUpdate(g.transpose());
      a_.diagonal().array() += reg;
      rhs_.noalias() = g.transpose() * v;
      if (shift != nullptr) rhs_ -= Shift(shift);
      llt_.compute(a_);  // reads the lower triangle only
      x_ = llt_.solve(rhs_);
      return x_;
    }
    x_.setZero();
    if (c_ > 0) {
      a_.setZero(c_, c_);
      a_.selfadjointView<Eigen::Lower>().rankUpdate(g);
      a_.diagonal().array() += reg;
      y_ = v;
      if (shift != nullptr) y_.noalias() += g * Shift(shift) / reg;
      llt_.compute(a_);
      y_ = llt_.solve(y_);
      x_.noalias() = g.transpose() * y_;
    }
    if (shift != nullptr) x_ -= Shift(shift) / reg;
    return x_;
  }

 private:
  Eigen::Map<const Eigen::VectorXd> Shift(const double* s) const {
    return Eigen::Map<const Eigen::VectorXd>(s, k_);
  }

  const Eigen::Index k_;
  Eigen::Index c_ = 0;
  Eigen::MatrixXd g_;  // gathered rows, grown to the longest row seen
  Eigen::VectorXd v_;
  Eigen::MatrixXd a_;
  Eigen::VectorXd rhs_, y_, x_;
  Eigen::LLT<Eigen::MatrixXd> llt_;
};

// Every row of `out`: the exact ridge solution against `other`.
void SolveAllRows(const Pattern& p, const RowMatrix& other, double reg,
                  RowMatrix* out) {
  RidgeSolver s(static_cast<int>(other.cols()));
  for (size_t r = 0; r < p.rows(); ++r) {
    s.Gather(p, r, other);
    out->row(r) = s.Solve(reg, nullptr).transpose();
  }
}

}  // namespace


absl::StatusOr<DpneResult> TrainDpne(const Graph& g, const DpneConfig& c,
                                     RandomSource& noise, uint64_t init_seed) {
  RETURN_IF_ERROR(ValidateDpneConfig(c));
  if (g.num_edges() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("DPNE needs a graph with at least one edge; this one has ",
                     g.num_nodes(), " nodes and none"));
  }
  const auto start = std::chrono::steady_clock::now();
  const size_t n = g.num_nodes();
  const int k = c.dim;

  DpneResult result;
  // log M on Omega, its non-zeros: every stored value of
  // WalkProximityMatrix is > 0.
  Pattern rows = FromRows(WalkProximityMatrix(g));
  for (float& v : rows.values) v = static_cast<float>(std::log(double{v}));
  result.omega = rows.indices.size();
  result.matrix_bytes = rows.offsets.capacity() * sizeof(uint64_t) +
                        rows.indices.capacity() * sizeof(uint32_t) +
                        rows.values.capacity() * sizeof(float);
  // The columns of log M as rows, for the H solves: as many bytes again.
  const Pattern cols = Transpose(rows, n);

  // Step 2: ALS. Each sweep solves W given H, then H given W, so only H
  // needs a starting point (W's first solve overwrites anything).
  RowMatrix w(n, k);
  RowMatrix h(n, k);
  {
    PublicRandom init(init_seed);
    const double scale = 1.0 / std::sqrt(static_cast<double>(k));
    for (Eigen::Index i = 0; i < h.size(); ++i) {
      h.data()[i] = (init.UniformDouble() - 0.5) * scale;
    }
  }
  for (int sweep = 0; sweep < c.sweeps; ++sweep) {
    SolveAllRows(rows, h, c.lambda, &w);
    SolveAllRows(cols, w, c.mu, &h);
  }
  // ||h_j|| <= 1, with equality for the largest row. (All rows are zero
  // only when every m_ij is 1, so every log is 0: nothing to scale.)
  const double largest = h.rowwise().norm().maxCoeff();
  if (largest > 0) h /= largest;

  w.resize(0, 0);  // the release recomputes W from H

  // Step 3: w_i = (A_i + lambda I)^{-1} (b_i - eta_i / 2), the zero of the
  // perturbed objective's gradient 2 (A_i + lambda I) w - 2 b_i + eta_i,
  // with eta_0, eta_1, ... drawn in node order, one
  // ObjectivePerturbationNoise(dim, epsilon / (2 Delta)) call each (the
  // order dpne.h documents). An isolated node has an empty row (A_i = 0,
  // b_i = 0): its w_i is -eta_i / (2 lambda), pure noise when private and 0
  // otherwise. That is the minimiser of the objective as written, so it is
  // kept rather than special-cased.
  const double beta = c.epsilon / (2.0 * c.sensitivity);
  result.embedding = DenseMatrix(n, static_cast<size_t>(k));
  {
    RidgeSolver s(k);
    std::vector<double> half_eta;
    for (size_t i = 0; i < n; ++i) {
      s.Gather(rows, i, h);
      if (c.private_release) {
        ASSIGN_OR_RETURN(half_eta,
                         dp::ObjectivePerturbationNoise(k, beta, noise));
        for (double& e : half_eta) e *= 0.5;
      }
      const Eigen::VectorXd& x =
          s.Solve(c.lambda, c.private_release ? half_eta.data() : nullptr);
      for (int t = 0; t < k; ++t) {
        result.embedding.at(i, t) = static_cast<float>(x[t]);
      }
    }
  }

  // The unperturbed objective at the released (float) W and the scaled H.
  double objective = c.mu * h.squaredNorm();
  {
    Eigen::VectorXd wi(k);
    for (size_t i = 0; i < n; ++i) {
      for (int t = 0; t < k; ++t) wi[t] = result.embedding.at(i, t);
      objective += c.lambda * wi.squaredNorm();
      for (uint64_t q = rows.offsets[i]; q < rows.offsets[i + 1]; ++q) {
        const double r = static_cast<double>(rows.values[q]) -
                         h.row(rows.indices[q]).dot(wi);
        objective += r * r;
      }
    }
  }
  result.objective = objective;
  result.epsilon = c.private_release ? c.epsilon : 0.0;
  result.noise_source =
      c.private_release ? std::string(noise.name()) : std::string("none");
  result.seconds = SecondsSince(start);
  return result;
}

}  // namespace ldpgraph::embedding
