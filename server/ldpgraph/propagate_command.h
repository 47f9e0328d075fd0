// `ldpgraph propagate`: loads a dataset, optionally perturbs every node's
// features with an LDP mechanism exactly as its agent would (and rectifies
// them as the curator would), propagates them over the graph, and writes
// the result as a NumPy .npy file.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace ldpgraph::tool {

// Runs `ldpgraph propagate` with args (everything after "propagate").
// Exit code 0 success, 1 runtime failure (unreadable dataset, write error),
// 2 bad usage (the message names the flag).
int RunPropagate(const std::vector<std::string>& args, std::ostream& out,
                 std::ostream& err);

std::string PropagateHelp();

}  // namespace ldpgraph::tool
