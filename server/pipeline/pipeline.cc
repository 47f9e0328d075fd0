#include "server/pipeline/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>

#include <nlohmann/json.hpp>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "common/dataset/feature_schema.h"
#include "common/dataset/splits.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/mechanisms/hds.h"
#include "common/mechanisms/label_rr.h"
#include "common/seed_mix.h"
#include "common/status_macros.h"
#include "common/stopwatch.h"

namespace ldpgraph::pipeline {
namespace {

using training::Mat;

// Tuning candidates stop after this many epochs without a better one (the
// patience of LPGNN's own trainer).
constexpr int kTuningPatience = 100;

// An independent 64-bit seed per (seed, run, stage), by splitmix64 steps.
constexpr auto Mix = SeedMix;
enum Stage : uint64_t { kSplit = 1, kNoise = 2, kModel = 4 };
uint64_t StageSeed(uint64_t seed, int run, Stage stage) {
  return Mix(Mix(Mix(seed) ^ static_cast<uint64_t>(run)) ^ stage);
}

Mat<float> ToEigen(const DenseMatrix& m) {
  return Eigen::Map<const Mat<float>>(m.data.data(), m.rows, m.cols);
}

// Each column to zero mean and unit variance (a constant column to zero).
void Standardize(Mat<float>* m) {
  const Eigen::Index n = m->rows();
  for (Eigen::Index j = 0; j < m->cols(); ++j) {
    double sum = 0, sq = 0;
    for (Eigen::Index i = 0; i < n; ++i) sum += (*m)(i, j);
    const double mean = sum / n;
    for (Eigen::Index i = 0; i < n; ++i) {
      const double d = (*m)(i, j) - mean;
      sq += d * d;
    }
    const double sd = std::sqrt(sq / n);
    const float scale = sd > 0 ? static_cast<float>(1.0 / sd) : 0.0f;
    for (Eigen::Index i = 0; i < n; ++i) {
      (*m)(i, j) = static_cast<float>(((*m)(i, j) - mean) * scale);
    }
  }
}

// The privacy noise of one run. Seeded: node v draws from its own stream,
// SeededRandomForTesting(NodeNoiseSeed(NoiseSeed(seed, run), v)), its
// features first and then its label, as a deployed agent given that seed
// answers a features campaign and then a label campaign. Secure: one
// SecureRandom serves every node.
class NoiseStreams {
 public:
  static absl::StatusOr<NoiseStreams> Create(const PipelineConfig& c,
                                             uint64_t noise_seed, size_t n) {
    NoiseStreams out;
    if (c.secure_noise) {
      ASSIGN_OR_RETURN(out.secure_, SecureRandom::Create());
    } else {
      out.seeded_.reserve(n);
      for (size_t v = 0; v < n; ++v) {
        out.seeded_.emplace_back(
            NodeNoiseSeed(noise_seed, static_cast<uint32_t>(v)));
      }
    }
    return out;
  }
  RandomSource& at(NodeId v) {
    if (secure_ != nullptr) return *secure_;
    return seeded_[v];
  }
  absl::string_view name() const {
    return secure_ != nullptr ? secure_->name() : "seeded-not-private";
  }

