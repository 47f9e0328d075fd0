#include "server/training/tasks.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "server/training/kernels.h"
#include "server/training/losses.h"
#include "server/training/metrics.h"
#include "server/training/mlp_rows.h"

namespace ldpgraph::training {
namespace {

using Loss = std::function<float(const Mat<float>&, Mat<float>*)>;

Mat<float> GatherRows(const Mat<float>& x, const std::vector<uint32_t>& rows) {
  Mat<float> out(static_cast<Eigen::Index>(rows.size()), x.cols());
  for (size_t i = 0; i < rows.size(); ++i) out.row(i) = x.row(rows[i]);
  return out;
}

absl::Status CheckNodes(const std::vector<uint32_t>& nodes, size_t n,
                        absl::string_view what, bool allow_empty = false) {
  if (nodes.empty() && !allow_empty) {
    return absl::InvalidArgumentError(absl::StrCat("no ", what, " nodes"));
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i] >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " node ", nodes[i], " (position ", i,
                       ") is out of range: the features have ", n, " rows"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckLabels(const std::vector<int32_t>& labels, size_t expected,
                         int classes, absl::string_view what) {
  if (labels.size() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has ", labels.size(), " labels for ", expected,
                     " nodes"));
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= classes) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " label ", labels[i], " at position ", i,
                       " is outside [0, ", classes, ")"));
    }
  }
  return absl::OkStatus();
}

// The features' shape, dense or sparse (one is set).
size_t InputRows(const NodeTaskData& d) {
  if (d.feature_file != nullptr) return d.feature_file->rows();
  if (d.feature_rows != nullptr) return d.feature_rows->rows;
  return d.features != nullptr ? d.features->rows()
                               : d.sparse_features->x.rows();
}
size_t InputCols(const NodeTaskData& d) {
  if (d.feature_file != nullptr) return d.feature_file->cols();
  if (d.feature_rows != nullptr) return d.feature_rows->cols;
  return d.features != nullptr ? d.features->cols()
                               : d.sparse_features->x.cols();
}

bool AllFinite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(),
                     [](double x) { return std::isfinite(x); });
}

bool InputFinite(const NodeTaskData& d) {
  if (d.features != nullptr) return d.features->allFinite();
  if (d.feature_file != nullptr) {
    // Its values were checked as they were written (WriteColumns).
    return AllFinite(d.feature_mean) && AllFinite(d.feature_scale);
  }
  if (d.feature_rows != nullptr) {
    const std::vector<float>& v = d.feature_rows->values;
    return std::all_of(v.begin(), v.end(),
                       [](float x) { return std::isfinite(x); }) &&
           AllFinite(d.feature_mean) && AllFinite(d.feature_scale);
  }
  const SparseInput<float>& s = *d.sparse_features;
  if (!Eigen::Map<const Eigen::VectorXf>(s.x.valuePtr(), s.x.nonZeros())
           .allFinite()) {
    return false;
  }
  if (!s.propagation) return true;
  const InputPropagation<float>& p = *s.propagation;
  return std::isfinite(p.fill) && p.u_minus_one.allFinite() &&
         p.offset.allFinite() && p.scale.allFinite();
}

// What feature_rows and feature_file share (NodeTaskData): one mean and
// scale per column (cols of them) or none, a finite clip >= 0 that needs
// them, and no propagated predictions.
absl::Status ValidateRowStandardisation(const NodeTaskData& d, size_t cols) {
  if (d.feature_mean.size() != d.feature_scale.size() ||
      (!d.feature_mean.empty() && d.feature_mean.size() != cols)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "feature mean and scale need one entry per column (", cols,
        ") or none, got ", d.feature_mean.size(), " and ",
        d.feature_scale.size()));
  }
  if (!(d.feature_clip >= 0) || std::isinf(d.feature_clip) ||
      (d.feature_clip > 0 && d.feature_mean.empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "feature clip must be finite and >= 0, and needs the rows' mean and "
        "scale; got ", d.feature_clip, " with ", d.feature_mean.size(),
        " column moments"));
  }
  if (d.propagate_predictions) {
    return absl::InvalidArgumentError(
        "propagated predictions read every node at once: give dense features");
  }
  return absl::OkStatus();
}

