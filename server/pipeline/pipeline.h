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
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "common/dataset/dataset.h"
#include "common/graph/graph.h"
#include "common/linalg/matrix.h"
#include "server/pipeline/config.h"
#include "server/pipeline/feature_reports.h"
#include "server/pipeline/report_screen.h"
#include "server/pipeline/robust.h"
#include "server/training/tasks.h"

namespace ldpgraph::pipeline {

// The configuration (PipelineConfig, its names, defaults, validation and
// JSON): config.h. The seeds of a run's streams (NoiseSeed): seeds.h. The
// simulated feature collection and poisoning (BuildFeatureMechanism,
// SimulateFeatureReports, PreparePoisoning): feature_reports.h.

// What one run measured.
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
  // With c.smooth: {"alpha", "candidates": [{alpha, validation}...],
  // "accuracy_before"} (the model's own test accuracy; metric is the
  // smoothed one).
  nlohmann::json smooth;
};

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

// The figures of one run, as JSON: what `ldpgraph eval --format json` prints
// per run and the curator records for an evaluate stage. Keys: epochs,
// best_epoch, validation, seconds_per_epoch, perturb_seconds (0 on
// collected reports), propagate_seconds, train_seconds, micro_f1 and
// macro_f1 (0 for the link task); confusion (node task); target_rate with
// an attack class; label_agreement and label_agreement_raw
// with noisy labels; tuning, release, screen, robust and smooth when the
// run has them. The
// headline metric is left to the caller, which names it its own way.
nlohmann::json RunResultToJson(const RunResult& r);

}  // namespace ldpgraph::pipeline