 private:
  std::unique_ptr<SecureRandom> secure_;
  std::vector<SeededRandomForTesting> seeded_;
};

// The propagation settings of a PrivGE run: ppr on c.threads.
PprOptions PprOptionsOf(const PipelineConfig& c) {
  PprOptions o = c.ppr;
  o.threads = c.threads;
  return o;
}

// The release settings of a SE-PrivGEmb or DPNE run.
embedding::ReleaseConfig ReleaseFor(const PipelineConfig& c) {
  embedding::ReleaseConfig r = c.release;
  r.method = c.method == v1::PIPELINE_METHOD_DPNE
                 ? embedding::ReleaseMethod::kDpne
                 : embedding::ReleaseMethod::kSePrivGemb;
  r.private_release = c.mechanism != "none";
  r.epsilon = c.epsilon;
  r.delta = c.release_delta;
  return r;
}

// The curator's central-DP release of g for run `run`: its noise from one
// SecureRandom, or the seeded stream NoiseSeed(seed, run) (not private).
absl::StatusOr<DenseMatrix> RunRelease(const Graph& g, const PipelineConfig& c,
                                       uint64_t seed, int run, RunResult* r) {
  std::unique_ptr<RandomSource> rng;
  if (c.secure_noise) {
    ASSIGN_OR_RETURN(rng, SecureRandom::Create());
  } else {
    rng = std::make_unique<SeededRandomForTesting>(NoiseSeed(seed, run));
  }
  ASSIGN_OR_RETURN(embedding::Release release,
                   embedding::ReleaseEmbedding(g, ReleaseFor(c), *rng,
                                               StageSeed(seed, run, kModel)));
  r->propagate_seconds = release.seconds;
  r->noise_source = c.mechanism == "none" ? "none" : std::string(rng->name());
  r->release = std::move(release.details);
  return std::move(release.embedding);
}

// The simulated reports of x (the malicious nodes' crafted, with
// poisoning) estimated, screened when c asks for it: the
// flagged nodes' rows emptied and added to *untrusted, the screen's
// figures in r->screen.
absl::StatusOr<SparseRows> SimulateAndScreen(const SparseRows& x,
                                             const FeatureMechanism& mech,
                                             const PipelineConfig& c,
                                             const Poisoning* poisoning,
                                             NoiseStreams& noise,
                                             std::vector<uint32_t>* untrusted,
                                             RunResult* r) {
  const bool screen = c.defences.screen;
  ReportedDims dims;
  ASSIGN_OR_RETURN(
      SparseRows est,
      SimulateFeatureReports(
          x, mech,
          [&](size_t v) -> RandomSource& {
            return noise.at(static_cast<NodeId>(v));
          },
          poisoning, screen && ScreenApplies(mech) ? &dims : nullptr));
  if (!screen) return est;
  ASSIGN_OR_RETURN(ScreenResult s, ScreenReports(dims, mech, c.screen_alpha));
  r->screen = ScreenToJson(s);
  if (poisoning != nullptr) {
    // A simulation knows the attacker's nodes: how many the screen caught.
    uint32_t malicious = 0, caught = 0;
    for (bool m : poisoning->malicious) malicious += m;
    for (uint32_t v : s.flagged) caught += poisoning->malicious[v];
    r->screen["malicious"] = malicious;
    r->screen["malicious_flagged"] = caught;
  }
  if (s.flagged.empty()) return est;
  *untrusted = s.flagged;
  return WithEmptyRows(est, s.flagged);
}

// The features the curator holds after collection: scaled to the public
// range, then (unless mechanism is "none") perturbed and estimated (and
// screened: SimulateAndScreen). *untrusted gets the nodes the curator does
// not trust: the screen's flagged nodes, or collected->untrusted.
absl::StatusOr<SparseRows> CollectFeatures(const Dataset& d,
                                           const PipelineConfig& c,
                                           const Collected* collected,
                                           const SparseRows* given,
                                           const Poisoning* poisoning,
                                           NoiseStreams& noise, RunResult* r,
                                           std::vector<uint32_t>* untrusted) {
  if (given != nullptr) {
    if (given->rows != d.graph.num_nodes() || given->cols != d.features.cols) {
      return absl::InvalidArgumentError(absl::StrCat(
          "overriding features are ", given->rows, " x ", given->cols,
          "; the dataset needs ", d.graph.num_nodes(), " x ",
          d.features.cols));
    }
    r->noise_source = c.mechanism == "none" ? "none" : std::string(noise.name());
    return *given;
  }
  if (collected != nullptr) {
    if (collected->features.rows != d.graph.num_nodes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "collected features hold ", collected->features.rows,
          " rows for a graph of ", d.graph.num_nodes(), " nodes"));
    }
    r->noise_source = "agents";
    *untrusted = collected->untrusted;
    return collected->features;
  }
  auto range = ScaledRange(c.scaling, d.meta);
  if (!range) {
    return absl::InvalidArgumentError(
        absl::StrCat("scaling none needs a public feature range and dataset '",
                     d.meta.name, "' declares none"));
  }
  SparseRows x = ScaleDatasetFeatures(d, c.scaling);
  if (c.mechanism == "none") {
    r->noise_source = "none";
    return x;
  }
  ASSIGN_OR_RETURN(auto mech, BuildFeatureMechanism(c, d));
  r->noise_source = std::string(noise.name());
  const auto t = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(SparseRows est, SimulateAndScreen(x, *mech, c, poisoning,
                                                     noise, untrusted, r));
  r->perturb_seconds = SecondsSince(t);
  return est;
}

// The label reports of the training and validation nodes (-1 elsewhere):
// collected, or each node's true label through k-ary randomized response
// (a malicious node's: the attack's label, drawing nothing).
struct LabelReports {
  std::vector<int32_t> reported;
  Mat<float> transition;  // T[a][b] = P(report b | true a)
};

absl::StatusOr<LabelReports> PerturbLabels(const Dataset& d,
                                           const NodeSplit& split,
                                           const PipelineConfig& c,
                                           int classes,
                                           const Collected* collected,
                                           const Poisoning* poisoning,
                                           NoiseStreams& noise) {
  ASSIGN_OR_RETURN(auto rr,
                   LabelRandomizedResponse::Create(*c.label_epsilon, classes));
  LabelReports out;
  out.reported.assign(d.graph.num_nodes(), -1);
  for (const auto* list : {&split.train, &split.validation}) {
    for (NodeId v : *list) {
      int y = 0;
      if (collected != nullptr) {
        // The split holds only nodes that reported (RunNode filters it).
        y = (*collected->label_reports)[v];
        RETURN_IF_ERROR(rr->ValidateReport(y));
      } else if (poisoning != nullptr && poisoning->malicious[v]) {
        ASSIGN_OR_RETURN(y, poisoning->adversary->CraftLabel(*rr, noise.at(v)));
      } else {
        ASSIGN_OR_RETURN(y, rr->Perturb(d.labels[v], noise.at(v)));
      }
      out.reported[v] = y;
    }
  }
  out.transition = Mat<float>::Constant(
      classes, classes, static_cast<float>(rr->other_probability()));
  out.transition.diagonal().setConstant(
      static_cast<float>(rr->keep_probability()));
  return out;
}

// The curator's targets from the reports: K_y KProp steps over their one-hot
// encodings (argmax, ties to the lower class; a node whose neighbourhood
// holds no report keeps its own). kPublished propagates with D^-1/2 A D^-1/2
// and selects against the raw validation reports; kVote with c.kprop_norm
// and c.label_self_loops, selecting against the validation nodes' targets.
// Without propagate_validation only the training nodes' reports spread
// (tuning: the validation reports then judge a model that never saw them).
struct NoisyLabels {
  std::vector<int32_t> train, validation;
  std::vector<int32_t> train_reports;  // raw, aligned with split.train
  double agreement = 0, agreement_raw = 0;
};

