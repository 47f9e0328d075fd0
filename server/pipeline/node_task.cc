// The node task of a run (internal::RunNode): the split, the collected
// features and labels, the propagation and training (with LPGNN's step
// tuning and PrivGE's choice of propagation), and the robust defence's
// retraining.
#include "server/pipeline/internal/stages.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/dataset/splits.h"
#include "common/status_macros.h"
#include "common/stopwatch.h"
#include "server/pipeline/internal/deferred_kprop.h"
#include "server/pipeline/baselines.h"
#include "server/pipeline/nfr.h"
#include "server/propagation/propagation.h"
#include "server/training/metrics.h"
#include "server/training/mlp_rows.h"
#include "server/training/row_file.h"

namespace ldpgraph::pipeline::internal {
namespace {

// Tuning candidates stop after this many epochs without a better one (the
// patience of LPGNN's own trainer).
constexpr int kTuningPatience = 100;

// Row-wise softmax of logits, as the class posteriors a release shows.
DenseMatrix Posteriors(const Mat<float>& logits) {
  DenseMatrix p(logits.rows(), logits.cols());
  for (Eigen::Index i = 0; i < logits.rows(); ++i) {
    const float top = logits.row(i).maxCoeff();
    double sum = 0;
    for (Eigen::Index j = 0; j < logits.cols(); ++j) {
      sum += std::exp(static_cast<double>(logits(i, j) - top));
    }
    for (Eigen::Index j = 0; j < logits.cols(); ++j) {
      p.at(i, j) = static_cast<float>(
          std::exp(static_cast<double>(logits(i, j) - top)) / sum);
    }
  }
  return p;
}

// What one node-task training needs besides its (K_x, K_y): the run's
// split, graph, collected features and label reports.
struct NodeRunInputs {
  const Dataset* d;
  const Graph* graph;
  const NodeSplit* split;
  const SparseRows* x;  // estimated features (PrivGE, LPGNN)
  const DenseMatrix* release;  // SE-PrivGEmb, DPNE: the embedding
  const LabelReports* labels;  // with a label budget
  // LPGNN: x is held against this fill (CollectFeatures): an absent entry
  // holds it. 0 for the others.
  float x_fill = 0;
};

// The classifier's input: the release, or the estimates propagated (LPGNN:
// feature_steps KProp steps; PrivGE: PPR), standardised when c says so.
struct NodeFeatures {
  Mat<float> features;
  double propagate_seconds = 0;
  // When set, features is empty: the estimates with their KProp and
  // standardisation deferred into the first layer (deferred_kprop.h).
  std::shared_ptr<const training::SparseInput<float>> deferred;
  // When set, features is empty: PrivGE's Z as compressed rows, with its
  // column standardisation for the MLP to fold in (mean and scale empty
  // without one). See PropagatePpr.
  std::shared_ptr<const SparseRows> rows;
  // When set, features is empty: PrivGE's Z as a file of rows, with its
  // column standardisation for the MLP to apply as it reads (mean and
  // scale empty without one). See PropagateToFile.
  std::shared_ptr<const training::RowFile> file;
  std::vector<double> mean, scale;
};

// Whether the training on in's estimates takes predictions propagated
// with label reports (they read every node each epoch, dense).
bool PropagatesPredictions(const NodeRunInputs& in, const PipelineConfig& c) {
  return in.labels != nullptr &&
         c.label_denoising == LabelDenoising::kPublished;
}

// Whether PrivGE's Z goes to a file of rows (ZStorage).
bool ZToFile(const NodeRunInputs& in, const PipelineConfig& c) {
  if (c.method != v1::PIPELINE_METHOD_PRIVGE || in.x == nullptr ||
      c.node_model.kind != training::NodeModelKind::kMlp ||
      PropagatesPredictions(in, c)) {
    return false;
  }
  switch (c.z_storage) {
    case ZStorage::kMemory:
      return false;
    case ZStorage::kFile:
      return true;
    case ZStorage::kAuto:
      break;
  }
  return in.x->cols >= kZFileMinColumns &&
         uint64_t{in.x->rows} * in.x->cols * sizeof(float) > kZFileMinBytes;
}

// Columns [j0, j0 + w) of x, numbered from 0.
SparseRows ColumnSlice(const SparseRows& x, size_t j0, size_t w) {
  SparseRows out;
  out.cols = w;
  out.offsets.reserve(x.rows + 1);
  for (size_t v = 0; v < x.rows; ++v) {
    const auto idx = x.row_indices(v);
    const auto val = x.row_values(v);
    const auto first = std::lower_bound(idx.begin(), idx.end(), j0);
    const auto last = std::lower_bound(first, idx.end(), j0 + w);
    for (auto it = first; it != last; ++it) {
      out.indices.push_back(static_cast<uint32_t>(*it - j0));
      out.values.push_back(val[it - idx.begin()]);
    }
    out.offsets.push_back(out.indices.size());
  }
  out.rows = x.rows;
  return out;
}

// PrivGE's Z (PPR, or feature_steps KProp steps) by slices of columns into
// a file of rows (ZStorage::kFile): each slice is propagated on its own
// (push with AbsoluteRmax over all columns, and slices that are whole
// numbers of PprPushBlockColumns, so that every block pushes as it would
// have in one call), its column moments taken (Standardize's), and
// written. PPR's Z with at most MlpSparseBound non-zeros is then read back
// into compressed rows, as PropagatePpr would have laid it out; otherwise
// the file, with the moments when c.standardize. Memory: a slice's two
// n x width buffers (c.z_slice_bytes), push's scratch, and x's slice.
absl::Status PropagateToFile(const NodeRunInputs& in, const PipelineConfig& c,
                             int feature_steps, NodeFeatures* out) {
  const SparseRows& x = *in.x;
  const size_t n = x.rows, d = x.cols;
  const bool ppr = c.propagation == NodePropagation::kPpr;
  const PprOptions o = AbsoluteRmax(PprOptionsOf(c), x);
  // KProp's slices need no alignment; 16 keeps them as push's would be.
  const size_t block =
      ppr ? static_cast<size_t>(PprPushBlockColumns(n, d, o)) : 16;
  const uint64_t per_column = uint64_t{std::max<size_t>(n, 1)} * 2 *
                              sizeof(float);
  size_t width = static_cast<size_t>(c.z_slice_bytes / per_column);
  width = std::max(block, width / block * block);
  width = std::min(width, d);
  ASSIGN_OR_RETURN(std::unique_ptr<training::RowFile> file,
                   training::RowFile::Create(c.scratch_dir, n, d));
  std::vector<double> mean(d), scale(d);
  uint64_t nonzeros = 0;
  for (size_t j0 = 0; j0 < d; j0 += width) {
    const size_t w = std::min(width, d - j0);
    DenseMatrix z;
    {
      const SparseRows part = ColumnSlice(x, j0, w);
      if (ppr) {
        RETURN_IF_ERROR(PprPushByDensity(*in.graph, part, o, 0, [&] {
                          z = DenseMatrix(n, w);
                          return absl::MakeSpan(z.data);
                        }).status());
      } else {
        ASSIGN_OR_RETURN(z, KProp(*in.graph, DenseWithFill(part, in.x_fill),
                                  feature_steps, c.feature_self_loops,
                                  c.threads, c.kprop_norm));
      }
    }
    for (size_t k = 0; k < w; ++k) {
      const ColumnMoments m = StandardizeMoments(z.data.data() + k, n, w);
      mean[j0 + k] = m.mean;
      scale[j0 + k] = m.scale;
    }
    nonzeros += static_cast<uint64_t>(
        std::count_if(z.data.begin(), z.data.end(),
                      [](float v) { return v != 0.0f; }));
    RETURN_IF_ERROR(file->WriteColumns(j0, w, z.data.data()));
  }
  const uint64_t bound =
      ppr ? training::MlpSparseBound(c.node_model, n, d,
                                     PropagatesPredictions(in, c))
          : 0;
  if (bound > 0 && nonzeros <= bound) {
    // Mostly zeros: compressed rows, as PropagatePpr lays them out.
    SparseRows z;
    z.cols = d;
    z.indices.reserve(nonzeros);
    z.values.reserve(nonzeros);
    z.offsets.reserve(n + 1);
    constexpr size_t kRows = 1024;
    std::vector<float> buffer(kRows * d);
    std::vector<uint32_t> ids(kRows);
    for (size_t first = 0; first < n; first += kRows) {
      const size_t count = std::min(kRows, n - first);
      for (size_t i = 0; i < count; ++i) {
        ids[i] = static_cast<uint32_t>(first + i);
      }
      file->ReadRows(ids.data(), count, buffer.data());
      RETURN_IF_ERROR(file->status());
      for (size_t i = 0; i < count; ++i) {
        const float* row = buffer.data() + i * d;
        for (size_t j = 0; j < d; ++j) {
          if (row[j] != 0.0f) {
            z.indices.push_back(static_cast<uint32_t>(j));
            z.values.push_back(row[j]);
          }
        }
        z.offsets.push_back(z.indices.size());
      }
    }
    z.rows = n;
    if (c.standardize) {
      for (const ColumnMoments& m : StandardizeMoments(z)) {
        out->mean.push_back(m.mean);
        out->scale.push_back(m.scale);
      }
    }
    out->rows = std::make_shared<const SparseRows>(std::move(z));
    return absl::OkStatus();
  }
  if (c.standardize) {
    out->mean = std::move(mean);
    out->scale = std::move(scale);
  }
  out->file = std::move(file);
  return absl::OkStatus();
}

// PrivGE's PPR (PprPushByDensity), laid out by what Z holds. Compressed
// rows when Z has at most training::MlpSparseBound non-zeros (1/8 of its
// entries by default; dense when the MLP cannot fold the standardisation:
// input dropout, or predictions propagated with label reports), with the
// standardisation's column moments; push then holds Z's blocks and the
// rows, at most 18 bytes per non-zero, never n x d. Otherwise Z is
// written straight into out->features (one n x d copy, plus the blocks held
// before push found Z too dense: at most 10 bytes per non-zero of the
// bound) and standardised in place, as before: the same bits. On the
// citation graphs and the 34,493 x 8,415 generated graph at the defaults,
// Z is 25-100% non-zero: dense.
absl::Status PropagatePpr(const NodeRunInputs& in, const PipelineConfig& c,
                          NodeFeatures* out) {
  const SparseRows& x = *in.x;
  const uint64_t bound = training::MlpSparseBound(
      c.node_model, x.rows, x.cols, PropagatesPredictions(in, c));
  ASSIGN_OR_RETURN(std::optional<SparseRows> z,
                   PprPushByDensity(*in.graph, x, PprOptionsOf(c), bound, [&] {
                     out->features.resize(x.rows, x.cols);
                     return absl::MakeSpan(out->features.data(),
                                           out->features.size());
                   }));
  if (!z) {
    if (c.standardize) Standardize(&out->features, c.standardize_clip);
    return absl::OkStatus();
  }
  if (c.standardize) {
    for (const ColumnMoments& m : StandardizeMoments(*z)) {
      out->mean.push_back(m.mean);
      out->scale.push_back(m.scale);
    }
  }
  out->rows = std::make_shared<const SparseRows>(*std::move(z));
  return absl::OkStatus();
}

absl::StatusOr<NodeFeatures> PropagateNode(const NodeRunInputs& in,
                                           const PipelineConfig& c,
                                           int feature_steps) {
  NodeFeatures out;
  DenseMatrix z;
  if (in.release == nullptr) {
    const auto t_prop = std::chrono::steady_clock::now();
    if (c.method == v1::PIPELINE_METHOD_PRIVGE &&
        c.propagation == NodePropagation::kAuto) {
      return absl::InternalError("PropagateNode: propagation auto unresolved");
    }
    if (ZToFile(in, c)) {
      RETURN_IF_ERROR(PropagateToFile(in, c, feature_steps, &out));
      out.propagate_seconds = SecondsSince(t_prop);
      return out;
    }
    if (c.method == v1::PIPELINE_METHOD_PRIVGE &&
        c.propagation == NodePropagation::kPpr) {
      RETURN_IF_ERROR(PropagatePpr(in, c, &out));
      out.propagate_seconds = SecondsSince(t_prop);
      return out;
    } else if (c.aggregator == FeatureAggregator::kHoa) {
      ASSIGN_OR_RETURN(z, HighOrderAggregate(*in.graph,
                                             DenseWithFill(*in.x, in.x_fill),
                                             feature_steps,
                                             c.feature_self_loops, c.threads,
                                             c.kprop_norm));
    } else if (DefersKProp(c, in.x->rows, in.x->cols)) {
      ASSIGN_OR_RETURN(training::SparseInput<float> deferred,
                       DeferKProp(*in.graph, *in.x, in.x_fill, c,
                                  feature_steps));
      out.deferred = std::make_shared<const training::SparseInput<float>>(
          std::move(deferred));
      out.propagate_seconds = SecondsSince(t_prop);
      return out;
    } else {
      ASSIGN_OR_RETURN(z, KProp(*in.graph, DenseWithFill(*in.x, in.x_fill),
                                feature_steps, c.feature_self_loops,
                                c.threads, c.kprop_norm));
    }
    out.propagate_seconds = SecondsSince(t_prop);
  }
  out.features = ToEigen(in.release != nullptr ? *in.release : z);
  if (c.standardize) Standardize(&out.features, c.standardize_clip);
  return out;
}

// Trains on `features` (PropagateNode) with the targets of label_steps and
// scores the test set. tuning: only the training reports spread
// (DenoiseLabels) and LPGNN's rule runs with the published trainer's
// patience of 100 epochs.
absl::StatusOr<RunResult> TrainNodeOnce(const NodeRunInputs& in,
                                        const PipelineConfig& c,
                                        const NodeFeatures& propagated,
                                        int label_steps, bool tuning,
                                        uint64_t model_seed) {
  const Dataset& d = *in.d;
  const Graph& graph = *in.graph;
  const NodeSplit& split = *in.split;
  RunResult r;
  r.propagate_seconds = propagated.propagate_seconds;
  const Mat<float>& features = propagated.features;

  training::NodeTaskData data;
  data.features = propagated.deferred || propagated.rows || propagated.file
                      ? nullptr
                      : &features;
  data.sparse_features = propagated.deferred.get();
  data.feature_rows = propagated.rows.get();
  data.feature_file = propagated.file.get();
  data.feature_mean = propagated.mean;
  data.feature_scale = propagated.scale;
  if ((propagated.rows || propagated.file) && !propagated.mean.empty()) {
    data.feature_clip = c.standardize_clip;
  }
  data.graph = &graph;
  data.classes = d.meta.classes;
  data.keep_outputs = c.keep_node_outputs && !tuning;
  data.keep_model = c.keep_node_model && !tuning;
  data.train.assign(split.train.begin(), split.train.end());
  data.validation.assign(split.validation.begin(), split.validation.end());
  data.test.assign(split.test.begin(), split.test.end());
  for (NodeId v : split.test) data.test_truth.push_back(d.labels[v]);
  training::NodeModelConfig model = c.node_model;
  model.threads = c.threads;
  if (in.labels != nullptr) {
    ASSIGN_OR_RETURN(NoisyLabels labels,
                     DenoiseLabels(d, graph, split, c, d.meta.classes,
                                   *in.labels, label_steps, !tuning));
    data.train_targets = std::move(labels.train);
    data.validation_targets = std::move(labels.validation);
    data.transition = in.labels->transition;
    if (c.label_denoising == LabelDenoising::kPublished) {
      data.propagate_predictions = true;
      data.label_steps = label_steps;
      data.train_reports = std::move(labels.train_reports);
      // LPGNN's rule, every epoch of the budget (no early stopping) unless
      // tuning.
      model.train.selection = training::SelectionRule::kNoisyLabelsCapped;
      model.train.patience =
          tuning ? std::min(model.train.max_epochs, kTuningPatience)
                 : model.train.max_epochs;
    }
    r.label_agreement = labels.agreement;
    r.label_agreement_raw = labels.agreement_raw;
  } else {
    for (NodeId v : split.train) data.train_targets.push_back(d.labels[v]);
    for (NodeId v : split.validation) {
      data.validation_targets.push_back(d.labels[v]);
    }
  }
  ASSIGN_OR_RETURN(training::NodeTaskResult t,
                   training::TrainNodeClassifier(data, model, model_seed));
  r.metric = t.test_accuracy;
  r.micro_f1 = t.test_micro_f1;
  r.macro_f1 = t.test_macro_f1;
  r.confusion =
      ConfusionMatrix(t.test_predictions, data.test_truth, d.meta.classes);
  if (c.attack_class) {
    ASSIGN_OR_RETURN(r.target_rate, TargetRate(r.confusion, *c.attack_class));
  }
  r.training = t.training;
  r.train_seconds = t.training.seconds;
  if (t.outputs) r.node_outputs = Posteriors(*t.outputs);
  if (t.model) {
    r.node_model =
        std::make_shared<const training::ModelWeights>(std::move(*t.model));
  }
  return r;
}

// The robust defence (robust.h) after a first training `first` (its
// node_outputs kept): the training and validation nodes whose label it
// contradicts are left out and the model trained again on `propagated`
// with c (which says whether to keep outputs). The figures go to
// RunResult::robust; the first model is kept when nothing is dropped or
// nothing would be left to train or select on (robust "retrained": false).
absl::StatusOr<RunResult> RobustRetrain(const NodeRunInputs& in,
                                        const PipelineConfig& c,
                                        const NodeFeatures& propagated,
                                        int label_steps, uint64_t model_seed,
                                        const Poisoning* poisoning,
                                        RunResult first) {
  if (in.labels == nullptr) {
    // The curator's own labels: nothing for an attacker to report.
    if (!c.keep_node_outputs) first.node_outputs.reset();
    first.robust = {{"robust", "not applicable"}};
    return first;
  }
  const std::vector<int32_t>& labels = in.labels->reported;
  std::vector<uint32_t> candidates(in.split->train.begin(),
                                   in.split->train.end());
  candidates.insert(candidates.end(), in.split->validation.begin(),
                    in.split->validation.end());
  if (!first.node_outputs) {
    return absl::InternalError("robust: the first model kept no outputs");
  }
  // Randomized response's probabilities.
  double keep = 1, other = 0;
  if (in.labels->transition.rows() > 1) {
    keep = in.labels->transition(0, 0);
    other = in.labels->transition(0, 1);
  }
  ASSIGN_OR_RETURN(const std::vector<int> overreported,
                   OverReportedClasses(*first.node_outputs, candidates, labels,
                                       keep, other, kRobustAlpha));
  ASSIGN_OR_RETURN(std::vector<uint32_t> contradicted,
                   ContradictedNodes(*first.node_outputs, candidates, labels));
  std::vector<uint32_t> dropped;
  for (uint32_t v : contradicted) {
    if (std::binary_search(overreported.begin(), overreported.end(),
                           labels[v])) {
      dropped.push_back(v);
    }
  }
  NodeSplit split = *in.split;
  auto drop = [&](std::vector<NodeId>* list) {
    const size_t before = list->size();
    std::erase_if(*list, [&](NodeId v) {
      return std::binary_search(dropped.begin(), dropped.end(), v);
    });
    return before - list->size();
  };
  const size_t dropped_train = drop(&split.train);
  const size_t dropped_validation = drop(&split.validation);
  nlohmann::json figures = RobustToJson(
      dropped, dropped_train, dropped_validation,
      first.training.best_validation, overreported,
      poisoning != nullptr ? poisoning->malicious : std::vector<bool>());
  if (dropped.empty() || split.train.empty() || split.validation.empty()) {
    figures["robust"] = "applied";
    figures["retrained"] = false;
    if (!c.keep_node_outputs) first.node_outputs.reset();
    first.robust = std::move(figures);
    return first;
  }
  NodeRunInputs retrain = in;
  retrain.split = &split;
  ASSIGN_OR_RETURN(RunResult second,
                   TrainNodeOnce(retrain, c, propagated, label_steps, false,
                                 model_seed));
  figures["robust"] = "applied";
  figures["retrained"] = true;
  second.robust = std::move(figures);
  second.train_seconds += first.train_seconds;
  return second;
}

// Leaves the untrusted nodes out of the split's training and validation
// nodes (the test nodes stay: they are scored against the true labels).
// FAILED_PRECONDITION when none of either is left.
absl::Status DropUntrusted(const std::vector<uint32_t>& untrusted,
                           NodeSplit* split) {
  if (untrusted.empty()) return absl::OkStatus();
  for (auto* list : {&split->train, &split->validation}) {
    std::erase_if(*list, [&](NodeId v) {
      return std::binary_search(untrusted.begin(), untrusted.end(), v);
    });
  }
  if (split->train.empty() || split->validation.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the report screen left no training or validation node (",
        untrusted.size(), " nodes flagged)"));
  }
  return absl::OkStatus();
}

// x (held against fill) and z side by side: z's columns after x's.
SparseRows AppendColumns(const SparseRows& x, float fill,
                         const SparseRows& z) {
  const SparseRows full = WithoutFill(x, fill);
  SparseRows out;
  out.cols = full.cols + z.cols;
  out.indices.reserve(full.nnz() + z.nnz());
  out.values.reserve(full.nnz() + z.nnz());
  for (size_t v = 0; v < full.rows; ++v) {
    const auto idx = full.row_indices(v);
    const auto val = full.row_values(v);
    out.indices.insert(out.indices.end(), idx.begin(), idx.end());
    out.values.insert(out.values.end(), val.begin(), val.end());
    for (uint32_t j : z.row_indices(v)) {
      out.indices.push_back(static_cast<uint32_t>(full.cols + j));
    }
    const auto zv = z.row_values(v);
    out.values.insert(out.values.end(), zv.begin(), zv.end());
    out.offsets.push_back(out.indices.size());
  }
  out.rows = full.rows;
  return out;
}

// NodeInputs other than kReports: the candidates (kAuto: reports,
// positional, both; else the one asked) each aggregated and trained, the
// positional ones standardised after aggregation; the best validation wins
// (the first on a tie). The run's cost is every candidate's.
absl::StatusOr<RunResult> TrainOnInputs(const NodeRunInputs& in,
                                        const PipelineConfig& c,
                                        int feature_steps, int label_steps,
                                        uint64_t model_seed,
                                        uint64_t positional_seed,
                                        nlohmann::json* tuning) {
  const SparseRows positional = FeatureFreeFeatures(
      in.x->rows, static_cast<size_t>(c.positional_features),
      positional_seed);
  std::vector<NodeInputs> candidates;
  if (c.inputs == NodeInputs::kAuto) {
    candidates = {NodeInputs::kReports, NodeInputs::kPositional,
                  NodeInputs::kBoth};
  } else {
    candidates = {c.inputs};
  }
  RunResult best;
  double best_validation = -1, propagate_seconds = 0, train_seconds = 0;
  NodeInputs kept = candidates.front();
  nlohmann::json rows = nlohmann::json::array();
  for (NodeInputs inputs : candidates) {
    NodeRunInputs candidate = in;
    PipelineConfig cc = c;
    SparseRows both;
    if (inputs == NodeInputs::kPositional) {
      candidate.x = &positional;
      candidate.x_fill = 0;
    } else if (inputs == NodeInputs::kBoth) {
      both = AppendColumns(*in.x, in.x_fill, positional);
      candidate.x = &both;
      candidate.x_fill = 0;
    }
    if (inputs != NodeInputs::kReports) cc.standardize = true;
    ASSIGN_OR_RETURN(const NodeFeatures features,
                     PropagateNode(candidate, cc, feature_steps));
    ASSIGN_OR_RETURN(RunResult r, TrainNodeOnce(candidate, cc, features,
                                                label_steps, false,
                                                model_seed));
    rows.push_back({{"inputs", kNodeInputsNames.Name(inputs)},
                    {"validation", r.training.best_validation},
                    {"epochs", r.training.epochs}});
    propagate_seconds += r.propagate_seconds;
    train_seconds += r.train_seconds;
    if (r.training.best_validation > best_validation) {
      best_validation = r.training.best_validation;
      kept = inputs;
      best = std::move(r);
    }
  }
  best.propagate_seconds = propagate_seconds;
  best.train_seconds = train_seconds;
  *tuning = {{"candidates", std::move(rows)},
             {"inputs", kNodeInputsNames.Name(kept)},
             {"feature_steps", feature_steps},
             {"positional_features", c.positional_features}};
  return best;
}

// c.smooth on t's posteriors (SmoothPredictions) with the labels the run
// holds for split's training and validation nodes (the label reports under
// a label budget): t's test figures become the smoothed predictions'.
absl::Status Smooth(const Dataset& d, const Graph& graph,
                    const NodeSplit& split, const LabelReports* labels,
                    const PipelineConfig& c, RunResult* t) {
  if (!t->node_outputs) {
    return absl::InternalError("smooth: the model kept no outputs");
  }
  const std::vector<int32_t>& held =
      labels != nullptr ? labels->reported : d.labels;
  const std::vector<uint32_t> train(split.train.begin(), split.train.end());
  const std::vector<uint32_t> validation(split.validation.begin(),
                                         split.validation.end());
  std::vector<int32_t> train_targets, validation_targets;
  for (uint32_t v : train) train_targets.push_back(held[v]);
  for (uint32_t v : validation) validation_targets.push_back(held[v]);
  ASSIGN_OR_RETURN(
      const LabelPropagationResult s,
      SmoothPredictions(graph, *t->node_outputs, train, train_targets,
                        validation, validation_targets, c.threads));
  const int classes = d.meta.classes;
  std::vector<int32_t> predicted, truth;
  for (NodeId v : split.test) {
    predicted.push_back(s.predictions[v]);
    truth.push_back(d.labels[v]);
  }
  nlohmann::json candidates = nlohmann::json::array();
  for (size_t i = 0; i < s.validation.size(); ++i) {
    candidates.push_back(
        {{"alpha", i == 0 ? 0.0 : kLabelPropagationAlphas[i - 1]},
         {"validation", s.validation[i]}});
  }
  for (size_t i = 0; i < s.mix_validation.size(); ++i) {
    candidates.push_back({{"mix", kSmoothMixWeights[i]},
                          {"validation", s.mix_validation[i]}});
  }
  t->smooth = {{"alpha", s.alpha},
               {"mix", s.mix},
               {"candidates", std::move(candidates)},
               {"accuracy_before", t->metric}};
  if (predicted.empty()) return absl::OkStatus();
  return ScoreTestPredictions(predicted, truth, classes, c, t);
}

}  // namespace

