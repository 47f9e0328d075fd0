// `ldpgraph sweep`: the privacy-utility sweep of node classification on one
// dataset. Each method's test accuracy against the feature budget, beside
// the baselines that use no private feature at all (feature-free,
// graph-labels) and the raw features, as a table, JSON and an SVG chart
// whose baselines are horizontal lines.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace ldpgraph::tool {

int RunSweep(const std::vector<std::string>& args, std::ostream& out,
             std::ostream& err);
std::string SweepHelp();

}  // namespace ldpgraph::tool