absl::StatusOr<NoisyLabels> DenoiseLabels(const Dataset& d, const Graph& graph,
                                          const NodeSplit& split,
                                          const PipelineConfig& c, int classes,
                                          const LabelReports& reports,
                                          int label_steps,
                                          bool propagate_validation) {
  const std::vector<int32_t>& reported = reports.reported;
  DenseMatrix onehot(d.graph.num_nodes(), classes);
  for (NodeId v : split.train) onehot.at(v, reported[v]) = 1.0f;
  if (propagate_validation) {
    for (NodeId v : split.validation) onehot.at(v, reported[v]) = 1.0f;
  }
  const bool published = c.label_denoising == LabelDenoising::kPublished;
  ASSIGN_OR_RETURN(
      DenseMatrix smoothed,
      KProp(graph, onehot, label_steps, published ? false : c.label_self_loops,
            c.threads, published ? KPropNorm::kSymmetric : c.kprop_norm));
  NoisyLabels out;
  size_t agree = 0, agree_raw = 0;
  auto target = [&](NodeId v) {
    auto row = smoothed.row(v);
    int best = 0;
    for (int k = 1; k < classes; ++k) {
      if (row[k] > row[best]) best = k;
    }
    const int32_t y = row[best] > 0.0f ? best : reported[v];
    agree += (y == d.labels[v]);
    agree_raw += (reported[v] == d.labels[v]);
    return y;
  };
  for (NodeId v : split.train) {
    out.train.push_back(target(v));
    out.train_reports.push_back(reported[v]);
  }
  for (NodeId v : split.validation) {
    const int32_t y = target(v);
    out.validation.push_back(published ? reported[v] : y);
  }
  const size_t total = split.train.size() + split.validation.size();
  out.agreement = double(agree) / total;
  out.agreement_raw = double(agree_raw) / total;
  return out;
}

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
};

// The classifier's input: the release, or the estimates propagated (LPGNN:
// feature_steps KProp steps; PrivGE: PPR), standardised when c says so.
struct NodeFeatures {
  Mat<float> features;
  double propagate_seconds = 0;
};

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
    if (c.method == v1::PIPELINE_METHOD_PRIVGE &&
        c.propagation == NodePropagation::kPpr) {
      ASSIGN_OR_RETURN(z, PprPush(*in.graph, *in.x, PprOptionsOf(c)));
    } else {
      ASSIGN_OR_RETURN(z, KProp(*in.graph, in.x->ToDense(), feature_steps,
                                c.feature_self_loops, c.threads,
                                c.kprop_norm));
    }
    out.propagate_seconds = SecondsSince(t_prop);
  }
  out.features = ToEigen(in.release != nullptr ? *in.release : z);
  if (c.standardize) Standardize(&out.features);
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
  data.features = &features;
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
  r.confusion.assign(d.meta.classes,
                     std::vector<uint32_t>(d.meta.classes, 0));
  for (size_t i = 0; i < t.test_predictions.size(); ++i) {
    const int32_t truth = data.test_truth[i], pred = t.test_predictions[i];
    if (truth >= 0 && truth < d.meta.classes && pred >= 0 &&
        pred < d.meta.classes) {
      ++r.confusion[truth][pred];
    }
  }
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

