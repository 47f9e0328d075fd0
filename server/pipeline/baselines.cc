#include "server/pipeline/baselines.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numbers>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/dataset/splits.h"
#include "common/random/random.h"
#include "common/status_macros.h"
#include "common/stopwatch.h"
#include "server/pipeline/internal/stages.h"
#include "server/propagation/propagation.h"
#include "server/training/metrics.h"

namespace ldpgraph::pipeline {
namespace {

// Row-wise argmax (ties to the lower class); a row of zeros (no label
// reached the node) gets `fallback`.
std::vector<int32_t> ArgmaxRows(const DenseMatrix& f, int32_t fallback) {
  std::vector<int32_t> out(f.rows, fallback);
  for (size_t v = 0; v < f.rows; ++v) {
    float best = 0;
    for (size_t k = 0; k < f.cols; ++k) {
      if (f.at(v, k) > best) {
        best = f.at(v, k);
        out[v] = static_cast<int32_t>(k);
      }
    }
  }
  return out;
}

// collected: the deployed curator's label reports and untrusted nodes
// (null: simulated, as RunPipeline).
absl::StatusOr<RunResult> RunGraphLabels(const Dataset& d, const Graph& graph,
                                         const PipelineConfig& c,
                                         uint64_t seed, int run,
                                         const Collected* collected = nullptr) {
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(NodeSplit split, internal::RunNodeSplit(d, c, seed, run));
  const int classes = d.meta.classes;
  std::vector<int32_t> train_targets, validation_targets;
  if (collected != nullptr) {
    const std::vector<int32_t>& held = collected->label_reports
                                           ? *collected->label_reports
                                           : d.labels;
    if (held.size() != d.graph.num_nodes()) {
      return absl::InvalidArgumentError("collected label reports: wrong size");
    }
    const std::vector<uint32_t>& untrusted = collected->untrusted;
    for (auto* list : {&split.train, &split.validation}) {
      std::erase_if(*list, [&](NodeId v) {
        return held[v] < 0 ||
               std::binary_search(untrusted.begin(), untrusted.end(), v);
      });
    }
    for (NodeId v : split.train) train_targets.push_back(held[v]);
    for (NodeId v : split.validation) validation_targets.push_back(held[v]);
  } else if (c.label_epsilon) {
    // The label reports such a run would hold: randomized response with
    // the run's budget, from the baseline's own stream.
    ASSIGN_OR_RETURN(internal::NoiseStreams noise,
                     internal::NoiseStreams::Create(
                         c, StageSeed(seed, run, Stage::kBaseline),
                         d.graph.num_nodes()));
    ASSIGN_OR_RETURN(internal::LabelReports reports,
                     internal::PerturbLabels(d, split, c, classes, nullptr,
                                             nullptr, noise));
    for (NodeId v : split.train) train_targets.push_back(reports.reported[v]);
    for (NodeId v : split.validation) {
      validation_targets.push_back(reports.reported[v]);
    }
  } else {
    for (NodeId v : split.train) train_targets.push_back(d.labels[v]);
    for (NodeId v : split.validation) {
      validation_targets.push_back(d.labels[v]);
    }
  }
  const std::vector<uint32_t> train(split.train.begin(), split.train.end());
  const std::vector<uint32_t> validation(split.validation.begin(),
                                         split.validation.end());
  ASSIGN_OR_RETURN(LabelPropagationResult lp,
                   PropagateLabels(graph, classes, train, train_targets,
                                   validation, validation_targets, c.threads));
  RunResult r;
  std::vector<int32_t> predicted, truth;
  for (NodeId v : split.test) {
    predicted.push_back(lp.predictions[v]);
    truth.push_back(d.labels[v]);
  }
  RETURN_IF_ERROR(
      internal::ScoreTestPredictions(predicted, truth, classes, c, &r));
  nlohmann::json candidates = nlohmann::json::array();
  for (size_t i = 0; i < lp.validation.size(); ++i) {
    candidates.push_back({{"alpha", kLabelPropagationAlphas[i]},
                          {"validation", lp.validation[i]}});
  }
  r.tuning = {{"candidates", std::move(candidates)}, {"alpha", lp.alpha}};
  r.train_seconds = SecondsSince(start);
  r.noise_source = c.label_epsilon ? (c.secure_noise ? "secure"
                                                     : "seeded-not-private")
                                   : "none";
  return r;
}

// The raw width: meta.json's feature count, or the width of the rows a
// curator keeps when its meta says none.
size_t FeatureWidth(const Dataset& d) {
  return d.meta.features > 0 ? static_cast<size_t>(d.meta.features)
                             : d.features.cols;
}

}  // namespace

absl::string_view BaselineKey(Baseline b) {
  switch (b) {
    case Baseline::kFeatureFree:
      return "feature_free";
    case Baseline::kGraphLabels:
      return "graph_labels";
    case Baseline::kRaw:
      return "raw";
    case Baseline::kNoGraph:
      return "no_graph";
  }
  return "unknown";
}

bool BaselineApplies(const PipelineConfig& c, Baseline b) {
  if (c.task != v1::PIPELINE_TASK_NODE) return false;
  return b != Baseline::kFeatureFree || !IsReleaseMethod(c.method);
}

absl::StatusOr<PipelineConfig> BaselineConfig(const PipelineConfig& c,
                                              Baseline b) {
  if (!BaselineApplies(c, b) || b == Baseline::kGraphLabels ||
      b == Baseline::kNoGraph) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", kBaselineNames.Name(b), " baseline has no configuration beside ",
        MethodName(c.method), " on the ", TaskName(c.task), " task"));
  }
  PipelineConfig out = c;
  out.mechanism = "none";
  out.sampled.reset();
  out.nfr_tau = 0;
  out.tune_nfr.clear();
  out.attack_fraction = 0;
  out.attack_class.reset();
  out.defences = Defences();
  out.keep_node_outputs = false;
  out.keep_node_model = false;
  out.node_model.train.patience =
      std::min(out.node_model.train.patience, kBaselinePatience);
  if (!IsReleaseMethod(c.method)) {
    // Raw values as they are, as `--mechanism none` runs them.
    out.scaling = FeatureScaling::kUnit;
    out.standardize = false;
    out.standardize_clip = 0;
  }
  if (b == Baseline::kRaw && c.method == v1::PIPELINE_METHOD_LPGNN) {
    // LPGNN's table has its own row for raw features (eps_x = inf): the
    // authors' non-private settings, as `--mechanism none` runs them. The
    // settings the user fixed stay.
    out.dataset_settings = true;
  }
  if (b == Baseline::kFeatureFree) {
    // Random columns carry no scale of their own: standardised after
    // propagation, as the re-evaluation's.
    out.standardize = true;
    if (IsGnnMethod(c.method) && c.aggregator != FeatureAggregator::kHoa) {
      out.aggregator = FeatureAggregator::kHoa;
      out.feature_steps = kFeatureFreeSteps;
      out.tune_feature_steps.clear();
    }
  }
  return out;
}

