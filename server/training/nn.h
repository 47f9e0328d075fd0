// The building blocks of every model the curator trains: parameters with
// their gradients, a fully connected layer, activations, inverted dropout and
// the Adam optimiser, over Eigen row-major matrices.
//
// Everything is templated on the scalar: models train in float; the tests
// instantiate the same code in double so that finite differences can check
// every gradient to many digits.
//
// Randomness here (initial weights, dropout masks) is a public choice, not
// privacy noise: it comes from PublicRandom (common/random/random.h), so a seed
// reproduces a run bit for bit on every platform.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <Eigen/Dense>
#include <Eigen/Sparse>

#include "common/linalg/blas.h"
#include "common/parallel.h"
#include "common/random/random.h"
#include "common/random/seed_mix.h"
#include "server/training/options.h"

namespace ldpgraph::training {

// Activation, WeightInit and AdamOptions: options.h.

template <typename S>
using Mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename S>
using RowVec = Eigen::Matrix<S, 1, Eigen::Dynamic>;
// A sparse operator over nodes (a normalised adjacency), row-major.
template <typename S>
using SpMat = Eigen::SparseMatrix<S, Eigen::RowMajor, int64_t>;

// A trainable tensor and the gradient of the loss with respect to it. Backward
// passes overwrite grad (they do not accumulate).
template <typename S>
struct Param {
  Mat<S> value;
  Mat<S> grad;
  void Resize(Eigen::Index rows, Eigen::Index cols) {
    value.setZero(rows, cols);
    grad.setZero(rows, cols);
  }
};

// Uniform on [-limit, limit] from a public generator.
template <typename S>
void FillUniform(Mat<S>& m, double limit, PublicRandom& rng) {
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    m.data()[i] = static_cast<S>((2.0 * rng.UniformDouble() - 1.0) * limit);
  }
}

// SELU's constants (Klambauer et al. 2017).
inline constexpr double kSeluLambda = 1.0507009873554804934193349852946;
inline constexpr double kSeluAlpha = 1.6732632423543772848170429916717;

// How a layer splits its rows across threads: into parts of fixed
// boundaries (at most kMaxParts, at least kMinRowsPerPart rows each) that
// depend on the row count only, so that a sum over rows is added up in the
// same order whatever the thread count.
struct RowParts {
  static constexpr Eigen::Index kMaxParts = 16;
  static constexpr Eigen::Index kMinRowsPerPart = 256;
  explicit RowParts(Eigen::Index rows)
      : rows(rows),
        count(std::clamp<Eigen::Index>(rows / kMinRowsPerPart, 1,
                                       kMaxParts)) {}
  Eigen::Index begin(size_t p) const { return rows * p / count; }
  Eigen::Index size(size_t p) const { return begin(p + 1) - begin(p); }
  Eigen::Index rows;
  Eigen::Index count;
};

// y = f(x) elementwise, over RowParts on `threads` threads.
template <typename S>
void ActivationForward(Activation a, const Mat<S>& x, Mat<S>* y,
                       int threads = 1) {
  y->resize(x.rows(), x.cols());
  const RowParts parts(x.rows());
  const Eigen::Index cols = x.cols();
  ParallelFor(parts.count, threads, [&](int, size_t p) {
    const S* in = x.data() + parts.begin(p) * cols;
    S* out = y->data() + parts.begin(p) * cols;
    const Eigen::Index n = parts.size(p) * cols;
    if (a == Activation::kRelu) {
      for (Eigen::Index i = 0; i < n; ++i) out[i] = in[i] > S(0) ? in[i] : S(0);
    } else {
      for (Eigen::Index i = 0; i < n; ++i) {
        out[i] = in[i] > S(0)
                     ? S(kSeluLambda) * in[i]
                     : S(kSeluLambda * kSeluAlpha) * (std::exp(in[i]) - S(1));
      }
    }
  });
}

// grad := grad * f'(x) in place, with y = f(x) from the forward pass.
template <typename S>
void ActivationBackward(Activation a, const Mat<S>& x, const Mat<S>& y,
                        Mat<S>* grad, int threads = 1) {
  const RowParts parts(x.rows());
  const Eigen::Index cols = x.cols();
  ParallelFor(parts.count, threads, [&](int, size_t p) {
    const Eigen::Index first = parts.begin(p) * cols;
    const S* in = x.data() + first;
    const S* out = y.data() + first;
    S* g = grad->data() + first;
    const Eigen::Index n = parts.size(p) * cols;
    if (a == Activation::kRelu) {
      for (Eigen::Index i = 0; i < n; ++i) g[i] = in[i] > S(0) ? g[i] : S(0);
    } else {
      // f'(x) = lambda for x > 0, else lambda * alpha * e^x = y + lambda*alpha.
      for (Eigen::Index i = 0; i < n; ++i) {
        g[i] *= in[i] > S(0) ? S(kSeluLambda)
                             : out[i] + S(kSeluLambda * kSeluAlpha);
      }
    }
  });
}

