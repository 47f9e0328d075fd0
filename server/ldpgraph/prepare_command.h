// `ldpgraph prepare`: readies a dataset folder for agent hosts: a public
// feature schema in meta.json (computed centrally when the folder declares
// none, and labelled so) and the device index (common/dataset/prepare.h).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace ldpgraph::tool {

// Runs `ldpgraph prepare` with args (everything after "prepare"). Writes a
// summary to out (one human line, or one JSON object line with --json) and
// diagnostics to err. Exit codes: 0 success, 1 runtime failure (a broken
// dataset, a write error), 2 bad usage.
int RunPrepare(const std::vector<std::string>& args, std::ostream& out,
               std::ostream& err);

std::string PrepareHelp();

}  // namespace ldpgraph::tool