SparseRows FeatureFreeFeatures(size_t n, size_t d, uint64_t seed) {
  PublicRandom rng(seed);
  SparseRows x;
  x.cols = d;
  x.offsets.reserve(n + 1);
  x.indices.reserve(n * d);
  x.values.reserve(n * d);
  for (size_t v = 0; v < n; ++v) {
    for (size_t j = 0; j < d; j += 2) {
      // Box-Muller: two normals from two uniforms in (0, 1].
      const double u1 = 1.0 - rng.UniformDouble(), u2 = rng.UniformDouble();
      const double radius = std::sqrt(-2.0 * std::log(u1));
      const double angle = 2 * std::numbers::pi * u2;
      x.indices.push_back(static_cast<uint32_t>(j));
      x.values.push_back(static_cast<float>(radius * std::cos(angle)));
      if (j + 1 < d) {
        x.indices.push_back(static_cast<uint32_t>(j + 1));
        x.values.push_back(static_cast<float>(radius * std::sin(angle)));
      }
    }
    x.offsets.push_back(x.indices.size());
  }
  x.rows = n;
  return x;
}

absl::StatusOr<RunResult> RunCollectedBaseline(const Dataset& public_data,
                                               const PipelineConfig& c,
                                               Baseline b,
                                               const Collected& collected,
                                               uint64_t seed) {
  if (!BaselineApplies(c, b) || b == Baseline::kRaw) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", kBaselineNames.Name(b), " baseline does not apply beside a ",
        "deployed curator's ", MethodName(c.method), " on the ",
        TaskName(c.task), " task",
        b == Baseline::kRaw ? " (it holds no raw features)" : ""));
  }
  if (b == Baseline::kGraphLabels) {
    return RunGraphLabels(public_data, public_data.graph, c, seed, 0,
                          &collected);
  }
  if (b == Baseline::kNoGraph) {
    // The curator's own data with a graph of no edge: the same reports,
    // labels, split and model.
    Dataset alone;
    alone.meta = public_data.meta;
    alone.meta.edges = 0;
    alone.labels = public_data.labels;
    alone.features.cols = public_data.features.cols;
    ASSIGN_OR_RETURN(alone.graph,
                     Graph::FromEdges(public_data.graph.num_nodes(), {}));
    return RunPipelineOnCollected(alone, c, collected, seed);
  }
  ASSIGN_OR_RETURN(const PipelineConfig bc, BaselineConfig(c, b));
  Collected random;
  random.features = FeatureFreeFeatures(public_data.graph.num_nodes(),
                                        FeatureWidth(public_data),
                                        StageSeed(seed, 0, Stage::kBaseline));
  random.label_reports = collected.label_reports;
  random.untrusted = collected.untrusted;
  return RunPipelineOnCollected(public_data, bc, random, seed);
}

