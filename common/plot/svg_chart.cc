#include "common/plot/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "common/files.h"

namespace ldpgraph::plot {
namespace {

using nlohmann::json;

// Colour-blind-safe palette (Okabe and Ito), cycled.
constexpr const char* kColours[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                    "#E69F00", "#56B4E9", "#000000", "#F0E442"};

// Palette entry `fixed` (>= 0), else `position`, cycled.
const char* Colour(int fixed, size_t position) {
  const size_t n = std::size(kColours);
  return kColours[fixed >= 0 ? static_cast<size_t>(fixed) % n : position % n];
}

std::string Escape(const std::string& s) {
  return absl::StrReplaceAll(s, {{"&", "&amp;"},
                                 {"<", "&lt;"},
                                 {">", "&gt;"},
                                 {"\"", "&quot;"}});
}

// A tick label: as few decimals as the step needs.
std::string TickLabel(double v, double step) {
  const int decimals =
      std::clamp(static_cast<int>(std::ceil(-std::log10(step) - 1e-9)), 0, 6);
  if (std::abs(v) < step * 1e-6) v = 0;  // no "-0"
  return absl::StrFormat("%.*f", decimals, v);
}

absl::Status Validate(const LineChart& c) {
  if (c.width < 200 || c.height < 150) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a chart is at least 200 x 150 pixels, got ", c.width, " x ", c.height));
  }
  if (c.series.empty()) {
    return absl::InvalidArgumentError("a chart needs at least one series");
  }
  for (const Series& s : c.series) {
    if (s.points.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("series '", s.name, "' has no points"));
    }
    if (!s.error.empty() && s.error.size() != s.points.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "series '", s.name, "' has ", s.error.size(), " errors for ",
          s.points.size(), " points"));
    }
    if (!s.labels.empty() && s.labels.size() != s.points.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "series '", s.name, "' has ", s.labels.size(), " labels for ",
          s.points.size(), " points"));
    }
    for (size_t i = 0; i < s.points.size(); ++i) {
      const auto [x, y] = s.points[i];
      if (!std::isfinite(x) || !std::isfinite(y)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "series '", s.name, "' point ", i, " is not finite"));
      }
      if (c.log_x && !(x > 0)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "series '", s.name, "' point ", i, ": x = ", x,
            " cannot be drawn on a log scale (x must be > 0)"));
      }
      if (!s.error.empty() && !(s.error[i] >= 0 && std::isfinite(s.error[i]))) {
        return absl::InvalidArgumentError(absl::StrCat(
            "series '", s.name, "' point ", i,
            ": an error bar must be finite and >= 0"));
      }
    }
  }
  for (const ReferenceLine& r : c.references) {
    if (!std::isfinite(r.y) || !(r.error >= 0 && std::isfinite(r.error))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "reference line '", r.name,
          "': y must be finite and its error finite and >= 0"));
    }
  }
  return absl::OkStatus();
}

// Maps data coordinates to pixels inside the plot area.
struct Frame {
  double left, right, top, bottom;  // pixels
  double x0, x1, y0, y1;            // data range (first and last ticks)
  bool log_x = false;
  double X(double x) const {
    if (log_x) {
      return left + std::log(x / x0) / std::log(x1 / x0) * (right - left);
    }
    return left + (x - x0) / (x1 - x0) * (right - left);
  }
  double Y(double y) const { return bottom - (y - y0) / (y1 - y0) * (bottom - top); }
};

void DrawAxes(const LineChart& c, const Frame& f, const std::vector<double>& xt,
              const std::vector<double>& yt, std::string* out) {
  const double xs = xt.size() > 1 ? xt[1] - xt[0] : 1;
  const double ys = yt.size() > 1 ? yt[1] - yt[0] : 1;
  for (double y : yt) {
    absl::StrAppendFormat(
        out,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
        f.left, f.Y(y), f.right, f.Y(y), f.left - 6, f.Y(y) + 4, TickLabel(y, ys));
  }
  for (double x : xt) {
    absl::StrAppendFormat(
        out,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
        "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
        f.X(x), f.top, f.X(x), f.bottom, f.X(x), f.bottom + 18,
        f.log_x ? absl::StrFormat("%g", x) : TickLabel(x, xs));
  }
  absl::StrAppendFormat(
      out,
      "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
      "stroke=\"#333\"/>\n"
      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n"
      "<text transform=\"translate(16 %.1f) rotate(-90)\" "
      "text-anchor=\"middle\">%s</text>\n"
      "<text x=\"%.1f\" y=\"22\" text-anchor=\"middle\" font-size=\"15\" "
      "font-weight=\"bold\">%s</text>\n",
      f.left, f.top, f.right - f.left, f.bottom - f.top, (f.left + f.right) / 2,
      f.bottom + 38, Escape(c.x_label), (f.top + f.bottom) / 2, Escape(c.y_label),
      (f.left + f.right) / 2, Escape(c.title));
}

