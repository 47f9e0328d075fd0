#include "server/training/tasks.h"

#include <functional>
#include <memory>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/training/losses.h"
#include "server/training/metrics.h"

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

absl::Status ValidateNodeData(const NodeTaskData& d, const NodeModelConfig& c) {
  if (d.features == nullptr || d.features->rows() == 0 ||
      d.features->cols() == 0) {
    return absl::InvalidArgumentError("node features are empty");
  }
  if (d.classes < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("need at least 2 classes, got ", d.classes));
  }
  const size_t n = d.features->rows();
  if (c.kind != NodeModelKind::kMlp &&
      (d.graph == nullptr || d.graph->num_nodes() != n)) {
    return absl::InvalidArgumentError(
        "a graph model needs the graph, with one node per feature row");
  }
  if (!d.features->allFinite()) {
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
  if (c.train.max_epochs < 1 || c.train.patience < 1) {
    return absl::InvalidArgumentError("epochs and patience must be >= 1");
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
  std::function<Mat<float>()> predict_validation;
  std::function<Mat<float>(const std::vector<uint32_t>&)> predict;
  std::function<std::vector<Param<float>*>()> params;
};

}  // namespace

absl::StatusOr<NodeTaskResult> TrainNodeClassifier(const NodeTaskData& d,
                                                   const NodeModelConfig& c,
                                                   uint64_t seed) {
  RETURN_IF_ERROR(ValidateNodeData(d, c));
  PublicRandom rng(seed);
  const Mat<float>& x = *d.features;
  NodeModelHooks hooks;
  std::unique_ptr<Mlp<float>> mlp;
  std::unique_ptr<GraphOperators<float>> ops;
  std::unique_ptr<Gnn<float>> gnn;
  Mat<float> x_train, x_validation, full_grad, train_logits;
  if (c.kind == NodeModelKind::kMlp) {
    MlpConfig mc{static_cast<int>(x.cols()), c.hidden_dim, d.classes,
                 c.layers,  c.dropout,  c.activation, c.input_dropout};
    RETURN_IF_ERROR(ValidateMlpConfig(mc));
    mlp = std::make_unique<Mlp<float>>(mc, rng);
    // An MLP treats rows independently: train on the training rows only,
    // and gather the validation rows once, not every epoch.
    x_train = GatherRows(x, d.train);
    x_validation = GatherRows(x, d.validation);
    hooks.forward_train = [&](PublicRandom& r) -> const Mat<float>& {
      return mlp->Forward(x_train, true, &r);
    };
    hooks.backward = [&](const Mat<float>& g) { mlp->Backward(g); };
    hooks.predict_validation = [&] {
      return Mat<float>(mlp->Forward(x_validation, false, nullptr));
    };
    hooks.predict = [&](const std::vector<uint32_t>& rows) {
      Mat<float> xs = GatherRows(x, rows);
      return Mat<float>(mlp->Forward(xs, false, nullptr));
    };
    hooks.params = [&] { return mlp->Params(); };
  } else {
    GnnConfig gc{c.kind == NodeModelKind::kGcn ? GnnKind::kGcn : GnnKind::kSage,
                 static_cast<int>(x.cols()), c.hidden_dim, d.classes,
                 c.layers, c.dropout, c.activation, c.input_dropout};
    RETURN_IF_ERROR(ValidateGnnConfig(gc));
    ops = std::make_unique<GraphOperators<float>>(
        BuildGraphOperators<float>(*d.graph));
    gnn = std::make_unique<Gnn<float>>(gc, ops.get(), rng);
    full_grad.setZero(x.rows(), d.classes);
    hooks.forward_train = [&](PublicRandom& r) -> const Mat<float>& {
      train_logits = GatherRows(gnn->Forward(x, true, &r), d.train);
      return train_logits;
    };
    hooks.backward = [&](const Mat<float>& g) {
      for (size_t i = 0; i < d.train.size(); ++i) {
        full_grad.row(d.train[i]) = g.row(i);
      }
      gnn->Backward(full_grad);
    };
    hooks.predict = [&](const std::vector<uint32_t>& rows) {
      return GatherRows(gnn->Forward(x, false, nullptr), rows);
    };
    hooks.predict_validation = [&] { return hooks.predict(d.validation); };
    hooks.params = [&] { return gnn->Params(); };
  }

  const Loss train_loss = MakeClassLoss(d.train_targets, d.transition);
  const Loss validation_loss =
      MakeClassLoss(d.validation_targets, d.transition);
  Mat<float> grad;
  auto step = [&]() -> double {
    const Mat<float>& logits = hooks.forward_train(rng);
    const double loss = train_loss(logits, &grad);
    hooks.backward(grad);
    return loss;
  };
  auto validate = [&]() -> Validation {
    Mat<float> logits = hooks.predict_validation();
    return {AccuracyOf(logits, d.validation_targets),
            validation_loss(logits, nullptr)};
  };
  NodeTaskResult result;
  result.training =
      TrainWithEarlyStopping<float>(hooks.params(), c.train, step, validate);
  Mat<float> logits = hooks.predict(d.test);
  std::vector<int32_t> pred = ArgmaxRows(
      absl::MakeConstSpan(logits.data(), logits.size()), logits.rows(),
      logits.cols());
  ASSIGN_OR_RETURN(result.test_accuracy, Accuracy(pred, d.test_truth));
  ASSIGN_OR_RETURN(result.test_micro_f1,
                   MicroF1(pred, d.test_truth, d.classes));
  ASSIGN_OR_RETURN(result.test_macro_f1,
                   MacroF1(pred, d.test_truth, d.classes));
  if (d.keep_outputs) {
    std::vector<uint32_t> all(x.rows());
    std::iota(all.begin(), all.end(), 0u);
    result.outputs = hooks.predict(all);
  }
  return result;
}