absl::StatusOr<RunResult> RunBaseline(const Dataset& d,
                                      const PipelineConfig& c, Baseline b,
                                      uint64_t seed, int run,
                                      const Graph* graph) {
  if (graph != nullptr && graph->num_nodes() != d.graph.num_nodes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a baseline's graph must have the dataset's ", d.graph.num_nodes(),
        " nodes, not ", graph->num_nodes()));
  }
  if (b == Baseline::kGraphLabels) {
    if (!BaselineApplies(c, b)) {
      return absl::InvalidArgumentError(
          "the graph-labels baseline applies to the node task");
    }
    return RunGraphLabels(d, graph != nullptr ? *graph : d.graph, c, seed,
                          run);
  }
  if (b == Baseline::kNoGraph) {
    if (!BaselineApplies(c, b)) {
      return absl::InvalidArgumentError(
          "the no-graph baseline applies to the node task");
    }
    ASSIGN_OR_RETURN(const Graph empty,
                     Graph::FromEdges(d.graph.num_nodes(), {}));
    RunOverrides alone;
    alone.graph = &empty;
    return RunPipeline(d, c, seed, run, alone);
  }
  ASSIGN_OR_RETURN(const PipelineConfig bc, BaselineConfig(c, b));
  RunOverrides overrides;
  overrides.graph = graph;
  if (b == Baseline::kRaw) return RunPipeline(d, bc, seed, run, overrides);
  const SparseRows random = FeatureFreeFeatures(
      d.graph.num_nodes(), FeatureWidth(d),
      StageSeed(seed, run, Stage::kBaseline));
  overrides.features = &random;
  return RunPipeline(d, bc, seed, run, overrides);
}

namespace {

// y as the training nodes' one-hot rows over prior (zeros when prior is
// null); INVALID_ARGUMENT for a label outside [0, classes) or a node
// outside the graph. counts gets each class's training nodes.
absl::StatusOr<DenseMatrix> Seeds(size_t n, int classes,
                                  const DenseMatrix* prior,
                                  const std::vector<uint32_t>& train,
                                  const std::vector<int32_t>& train_targets,
                                  std::vector<uint32_t>* counts) {
  DenseMatrix y = prior != nullptr ? *prior : DenseMatrix(n, classes);
  counts->assign(classes, 0);
  for (size_t i = 0; i < train.size(); ++i) {
    const int32_t t = train_targets[i];
    if (t < 0) continue;
    if (t >= classes || train[i] >= n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "label propagation: training node ", train[i], " has label ", t,
          " outside [0, ", classes, ") or lies outside the graph"));
    }
    for (int k = 0; k < classes; ++k) y.at(train[i], k) = 0.0f;
    y.at(train[i], t) = 1.0f;
    ++(*counts)[t];
  }
  return y;
}

// kLabelPropagationSteps of Z <- alpha S Z + (1 - alpha) y from Z = y.
absl::StatusOr<DenseMatrix> PropagateScores(const Graph& graph,
                                            const DenseMatrix& y,
                                            double alpha, int threads) {
  DenseMatrix f = y;
  for (int s = 0; alpha > 0 && s < kLabelPropagationSteps; ++s) {
    ASSIGN_OR_RETURN(f, KProp(graph, std::move(f), 1, false, threads,
                              KPropNorm::kSymmetric));
    for (size_t i = 0; i < f.data.size(); ++i) {
      f.data[i] =
          static_cast<float>(alpha * f.data[i] + (1 - alpha) * y.data[i]);
    }
  }
  return f;
}

// The accuracy of predictions on the validation nodes with a target.
double ValidationAccuracy(const std::vector<int32_t>& predictions,
                          const std::vector<uint32_t>& validation,
                          const std::vector<int32_t>& validation_targets) {
  size_t right = 0, scored = 0;
  for (size_t i = 0; i < validation.size(); ++i) {
    if (validation_targets[i] < 0) continue;
    ++scored;
    right += predictions[validation[i]] == validation_targets[i];
  }
  return scored == 0 ? 0.0 : static_cast<double>(right) / scored;
}

