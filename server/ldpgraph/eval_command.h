// `ldpgraph eval`: runs the learning pipeline (server/pipeline) R times on a
// dataset and reports the test metric's mean and spread, with every setting
// used. `ldpgraph repro`: runs a paper's grid of mechanisms and budgets and
// prints it beside the paper's published numbers.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/statusor.h"
#include "common/dataset/dataset.h"
#include "server/ldpgraph/eval_edges.h"
#include "server/pipeline/pipeline.h"

namespace ldpgraph::tool {

int RunEval(const std::vector<std::string>& args, std::ostream& out,
            std::ostream& err);
std::string EvalHelp();

int RunRepro(const std::vector<std::string>& args, std::ostream& out,
             std::ostream& err);
std::string ReproHelp();

// R runs of c on d, seeds (seed, 0..R-1); progress lines go to err when
// progress is set. The JSON object `ldpgraph eval --format json` prints:
// task, metric, mean, std, runs, values, seconds, dataset, seed,
// parameters, and per-run figures. With edges enabled, each run learns on
// the private graph of BuildEvalRunGraph (eval_edges.h): per-run "edges", and
// parameters' "edges". With baselines, every run also runs the baselines
// of EvalBaselinesFor (eval_baselines.h) on its split and graph: per-run
// "baselines" (each one's metric), "baselines" (BaselinesToJson) and
// "baselines_summary" (its sentences), and "baselines_seconds".
absl::StatusOr<nlohmann::json> EvaluateRuns(const Dataset& d,
                                            const pipeline::PipelineConfig& c,
                                            int runs, uint64_t seed,
                                            std::ostream* progress,
                                            const EvalEdgesOptions& edges = {},
                                            bool baselines = false);

}  // namespace ldpgraph::tool
