// The offline edges campaign: every node reports its neighbour bits under
// edge LDP (randomized response, or Blink with its noisy degree), the
// attacker's nodes send the fake-edges attacker's crafted reports
// (common/attacks/edge_poisoning.h), the curator optionally screens the
// reports for consistency (edge_screen.h) and estimates the graph it then
// learns on. `ldpgraph eval --edges rr|blink` runs it before each run's
// pipeline and passes the graph in RunOverrides::graph; the rr and blink
// graphs of `ldpgraph edges` (private_graph.h) are built with it (no
// attacker, no screen).
//
// The graph, as the deployed curator assembles it (server/curator/stages.h):
//  rr     {u, v}, u < v, is an edge iff u's report lists v
//         (edges::Symmetrisation::kLowerId).
//  blink  edges::EstimateBlinkGraph in the configured variant.
// With the screen, a flagged node is treated as one that did not report:
//  rr     every pair with a flagged endpoint is a non-edge (the flagged
//         node's own row is dropped, and so are the bits about it in the
//         others' rows: a node the curator distrusts is isolated, rather
//         than linked by its neighbours' bits alone under one rule and not
//         under the other);
//  blink  the estimate runs over the m unflagged nodes only (ids remapped,
//         each list filtered to them, each noisy degree scaled by
//         (m - 1) / (n - 1)), the flagged nodes isolated: what the curator
//         does for nodes without a report.
//
// Randomness: node v draws its bits (and degree) from rng_of_node(v), one
// stream per node; the attacker's nodes draw their victims and bits from
// theirs. A seeded run uses SeededRandomForTesting(NodeNoiseSeed(
// EdgeNoiseSeed(seed, run), v)), separate from the feature and label
// streams (NoiseSeed) and the same streams `ldpgraph edges` draws from.
//
// Memory: the reports (about n (n - 1) p entries for n nodes at flip
// probability p; only the upper half of each row is kept when nothing is
// screened), O(n) besides; never an n x n matrix. A campaign whose expected
// number of reported pairs n (n - 1) / 2 * p exceeds max_reported_pairs is
// refused (RESOURCE_EXHAUSTED), as `ldpgraph edges` skips such graphs.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "common/attacks/edge_poisoning.h"
#include "common/edges/blink.h"
#include "common/graph/graph.h"
#include "common/names.h"
#include "common/random/random.h"
#include "server/pipeline/edge_screen.h"
#include "server/pipeline/edges_config.h"

namespace ldpgraph::pipeline {

// What the campaign built.
struct PrivateEdges {
  Graph graph;  // the curator's estimate, n nodes
  EdgeMechanism kind = EdgeMechanism::kBlink;
  // Entries of all reports as sent (before the screen and the symmetrisation).
  uint64_t reported_entries = 0;
  // The attacker's nodes (crafted reports), ascending; empty without one.
  std::vector<uint32_t> malicious;
  uint32_t victims_per_node = 0;  // the attacker's V (0 without one)
  // With the screen: its result, and how many of the attacker's nodes it
  // flagged.
  std::optional<EdgeScreenResult> screen;
  uint32_t malicious_flagged = 0;
  // Blink: the estimate's figures (its graph moved to `graph`; ids local to
  // the unflagged nodes when some were flagged), and the degree scale
  // (m - 1) / (n - 1) (1 when nothing was flagged).
  std::optional<edges::BlinkEstimate> blink;
  double degree_scale = 1.0;
  // Edges of `graph` with an endpoint among `malicious`.
  uint64_t malicious_edges = 0;
  double seconds = 0;
};

// Runs the campaign on the true graph `truth` (n = truth.num_nodes() >= 3,
// no self loops): node v reports honestly from rng_of_node(v), unless
// adversary controls v (its crafted report, from the same source); then the
// screen (c.edge_consistency) and the estimate. adversary may be null (no
// attack); it must be over n nodes. rng_of_node(v) is called once per node,
// in ascending order. INVALID_ARGUMENT for an invalid c, an adversary over
// another n or a self loop in truth (the mechanisms refuse it);
// RESOURCE_EXHAUSTED beyond c.max_reported_pairs; FAILED_PRECONDITION when
// the screen leaves Blink fewer than 3 nodes.
absl::StatusOr<PrivateEdges> BuildPrivateEdges(
    const Graph& truth, const PrivateEdgesConfig& c,
    const poisoning::EdgeAdversary* adversary,
    absl::FunctionRef<RandomSource&(uint32_t)> rng_of_node);

// The seed of the edge mechanisms' per-node streams of run `run` of seed:
// node v draws from SeededRandomForTesting(NodeNoiseSeed(EdgeNoiseSeed(
// seed, run), v)): EdgeStreamSeed(NoiseSeed(seed, run)) (common/random/random.h),
// the streams a deployment's agents seeded with NoiseSeed(seed, run) draw
// their edge answers from.
uint64_t EdgeNoiseSeed(uint64_t seed, int run);

// The expected number of reported pairs of c on n nodes: n (n - 1) / 2 * p.
double ExpectedReportedPairs(uint32_t nodes, const PrivateEdgesConfig& c);

// The figures: {"mechanism", "edges" (of the graph), "reported_entries",
// "malicious" (count), "victims_per_node", "malicious_edges", "seconds",
// "screen" (EdgeScreenToJson, or null without it), "malicious_flagged"
// (with the screen), and for Blink "blink": {"degree_scale",
// "prior_iterations", "prior_converged", "max_degree_residual",
// "reported_pairs", "expected_edges", "target_edges", "clipped_low",
// "clipped_high"}}.
nlohmann::json PrivateEdgesToJson(const PrivateEdges& e);

}  // namespace ldpgraph::pipeline
