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
//   c.series.push_back({"no defence", {{0, 0.80}, {0.1, 0.62}}, {}});
//   ASSIGN_OR_RETURN(std::string svg, RenderSvg(c));
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
};

struct LineChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<Series> series;
  int width = 720;   // pixels
  int height = 440;
};

// The chart as an SVG document. INVALID_ARGUMENT naming the series and
// point for: no series, a series without points, a non-finite coordinate,
// an error list whose length differs from the points' or a negative or
// non-finite error, a size under 200 x 150.
absl::StatusOr<std::string> RenderSvg(const LineChart& chart);

// Parses the JSON form above. INVALID_ARGUMENT saying what is wrong (not
// JSON, a missing or mistyped key, x and y of different lengths).
absl::StatusOr<LineChart> ChartFromJson(const std::string& text);

// "Nice" tick positions covering [lo, hi]: about `target` steps of 1, 2 or
// 5 times a power of ten, the first <= lo and the last >= hi. lo == hi
// gives a unit-wide range around the value. lo and hi finite, lo <= hi.
std::vector<double> NiceTicks(double lo, double hi, int target);

}  // namespace ldpgraph::plot
