// `ldpgraph edges`: private edges, the edge LDP thesis's grid ("Structural
// Differential Privacy in Graph Neural Networks", Chapter 4) reproduced,
// with a link-inference attack on the released model outputs.
//
// For each run, each feature budget eps_x and each graph (degree-preserving
// neighbour substitution, approach 1 or 2; randomized response on the
// neighbour bit vector; the true graph) at each edge budget eps_e, the
// curator learns with LPGNN's pipeline (server/pipeline: Multi-bit features,
// KProp, label randomized response, GCN or GraphSAGE) on the private graph,
// for each label budget eps_y and model; an MLP without any graph is the
// baseline. Each cell reports test accuracy and the AUC of two attacks on
// the released model, scored on every true-graph edge against as many
// true-graph non-edges: a similarity attack (the cosine similarity of two
// nodes' class posteriors) and LinkTeller's influence attack
// (server/training/linkteller.h), which queries the model.
//
// One Multi-bit report per node serves both the neighbours and the curator,
// as in a deployment. With seeded noise, node v's round-1 report is
// ExchangeFeatures::Private(BuildFeatureMechanism(c, d)).Encode(x_v, s_v)
// with s_v = SeededRandomForTesting(NodeNoiseSeed(NoiseSeed(seed, run), v)),
// the very stream (and first draw) with which the pipeline perturbs v's
// features, so the pipeline trains on exactly the reports the neighbours
// exchanged. With secure noise the reports are drawn once here and handed to
// the pipeline (RunOverrides::features). The edge mechanisms draw from
// separate per-node streams, NodeNoiseSeed(EdgeNoiseSeed(seed, run), v).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/dataset/dataset.h"
#include "common/edges/blink.h"
#include "common/edges/substitution.h"
#include "common/graph/graph.h"
#include "common/matrix.h"
#include "common/names.h"
#include "common/random.h"
#include "ldpgraph/v1/mechanism.pb.h"
#include "server/pipeline/pipeline.h"
#include "server/training/tasks.h"