// Z <- alpha S Z + (1 - alpha) y for each alpha; the best validation wins.
absl::StatusOr<LabelPropagationResult> Spread(
    const Graph& graph, const DenseMatrix& y, absl::Span<const double> alphas,
    int32_t fallback, const std::vector<uint32_t>& validation,
    const std::vector<int32_t>& validation_targets, int threads) {
  LabelPropagationResult out;
  double best = -1;
  for (double alpha : alphas) {
    ASSIGN_OR_RETURN(const DenseMatrix f,
                     PropagateScores(graph, y, alpha, threads));
    std::vector<int32_t> predictions = ArgmaxRows(f, fallback);
    const double accuracy =
        ValidationAccuracy(predictions, validation, validation_targets);
    out.validation.push_back(accuracy);
    if (accuracy > best) {
      best = accuracy;
      out.alpha = alpha;
      out.predictions = std::move(predictions);
    }
  }
  return out;
}

absl::Status CheckLists(int classes, const std::vector<uint32_t>& train,
                        const std::vector<int32_t>& train_targets,
                        const std::vector<uint32_t>& validation,
                        const std::vector<int32_t>& validation_targets) {
  if (classes < 1 || train.size() != train_targets.size() ||
      validation.size() != validation_targets.size()) {
    return absl::InvalidArgumentError(
        "label propagation: classes < 1 or lists of different sizes");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LabelPropagationResult> PropagateLabels(
    const Graph& graph, int classes, const std::vector<uint32_t>& train,
    const std::vector<int32_t>& train_targets,
    const std::vector<uint32_t>& validation,
    const std::vector<int32_t>& validation_targets, int threads) {
  RETURN_IF_ERROR(CheckLists(classes, train, train_targets, validation,
                             validation_targets));
  std::vector<uint32_t> counts;
  ASSIGN_OR_RETURN(const DenseMatrix y,
                   Seeds(graph.num_nodes(), classes, nullptr, train,
                         train_targets, &counts));
  // A node no label reaches: the commonest training label.
  const int32_t fallback = static_cast<int32_t>(
      std::max_element(counts.begin(), counts.end()) - counts.begin());
  return Spread(graph, y, kLabelPropagationAlphas, fallback, validation,
                validation_targets, threads);
}

absl::StatusOr<LabelPropagationResult> SmoothPredictions(
    const Graph& graph, const DenseMatrix& posteriors,
    const std::vector<uint32_t>& train,
    const std::vector<int32_t>& train_targets,
    const std::vector<uint32_t>& validation,
    const std::vector<int32_t>& validation_targets, int threads) {
  const int classes = static_cast<int>(posteriors.cols);
  RETURN_IF_ERROR(CheckLists(classes, train, train_targets, validation,
                             validation_targets));
  if (posteriors.rows != graph.num_nodes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "smoothing: ", posteriors.rows, " rows of posteriors for ",
        graph.num_nodes(), " nodes"));
  }
  std::vector<uint32_t> counts;
  ASSIGN_OR_RETURN(const DenseMatrix y,
                   Seeds(graph.num_nodes(), classes, &posteriors, train,
                         train_targets, &counts));
  std::vector<double> alphas = {0.0};
  alphas.insert(alphas.end(), std::begin(kLabelPropagationAlphas),
                std::end(kLabelPropagationAlphas));
  ASSIGN_OR_RETURN(LabelPropagationResult out,
                   Spread(graph, y, alphas, 0, validation, validation_targets,
                          threads));
  double best = *std::max_element(out.validation.begin(),
                                  out.validation.end());
  // The mixtures: label propagation's scores, each row summing to 1 (a
  // row no label reaches stays 0), weighted against the posteriors.
  ASSIGN_OR_RETURN(const DenseMatrix seeds,
                   Seeds(graph.num_nodes(), classes, nullptr, train,
                         train_targets, &counts));
  ASSIGN_OR_RETURN(DenseMatrix lp, PropagateScores(graph, seeds, 0.9, threads));
  for (size_t v = 0; v < lp.rows; ++v) {
    double sum = 0;
    for (int k = 0; k < classes; ++k) sum += lp.at(v, k);
    if (sum <= 0) continue;
    for (int k = 0; k < classes; ++k) {
      lp.at(v, k) = static_cast<float>(lp.at(v, k) / sum);
    }
  }
  for (double w : kSmoothMixWeights) {
    DenseMatrix mixed = posteriors;
    for (size_t i = 0; i < mixed.data.size(); ++i) {
      mixed.data[i] = static_cast<float>(w * posteriors.data[i] +
                                         (1 - w) * lp.data[i]);
    }
    std::vector<int32_t> predictions = ArgmaxRows(mixed, 0);
    const double accuracy =
        ValidationAccuracy(predictions, validation, validation_targets);
    out.mix_validation.push_back(accuracy);
    if (accuracy > best) {
      best = accuracy;
      out.mix = w;
      out.alpha = 0;
      out.predictions = std::move(predictions);
    }
  }
  return out;
}

}  // namespace ldpgraph::pipeline