// LPGNN learns from unbiased estimates in the scaled range (Multi-bit's
// rectifier gives them). HDS's are not: PrivGE uses its report as it is,
// C * x in [-1, 1] with C = (k/d) * ... about 0.004 at eps 1 over 64
// features, which a GraphSAGE of hidden 16 with weight decay cannot scale
// up (accuracy at chance). So for LPGNN every HDS value becomes
// alpha + (beta - alpha) * (out / C + 1) / 2: unbiased, in the scaled range,
// (alpha + beta) / 2 on unreported dimensions, as Multi-bit's.
// Post-processing of the reports: no privacy cost.
absl::Status UnbiasHdsForLpgnn(const Dataset& d, const PipelineConfig& c,
                               SparseRows* x) {
  if (c.method != v1::PIPELINE_METHOD_LPGNN) return absl::OkStatus();
  if (c.mechanism != "hds" && c.mechanism != "square-wave") {
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(auto mech, BuildFeatureMechanism(c, d));
  const auto* hds = dynamic_cast<const HdsMechanism*>(mech.get());
  if (hds == nullptr) return absl::InternalError("HDS mechanism expected");
  const auto range = ScaledRange(c.scaling, d.meta);
  const double lo = range->first, half = (range->second - range->first) / 2;
  const double inv_c = 1.0 / hds->c();
  SparseRows out;
  out.cols = x->cols;
  std::vector<double> row(x->cols);
  for (size_t v = 0; v < x->rows; ++v) {
    x->RowToDense(v, absl::MakeSpan(row));
    for (double& value : row) value = lo + half * (value * inv_c + 1.0);
    out.AppendDenseRow(row);
  }
  *x = std::move(out);
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
  NodeSplit split;
  if (c.planetoid_split) {
    ASSIGN_OR_RETURN(split, PlanetoidSplit(d));
  } else {
    const uint64_t split_seed =
        StageSeed(seed, c.fixed_split ? 0 : run, kSplit);
    ASSIGN_OR_RETURN(split, RandomNodeSplit(d.labels, c.train_fraction,
                                            c.validation_fraction, split_seed));
  }
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
    ASSIGN_OR_RETURN(x, CollectFeatures(d, c, collected, overrides.features,
                                        poisoning.get(), noise, &r, &untrusted));
    RETURN_IF_ERROR(UnbiasHdsForLpgnn(d, c, &x));
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
  const uint64_t model_seed = StageSeed(seed, run, kModel);
  int feature_steps = c.feature_steps, label_steps = c.label_steps;
  nlohmann::json tuning;
  if (c.method == v1::PIPELINE_METHOD_LPGNN && !c.tune_feature_steps.empty()) {
    // Every candidate on this run's split and reports, scored by its
    // selected epoch's validation accuracy (against the reports when the
    // labels are noisy); the first best wins.
    const std::vector<int> ky_grid =
        c.label_epsilon && !c.tune_label_steps.empty()
            ? c.tune_label_steps
            : std::vector<int>{c.label_steps};
    double best = -1;
    tuning = nlohmann::json::array();
    for (int kx : c.tune_feature_steps) {
      ASSIGN_OR_RETURN(const NodeFeatures features, PropagateNode(in, c, kx));
      for (int ky : ky_grid) {
        ASSIGN_OR_RETURN(RunResult t, TrainNodeOnce(in, c, features, ky,
                                                    true, model_seed));
        tuning.push_back({{"feature_steps", kx},
                          {"label_steps", ky},
                          {"validation", t.training.best_validation},
                          {"epochs", t.training.epochs}});
        if (t.training.best_validation > best) {
          best = t.training.best_validation;
          feature_steps = kx;
          label_steps = ky;
        }
      }
    }
  }
  RunResult t;
  // The robust defence reads the first model's posteriors.
  PipelineConfig chosen = c;
  if (c.defences.robust) chosen.keep_node_outputs = true;
  std::optional<NodeFeatures> kept_features;
  if (c.method == v1::PIPELINE_METHOD_PRIVGE &&
      c.propagation == NodePropagation::kAuto && in.release == nullptr) {
    // Both propagations on this run's split and reports, each trained as
    // configured; the better validation wins (PPR, the paper's, on a tie).
    double best = -1, propagate_seconds = 0, train_seconds = 0;
    NodePropagation kept = NodePropagation::kPpr;
    tuning = nlohmann::json::array();
    for (NodePropagation p : {NodePropagation::kPpr, NodePropagation::kKProp}) {
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
  } else {
    ASSIGN_OR_RETURN(NodeFeatures features,
                     PropagateNode(in, c, feature_steps));
    ASSIGN_OR_RETURN(t, TrainNodeOnce(in, chosen, features, label_steps, false,
                                      model_seed));
    if (c.defences.robust) kept_features = std::move(features);
  }
  if (c.defences.robust) {
    chosen.keep_node_outputs = c.keep_node_outputs;
    ASSIGN_OR_RETURN(t, RobustRetrain(in, chosen, *kept_features, label_steps,
                                      model_seed, poisoning.get(),
                                      std::move(t)));
  }
  if (c.keep_node_model && in.x != nullptr) {
    t.node_features = std::make_shared<const SparseRows>(std::move(x));
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
  }
  return t;
}

absl::StatusOr<RunResult> RunLink(const Dataset& d, const PipelineConfig& c,
                                  const Collected* collected, uint64_t seed,
                                  int run, const SparseRows* features) {
  RunResult r;
  const uint64_t split_seed = StageSeed(seed, c.fixed_split ? 0 : run, kSplit);
  ASSIGN_OR_RETURN(EdgeSplit split,
                   RandomEdgeSplit(d.graph, c.link_validation_fraction,
                                   c.link_test_fraction, split_seed));
  std::vector<Edge> held_out = split.validation;
  held_out.insert(held_out.end(), split.test.begin(), split.test.end());
  // The curator learns from the training edges only.
  ASSIGN_OR_RETURN(Graph train_graph, d.graph.WithoutEdges(held_out));
  DenseMatrix z;
  if (IsReleaseMethod(c.method)) {
    ASSIGN_OR_RETURN(z, RunRelease(train_graph, c, seed, run, &r));
  } else {
    ASSIGN_OR_RETURN(NoiseStreams noise,
                     NoiseStreams::Create(c, NoiseSeed(seed, run),
                                          collected ? 0 : d.graph.num_nodes()));
    std::vector<uint32_t> untrusted;  // rows emptied; no labels to drop
    ASSIGN_OR_RETURN(SparseRows x,
                     CollectFeatures(d, c, collected, features, nullptr, noise,
                                     &r, &untrusted));
    const auto t_prop = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(z, PprPush(train_graph, x, PprOptionsOf(c)));
    r.propagate_seconds = SecondsSince(t_prop);
  }
  Mat<float> embeddings = ToEigen(z);
  z = DenseMatrix();  // n x d: one copy is enough
  if (c.standardize) Standardize(&embeddings);
  training::LinkTaskData data;
  data.embeddings = &embeddings;
  data.train_positive = std::move(split.train);
  data.train_negative = std::move(split.train_negative);
  data.validation_positive = std::move(split.validation);
  data.validation_negative = std::move(split.validation_negative);
  data.test_positive = std::move(split.test);
  data.test_negative = std::move(split.test_negative);
  training::LinkModelConfig model = c.link_model;
  model.threads = c.threads;
  ASSIGN_OR_RETURN(training::LinkTaskResult t,
                   training::TrainLinkPredictor(
                       data, model, StageSeed(seed, run, kModel)));
  r.metric = t.test_auc;
  r.training = t.training;
  r.train_seconds = t.training.seconds;
  return r;
}

}  // namespace

PipelineConfig DefaultConfig(Method method, Task task) {
  PipelineConfig c;
  c.method = method;
  c.task = task;
  if (IsReleaseMethod(method)) {
    c.mechanism = "central";
    c.standardize = true;
    c.train_fraction = 0.1;
    c.validation_fraction = 0.1;
    c.node_model.kind = training::NodeModelKind::kMlp;
    c.node_model.layers = 1;
    c.node_model.dropout = 0.0;
    c.node_model.train.adam.learning_rate = 0.01;
    c.node_model.train.adam.weight_decay = 5e-4;
    c.node_model.train.max_epochs = 500;
    c.node_model.train.patience = 50;
  } else if (method == v1::PIPELINE_METHOD_PRIVGE) {
    c.mechanism = "hds";
    c.scaling = FeatureScaling::kSymmetric;
    // Chosen on cora's validation accuracy at eps = 1 (HDS), as PrivGE
    // tuned its own; see the README's training section.
    c.ppr.alpha = 0.05;
    c.ppr.relative_rmax = true;
    // Node task: PPR or 16 KProp steps, kept per run by validation
    // (NodePropagation::kAuto; chosen on validation accuracy, README
    // "Accuracy as the graph grows"). The link task keeps PPR.
    c.propagation = NodePropagation::kAuto;
    c.feature_steps = 16;
    // The random walk D^-1 A: its top eigenvector is constant, which the
    // standardisation removes. D^-1/2 A D^-1/2's is sqrt(degree), which it
    // cannot: on the generated 1M-node graph (degrees up to 1,000 times the
    // smallest) 16 such steps scored 0.41, the random walk 0.93.
    c.kprop_norm = KPropNorm::kMean;
    c.standardize = task == v1::PIPELINE_TASK_NODE;
    c.node_model.kind = training::NodeModelKind::kMlp;
    c.node_model.hidden_dim = 256;
    c.node_model.layers = 2;
    c.node_model.dropout = 0.5;
    c.node_model.activation = training::Activation::kRelu;
    c.node_model.train.adam.learning_rate = 0.01;
    c.node_model.train.adam.weight_decay = 5e-4;
    c.node_model.train.max_epochs = 500;
    c.node_model.train.patience = 50;
  } else {
    // LPGNN as its authors' code runs it: GraphSAGE, hidden 16, SELU, Adam,
    // 500 epochs; K_x, K_y, weight decay and dropout per dataset
    // (ResolveDatasetSettings; cora's until resolved).
    c.mechanism = "multibit";
    c.scaling = FeatureScaling::kUnit;
    c.feature_steps = 2;
    c.label_steps = 8;
    c.kprop_norm = KPropNorm::kSymmetric;
    c.label_denoising = LabelDenoising::kPublished;
    c.dataset_settings = true;
    c.node_model.kind = training::NodeModelKind::kSage;
    c.node_model.hidden_dim = 16;
    c.node_model.layers = 2;
    c.node_model.dropout = 0.5;
    c.node_model.activation = training::Activation::kSelu;
    c.node_model.train.adam.learning_rate = 0.01;
    c.node_model.train.adam.weight_decay = 1e-3;
    c.node_model.train.max_epochs = 500;
    c.node_model.train.patience = 500;
  }
  c.link_model.layers = 1;
  c.link_model.loss = training::LinkLossKind::kPairwise;
  c.link_model.train.adam.learning_rate = 0.01;
  c.link_model.train.max_epochs = 500;
  c.link_model.train.patience = 50;
  return c;
}

void ResolveDatasetSettings(const DatasetMeta& meta, PipelineConfig* c) {
  if (!c->dataset_settings) return;
  c->dataset_settings = false;
  if (c->method != v1::PIPELINE_METHOD_LPGNN) return;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const double eps_x = c->mechanism == "none" ? kInf : c->epsilon;
  const double eps_y = c->label_epsilon.value_or(kInf);
  const LpgnnSettings& table =
      c->lpgnn_settings ? *c->lpgnn_settings : LpgnnSettings::BuiltIn();
  const LpgnnSettingsRow* row = table.Find(meta.name, eps_x, eps_y);
  if (row == nullptr) return;
  const PipelineConfig::FixedSettings& fixed = c->fixed_settings;
  if (!fixed.feature_steps) c->feature_steps = row->feature_steps;
  if (!fixed.label_steps) c->label_steps = row->label_steps;
  if (!fixed.learning_rate) {
    c->node_model.train.adam.learning_rate = row->learning_rate;
  }
  if (!fixed.weight_decay) {
    c->node_model.train.adam.weight_decay = row->weight_decay;
  }
  if (!fixed.dropout) c->node_model.dropout = row->dropout;
}

namespace {

// The attack settings of c (PipelineConfig::attack_*).
absl::Status ValidateAttack(const PipelineConfig& c) {
  if (c.attack_class) {
    RETURN_IF_ERROR((poisoning::AttackSettings{
        c.attack_fraction, *c.attack_class, c.attack_dims}.Validate()));
  } else if (c.attack_fraction != 0) {
    return absl::InvalidArgumentError(
        "a poisoning attack (attack fraction > 0) needs its target class");
  }
  if (!c.attack_class) return absl::OkStatus();
  if (c.task != v1::PIPELINE_TASK_NODE) {
    return absl::InvalidArgumentError(
        "the poisoning attack and its target rate apply to node "
        "classification only");
  }
  if (c.attack_fraction > 0 &&
      (IsReleaseMethod(c.method) || c.mechanism == "none")) {
    return absl::InvalidArgumentError(
        "the poisoning attack crafts LDP reports: it needs a feature "
        "mechanism (not a central release, not mechanism none)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateConfig(const PipelineConfig& c) {
  RETURN_IF_ERROR(ValidateAttack(c));
  if (c.threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "threads must be >= 0 (0 = every core), got ", c.threads));
  }
  if (IsReleaseMethod(c.method)) {
    if (c.mechanism != "central" && c.mechanism != "none") {
      return absl::InvalidArgumentError(absl::StrCat(
          MethodName(c.method),
          " uses no feature mechanism: mechanism must be central (the "
          "release's own noise) or none (non-private), got '",
          c.mechanism, "'"));
    }
    if (c.label_epsilon) {
      return absl::InvalidArgumentError(absl::StrCat(
          MethodName(c.method), " trains on the curator's labels; no label "
          "budget applies"));
    }
    if (c.defences.any()) {
      return absl::InvalidArgumentError(absl::StrCat(
          MethodName(c.method), " collects no reports: defence ",
          DefencesName(c.defences), " does not apply"));
    }
    return embedding::ValidateReleaseConfig(ReleaseFor(c));
  }
  if (c.mechanism != "none") {
    auto kind = ParseMechanismName(c.mechanism);
    if (!kind.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("mechanism: ", kind.status().message()));
    }
    if (!(c.epsilon > 0) || !std::isfinite(c.epsilon)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "epsilon must be finite and > 0, got ", c.epsilon));
    }
  }
  if (c.defences.robust && c.task != v1::PIPELINE_TASK_NODE) {
    return absl::InvalidArgumentError(
        "the robust defence retrains a node classifier: node task only");
  }
  if (c.defences.screen) {
    RETURN_IF_ERROR(ValidateScreenAlpha(c.screen_alpha));
    if (c.mechanism == "none") {
      return absl::InvalidArgumentError(
          "the report screen (defence screen) needs a feature mechanism; "
          "mechanism none collects no reports");
    }
  }
  if (c.label_epsilon) {
    if (c.task == v1::PIPELINE_TASK_LINK) {
      return absl::InvalidArgumentError(
          "a label budget applies to node classification only");
    }
    if (!(*c.label_epsilon > 0) || !std::isfinite(*c.label_epsilon)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "label epsilon must be finite and > 0, got ", *c.label_epsilon));
    }
  }
  if (c.method == v1::PIPELINE_METHOD_LPGNN &&
      c.task == v1::PIPELINE_TASK_LINK) {
    return absl::InvalidArgumentError(
        "LPGNN is evaluated on node classification; use --method privge for "
        "link prediction");
  }
  if (c.label_steps < 0 || c.feature_steps < 0) {
    return absl::InvalidArgumentError("KProp steps must be >= 0");
  }
  if (c.method == v1::PIPELINE_METHOD_PRIVGE) {
    RETURN_IF_ERROR(ValidatePprOptions(PprOptionsOf(c)));
  }
  if (c.method == v1::PIPELINE_METHOD_PRIVGE &&
      c.node_model.kind != training::NodeModelKind::kMlp &&
      c.task == v1::PIPELINE_TASK_NODE) {
    return absl::InvalidArgumentError(
        "PrivGE classifies its embedding with an MLP (--model mlp)");
  }
  return absl::OkStatus();
}

