// Node classification (node_task.h): the model behind its hooks (an MLP
// over any form of the features, or GCN or GraphSAGE over the graph), its
// training with full batches or mini-batches, and the test set's scores.
#include "server/training/node_task.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>

#include "common/parallel.h"
#include "common/status_macros.h"
#include "server/training/internal/node_task_input.h"
#include "server/training/internal/task_options.h"
#include "server/training/losses.h"
#include "server/training/metrics.h"
#include "server/training/mlp_rows.h"

namespace ldpgraph::training {
namespace {

using internal::InputCols;
using internal::InputRows;

using Loss = std::function<float(const Mat<float>&, Mat<float>*)>;

Mat<float> GatherRows(const Mat<float>& x, const std::vector<uint32_t>& rows) {
  Mat<float> out(static_cast<Eigen::Index>(rows.size()), x.cols());
  for (size_t i = 0; i < rows.size(); ++i) out.row(i) = x.row(rows[i]);
  return out;
}

Loss MakeClassLoss(const std::vector<int32_t>& targets,
                   const std::optional<Mat<float>>& transition) {
  if (transition) {
    return ForwardCorrectedCrossEntropy<float>(targets, *transition);
  }
  return SoftmaxCrossEntropy<float>(targets);
}

// The class each row of logits scores highest.
std::vector<int32_t> PredictedClasses(const Mat<float>& logits) {
  return ArgmaxRows(absl::MakeConstSpan(logits.data(), logits.size()),
                    logits.rows(), logits.cols());
}

double AccuracyOf(const Mat<float>& logits,
                  const std::vector<int32_t>& truth) {
  std::vector<int32_t> pred = PredictedClasses(logits);
  return Accuracy(pred, truth).value_or(0.0);
}

// Trains either model family behind callbacks: training-mode logits of the
// training rows (and their backward pass), inference-mode logits of the
// validation rows (every epoch), and of any node list (the test set, once).
struct NodeModelHooks {
  std::function<const Mat<float>&(PublicRandom&)> forward_train;
  std::function<void(const Mat<float>&)> backward;
  // Training-mode logits of every node (n x classes), and their backward.
  std::function<const Mat<float>&(PublicRandom&)> forward_all;
  std::function<void(const Mat<float>&)> backward_all;
  std::function<Mat<float>()> predict_validation;
  std::function<Mat<float>(const std::vector<uint32_t>&)> predict;
  std::function<std::vector<Param<float>*>()> params;
};

// A node model behind its hooks, with what the hooks read. Built in place
// (the hooks point into it), so it neither moves nor copies.
struct NodeModel {
  NodeModel() = default;
  NodeModel(const NodeModel&) = delete;
  NodeModel& operator=(const NodeModel&) = delete;

