#include "server/embedding/se_privgemb.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>

#include "Eigen/Core"
#include "absl/strings/str_cat.h"
#include "common/dp/continuous_noise.h"
#include "common/status_macros.h"
#include "common/stopwatch.h"
#include "server/embedding/internal/se_privgemb_step.h"

namespace ldpgraph::embedding {
namespace internal {
namespace {

// Dot product of two float rows, eight partial sums so that the compiler
// can keep them in vector registers without reassociating.
inline float Dot(const float* a, const float* b, int dim) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= dim; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  }
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) +
            ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < dim; ++i) s += a[i] * b[i];
  return s;
}

// y += a * x.
inline void Axpy(float a, const float* x, float* y, int dim) {
  for (int i = 0; i < dim; ++i) y[i] += a * x[i];
}

// log(1 + e^x), without overflow.
inline double Softplus(double x) {
  return std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x)));
}

inline double Sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

struct CoreOut {
  int distinct = 0;  // distinct context rows written to rows / coef
  double loss = 0;
  double norm = 0;
};

// One example's loss and gradient: d loss / d w_u into grad_u (dim floats),
// the distinct context rows into rows and their merged coefficients into
// coef (negatives + 1 entries each at most), d loss / d c_j = coef_j * w_u.
CoreOut ExampleCore(const DenseMatrix& w, const DenseMatrix& c,
                    const uint32_t* example, int negatives, float* grad_u,
                    uint32_t* rows, float* coef) {
  const int dim = static_cast<int>(w.cols);
  const float* wu = w.data.data() + size_t{example[0]} * dim;
  CoreOut out;
  for (int i = 0; i <= negatives; ++i) {
    const uint32_t j = example[1 + i];
    const double x = Dot(wu, c.data.data() + size_t{j} * dim, dim);
    double g;
    if (i == 0) {  // positive: -log sig(x)
      out.loss += Softplus(-x);
      g = Sigmoid(x) - 1.0;
    } else {  // negative: -log sig(-x)
      out.loss += Softplus(x);
      g = Sigmoid(x);
    }
    int r = 0;
    while (r < out.distinct && rows[r] != j) ++r;
    if (r == out.distinct) {
      rows[out.distinct] = j;
      coef[out.distinct] = 0.0f;
      ++out.distinct;
    }
    coef[r] += static_cast<float>(g);
  }
  std::fill(grad_u, grad_u + dim, 0.0f);
  double coef2 = 0;
  for (int r = 0; r < out.distinct; ++r) {
    Axpy(coef[r], c.data.data() + size_t{rows[r]} * dim, grad_u, dim);
    coef2 += double{coef[r]} * coef[r];
  }
  const double norm2 =
      double{Dot(grad_u, grad_u, dim)} + double{Dot(wu, wu, dim)} * coef2;
  out.norm = std::sqrt(norm2);
  return out;
}

inline double ClipScale(double norm, double clip) {
  return (clip > 0 && norm > clip) ? clip / norm : 1.0;
}

}  // namespace

SkipGramExamples DrawSkipGramExamples(const Graph& g,
                                      absl::Span<const double> mass,
                                      int negatives, RandomSource& rng) {
  const size_t n = g.num_nodes();
  std::vector<double> cumulative(n);
  double total = 0;
  uint32_t last_positive = 0;
  for (size_t j = 0; j < n; ++j) {
    total += mass[j];
    cumulative[j] = total;
    if (mass[j] > 0) last_positive = static_cast<uint32_t>(j);
  }
  // The node whose cumulative interval holds x: the first j with
  // cumulative[j] > x, which skips nodes of zero mass.
  auto draw = [&]() -> uint32_t {
    const double x = rng.UniformDouble() * total;
    const size_t j = static_cast<size_t>(
        std::upper_bound(cumulative.begin(), cumulative.end(), x) -
        cumulative.begin());
    return j < n ? static_cast<uint32_t>(j) : last_positive;  // rounding
  };
  SkipGramExamples ex;
  ex.negatives = negatives;
  const std::vector<Edge> edges = g.Edges();
  ex.nodes.reserve(edges.size() * ex.stride());
  for (const Edge& e : edges) {
    NodeId u = e.u, v = e.v;
    if (rng.Bernoulli(0.5)) std::swap(u, v);
    ex.nodes.push_back(u);
    ex.nodes.push_back(v);
    for (int i = 0; i < negatives; ++i) {
      uint32_t neg = draw();
      // Capped: after kMaxNegativeRedraws the last draw is kept even if it
      // is u or a neighbour of u (else a node adjacent to everyone loops).
      for (int r = 0;
           r < kMaxNegativeRedraws && (neg == u || g.HasEdge(u, neg)); ++r) {
        neg = draw();
      }
      ex.nodes.push_back(neg);
    }
  }
  return ex;
}

