// The curator's learning pipeline, end to end on one machine: every node
// perturbs its features (and, for LPGNN, its label) as its agent would; the
// curator estimates, propagates, trains and evaluates. `ldpgraph eval` and
// `ldpgraph repro` run it; the deployed curator runs the same stages on the
// reports it collects.
//
//  PrivGE (Li et al., "Privacy-Preserving Graph Embedding based on Local
//    Differential Privacy"): features scaled to [-1, 1], perturbed (HDS by
//    default), propagated by personalised PageRank (backward push), then an
//    MLP classifies nodes, or a Hadamard-product scorer predicts links (the
//    held-out edges removed from the graph before propagation).
//  LPGNN (Sajadmanesh & Gatica-Perez, CCS'21, the successor of their "When
//    Differential Privacy Meets Graph Neural Networks"):
//    features scaled to [0, 1], perturbed with Multi-bit and rectified,
//    aggregated by K_x KProp steps, then a 2-layer GCN or GraphSAGE; labels
//    (of training and validation nodes only: test labels are never
//    collected) perturbed by k-ary randomized response, denoised by K_y
//    KProp steps over the one-hot reports, and trained through the
//    channel's transition matrix (forward correction). Model selection uses
//    those noisy labels too: the curator never sees a clean one. Test
//    accuracy is against the true labels.
//  SE-PrivGEmb ("Structure-Preference Enabled Graph Embedding Generation
//    under Differential Privacy") and DPNE ("DPNE: Differentially Private
//    Network Embedding"): no features at all; the
//    curator releases a structure embedding of its graph under central DP
//    (server/embedding), and the task runs on it: an MLP (logistic
//    regression by default: one layer) on the standardised embedding for
//    nodes, the Hadamard scorer for links (the embedding learnt on the
//    training edges only). mechanism "none" trains the non-private version;
//    otherwise epsilon (and release_delta) is the release's budget.
//
// Randomness: splits and model initialisation come from PublicRandom; the
// privacy noise comes from the seeded generator (reproducible, NOT private;
// say so in any output) unless secure_noise asks for OpenSSL's. Each run r
// of a seed s draws every stream from (s, r, stage), so runs are independent
// and any single run can be replayed. Seeded noise is drawn per node, as a
// deployment's agents draw it: node v perturbs its features and then its
// label with SeededRandomForTesting(NodeNoiseSeed(NoiseSeed(s, r), v)).
// Agents given --seed NoiseSeed(s, 0) therefore send exactly the reports of
// run 0, which is how `ldpctl simulate --seed s` reproduces `ldpgraph eval
// --seed s`.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "common/attacks/poisoning.h"
#include "common/dataset/dataset.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/names.h"
#include "ldpgraph/v1/pipeline.pb.h"
#include "server/embedding/release.h"
#include "server/pipeline/lpgnn_settings.h"
#include "server/pipeline/report_screen.h"
#include "server/pipeline/robust.h"
#include "server/propagation/propagation.h"
#include "server/training/tasks.h"

