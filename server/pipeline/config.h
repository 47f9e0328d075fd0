// The curator's learning pipeline as a configuration: its methods and tasks
// and their names, every setting of a run (PipelineConfig), each method's
// defaults, the dataset settings LPGNN takes from its table, validation and
// the settings as JSON. What a caller needs to name, check, print or send a
// configuration without running it (the stages: pipeline.h). Its library,
// ldpgraph::pipeline_config, links no propagation, embedding, training or
// attack code: the settings it holds and checks come from those modules'
// settings libraries (server/propagation/options.h,
// server/embedding/release_config.h, server/training/options.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/attacks/attack_settings.h"
#include "common/dataset/dataset.h"
#include "common/names.h"
#include "common/wire/names.h"
#include "ldpgraph/v1/pipeline.pb.h"
#include "server/embedding/release_config.h"
#include "server/pipeline/defences.h"
#include "server/pipeline/lpgnn_settings.h"
#include "server/pipeline/seeds.h"
#include "server/propagation/options.h"
#include "server/training/options.h"

namespace ldpgraph::pipeline {

// A pipeline's method and task are the admin API's enums
// (proto/ldpgraph/v1/pipeline.proto), so that the curator takes them from a
// request as they are. UNSPECIFIED is never a valid setting.
using Method = v1::PipelineMethod;
using Task = v1::PipelineTask;

// The methods' and tasks' command-line names are the wire's tables
// (common/wire/names.h): "privge", "lpgnn", "se-privgemb", "dpne"; "node",
// "link". Parse fails with INVALID_ARGUMENT "method must be one of privge,
// lpgnn, se-privgemb, dpne, got '<name>'" (and "task must be one of node,
// link, ...").
inline constexpr const auto& kMethodNames = wire::kPipelineMethodNames;
inline constexpr const auto& kTaskNames = wire::kPipelineTaskNames;

// A method's or task's name; "unknown" for UNSPECIFIED or a number the
// proto does not define.
inline absl::string_view MethodName(Method m) { return kMethodNames.Name(m); }
inline absl::string_view TaskName(Task t) { return kTaskNames.Name(t); }

// True for the methods that learn a graph model on estimates held against a
// fill (LPGNN, UPGNET): Multi-bit by default, KProp or HOA over the
// features, a GCN or GraphSAGE, labels through randomized response.
inline bool IsGnnMethod(Method m) {
  return m == v1::PIPELINE_METHOD_LPGNN || m == v1::PIPELINE_METHOD_UPGNET;
}

// True for the central-DP structure embeddings (SE-PrivGEmb, DPNE).
inline bool IsReleaseMethod(Method m) {
  return embedding::ReleaseMethodOf(m).has_value();
}

// How the curator learns from labels seen through randomized response (the
// node task with label_epsilon).
//  kPublished: LPGNN as its authors' public code does it. Targets: the
//    argmax of softmax(A^K_y Y), Y the one-hot reports of the training and
//    validation nodes (test nodes report nothing), A = D^-1/2 A D^-1/2
//    without self loops. Loss: the model's class probabilities of every
//    node through the channel T and the same K_y steps of A
//    (training::PropagatedForwardCorrectedCrossEntropy). Selection on the
//    raw validation reports by training::SelectionRule::kNoisyLabelsCapped;
//    no early stopping.
//  kVote: ldpgraph's earlier variant. Targets: the argmax of K_y KProp
//    steps (kprop_norm, label_self_loops) over the one-hot reports, for the
//    training and the validation nodes; loss: forward correction through T
//    of each training node's own prediction; selection: the best accuracy
//    against the validation targets, with early stopping.
// Either way a node whose neighbourhood holds no report keeps its own.
enum class LabelDenoising { kPublished, kVote };

// The names "published" and "vote" (--label-denoising); Parse fails with
// INVALID_ARGUMENT "label denoising must be one of published, vote, got
// '<name>'".
inline constexpr auto kLabelDenoisingNames = MakeNameTable<LabelDenoising>(
    "label denoising", {{LabelDenoising::kPublished, "published"},
                        {LabelDenoising::kVote, "vote"}});
inline absl::StatusOr<LabelDenoising> ParseLabelDenoising(
    absl::string_view name) {
  return kLabelDenoisingNames.Parse(name);
}
inline absl::string_view LabelDenoisingName(LabelDenoising d) {
  return kLabelDenoisingNames.Name(d);
}

// PrivGE's propagation of the estimates on the node task.
//  kPpr: the paper's: personalised PageRank by backward push (ppr).
//  kKProp: feature_steps KProp steps (kprop_norm, feature_self_loops), as
//    LPGNN propagates (PrivGE's default weights: the random walk D^-1 A).
//  kAuto (PrivGE's default): every run trains on both and keeps the one
//    whose selected epoch scores best on the validation nodes (PPR on a
//    tie); RunResult::tuning records both. Why: PPR's gain on the classes
//    against the noise is bounded by the graph whatever alpha (docs/papers.md,
//    "Accuracy as the graph grows"); K steps are not, while on graphs whose
//    classes are tight (cora) PPR validates better. On a graph of more
//    than PipelineConfig::auto_ppr_max_nodes nodes kAuto trains KProp alone:
//    there PPR's score was only the noise's class means, which shrink as
//    1/n, and it sat at chance (0.29 at 100,000 nodes, 0.24 from 1M to 10M)
//    while costing as much as KProp again.
enum class NodePropagation { kPpr, kKProp, kAuto };

// NodePropagation::kAuto's bound: PPR is a candidate on graphs of at most
// this many nodes.
inline constexpr size_t kAutoPprMaxNodes = 100'000;

// The names "ppr", "kprop" and "auto" (--propagation); Parse fails with
// INVALID_ARGUMENT "propagation must be one of ppr, kprop, auto, got
// '<name>'".
inline constexpr auto kNodePropagationNames = MakeNameTable<NodePropagation>(
    "propagation", {{NodePropagation::kPpr, "ppr"},
                    {NodePropagation::kKProp, "kprop"},
                    {NodePropagation::kAuto, "auto"}});
inline absl::StatusOr<NodePropagation> ParseNodePropagation(
    absl::string_view name) {
  return kNodePropagationNames.Parse(name);
}
inline absl::string_view NodePropagationName(NodePropagation p) {
  return kNodePropagationNames.Name(p);
}

// Where PrivGE's node task keeps Z, the propagated estimates, for its MLP.
//  kMemory: in memory, as an n x d float matrix (or as compressed rows
//    when PPR's Z is mostly zeros, mlp_rows.h).
//  kFile: propagated by slices of columns (PPR and KProp treat columns
//    independently), each slice written to a file of rows in scratch_dir
//    (row_file.h) that the MLP reads back a batch at a time, standardised
//    as it reads; PPR's Z still goes to compressed rows when mostly zeros.
//    The same bits as kMemory. The process holds a slice (kZSliceBytes)
//    and a batch, not Z; the disk holds 4 n d bytes for the propagation
//    being trained (auto's candidates one after the other), in an unlinked
//    file, reserved up front.
//  kAuto (the default): kFile for a wide Z, of at least kZFileMinColumns
//    columns and more than kZFileMinBytes, when the MLP can read it so (no
//    predictions propagated with label reports); kMemory otherwise. Why
//    wide only: a narrow Z (the size ladder's 64 features, 2.5 GB at 10M
//    nodes) is a small share of what a node costs the curator, and slicing
//    it would walk the graph once per slice instead of once.
enum class ZStorage { kAuto, kMemory, kFile };

inline constexpr size_t kZFileMinColumns = 1024;
inline constexpr uint64_t kZFileMinBytes = uint64_t{256} << 20;
// A slice's two n x width float buffers (KProp's input and output) fit
// this; the width is a multiple of push's 16-column blocks, at least 16.
inline constexpr uint64_t kZSliceBytes = uint64_t{64} << 20;

// The names "auto", "memory" and "file" (--z-storage).
inline constexpr auto kZStorageNames = MakeNameTable<ZStorage>(
    "Z storage", {{ZStorage::kAuto, "auto"},
                  {ZStorage::kMemory, "memory"},
                  {ZStorage::kFile, "file"}});

// How LPGNN's and UPGNET's node task aggregates the estimates before the
// graph model.
//  kKProp: feature_steps KProp steps (LPGNN): the K-hop scale alone.
//  kHoa: UPGNET's high-order aggregator, the mean of KProp's steps 1..K
//    (HighOrderAggregate, server/propagation/propagation.h): every scale up
//    to K. Always dense: n x d floats three times over.
enum class FeatureAggregator { kKProp, kHoa };

// The names "kprop" and "hoa" (--aggregator).
inline constexpr auto kFeatureAggregatorNames =
    MakeNameTable<FeatureAggregator>(
        "aggregator", {{FeatureAggregator::kKProp, "kprop"},
                       {FeatureAggregator::kHoa, "hoa"}});

// What LPGNN's and UPGNET's graph model reads (aggregated as configured).
//  kReports: the curator's estimates (the default).
//  kPositional: positional_features public N(0, 1) columns alone (no
//    private data: the feature-free baseline's input, baselines.h).
//  kBoth: the estimates and the positional columns side by side,
//    standardised after aggregation.
//  kAuto: every run trains on each of the three and keeps the one whose
//    selected epoch scores best on the validation nodes (the reports on a
//    tie); RunResult::tuning records each. Why: at a small budget the
//    reports are noise the positional signal does better without, at a
//    large one they carry more than it (docs/papers.md, "UPGNET and the
//    graph alone").
// The positional columns of run r of seed s come from StageSeed(s, r,
// kBaseline), the feature-free baseline's own stream.
enum class NodeInputs { kReports, kPositional, kBoth, kAuto };

// The names "reports", "positional", "both" and "auto" (--inputs).
inline constexpr auto kNodeInputsNames = MakeNameTable<NodeInputs>(
    "inputs", {{NodeInputs::kReports, "reports"},
               {NodeInputs::kPositional, "positional"},
               {NodeInputs::kBoth, "both"},
               {NodeInputs::kAuto, "auto"}});

// The baselines a node-task result stands beside (baselines.h).
enum class Baseline { kFeatureFree, kGraphLabels, kRaw, kNoGraph };

// The names "feature-free", "graph-labels", "raw", "no-graph" (--baselines);
// JSON keys replace the dashes with underscores (BaselineKey, baselines.h).
inline constexpr auto kBaselineNames = MakeNameTable<Baseline>(
    "baseline", {{Baseline::kFeatureFree, "feature-free"},
                 {Baseline::kGraphLabels, "graph-labels"},
                 {Baseline::kRaw, "raw"},
                 {Baseline::kNoGraph, "no-graph"}});

// A deployed curator's baselines from a comma-separated list ("none" or
// empty: no baseline): feature-free, graph-labels and no-graph (raw
// features are not the curator's to use). INVALID_ARGUMENT "<flag> must be
// one of feature-free, graph-labels, no-graph, got '<name>'".
absl::StatusOr<std::vector<Baseline>> ParseDeployedBaselines(
    absl::string_view list, absl::string_view flag);

// The positional columns' default width.
inline constexpr int kPositionalFeatures = 512;

struct PipelineConfig {
  Task task = v1::PIPELINE_TASK_NODE;
  Method method = v1::PIPELINE_METHOD_PRIVGE;