void DrawSeries(const Series& s, const char* colour, const Frame& f,
                std::string* out) {
  std::string pts;
  for (const auto& [x, y] : s.points) {
    absl::StrAppendFormat(&pts, "%s%.1f,%.1f", pts.empty() ? "" : " ", f.X(x),
                          f.Y(y));
  }
  absl::StrAppendFormat(out,
                        "<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" "
                        "stroke-width=\"2\"/>\n",
                        pts, colour);
  for (size_t i = 0; i < s.points.size(); ++i) {
    const auto [x, y] = s.points[i];
    if (!s.error.empty() && s.error[i] > 0) {
      absl::StrAppendFormat(
          out,
          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n",
          f.X(x), f.Y(y - s.error[i]), f.X(x), f.Y(y + s.error[i]), colour);
    }
    absl::StrAppendFormat(out,
                          "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n",
                          f.X(x), f.Y(y), colour);
    if (!s.labels.empty() && !s.labels[i].empty()) {
      // Right of the marker, or left of it near the plot's right edge.
      const bool left = f.X(x) > f.right - 60;
      absl::StrAppendFormat(
          out,
          "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" fill=\"%s\"%s>%s</text>\n",
          f.X(x) + (left ? -6 : 6), f.Y(y) - 6, colour,
          left ? " text-anchor=\"end\"" : "", Escape(s.labels[i]));
    }
  }
}

void DrawReference(const ReferenceLine& r, const char* colour, const Frame& f,
                   std::string* out) {
  if (r.error > 0) {
    absl::StrAppendFormat(
        out,
        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
        "fill=\"%s\" fill-opacity=\"0.12\"/>\n",
        f.left, f.Y(r.y + r.error), f.right - f.left,
        f.Y(r.y - r.error) - f.Y(r.y + r.error), colour);
  }
  absl::StrAppendFormat(out,
                        "<path d=\"M%.1f %.1fH%.1f\" stroke=\"%s\" "
                        "stroke-width=\"2\" stroke-dasharray=\"6 4\"/>\n",
                        f.left, f.Y(r.y), f.right, colour);
}

// One legend entry: a line sample (dashed for a reference) and the name.
// Entries fill one column, or two when there are more than four.
void DrawLegendEntry(const LineChart& c, const Frame& f, size_t i,
                     const std::string& name, const char* colour, bool dashed,
                     std::string* out) {
  const size_t entries = c.series.size() + c.references.size();
  const size_t per_column = entries > 4 ? (entries + 1) / 2 : entries;
  const double lx = f.left + (i / per_column) * (f.right - f.left) / 2;
  const double ly = f.bottom + 60 + 20.0 * (i % per_column);
  absl::StrAppendFormat(
      out,
      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
      "stroke-width=\"2\"%s/>\n<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
      lx, ly, lx + 28, ly, colour, dashed ? " stroke-dasharray=\"6 4\"" : "",
      lx + 36, ly + 4, Escape(name));
}

}  // namespace

std::vector<double> LogTicks(double lo, double hi) {
  if (lo == hi) {
    lo /= 2;
    hi *= 2;
  }
  const int k0 = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
  const int k1 = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
  std::vector<double> candidates;
  for (int k = k0; k <= k1; ++k) {
    const double p = std::pow(10.0, k);
    if (k1 - k0 > 2) {
      candidates.push_back(p);
    } else {
      for (double m : {1.0, 2.0, 5.0}) candidates.push_back(m * p);
    }
  }
  // The last candidate <= lo through the first >= hi.
  size_t first = 0, last = candidates.size() - 1;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i] <= lo * (1 + 1e-9)) first = i;
  }
  for (size_t i = candidates.size(); i-- > 0;) {
    if (candidates[i] >= hi * (1 - 1e-9)) last = i;
  }
  if (last <= first) last = first + 1;
  if (last >= candidates.size()) candidates.push_back(candidates.back() * 10);
  return std::vector<double>(candidates.begin() + first,
                             candidates.begin() + last + 1);
}

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (hi - lo < 1e-12 * std::max(1.0, std::abs(lo))) {
    lo -= 0.5;
    hi += 0.5;
  }
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  const double first = std::floor(lo / step + 1e-9) * step;
  std::vector<double> ticks;
  for (int i = 0;; ++i) {
    const double t = first + i * step;  // no accumulated rounding
    ticks.push_back(t);
    if (t >= hi - step * 1e-9) break;
  }
  if (ticks.size() == 1) ticks.push_back(first + step);
  return ticks;
}

