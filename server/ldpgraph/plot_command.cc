#include "server/ldpgraph/plot_command.h"

#include <iostream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "common/cli_args.h"
#include "common/files.h"
#include "common/plot/svg_chart.h"
#include "common/status_macros.h"
#include "server/ldpgraph/tool_util.h"

namespace ldpgraph::tool {
namespace {

constexpr char kHelp[] = R"(ldpgraph plot: draw a line chart as SVG

Usage: ldpgraph plot --input CHART.json --output CHART.svg

CHART.json holds the chart:
  {"title": "...", "x_label": "...", "y_label": "...",
   "series": [{"name": "...", "x": [...], "y": [...], "error": [...]}]}
("error", optional, is a half-width per point: drawn as a bar y +- error).
The SVG is standalone (no fonts or scripts to fetch) and the same input
always gives the same bytes. tests/bench/scenario_bench.sh writes such a
chart for accuracy against the fraction of malicious agents.

Flags:
  --input FILE    the chart's JSON ("-" for stdin)
  --output FILE   the SVG to write (replaced atomically)
)";

// The flags: both files, neither empty.
struct PlotOptions {
  std::string input, output;
};

absl::StatusOr<PlotOptions> ParsePlotOptions(
    const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(CliArgs a, CliArgs::Parse(args, {"input", "output"}, {}));
  const auto input = a.Get("input");
  const auto output = a.Get("output");
  if (!input || !output || input->empty() || output->empty()) {
    return absl::InvalidArgumentError("--input and --output are required");
  }
  return PlotOptions{*input, *output};
}

absl::Status Plot(const std::string& input, const std::string& output) {
  std::string text;
  if (input == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), {});
  } else {
    ASSIGN_OR_RETURN(text, ReadFileToString(input));
  }
  absl::StatusOr<plot::LineChart> chart = plot::ChartFromJson(text);
  if (!chart.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(input, ": ", chart.status().message()));
  }
  ASSIGN_OR_RETURN(std::string svg, plot::RenderSvg(*chart));
  return WriteFileAtomically(output, svg);
}

}  // namespace

std::string PlotHelp() { return kHelp; }

int RunPlot(const std::vector<std::string>& args, std::ostream& out,
            std::ostream& err) {
  auto parsed =
      ParseCommand("plot", args, PlotHelp, ParsePlotOptions, out, err);
  if (!parsed.ok()) return parsed.exit_code();
  if (absl::Status s = Plot(parsed->input, parsed->output); !s.ok()) {
    err << "ldpgraph plot: " << s.message() << "\n";
    return kExitRuntimeError;
  }
  return kExitOk;
}

}  // namespace ldpgraph::tool
