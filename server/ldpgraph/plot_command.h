// `ldpgraph plot`: a chart's JSON (common/plot/svg_chart.h) to an SVG file,
// for the curves that scripts and benchmarks compute.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace ldpgraph::tool {

// Runs `ldpgraph plot` with args (everything after "plot"). Returns 0 on
// success, 1 if the input cannot be read or drawn or the output cannot be
// written (the message names the file), 2 for bad usage.
int RunPlot(const std::vector<std::string>& args, std::ostream& out,
            std::ostream& err);

// The text of `ldpgraph plot --help`.
std::string PlotHelp();

}  // namespace ldpgraph::tool