namespace ldpgraph::tool {

int RunEdges(const std::vector<std::string>& args, std::ostream& out,
             std::ostream& err);
std::string EdgesHelp();

// The graphs the curator can learn on.
enum class EdgeGraph {
  kNs1,   // neighbour substitution, approach 1 (candidate relay)
  kNs2,   // neighbour substitution, approach 2 (similarity queries)
  kRr,    // randomized response on the neighbour bit vector, kLowerId
  kTrue,  // the true graph (no edge privacy; independent of eps_e)
  kBlink,  // Blink (common/edges/blink.h): eps_e is its total budget
  // No graph: an MLP on the features (K_x = K_y = 0, no edges), the
  // graph-free baseline; independent of eps_e and of --models.
  kMlp,
};
// The graphs' names, "ns1", "ns2", "rr", "true", "blink", "mlp" (--graphs).
inline constexpr auto kEdgeGraphNames = MakeNameTable<EdgeGraph>(
    "graph", {{EdgeGraph::kNs1, "ns1"},
              {EdgeGraph::kNs2, "ns2"},
              {EdgeGraph::kRr, "rr"},
              {EdgeGraph::kTrue, "true"},
              {EdgeGraph::kBlink, "blink"},
              {EdgeGraph::kMlp, "mlp"}});
inline absl::string_view EdgeGraphName(EdgeGraph g) {
  return kEdgeGraphNames.Name(g);
}

inline constexpr double kNoPrivacy = std::numeric_limits<double>::infinity();

// Every flag of `ldpgraph edges`, defaults as documented in EdgesHelp().
struct EdgesOptions {
  std::string dataset;
  std::vector<double> edge_epsilons{0.1, 1, 2, 8};  // finite, > 0
  std::vector<double> feature_epsilons{1, 2, 3, kNoPrivacy};  // inf: raw
  std::vector<double> label_epsilons{1, 3, kNoPrivacy};  // inf: clean labels
  std::vector<training::NodeModelKind> models{training::NodeModelKind::kGcn,
                                              training::NodeModelKind::kSage};
  std::vector<EdgeGraph> graphs{EdgeGraph::kNs1, EdgeGraph::kNs2,
                                EdgeGraph::kRr, EdgeGraph::kTrue};
  int runs = 2;
  uint64_t seed = 1;
  // Substitution parameters (eps_e set per cell); public configuration.
  // Defaults: the library's (edges::SubstitutionParams).
  edges::Similarity similarity = edges::SubstitutionParams().similarity;
  int top_k = edges::SubstitutionParams().top_k;
  int max_dummies = edges::SubstitutionParams().max_dummies;
  double dummy_mean = edges::SubstitutionParams().dummy_mean;
  double dummy_std = edges::SubstitutionParams().dummy_std;
  // KProp steps; unset: the thesis's values for the dataset (K_x = 16;
  // K_y = 2, or 0 for pubmed and lastfm).
  std::optional<int> feature_steps;
  std::optional<int> label_steps;
  std::optional<int> epochs;    // the pipeline's max_epochs when set
  std::optional<int> patience;  // the pipeline's patience when set
  // Blink: the degree's share of eps_e, in (0, 1), and the graph variant.
  double blink_delta = 0.1;
  edges::BlinkVariant blink_variant = edges::BlinkVariant::kHard;
  // The cap on the beta model's fixed-point iterations (the library's
  // default, 200).
  int blink_iterations = edges::BetaFitOptions().max_iterations;
  // An RR graph whose expected edge count n(n-1)/2 * q exceeds this is not
  // built; its cells say so. So is a Blink graph whose reports hold more
  // than this many pairs in expectation, n(n-1)/2 * p at eps_a.
  uint64_t max_rr_edges = 20'000'000;
  // The attacks on every cell's released model (--attacks): the
  // similarity attack on its posteriors, and LinkTeller's influence attack
  // (server/training/linkteller.h) querying it. At least one.
  bool similarity_attack = true;
  bool linkteller_attack = true;
  // LinkTeller's sources: this many nodes drawn uniformly once from --seed
  // (public; the same for every cell), each queried for its influence on
  // the other end of every evaluated pair it is in; 0: every node.
  uint32_t linkteller_sources = 100;
  int threads = 1;
  bool secure = false;
  bool json = false;
  std::string save_json;  // also write the JSON here when not empty
  // When not empty, the charts of EdgesCharts (server/ldpgraph/charts.h)
  // go to this file and its siblings, after the table or JSON.
  std::string plot;
};

// Parses the flags (without the subcommand name). INVALID_ARGUMENT naming
// the flag and the rule for anything wrong.
absl::StatusOr<EdgesOptions> ParseEdgesOptions(
    const std::vector<std::string>& args);

// The pipeline configuration of one cell: LPGNN (DefaultConfig), Multi-bit
// at eps_x on [0, 1] (mechanism "none" for eps_x = inf), label RR at eps_y
// (unset for inf), K_x and K_y as in o (or the thesis's for d's name), the
// model, node outputs kept. Model kMlp is the graph-free baseline: K_x =
// K_y = 0.
pipeline::PipelineConfig CellConfig(const EdgesOptions& o,
                                    const DatasetMeta& meta, double eps_x,
                                    double eps_y,
                                    training::NodeModelKind model);

// The seed of the edge mechanisms' per-node streams of run `run`: node v
// draws its drops, dummies and shuffles (or its RR bits) from
// SeededRandomForTesting(NodeNoiseSeed(EdgeNoiseSeed(seed, run), v)).
// pipeline::EdgeNoiseSeed (server/pipeline/private_edges.h), which `ldpgraph
// eval --edges` draws from too.
uint64_t EdgeNoiseSeed(uint64_t seed, int run);

// The vectors the nodes exchange under configuration c: the Multi-bit
// reports of c's mechanism, or raw vectors in [0, 1] for mechanism "none".
absl::StatusOr<std::shared_ptr<const edges::ExchangeFeatures>>
MakeExchangeFeatures(const pipeline::PipelineConfig& c, const Dataset& d);

// Every node's round-1 report under c, run `run` of seed: node v encodes
// its scaled features with its pipeline noise stream (see the file comment),
// or, when secure is set, from that source. With estimates set, also the
// curator's dense estimate of every report (zeros dropped, as
// pipeline::SimulateFeatureReports stores it); raw vectors for "none".
absl::StatusOr<std::vector<v1::FeatureReport>> NodeFeatureReports(
    const Dataset& d, const pipeline::PipelineConfig& c,
    const edges::ExchangeFeatures& features, uint64_t seed, int run,
    RandomSource* secure, SparseRows* estimates);

// A private graph and how it was made.
struct PrivateGraph {
  Graph graph;
  // Substitution only: each node's own report and counts, and the run's
  // totals.
  std::vector<std::vector<uint32_t>> reports;
  std::vector<edges::SubstitutionStats> node_stats;
  std::optional<edges::RunStats> stats;
  // Blink only: the curator's estimate (its graph moved to `graph`).
  std::optional<edges::BlinkEstimate> blink;
  double seconds = 0;
};

// Per-node sources of the edge mechanisms: seeded (EdgeNoiseSeed) or
// secure. Not thread-safe as a whole; each node's source is used by one
// thread at a time.
class EdgeNoise {
 public:
  // Seeded streams for run `run` of seed (rebuilt by Reset), or, when
  // secure, one SecureRandom per node.
  static absl::StatusOr<EdgeNoise> Create(size_t nodes, bool secure);
  // Restarts the seeded streams at their beginning for (seed, run): every
  // graph of a run draws the same per-node randomness.
  void Reset(uint64_t seed, int run);
  RandomSource* at(uint32_t v);
  absl::string_view name() const;