absl::StatusOr<NodeSplit> RunNodeSplit(const Dataset& d,
                                       const PipelineConfig& c, uint64_t seed,
                                       int run) {
  if (c.planetoid_split) return PlanetoidSplit(d);
  return RandomNodeSplit(d.labels, c.train_fraction, c.validation_fraction,
                         StageSeed(seed, c.fixed_split ? 0 : run,
                                   Stage::kSplit));
}

std::vector<std::vector<uint32_t>> ConfusionMatrix(
    const std::vector<int32_t>& predicted, const std::vector<int32_t>& truth,
    int classes) {
  std::vector<std::vector<uint32_t>> m(classes,
                                       std::vector<uint32_t>(classes, 0));
  for (size_t i = 0; i < predicted.size() && i < truth.size(); ++i) {
    if (truth[i] >= 0 && truth[i] < classes && predicted[i] >= 0 &&
        predicted[i] < classes) {
      ++m[truth[i]][predicted[i]];
    }
  }
  return m;
}

absl::Status ScoreTestPredictions(const std::vector<int32_t>& predicted,
                                  const std::vector<int32_t>& truth,
                                  int classes, const PipelineConfig& c,
                                  RunResult* r) {
  ASSIGN_OR_RETURN(r->metric, training::Accuracy(predicted, truth));
  ASSIGN_OR_RETURN(r->micro_f1, training::MicroF1(predicted, truth, classes));
  ASSIGN_OR_RETURN(r->macro_f1, training::MacroF1(predicted, truth, classes));
  r->confusion = ConfusionMatrix(predicted, truth, classes);
  if (c.attack_class) {
    ASSIGN_OR_RETURN(r->target_rate,
                     TargetRate(r->confusion, *c.attack_class));
  }
  return absl::OkStatus();
}

