#include "common/plot/svg_chart.h"

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/testing/svg_shape.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::plot {
namespace {

LineChart TwoSeries() {
  LineChart c;
  c.title = "accuracy <under> attack";
  c.x_label = "malicious fraction";
  c.y_label = "accuracy";
  c.series.push_back({"no defence", {{0, 0.8}, {0.1, 0.6}, {0.2, 0.41}}, {}, {}});
  c.series.push_back({"screen", {{0, 0.79}, {0.1, 0.77}, {0.2, 0.75}},
                      {0.01, 0.02, 0.0}, {}});
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
  c.series.push_back({"up", {{0, 0}, {1, 1}}, {}, {}});
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

TEST(LogTicksTest, OneTwoFiveWithinTwoDecades) {
  EXPECT_EQ(LogTicks(1, 8), (std::vector<double>{1, 2, 5, 10}));
  const auto t = LogTicks(0.1, 8);
  ASSERT_EQ(t.size(), 7u);
  EXPECT_NEAR(t.front(), 0.1, 1e-12);
  EXPECT_NEAR(t.back(), 10, 1e-12);
  EXPECT_NEAR(t[3], 1, 1e-12);
}

TEST(LogTicksTest, PowersOfTenOverMoreDecadesAndTwoForOneValue) {
  const auto t = LogTicks(0.01, 1000);
  ASSERT_EQ(t.size(), 6u);
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_NEAR(t[i], std::pow(10.0, static_cast<int>(i) - 2), 1e-9);
  }
  const auto one = LogTicks(3, 3);
  ASSERT_GE(one.size(), 2u);
  EXPECT_LE(one.front(), 3);
  EXPECT_GE(one.back(), 3);
}

// A chart with every addition: log x, point labels, reference lines.
LineChart Budgets() {
  LineChart c;
  c.title = "gcn";
  c.x_label = "edge budget epsilon_e";
  c.y_label = "accuracy";
  c.log_x = true;
  c.series.push_back(
      {"rr", {{1, 0.3}, {2, 0.4}, {9, 0.8}}, {0.01, 0.02, 0.03}, {"1", "2", "<9>"}});
  c.references.push_back({"true graph", 0.85, 0.01});
  c.references.push_back({"mlp", 0.6, 0});
  return c;
}

TEST(RenderSvgTest, ReferencesAreDashedLinesInTheLegendAndTheRange) {
  auto svg = RenderSvg(Budgets());
  ASSERT_TRUE(svg.ok()) << svg.status();
  EXPECT_EQ(Count(*svg, "<polyline"), 1);
  EXPECT_EQ(Count(*svg, "<path d=\"M"), 2);
  // Two dashed references plus their two legend samples.
  EXPECT_EQ(Count(*svg, "stroke-dasharray"), 4);
  EXPECT_EQ(Count(*svg, "fill-opacity"), 1);  // the band of the true graph
  EXPECT_TRUE(absl::StrContains(*svg, ">true graph</text>"));
  EXPECT_TRUE(absl::StrContains(*svg, ">mlp</text>"));
  // The reference's 0.85 + 0.01 lies inside the y axis: the top tick >= 0.86.
  EXPECT_TRUE(absl::StrContains(*svg, ">0.9</text>")) << *svg;
  // Log ticks labelled as numbers; labels beside points, escaped.
  EXPECT_TRUE(absl::StrContains(*svg, ">5</text>"));
  EXPECT_TRUE(absl::StrContains(*svg, ">10</text>"));
  EXPECT_TRUE(absl::StrContains(*svg, ">&lt;9&gt;</text>"));
  // The label of the point at the left edge lies right of it; near the
  // right edge, left of it.
  EXPECT_TRUE(absl::StrContains(*svg, "fill=\"#0072B2\">1</text>"));
  EXPECT_TRUE(absl::StrContains(*svg, "text-anchor=\"end\">&lt;9&gt;</text>"));
  EXPECT_EQ(*svg, *RenderSvg(Budgets()));
}

TEST(RenderSvgTest, LogScaleSpacesDoublingsEvenly) {
  LineChart c;
  c.log_x = true;
  c.series.push_back({"s", {{1, 0}, {2, 0}, {4, 0}}, {}, {}});
  auto svg = RenderSvg(c);
  ASSERT_TRUE(svg.ok());
  const size_t p = svg->find("<polyline points=\"");
  double x0, y0, x1, y1, x2, y2;
  ASSERT_EQ(sscanf(svg->c_str() + p + 18, "%lf,%lf %lf,%lf %lf,%lf", &x0, &y0,
                   &x1, &y1, &x2, &y2),
            6);
  EXPECT_NEAR(x1 - x0, x2 - x1, 0.11);
}

TEST(RenderSvgTest, ManyEntriesTakeTwoLegendColumns) {
  LineChart c;
  for (int i = 0; i < 6; ++i) {
    c.series.push_back({absl::StrCat("s", i), {{0, i}, {1, i}}, {}, {}});
  }
  auto svg = RenderSvg(c);
  ASSERT_TRUE(svg.ok());
  // Entries 0 and 3 share a row, in two columns.
  const size_t a = svg->find(">s0</text>"), b = svg->find(">s3</text>");
  ASSERT_NE(a, std::string::npos);
  ASSERT_NE(b, std::string::npos);
  auto y_of = [&](size_t end) {
    const size_t p = svg->rfind(" y=\"", end);
    return std::stod(svg->substr(p + 4));
  };
  EXPECT_EQ(y_of(a), y_of(b));
}

TEST(RenderSvgTest, AFixedColourOverridesThePosition) {
  LineChart c = Budgets();
  auto svg = RenderSvg(c);
  ASSERT_TRUE(svg.ok());
  EXPECT_TRUE(absl::StrContains(*svg, "stroke=\"#0072B2\" stroke-width=\"2\"/>"));
  c.series[0].colour = 2 + 8;  // cycled
  c.references[0].colour = 6;
  svg = RenderSvg(c);
  ASSERT_TRUE(svg.ok());
  EXPECT_TRUE(absl::StrContains(*svg, "fill=\"none\" stroke=\"#009E73\""));
  EXPECT_FALSE(absl::StrContains(*svg, "#0072B2"));
  EXPECT_TRUE(absl::StrContains(*svg, "stroke=\"#000000\" stroke-width=\"2\" "
                                      "stroke-dasharray"));
}

TEST(RenderSvgTest, RejectsBadAdditions) {
  LineChart c = Budgets();
  c.series[0].labels.pop_back();
  auto s = RenderSvg(c).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "2 labels for 3 points")) << s;
  c = Budgets();
  c.series[0].points[0].first = 0;
  s = RenderSvg(c).status();
  EXPECT_TRUE(absl::StrContains(s.message(), "log scale")) << s;
  c = Budgets();
  c.references[1].y = NAN;
  s = RenderSvg(c).status();
  EXPECT_TRUE(absl::StrContains(s.message(), "reference line 'mlp'")) << s;
  c = Budgets();
  c.references[0].error = -0.1;
  EXPECT_EQ(RenderSvg(c).status().code(), absl::StatusCode::kInvalidArgument);
  c = Budgets();
  c.series.clear();  // references alone have no x range
  EXPECT_EQ(RenderSvg(c).status().code(), absl::StatusCode::kInvalidArgument);
  c = Budgets();
  c.series[0].points.clear();
  c.series[0].error.clear();
  c.series[0].labels.clear();
  EXPECT_TRUE(absl::StrContains(RenderSvg(c).status().message(), "no points"));
}

