#include "common/plot/svg_chart.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace ldpgraph::plot {
namespace {

LineChart TwoSeries() {
  LineChart c;
  c.title = "accuracy <under> attack";
  c.x_label = "malicious fraction";
  c.y_label = "accuracy";
  c.series.push_back({"no defence", {{0, 0.8}, {0.1, 0.6}, {0.2, 0.41}}, {}});
  c.series.push_back({"screen", {{0, 0.79}, {0.1, 0.77}, {0.2, 0.75}},
                      {0.01, 0.02, 0.0}});
  return c;
}

int Count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(NiceTicksTest, CoversTheRangeWithRoundSteps) {
  const auto t = NiceTicks(0.41, 0.8, 6);
  ASSERT_GE(t.size(), 3u);
  EXPECT_LE(t.front(), 0.41);
  EXPECT_GE(t.back(), 0.8);
  const double step = t[1] - t[0];
  EXPECT_NEAR(step, 0.1, 1e-12);  // 0.39 / 6 = 0.065, rounded up to 0.1
  EXPECT_NEAR(t.front(), 0.4, 1e-12);
  EXPECT_NEAR(t.back(), 0.8, 1e-12);
  for (size_t i = 1; i < t.size(); ++i) EXPECT_NEAR(t[i] - t[i - 1], step, 1e-12);
}

TEST(NiceTicksTest, ADegenerateRangeStillGetsTwoTicks) {
  const auto t = NiceTicks(3, 3, 5);
  ASSERT_GE(t.size(), 2u);
  EXPECT_LE(t.front(), 3);
  EXPECT_GE(t.back(), 3);
  EXPECT_LT(t.front(), t.back());
}

TEST(RenderSvgTest, DrawsEverySeriesPointBarAndLegend) {
  auto svg = RenderSvg(TwoSeries());
  ASSERT_TRUE(svg.ok()) << svg.status();
  EXPECT_TRUE(absl::StartsWith(*svg, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
  EXPECT_TRUE(absl::EndsWith(*svg, "</svg>\n"));
  EXPECT_EQ(Count(*svg, "<polyline"), 2);
  EXPECT_EQ(Count(*svg, "<circle"), 6);
  EXPECT_TRUE(absl::StrContains(*svg, ">no defence</text>"));
  EXPECT_TRUE(absl::StrContains(*svg, ">screen</text>"));
  // The title is escaped, not markup.
  EXPECT_TRUE(absl::StrContains(*svg, "accuracy &lt;under&gt; attack"));
  // Tick labels at the step's precision.
  EXPECT_TRUE(absl::StrContains(*svg, ">0.10</text>"));
  // Deterministic: the same chart, the same bytes.
  EXPECT_EQ(*svg, *RenderSvg(TwoSeries()));
}

TEST(RenderSvgTest, HigherValuesAreDrawnHigher) {
  LineChart c;
  c.series.push_back({"up", {{0, 0}, {1, 1}}, {}});
  auto svg = RenderSvg(c);
  ASSERT_TRUE(svg.ok());
  // The polyline's second point (y = 1) has a smaller pixel y than its first.
  const size_t p = svg->find("<polyline points=\"");
  ASSERT_NE(p, std::string::npos);
  double x0, y0, x1, y1;
  ASSERT_EQ(sscanf(svg->c_str() + p + 18, "%lf,%lf %lf,%lf", &x0, &y0, &x1, &y1), 4);
  EXPECT_LT(x0, x1);
  EXPECT_LT(y1, y0);
}

TEST(RenderSvgTest, RejectsWhatItCannotDraw) {
  LineChart empty;
  EXPECT_EQ(RenderSvg(empty).status().code(), absl::StatusCode::kInvalidArgument);
  LineChart c = TwoSeries();
  c.series[1].error.pop_back();
  auto s = RenderSvg(c).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "'screen'")) << s;
  c = TwoSeries();
  c.series[0].points[1].second = NAN;
  EXPECT_TRUE(absl::StrContains(RenderSvg(c).status().message(), "point 1"));
  c = TwoSeries();
  c.series[1].error[0] = -1;
  EXPECT_EQ(RenderSvg(c).status().code(), absl::StatusCode::kInvalidArgument);
  c = TwoSeries();
  c.width = 100;
  EXPECT_EQ(RenderSvg(c).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ChartFromJsonTest, ReadsWhatScriptsWrite) {
  auto c = ChartFromJson(R"({"title": "t", "x_label": "x", "y_label": "y",
      "series": [{"name": "a", "x": [0, 1], "y": [2, 3], "error": [0.1, 0.2]},
                 {"name": "b", "x": [0], "y": [1]}]})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->title, "t");
  ASSERT_EQ(c->series.size(), 2u);
  EXPECT_EQ(c->series[0].points[1], (std::pair<double, double>{1, 3}));
  EXPECT_EQ(c->series[0].error[1], 0.2);
  EXPECT_TRUE(c->series[1].error.empty());
}

TEST(ChartFromJsonTest, SaysWhatIsWrong) {
  EXPECT_TRUE(absl::StrContains(ChartFromJson("[1]").status().message(), "object"));
  EXPECT_TRUE(absl::StrContains(ChartFromJson("{}").status().message(), "'series'"));
  auto s = ChartFromJson(R"({"series": [{"name": "a", "x": [0, 1], "y": [2]}]})");
  EXPECT_TRUE(absl::StrContains(s.status().message(), "2 x values but 1 y values"))
      << s.status();
  s = ChartFromJson(R"({"series": [{"name": "a", "x": ["0"], "y": [2]}]})");
  EXPECT_TRUE(absl::StrContains(s.status().message(), "non-number")) << s.status();
  s = ChartFromJson(R"({"title": 3, "series": []})");
  EXPECT_TRUE(absl::StrContains(s.status().message(), "'title'")) << s.status();
}

}  // namespace
}  // namespace ldpgraph::plot