 private:
  std::vector<SeededRandomForTesting> seeded_;
  std::vector<std::unique_ptr<RandomSource>> secure_;
};

// The private graph of kind g (not kTrue) at edge budget eps_e. own: every
// node's round-1 report (substitution only). rr and blink run
// pipeline::BuildPrivateEdges (no attacker, no screen; the cap
// o.max_rr_edges): Blink: node v reports through edges::BlinkClient from
// noise.at(v) (delta o.blink_delta) and the curator estimates the
// o.blink_variant graph. noise: the per-node sources,
// used as they are (Reset them first for a replayable graph).
absl::StatusOr<PrivateGraph> BuildPrivateGraph(
    EdgeGraph g, double eps_e, const Graph& truth, const EdgesOptions& o,
    std::shared_ptr<const edges::ExchangeFeatures> features,
    const std::vector<v1::FeatureReport>& own, EdgeNoise& noise);

// The expected number of undirected edges of the RR graph: n(n-1)/2 * q,
// q = 1/(1 + e^eps_e).
double ExpectedRrEdges(size_t nodes, double eps_e);

// `count` distinct non-edges {u, v}, u < v, of g, uniform among all
// non-edges, from PublicRandom(seed) (public randomness); fewer if g has
// fewer non-edges.
std::vector<Edge> SampleNonEdges(const Graph& g, size_t count, uint64_t seed);

// The link-inference attack: score(u, v) = cosine similarity of rows u and
// v of outputs; the ROC-AUC of the scores of every edge of truth against
// those of non_edges. INVALID_ARGUMENT if outputs has fewer rows than
// truth's nodes, or either list is empty.
absl::StatusOr<double> SimilarityAttackAuc(const Graph& truth,
                                           const DenseMatrix& outputs,
                                           const std::vector<Edge>& non_edges);

// LinkTeller's influence attack on a trained cell: the adversary queries
// the released model (r.node_model over `graph`, after c.feature_steps
// KProp steps as c propagates) with the curator's estimated features
// (r.node_features), each source's row scaled in turn. Every direction
// (source s, other end t) of an evaluated pair whose source is in `sources`
// (every node when null) is one scored item, I(s -> t): the ROC-AUC of the
// items of the edges of truth against those of non_edges. INVALID_ARGUMENT
// if r kept no model or features, if either side has no item, or as
// SimilarityAttackAuc. threads >= 1 (results do not depend on it).
absl::StatusOr<double> LinkTellerAttackAuc(const Graph& truth,
                                           const std::vector<Edge>& non_edges,
                                           const Graph& graph,
                                           const pipeline::PipelineConfig& c,
                                           const pipeline::RunResult& r,
                                           const std::vector<bool>* sources,
                                           int threads);

// The flags of LinkTeller's sources: `count` of n nodes drawn uniformly
// without replacement from PublicRandom(seed-derived), or every node when
// count is 0 or >= n.
std::vector<bool> LinkTellerSources(size_t n, uint32_t count, uint64_t seed);

// The whole grid of o on d: the JSON object `--format json` prints
// (documented in EdgesHelp()). Progress lines go to progress when set.
absl::StatusOr<nlohmann::json> RunEdgesGrid(const Dataset& d,
                                            const EdgesOptions& o,
                                            std::ostream* progress);

// The tables `--format table` prints, from RunEdgesGrid's JSON.
std::string EdgesTables(const nlohmann::json& grid);

}  // namespace ldpgraph::tool