// feature_rows' own rules (NodeTaskData): the MLP, well-formed rows, no
// input dropout, and ValidateRowStandardisation's.
absl::Status ValidateFeatureRows(const NodeTaskData& d,
                                 const NodeModelConfig& c) {
  if (c.kind != NodeModelKind::kMlp) {
    return absl::InvalidArgumentError(
        "compressed feature rows are the MLP's input (GCN and GraphSAGE "
        "read sparse_features)");
  }
  const SparseRows& x = *d.feature_rows;
  if (x.offsets.size() != x.rows + 1 || x.offsets.back() != x.nnz() ||
      x.values.size() != x.nnz()) {
    return absl::InvalidArgumentError("feature rows: malformed offsets");
  }
  if (std::any_of(x.indices.begin(), x.indices.end(),
                  [&](uint32_t j) { return j >= x.cols; })) {
    return absl::InvalidArgumentError("feature rows: a column out of range");
  }
  if (c.input_dropout != 0.0) {
    return absl::InvalidArgumentError(
        "compressed feature rows take no input dropout (it would drop "
        "entries of the standardised rows, which are not sparse)");
  }
  return ValidateRowStandardisation(d, x.cols);
}

// feature_file's rules (NodeTaskData): the MLP, and
// ValidateRowStandardisation's.
absl::Status ValidateFeatureFile(const NodeTaskData& d,
                                 const NodeModelConfig& c) {
  if (c.kind != NodeModelKind::kMlp) {
    return absl::InvalidArgumentError(
        "a file of feature rows is the MLP's input (GCN and GraphSAGE read "
        "every node every epoch)");
  }
  return ValidateRowStandardisation(d, d.feature_file->cols());
}