uint64_t NoiseSeed(uint64_t seed, int run) {
  return StageSeed(seed, run, kNoise);
}

absl::StatusOr<RunResult> RunPipeline(const Dataset& dataset,
                                      const PipelineConfig& c, uint64_t seed,
                                      int run, const RunOverrides& overrides) {
  RETURN_IF_ERROR(ValidateConfig(c));
  if (overrides.graph != nullptr) {
    if (c.task != v1::PIPELINE_TASK_NODE) {
      return absl::InvalidArgumentError(
          "a replacement graph applies to the node task only");
    }
    if (overrides.graph->num_nodes() != dataset.graph.num_nodes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the replacement graph has ", overrides.graph->num_nodes(),
          " nodes; the dataset has ", dataset.graph.num_nodes()));
    }
  }
  if (c.task == v1::PIPELINE_TASK_NODE) {
    PipelineConfig resolved = c;
    ResolveDatasetSettings(dataset.meta, &resolved);
    return RunNode(dataset, resolved, nullptr, seed, run, overrides);
  }
  return RunLink(dataset, c, nullptr, seed, run, overrides.features);
}

absl::StatusOr<std::unique_ptr<FeatureMechanism>> BuildFeatureMechanism(
    const PipelineConfig& c, const Dataset& d) {
  if (c.mechanism == "none") {
    return absl::InvalidArgumentError(
        "mechanism none: the raw features are used, no mechanism is built");
  }
  auto range = ScaledRange(c.scaling, d.meta);
  if (!range) {
    return absl::InvalidArgumentError(
        absl::StrCat("scaling none needs a public feature range and dataset '",
                     d.meta.name, "' declares none"));
  }
  ASSIGN_OR_RETURN(MechanismKind kind, ParseMechanismName(c.mechanism));
  MechanismSpec spec;
  spec.kind = kind;
  spec.epsilon = c.epsilon;
  spec.dimension = static_cast<int>(d.features.cols);
  spec.sampled = c.sampled;
  spec.alpha = range->first;
  spec.beta = range->second;
  return CreateFeatureMechanism(spec);
}

