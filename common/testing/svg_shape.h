// Tests only: a minimal reading of the SVG documents common/plot renders,
// enough to check that a command's --plot wrote a well-formed chart: one
// root <svg> element, every element a complete tag, and what the chart
// draws (its polylines and its text).
#pragma once

#include <string>
#include <vector>

namespace ldpgraph::testing {

struct SvgShape {
  bool well_formed = false;  // one root <svg>...</svg>, every tag closed
  int polylines = 0;         // one per series
  int dashed = 0;            // reference lines and their legend samples
  std::vector<std::string> texts;  // the content of every <text> element
};

// Reads svg. well_formed is false (and the rest may be partial) when the
// document does not start with "<svg " and end with "</svg>", holds another
// <svg>, a tag without its '>', a <text> without its </text>, or a raw
// '<' or '&' that is not markup or an entity.
inline SvgShape ReadSvgShape(const std::string& svg) {
  SvgShape out;
  const std::string close = "</svg>\n";
  if (svg.rfind("<svg ", 0) != 0 || svg.size() < close.size() ||
      svg.compare(svg.size() - close.size(), close.size(), close) != 0 ||
      svg.find("<svg", 1) != std::string::npos) {
    return out;
  }
  size_t p = 0;
  while ((p = svg.find('<', p)) != std::string::npos) {
    const size_t end = svg.find('>', p);
    if (end == std::string::npos) return out;
    const std::string tag = svg.substr(p, end - p + 1);
    if (tag.rfind("<polyline ", 0) == 0) ++out.polylines;
    if (tag.find("stroke-dasharray") != std::string::npos) ++out.dashed;
    p = end + 1;
    if (tag.rfind("<text", 0) == 0 && tag.back() == '>' && tag[tag.size() - 2] != '/') {
      const size_t text_end = svg.find("</text>", p);
      if (text_end == std::string::npos) return out;
      const std::string text = svg.substr(p, text_end - p);
      if (text.find('<') != std::string::npos) return out;
      for (size_t a = text.find('&'); a != std::string::npos; a = text.find('&', a + 1)) {
        if (text.find(';', a) == std::string::npos) return out;
      }
      out.texts.push_back(text);
      p = text_end + 7;
    }
  }
  out.well_formed = true;
  return out;
}

}  // namespace ldpgraph::testing