absl::Status ValidateNodeData(const NodeTaskData& d, const NodeModelConfig& c) {
  if ((d.features != nullptr) + (d.sparse_features != nullptr) +
          (d.feature_rows != nullptr) + (d.feature_file != nullptr) > 1) {
    return absl::InvalidArgumentError(
        "node features given more than one way (dense, sparse, compressed "
        "rows, a file of rows): set one");
  }
  if ((d.features == nullptr && d.sparse_features == nullptr &&
       d.feature_rows == nullptr && d.feature_file == nullptr) ||
      InputRows(d) == 0 || InputCols(d) == 0) {
    return absl::InvalidArgumentError("node features are empty");
  }
  if (d.feature_rows != nullptr) RETURN_IF_ERROR(ValidateFeatureRows(d, c));
  if (d.feature_file != nullptr) RETURN_IF_ERROR(ValidateFeatureFile(d, c));
  if (d.sparse_features != nullptr && c.kind == NodeModelKind::kMlp) {
    return absl::InvalidArgumentError(
        "sparse node features need a graph model (GCN or GraphSAGE)");
  }
  if (d.classes < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("need at least 2 classes, got ", d.classes));
  }
  const size_t n = InputRows(d);
  if (c.kind != NodeModelKind::kMlp &&
      (d.graph == nullptr || d.graph->num_nodes() != n)) {
    return absl::InvalidArgumentError(
        "a graph model needs the graph, with one node per feature row");
  }
  if (!InputFinite(d)) {
    return absl::InvalidArgumentError("node features contain NaN or infinity");
  }
  RETURN_IF_ERROR(CheckNodes(d.train, n, "training"));
  RETURN_IF_ERROR(CheckNodes(d.validation, n, "validation"));
  RETURN_IF_ERROR(CheckNodes(d.test, n, "test"));
  RETURN_IF_ERROR(
      CheckLabels(d.train_targets, d.train.size(), d.classes, "training"));
  RETURN_IF_ERROR(CheckLabels(d.validation_targets, d.validation.size(),
                              d.classes, "validation"));
  RETURN_IF_ERROR(
      CheckLabels(d.test_truth, d.test.size(), d.classes, "test"));
  if (d.transition && (d.transition->rows() != d.classes ||
                       d.transition->cols() != d.classes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the transition matrix must be ", d.classes, " x ", d.classes));
  }
  if (c.train.max_epochs < 1 || c.train.patience < 1 ||
      c.batched_max_epochs < 1 || c.batched_patience < 1) {
    return absl::InvalidArgumentError("epochs and patience must be >= 1");
  }
  if (c.batched_epoch_rows < 0 || c.validation_rows < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rows per epoch and validation rows must be >= 0 (0: all), got ",
        c.batched_epoch_rows, " and ", c.validation_rows));
  }
  if (c.train.selection == SelectionRule::kNoisyLabelsCapped &&
      !d.transition) {
    return absl::InvalidArgumentError(
        "the noisy-label selection rule needs the label channel's transition "
        "matrix");
  }
  if (!d.train_reports.empty()) {
    RETURN_IF_ERROR(CheckLabels(d.train_reports, d.train.size(), d.classes,
                                "training reports"));
  }
  if (d.propagate_predictions) {
    if (!d.transition) {
      return absl::InvalidArgumentError(
          "propagated forward correction needs the transition matrix");
    }
    if (d.graph == nullptr || d.graph->num_nodes() != n) {
      return absl::InvalidArgumentError(
          "propagated forward correction needs the graph, with one node per "
          "feature row");
    }
    if (d.label_steps < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "label steps must be >= 0, got ", d.label_steps));
    }
  }
  if (c.batch_rows < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch rows must be -1 (automatic), 0 (full batch) or more, got ",
        c.batch_rows));
  }
  if (!(c.batched_learning_rate > 0)) {
    return absl::InvalidArgumentError("learning rates must be > 0");
  }
  if (!(c.sparse_input_density >= 0 && c.sparse_input_density <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sparse input density must be in [0, 1], got ",
        c.sparse_input_density));
  }
  if (!(c.train.adam.learning_rate > 0) || !(c.train.adam.weight_decay >= 0)) {
    return absl::InvalidArgumentError(
        "learning rate must be > 0 and weight decay >= 0");
  }
  return absl::OkStatus();
}

Loss MakeClassLoss(const std::vector<int32_t>& targets,
                   const std::optional<Mat<float>>& transition) {
  if (transition) {
    return ForwardCorrectedCrossEntropy<float>(targets, *transition);
  }
  return SoftmaxCrossEntropy<float>(targets);
}

double AccuracyOf(const Mat<float>& logits,
                  const std::vector<int32_t>& truth) {
  std::vector<int32_t> pred = ArgmaxRows(
      absl::MakeConstSpan(logits.data(), logits.size()), logits.rows(),
      logits.cols());
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

// The training options with mini-batches: the config's batched epochs,
// patience and learning rate in place of train's (no minimum epochs).
template <typename Config>
TrainOptions BatchedOptions(const Config& c) {
  TrainOptions o = c.train;
  o.max_epochs = c.batched_max_epochs;
  o.patience = c.batched_patience;
  o.min_epochs = 0;
  o.adam.learning_rate = c.batched_learning_rate;
  return o;
}

}  // namespace

int NodeBatchRows(const NodeModelConfig& c, size_t rows, size_t dim) {
  if (c.kind != NodeModelKind::kMlp) return 0;
  if (c.batch_rows >= 0) return c.batch_rows;
  return rows * dim <= kNodeFullBatchEntries ? 0 : kNodeAutoBatchRows;
}

namespace {

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
  m->hooks.predict_validation = [&d, m] { return m->hooks.predict(d.validation); };
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
  const size_t rows =
      c.batched_epoch_rows > 0
          ? std::min(all_rows, static_cast<size_t>(c.batched_epoch_rows))
          : all_rows;
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
  TrainOptions batched = BatchedOptions(c);
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
  std::vector<int32_t> pred = ArgmaxRows(
      absl::MakeConstSpan(logits.data(), logits.size()), logits.rows(),
      logits.cols());
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

}  // namespace