DenseMatrix InitialCentre(size_t n, int dim, uint64_t init_seed) {
  PublicRandom rng(init_seed);
  DenseMatrix w(n, dim);
  const double half = 0.5 / dim;
  for (float& x : w.data) {
    x = static_cast<float>((2 * rng.UniformDouble() - 1) * half);
  }
  return w;
}

ExampleGradient ComputeExampleGradient(const DenseMatrix& w,
                                       const DenseMatrix& c,
                                       const uint32_t* example, int negatives,
                                       double clip) {
  const int dim = static_cast<int>(w.cols);
  ExampleGradient out;
  out.centre = example[0];
  out.centre_grad.resize(dim);
  std::vector<uint32_t> rows(negatives + 1);
  std::vector<float> coef(negatives + 1);
  const CoreOut core =
      ExampleCore(w, c, example, negatives, out.centre_grad.data(), rows.data(),
                  coef.data());
  out.loss = core.loss;
  out.norm = core.norm;
  out.scale = ClipScale(core.norm, clip);
  const float s = static_cast<float>(out.scale);
  for (float& x : out.centre_grad) x *= s;
  const float* wu = w.data.data() + size_t{example[0]} * dim;
  out.context_rows.assign(rows.begin(), rows.begin() + core.distinct);
  out.context_grad.assign(static_cast<size_t>(core.distinct) * dim, 0.0f);
  for (int r = 0; r < core.distinct; ++r) {
    Axpy(s * coef[r], wu, out.context_grad.data() + size_t(r) * dim, dim);
  }
  return out;
}

BatchGradient::BatchGradient(size_t n, int dim, int negatives)
    : dim_(dim),
      negatives_(negatives),
      sum_w_(n, dim),
      sum_c_(n, dim),
      marked_w_(n, 0),
      marked_c_(n, 0),
      grad_u_(dim),
      rows_(negatives + 1),
      coef_(negatives + 1) {}

double BatchGradient::Add(const DenseMatrix& w, const DenseMatrix& c,
                          const uint32_t* example, double clip) {
  const CoreOut core = ExampleCore(w, c, example, negatives_, grad_u_.data(),
                                   rows_.data(), coef_.data());
  const float s = static_cast<float>(ClipScale(core.norm, clip));
  const uint32_t u = example[0];
  if (!marked_w_[u]) {
    marked_w_[u] = 1;
    touched_w_.push_back(u);
  }
  Axpy(s, grad_u_.data(), sum_w_.data.data() + size_t{u} * dim_, dim_);
  const float* wu = w.data.data() + size_t{u} * dim_;
  for (int r = 0; r < core.distinct; ++r) {
    const uint32_t j = rows_[r];
    if (!marked_c_[j]) {
      marked_c_[j] = 1;
      touched_c_.push_back(j);
    }
    Axpy(s * coef_[r], wu, sum_c_.data.data() + size_t{j} * dim_, dim_);
  }
  return core.loss;
}

void BatchGradient::Clear() {
  for (uint32_t r : touched_w_) {
    marked_w_[r] = 0;
    std::fill_n(sum_w_.data.data() + size_t{r} * dim_, dim_, 0.0f);
  }
  for (uint32_t r : touched_c_) {
    marked_c_[r] = 0;
    std::fill_n(sum_c_.data.data() + size_t{r} * dim_, dim_, 0.0f);
  }
  touched_w_.clear();
  touched_c_.clear();
}

namespace {
using RowArray = Eigen::Map<Eigen::ArrayXf>;
using ConstRowArray = Eigen::Map<const Eigen::ArrayXf>;
}  // namespace

RowSparseAdam::RowSparseAdam(size_t n, int dim, double learning_rate)
    : dim_(dim),
      lr_(learning_rate),
      ratio_(kBeta1 / std::sqrt(kBeta2)),
      horizon_(static_cast<int64_t>(
          std::ceil(std::log(1e-20) / std::log(kBeta1 / std::sqrt(kBeta2))))),
      m_(n, dim),
      v_(n, dim),
      last_(n, 0),
      tail_last_(n, 0.0) {
  tail_t_ = Tail(0);
  std::fill(tail_last_.begin(), tail_last_.end(), tail_t_);
}

