// Tests for `ldpgraph sample`: output format, estimator, reproducibility by
// seed, summaries, and a clear error for every kind of bad command line.
#include "server/ldpgraph/sample_command.h"

#include <cmath>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace ldpgraph::tool {
namespace {

using ::testing::HasSubstr;

struct SampleRun {
  int code;
  std::string out, err;
};

SampleRun Sample(std::vector<std::string> args) {
  std::ostringstream out, err;
  const int code = RunSample(args, out, err);
  return {code, out.str(), err.str()};
}

std::vector<std::vector<double>> Rows(const std::string& text) {
  std::vector<std::vector<double>> rows;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<double> row;
    for (absl::string_view cell : absl::StrSplit(line, ',')) {
      double v;
      EXPECT_TRUE(absl::SimpleAtod(cell, &v)) << line;
      row.push_back(v);
    }
    rows.push_back(row);
  }
  return rows;
}

TEST(SampleCommandTest, HdsPrintsDenseRowsWithKNonZeros) {
  SampleRun r = Sample({"--mechanism", "hds", "--epsilon", "1", "--k", "2",
                  "--input", "0.5,-0.2,1,0", "--count", "50", "--seed", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto rows = Rows(r.out);
  ASSERT_EQ(rows.size(), 50u);
  for (const auto& row : rows) {
    ASSERT_EQ(row.size(), 4u);
    int nonzero = 0;
    for (double v : row) nonzero += v != 0;
    EXPECT_LE(nonzero, 2);  // a sampled value can be 0 only by chance
  }
  EXPECT_THAT(r.err, HasSubstr("NOT differentially private"));
}

TEST(SampleCommandTest, SameSeedSameOutputSecureWithoutSeed) {
  std::vector<std::string> args = {"--mechanism", "laplace", "--epsilon", "2",
                                   "--input", "0.1,0.2", "--count", "5"};
  auto seeded = args;
  seeded.insert(seeded.end(), {"--seed", "9"});
  EXPECT_EQ(Sample(seeded).out, Sample(seeded).out);
  SampleRun a = Sample(args), b = Sample(args);
  ASSERT_EQ(a.code, 0);
  EXPECT_NE(a.out, b.out);
  EXPECT_EQ(a.err, "");  // no warning with the secure source
}

TEST(SampleCommandTest, MultibitRawIsSignsAndEstimateIsRectified) {
  SampleRun raw = Sample({"--mechanism", "multibit", "--epsilon", "1", "--m", "1",
                    "--input", "0,1,-1", "--count", "20", "--seed", "1"});
  ASSERT_EQ(raw.code, 0) << raw.err;
  for (const auto& row : Rows(raw.out)) {
    int nonzero = 0;
    for (double v : row) {
      EXPECT_TRUE(v == 0 || v == 1 || v == -1) << v;
      nonzero += v != 0;
    }
    EXPECT_EQ(nonzero, 1);
  }
  SampleRun est = Sample({"--mechanism", "multibit", "--epsilon", "1", "--m", "1",
                    "--input", "0,1,-1", "--count", "20", "--seed", "1",
                    "--estimate"});
  ASSERT_EQ(est.code, 0) << est.err;
  // Rectifier with d = 3, m = 1, range [-1, 1]: mid 0, A = 3 * 2 / 2 *
  // (e + 1)/(e - 1).
  const double a = 3.0 * (M_E + 1) / (M_E - 1);
  for (const auto& row : Rows(est.out)) {
    int nonzero = 0;
    for (double v : row) {
      if (v != 0) {
        EXPECT_NEAR(std::abs(v), a, 1e-9);
        ++nonzero;
      }
    }
    EXPECT_EQ(nonzero, 1);
  }
}

TEST(SampleCommandTest, OnebitEstimateIsUnbiasedOnAverage) {
  SampleRun r = Sample({"--mechanism", "onebit", "--epsilon", "2", "--alpha", "0",
                  "--beta", "1", "--input", "0.25,0.75", "--count", "100000",
                  "--seed", "5", "--estimate", "--summary"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("onebit, epsilon 2, d 2"));
  // Each row of the table: dim input mean expected variance expected z; the
  // z-scores must be small.
  std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u);
  for (int i = 2; i < 4; ++i) {
    std::vector<std::string> cells =
        absl::StrSplit(lines[i], ' ', absl::SkipEmpty());
    ASSERT_EQ(cells.size(), 7u) << lines[i];
    double z;
    ASSERT_TRUE(absl::SimpleAtod(cells[6], &z)) << lines[i];
    EXPECT_LT(std::abs(z), 5) << lines[i];
  }
}

TEST(SampleCommandTest, LabelRrOneHotAndEstimate) {
  SampleRun r = Sample({"--mechanism", "label-rr", "--epsilon", "1", "--classes",
                  "3", "--input", "2", "--count", "10", "--seed", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const auto& row : Rows(r.out)) {
    ASSERT_EQ(row.size(), 3u);
    EXPECT_EQ(row[0] + row[1] + row[2], 1.0);
  }
}

TEST(SampleCommandTest, EdgeRrRowHasNoSelfLoop) {
  SampleRun r = Sample({"--mechanism", "edge-rr", "--epsilon", "0.5", "--nodes",
                  "30", "--node", "4", "--input", "1,7,29", "--count", "20",
                  "--seed", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const auto& row : Rows(r.out)) {
    ASSERT_EQ(row.size(), 30u);
    EXPECT_EQ(row[4], 0.0);
  }
}

TEST(SampleCommandTest, HelpListsEveryMechanismWithItsPaper) {
  SampleRun r = Sample({"--help"});
  EXPECT_EQ(r.code, 0);
  for (const char* name : {"square-wave", "hds", "multibit", "onebit",
                           "piecewise", "laplace", "label-rr", "edge-rr"}) {
    EXPECT_THAT(r.out, HasSubstr(name));
  }
  for (const char* paper : {"PrivGE", "LPGNN", "Duchi", "ICDE'19", "CCS'17"}) {
    EXPECT_THAT(r.out, HasSubstr(paper));
  }
}

struct BadCase {
  std::vector<std::string> args;
  std::string message;
};

TEST(SampleCommandTest, UnknownMechanismListsTheSampledOnes) {
  // Edge substitution and Blink are mechanism names too, but not sampled
  // here: refused with the same list.
  for (std::string bad : {"gauss", "edge-blink", "edge-substitution",
                          "square_wave", ""}) {
    SampleRun r = Sample({"--mechanism", bad, "--epsilon", "1", "--input", "0"});
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err,
              "ldpgraph sample: unknown mechanism '" + bad +
                  "'; choose one of: square-wave, hds, multibit, onebit, "
                  "piecewise, laplace, label-rr, edge-rr\n");
  }
}

class SampleCommandErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(SampleCommandErrorTest, ExitsTwoWithClearMessage) {
  SampleRun r = Sample(GetParam().args);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    BadCommandLines, SampleCommandErrorTest,
    ::testing::Values(
        BadCase{{"--epsilon", "1", "--input", "0"}, "--mechanism is required"},
        BadCase{{"--mechanism", "hds", "--input", "0"}, "--epsilon is required"},
        BadCase{{"--mechanism", "hds", "--epsilon", "1"}, "--input is required"},
        BadCase{{"--mechanism", "gauss", "--epsilon", "1", "--input", "0"},
                "unknown mechanism 'gauss'"},
        BadCase{{"--mechanism", "hds", "--epsilon", "0", "--input", "0"},
                "epsilon must be finite and > 0, got 0"},
        BadCase{{"--mechanism", "hds", "--epsilon", "-1", "--input", "0"},
                "epsilon must be finite and > 0, got -1"},
        BadCase{{"--mechanism", "hds", "--epsilon", "1", "--k", "3", "--input",
                 "0,1"},
                "must be in 1..d = 1..2, got 3"},
        BadCase{{"--mechanism", "hds", "--epsilon", "1", "--alpha", "1",
                 "--beta", "1", "--input", "0"},
                "alpha < beta"},
        BadCase{{"--mechanism", "square-wave", "--epsilon", "1", "--input",
                 "0,1"},
                "d must be 1"},
        BadCase{{"--mechanism", "hds", "--epsilon", "1", "--input", "0,x"},
                "value 2 ('x') is not a finite number"},
        BadCase{{"--mechanism", "hds", "--epsilon", "1", "--input", "0",
                 "--count", "0"},
                "--count must be >= 1"},
        BadCase{{"--mechanism", "hds", "--epsilon", "1", "--input", "0",
                 "--k", "1", "--m", "1"},
                "give --k or --m, not both"},
        BadCase{{"--mechanism", "hds", "--epsilon", "1", "--input", "0",
                 "--bogus"},
                "unknown flag --bogus"},
        BadCase{{"--mechanism", "label-rr", "--epsilon", "1", "--classes", "3",
                 "--input", "3"},
                "label 3 is out of range [0, 3)"},
        BadCase{{"--mechanism", "label-rr", "--epsilon", "1", "--classes", "1",
                 "--input", "0"},
                "needs >= 2 classes"},
        BadCase{{"--mechanism", "edge-rr", "--epsilon", "1", "--nodes", "5",
                 "--node", "1", "--input", "1"},
                "is the node itself"},
        BadCase{{"--mechanism", "edge-rr", "--epsilon", "1", "--input", "1"},
                "edge-rr needs --nodes"},
        BadCase{{"--mechanism", "edge-rr", "--epsilon", "1", "--nodes",
                 "20000000", "--node", "0", "--input", "1"},
                "2 <= N <= 10000000"}));

}  // namespace
}  // namespace ldpgraph::tool
