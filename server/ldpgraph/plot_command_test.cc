#include "server/ldpgraph/plot_command.h"

#include <filesystem>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "common/files.h"
#include "gtest/gtest.h"

namespace ldpgraph::tool {
namespace {

class PlotCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  int Run(const std::vector<std::string>& args) {
    out_.str("");
    err_.str("");
    return RunPlot(args, out_, err_);
  }
  std::filesystem::path dir_;
  std::ostringstream out_, err_;
};

TEST_F(PlotCommandTest, WritesTheSvg) {
  const std::string in = dir_ / "c.json", svg = dir_ / "c.svg";
  ASSERT_TRUE(WriteFileAtomically(
                  in, R"({"title": "T", "series": [{"name": "a", "x": [0, 1], "y": [1, 2]}]})")
                  .ok());
  ASSERT_EQ(Run({"--input", in, "--output", svg}), 0) << err_.str();
  auto text = ReadFileToString(svg);
  ASSERT_TRUE(text.ok());
  EXPECT_TRUE(absl::StrContains(*text, "<polyline"));
  EXPECT_TRUE(absl::StrContains(*text, ">T</text>"));
}

TEST_F(PlotCommandTest, NamesTheBrokenInput) {
  const std::string in = dir_ / "bad.json";
  ASSERT_TRUE(WriteFileAtomically(in, R"({"series": [{"name": "a", "x": [0], "y": []}]})").ok());
  EXPECT_EQ(Run({"--input", in, "--output", dir_ / "x.svg"}), 1);
  EXPECT_TRUE(absl::StrContains(err_.str(), in)) << err_.str();
  EXPECT_TRUE(absl::StrContains(err_.str(), "1 x values but 0 y values")) << err_.str();
  EXPECT_FALSE(std::filesystem::exists(dir_ / "x.svg"));
  EXPECT_EQ(Run({"--input", (dir_ / "missing.json").string(), "--output", dir_ / "x.svg"}), 1);
}

TEST_F(PlotCommandTest, UsageErrors) {
  EXPECT_EQ(Run({"--input", "a.json"}), 2);
  EXPECT_TRUE(absl::StrContains(err_.str(), "--output")) << err_.str();
  EXPECT_EQ(Run({"--bogus", "1"}), 2);
  EXPECT_EQ(Run({"--help"}), 0);
  EXPECT_TRUE(absl::StrContains(out_.str(), "Usage: ldpgraph plot"));
}

}  // namespace
}  // namespace ldpgraph::tool
