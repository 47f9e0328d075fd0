// `ldpgraph eval --edges rr|blink`: the curator does not know the graph.
// Before each run's pipeline, every node reports its neighbour bits under
// edge LDP (server/pipeline/private_edges.h): randomized response at
// --edge-epsilon, or Blink at --edge-epsilon with --blink-delta for the
// degree, the curator estimating the --blink-variant graph; the run then
// propagates and trains over that graph (RunOverrides::graph).
//
// Poisoning: with --attack fake-edges the malicious nodes
// (poisoning::MaliciousNodes(n, --seed, --malicious), the set the
// pipeline's feature and label attacker uses) send the fake-edges
// attacker's edge reports (common/attacks/edge_poisoning.h), each claiming
// --attack-edges victims; their feature and label reports are the
// pipeline's (input's rules). Under the other attacks their edge reports
// are honest. --defence edge-consistency screens the edge reports
// (server/pipeline/edge_screen.h, level 1e-3) and treats the flagged nodes
// as non-reporters: dropped from the estimate, isolated in the graph. (The
// flagged nodes' feature and label reports are the pipeline's business:
// only the graph changes here.)
//
// Randomness: node v's edge report is drawn from SeededRandomForTesting(
// NodeNoiseSeed(pipeline::EdgeNoiseSeed(seed, run), v)), the stream
// `ldpgraph edges` draws from for the same seed and run; with --secure,
// from OpenSSL.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "common/attacks/edge_poisoning.h"
#include "common/cli_args.h"
#include "common/dataset/dataset.h"
#include "server/pipeline/pipeline.h"
#include "server/pipeline/private_edges.h"

namespace ldpgraph::tool {

// The edges campaign of `ldpgraph eval`.
struct EvalEdgesOptions {
  // Unset: no campaign, the curator knows the dataset's graph.
  std::optional<pipeline::PrivateEdgesConfig> config;
  // V, the victims each fake-edges node claims.
  int attack_edges = poisoning::kDefaultAttackEdges;

  bool enabled() const { return config.has_value(); }
};

// The --help text of the flags.
inline constexpr char kEvalEdgesHelp[] =
    R"(Private edges (node task; default: the curator knows the graph):
  --edges K              rr or blink: every node reports its neighbour bits
                         under edge LDP before each run, and the run learns
                         on the graph the curator estimates from them: rr
                         (randomized response; the lower id's bit of each
                         pair) or blink (Blink's Bayesian estimate from the
                         bits and a noisy degree). The JSON's per-run
                         "edges" holds the graph's figures
  --edge-epsilon E       the edge budget per node (default 1)
  --blink-delta D        blink: the degree's share of it (default 0.1)
  --blink-variant V      blink: hard (default), topk or hybrid (weighted)
  --attack-edges V       --attack fake-edges: the victims each malicious
                         node claims (default 50); it also claims the
                         largest degree Blink accepts
)";

// Reads --edges, --edge-epsilon, --blink-delta, --blink-variant and
// --attack-edges (value flags) from a, given the rest of eval's
// configuration c (its attack and defences parsed). INVALID_ARGUMENT naming
// the flag when: --edges is not rr or blink; --edge-epsilon, --blink-delta
// or --blink-variant are given without --edges (the last two need blink);
// a value breaks its rule (PrivateEdgesConfig::Validate); --edges with the
// link task; --attack fake-edges or --defence edge-consistency without
// --edges; --attack-edges without --attack fake-edges, or below 1.
absl::StatusOr<EvalEdgesOptions> ParseEvalEdgesFlags(
    const CliArgs& a, const pipeline::PipelineConfig& c);

// One run's private graph (none without --edges).
struct EvalRunGraph {
  std::optional<pipeline::PrivateEdges> edges;

  // RunPipeline's overrides: the graph when there is one.
  pipeline::RunOverrides overrides() const;
  // Adds "edges" (pipeline::PrivateEdgesToJson) to a run's JSON when there
  // is a graph.
  void AddTo(nlohmann::json* run) const;
};

// The private graph of run `run` of seed on d under c's attack and
// defences (none when !o.enabled()). Errors of BuildPrivateEdges
// (RESOURCE_EXHAUSTED above the cap of reported pairs; INVALID_ARGUMENT).
absl::StatusOr<EvalRunGraph> BuildEvalRunGraph(
    const Dataset& d, const pipeline::PipelineConfig& c,
    const EvalEdgesOptions& o, uint64_t seed, int run);

// The settings, PrivateEdgesConfigToJson plus "attack_edges" under
// fake-edges, as "edges" in *parameters (eval's "parameters"); nothing
// without --edges.
void AddEdgesSettings(const EvalEdgesOptions& o,
                      const pipeline::PipelineConfig& c,
                      nlohmann::json* parameters);

// The table's line: per run, the graph's edges and the screen's flags
// (malicious among them); "" without --edges.
std::string EdgesSummary(const EvalEdgesOptions& o,
                         const nlohmann::json& per_run);

}  // namespace ldpgraph::tool
