// The private graphs of the edge LDP grid (`ldpgraph edges`; the edge LDP
// thesis, "Structural Differential Privacy in Graph Neural Networks",
// Chapter 4), built from a true graph with per-node noise, as the curator
// would assemble them from its agents' reports:
//  ns1, ns2  degree-preserving neighbour substitution (common/edges/
//            substitution.h), approach 1 (candidate relay) or 2
//            (similarity queries): every node exchanges its round-1
//            feature report with its neighbours; the curator takes the
//            union of the nodes' lists;
//  rr        randomized response on the neighbour bit vector, the lower
//            endpoint's bit of each pair (private_edges.h, no attacker, no
//            screen);
//  blink     Blink (common/edges/blink.h) at total budget eps_e, the
//            curator's estimate in the configured variant (private_edges.h,
//            no attacker, no screen).
//
// One feature report per node serves both the neighbours and the curator,
// as in a deployment. With seeded noise, node v's round-1 report is
// ExchangeFeatures::Private(BuildFeatureMechanism(c, d)).Encode(x_v, s_v)
// with s_v = SeededRandomForTesting(NodeNoiseSeed(NoiseSeed(seed, run), v)),
// the very stream (and first draw) with which RunPipeline perturbs v's
// features, so a run trains on exactly the reports the neighbours
// exchanged. With secure noise the reports are drawn once by the caller and
// handed to the pipeline (RunOverrides::features). The edge mechanisms draw
// from separate per-node streams, NodeNoiseSeed(EdgeNoiseSeed(seed, run),
// v) (private_edges.h), the streams `ldpgraph eval --edges` draws from too.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/dataset/dataset.h"
#include "common/edges/blink.h"
#include "common/edges/substitution.h"
#include "common/graph/graph.h"
#include "common/linalg/matrix.h"
#include "common/random/random.h"
#include "ldpgraph/v1/mechanism.pb.h"
#include "server/pipeline/config.h"

namespace ldpgraph::pipeline {

// The private graphs built from a true graph (see the file comment).
enum class PrivateGraphKind { kNs1, kNs2, kRr, kBlink };

// How a private graph is built. Public configuration only.
struct PrivateGraphConfig {
  PrivateGraphKind kind = PrivateGraphKind::kRr;
  double epsilon = 1.0;  // eps_e
  // ns1, ns2: the substitution's parameters (its approach and epsilon
  // follow kind and epsilon), and the threads of its rounds (>= 1; the
  // graph does not depend on them).
  edges::SubstitutionParams substitution;
  int threads = 1;
  // rr, blink: the campaign's settings (PrivateEdgesConfig's): Blink's
  // degree share of eps_e in (0, 1), graph variant and cap on the beta
  // model's iterations, and the cap on the expected reported pairs.
  double blink_delta = 0.1;
  edges::BlinkVariant blink_variant = edges::BlinkVariant::kHard;
  int blink_iterations = edges::BetaFitOptions().max_iterations;
  uint64_t max_reported_pairs = 20'000'000;
};

// The vectors the nodes exchange under configuration c: the reports of c's
// feature mechanism (BuildFeatureMechanism), or raw vectors in c's scaled
// range for mechanism "none". INVALID_ARGUMENT as BuildFeatureMechanism, or
// for raw features without a public range.
absl::StatusOr<std::shared_ptr<const edges::ExchangeFeatures>>
MakeExchangeFeatures(const PipelineConfig& c, const Dataset& d);

// Every node's round-1 report under c, run `run` of seed: node v encodes
// its scaled features with its pipeline noise stream (see the file
// comment), or, when secure is set, from that source. With estimates set,
// also the curator's dense estimate of every report (zeros dropped, as
// SimulateFeatureReports stores it); raw vectors for "none".
absl::StatusOr<std::vector<v1::FeatureReport>> NodeFeatureReports(
    const Dataset& d, const PipelineConfig& c,
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

// The private graph of c from the true graph `truth`. ns1 and ns2 exchange
// `features` with every node's round-1 report in `own` (ignored for rr and
// blink, which may pass none); rr and blink run BuildPrivateEdges (no
// attacker, no screen; the cap c.max_reported_pairs): Blink: node v
// reports through edges::BlinkClient from noise.at(v) (delta
// c.blink_delta) and the curator estimates the c.blink_variant graph.
// noise: the per-node sources, used as they are (Reset them first for a
// replayable graph). Errors of RunSubstitution and BuildPrivateEdges.
absl::StatusOr<PrivateGraph> BuildPrivateGraph(
    const Graph& truth, const PrivateGraphConfig& c,
    std::shared_ptr<const edges::ExchangeFeatures> features,
    const std::vector<v1::FeatureReport>& own, EdgeNoise& noise);

// The expected number of undirected edges of the RR graph: n(n-1)/2 * q,
// q = 1/(1 + e^eps_e).
double ExpectedRrEdges(size_t nodes, double eps_e);

}  // namespace ldpgraph::pipeline
