// Link prediction (link_task.h): the check of a task's data and settings,
// the scorer's training with full batches or mini-batches (a linear
// scorer's mini-batch step without feature rows), and the test ROC-AUC.
#include "server/training/link_task.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "server/training/internal/link_pair_features.h"
#include "server/training/internal/task_options.h"
#include "server/training/kernels.h"
#include "server/training/losses.h"
#include "server/training/metrics.h"
#include "server/training/models.h"

namespace ldpgraph::training {
namespace {

using internal::PairFeatures;
using internal::PairList;

// Sum of gradients over the chunks of one full-batch epoch.
class GradientSum {
 public:
  explicit GradientSum(const std::vector<Param<float>*>& params)
      : params_(params), sum_(params.size()) {}
  void Add(bool first) {
    for (size_t i = 0; i < params_.size(); ++i) {
      if (first) {
        sum_[i] = params_[i]->grad;
      } else {
        sum_[i] += params_[i]->grad;
      }
    }
  }
  void Store() {
    for (size_t i = 0; i < params_.size(); ++i) params_[i]->grad = sum_[i];
  }

 private:
  std::vector<Param<float>*> params_;
  std::vector<Mat<float>> sum_;
};

// INVALID_ARGUMENT naming what is wrong with d or c, OK otherwise.
absl::Status ValidateLinkTask(const LinkTaskData& d, const LinkModelConfig& c) {
  if (d.embeddings == nullptr || d.embeddings->rows() == 0 ||
      d.embeddings->cols() == 0) {
    return absl::InvalidArgumentError("link embeddings are empty");
  }
  if (!d.embeddings->allFinite()) {
    return absl::InvalidArgumentError("embeddings contain NaN or infinity");
  }
  const size_t n = d.embeddings->rows();
  const std::pair<const std::vector<Edge>*, const char*> lists[] = {
      {&d.train_positive, "training edges"},
      {&d.train_negative, "training non-edges"},
      {&d.validation_positive, "validation edges"},
      {&d.validation_negative, "validation non-edges"},
      {&d.test_positive, "test edges"},
      {&d.test_negative, "test non-edges"}};
  for (const auto& [list, what] : lists) {
    if (list->empty()) {
      return absl::InvalidArgumentError(absl::StrCat("no ", what));
    }
    for (size_t i = 0; i < list->size(); ++i) {
      const Edge& e = (*list)[i];
      if (e.u >= n || e.v >= n) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, " pair ", i, " (", e.u, ", ", e.v,
                         ") names a node >= ", n));
      }
    }
  }
  if (c.loss == LinkLossKind::kPairwise &&
      d.train_positive.size() != d.train_negative.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the pairwise loss pairs each training edge with one non-edge: got ",
        d.train_positive.size(), " edges and ", d.train_negative.size(),
        " non-edges"));
  }
  RETURN_IF_ERROR(internal::ValidateEpochs(c));
  if (c.batched_decay_patience < 1 || c.batched_max_decays < 0 ||
      !(c.batched_decay_factor > 0 && c.batched_decay_factor < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the mini-batches' decay needs patience >= 1, at least 0 decays "
        "and a factor in (0, 1), got ",
        c.batched_decay_patience, ", ", c.batched_max_decays, ", ",
        c.batched_decay_factor));
  }
  if (!(c.train.adam.learning_rate > 0) || !(c.batched_learning_rate > 0)) {
    return absl::InvalidArgumentError("learning rates must be > 0");
  }
  if (c.batch_pairs < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch pairs must be -1 (automatic), 0 (full batch) or more, got ",
        c.batch_pairs));
  }
  return absl::OkStatus();
}

// The order of one epoch's mini-batches: the pairwise loss walks the edges
// and the non-edges side by side, each shuffled; the logistic loss walks
// every training pair shuffled together. Indices are into the training
// PairList (edges first, then non-edges).
struct BatchOrder {
  BatchOrder(size_t positives, size_t rows, bool pairwise)
      : pairwise(pairwise), pos(positives), neg(rows - positives), all(rows) {
    std::iota(pos.begin(), pos.end(), 0u);
    std::iota(neg.begin(), neg.end(), static_cast<uint32_t>(positives));
    std::iota(all.begin(), all.end(), 0u);
  }
  // Shuffles at the first step of an epoch.
  void Reshuffle(int step, PublicRandom& rng) {
    if (step != 0) return;
    if (pairwise) {
      Shuffle(pos, rng);
      Shuffle(neg, rng);
    } else {
      Shuffle(all, rng);
    }
  }
  bool pairwise;
  std::vector<uint32_t> pos, neg, all;
};