absl::StatusOr<NodeTaskResult> TrainNodeClassifier(const NodeTaskData& d,
                                                   const NodeModelConfig& c,
                                                   uint64_t seed) {
  RETURN_IF_ERROR(ValidateNodeData(d, c));
  NodeTaskResult result;
  result.batch_rows =
      d.propagate_predictions
          ? 0
          : NodeBatchRows(c, d.train.size(), InputCols(d));
  // The MLP scores at most c.validation_rows validation rows per epoch.
  std::vector<uint32_t> sampled_validation;
  std::vector<int32_t> sampled_targets;
  const bool sample_validation = c.kind == NodeModelKind::kMlp &&
                                 c.validation_rows > 0 &&
                                 d.validation.size() > size_t(c.validation_rows);
  if (sample_validation) {
    SampleValidation(d, c.validation_rows, seed, &sampled_validation,
                     &sampled_targets);
    result.validation_rows = sampled_validation.size();
  } else {
    result.validation_rows = d.validation.size();
  }
  const std::vector<uint32_t>& validation =
      sample_validation ? sampled_validation : d.validation;
  const std::vector<int32_t>& validation_targets =
      sample_validation ? sampled_targets : d.validation_targets;
  PublicRandom rng(seed);
  NodeModel m;
  RETURN_IF_ERROR(c.kind == NodeModelKind::kMlp
                      ? BuildMlp(d, c, result.batch_rows, validation, rng, &m)
                      : BuildGnn(d, c, rng, &m));
  const NodeModelHooks& hooks = m.hooks;
  const Loss train_loss = MakeClassLoss(d.train_targets, d.transition);
  const Loss validation_loss =
      MakeClassLoss(validation_targets, d.transition);
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
    return {AccuracyOf(logits, validation_targets),
            validation_loss(logits, nullptr), score.value};
  };
  result.training =
      result.batch_rows == 0
          ? TrainWithEarlyStopping<float>(hooks.params(), options, step,
                                          validate)
          : TrainMlpMiniBatches(d, c, m, result.batch_rows,
                                options.score_cap, score, rng, validate);
  if (result.batch_rows > 0) {
    result.epoch_rows =
        c.batched_epoch_rows > 0
            ? std::min(d.train.size(), size_t(c.batched_epoch_rows))
            : d.train.size();
  }
  RETURN_IF_ERROR(ScoreNodeModel(d, m, &result));
  // A row the file could not read was trained on as zeros: not a result.
  if (d.feature_file != nullptr) RETURN_IF_ERROR(d.feature_file->status());
  return result;
}

Mat<float> HadamardFeatures(const Mat<float>& z, const std::vector<Edge>& a,
                            const std::vector<Edge>& b) {
  Mat<float> out(static_cast<Eigen::Index>(a.size() + b.size()), z.cols());
  Eigen::Index i = 0;
  for (const auto* list : {&a, &b}) {
    for (const Edge& e : *list) {
      kernels::HadamardRow(z.row(e.u).data(), z.row(e.v).data(), nullptr,
                           nullptr, out.row(i++).data(), z.cols());
    }
  }
  return out;
}

namespace {

// Positives then negatives, addressed as one list.
struct PairList {
  const std::vector<Edge>* positive;
  const std::vector<Edge>* negative;
  size_t size() const { return positive->size() + negative->size(); }
  const Edge& operator[](size_t i) const {
    return i < positive->size() ? (*positive)[i]
                                : (*negative)[i - positive->size()];
  }
};

// The scorer's input, formed on the fly: row i is the Hadamard product
// z_u * z_v of pair i, standardised with the training pairs' column means
// and standard deviations once Fit has run. Never holds more than the rows
// asked for.
class PairFeatures {
 public:
  PairFeatures(const Mat<float>& z, int threads) : z_(z), threads_(threads) {}