  // Features: "none" (raw, non-private) or a mechanism name
  // (common/mechanisms/feature_mechanism.h).
  std::string mechanism = "hds";
  double epsilon = 1.0;
  std::optional<int> sampled;  // k or m; the mechanism's default if unset
  FeatureScaling scaling = FeatureScaling::kSymmetric;

  // Labels (node task): randomized response with this budget; unset means
  // the curator receives the true labels of training and validation nodes.
  std::optional<double> label_epsilon;
  int label_steps = 2;            // K_y
  bool label_self_loops = false;  // kVote: a node's own report in its mean
  LabelDenoising label_denoising = LabelDenoising::kPublished;

  // Propagation. PrivGE: ppr (DefaultConfig sets relative_rmax, the same
  // relative accuracy for every mechanism). LPGNN: feature_steps (K_x)
  // KProp rounds.
  PprOptions ppr;
  NodePropagation propagation = NodePropagation::kPpr;
  // kAuto: PPR is a candidate only on graphs of at most this many nodes.
  size_t auto_ppr_max_nodes = kAutoPprMaxNodes;
  // PrivGE: standardise each column of Z (zero mean, unit variance over all
  // nodes) before the classifier; post-processing of the estimates.
  bool standardize = false;
  // The node task's standardised Z clamped to [-standardize_clip,
  // standardize_clip] (in deviations; 0: not clamped; needs standardize).
  // Z's columns are heavy-tailed: a node whose propagation gathers few
  // reports keeps most of one report's C x, and on the generated graphs
  // 0.8% of the rows hold an entry past 30 deviations (up to 160). Those
  // rows' gradients sway the MLP's mini-batch training, whose accuracy
  // then varied by run from 0.71 to 0.91 at 10M nodes; clamped at 10 it
  // held at 0.946 (docs/papers.md, "Heavy-tailed Z"). Post-processing: no
  // privacy cost. Graph models that defer KProp into their first layer
  // cannot clamp (deferred_kprop.h) and refuse a clip.
  double standardize_clip = 0;
  // PrivGE's node task: where Z is kept (ZStorage), and the folder of its
  // file (empty: $TMPDIR, else /tmp).
  ZStorage z_storage = ZStorage::kAuto;
  std::string scratch_dir;
  // A slice's buffers' bound (kZSliceBytes; tests set less to slice small
  // graphs). > 0.
  uint64_t z_slice_bytes = kZSliceBytes;
  int feature_steps = 16;
  bool feature_self_loops = false;
  // LPGNN and UPGNET: how the estimates are aggregated (K = feature_steps).
  FeatureAggregator aggregator = FeatureAggregator::kKProp;
  // LPGNN and UPGNET: UPGNET's node feature regularisation of the curator's
  // estimates before aggregation, x <- sign(x) max(|x| - B tau, 0), B the
  // mechanism's EstimateBound (server/pipeline/nfr.h); tau = nfr_tau in
  // [0, 1), 0 off. Needs a bounded mechanism (multibit, onebit,
  // piecewise). Post-processing: no privacy cost.
  double nfr_tau = 0;
  // Node task: C&S's smoothing of the trained model's class posteriors
  // with the training labels the run holds over D^-1/2 A D^-1/2, its
  // strength (0: none) chosen per run by validation (SmoothPredictions,
  // baselines.h). Post-processing: no privacy cost. Off by default.
  bool smooth = false;
  // LPGNN and UPGNET: the model's inputs (NodeInputs) and the positional
  // columns' width (>= 1).
  NodeInputs inputs = NodeInputs::kReports;
  int positional_features = kPositionalFeatures;
  // LPGNN: when tune_feature_steps is non-empty, every run first trains each
  // candidate K_x (and, with a label budget, K_y from tune_label_steps, or
  // label_steps when empty) on its own split and reports, and keeps the one
  // whose selected epoch scores best on the validation nodes: accuracy
  // against their label reports, the only labels a curator holds. While
  // tuning, the validation reports are left out of the label propagation
  // (they judge models that never saw them) and candidates stop after 100
  // epochs without a better one. The chosen pair then trains as configured;
  // RunResult::tuning records every candidate.
  std::vector<int> tune_feature_steps;
  std::vector<int> tune_label_steps;
  // LPGNN and UPGNET: with a non-empty grid, every run also chooses nfr_tau
  // from it, with K_x, the same way (each pair of K_x and tau trained).
  std::vector<double> tune_nfr;
  // LPGNN and UPGNET: grids of the model's learning rate, weight decay and
  // dropout, chosen per run with K_x (and tau) the same way (every
  // combination trained; empty: the configured value alone).
  std::vector<double> tune_learning_rate;
  std::vector<double> tune_weight_decay;
  std::vector<double> tune_dropout;
  // KProp's weights over the features (and kVote's over the labels).
  KPropNorm kprop_norm = KPropNorm::kSymmetric;
  // LPGNN: take K_x, K_y, learning rate, weight decay and dropout from the
  // settings table for the dataset (ResolveDatasetSettings) when the run
  // starts: lpgnn_settings when set (a user's file merged into the
  // built-in rows), else LpgnnSettings::BuiltIn().
  bool dataset_settings = false;
  std::shared_ptr<const LpgnnSettings> lpgnn_settings;
  // The settings the user gave explicitly: the table leaves them alone and
  // sets the others.
  struct FixedSettings {
    bool feature_steps = false;
    bool label_steps = false;
    bool learning_rate = false;
    bool weight_decay = false;
    bool dropout = false;
  };
  FixedSettings fixed_settings;

