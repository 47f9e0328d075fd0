// The pieces of one SE-PrivGEmb step (server/embedding/se_privgemb.h),
// exposed for tests: the examples, one example's (clipped) gradient and
// the batch sum of clipped gradients. Library code outside
// server/embedding should call TrainSePrivGEmb, not these.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "common/graph/graph.h"
#include "common/linalg/matrix.h"
#include "common/random/random.h"

namespace ldpgraph::embedding::internal {

// The training examples, flat: example i is
// nodes[i * stride .. (i + 1) * stride), stride = negatives + 2, holding
// the centre u, the positive context v, then the negatives n_1..n_k.
struct SkipGramExamples {
  int negatives = 0;
  std::vector<uint32_t> nodes;

  int stride() const { return negatives + 2; }
  size_t size() const { return nodes.size() / stride(); }
  const uint32_t* example(size_t i) const {
    return nodes.data() + i * stride();
  }
};

// At most this many redraws of a negative that is the centre or one of its
// neighbours; the last draw is then kept (a node adjacent to every node of
// positive mass would otherwise loop forever).
inline constexpr int kMaxNegativeRedraws = 100;

// One example per undirected edge of g, in g.Edges() order: orientation
// uniform, negatives drawn with probability proportional to mass (>= 0, one
// entry per node, positive sum), redrawn while equal to the centre or a
// neighbour of it (at most kMaxNegativeRedraws times). Every draw comes from
// rng.
SkipGramExamples DrawSkipGramExamples(const Graph& g,
                                      absl::Span<const double> mass,
                                      int negatives, RandomSource& rng);

// The initial centre vectors: n x dim, uniform in [-0.5/dim, 0.5/dim) from
// PublicRandom(init_seed), row by row.
DenseMatrix InitialCentre(size_t n, int dim, uint64_t init_seed);

// The gradient of one example's loss
//   -log sig(w_u . c_v) - sum_i log sig(-w_u . c_{n_i})
// with respect to the rows it touches, repeated rows merged (a negative
// drawn twice, or equal to v, gives one C row carrying both terms).
struct ExampleGradient {
  uint32_t centre = 0;
  std::vector<float> centre_grad;      // dim: d loss / d W[centre]
  std::vector<uint32_t> context_rows;  // distinct C rows, first-seen order
  std::vector<float> context_grad;     // context_rows.size() * dim
  double loss = 0;
  double norm = 0;   // L2 norm of the whole gradient, before clipping
  double scale = 1;  // the factor applied: min(1, clip / norm), 1 unclipped
};

// example points at stride = negatives + 2 node ids (see SkipGramExamples).
// clip > 0: the whole gradient is scaled to L2 norm <= clip; clip <= 0: not
// clipped.
ExampleGradient ComputeExampleGradient(const DenseMatrix& w,
                                       const DenseMatrix& c,
                                       const uint32_t* example, int negatives,
                                       double clip);

// The sum over a batch of per-example gradients (clipped when clip > 0),
// kept as dense n x dim accumulators for W and C plus the lists of rows
// touched since the last Clear, so that a step costs O(rows touched * dim)
// and not O(n * dim).
class BatchGradient {
 public:
  BatchGradient(size_t n, int dim, int negatives);

  // Adds one example's gradient; returns its loss (unclipped, at w and c).
  double Add(const DenseMatrix& w, const DenseMatrix& c,
             const uint32_t* example, double clip);
  // Zeroes the touched rows and empties the lists. The caller that wrote
  // into other rows (noise on every row) zeroes them itself.
  void Clear();

  // Rows touched since the last Clear, in first-touched order, distinct.
  const std::vector<uint32_t>& touched_centre() const { return touched_w_; }
  const std::vector<uint32_t>& touched_context() const { return touched_c_; }
  const DenseMatrix& sum_centre() const { return sum_w_; }
  const DenseMatrix& sum_context() const { return sum_c_; }
  DenseMatrix& mutable_sum_centre() { return sum_w_; }
  DenseMatrix& mutable_sum_context() { return sum_c_; }

 private:
  int dim_;
  int negatives_;
  DenseMatrix sum_w_, sum_c_;
  std::vector<uint8_t> marked_w_, marked_c_;
  std::vector<uint32_t> touched_w_, touched_c_;
  // Scratch of one example: d loss / d w_u, the distinct context rows and
  // their merged coefficients (d loss / d c_j = coef_j * w_u).
  std::vector<float> grad_u_;
  std::vector<uint32_t> rows_;
  std::vector<float> coef_;
};

// Adam over the rows of one n x dim parameter matrix whose gradients are
// row-sparse: at each step a list of rows has a gradient and every other row
// has gradient zero. The result is that of dense Adam on the whole matrix
// (Kingma and Ba, ICLR'15, Algorithm 1, bias-corrected as PyTorch):
//   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2,
//   w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps),
// including the zero-gradient steps, where a row keeps moving on moments
// that decay (TensorFlow's and PyTorch's Adam on a dense gradient do the
// same; it is not a "lazy" Adam). The cost is O(rows listed * dim) a step:
// a row's zero-gradient steps are applied in closed form when it is next
// listed or at Flush. With eps left out of those steps (eps = 1e-8 against
// sqrt(v)), a run of J of them moves w by
//   m / sqrt(v) * sum_{s = a+1}^{a+J} lr_s r^(s - a),
//   lr_s = lr sqrt(1 - b2^s) / (1 - b1^s),  r = b1 / sqrt(b2),
// with m, v the moments after step a; the sum is Tail(a) - r^J Tail(a + J),
// Tail(a) = sum_{s > a} lr_s r^(s - a), truncated where r^(s - a) < 1e-20.
// So it differs from a dense Adam step by step only by eps in the skipped
// steps (relative error eps / sqrt(v)). Not thread-safe.
class RowSparseAdam {
 public:
  static constexpr double kBeta1 = 0.9;
  static constexpr double kBeta2 = 0.999;
  static constexpr double kEpsilon = 1e-8;

  RowSparseAdam(size_t n, int dim, double learning_rate);

  // Brings row r of param (n x dim, the matrix this object was made for)
  // to what dense Adam holds after steps() steps, applying the
  // zero-gradient steps since it was last listed. A row must be synced
  // before it is read (the gradient of the next step is taken there).
  void Sync(DenseMatrix& param, uint32_t r);
  // Sync of every row.
  void Flush(DenseMatrix& param);
  // Step t = steps() + 1: row r of `rows` (distinct) has gradient
  // scale * grad.row(r); every other row has gradient zero. Syncs and then
  // updates the listed rows; the others move at their next Sync.
  void Step(DenseMatrix& param, const DenseMatrix& grad,
            absl::Span<const uint32_t> rows, float scale);
  int64_t steps() const { return t_; }

 private:
  // Tail(a) above.
  double Tail(int64_t a) const;

  int dim_;
  double lr_;
  double ratio_;      // r = b1 / sqrt(b2)
  int64_t horizon_;   // terms kept in Tail
  int64_t t_ = 0;
  double tail_t_;     // Tail(t_)
  DenseMatrix m_, v_;
  std::vector<int64_t> last_;       // the step a row's moments are at
  std::vector<double> tail_last_;   // Tail(last_[r])
};

}  // namespace ldpgraph::embedding::internal