  NodeModelHooks hooks;
  std::unique_ptr<Mlp<float>> mlp;
  std::unique_ptr<GraphOperators<float>> ops;
  std::unique_ptr<Gnn<float>> gnn;
  std::unique_ptr<SparseInput<float>> sparse;  // the features, when sparse
  std::unique_ptr<MlpRows> rows;               // the MLP's features
  MlpRows::Batch train_rows, validation_rows;  // gathered once, if at all
  Mat<float> full_grad, train_logits;
};

// An MLP treats rows independently: it trains on the training rows only
// (gathered once for full batches, batch by batch otherwise), and the
// validation rows are gathered once when they fit one chunk (MlpRows), else
// read chunk by chunk every epoch.
absl::Status BuildMlp(const NodeTaskData& d, const NodeModelConfig& c,
                      int batch_rows, const std::vector<uint32_t>& validation,
                      PublicRandom& rng, NodeModel* m) {
  MlpConfig mc{static_cast<int>(InputCols(d)), c.hidden_dim, d.classes,
               c.layers,  c.dropout,  c.activation, c.input_dropout};
  mc.threads = ResolveThreads(c.threads);
  RETURN_IF_ERROR(ValidateMlpConfig(mc));
  m->mlp = std::make_unique<Mlp<float>>(mc, rng);
  m->rows = d.feature_file != nullptr
                ? std::make_unique<MlpRows>(d.feature_file, &d.feature_mean,
                                            &d.feature_scale, d.feature_clip)
                : std::make_unique<MlpRows>(d.features, d.feature_rows,
                                            &d.feature_mean, &d.feature_scale,
                                            d.feature_clip);
  const MlpRows* rows = m->rows.get();
  if (batch_rows == 0) {
    rows->Gather(d.train.data(), d.train.size(), &m->train_rows);
  }
  const bool validation_once = validation.size() <= rows->ChunkRows();
  if (validation_once) {
    rows->Gather(validation.data(), validation.size(), &m->validation_rows);
  }
  Mlp<float>* mlp = m->mlp.get();
  m->hooks.forward_train = [m, mlp, rows](PublicRandom& r)
      -> const Mat<float>& {
    return rows->Forward(*mlp, m->train_rows, true, &r);
  };
  m->hooks.backward = [mlp](const Mat<float>& g) { mlp->Backward(g); };
  // Propagated predictions (dense features only, ValidateFeatureRows).
  m->hooks.forward_all = [&d, mlp](PublicRandom& r) -> const Mat<float>& {
    return mlp->Forward(*d.features, true, &r);
  };
  m->hooks.backward_all = m->hooks.backward;
  m->hooks.predict_validation = [&validation, m, mlp, rows,
                                  validation_once] {
    return validation_once ? Mat<float>(rows->Forward(
                                 *mlp, m->validation_rows, false, nullptr))
                           : rows->Predict(*mlp, validation);
  };
  m->hooks.predict = [mlp, rows](const std::vector<uint32_t>& ids) {
    return rows->Predict(*mlp, ids);
  };
  m->hooks.params = [mlp] { return mlp->Params(); };
  return absl::OkStatus();
}

// A graph model sees every node every epoch; the loss reads the training
// rows of its output.
absl::Status BuildGnn(const NodeTaskData& d, const NodeModelConfig& c,
                      PublicRandom& rng, NodeModel* m) {
  GnnConfig gc{c.kind == NodeModelKind::kGcn ? GnnKind::kGcn : GnnKind::kSage,
               static_cast<int>(InputCols(d)), c.hidden_dim, d.classes,
               c.layers, c.dropout, c.activation, c.input_dropout};
  gc.threads = ResolveThreads(c.threads);
  gc.init = c.init;
  RETURN_IF_ERROR(ValidateGnnConfig(gc));
  m->ops = std::make_unique<GraphOperators<float>>(
      BuildGraphOperators<float>(*d.graph, gc.kind));
  m->gnn = std::make_unique<Gnn<float>>(gc, m->ops.get(), rng);
  m->full_grad.setZero(InputRows(d), d.classes);
  Gnn<float>* gnn = m->gnn.get();
  const Mat<float>* x = d.features;
  const SparseInput<float>* sparse = d.sparse_features;
  if (x != nullptr) {
    const double nonzeros = static_cast<double>((x->array() != 0.0f).count());
    if (c.sparse_input_density > 0 && x->size() > 0 &&
        nonzeros <= c.sparse_input_density * x->size()) {
      m->sparse = std::make_unique<SparseInput<float>>(x->sparseView());
      sparse = m->sparse.get();
    }
  }
  auto forward = [x, gnn, sparse](bool training,
                                  PublicRandom* r) -> const Mat<float>& {
    return sparse ? gnn->Forward(*sparse, training, r)
                  : gnn->Forward(*x, training, r);
  };
  m->hooks.forward_train = [&d, m,
                            forward](PublicRandom& r) -> const Mat<float>& {
    m->train_logits = GatherRows(forward(true, &r), d.train);
    return m->train_logits;
  };
  m->hooks.backward = [&d, m, gnn](const Mat<float>& g) {
    for (size_t i = 0; i < d.train.size(); ++i) {
      m->full_grad.row(d.train[i]) = g.row(i);
    }
    gnn->Backward(m->full_grad);
  };
  m->hooks.forward_all = [forward](PublicRandom& r) -> const Mat<float>& {
    return forward(true, &r);
  };
  m->hooks.backward_all = [gnn](const Mat<float>& g) { gnn->Backward(g); };
  m->hooks.predict = [forward](const std::vector<uint32_t>& rows) {
    return GatherRows(forward(false, nullptr), rows);
  };
  m->hooks.predict_validation = [&d, m] {
    return m->hooks.predict(d.validation);
  };
  m->hooks.params = [gnn] { return gnn->Params(); };
  return absl::OkStatus();
}

// What the capped selection rule reads of training: the accuracy of the
// epoch's training-mode predictions against the raw reports.
struct TrainScore {
  bool capped = false;
  const std::vector<int32_t>* reference = nullptr;
  double value = 0;
};

// A fixed sample of `count` of d's validation rows (count < their number),
// with their targets, in d's order; drawn from its own stream of `seed`, so
// the model's initialisation and batches do not depend on it.
void SampleValidation(const NodeTaskData& d, size_t count, uint64_t seed,
                      std::vector<uint32_t>* ids,
                      std::vector<int32_t>* targets) {
  PublicRandom rng(seed ^ 0x76616c6964617465ULL);  // "validate"
  std::vector<uint32_t> pick(d.validation.size());
  std::iota(pick.begin(), pick.end(), 0u);
  for (size_t i = 0; i < count; ++i) {  // partial Fisher-Yates
    std::swap(pick[i], pick[i + rng.UniformInt(pick.size() - i)]);
  }
  pick.resize(count);
  std::sort(pick.begin(), pick.end());
  ids->clear();
  targets->clear();
  for (uint32_t i : pick) {
    ids->push_back(d.validation[i]);
    targets->push_back(d.validation_targets[i]);
  }
}

// The validation rows scored every epoch, with their targets: d's, or,
// for the MLP with 0 < c.validation_rows < their number, a fixed sample of
// c.validation_rows of them (SampleValidation). Neither moves nor copies:
// the MLP's hooks keep a reference to ids().
class ValidationSet {
 public:
  ValidationSet(const NodeTaskData& d, const NodeModelConfig& c,
                uint64_t seed)
      : d_(d),
        sampled_(c.kind == NodeModelKind::kMlp && c.validation_rows > 0 &&
                 d.validation.size() > size_t(c.validation_rows)) {
    if (sampled_) {
      SampleValidation(d, c.validation_rows, seed, &ids_, &targets_);
    }
  }
  ValidationSet(const ValidationSet&) = delete;
  ValidationSet& operator=(const ValidationSet&) = delete;