absl::StatusOr<RunResult> RunPipelineOnCollected(const Dataset& public_data,
                                                 const PipelineConfig& c,
                                                 const Collected& collected,
                                                 uint64_t seed) {
  RETURN_IF_ERROR(ValidateConfig(c));
  if (IsReleaseMethod(c.method)) {
    return absl::InvalidArgumentError(absl::StrCat(
        MethodName(c.method), " uses no collected reports: it is a release "
        "of the curator's graph (the release stage)"));
  }
  if (collected.label_reports && !c.label_epsilon) {
    return absl::InvalidArgumentError(
        "collected label reports need the label campaign's epsilon "
        "(label_epsilon)");
  }
  if (c.task == v1::PIPELINE_TASK_NODE) {
    PipelineConfig resolved = c;
    ResolveDatasetSettings(public_data.meta, &resolved);
    return RunNode(public_data, resolved, &collected, seed, 0, RunOverrides{});
  }
  if (collected.label_reports) {
    return absl::InvalidArgumentError("link prediction uses no labels");
  }
  return RunLink(public_data, c, &collected, seed, 0, nullptr);
}

absl::StatusOr<SparseRows> SimulateFeatureReports(const SparseRows& x,
                                                  const FeatureMechanism& mech,
                                                  RandomSource& rng) {
  return SimulateFeatureReports(x, mech,
                                [&](size_t) -> RandomSource& { return rng; });
}