namespace ldpgraph::pipeline {

// A pipeline's method and task are the admin API's enums
// (proto/ldpgraph/v1/pipeline.proto), so that the curator takes them from a
// request as they are. UNSPECIFIED is never a valid setting.
using Method = v1::PipelineMethod;
using Task = v1::PipelineTask;

// The one table of the methods' command-line names: "privge", "lpgnn",
// "se-privgemb", "dpne". Parse fails with INVALID_ARGUMENT "method must be
// one of privge, lpgnn, se-privgemb, dpne, got '<name>'".
inline constexpr auto kMethodNames = MakeNameTable<Method>(
    "method", {{v1::PIPELINE_METHOD_PRIVGE, "privge"},
               {v1::PIPELINE_METHOD_LPGNN, "lpgnn"},
               {v1::PIPELINE_METHOD_SE_PRIVGEMB, "se-privgemb"},
               {v1::PIPELINE_METHOD_DPNE, "dpne"}});
// The tasks' names: "node", "link". Parse fails with INVALID_ARGUMENT "task
// must be one of node, link, got '<name>'".
inline constexpr auto kTaskNames = MakeNameTable<Task>(
    "task",
    {{v1::PIPELINE_TASK_NODE, "node"}, {v1::PIPELINE_TASK_LINK, "link"}});

// A method's or task's name; "unknown" for UNSPECIFIED or a number the
// proto does not define.
inline absl::string_view MethodName(Method m) { return kMethodNames.Name(m); }
inline absl::string_view TaskName(Task t) { return kTaskNames.Name(t); }

// True for the central-DP structure embeddings (SE-PrivGEmb, DPNE).
inline bool IsReleaseMethod(Method m) {
  return m == v1::PIPELINE_METHOD_SE_PRIVGEMB || m == v1::PIPELINE_METHOD_DPNE;
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
//    against the noise is bounded by the graph whatever alpha (the README's
//    "Accuracy as the graph grows"); K steps are not, while on graphs whose
//    classes are tight (cora) PPR validates better.
enum class NodePropagation { kPpr, kKProp, kAuto };

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
  // PrivGE: standardise each column of Z (zero mean, unit variance over all
  // nodes) before the classifier; post-processing of the estimates.
  bool standardize = false;
  int feature_steps = 16;
  bool feature_self_loops = false;
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

struct RunResult {
  double metric = 0;  // test accuracy (node) or test ROC-AUC (link)
  double micro_f1 = 0;
  double macro_f1 = 0;
  training::TrainReport training;
  // For noisy labels: the fraction of training targets (after denoising)
  // that equal the true label, and the same before denoising.
  std::optional<double> label_agreement;
  std::optional<double> label_agreement_raw;
  // Node task: the confusion matrix over the test nodes, confusion[true
  // class][predicted class] (classes x classes counts).
  std::vector<std::vector<uint32_t>> confusion;
  // With c.attack_class: TargetRate(confusion, *c.attack_class).
  std::optional<double> target_rate;
  double perturb_seconds = 0;
  double propagate_seconds = 0;
  double train_seconds = 0;
  std::string noise_source;  // "secure" or "seeded-not-private"
  // With c.keep_node_outputs: the softmax of the trained model's logits for
  // every node (rows = nodes, cols = classes), from the checkpoint the test
  // set is scored with, inference mode (no dropout).
  std::optional<DenseMatrix> node_outputs;
  // With c.keep_node_model (LPGNN and PrivGE's node task): the trained
  // model's parameters (that same checkpoint), and the curator's estimated
  // features before propagation (rows = nodes), the input of the released
  // model: KProp's feature_steps steps (LPGNN) over the run's graph, then
  // the model over that graph.
  std::shared_ptr<const training::ModelWeights> node_model;
  std::shared_ptr<const SparseRows> node_features;
  // With tuning: {"candidates": [{feature_steps, label_steps, validation,
  // epochs}...], "feature_steps", "label_steps"} (the pair kept).
  nlohmann::json tuning;
  // SE-PrivGEmb and DPNE: the release's settings and figures
  // (embedding::Release::details; propagate_seconds is its training time).
  nlohmann::json release;
  // With c.defences.screen: ScreenToJson of the run's screen (null
  // otherwise).
  nlohmann::json screen;
  // With c.defences.robust: RobustToJson of what it dropped (robust.h),
  // "retrained" saying whether the model was trained again (null
  // otherwise).
  nlohmann::json robust;
};

// The attack's success on a confusion matrix (RunResult::confusion): the
// fraction of test nodes whose true class is not t that are predicted t; 0
// when there is no such node. INVALID_ARGUMENT if t is not a class of the
// matrix or the matrix is not square.
absl::StatusOr<double> TargetRate(
    const std::vector<std::vector<uint32_t>>& confusion, int t);

// The seed of run's privacy noise (see Randomness above): what a simulated
// deployment gives its agents to reproduce run `run` of seed.
uint64_t NoiseSeed(uint64_t seed, int run);

// What a caller may put in place of a run's own inputs; unset members
// change nothing. For research tools that study one stage in isolation
// (`ldpgraph edges`); not used by the deployment.
struct RunOverrides {
  // The graph the curator propagates over (KProp of features and labels,
  // PPR) and trains on, in place of dataset.graph: a graph released under
  // edge LDP, say. Same number of nodes as dataset.graph. The split, the
  // labels and the test truth still come from the dataset. Node task only.
  const Graph* graph = nullptr;
  // The curator's feature estimates (rows = nodes, cols = the dataset's
  // features), in place of the run's simulated reports: for a caller that
  // drew each node's report itself and must train on exactly those (with
  // secure noise, no replay is possible). c.mechanism and c.epsilon are then
  // only recorded. With seeded noise, node v's label is then drawn from the
  // start of its stream instead of after its features.
  const SparseRows* features = nullptr;
  // Nodes the caller's own checks caught (the edge-consistency screen of a
  // private graph, say), ascending: left out of training and validation as
  // the report screen's flagged nodes are. Node task only.
  const std::vector<uint32_t>* untrusted = nullptr;
};

// One run on a loaded dataset. Runs with the same (seed, run) are identical
// when the noise is seeded. INVALID_ARGUMENT for overrides of the wrong
// shape, or a graph override with the link task.
absl::StatusOr<RunResult> RunPipeline(const Dataset& dataset,
                                      const PipelineConfig& c, uint64_t seed,
                                      int run,
                                      const RunOverrides& overrides = {});

// The feature mechanism a run of c builds for dataset d's features (the one
// every simulated agent perturbs with): c.mechanism, c.epsilon, c.sampled,
// on the range of c.scaling. INVALID_ARGUMENT for mechanism "none", an
// unknown mechanism, or scaling none without a declared feature range.
absl::StatusOr<std::unique_ptr<FeatureMechanism>> BuildFeatureMechanism(
    const PipelineConfig& c, const Dataset& d);

// What a deployed curator collected from its agents, in place of the
// simulation of RunPipeline.
struct Collected {
  // The curator's estimate of every node's feature row (rows = nodes of the
  // graph; a node that did not report has whatever row the estimator gives
  // an empty report, usually zeros). c.mechanism, c.epsilon and c.scaling
  // are then only recorded, not applied.
  SparseRows features;
  // The reported label of every node (-1: none), from a label randomized
  // response campaign of budget c.label_epsilon. Unset: the curator uses
  // the dataset's labels for training and validation, as PrivGE assumes.
  std::optional<std::vector<int32_t>> label_reports;
  // Nodes the curator does not trust (an estimate's report screen flagged
  // them; their rows in features should be empty): left out of training
  // and validation, their label reports unused.
  std::vector<uint32_t> untrusted;
};

// RunPipeline's propagation, training and test on collected data, run 0
// of seed. public_data holds what the curator knows: the graph, and the
// labels it trains on (unless label_reports) and tests against; its
// features are never read. Nodes of the training and validation split
// without a label report are left out of training and model selection.
absl::StatusOr<RunResult> RunPipelineOnCollected(const Dataset& public_data,
                                                 const PipelineConfig& c,
                                                 const Collected& collected,
                                                 uint64_t seed);

// Every setting of c, as JSON (for --format json and result records).
nlohmann::json ConfigToJson(const PipelineConfig& c);

// The figures of one run, as JSON: what `ldpgraph eval --format json` prints
// per run and the curator records for an evaluate stage. Keys: epochs,
// best_epoch, validation, seconds_per_epoch, perturb_seconds (0 on
// collected reports), propagate_seconds, train_seconds, micro_f1 and
// macro_f1 (0 for the link task); confusion (node task); target_rate with
// an attack class; label_agreement and label_agreement_raw
// with noisy labels; tuning, release and screen when the run has them. The
// headline metric is left to the caller, which names it its own way.
nlohmann::json RunResultToJson(const RunResult& r);

// The curator's estimate of every node's row, as each agent would report it:
// Perturb on the agent's side, Estimate on the curator's. Rows of x must lie
// in the mechanism's range (the agent clips otherwise).
// The first form draws every row from rng; the second draws row v from
// rng_of_row(v), and with poisoning, the rows of its malicious nodes are the
// adversary's crafted reports (from the same rng_of_row(v)) instead; given
// dims, it adds each report's sampled dimensions there (node v for row v),
// as the curator decodes them, crafted reports included.
absl::StatusOr<SparseRows> SimulateFeatureReports(const SparseRows& x,
                                                  const FeatureMechanism& mech,
                                                  RandomSource& rng);
// The attacker of a simulated poisoning: its adversary and which nodes it
// controls (malicious[v], one entry per row).
struct Poisoning {
  std::unique_ptr<poisoning::Adversary> adversary;
  std::vector<bool> malicious;
};
absl::StatusOr<SparseRows> SimulateFeatureReports(
    const SparseRows& x, const FeatureMechanism& mech,
    absl::FunctionRef<RandomSource&(size_t row)> rng_of_row,
    const Poisoning* poisoning = nullptr, ReportedDims* dims = nullptr);

// The attacker of c for dataset d and seed (PipelineConfig::attack_*):
// nullptr when c.attack_fraction is 0. INVALID_ARGUMENT for an attack
// class that is not one of d's classes; UNIMPLEMENTED (at report time) for
// a mechanism the attack has no form for.
absl::StatusOr<std::unique_ptr<Poisoning>> PreparePoisoning(
    const Dataset& d, const PipelineConfig& c, uint64_t seed);

}  // namespace ldpgraph::pipeline
