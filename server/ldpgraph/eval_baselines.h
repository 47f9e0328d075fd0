// `ldpgraph eval --baselines`: beside every run of the method, what the
// curator learns without the private features (server/pipeline/baselines.h),
// on the same split and graph: feature-free (random features, no private
// data), graph-labels (label propagation from the training labels alone)
// and raw (no privacy on the features; left out when the method runs on raw
// features already). With --edges, also no-graph (the run's features and
// labels with no edge at all: what the private graph adds) and true-graph
// (the run on the dataset's own graph: what the edge privacy costs).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "common/dataset/dataset.h"
#include "server/ldpgraph/eval_edges.h"
#include "server/pipeline/pipeline.h"

namespace ldpgraph::tool {

// The baselines beside one configuration, in the order they run and print.
struct EvalBaseline {
  std::string key;    // JSON key: feature_free, graph_labels, raw, ...
  std::string label;  // the table's words: "graph alone (no reports)", ...
  // The library's baseline (server/pipeline/baselines.h); unset for
  // no_graph and true_graph, which are runs of the method itself.
  std::optional<pipeline::Baseline> kind;
};
std::vector<EvalBaseline> EvalBaselinesFor(const pipeline::PipelineConfig& c,
                                           const EvalEdgesOptions& edges);

// Run `run` of baseline b beside c on d, over the run's graph.
absl::StatusOr<pipeline::RunResult> RunEvalBaseline(
    const Dataset& d, const pipeline::PipelineConfig& c,
    const EvalBaseline& b, const EvalRunGraph& graph, uint64_t seed, int run);

// The "baselines" object of eval's JSON from each baseline's per-run
// metrics and the method's (paired by run): per key mean, std, values,
// label, and difference (the method's minus the baseline's, per run: mean,
// std, values), plus "summary": one sentence per baseline saying what the
// method gains over it, or that the baseline wins, when the paired
// difference passes two standard errors (level otherwise; one run: no
// verdict).
nlohmann::json BaselinesToJson(
    const std::vector<EvalBaseline>& baselines,
    const std::vector<std::vector<double>>& values,
    const std::vector<double>& method_values);

// The baselines of EvalBaselinesFor(c) alone (no edges), R runs on the
// splits of (seed, 0..R-1), progress lines on progress when set: per key
// {label, accuracy: {mean, std}, values, seconds}. For grids whose cells
// share their baselines (`ldpgraph sweep`, `ldpgraph repro --baselines`).
absl::StatusOr<nlohmann::json> EvaluateBaselineRuns(
    const Dataset& d, const pipeline::PipelineConfig& c, int runs,
    uint64_t seed, std::ostream* progress);

}  // namespace ldpgraph::tool