absl::StatusOr<SparseRows> SimulateFeatureReports(
    const SparseRows& x, const FeatureMechanism& mech,
    absl::FunctionRef<RandomSource&(size_t row)> rng_of_row,
    const Poisoning* poisoning, ReportedDims* dims) {
  if (poisoning != nullptr && poisoning->malicious.size() != x.rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "poisoning marks ", poisoning->malicious.size(), " nodes for ",
        x.rows, " feature rows"));
  }
  SparseRows out;
  out.cols = x.cols;
  std::vector<double> row(x.cols), estimate(x.cols);
  for (size_t v = 0; v < x.rows; ++v) {
    x.RowToDense(v, absl::MakeSpan(row));
    const bool crafted = poisoning != nullptr && poisoning->malicious[v];
    ASSIGN_OR_RETURN(
        SparseReport report,
        crafted ? poisoning->adversary->CraftFeatureReport(mech, row,
                                                          rng_of_row(v))
                : mech.Perturb(row, rng_of_row(v)));
    if (dims != nullptr && !report.dense) {
      dims->Add(static_cast<uint32_t>(v), report.indices);
    }
    std::fill(estimate.begin(), estimate.end(), 0.0);
    RETURN_IF_ERROR(mech.Estimate(report, absl::MakeSpan(estimate)));
    // Every non-zero of the estimate is kept: unreported dimensions are not
    // always zero (Multi-bit's rectifier puts (alpha + beta) / 2 there).
    out.AppendDenseRow(estimate);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Poisoning>> PreparePoisoning(
    const Dataset& d, const PipelineConfig& c, uint64_t seed) {
  if (!(c.attack_fraction > 0)) return nullptr;
  RETURN_IF_ERROR(ValidateAttack(c));
  if (*c.attack_class >= d.meta.classes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the attack class ", *c.attack_class, " is not one of dataset '",
        d.meta.name, "''s ", d.meta.classes, " classes"));
  }
  const uint32_t n = static_cast<uint32_t>(d.graph.num_nodes());
  const std::vector<uint32_t> nodes =
      poisoning::MaliciousNodes(n, seed, c.attack_fraction);
  // What the attacker holds: its nodes' records, scaled as every agent's.
  const SparseRows x = ScaleDatasetFeatures(d, c.scaling);
  ASSIGN_OR_RETURN(std::vector<uint32_t> ranking,
                   poisoning::RankDims(x, d.labels, nodes, *c.attack_class));
  std::vector<uint32_t> dims(
      ranking.begin(),
      ranking.begin() + std::min<size_t>(ranking.size(), c.attack_dims));
  std::sort(dims.begin(), dims.end());
  std::optional<poisoning::AdaptivePlan> plan;
  if (c.attack_kind == poisoning::AttackKind::kAdaptive) {
    // The attacker knows the screen's public settings: n and alpha.
    plan = poisoning::AdaptivePlan{n, nodes.size(), c.screen_alpha,
                                   std::move(ranking)};
  }
  auto out = std::make_unique<Poisoning>();
  ASSIGN_OR_RETURN(out->adversary,
                   poisoning::Adversary::Create(*c.attack_class, std::move(dims),
                                                c.attack_kind, std::move(plan)));
  out->malicious.assign(n, false);
  for (uint32_t v : nodes) out->malicious[v] = true;
  return out;
}

absl::StatusOr<double> TargetRate(
    const std::vector<std::vector<uint32_t>>& confusion, int t) {
  if (t < 0 || static_cast<size_t>(t) >= confusion.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "target class ", t, " is not one of the confusion matrix's ",
        confusion.size(), " classes"));
  }
  uint64_t others = 0, to_t = 0;
  for (size_t a = 0; a < confusion.size(); ++a) {
    if (confusion[a].size() != confusion.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "confusion matrix row ", a, " has ", confusion[a].size(),
          " entries, expected ", confusion.size()));
    }
    if (a == static_cast<size_t>(t)) continue;
    for (uint32_t count : confusion[a]) others += count;
    to_t += confusion[a][t];
  }
  return others ? static_cast<double>(to_t) / others : 0.0;
}

nlohmann::json RunResultToJson(const RunResult& r) {
  nlohmann::json j = {{"epochs", r.training.epochs},
                      {"best_epoch", r.training.best_epoch},
                      {"validation", r.training.best_validation},
                      {"seconds_per_epoch", r.training.seconds_per_epoch},
                      {"perturb_seconds", r.perturb_seconds},
                      {"propagate_seconds", r.propagate_seconds},
                      {"train_seconds", r.train_seconds},
                      {"micro_f1", r.micro_f1},
                      {"macro_f1", r.macro_f1}};
  if (r.label_agreement) {
    j["label_agreement"] = *r.label_agreement;
    j["label_agreement_raw"] = r.label_agreement_raw.value_or(0.0);
  }
  if (!r.confusion.empty()) j["confusion"] = r.confusion;
  if (r.target_rate) j["target_rate"] = *r.target_rate;
  if (!r.tuning.is_null()) j["tuning"] = r.tuning;
  if (!r.release.is_null()) j["release"] = r.release;
  if (!r.screen.is_null()) j["screen"] = r.screen;
  if (!r.robust.is_null()) j["robust"] = r.robust;
  return j;
}