// Inverted dropout: in training each entry is kept with probability 1 - p
// and scaled by 1 / (1 - p), so inference needs no rescaling. p in [0, 1),
// applied to the nearest multiple of 2^-16 (at most 1 - 2^-16).
// The mask of each RowPart comes from its own stream, seeded by one draw
// from the caller's generator and the part's index, so the masks depend on
// the seed and the row count, not on the thread count. The mask is not
// stored: Backward draws it again from the same streams.
template <typename S>
class Dropout {
 public:
  explicit Dropout(double p = 0.0, int threads = 1)
      : p_(p),
        threads_(threads),
        threshold_(static_cast<uint32_t>(
            std::min<long>(std::lround(p * 65536.0), 65535))),
        scale_(S(65536.0 / (65536.0 - threshold_))) {}

  // x * mask in training (a copy the layer keeps), or x itself (inference,
  // or p == 0: no copy). An inference pass leaves the last training pass's
  // mask for Backward.
  const Mat<S>& Forward(const Mat<S>& x, bool training, PublicRandom* rng) {
    if (!training) return x;
    active_ = p_ > 0.0;
    if (!active_) return x;
    out_.resize(x.rows(), x.cols());
    seed_ = rng->Next64();
    Apply(x.data(), out_.data(), x.rows(), x.cols());
    return out_;
  }

  // The stored values of a sparse input: out = in * mask over `count`
  // values (count rows of one column) in training with p > 0, returning
  // true; false (out untouched) otherwise. A zero entry stays zero under any
  // mask, so masking the stored values is dropout on the whole matrix.
  bool ForwardValues(const S* in, S* out, Eigen::Index count, bool training,
                     PublicRandom* rng) {
    if (!training) return false;
    active_ = p_ > 0.0;
    if (!active_) return false;
    seed_ = rng->Next64();
    Apply(in, out, count, 1);
    return true;
  }

  // grad := grad * mask (when the last forward pass dropped anything).
  void Backward(Mat<S>* grad) const {
    if (active_) Apply(grad->data(), grad->data(), grad->rows(), grad->cols());
  }

 private:
  // out = in * mask, for the mask of seed_ (in may be out).
  void Apply(const S* in, S* out, Eigen::Index rows, Eigen::Index cols) const {
    // One 64-bit draw gives four 16-bit uniforms: an entry is dropped when
    // its uniform is below threshold_; scale_ is 1 / P(kept).
    const RowParts parts(rows);
    ParallelFor(parts.count, threads_, [&](int, size_t part) {
      PublicRandom stream(SeedMix(seed_ ^ SeedMix(part)));
      const Eigen::Index first = parts.begin(part) * cols;
      const Eigen::Index n = parts.size(part) * cols;
      const S* x = in + first;
      S* y = out + first;
      auto keep = [&](uint64_t w, int lane) {
        return S(((w >> (16 * lane)) & 0xffffu) >= threshold_) * scale_;
      };
      Eigen::Index i = 0;
      for (; i + 4 <= n; i += 4) {
        const uint64_t w = stream.Next64();
        for (int k = 0; k < 4; ++k) y[i + k] = x[i + k] * keep(w, k);
      }
      if (i < n) {
        const uint64_t w = stream.Next64();
        for (int k = 0; i < n; ++i, ++k) y[i] = x[i] * keep(w, k);
      }
    });
  }

  double p_;
  int threads_;
  uint32_t threshold_;
  S scale_;
  bool active_ = false;
  uint64_t seed_ = 0;
  Mat<S> out_;
};

// out = a b, rows split by RowParts(a.rows()) across threads.
template <typename S, typename Lhs>
void ParallelProduct(const Lhs& a, const Mat<S>& b, Mat<S>* out,
                     int threads) {
  out->resize(a.rows(), b.cols());
  const RowParts parts(a.rows());
  ParallelFor(parts.count, threads, [&](int, size_t p) {
    const Eigen::Index r = parts.begin(p), n = parts.size(p);
    out->middleRows(r, n).noalias() = a.middleRows(r, n) * b;
  });
}

// out = a^T b (a sum over rows), as partial products over RowParts(a.rows())
// added in part order; scratch holds the partials between calls.
template <typename S>
void ParallelTransposeProduct(const Mat<S>& a, const Mat<S>& b, Mat<S>* out,
                              int threads, std::vector<Mat<S>>* scratch) {
  const RowParts parts(a.rows());
  scratch->resize(parts.count);
  ParallelFor(parts.count, threads, [&](int, size_t p) {
    const Eigen::Index r = parts.begin(p), n = parts.size(p);
    (*scratch)[p].noalias() = a.middleRows(r, n).transpose() * b.middleRows(r, n);
  });
  *out = (*scratch)[0];
  for (Eigen::Index p = 1; p < parts.count; ++p) *out += (*scratch)[p];
}