// One mini-batch step of a linear scorer (logistic regression, no input
// dropout), which needs no feature rows: score = w . ((z_u * z_v - mean) *
// scale) + b = sum_k w_k scale_k z_uk z_vk + c0, and its weight gradient is
// scale_k (sum_i g_i z_uik z_vik - mean_k sum_i g_i). Each pair's four rows
// are read once per step, while they are in cache, instead of forming,
// storing and reading a batch of rows twice. The batch splits into kTasks
// fixed parts whose partial sums are added in part order, whatever the
// thread count.
class LinearLinkStep {
 public:
  LinearLinkStep(const Mat<float>& z, const PairList& train, size_t positives,
                 const PairFeatures& features, int threads)
      : z_(z),
        train_(train),
        p_(positives),
        mean_(features.mean()),
        scale_(features.scale()),
        threads_(threads),
        w_eff_(z.cols()),
        partial_(kTasks) {}

  // The loss of the `items` pairs from `first` on in `order` (pairs of an
  // edge and a non-edge for the pairwise loss), their gradient stored in
  // weight and bias.
  double operator()(const BatchOrder& order, size_t first, size_t items,
                    Param<float>& weight, Param<float>& bias) {
    const size_t dim = z_.cols();
    double c0 = bias.value(0, 0);
    for (size_t k = 0; k < dim; ++k) {
      w_eff_[k] = weight.value(k, 0) * scale_[k];
      c0 -= static_cast<double>(w_eff_[k]) * mean_[k];
    }
    const float offset = static_cast<float>(c0);
    auto score = [&](const Edge& e) {
      return offset + kernels::TripleDot(z_.row(e.u).data(),
                                         z_.row(e.v).data(), w_eff_.data(),
                                         dim);
    };
    const float inv = 1.0f / static_cast<float>(items);
    ParallelFor(kTasks, threads_, [&](int, size_t t) {
      std::vector<float>& acc = partial_[t];
      acc.assign(dim, 0.0f);
      double g_sum = 0, loss = 0;
      for (size_t i = t * items / kTasks; i < (t + 1) * items / kTasks; ++i) {
        if (order.pairwise) {
          const Edge& e = train_[order.pos[first + i]];
          const Edge& f = train_[order.neg[first + i]];
          const float r = 1.0f - (score(e) - score(f));
          loss += static_cast<double>(r) * r;
          const float g = 2.0f * r * inv;
          kernels::AccumulateScaledProduct(z_.row(e.u).data(),
                                           z_.row(e.v).data(), -g, acc.data(),
                                           dim);
          kernels::AccumulateScaledProduct(z_.row(f.u).data(),
                                           z_.row(f.v).data(), g, acc.data(),
                                           dim);
        } else {
          const uint32_t row = order.all[first + i];
          const Edge& e = train_[row];
          const float sc = score(e);
          const float target = row < p_ ? 1.0f : 0.0f;
          loss += Softplus(sc) - target * sc;
          const float g = (1.0f / (1.0f + std::exp(-sc)) - target) * inv;
          g_sum += g;
          kernels::AccumulateScaledProduct(z_.row(e.u).data(),
                                           z_.row(e.v).data(), g, acc.data(),
                                           dim);
        }
      }
      partial_g_[t] = g_sum;
      partial_loss_[t] = loss;
    });
    double g_total = 0, loss = 0;
    for (size_t t = 0; t < kTasks; ++t) {
      g_total += partial_g_[t];
      loss += partial_loss_[t];
    }
    for (size_t k = 0; k < dim; ++k) {
      float a = 0;
      for (size_t t = 0; t < kTasks; ++t) a += partial_[t][k];
      weight.grad(k, 0) =
          scale_[k] * (a - mean_[k] * static_cast<float>(g_total));
    }
    bias.grad(0, 0) = static_cast<float>(g_total);
    return loss / items;
  }

 private:
  static constexpr size_t kTasks = 8;
  const Mat<float>& z_;
  const PairList& train_;
  size_t p_;
  std::vector<float> mean_, scale_;
  int threads_;
  std::vector<float> w_eff_;
  std::vector<std::vector<float>> partial_;
  double partial_g_[kTasks] = {}, partial_loss_[kTasks] = {};
};