nlohmann::json ConfigToJson(const PipelineConfig& c) {
  using nlohmann::json;
  auto model_name = [](training::NodeModelKind k) {
    switch (k) {
      case training::NodeModelKind::kMlp: return "mlp";
      case training::NodeModelKind::kGcn: return "gcn";
      case training::NodeModelKind::kSage: return "sage";
    }
    return "?";
  };
  auto batch_size = [](int n) { return n < 0 ? json("auto") : json(n); };
  auto batched = [](const auto& model) {
    return json{{"learning_rate", model.batched_learning_rate},
                {"max_epochs", model.batched_max_epochs},
                {"patience", model.batched_patience}};
  };
  auto act = [](training::Activation a) {
    return a == training::Activation::kRelu ? "relu" : "selu";
  };
  auto scaling = [](FeatureScaling s) {
    switch (s) {
      case FeatureScaling::kNone: return "none";
      case FeatureScaling::kUnit: return "unit";
      case FeatureScaling::kSymmetric: return "symmetric";
    }
    return "?";
  };
  auto train = [](const training::TrainOptions& t) {
    return json{{"learning_rate", t.adam.learning_rate},
                {"weight_decay", t.adam.weight_decay},
                {"max_epochs", t.max_epochs},
                {"patience", t.patience}};
  };
  json j;
  j["task"] = TaskName(c.task);
  j["method"] = MethodName(c.method);
  j["mechanism"] = c.mechanism;
  j["epsilon"] = c.mechanism == "none" ? json(nullptr) : json(c.epsilon);
  j["sampled"] = c.sampled ? json(*c.sampled) : json("default");
  j["scale"] = scaling(c.scaling);
  j["label_epsilon"] = c.label_epsilon ? json(*c.label_epsilon) : json(nullptr);
  if (c.task == v1::PIPELINE_TASK_NODE) {
    j["label_steps"] = c.label_steps;
    j["label_self_loops"] = c.label_self_loops;
    if (c.label_epsilon) {
      j["label_denoising"] = LabelDenoisingName(c.label_denoising);
    }
    j["split"] = c.planetoid_split
                     ? json("planetoid")
                     : json{{"train", c.train_fraction},
                            {"validation", c.validation_fraction}};
    if (c.fixed_split) j["split"]["fixed"] = true;
    j["model"] = {{"kind", model_name(c.node_model.kind)},
                  {"hidden", c.node_model.hidden_dim},
                  {"layers", c.node_model.layers},
                  {"dropout", c.node_model.dropout},
                  {"input_dropout", c.node_model.input_dropout},
                  {"activation", act(c.node_model.activation)},
                  {"init", c.node_model.init == training::WeightInit::kTorch
                               ? "torch"
                               : "glorot"},
                  {"training", train(c.node_model.train)},
                  {"batch_rows", batch_size(c.node_model.batch_rows)},
                  {"batched_training", batched(c.node_model)}};
  } else {
    j["split"] = {{"validation", c.link_validation_fraction},
                  {"test", c.link_test_fraction}};
    if (c.fixed_split) j["split"]["fixed"] = true;
    j["model"] = {
        {"kind", c.link_model.layers == 1 ? "logistic-regression" : "mlp"},
        {"hidden", c.link_model.hidden_dim},
        {"layers", c.link_model.layers},
        {"dropout", c.link_model.dropout},
        {"input_dropout", c.link_model.input_dropout},
        {"standardize_features", c.link_model.standardize_features},
        {"loss", c.link_model.loss == training::LinkLossKind::kPairwise
                     ? "pairwise"
                     : "logistic"},
        {"training", train(c.link_model.train)},
        {"batch_pairs", batch_size(c.link_model.batch_pairs)},
        {"batched_training", batched(c.link_model)}};
    j["model"]["batched_training"]["decay_patience"] =
        c.link_model.batched_decay_patience;
    j["model"]["batched_training"]["decay_factor"] =
        c.link_model.batched_decay_factor;
    j["model"]["batched_training"]["max_decays"] =
        c.link_model.batched_max_decays;
  }
  if (IsReleaseMethod(c.method)) {
    const embedding::ReleaseConfig r = ReleaseFor(c);
    j.erase("sampled");
    j.erase("scale");
    j["release"] = {
        {"private", r.private_release},
        {"delta", r.private_release && !(c.method == v1::PIPELINE_METHOD_DPNE)
                      ? json(r.delta)
                      : json(nullptr)},
        {"standardize", c.standardize}};
    if (c.method == v1::PIPELINE_METHOD_DPNE) {
      j["release"]["dim"] = r.dpne.dim;
      j["release"]["lambda"] = r.dpne.lambda;
      j["release"]["mu"] = r.dpne.mu;
      j["release"]["sweeps"] = r.dpne.sweeps;
      j["release"]["sensitivity"] = r.dpne.sensitivity;
    } else {
      const auto& s = r.se_privgemb;
      j["release"]["dim"] = s.dim;
      j["release"]["negatives"] = s.negatives;
      j["release"]["batch_size"] = s.batch_size;
      j["release"]["optimizer"] = embedding::OptimizerName(s.optimizer);
      j["release"]["learning_rate"] = s.learning_rate;
      j["release"]["max_epochs"] = s.max_epochs;
      j["release"]["max_steps"] =
          s.max_steps ? json(*s.max_steps) : json(nullptr);
      j["release"]["proximity"] = embedding::ProximityName(s.proximity);
      j["release"]["clip"] = s.clip;
      j["release"]["noise_multiplier"] = s.noise_multiplier;
      j["release"]["noised_rows"] =
          s.noised_rows == embedding::NoisedRows::kTouched ? "touched" : "all";
    }
  } else {
    // PrivGE's link task propagates by PPR whatever c.propagation; LPGNN by
    // KProp.
    const NodePropagation p =
        c.method == v1::PIPELINE_METHOD_LPGNN ? NodePropagation::kKProp
        : c.task == v1::PIPELINE_TASK_NODE    ? c.propagation
                                              : NodePropagation::kPpr;
    json& prop = j["propagation"];
    prop["method"] =
        p == NodePropagation::kPpr ? "ppr-push" : NodePropagationName(p);
    if (p != NodePropagation::kKProp) {
      prop["alpha"] = c.ppr.alpha;
      prop["r"] = c.ppr.r;
      prop["rmax"] = c.ppr.rmax;
      prop["rmax_scaled_by_max_abs_input"] = c.ppr.relative_rmax;
    }
    if (p != NodePropagation::kPpr) {
      prop["steps"] = c.feature_steps;
      prop["self_loops"] = c.feature_self_loops;
      prop["normalisation"] = KPropNormName(c.kprop_norm);
    }
    if (c.method == v1::PIPELINE_METHOD_PRIVGE) {
      prop["standardize"] = c.standardize;
    }
  }
  j["noise"] = c.secure_noise ? "secure" : "seeded-not-private";
  if (c.attack_class) {
    j["attack"] = {{"kind", poisoning::kAttackNames.Name(c.attack_kind)},
                   {"fraction", c.attack_fraction},
                   {"class", *c.attack_class},
                   {"dims", c.attack_dims}};
  }
  if (c.defences.any()) {
    j["defence"] = {{"kind", DefencesName(c.defences)}};
    if (c.defences.screen) j["defence"]["alpha"] = c.screen_alpha;
  }
  return j;
}

}  // namespace ldpgraph::pipeline