absl::StatusOr<RunResult> RunNode(const Dataset& d, const PipelineConfig& c,
                                  const Collected* collected, uint64_t seed,
                                  int run, const RunOverrides& overrides) {
  RunResult r;
  // The graph the curator holds: the dataset's, or the caller's replacement.
  const Graph& graph =
      overrides.graph != nullptr ? *overrides.graph : d.graph;
  const int classes = d.meta.classes;
  ASSIGN_OR_RETURN(NodeSplit split, RunNodeSplit(d, c, seed, run));
  const Collected* labels_collected =
      collected != nullptr && collected->label_reports ? collected : nullptr;
  if (labels_collected != nullptr) {
    // Only nodes whose label report the curator holds can train or select.
    const auto& reports = *collected->label_reports;
    if (reports.size() != d.graph.num_nodes()) {
      return absl::InvalidArgumentError("collected label reports: wrong size");
    }
    for (auto* list : {&split.train, &split.validation}) {
      std::erase_if(*list, [&](NodeId v) { return reports[v] < 0; });
    }
    if (split.train.empty() || split.validation.empty()) {
      return absl::FailedPreconditionError(
          "no label reports among the training or validation nodes");
    }
  }
  ASSIGN_OR_RETURN(NoiseStreams noise,
                   NoiseStreams::Create(c, NoiseSeed(seed, run),
                                        collected || IsReleaseMethod(c.method)
                                            ? 0
                                            : d.graph.num_nodes()));
  std::unique_ptr<Poisoning> poisoning;
  if (collected == nullptr && c.attack_fraction > 0) {
    if (overrides.features != nullptr) {
      return absl::InvalidArgumentError(
          "the poisoning attack is simulated on the run's own reports; it "
          "does not apply to overriding features");
    }
    ASSIGN_OR_RETURN(poisoning, PreparePoisoning(d, c, seed));
  }
  NodeRunInputs in{&d, &graph, &split, nullptr, nullptr, nullptr};
  DenseMatrix release;
  SparseRows x;
  if (IsReleaseMethod(c.method)) {
    ASSIGN_OR_RETURN(release, RunRelease(graph, c, seed, run, &r));
    in.release = &release;
  } else {
    std::vector<uint32_t> untrusted;
    // LPGNN holds the estimates against a fill (Multi-bit's value on the
    // unreported dimensions), so that they stay as sparse as the reports.
    ASSIGN_OR_RETURN(
        x, CollectFeatures(d, c, collected, overrides.features,
                           poisoning.get(), noise, &r, &untrusted,
                           IsGnnMethod(c.method) ? &in.x_fill : nullptr));
    RETURN_IF_ERROR(UnbiasHdsForLpgnn(d, c, &x, &in.x_fill));
    in.x = &x;
    if (overrides.untrusted != nullptr) {
      std::vector<uint32_t> both;
      std::set_union(untrusted.begin(), untrusted.end(),
                     overrides.untrusted->begin(), overrides.untrusted->end(),
                     std::back_inserter(both));
      untrusted = std::move(both);
    }
    RETURN_IF_ERROR(DropUntrusted(untrusted, &split));
  }
  LabelReports labels;
  if (c.label_epsilon) {
    ASSIGN_OR_RETURN(labels, PerturbLabels(d, split, c, classes,
                                           labels_collected, poisoning.get(),
                                           noise));
    in.labels = &labels;
  }
  const uint64_t model_seed = StageSeed(seed, run, Stage::kModel);
  int feature_steps = c.feature_steps, label_steps = c.label_steps;
  nlohmann::json tuning;
  double nfr_tau = c.nfr_tau;
  // The model's settings the tuning keeps (the configured ones otherwise).
  training::NodeModelConfig tuned_model = c.node_model;
  const bool tune_model = !c.tune_learning_rate.empty() ||
                          !c.tune_weight_decay.empty() ||
                          !c.tune_dropout.empty();
  if (IsGnnMethod(c.method) &&
      (!c.tune_feature_steps.empty() || !c.tune_nfr.empty() || tune_model)) {
    // Every candidate on this run's split and reports, scored by its
    // selected epoch's validation accuracy (against the reports when the
    // labels are noisy); the first best wins.
    const std::vector<int> kx_grid = c.tune_feature_steps.empty()
                                         ? std::vector<int>{c.feature_steps}
                                         : c.tune_feature_steps;
    const std::vector<int> ky_grid =
        c.label_epsilon && !c.tune_label_steps.empty()
            ? c.tune_label_steps
            : std::vector<int>{c.label_steps};
    const std::vector<double> tau_grid =
        c.tune_nfr.empty() ? std::vector<double>{c.nfr_tau} : c.tune_nfr;
    auto grid_or = [](const std::vector<double>& grid, double value) {
      return grid.empty() ? std::vector<double>{value} : grid;
    };
    const std::vector<double> lr_grid = grid_or(
        c.tune_learning_rate, c.node_model.train.adam.learning_rate);
    const std::vector<double> wd_grid = grid_or(
        c.tune_weight_decay, c.node_model.train.adam.weight_decay);
    const std::vector<double> dropout_grid =
        grid_or(c.tune_dropout, c.node_model.dropout);
    double best = -1;
    tuning = nlohmann::json::array();
    for (double tau : tau_grid) {
      SparseRows regularised;
      NodeRunInputs candidate = in;
      if (tau > 0) {
        ASSIGN_OR_RETURN(const double threshold, NfrThreshold(c, d, tau));
        regularised = x;
        ApplyNfr(threshold, &regularised, &candidate.x_fill);
        candidate.x = &regularised;
      }
      for (int kx : kx_grid) {
        ASSIGN_OR_RETURN(const NodeFeatures features,
                         PropagateNode(candidate, c, kx));
        for (int ky : ky_grid) {
          for (double lr : lr_grid) {
            for (double wd : wd_grid) {
              for (double dropout : dropout_grid) {
                PipelineConfig cc = c;
                cc.node_model.train.adam.learning_rate = lr;
                cc.node_model.train.adam.weight_decay = wd;
                cc.node_model.dropout = dropout;
                ASSIGN_OR_RETURN(RunResult t,
                                 TrainNodeOnce(candidate, cc, features, ky,
                                               true, model_seed));
                nlohmann::json row = {
                    {"feature_steps", kx},
                    {"label_steps", ky},
                    {"validation", t.training.best_validation},
                    {"epochs", t.training.epochs}};
                if (!c.tune_nfr.empty()) row["nfr_tau"] = tau;
                if (tune_model) {
                  row["learning_rate"] = lr;
                  row["weight_decay"] = wd;
                  row["dropout"] = dropout;
                }
                tuning.push_back(std::move(row));
                if (t.training.best_validation > best) {
                  best = t.training.best_validation;
                  feature_steps = kx;
                  label_steps = ky;
                  nfr_tau = tau;
                  tuned_model = cc.node_model;
                }
              }
            }
          }
        }
      }
    }
  }
  if (nfr_tau > 0 && in.x != nullptr) {
    ASSIGN_OR_RETURN(const double threshold, NfrThreshold(c, d, nfr_tau));
    ApplyNfr(threshold, &x, &in.x_fill);
  }
  RunResult t;
  // The robust defence and the smoothing read the model's posteriors.
  PipelineConfig chosen = c;
  chosen.node_model = tuned_model;
  if (c.defences.robust || c.smooth) chosen.keep_node_outputs = true;
  std::optional<NodeFeatures> kept_features;
  if (c.method == v1::PIPELINE_METHOD_PRIVGE &&
      c.propagation == NodePropagation::kAuto && in.release == nullptr) {
    // Both propagations on this run's split and reports, each trained as
    // configured; the better validation wins (PPR, the paper's, on a tie).
    double best = -1, propagate_seconds = 0, train_seconds = 0;
    NodePropagation kept = NodePropagation::kPpr;
    tuning = nlohmann::json::array();
    // Past the bound PPR is at chance (config.h): KProp alone.
    const bool ppr_candidate = in.graph->num_nodes() <= c.auto_ppr_max_nodes;
    std::vector<NodePropagation> candidates;
    if (ppr_candidate) candidates.push_back(NodePropagation::kPpr);
    candidates.push_back(NodePropagation::kKProp);
    for (NodePropagation p : candidates) {
      PipelineConfig candidate = chosen;
      candidate.propagation = p;
      ASSIGN_OR_RETURN(NodeFeatures features,
                       PropagateNode(in, candidate, feature_steps));
      ASSIGN_OR_RETURN(RunResult run_p,
                       TrainNodeOnce(in, candidate, features, label_steps,
                                     false, model_seed));
      tuning.push_back({{"propagation", NodePropagationName(p)},
                        {"validation", run_p.training.best_validation},
                        {"epochs", run_p.training.epochs}});
      propagate_seconds += run_p.propagate_seconds;
      train_seconds += run_p.train_seconds;
      if (run_p.training.best_validation > best) {
        best = run_p.training.best_validation;
        kept = p;
        t = std::move(run_p);
        if (c.defences.robust) kept_features = std::move(features);
      }
    }
    chosen.propagation = kept;
    // The run's cost is both candidates'.
    t.propagate_seconds = propagate_seconds;
    t.train_seconds = train_seconds;
    tuning = {{"candidates", std::move(tuning)},
              {"propagation", NodePropagationName(kept)},
              {"feature_steps", feature_steps}};
    if (!ppr_candidate) {
      tuning["ppr_skipped"] = absl::StrCat(
          "the graph's ", in.graph->num_nodes(), " nodes pass auto's ",
          c.auto_ppr_max_nodes, ", past which PPR scores at chance");
    }
  } else if (IsGnnMethod(c.method) && c.inputs != NodeInputs::kReports &&
             in.x != nullptr) {
    nlohmann::json inputs_tuning;
    ASSIGN_OR_RETURN(t, TrainOnInputs(in, chosen, feature_steps, label_steps,
                                      model_seed,
                                      StageSeed(seed, run, Stage::kBaseline),
                                      &inputs_tuning));
    if (!tuning.is_null()) {
      // The steps (and NFR) were tuned on the reports first.
      inputs_tuning["steps"] = {{"candidates", std::move(tuning)},
                                {"feature_steps", feature_steps},
                                {"label_steps", label_steps}};
      if (!c.tune_nfr.empty()) inputs_tuning["steps"]["nfr_tau"] = nfr_tau;
    }
    tuning = std::move(inputs_tuning);
  } else {
    ASSIGN_OR_RETURN(NodeFeatures features,
                     PropagateNode(in, c, feature_steps));
    ASSIGN_OR_RETURN(t, TrainNodeOnce(in, chosen, features, label_steps, false,
                                      model_seed));
    if (c.defences.robust) kept_features = std::move(features);
  }
  if (c.defences.robust) {
    chosen.keep_node_outputs = c.keep_node_outputs || c.smooth;
    ASSIGN_OR_RETURN(t, RobustRetrain(in, chosen, *kept_features, label_steps,
                                      model_seed, poisoning.get(),
                                      std::move(t)));
  }
  if (c.smooth) {
    RETURN_IF_ERROR(Smooth(d, graph, split, in.labels, c, &t));
    if (!c.keep_node_outputs) t.node_outputs.reset();
  }
  if (c.keep_node_model && in.x != nullptr) {
    t.node_features = std::make_shared<const SparseRows>(
        in.x_fill == 0.0f ? std::move(x) : WithoutFill(x, in.x_fill));
  }
  t.perturb_seconds = r.perturb_seconds;
  t.noise_source = r.noise_source;
  t.screen = std::move(r.screen);
  if (IsReleaseMethod(c.method)) {
    t.propagate_seconds = r.propagate_seconds;
    t.release = std::move(r.release);
  }
  if (tuning.is_object()) {
    t.tuning = std::move(tuning);
  } else if (!tuning.is_null()) {
    t.tuning = {{"candidates", std::move(tuning)},
                {"feature_steps", feature_steps},
                {"label_steps", label_steps}};
    if (!c.tune_nfr.empty()) t.tuning["nfr_tau"] = nfr_tau;
    if (tune_model) {
      t.tuning["learning_rate"] = tuned_model.train.adam.learning_rate;
      t.tuning["weight_decay"] = tuned_model.train.adam.weight_decay;
      t.tuning["dropout"] = tuned_model.dropout;
    }
  }
  return t;
}

}  // namespace ldpgraph::pipeline::internal