  // Column means and 1/sd over every pair of `list` (a column with zero
  // variance gets scale 0). In one streaming pass over a fixed split of the
  // list, so the figures do not depend on the thread count.
  void Fit(const PairList& list) {
    const size_t d = z_.cols(), n = list.size();
    constexpr size_t kParts = 64;
    const size_t parts = std::min(kParts, n);
    std::vector<std::vector<double>> sum(parts), squares(parts);
    ParallelFor(parts, threads_, [&](int, size_t p) {
      sum[p].assign(d, 0.0);
      squares[p].assign(d, 0.0);
      for (size_t i = p * n / parts; i < (p + 1) * n / parts; ++i) {
        const Edge& e = list[i];
        kernels::AccumulateHadamard(z_.row(e.u).data(), z_.row(e.v).data(),
                                    sum[p].data(), squares[p].data(), d);
      }
    });
    mean_.resize(d);
    scale_.resize(d);
    for (size_t k = 0; k < d; ++k) {
      double s = 0, q = 0;
      for (size_t p = 0; p < parts; ++p) {
        s += sum[p][k];
        q += squares[p][k];
      }
      const double m = s / n, second = q / n;
      const double var = second - m * m;
      // A constant column: E[h^2] - E[h]^2 cancels to rounding noise, not 0.
      const bool constant = !(var > 1e-9 * second);
      mean_[k] = static_cast<float>(m);
      scale_[k] = constant ? 0.0f : static_cast<float>(1.0 / std::sqrt(var));
    }
  }

  // The map row = (z_u * z_v - mean) * scale: mean 0 and scale 1 before Fit.
  std::vector<float> mean() const {
    return mean_.empty() ? std::vector<float>(z_.cols(), 0.0f) : mean_;
  }
  std::vector<float> scale() const {
    return scale_.empty() ? std::vector<float>(z_.cols(), 1.0f) : scale_;
  }

  // out := count rows, row r the pair list[index[r]] (list[first + r] when
  // index is null).
  void Fill(const PairList& list, const uint32_t* index, size_t first,
            size_t count, Mat<float>* out) const {
    const size_t d = z_.cols();
    out->resize(static_cast<Eigen::Index>(count), z_.cols());
    const float* mean = mean_.empty() ? nullptr : mean_.data();
    const float* scale = mean_.empty() ? nullptr : scale_.data();
    constexpr size_t kRowsPerTask = 64;
    ParallelFor((count + kRowsPerTask - 1) / kRowsPerTask, threads_,
                [&](int, size_t t) {
                  const size_t end = std::min(count, (t + 1) * kRowsPerTask);
                  for (size_t r = t * kRowsPerTask; r < end; ++r) {
                    const Edge& e = list[index ? index[r] : first + r];
                    kernels::HadamardRow(z_.row(e.u).data(),
                                         z_.row(e.v).data(), mean, scale,
                                         out->row(r).data(), d);
                  }
                });
  }

 private:
  const Mat<float>& z_;
  int threads_;
  std::vector<float> mean_, scale_;
};

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

}  // namespace

int LinkBatchPairs(const LinkModelConfig& c, size_t positives, size_t dim) {
  if (c.batch_pairs >= 0) return c.batch_pairs;
  return 2 * positives * dim <= c.feature_entries ? 0 : kLinkAutoBatchPairs;
}

namespace {

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
  if (c.train.max_epochs < 1 || c.train.patience < 1 ||
      c.batched_max_epochs < 1 || c.batched_patience < 1) {
    return absl::InvalidArgumentError("epochs and patience must be >= 1");
  }
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
  TrainOptions batched = BatchedOptions(c_);
  batched.decay_patience = c_.batched_decay_patience;
  batched.decay_factor = c_.batched_decay_factor;
  batched.max_decays = c_.batched_max_decays;
  return TrainWithEarlyStopping<float>(params, batched, steps, step,
                                       [&] { return Validate(); });
}

}  // namespace

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
