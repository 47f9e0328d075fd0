// `ldpgraph generate`: writes a synthetic dataset folder (meta.json,
// edges.txt, nodes.svm; the format of common/dataset/dataset.h) from the
// degree-corrected stochastic block model of common/dataset/generator.h.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace ldpgraph::tool {

// Runs `ldpgraph generate` with args (everything after "generate"). Writes
// the summary to out (one human line, or one JSON object line with --json)
// and diagnostics and progress (phases with timings, for 100,000 nodes or
// more) to err. Returns the process exit code: 0 success, 1 runtime failure
// (a write error), 2 bad usage: a bad or missing flag (the message names
// it), an invalid option combination, or an --out folder that is not empty
// when --force is not given.
int RunGenerate(const std::vector<std::string>& args, std::ostream& out,
                std::ostream& err);

// The text of `ldpgraph generate --help`.
std::string GenerateHelp();

}  // namespace ldpgraph::tool