double RowSparseAdam::Tail(int64_t a) const {
  double b1 = std::pow(kBeta1, static_cast<double>(a));  // b1^s, s = a + j
  double b2 = std::pow(kBeta2, static_cast<double>(a));
  double rj = 1, sum = 0;
  for (int64_t j = 1; j <= horizon_; ++j) {
    b1 *= kBeta1;
    b2 *= kBeta2;
    rj *= ratio_;
    sum += std::sqrt(1 - b2) / (1 - b1) * rj;
  }
  return lr_ * sum;
}

void RowSparseAdam::Sync(DenseMatrix& param, uint32_t r) {
  const int64_t skipped = t_ - last_[r];
  if (skipped <= 0) return;
  // Tail(a) - r^J Tail(a + J), a = last_[r], J = skipped.
  const double move =
      tail_last_[r] -
      (skipped > horizon_ ? 0.0
                          : std::pow(ratio_, static_cast<double>(skipped)) *
                                tail_t_);
  const float decay1 =
      static_cast<float>(std::pow(kBeta1, static_cast<double>(skipped)));
  const float decay2 =
      static_cast<float>(std::pow(kBeta2, static_cast<double>(skipped)));
  // Eigen's array sqrt is vectorised (std::sqrt in a loop is not, for
  // errno's sake). v = 0 only where every gradient so far was 0, and then
  // m = 0 too: those entries do not move.
  RowArray w(param.data.data() + size_t{r} * dim_, dim_);
  RowArray m(m_.data.data() + size_t{r} * dim_, dim_);
  RowArray v(v_.data.data() + size_t{r} * dim_, dim_);
  w -= (v > 0.0f)
           .select(static_cast<float>(move) * m / v.sqrt(), 0.0f);
  m *= decay1;
  v *= decay2;
  last_[r] = t_;
  tail_last_[r] = tail_t_;
}

void RowSparseAdam::Flush(DenseMatrix& param) {
  for (size_t r = 0; r < last_.size(); ++r) {
    Sync(param, static_cast<uint32_t>(r));
  }
}

void RowSparseAdam::Step(DenseMatrix& param, const DenseMatrix& grad,
                         absl::Span<const uint32_t> rows, float scale) {
  for (uint32_t r : rows) Sync(param, r);
  ++t_;
  const double t = static_cast<double>(t_);
  const float step =
      static_cast<float>(lr_ / (1.0 - std::pow(kBeta1, t)));
  const float inv_sqrt_c2 =
      static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(kBeta2, t)));
  const float b1 = static_cast<float>(kBeta1);
  const float b2 = static_cast<float>(kBeta2);
  const float eps = static_cast<float>(kEpsilon);
  tail_t_ = Tail(t_);
  for (uint32_t r : rows) {
    RowArray w(param.data.data() + size_t{r} * dim_, dim_);
    RowArray m(m_.data.data() + size_t{r} * dim_, dim_);
    RowArray v(v_.data.data() + size_t{r} * dim_, dim_);
    const auto g =
        scale * ConstRowArray(grad.data.data() + size_t{r} * dim_, dim_);
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g.square();
    w -= step * m / (v.sqrt() * inv_sqrt_c2 + eps);
    last_[r] = t_;
    tail_last_[r] = tail_t_;
  }
}

}  // namespace internal

namespace {

using internal::BatchGradient;
using internal::SkipGramExamples;

// Adds independent N(0, sigma^2) noise to every entry of x, through a
// zeroed scratch buffer (so it does not matter whether dp::AddGaussian adds
// to or overwrites its output).
class GaussianAdder {
 public:
  GaussianAdder(double sigma, RandomSource& rng) : sigma_(sigma), rng_(rng) {}
  void Add(absl::Span<float> x) {
    for (size_t start = 0; start < x.size(); start += kChunk) {
      const size_t len = std::min(kChunk, x.size() - start);
      std::fill_n(scratch_.begin(), len, 0.0f);
      dp::AddGaussian(sigma_, rng_, absl::MakeSpan(scratch_.data(), len));
      for (size_t i = 0; i < len; ++i) x[start + i] += scratch_[i];
    }
  }

 private:
  static constexpr size_t kChunk = 4096;
  double sigma_;
  RandomSource& rng_;
  std::vector<float> scratch_ = std::vector<float>(kChunk);
};

// row -= step * sum over the given rows.
void Update(DenseMatrix& m, const DenseMatrix& sum,
            const std::vector<uint32_t>& rows, float step) {
  const int dim = static_cast<int>(m.cols);
  for (uint32_t r : rows) {
    float* dst = m.data.data() + size_t{r} * dim;
    const float* src = sum.data.data() + size_t{r} * dim;
    for (int i = 0; i < dim; ++i) dst[i] -= step * src[i];
  }
}

void UpdateAll(DenseMatrix& m, const DenseMatrix& sum, float step) {
  for (size_t i = 0; i < m.data.size(); ++i) m.data[i] -= step * sum.data[i];
}

}  // namespace