// out (1 x cols) = the column sums of a, as partial sums over
// RowParts(a.rows()) added in part order; scratch holds the partials.
template <typename S>
void ParallelColumnSum(const Mat<S>& a, Mat<S>* out, int threads,
                       std::vector<Mat<S>>* scratch) {
  const RowParts parts(a.rows());
  scratch->resize(parts.count);
  ParallelFor(parts.count, threads, [&](int, size_t p) {
    (*scratch)[p] = a.middleRows(parts.begin(p), parts.size(p)).colwise().sum();
  });
  *out = (*scratch)[0];
  for (Eigen::Index p = 1; p < parts.count; ++p) *out += (*scratch)[p];
}

// y = x W + b: W is in x out, b is 1 x out, initialised as `init` says
// (Glorot-uniform W and zero b by default).
// The products run on `threads` threads (>= 1), over RowParts: the results
// are the same for any thread count.
template <typename S>
class Linear {
 public:
  Linear(int in, int out, PublicRandom& rng, int threads = 1,
         WeightInit init = WeightInit::kGlorot)
      : threads_(threads) {
    UseSingleThreadedBlas();
    weight_.Resize(in, out);
    bias_.Resize(1, out);
    if (init == WeightInit::kTorch) {
      FillUniform(weight_.value, 1.0 / std::sqrt(in), rng);
      FillUniform(bias_.value, 1.0 / std::sqrt(in), rng);
    } else {
      FillUniform(weight_.value, std::sqrt(6.0 / (in + out)), rng);
    }
  }

  // y = x W + b. x must outlive the matching Backward call.
  void Forward(const Mat<S>& x, Mat<S>* y) const {
    ParallelProduct(x, weight_.value, y, threads_);
    y->rowwise() += bias_.value.row(0);
  }
  // Sets the parameter gradients from dL/dy (given the x of Forward) and,
  // when d_x is not null, writes dL/dx.
  void Backward(const Mat<S>& x, const Mat<S>& d_y, Mat<S>* d_x) {
    ParallelTransposeProduct(x, d_y, &weight_.grad, threads_, &scratch_);
    ParallelColumnSum(d_y, &bias_.grad, threads_, &scratch_);
    if (d_x != nullptr) {
      ParallelProduct(d_y, Mat<S>(weight_.value.transpose()), d_x, threads_);
    }
  }
  Param<S>& weight() { return weight_; }
  Param<S>& bias() { return bias_; }
  const Param<S>& weight() const { return weight_; }
  const Param<S>& bias() const { return bias_; }
  int threads() const { return threads_; }

 private:
  int threads_;
  Param<S> weight_;
  Param<S> bias_;
  std::vector<Mat<S>> scratch_;
};

// Adam (Kingma & Ba 2015) with bias correction, as PyTorch implements it.
template <typename S>
class Adam {
 public:
  Adam(std::vector<Param<S>*> params, const AdamOptions& options)
      : params_(std::move(params)), options_(options) {
    for (Param<S>* p : params_) {
      m_.push_back(Mat<S>::Zero(p->value.rows(), p->value.cols()));
      v_.push_back(Mat<S>::Zero(p->value.rows(), p->value.cols()));
    }
  }
  // One update from the gradients the last backward pass left in params.
  // The step size from the next Step on (a schedule's decay).
  void set_learning_rate(double lr) { options_.learning_rate = lr; }
  double learning_rate() const { return options_.learning_rate; }

  void Step() {
    ++t_;
    const double c1 = 1.0 - std::pow(options_.beta1, t_);
    const double c2 = 1.0 - std::pow(options_.beta2, t_);
    const S b1 = S(options_.beta1), b2 = S(options_.beta2);
    const S step = S(options_.learning_rate / c1);
    const S inv_sqrt_c2 = S(1.0 / std::sqrt(c2));
    const S eps = S(options_.epsilon), wd = S(options_.weight_decay);
    for (size_t i = 0; i < params_.size(); ++i) {
      auto w = params_[i]->value.array();
      auto g = params_[i]->grad.array() + wd * w;
      auto m = m_[i].array();
      auto v = v_[i].array();
      m = b1 * m + (S(1) - b1) * g;
      v = b2 * v + (S(1) - b2) * g.square();
      w -= step * m / (v.sqrt() * inv_sqrt_c2 + eps);
    }
  }

 private:
  std::vector<Param<S>*> params_;
  AdamOptions options_;
  std::vector<Mat<S>> m_, v_;
  int t_ = 0;
};

}  // namespace ldpgraph::training