absl::StatusOr<std::string> RenderSvg(const LineChart& c) {
  if (absl::Status s = Validate(c); !s.ok()) return s;
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (const Series& s : c.series) {
    for (size_t i = 0; i < s.points.size(); ++i) {
      const double e = s.error.empty() ? 0 : s.error[i];
      xlo = std::min(xlo, s.points[i].first);
      xhi = std::max(xhi, s.points[i].first);
      ylo = std::min(ylo, s.points[i].second - e);
      yhi = std::max(yhi, s.points[i].second + e);
    }
  }
  for (const ReferenceLine& r : c.references) {
    ylo = std::min(ylo, r.y - r.error);
    yhi = std::max(yhi, r.y + r.error);
  }
  const std::vector<double> xt = c.log_x ? LogTicks(xlo, xhi) : NiceTicks(xlo, xhi, 6);
  const std::vector<double> yt = NiceTicks(ylo, yhi, 6);
  const size_t entries = c.series.size() + c.references.size();
  const double legend_h = 20.0 * (entries > 4 ? (entries + 1) / 2 : entries);
  const Frame f{70, c.width - 20.0, 40, c.height - 60.0 - legend_h,
                xt.front(), xt.back(), yt.front(), yt.back(), c.log_x};
  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      c.width, c.height, c.width, c.height);
  DrawAxes(c, f, xt, yt, &out);
  // References take the colours after the series', and lie under them.
  for (size_t k = 0; k < c.references.size(); ++k) {
    const size_t i = c.series.size() + k;
    const char* colour = Colour(c.references[k].colour, i);
    DrawReference(c.references[k], colour, f, &out);
    DrawLegendEntry(c, f, i, c.references[k].name, colour, true, &out);
  }
  for (size_t i = 0; i < c.series.size(); ++i) {
    const char* colour = Colour(c.series[i].colour, i);
    DrawSeries(c.series[i], colour, f, &out);
    DrawLegendEntry(c, f, i, c.series[i].name, colour, false, &out);
  }
  out += "</svg>\n";
  return out;
}

std::string ChartFileName(const std::string& file, const std::string& suffix) {
  if (suffix.empty()) return file;
  const size_t slash = file.find_last_of('/');
  const size_t dot = file.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) ||
      dot == (slash == std::string::npos ? 0 : slash + 1)) {
    return absl::StrCat(file, "-", suffix);
  }
  return absl::StrCat(file.substr(0, dot), "-", suffix, file.substr(dot));
}

absl::StatusOr<std::vector<std::string>> WriteCharts(
    const std::string& file,
    const std::vector<std::pair<std::string, LineChart>>& charts) {
  std::vector<std::string> written;
  for (const auto& [suffix, chart] : charts) {
    const std::string path = ChartFileName(file, suffix);
    absl::StatusOr<std::string> svg = RenderSvg(chart);
    if (!svg.ok()) {
      return absl::Status(svg.status().code(),
                          absl::StrCat(path, ": ", svg.status().message()));
    }
    if (absl::Status s = WriteFileAtomically(path, *svg); !s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("cannot write the chart ", path, ": ",
                                       s.message()));
    }
    written.push_back(path);
  }
  return written;
}

absl::StatusOr<LineChart> ChartFromJson(const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("a chart must be a JSON object");
  }
  LineChart c;
  for (auto [key, field] : {std::pair{"title", &c.title},
                            std::pair{"x_label", &c.x_label},
                            std::pair{"y_label", &c.y_label}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("'", key, "' must be a string"));
    }
    *field = j[key].get<std::string>();
  }
  if (!j.contains("series") || !j["series"].is_array()) {
    return absl::InvalidArgumentError("'series' must be an array");
  }
  auto numbers = [](const json& s, const char* key, size_t index,
                    std::vector<double>* out) -> absl::Status {
    if (!s.contains(key)) return absl::OkStatus();
    if (!s[key].is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat("series ", index, ": '", key, "' must be an array"));
    }
    for (const json& v : s[key]) {
      if (!v.is_number()) {
        return absl::InvalidArgumentError(
            absl::StrCat("series ", index, ": '", key, "' holds a non-number"));
      }
      out->push_back(v.get<double>());
    }
    return absl::OkStatus();
  };
  for (size_t i = 0; i < j["series"].size(); ++i) {
    const json& s = j["series"][i];
    if (!s.is_object() || !s.contains("name") || !s["name"].is_string() ||
        !s.contains("x") || !s.contains("y")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "series ", i, " must be an object with 'name', 'x' and 'y'"));
    }
    Series out{s["name"].get<std::string>(), {}, {}, {}};
    std::vector<double> x, y;
    if (absl::Status st = numbers(s, "x", i, &x); !st.ok()) return st;
    if (absl::Status st = numbers(s, "y", i, &y); !st.ok()) return st;
    if (absl::Status st = numbers(s, "error", i, &out.error); !st.ok()) return st;
    if (x.size() != y.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "series ", i, " ('", out.name, "'): ", x.size(), " x values but ",
          y.size(), " y values"));
    }
    for (size_t k = 0; k < x.size(); ++k) out.points.emplace_back(x[k], y[k]);
    c.series.push_back(std::move(out));
  }
  return c;
}

}  // namespace ldpgraph::plot