absl::StatusOr<SePrivGEmbResult> TrainSePrivGEmb(const Graph& g,
                                                 const SePrivGEmbConfig& c,
                                                 RandomSource& noise,
                                                 uint64_t init_seed) {
  return TrainSePrivGEmb(g, c, noise, init_seed, [](int64_t, int64_t) {});
}

namespace {

// One step's release of a batch's gradient sums: Gaussian noise of std
// noise_multiplier * clip on every row (NoisedRows::kAll) or on the rows
// the batch touched (none when training is not private), then an SGD or
// Adam update of W and C, and the sums cleared for the next batch.
class NoisyUpdate {
 public:
  NoisyUpdate(const SePrivGEmbConfig& c, size_t n, size_t batch,
              RandomSource& noise)
      : private_(c.private_training),
        noise_all_(c.private_training && c.noised_rows == NoisedRows::kAll),
        adam_(c.optimizer == Optimizer::kAdam),
        gaussian_(c.noise_multiplier * c.clip, noise),
        step_size_(
            static_cast<float>(c.learning_rate / static_cast<double>(batch))),
        inv_batch_(static_cast<float>(1.0 / static_cast<double>(batch))) {
    if (adam_) {
      adam_w_.emplace(n, c.dim, c.learning_rate);
      adam_c_.emplace(n, c.dim, c.learning_rate);
      if (noise_all_) {
        all_rows_.resize(n);
        std::iota(all_rows_.begin(), all_rows_.end(), 0u);
      }
    }
  }

  // Brings the rows an example's gradient is taken at up to date (Adam
  // applies skipped steps lazily); nothing for SGD.
  void Sync(DenseMatrix& w, DenseMatrix& ctx, const uint32_t* example,
            int stride) {
    if (!adam_) return;
    adam_w_->Sync(w, example[0]);
    for (int i = 1; i < stride; ++i) adam_c_->Sync(ctx, example[i]);
  }

  void Apply(BatchGradient& sums, DenseMatrix& w, DenseMatrix& ctx) {
    if (noise_all_) {
      gaussian_.Add(absl::MakeSpan(sums.mutable_sum_centre().data));
      gaussian_.Add(absl::MakeSpan(sums.mutable_sum_context().data));
      if (adam_) {
        adam_w_->Step(w, sums.sum_centre(), all_rows_, inv_batch_);
        adam_c_->Step(ctx, sums.sum_context(), all_rows_, inv_batch_);
      } else {
        UpdateAll(w, sums.sum_centre(), step_size_);
        UpdateAll(ctx, sums.sum_context(), step_size_);
      }
      sums.Clear();
      std::fill(sums.mutable_sum_centre().data.begin(),
                sums.mutable_sum_centre().data.end(), 0.0f);
      std::fill(sums.mutable_sum_context().data.begin(),
                sums.mutable_sum_context().data.end(), 0.0f);
      return;
    }
    if (private_) {
      for (uint32_t r : sums.touched_centre()) {
        gaussian_.Add(sums.mutable_sum_centre().row(r));
      }
      for (uint32_t r : sums.touched_context()) {
        gaussian_.Add(sums.mutable_sum_context().row(r));
      }
    }
    if (adam_) {
      adam_w_->Step(w, sums.sum_centre(), sums.touched_centre(), inv_batch_);
      adam_c_->Step(ctx, sums.sum_context(), sums.touched_context(),
                    inv_batch_);
    } else {
      Update(w, sums.sum_centre(), sums.touched_centre(), step_size_);
      Update(ctx, sums.sum_context(), sums.touched_context(), step_size_);
    }
    sums.Clear();
  }

  // Applies Adam's outstanding lazy steps to every row.
  void Flush(DenseMatrix& w, DenseMatrix& ctx) {
    if (!adam_) return;
    adam_w_->Flush(w);
    adam_c_->Flush(ctx);
  }