// One link predictor's training: the scorer, the pair features and the
// pair lists it reads, the random stream every step draws from (in one
// fixed order, so seeded runs repeat).
class LinkTrainer {
 public:
  LinkTrainer(const LinkTaskData& d, const LinkModelConfig& c,
              const MlpConfig& mc, int threads, uint64_t seed)
      : c_(c),
        z_(*d.embeddings),
        threads_(threads),
        rng_(seed),
        scorer_(mc, rng_),
        features_(z_, threads),
        train_{&d.train_positive, &d.train_negative},
        validation_{&d.validation_positive, &d.validation_negative},
        test_{&d.test_positive, &d.test_negative},
        // Rows formed at once: a whole pair list while its features stay
        // within c.feature_entries floats, else chunks of that size.
        chunk_rows_(std::max<size_t>(
            1, c.feature_entries / static_cast<size_t>(z_.cols()))) {
    if (c.standardize_features) features_.Fit(train_);
    // The validation pairs are scored every epoch: formed once when they
    // fit in one chunk (as the training pairs are, in TrainFullBatch).
    validation_formed_ = validation_.size() <= chunk_rows_;
    if (validation_formed_) {
      features_.Fill(validation_, nullptr, 0, validation_.size(),
                     &x_validation_);
    }
  }

  // ROC-AUC of a pair list in inference mode, its features formed chunk by
  // chunk, or taken from `formed` when the caller holds them all (a list
  // that fits one chunk).
  absl::StatusOr<double> Auc(const PairList& list, const Mat<float>* formed) {
    std::vector<float> s(list.size());
    for (size_t first = 0; first < list.size(); first += chunk_rows_) {
      const size_t count = std::min(chunk_rows_, list.size() - first);
      if (formed == nullptr) features_.Fill(list, nullptr, first, count, &x_);
      const Mat<float>& out =
          scorer_.Forward(formed ? *formed : x_, false, nullptr);
      std::copy(out.data(), out.data() + count, s.begin() + first);
    }
    const size_t p = list.positive->size();
    return RocAuc(absl::MakeConstSpan(s.data(), p),
                  absl::MakeConstSpan(s.data() + p, s.size() - p));
  }
  absl::StatusOr<double> TestAuc() { return Auc(test_, nullptr); }
  Validation Validate() {
    return {Auc(validation_, validation_formed_ ? &x_validation_ : nullptr)
                .value_or(0.0),
            0.0};
  }

  TrainReport TrainFullBatch();
  TrainReport TrainMiniBatches(int batch_pairs);

 private:
  const LinkModelConfig& c_;
  const Mat<float>& z_;
  int threads_;
  PublicRandom rng_;
  Mlp<float> scorer_;
  PairFeatures features_;
  const PairList train_, validation_, test_;
  const size_t chunk_rows_;
  Mat<float> x_, x_validation_;
  bool validation_formed_ = false;
};

// Full batch: one Adam step per epoch on every training pair. When the
// pairs come in several chunks, a first pass scores them all (the pairwise
// loss pairs rows across chunks), and a second recomputes each chunk with
// the same dropout draws and adds up its gradient.
TrainReport LinkTrainer::TrainFullBatch() {
  const size_t p = train_.positive->size();
  const size_t rows = train_.size();
  std::vector<Param<float>*> params = scorer_.Params();
  std::vector<uint32_t> partner(p);
  std::iota(partner.begin(), partner.end(), 0u);
  std::vector<uint8_t> targets(rows, 0);
  std::fill(targets.begin(), targets.begin() + p, 1);
  const LogisticLoss<float> logistic(targets);
  const size_t chunks = (rows + chunk_rows_ - 1) / chunk_rows_;
  std::vector<PublicRandom> chunk_rng;
  Mat<float> scores(static_cast<Eigen::Index>(rows), 1), grad;
  GradientSum sum(params);
  // In one chunk, the training pairs' features are formed once for all
  // epochs; in several, each epoch forms each chunk twice.
  Mat<float> x_train;
  if (chunks == 1) features_.Fill(train_, nullptr, 0, rows, &x_train);
  auto step = [&]() -> double {
    chunk_rng.clear();
    for (size_t k = 0; k < chunks; ++k) {
      const size_t first = k * chunk_rows_;
      const size_t count = std::min(chunk_rows_, rows - first);
      chunk_rng.push_back(rng_);
      if (chunks == 1) {
        scores = scorer_.Forward(x_train, true, &rng_);
        break;
      }
      features_.Fill(train_, nullptr, first, count, &x_);
      scores.middleRows(first, count) = scorer_.Forward(x_, true, &rng_);
    }
    double loss;
    if (c_.loss == LinkLossKind::kPairwise) {
      Shuffle(partner, rng_);  // a fresh pairing every epoch
      loss = PairwiseAucLoss<float>(partner)(scores, &grad);
    } else {
      loss = logistic(scores, &grad);
    }
    if (chunks == 1) {
      scorer_.Backward(grad);
      return loss;
    }
    for (size_t k = 0; k < chunks; ++k) {
      const size_t first = k * chunk_rows_;
      const size_t count = std::min(chunk_rows_, rows - first);
      features_.Fill(train_, nullptr, first, count, &x_);
      scorer_.Forward(x_, true, &chunk_rng[k]);
      scorer_.Backward(grad.middleRows(first, count));
      sum.Add(k == 0);
    }
    sum.Store();
    return loss;
  };
  return TrainWithEarlyStopping<float>(params, c_.train, step,
                                       [&] { return Validate(); });
}

