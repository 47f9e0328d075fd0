// The validation of a node classification task's data and settings
// (TrainNodeClassifier's INVALID_ARGUMENT errors), and the shape of its
// features, whichever way they are given.
#include "server/training/internal/node_task_input.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "server/training/internal/task_options.h"

namespace ldpgraph::training {
namespace internal {

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

}  // namespace internal

namespace {

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


// The features: given one way and not empty, that way's own rules, a model
// that reads them (a graph model needs the graph, one node per row), at
// least 2 classes, and finite values.
absl::Status ValidateNodeFeatures(const NodeTaskData& d,
                                  const NodeModelConfig& c) {
  if ((d.features != nullptr) + (d.sparse_features != nullptr) +
          (d.feature_rows != nullptr) + (d.feature_file != nullptr) > 1) {
    return absl::InvalidArgumentError(
        "node features given more than one way (dense, sparse, compressed "
        "rows, a file of rows): set one");
  }
  if ((d.features == nullptr && d.sparse_features == nullptr &&
       d.feature_rows == nullptr && d.feature_file == nullptr) ||
      internal::InputRows(d) == 0 || internal::InputCols(d) == 0) {
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
  const size_t n = internal::InputRows(d);
  if (c.kind != NodeModelKind::kMlp &&
      (d.graph == nullptr || d.graph->num_nodes() != n)) {
    return absl::InvalidArgumentError(
        "a graph model needs the graph, with one node per feature row");
  }
  if (!InputFinite(d)) {
    return absl::InvalidArgumentError("node features contain NaN or infinity");
  }
  return absl::OkStatus();
}

// The training, validation and test nodes (of the n feature rows) with
// their labels, and the transition matrix's shape.
absl::Status ValidateNodeLabels(const NodeTaskData& d, size_t n) {
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
  return absl::OkStatus();
}

// Training on noisy labels: the capped selection rule needs the
// transition, the training reports are labels, and propagated predictions
// need the transition, the graph (one node per feature row, n) and label
// steps >= 0.
absl::Status ValidateNoisyLabelTraining(const NodeTaskData& d,
                                        const NodeModelConfig& c, size_t n) {
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
  return absl::OkStatus();
}

// The steps' settings: the batch size, the learning rates, the sparse input
// density and the weight decay.
absl::Status ValidateNodeSteps(const NodeModelConfig& c) {
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

}  // namespace

namespace internal {

absl::Status ValidateNodeData(const NodeTaskData& d, const NodeModelConfig& c) {
  RETURN_IF_ERROR(ValidateNodeFeatures(d, c));
  const size_t n = InputRows(d);
  RETURN_IF_ERROR(ValidateNodeLabels(d, n));
  RETURN_IF_ERROR(ValidateEpochs(c));
  if (c.batched_epoch_rows < 0 || c.validation_rows < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rows per epoch and validation rows must be >= 0 (0: all), got ",
        c.batched_epoch_rows, " and ", c.validation_rows));
  }
  RETURN_IF_ERROR(ValidateNoisyLabelTraining(d, c, n));
  return ValidateNodeSteps(c);
}

}  // namespace internal
}  // namespace ldpgraph::training
