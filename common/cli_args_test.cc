// Tests for the tools' flag parser: every malformed command line gets an
// error naming the flag.
#include "common/cli_args.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/status_macros.h"
#include "common/testing/temp_folder.h"

namespace ldpgraph {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<CliArgs> Parse(std::vector<std::string> args) {
  return CliArgs::Parse(args, {"epsilon", "input", "count"}, {"estimate"});
}

TEST(CliArgsTest, ParsesSpaceAndEqualsForms) {
  auto a = Parse({"--epsilon", "0.5", "--input=1,2,-3.5", "--estimate"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a->GetDouble("epsilon").value(), 0.5);
  EXPECT_EQ(*a->GetDoubleList("input").value(),
            (std::vector<double>{1, 2, -3.5}));
  EXPECT_TRUE(a->Flag("estimate"));
  EXPECT_FALSE(a->Has("count"));
  EXPECT_FALSE(a->GetUint("count").value().has_value());
}

TEST(CliArgsTest, UnknownFlag) {
  auto a = Parse({"--epsilom", "1"});
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status().message(), HasSubstr("unknown flag --epsilom"));
}

TEST(CliArgsTest, MissingValue) {
  auto a = Parse({"--epsilon"});
  EXPECT_THAT(a.status().message(), HasSubstr("--epsilon needs a value"));
}

TEST(CliArgsTest, RepeatedFlag) {
  auto a = Parse({"--epsilon", "1", "--epsilon", "2"});
  EXPECT_THAT(a.status().message(), HasSubstr("--epsilon given more than once"));
}

TEST(CliArgsTest, PositionalArgument) {
  auto a = Parse({"epsilon"});
  EXPECT_THAT(a.status().message(), HasSubstr("unexpected argument 'epsilon'"));
}

TEST(CliArgsTest, BoolFlagWithValue) {
  auto a = Parse({"--estimate=yes"});
  EXPECT_THAT(a.status().message(), HasSubstr("--estimate takes no value"));
}

TEST(CliArgsTest, BadNumber) {
  auto a = Parse({"--epsilon", "one"});
  ASSERT_TRUE(a.ok());
  auto v = a->GetDouble("epsilon");
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(v.status().message(),
              HasSubstr("--epsilon must be a finite number, got 'one'"));
}

TEST(CliArgsTest, NonFiniteNumber) {
  auto a = Parse({"--epsilon", "inf"});
  ASSERT_TRUE(a.ok());
  EXPECT_THAT(a->GetDouble("epsilon").status().message(),
              HasSubstr("must be a finite number"));
}

TEST(CliArgsTest, NegativeCount) {
  auto a = Parse({"--count", "-3"});
  ASSERT_TRUE(a.ok());
  EXPECT_THAT(a->GetUint("count").status().message(),
              HasSubstr("--count must be a non-negative integer, got '-3'"));
}

TEST(CliArgsTest, BadListEntryNamesItsPosition) {
  auto a = Parse({"--input", "1,2,x,4"});
  ASSERT_TRUE(a.ok());
  auto v = a->GetDoubleList("input");
  EXPECT_THAT(v.status().message(),
              HasSubstr("--input: value 3 ('x') is not a finite number"));
}

TEST(CliArgsTest, NanInList) {
  auto a = Parse({"--input", "1,nan"});
  ASSERT_TRUE(a.ok());
  EXPECT_THAT(a->GetDoubleList("input").status().message(),
              HasSubstr("value 2 ('nan') is not a finite number"));
}

TEST(SplitHostPortTest, SplitsAtTheLastColon) {
  auto a = SplitHostPort("127.0.0.1:9090");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->first, "127.0.0.1");
  EXPECT_EQ(a->second, 9090);
  auto b = SplitHostPort("[::1]:7443");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->first, "[::1]");
  EXPECT_EQ(b->second, 7443);
  EXPECT_EQ(SplitHostPort("localhost").status().message(),
            "expected HOST:PORT, got 'localhost'");
  EXPECT_FALSE(SplitHostPort("host:http").ok());
}

}  // namespace
}  // namespace ldpgraph

namespace ldpgraph {
namespace {

TEST(ParseNodeRangeTest, AcceptsAToBAndNamesTheFlagOtherwise) {
  auto r = ParseNodeRange("10-20", "nodes");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->first, 10u);
  EXPECT_EQ(r->second, 20u);
  for (const char* bad : {"20-10", "5-5", "1-2-3", "a-3", "7", "-3", ""}) {
    auto s = ParseNodeRange(bad, "nodes");
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(s.status().message(),
              absl::StrCat("--nodes must be A-B with A < B (nodes A..B-1), got '",
                           bad, "'"));
  }
}

// StartBinary: --help prints the usage and exits 0; a flag that does not
// parse prints the program, the error and where help is, and exits 2;
// anything else hands back what the parser returned.
absl::StatusOr<int> ParseCount(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(CliArgs a, CliArgs::Parse(args, {"count"}, {}));
  ASSIGN_OR_RETURN(std::optional<int64_t> count, a.GetInt("count"));
  return static_cast<int>(count.value_or(1));
}

std::optional<int> Start(std::vector<std::string> words, int* exit_code) {
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return StartBinary("prog", "usage: prog\n", static_cast<int>(argv.size()),
                     argv.data(), ParseCount, exit_code);
}

TEST(StartBinaryTest, HelpBadFlagsAndGoodFlags) {
  int code = -1;
  testing::internal::CaptureStdout();
  EXPECT_FALSE(Start({"prog", "--help"}, &code).has_value());
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "usage: prog\n");
  EXPECT_EQ(code, 0);

  code = -1;
  testing::internal::CaptureStderr();
  EXPECT_FALSE(Start({"prog", "--count", "x"}, &code).has_value());
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("prog: "));
  EXPECT_THAT(err, HasSubstr("--count"));
  EXPECT_THAT(err, HasSubstr("Run prog --help for the flags."));
  EXPECT_EQ(code, 2);

  code = -1;
  std::optional<int> count = Start({"prog", "--count", "7"}, &code);
  ASSERT_TRUE(count.has_value());
  EXPECT_EQ(*count, 7);
  EXPECT_EQ(Start({"prog"}, &code).value_or(-1), 1);
}

}  // namespace
}  // namespace ldpgraph
