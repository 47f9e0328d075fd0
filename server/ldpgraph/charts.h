// The privacy-utility charts of `ldpgraph repro --plot` and `ldpgraph edges
// --plot`, drawn (common/plot/svg_chart.h) from the JSON objects the
// commands build, the very objects `--format json` prints. The charts
// depend on nothing else, so a saved grid (edges --save-json) charts the
// same, and tests build the JSON by hand instead of running a grid.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/plot/svg_chart.h"

namespace ldpgraph::tool {

// A family of charts: each goes to plot::ChartFileName(FILE, suffix).
using Charts = std::vector<std::pair<std::string, plot::LineChart>>;

// The chart of `ldpgraph repro --plot`, suffix "": the metric (accuracy or
// ROC-AUC; error bars: std over runs) against the feature budget epsilon on
// a log axis, one line per row of repro's table (the mechanism for privge
// and dpne, the label budget for lpgnn); the cells at eps = inf (raw
// features, or dpne's non-private factorisation) as dashed reference lines
// with a band of +- std, and so are repro --baselines' baselines. One
// chart: a repro run covers one dataset and one
// task. INVALID_ARGUMENT naming the key for an object that is not repro's
// JSON, or when no cell has a finite epsilon.
absl::StatusOr<Charts> ReproCharts(const nlohmann::json& report);

// The chart of `ldpgraph sweep --plot`, suffix "": test accuracy (error
// bars: std over runs) against the feature budget on a log axis, one line
// per method; each baseline (feature-free, graph-labels, raw) a dashed
// reference line with its band of +- std. INVALID_ARGUMENT naming the key
// for an object that is not sweep's JSON, or a line without a cell.
absl::StatusOr<Charts> SweepCharts(const nlohmann::json& sweep);

// The charts of `ldpgraph edges --plot`, for each (model, eps_x, eps_y) of
// the grid, in the grid's order; error bars and bands: std over runs; each
// graph has the same colour in every chart.
//   KEY                     test accuracy against eps_e (log axis), one
//                           line per private graph (ns1, ns2, rr, blink);
//                           true and mlp as dashed reference lines
//   KEY-attack-ATTACK       that attack's AUC against eps_e, likewise, and
//                           the 0.5 of an attack that learns nothing
//   KEY-tradeoff-ATTACK     privacy-utility: accuracy against that attack's
//                           AUC, one line per private graph through its
//                           budgets (each point labelled with its eps_e);
//                           true and mlp as single points
// for ATTACK similarity and linkteller, those run. KEY is empty when the
// grid has one (model, eps_x, eps_y) (suffixes "", "attack-similarity",
// ...), otherwise MODEL-xEPS_X-yEPS_Y, e.g. "gcn-x1-yinf" and
// "gcn-x1-yinf-attack-similarity". Skipped cells are left out.
// INVALID_ARGUMENT naming the key or cell for an object that is not edges'
// JSON, or a combination with no private graph's cell to draw.
absl::StatusOr<Charts> EdgesCharts(const nlohmann::json& grid);

// The end of --plot for `ldpgraph <command>`: writes the charts
// (plot::WriteCharts) and names each file on err ("ldpgraph <command>:
// wrote FILE"). On failure (charts not ok, or a file that cannot be
// written) prints "ldpgraph <command>: <message>" and returns 1; else 0.
int WritePlot(absl::string_view command, const std::string& file,
              const absl::StatusOr<Charts>& charts, std::ostream& err);

// A budget as the tables and charts print it: "inf" for null, else %g.
std::string BudgetText(const nlohmann::json& e);

// --plot FILE checked before any work: FILE not empty and its directory
// (the current one for a bare name) an existing directory. INVALID_ARGUMENT
// saying which.
absl::Status CheckPlotPath(const std::string& file);

}  // namespace ldpgraph::tool