Mat<float> HadamardFeatures(const Mat<float>& z, const std::vector<Edge>& a,
                            const std::vector<Edge>& b) {
  Mat<float> out(static_cast<Eigen::Index>(a.size() + b.size()), z.cols());
  Eigen::Index i = 0;
  for (const auto* list : {&a, &b}) {
    for (const Edge& e : *list) {
      out.row(i++) = z.row(e.u).cwiseProduct(z.row(e.v));
    }
  }
  return out;
}

absl::StatusOr<LinkTaskResult> TrainLinkPredictor(const LinkTaskData& d,
                                                  const LinkModelConfig& c,
                                                  uint64_t seed) {
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
  if (c.train.max_epochs < 1 || c.train.patience < 1) {
    return absl::InvalidArgumentError("epochs and patience must be >= 1");
  }
  const Mat<float>& z = *d.embeddings;
  MlpConfig mc{static_cast<int>(z.cols()), c.hidden_dim, 1, c.layers,
               c.dropout, c.activation, c.input_dropout};
  RETURN_IF_ERROR(ValidateMlpConfig(mc));
  PublicRandom rng(seed);
  Mlp<float> scorer(mc, rng);
  Mat<float> x_train = HadamardFeatures(z, d.train_positive, d.train_negative);
  Mat<float> x_val =
      HadamardFeatures(z, d.validation_positive, d.validation_negative);
  Mat<float> x_test = HadamardFeatures(z, d.test_positive, d.test_negative);
  if (c.standardize_features) {
    const RowVec<float> mean = x_train.colwise().mean();
    RowVec<float> inv_sd =
        ((x_train.rowwise() - mean).colwise().squaredNorm() /
         static_cast<float>(x_train.rows()))
            .cwiseSqrt();
    inv_sd = inv_sd.unaryExpr([](float s) { return s > 0 ? 1.0f / s : 0.0f; });
    for (Mat<float>* m : {&x_train, &x_val, &x_test}) {
      m->rowwise() -= mean;
      m->array().rowwise() *= inv_sd.array();
    }
  }
  const size_t p = d.train_positive.size();
  std::vector<uint32_t> partner(p);
  std::iota(partner.begin(), partner.end(), 0u);
  std::vector<uint8_t> targets(x_train.rows(), 0);
  std::fill(targets.begin(), targets.begin() + p, 1);
  const LogisticLoss<float> logistic(targets);
  Mat<float> grad;
  auto step = [&]() -> double {
    const Mat<float>& scores = scorer.Forward(x_train, true, &rng);
    double loss;
    if (c.loss == LinkLossKind::kPairwise) {
      // A fresh pairing every epoch (Fisher-Yates over the public source).
      for (size_t i = p; i > 1; --i) {
        std::swap(partner[i - 1], partner[rng.UniformInt(i)]);
      }
      loss = PairwiseAucLoss<float>(partner)(scores, &grad);
    } else {
      loss = logistic(scores, &grad);
    }
    scorer.Backward(grad);
    return loss;
  };
  auto auc_of = [&](const Mat<float>& x, size_t positives) {
    const Mat<float>& scores = scorer.Forward(x, false, nullptr);
    return RocAuc(absl::MakeConstSpan(scores.data(), positives),
                  absl::MakeConstSpan(scores.data() + positives,
                                      scores.rows() - positives));
  };
  auto validate = [&]() -> Validation {
    return {auc_of(x_val, d.validation_positive.size()).value_or(0.0), 0.0};
  };
  LinkTaskResult result;
  result.training =
      TrainWithEarlyStopping<float>(scorer.Params(), c.train, step, validate);
  ASSIGN_OR_RETURN(result.test_auc, auc_of(x_test, d.test_positive.size()));
  return result;
}

}  // namespace ldpgraph::training
