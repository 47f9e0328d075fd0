#include "server/ldpgraph/eval_baselines.h"

#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/stopwatch.h"
#include "server/pipeline/baselines.h"
#include "server/training/metrics.h"

namespace ldpgraph::tool {

std::vector<EvalBaseline> EvalBaselinesFor(const pipeline::PipelineConfig& c,
                                           const EvalEdgesOptions& edges) {
  using pipeline::Baseline;
  std::vector<EvalBaseline> out;
  if (pipeline::BaselineApplies(c, Baseline::kFeatureFree)) {
    out.push_back({"feature_free", "graph alone (no reports)",
                   Baseline::kFeatureFree});
  }
  if (pipeline::BaselineApplies(c, Baseline::kGraphLabels)) {
    out.push_back({"graph_labels", "graph and labels (label propagation)",
                   Baseline::kGraphLabels});
  }
  if (pipeline::BaselineApplies(c, Baseline::kRaw) && c.mechanism != "none") {
    out.push_back({"raw", "raw features (no feature privacy)", Baseline::kRaw});
  }
  if (edges.enabled()) {
    out.push_back({"no_graph", "no graph (features and labels alone)"});
    out.push_back({"true_graph", "true graph (no edge privacy)"});
  }
  return out;
}

absl::StatusOr<pipeline::RunResult> RunEvalBaseline(
    const Dataset& d, const pipeline::PipelineConfig& c,
    const EvalBaseline& b, const EvalRunGraph& graph, uint64_t seed,
    int run) {
  using pipeline::Baseline;
  if (b.key == "true_graph") return pipeline::RunPipeline(d, c, seed, run);
  if (b.key == "no_graph") {
    ASSIGN_OR_RETURN(const Graph empty, Graph::FromEdges(d.graph.num_nodes(),
                                                         {}));
    pipeline::RunOverrides o = graph.overrides();
    o.graph = &empty;
    return pipeline::RunPipeline(d, c, seed, run, o);
  }
  if (!b.kind) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown baseline '", b.key, "'"));
  }
  const pipeline::RunOverrides o = graph.overrides();
  return pipeline::RunBaseline(d, c, *b.kind, seed, run, o.graph);
}

nlohmann::json BaselinesToJson(
    const std::vector<EvalBaseline>& baselines,
    const std::vector<std::vector<double>>& values,
    const std::vector<double>& method_values) {
  nlohmann::json out = nlohmann::json::object();
  nlohmann::json summary = nlohmann::json::array();
  const training::Summary m = training::Summarize(method_values);
  for (size_t i = 0; i < baselines.size() && i < values.size(); ++i) {
    const training::Summary s = training::Summarize(values[i]);
    std::vector<double> diff;
    for (size_t r = 0; r < values[i].size() && r < method_values.size();
         ++r) {
      diff.push_back(method_values[r] - values[i][r]);
    }
    const training::Summary ds = training::Summarize(diff);
    out[baselines[i].key] = {
        {"label", baselines[i].label},
        {"mean", s.mean},
        {"std", s.std},
        {"values", values[i]},
        {"difference", {{"mean", ds.mean}, {"std", ds.std}, {"values", diff}}}};
    // The paired difference's standard error; within two of them the runs
    // cannot tell the two apart. One run has no spread to judge by.
    const size_t n = diff.size();
    const double se = n > 1 ? ds.std / std::sqrt(static_cast<double>(n)) : 0;
    const double points = 100 * ds.mean, error = 100 * se;
    std::string sentence;
    if (n < 2) {
      sentence = absl::StrFormat(
          "%s: %.1f %% against the method's %.1f %% (one run: no spread to "
          "judge by)",
          baselines[i].label, 100 * s.mean, 100 * m.mean);
    } else if (std::abs(ds.mean) <= 2 * se) {
      sentence = absl::StrFormat(
          "%s: %.1f %%, level with the method's %.1f %% (difference %+.1f "
          "± %.1f points, standard error over %zu paired runs)",
          baselines[i].label, 100 * s.mean, 100 * m.mean, points, error, n);
    } else if (ds.mean > 0) {
      sentence = absl::StrFormat(
          "%s: %.1f %%; the method adds %.1f ± %.1f points over it "
          "(standard error over %zu paired runs)",
          baselines[i].label, 100 * s.mean, points, error, n);
    } else {
      sentence = absl::StrFormat(
          "%s: %.1f %%, ahead of the method by %.1f ± %.1f points (standard "
          "error over %zu paired runs): here the baseline wins",
          baselines[i].label, 100 * s.mean, -points, error, n);
    }
    summary.push_back(sentence);
  }
  out["summary"] = std::move(summary);
  return out;
}

absl::StatusOr<nlohmann::json> EvaluateBaselineRuns(
    const Dataset& d, const pipeline::PipelineConfig& c, int runs,
    uint64_t seed, std::ostream* progress) {
  nlohmann::json out = nlohmann::json::object();
  const EvalRunGraph graph;  // the dataset's own
  for (const EvalBaseline& b : EvalBaselinesFor(c, EvalEdgesOptions())) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<double> values;
    for (int run = 0; run < runs; ++run) {
      ASSIGN_OR_RETURN(const pipeline::RunResult r,
                       RunEvalBaseline(d, c, b, graph, seed, run));
      values.push_back(r.metric);
      if (progress != nullptr) {
        *progress << absl::StrFormat("  %s run %d/%d: %.4f\n", b.key,
                                     run + 1, runs, r.metric);
      }
    }
    const training::Summary s = training::Summarize(values);
    out[b.key] = {{"label", b.label},
                  {"accuracy", {{"mean", s.mean}, {"std", s.std}}},
                  {"values", values},
                  {"seconds", SecondsSince(start)}};
  }
  return out;
}

}  // namespace ldpgraph::tool
