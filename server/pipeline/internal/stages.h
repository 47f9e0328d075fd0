// The stages RunPipeline is made of, shared by the pipeline's own sources
// (pipeline.cc, feature_reports.cc, labels.cc, and the node task's
// node_task.cc and node_training.cc). Not part of the library's interface:
// callers use pipeline.h.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/dataset/dataset.h"
#include "common/dataset/splits.h"
#include "common/graph/graph.h"
#include "common/linalg/matrix.h"
#include "common/random/random.h"
#include "common/status_macros.h"
#include "server/pipeline/pipeline.h"
#include "server/training/nn.h"

namespace ldpgraph::pipeline::internal {

using training::Mat;

// --- Shared by the tasks (pipeline.cc) ---

// m as an Eigen matrix (a copy).
Mat<float> ToEigen(const DenseMatrix& m);

// Each column to zero mean and unit variance (a constant column to zero);
// with clip > 0, every standardised entry then clamped to [-clip, clip]
// (PipelineConfig::standardize_clip).
void Standardize(Mat<float>* m, double clip = 0);

// What Standardize takes of one column (n values, `stride` apart): its
// mean, and the float it scales by (1 / the population deviation; 0 for a
// constant column). Entry v becomes float((v - mean) * scale).
struct ColumnMoments {
  double mean = 0;
  float scale = 0;
};
ColumnMoments StandardizeMoments(const float* column, size_t n,
                                 size_t stride);
// The moments of every column of z's dense form (absent entries 0), from
// its stored entries in O(nnz + cols): the same mean, the deviation's sum
// of squares added up in another order.
std::vector<ColumnMoments> StandardizeMoments(const SparseRows& z);

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

// The curator's central-DP release of g for run `run`: its noise from one
// SecureRandom, or the seeded stream NoiseSeed(seed, run) (not private).
absl::StatusOr<DenseMatrix> RunRelease(const Graph& g, const PipelineConfig& c,
                                       uint64_t seed, int run, RunResult* r);

// --- The node task's split (node_task.cc) and scoring (node_training.cc) ---

// The node split of run `run` of c: Planetoid's, or a random one drawn from
// (seed, run) (run 0's with c.fixed_split).
absl::StatusOr<NodeSplit> RunNodeSplit(const Dataset& d,
                                       const PipelineConfig& c, uint64_t seed,
                                       int run);

// The [truth][predicted] counts of aligned lists; a pair with a class
// outside [0, classes) is not counted.
std::vector<std::vector<uint32_t>> ConfusionMatrix(
    const std::vector<int32_t>& predicted, const std::vector<int32_t>& truth,
    int classes);

// r's test figures from predictions against the true labels (aligned,
// classes in [0, classes)): metric (accuracy), micro_f1, macro_f1,
// confusion, and target_rate with c.attack_class.
absl::Status ScoreTestPredictions(const std::vector<int32_t>& predicted,
                                  const std::vector<int32_t>& truth,
                                  int classes, const PipelineConfig& c,
                                  RunResult* r);

// --- Feature collection (feature_reports.cc) ---

// The features the curator holds after collection: scaled to the public
// range, then (unless mechanism is "none") perturbed and estimated (and
// screened: SimulateAndScreen). *untrusted gets the nodes the curator does
// not trust: the screen's flagged nodes, or collected->untrusted.
// With fill (null: absent entries are 0), the rows come held against *fill,
// which this sets: every absent entry is *fill, a stored one its own value
// (SimulateFeatureReports; collected or given rows re-stored against the
// value most of their first row holds). Multi-bit's estimates then keep
// their m reported dimensions per row, not all d.
absl::StatusOr<SparseRows> CollectFeatures(const Dataset& d,
                                           const PipelineConfig& c,
                                           const Collected* collected,
                                           const SparseRows* given,
                                           const Poisoning* poisoning,
                                           NoiseStreams& noise, RunResult* r,
                                           std::vector<uint32_t>* untrusted,
                                           float* fill = nullptr);

// LPGNN learns from unbiased estimates in the scaled range (Multi-bit's
// rectifier gives them). HDS's are not: PrivGE uses its report as it is,
// C * x in [-1, 1] with C = (k/d) * ... about 0.004 at eps 1 over 64
// features, which a GraphSAGE of hidden 16 with weight decay cannot scale
// up (accuracy at chance). So for LPGNN every HDS value becomes
// alpha + (beta - alpha) * (out / C + 1) / 2: unbiased, in the scaled range,
// (alpha + beta) / 2 on unreported dimensions, as Multi-bit's.
// Post-processing of the reports: no privacy cost. x is held against *fill
// (CollectFeatures), which maps with it: the rows stay as sparse as they
// came.
absl::Status UnbiasHdsForLpgnn(const Dataset& d, const PipelineConfig& c,
                               SparseRows* x, float* fill);

// --- Labels (labels.cc) ---

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
                                           NoiseStreams& noise);

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
                                          bool propagate_validation);

// --- The node task (node_task.cc) ---

// One run of the node task (RunPipeline, RunPipelineOnCollected): c
// validated and its dataset settings resolved; collected set for a
// deployment's reports (run 0), null to simulate them.
absl::StatusOr<RunResult> RunNode(const Dataset& d, const PipelineConfig& c,
                                  const Collected* collected, uint64_t seed,
                                  int run, const RunOverrides& overrides);

}  // namespace ldpgraph::pipeline::internal
