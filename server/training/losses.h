// The losses ldpgraph trains with. Each is a functor: loss(input, &grad)
// returns the mean loss over the examples and writes dLoss/dinput (same shape
// as input) into grad when grad is not null. Tests check every gradient
// against central finite differences.
//
// Contracts (checked by the callers that build them, asserted in debug):
// labels lie in [0, c) for c = input.cols(); a loss over n examples gets an
// input with n rows.
#pragma once

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "server/training/nn.h"

namespace ldpgraph::training {

// log(1 + e^x) without overflow.
template <typename S>
S Softplus(S x) {
  return x > S(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

// Row-wise softmax of logits (n x c), stable.
template <typename S>
Mat<S> Softmax(const Mat<S>& logits) {
  Mat<S> p = logits.colwise() - logits.rowwise().maxCoeff();
  p = p.array().exp().matrix();
  p.array().colwise() /= p.rowwise().sum().array();
  return p;
}

// Softmax cross-entropy: mean over rows i of -log softmax(z_i)[label_i].
// Gradient: (softmax(z) - onehot(label)) / n.
template <typename S>
class SoftmaxCrossEntropy {
 public:
  explicit SoftmaxCrossEntropy(std::vector<int32_t> labels)
      : labels_(std::move(labels)) {}

  S operator()(const Mat<S>& logits, Mat<S>* grad) const {
    assert(static_cast<size_t>(logits.rows()) == labels_.size());
    const Eigen::Index n = logits.rows();
    Mat<S> p = Softmax(logits);
    double loss = 0;
    for (Eigen::Index i = 0; i < n; ++i) {
      loss -= std::log(std::max<double>(p(i, labels_[i]), 1e-30));
    }
    if (grad != nullptr) {
      *grad = std::move(p);
      for (Eigen::Index i = 0; i < n; ++i) (*grad)(i, labels_[i]) -= S(1);
      *grad /= S(n);
    }
    return S(loss / n);
  }

 private:
  std::vector<int32_t> labels_;
};

// Forward loss correction for labels seen through a noisy channel (Patrini
// et al. 2017; LPGNN's Drop): with p = softmax(z_i) the model's belief about
// the true label and T[a][b] = P(observed b | true a), the observed label has
// probability q = p T, and the loss is the mean of -log q[observed_i].
// Gradient: g_a = -T[a][y] / q_y, dL/dz_k = p_k (g_k - sum_a p_a g_a), over n.
// T is c x c with rows summing to 1.
template <typename S>
class ForwardCorrectedCrossEntropy {
 public:
  ForwardCorrectedCrossEntropy(std::vector<int32_t> observed, Mat<S> transition)
      : observed_(std::move(observed)), transition_(std::move(transition)) {}

  S operator()(const Mat<S>& logits, Mat<S>* grad) const {
    assert(static_cast<size_t>(logits.rows()) == observed_.size());
    const Eigen::Index n = logits.rows();
    const Mat<S> p = Softmax(logits);
    if (grad != nullptr) grad->resize(logits.rows(), logits.cols());
    double loss = 0;
    for (Eigen::Index i = 0; i < n; ++i) {
      const int y = observed_[i];
      const S q = std::max<S>(p.row(i).dot(transition_.col(y)), S(1e-30));
      loss -= std::log(static_cast<double>(q));
      if (grad != nullptr) {
        RowVec<S> g = -transition_.col(y).transpose() / q;
        const S mean = p.row(i).dot(g);
        grad->row(i) = p.row(i).cwiseProduct(g.array().matrix()) -
                       p.row(i) * mean;
      }
    }
    if (grad != nullptr) *grad /= S(n);
    return S(loss / n);
  }

 private:
  std::vector<int32_t> observed_;
  Mat<S> transition_;
};

// LPGNN's published loss for labels denoised by propagation (Sajadmanesh
// and Gatica-Perez's public code): the model's beliefs about the true labels
// are mapped through the channel and propagated the way the reports were.
// Over the logits z of every node (n x c): p = softmax(z), q = p T (forward
// correction, T[a][b] = P(observed b | true a)), s = A^K q with A the label
// operator (BuildSymmetricOperator), r = softmax(s) (r = q when K = 0, as a
// KProp of zero steps returns its input). The loss is the mean over the
// training rows i of -log(r[row_i][target_i] + 1e-20); targets are the
// argmax of softmax(A^K Y) over the one-hot reports Y. Every node's logits
// get gradient: a belief reaches its neighbours' losses through A, which
// must be symmetric (A^T = A is used in the backward pass). op must outlive
// the loss; rows are distinct and < n, targets in [0, c).
template <typename S>
class PropagatedForwardCorrectedCrossEntropy {
 public:
  PropagatedForwardCorrectedCrossEntropy(const SpMat<S>* op, int steps,
                                         std::vector<uint32_t> rows,
                                         std::vector<int32_t> targets,
                                         Mat<S> transition)
      : op_(op),
        steps_(steps),
        rows_(std::move(rows)),
        targets_(std::move(targets)),
        transition_(std::move(transition)) {}

  S operator()(const Mat<S>& logits, Mat<S>* grad) const {
    assert(logits.rows() == op_->rows());
    constexpr double kFloor = 1e-20;
    const Mat<S> p = Softmax(logits);
    const Mat<S> q = p * transition_;
    Mat<S> r = q;
    if (steps_ > 0) {
      Mat<S> s = q;
      for (int k = 0; k < steps_; ++k) s = Mat<S>(*op_ * s);
      r = Softmax(s);
    }
    const double m = static_cast<double>(rows_.size());
    double loss = 0;
    for (size_t i = 0; i < rows_.size(); ++i) {
      loss -= std::log(static_cast<double>(r(rows_[i], targets_[i])) + kFloor);
    }
    if (grad != nullptr) {
      // dL/dr: nonzero only at (row_i, target_i).
      Mat<S> d = Mat<S>::Zero(logits.rows(), logits.cols());
      for (size_t i = 0; i < rows_.size(); ++i) {
        d(rows_[i], targets_[i]) -= static_cast<S>(
            1.0 / (m * (static_cast<double>(r(rows_[i], targets_[i])) + kFloor)));
      }
      if (steps_ > 0) {
        // Through the softmax (rows without a training node stay zero),
        // then through A^K (A symmetric).
        d = SoftmaxBackward(r, d);
        for (int k = 0; k < steps_; ++k) d = Mat<S>(*op_ * d);
      }
      // Through q = p T, then the softmax of the logits.
      *grad = SoftmaxBackward(p, Mat<S>(d * transition_.transpose()));
    }
    return static_cast<S>(loss / m);
  }

 private:
  // For y = softmax(x) row-wise and dL/dy = dy: dL/dx = y * (dy - <dy, y>).
  static Mat<S> SoftmaxBackward(const Mat<S>& y, const Mat<S>& dy) {
    Mat<S> out = y.cwiseProduct(dy);
    const Eigen::Matrix<S, Eigen::Dynamic, 1> dot = out.rowwise().sum();
    out -= y.cwiseProduct(dot.replicate(1, y.cols()));
    return out;
  }

  const SpMat<S>* op_;
  int steps_;
  std::vector<uint32_t> rows_;
  std::vector<int32_t> targets_;
  Mat<S> transition_;
};

// Logistic loss on scores (n x 1) with 0/1 targets: mean of
// softplus(s) - t s = -[t log sigmoid(s) + (1 - t) log(1 - sigmoid(s))].
// Gradient: (sigmoid(s) - t) / n.
template <typename S>
class LogisticLoss {
 public:
  explicit LogisticLoss(std::vector<uint8_t> targets)
      : targets_(std::move(targets)) {}

  S operator()(const Mat<S>& scores, Mat<S>* grad) const {
    assert(static_cast<size_t>(scores.rows()) == targets_.size());
    const Eigen::Index n = scores.rows();
    if (grad != nullptr) grad->resize(n, 1);
    double loss = 0;
    for (Eigen::Index i = 0; i < n; ++i) {
      const S s = scores(i, 0);
      const S t = targets_[i] ? S(1) : S(0);
      loss += Softplus(s) - t * s;
      if (grad != nullptr) {
        (*grad)(i, 0) = (S(1) / (S(1) + std::exp(-s)) - t) / S(n);
      }
    }
    return S(loss / n);
  }

 private:
  std::vector<uint8_t> targets_;
};

// PrivGE's pairwise objective for link prediction, the AUC loss of pairwise
// learning for neural link prediction (Wang et al. 2021): scores (2P x 1)
// hold P positive pairs in rows [0, P) and P non-edges in rows [P, 2P); the
// positive in row i is paired with the negative in row P + partner[i]
// (partner a permutation of [0, P), reshuffled by the caller each epoch).
// Loss: mean over i of (1 - (s_pos_i - s_neg_partner))^2, which pushes every
// edge to score a margin of 1 above a non-edge, the ranking ROC-AUC measures.
template <typename S>
class PairwiseAucLoss {
 public:
  explicit PairwiseAucLoss(std::vector<uint32_t> partner)
      : partner_(std::move(partner)) {}

  S operator()(const Mat<S>& scores, Mat<S>* grad) const {
    const Eigen::Index p = static_cast<Eigen::Index>(partner_.size());
    assert(scores.rows() == 2 * p);
    if (grad != nullptr) grad->setZero(2 * p, 1);
    double loss = 0;
    for (Eigen::Index i = 0; i < p; ++i) {
      const Eigen::Index j = p + partner_[i];
      const S r = S(1) - (scores(i, 0) - scores(j, 0));
      loss += static_cast<double>(r) * r;
      if (grad != nullptr) {
        (*grad)(i, 0) += S(-2) * r / S(p);
        (*grad)(j, 0) += S(2) * r / S(p);
      }
    }
    return S(loss / p);
  }

 private:
  std::vector<uint32_t> partner_;
};

}  // namespace ldpgraph::training