 private:
  const bool private_, noise_all_, adam_;
  GaussianAdder gaussian_;
  const float step_size_, inv_batch_;
  std::optional<internal::RowSparseAdam> adam_w_, adam_c_;
  std::vector<uint32_t> all_rows_;
};

// The guarantee of `steps` steps at sampling rate gamma, which must be
// within the target (INTERNAL otherwise: the step count was chosen to fit).
absl::Status AccountSteps(const SePrivGEmbConfig& c, double gamma,
                          double accounted_multiplier, int64_t steps,
                          SePrivGEmbResult* result) {
  dp::RdpAccountant accountant;
  RETURN_IF_ERROR(accountant.ComposeSampledWithoutReplacementGaussian(
      gamma, accounted_multiplier, steps));
  ASSIGN_OR_RETURN(dp::DpGuarantee guarantee,
                   accountant.Guarantee(c.target_delta));
  if (!(guarantee.epsilon <= c.target_epsilon)) {
    return absl::InternalError(
        absl::StrCat("accounting mismatch: ", steps, " steps give epsilon ",
                     guarantee.epsilon, " > target ", c.target_epsilon));
  }
  result->accountant = std::move(accountant);
  result->guarantee = guarantee;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SePrivGEmbResult> TrainSePrivGEmb(const Graph& g,
                                                 const SePrivGEmbConfig& c,
                                                 RandomSource& noise,
                                                 uint64_t init_seed,
                                                 StepProgress progress) {
  const auto start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(ValidateSePrivGEmbConfig(c));
  const size_t num_examples = g.num_edges();
  if (num_examples == 0) {
    return absl::InvalidArgumentError("the graph has no edge to train on");
  }
  const size_t n = g.num_nodes();
  const size_t batch =
      std::min(num_examples, static_cast<size_t>(c.batch_size));
  const int64_t steps_per_epoch = static_cast<int64_t>(
      (num_examples + c.batch_size - 1) / static_cast<size_t>(c.batch_size));
  const int64_t max_steps =
      c.max_steps ? *c.max_steps : steps_per_epoch * c.max_epochs;
  // gamma = batch / N, exactly 1 when the batch is the whole set.
  const double gamma =
      batch == num_examples ? 1.0 : static_cast<double>(batch) / num_examples;
  // Replacing one example moves the clipped sum by at most 2 * clip, so
  // noise of std sigma * clip is multiplier sigma / 2 for that sensitivity.
  const double accounted_multiplier = c.noise_multiplier / 2;

  SePrivGEmbResult result;
  result.noise_source = std::string(noise.name());
  int64_t steps = max_steps;
  if (c.private_training) {
    ASSIGN_OR_RETURN(const int64_t allowed,
                     dp::MaxStepsWithinBudget(
                         dp::RdpAccountant(), gamma, accounted_multiplier,
                         c.target_epsilon, c.target_delta, max_steps));
    if (allowed == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the target (epsilon ", c.target_epsilon, ", delta ", c.target_delta,
          ") cannot afford one step at noise multiplier ", c.noise_multiplier,
          " (sampling rate ", gamma,
          "): use a larger noise_multiplier or a larger target"));
    }
    steps = allowed;
    result.stopped_by_budget = allowed < max_steps;
  }

  const std::vector<double> mass = ProximityMass(g, c.proximity);
  const SkipGramExamples examples =
      internal::DrawSkipGramExamples(g, mass, c.negatives, noise);
  DenseMatrix w = internal::InitialCentre(n, c.dim, init_seed);
  DenseMatrix ctx(n, c.dim);
  BatchGradient sums(n, c.dim, c.negatives);
  const double clip = c.private_training ? c.clip : 0.0;
  NoisyUpdate update(c, n, batch, noise);
  const int stride = examples.stride();

  std::vector<uint32_t> index(num_examples);
  std::iota(index.begin(), index.end(), 0u);
  double epoch_loss = 0;
  int64_t epoch_examples = 0;
  for (int64_t s = 0; s < steps; ++s) {
    // A uniform batch without replacement: partial Fisher-Yates (the
    // permutation left over from the previous step is as good a start as
    // any).
    for (size_t b = 0; b < batch; ++b) {
      const size_t j = b + noise.UniformInt(num_examples - b);
      std::swap(index[b], index[j]);
      const uint32_t* example = examples.example(index[b]);
      update.Sync(w, ctx, example, stride);
      epoch_loss += sums.Add(w, ctx, example, clip);
    }
    epoch_examples += static_cast<int64_t>(batch);
    update.Apply(sums, w, ctx);
    if ((s + 1) % steps_per_epoch == 0 || s + 1 == steps) {
      result.epoch_loss.push_back(epoch_loss / epoch_examples);
      epoch_loss = 0;
      epoch_examples = 0;
      progress(s + 1, steps);
    }
  }
  update.Flush(w, ctx);
  result.steps = steps;
  result.step_cap = max_steps;
  result.epochs = static_cast<double>(steps) / steps_per_epoch;
  if (c.private_training) {
    RETURN_IF_ERROR(
        AccountSteps(c, gamma, accounted_multiplier, steps, &result));
  }
  result.centre = std::move(w);
  result.context = std::move(ctx);
  result.seconds = SecondsSince(start);
  return result;
}

}  // namespace ldpgraph::embedding