  // SE-PrivGEmb and DPNE: the release's settings (its method, budget and
  // private flag follow method, epsilon, release_delta and mechanism).
  embedding::ReleaseConfig release;
  double release_delta = 1e-5;

  training::NodeModelConfig node_model;
  training::LinkModelConfig link_model;

  // Splits: a random node split of the labelled nodes (or the Planetoid
  // split), and an edge split with as many sampled non-edges per part.
  double train_fraction = 0.5;
  double validation_fraction = 0.25;
  bool planetoid_split = false;
  // One random split for every run (run 0's, drawn from the seed), as the
  // LPGNN and PrivGE scripts draw theirs once per invocation; the runs then
  // differ in noise and initial weights only. Default: a split per run.
  bool fixed_split = false;
  double link_validation_fraction = 0.05;
  double link_test_fraction = 0.10;

  bool secure_noise = false;

  // Simulated data poisoning (common/attacks/poisoning.h), node task with a
  // feature mechanism only. attack_fraction > 0: the nodes drawn by
  // SimulatedMalicious(seed, v, attack_fraction), seed the pipeline's seed
  // (the same set in every run), are the attacker's, answering as
  // attack_kind says (poisoning::AttackKind: maximal-gain crafts feature
  // reports on the attack_dims dimensions their own records (scaled
  // features and labels, pooled) find most indicative of attack_class, and
  // with a label budget label reports attack_class; input, adaptive,
  // labels-only and fake-edges as documented there: fake-edges' edge reports
  // are crafted where the caller builds the private graph it passes in
  // RunOverrides::graph, `ldpgraph eval --edges`). attack_class set (with any
  // fraction, 0 included) also measures the attack: RunResult::target_rate.
  // An attack needs attack_class. All off by default.
  double attack_fraction = 0;
  std::optional<int> attack_class;
  int attack_dims = 10;
  poisoning::AttackKind attack_kind = poisoning::AttackKind::kMaximalGain;
  // The curator's defences (report_screen.h): screen: the simulated feature
  // reports are screened at level screen_alpha before estimation; a flagged
  // node's row is left empty and the node is left out of training and
  // validation (a no-op for mechanisms that do not sample dimensions; needs
  // a feature mechanism). robust: trimmed-label retraining (robust.h), node
  // task. edge-consistency: applies to a private graph built by the caller
  // (RunOverrides), recorded here.
  Defences defences;
  double screen_alpha = kDefaultScreenAlpha;