// Mini-batches: every epoch shuffles the training pairs and takes one Adam
// step per batch_pairs edges (with as many non-edges: for the pairwise
// loss, each edge beside a random non-edge).
TrainReport LinkTrainer::TrainMiniBatches(int batch_pairs) {
  const size_t p = train_.positive->size();
  const size_t rows = train_.size();
  std::vector<Param<float>*> params = scorer_.Params();
  const size_t b = static_cast<size_t>(batch_pairs);
  const bool pairwise = c_.loss == LinkLossKind::kPairwise;
  BatchOrder order(p, rows, pairwise);
  const int steps = static_cast<int>(pairwise ? (p + b - 1) / b
                                              : (rows + 2 * b - 1) / (2 * b));
  std::vector<uint32_t> index, identity;
  Mat<float> grad;
  const bool linear = c_.layers == 1 && c_.input_dropout == 0.0;
  LinearLinkStep linear_step(z_, train_, p, features_, threads_);
  auto step = [&](int s) -> double {
    order.Reshuffle(s, rng_);
    const size_t first = pairwise ? s * b : s * 2 * b;
    const size_t count =
        pairwise ? std::min(b, p - first) : std::min(2 * b, rows - first);
    if (linear) {
      return linear_step(order, first, count, *params[0], *params[1]);
    }
    if (pairwise) {
      index.assign(order.pos.begin() + first,
                   order.pos.begin() + first + count);
      index.insert(index.end(), order.neg.begin() + first,
                   order.neg.begin() + first + count);
      identity.resize(count);
      std::iota(identity.begin(), identity.end(), 0u);
    } else {
      index.assign(order.all.begin() + first,
                   order.all.begin() + first + count);
    }
    features_.Fill(train_, index.data(), 0, index.size(), &x_);
    const Mat<float>& scores = scorer_.Forward(x_, true, &rng_);
    double loss;
    if (pairwise) {
      loss = PairwiseAucLoss<float>(identity)(scores, &grad);
    } else {
      std::vector<uint8_t> targets(index.size());
      for (size_t i = 0; i < index.size(); ++i) targets[i] = index[i] < p;
      loss = LogisticLoss<float>(std::move(targets))(scores, &grad);
    }
    scorer_.Backward(grad);
    return loss;
  };
  TrainOptions batched = internal::BatchedOptions(c_);
  batched.decay_patience = c_.batched_decay_patience;
  batched.decay_factor = c_.batched_decay_factor;
  batched.max_decays = c_.batched_max_decays;
  return TrainWithEarlyStopping<float>(params, batched, steps, step,
                                       [&] { return Validate(); });
}

}  // namespace

int LinkBatchPairs(const LinkModelConfig& c, size_t positives, size_t dim) {
  if (c.batch_pairs >= 0) return c.batch_pairs;
  return 2 * positives * dim <= c.feature_entries ? 0 : kLinkAutoBatchPairs;
}

absl::StatusOr<LinkTaskResult> TrainLinkPredictor(const LinkTaskData& d,
                                                  const LinkModelConfig& c,
                                                  uint64_t seed) {
  RETURN_IF_ERROR(ValidateLinkTask(d, c));
  const Mat<float>& z = *d.embeddings;
  MlpConfig mc{static_cast<int>(z.cols()), c.hidden_dim, 1, c.layers,
               c.dropout, c.activation, c.input_dropout};
  mc.threads = ResolveThreads(c.threads);
  RETURN_IF_ERROR(ValidateMlpConfig(mc));
  LinkTrainer trainer(d, c, mc, mc.threads, seed);
  LinkTaskResult result;
  result.batch_pairs = LinkBatchPairs(c, d.train_positive.size(), z.cols());
  result.training = result.batch_pairs == 0
                        ? trainer.TrainFullBatch()
                        : trainer.TrainMiniBatches(result.batch_pairs);
  ASSIGN_OR_RETURN(result.test_auc, trainer.TestAuc());
  return result;
}

}  // namespace ldpgraph::training
