// `ldpgraph sample`: draws perturbed vectors from one mechanism, as an agent
// would, and optionally passes them through the curator-side estimator.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace ldpgraph::tool {

// Runs `ldpgraph sample` with args (everything after "sample"). Writes
// results to out and diagnostics to err. Returns the process exit code:
// 0 success, 1 runtime failure, 2 bad usage (the message says which flag).
int RunSample(const std::vector<std::string>& args, std::ostream& out,
              std::ostream& err);

// The text of `ldpgraph sample --help`.
std::string SampleHelp();

}  // namespace ldpgraph::tool