  // Threads for the stages that run in parallel, 0 (default) for every
  // core (ResolveThreads, common/parallel.h): propagation, PPR push (in
  // place of ppr.threads), KProp over features and labels, and training (in
  // place of node_model.threads and link_model.threads). Results do
  // not depend on it. Not a setting of the learning: ConfigToJson leaves it
  // out.
  int threads = 0;

  // Node task: keep every node's class posteriors in RunResult::node_outputs
  // (for attacks on released outputs, `ldpgraph edges`). Not a setting of
  // the learning itself: ConfigToJson leaves it out.
  bool keep_node_outputs = false;
  // Node task: keep the trained model and the features it answers over in
  // RunResult::node_model and node_features (for attacks that query the
  // released model, `ldpgraph edges`). Not a setting of the learning.
  bool keep_node_model = false;
};

// The defaults of a method and task. SE-PrivGEmb and DPNE: mechanism
// "central" (the release's own noise), the method's defaults, a random
// 10/10/80 node split (DPNE's 10% training ratio, with as many nodes for
// model selection) and logistic regression on the standardised embedding.
// PrivGE's pipeline (HDS on [-1, 1], PPR
// with alpha 0.05 and r 0.5; an MLP, hidden 256, on the standardised
// embedding, or logistic regression with the pairwise loss on Hadamard
// features) or LPGNN's (GCN on KProp
// features, Multi-bit on [0, 1], K_x = 16, K_y = 2, hidden 16, SELU,
// dropout 0.5, learning rate 0.01, weight decay 1e-3).
PipelineConfig DefaultConfig(Method method, Task task);

// With c->dataset_settings (LPGNN), sets K_x, K_y, learning rate, weight
// decay and dropout (those not in c->fixed_settings) from the settings
// table's row for the dataset named in meta (LpgnnSettings::Find: cora's
// rows for a dataset without any) at the budgets nearest c's eps_x
// (epsilon, or inf for mechanism none) and eps_y (label_epsilon, inf when
// unset). The built-in rows are the authors' published settings for cora,
// pubmed, facebook and lastfm over {0.01, 0.1, 1, 2, 3, inf} x {0.5, 1, 2,
// 3, inf}; at eps_x = eps_y = 1: cora K_x 2, K_y 8, weight decay 1e-3,
// dropout 0.5; pubmed 4, 2, 1e-4, 0.25. Then clears the flag. Idempotent;
// RunPipeline and RunPipelineOnCollected call it, and so should anyone who
// prints c.
void ResolveDatasetSettings(const DatasetMeta& meta, PipelineConfig* c);

// INVALID_ARGUMENT naming the bad setting (unknown mechanism, epsilon <= 0,
// LPGNN with the link task, bad fractions, a label budget on the link task).
absl::Status ValidateConfig(const PipelineConfig& c);

// The attack settings of c alone (PipelineConfig::attack_*; ValidateConfig
// checks them first): INVALID_ARGUMENT for a fraction without a target
// class, settings AttackSettings::Validate refuses, an attack class on the
// link task, or an attack fraction > 0 without a feature mechanism.
absl::Status ValidateAttack(const PipelineConfig& c);

// The propagation settings of a PrivGE run: c.ppr on c.threads.
PprOptions PprOptionsOf(const PipelineConfig& c);

// The release settings of a SE-PrivGEmb or DPNE run: c.release with its
// method, privacy, epsilon and delta from c.method, c.mechanism, c.epsilon
// and c.release_delta.
embedding::ReleaseConfig ReleaseConfigOf(const PipelineConfig& c);

// Every setting of c, as JSON (for --format json and result records):
// LearningSettingsToJson with FeaturePrivacyToJson's fields beside.
nlohmann::json ConfigToJson(const PipelineConfig& c);

// What the feature reports were, as JSON: "mechanism", "epsilon" (null for
// mechanism none) and, for the methods that collect reports, "sampled" and
// "scale".
nlohmann::json FeaturePrivacyToJson(const PipelineConfig& c);

// Every other setting of c, as JSON: the task and method, the label budget,
// the split and model, the release or the propagation, smoothing, the
// noise, the attack and the defences. The curator's evaluate stage records
// these beside what its reports' campaigns were.
nlohmann::json LearningSettingsToJson(const PipelineConfig& c);

// The attack's success on a confusion matrix (RunResult::confusion): the
// fraction of test nodes whose true class is not t that are predicted t; 0
// when there is no such node. INVALID_ARGUMENT if t is not a class of the
// matrix or the matrix is not square.
absl::StatusOr<double> TargetRate(
    const std::vector<std::vector<uint32_t>>& confusion, int t);

}  // namespace ldpgraph::pipeline