  const std::vector<uint32_t>& ids() const {
    return sampled_ ? ids_ : d_.validation;
  }
  const std::vector<int32_t>& targets() const {
    return sampled_ ? targets_ : d_.validation_targets;
  }

 private:
  const NodeTaskData& d_;
  const bool sampled_;
  std::vector<uint32_t> ids_;
  std::vector<int32_t> targets_;
};

// The training rows a mini-batch epoch steps through: at most
// c.batched_epoch_rows of the train_rows (all of them when it is 0).
size_t EpochRows(const NodeModelConfig& c, size_t train_rows) {
  return c.batched_epoch_rows > 0
             ? std::min(train_rows, static_cast<size_t>(c.batched_epoch_rows))
             : train_rows;
}

// Mini-batches of an MLP's training rows, reshuffled every epoch (public
// randomness), one Adam step each; an epoch steps through at most
// c.batched_epoch_rows of them.
TrainReport TrainMlpMiniBatches(const NodeTaskData& d,
                                const NodeModelConfig& c, NodeModel& m,
                                int batch_rows, double score_cap,
                                TrainScore& score, PublicRandom& rng,
                                const std::function<Validation()>& validate) {
  const size_t b = static_cast<size_t>(batch_rows);
  const size_t all_rows = d.train.size();
  // The rows an epoch steps through: the first `rows` of a fresh shuffle.
  const size_t rows = EpochRows(c, all_rows);
  std::vector<uint32_t> order(all_rows);
  std::iota(order.begin(), order.end(), 0u);
  MlpRows::Batch batch;
  Mat<float> grad;
  std::vector<uint32_t> ids;
  std::vector<int32_t> targets, reference;
  size_t correct = 0;
  auto batch_step = [&](int s) -> double {
    if (s == 0) {
      Shuffle(order, rng);
      correct = 0;
    }
    const size_t first = s * b, count = std::min(b, rows - first);
    ids.resize(count);
    targets.resize(count);
    reference.resize(count);
    for (size_t i = 0; i < count; ++i) {
      ids[i] = d.train[order[first + i]];
      targets[i] = d.train_targets[order[first + i]];
      reference[i] = (*score.reference)[order[first + i]];
    }
    m.rows->Gather(ids.data(), count, &batch);
    const Mat<float>& logits = m.rows->Forward(*m.mlp, batch, true, &rng);
    if (score.capped) {
      correct += static_cast<size_t>(
          std::lround(AccuracyOf(logits, reference) * count));
      score.value = double(correct) / std::min(rows, first + count);
    }
    const double loss = MakeClassLoss(targets, d.transition)(logits, &grad);
    m.mlp->Backward(grad);
    return loss;
  };
  TrainOptions batched = internal::BatchedOptions(c);
  batched.score_cap = score_cap;
  return TrainWithEarlyStopping<float>(m.hooks.params(), batched,
                                       static_cast<int>((rows + b - 1) / b),
                                       batch_step, validate);
}

// The test set's accuracy and F1 scores, and every node's outputs when
// the caller keeps them.
absl::Status ScoreNodeModel(const NodeTaskData& d, NodeModel& m,
                            NodeTaskResult* result) {
  Mat<float> logits = m.hooks.predict(d.test);
  std::vector<int32_t> pred = PredictedClasses(logits);
  ASSIGN_OR_RETURN(result->test_accuracy, Accuracy(pred, d.test_truth));
  ASSIGN_OR_RETURN(result->test_micro_f1,
                   MicroF1(pred, d.test_truth, d.classes));
  ASSIGN_OR_RETURN(result->test_macro_f1,
                   MacroF1(pred, d.test_truth, d.classes));
  result->test_predictions = std::move(pred);
  if (d.keep_outputs) {
    std::vector<uint32_t> all(InputRows(d));
    std::iota(all.begin(), all.end(), 0u);
    result->outputs = m.hooks.predict(all);
  }
  if (d.keep_model) {
    result->model = m.mlp != nullptr ? m.mlp->Weights() : m.gnn->Weights();
  }
  return absl::OkStatus();
}

// Trains m from its initial weights, validating on `validation` every
// epoch: with full batches (batch_rows 0) one step an epoch on the training
// rows, or on every node through the label channel with propagated
// predictions; else the MLP's mini-batches. Every draw comes from rng.
TrainReport TrainNodeModel(const NodeTaskData& d, const NodeModelConfig& c,
                           const ValidationSet& validation, int batch_rows,
                           PublicRandom& rng, NodeModel& m) {
  const NodeModelHooks& hooks = m.hooks;
  const Loss train_loss = MakeClassLoss(d.train_targets, d.transition);
  const Loss validation_loss =
      MakeClassLoss(validation.targets(), d.transition);
  TrainScore score;
  score.capped = c.train.selection == SelectionRule::kNoisyLabelsCapped;
  score.reference = d.train_reports.empty() ? &d.train_targets
                                            : &d.train_reports;
  TrainOptions options = c.train;
  if (score.capped) options.score_cap = (*d.transition)(0, 0);
  Mat<float> grad;
  std::function<double()> step;
  SpMat<float> label_op;
  std::optional<PropagatedForwardCorrectedCrossEntropy<float>> propagated;
  if (d.propagate_predictions) {
    label_op = BuildSymmetricOperator<float>(*d.graph);
    propagated.emplace(&label_op, d.label_steps, d.train, d.train_targets,
                       *d.transition);
    step = [&]() -> double {
      const Mat<float>& logits = hooks.forward_all(rng);
      if (score.capped) {
        score.value =
            AccuracyOf(GatherRows(logits, d.train), *score.reference);
      }
      const double loss = (*propagated)(logits, &grad);
      hooks.backward_all(grad);
      return loss;
    };
  } else {
    step = [&]() -> double {
      const Mat<float>& logits = hooks.forward_train(rng);
      if (score.capped) score.value = AccuracyOf(logits, *score.reference);
      const double loss = train_loss(logits, &grad);
      hooks.backward(grad);
      return loss;
    };
  }
  std::function<Validation()> validate = [&]() -> Validation {
    Mat<float> logits = hooks.predict_validation();
    return {AccuracyOf(logits, validation.targets()),
            validation_loss(logits, nullptr), score.value};
  };
  return batch_rows == 0
             ? TrainWithEarlyStopping<float>(hooks.params(), options, step,
                                             validate)
             : TrainMlpMiniBatches(d, c, m, batch_rows, options.score_cap,
                                   score, rng, validate);
}

}  // namespace

int NodeBatchRows(const NodeModelConfig& c, size_t rows, size_t dim) {
  if (c.kind != NodeModelKind::kMlp) return 0;
  if (c.batch_rows >= 0) return c.batch_rows;
  return rows * dim <= kNodeFullBatchEntries ? 0 : kNodeAutoBatchRows;
}

absl::StatusOr<NodeTaskResult> TrainNodeClassifier(const NodeTaskData& d,
                                                   const NodeModelConfig& c,
                                                   uint64_t seed) {
  RETURN_IF_ERROR(internal::ValidateNodeData(d, c));
  NodeTaskResult result;
  result.batch_rows =
      d.propagate_predictions
          ? 0
          : NodeBatchRows(c, d.train.size(), InputCols(d));
  // The MLP scores at most c.validation_rows validation rows per epoch.
  const ValidationSet validation(d, c, seed);
  result.validation_rows = validation.ids().size();
  PublicRandom rng(seed);
  NodeModel m;
  RETURN_IF_ERROR(
      c.kind == NodeModelKind::kMlp
          ? BuildMlp(d, c, result.batch_rows, validation.ids(), rng, &m)
          : BuildGnn(d, c, rng, &m));
  result.training =
      TrainNodeModel(d, c, validation, result.batch_rows, rng, m);
  if (result.batch_rows > 0) result.epoch_rows = EpochRows(c, d.train.size());
  RETURN_IF_ERROR(ScoreNodeModel(d, m, &result));
  // A row the file could not read was trained on as zeros: not a result.
  if (d.feature_file != nullptr) RETURN_IF_ERROR(d.feature_file->status());
  return result;
}

}  // namespace ldpgraph::training