TEST(SvgShapeTest, ReadsRenderedChartsAndRejectsBrokenOnes) {
  const std::string svg = *RenderSvg(Budgets());
  const testing::SvgShape shape = testing::ReadSvgShape(svg);
  EXPECT_TRUE(shape.well_formed);
  EXPECT_EQ(shape.polylines, 1);
  EXPECT_EQ(shape.dashed, 4);
  EXPECT_THAT(shape.texts, ::testing::Contains("edge budget epsilon_e"));
  EXPECT_FALSE(testing::ReadSvgShape(svg.substr(0, svg.size() - 3)).well_formed);
  EXPECT_FALSE(testing::ReadSvgShape("<svg ><text>a < b</text></svg>\n").well_formed);
  EXPECT_FALSE(testing::ReadSvgShape("<svg ><text>a & b</text></svg>\n").well_formed);
  EXPECT_FALSE(testing::ReadSvgShape("<svg ><text>a</svg>\n").well_formed);
  EXPECT_FALSE(testing::ReadSvgShape("<svg ><svg ></svg>\n").well_formed);
  EXPECT_TRUE(testing::ReadSvgShape("<svg ><text>a &amp; b</text></svg>\n").well_formed);
}

TEST(ChartFileNameTest, SuffixGoesBeforeTheExtension) {
  EXPECT_EQ(ChartFileName("out.svg", ""), "out.svg");
  EXPECT_EQ(ChartFileName("out.svg", "gcn"), "out-gcn.svg");
  EXPECT_EQ(ChartFileName("a.b/out", "gcn"), "a.b/out-gcn");
  EXPECT_EQ(ChartFileName("dir/.svg", "x"), "dir/.svg-x");
}

TEST(WriteChartsTest, WritesEveryChartOrNamesTheFile) {
  const std::string dir = ::testing::TempDir() + "/write_charts_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto files = WriteCharts(dir + "/c.svg", {{"", Budgets()}, {"b", TwoSeries()}});
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(*files, (std::vector<std::string>{dir + "/c.svg", dir + "/c-b.svg"}));
  auto text = ReadFileToString(dir + "/c-b.svg");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, *RenderSvg(TwoSeries()));
  auto bad = WriteCharts(dir + "/missing/c.svg", {{"", Budgets()}});
  EXPECT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), dir + "/missing/c.svg"))
      << bad.status();
  LineChart empty;
  bad = WriteCharts(dir + "/e.svg", {{"", empty}});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), dir + "/e.svg"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/e.svg"));
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
