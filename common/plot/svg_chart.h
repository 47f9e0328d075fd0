// Line charts as standalone SVG: privacy-utility curves and scenario sweeps
// that a README, a browser or a paper draft shows as they are, with no
// plotting package installed.
//
// A chart is a list of series, each a name and points (x, y), optionally
// with a symmetric error bar per point (a standard deviation over runs).
// RenderSvg draws the axes with round ticks covering every point (and bar),
// one coloured polyline with markers per series, and a legend. The output
// depends only on the chart: the same chart renders to the same bytes, so
// tests and diffs can compare plots.
//
//   LineChart c;
//   c.title = "cora, LPGNN: accuracy under poisoning";
//   c.x_label = "malicious fraction";
//   c.y_label = "accuracy";
//   c.series.push_back({"no defence", {{0, 0.80}, {0.1, 0.62}}, {}, {}});
//   ASSIGN_OR_RETURN(std::string svg, RenderSvg(c));
//
// A chart may also hold reference lines: horizontal dashed lines across the
// plot for values that do not depend on x (a non-private baseline, a model
// without a graph), each with an optional band y +- error and a legend
// entry. Points may carry labels (drawn beside their markers: the budget of
// each point of an accuracy-vs-attack-AUC curve), and x may be drawn on a
// log scale (privacy budgets from 0.01 to 1000). The legend takes two
// columns beyond four entries; a series or reference may fix its colour. A chart of at most four series without
// these renders to the same bytes as before they existed.
//
// ChartFromJson reads the same chart from JSON, the form scripts write:
//   {"title": "...", "x_label": "...", "y_label": "...",
//    "series": [{"name": "...", "x": [...], "y": [...], "error": [...]}]}
// ("error" optional; every other key required except the labels).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace ldpgraph::plot {

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in order
  // Empty, or one non-negative half-width per point: a bar y +- error.
  std::vector<double> error;
  // Empty, or one text per point, drawn beside its marker.
  std::vector<std::string> labels;
  // The palette entry (modulo its 8 colours) for a colour that means the
  // same in several charts; -1: the series' position.
  int colour = -1;
};

// A horizontal line at y across the plot, dashed, with a legend entry;
// error > 0 adds a light band y +- error.
struct ReferenceLine {
  std::string name;
  double y = 0;
  double error = 0;
  int colour = -1;  // as Series::colour; -1: after the series' colours
};

struct LineChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<Series> series;
  std::vector<ReferenceLine> references;  // drawn under the series
  // x on a log10 scale, ticks at 1, 2, 5 times powers of ten (only powers
  // of ten over more than two decades); every x must then be > 0.
  bool log_x = false;
  int width = 720;   // pixels
  int height = 440;
};

// The chart as an SVG document. INVALID_ARGUMENT naming the series and
// point for: no series, a series without points, a non-finite coordinate,
// an error list whose length differs from the points' or a negative or
// non-finite error, a label list whose length differs from the points', an
// x <= 0 on a log_x chart, a size under 200 x 150; naming the reference
// line for a non-finite y or a negative or non-finite error.
absl::StatusOr<std::string> RenderSvg(const LineChart& chart);

// Parses the JSON form above. INVALID_ARGUMENT saying what is wrong (not
// JSON, a missing or mistyped key, x and y of different lengths).
absl::StatusOr<LineChart> ChartFromJson(const std::string& text);

// The file a chart of a family goes to: `file` itself when suffix is
// empty, otherwise `file` with "-suffix" before its extension
// ("out.svg", "gcn" -> "out-gcn.svg"; "out", "gcn" -> "out-gcn").
std::string ChartFileName(const std::string& file, const std::string& suffix);

// Renders each chart and writes it atomically to ChartFileName(file,
// suffix). Returns the files written, in order. The first chart that cannot
// be drawn or written stops it with its status, which names the file (the
// files before it are written).
absl::StatusOr<std::vector<std::string>> WriteCharts(
    const std::string& file,
    const std::vector<std::pair<std::string, LineChart>>& charts);

// Ticks of a log10 axis covering [lo, hi] (0 < lo <= hi, finite): 1, 2, 5
// times powers of ten when the range spans at most two decades, otherwise
// powers of ten; the first <= lo, the last >= hi; at least two.
std::vector<double> LogTicks(double lo, double hi);

// "Nice" tick positions covering [lo, hi]: about `target` steps of 1, 2 or
// 5 times a power of ten, the first <= lo and the last >= hi. lo == hi
// gives a unit-wide range around the value. lo and hi finite, lo <= hi.
std::vector<double> NiceTicks(double lo, double hi, int target);

}  // namespace ldpgraph::plot
