// Tests for `ldpgraph generate`: flags to files that load back, byte-identical
// output by seed, the --json summary, progress for big graphs, a clear error
// naming the flag for each kind of bad command line, and the refusal to
// overwrite a non-empty folder without --force.
#include "server/ldpgraph/generate_command.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/dataset/dataset.h"
#include "common/dataset/generator.h"

namespace ldpgraph::tool {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

struct GenerateRun {
  int code;
  std::string out, err;
};

GenerateRun Generate(std::vector<std::string> args) {
  std::ostringstream out, err;
  const int code = RunGenerate(args, out, err);
  return {code, out.str(), err.str()};
}

// A fresh path under the test temp folder, removed at the end of the test.
class GenerateCommandTest : public ::testing::Test {
 protected:
  std::string Dir(const std::string& name) {
    const std::string path = absl::StrCat(
        ::testing::TempDir(), "/generate_command_test_", getpid(), "_",
        ::testing::UnitTest::GetInstance()->current_test_info()->name(), "_",
        name);
    fs::remove_all(path);
    made_.push_back(path);
    return path;
  }
  void TearDown() override {
    for (const auto& p : made_) fs::remove_all(p);
  }

 private:
  std::vector<std::string> made_;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> SmallArgs(const std::string& out, int seed = 5) {
  return {"--nodes",    "300", "--classes",    "3",
          "--features", "20",  "--avg-degree", "6",
          "--homophily", "0.7", "--seed",      std::to_string(seed),
          "--out",      out};
}

TEST_F(GenerateCommandTest, WritesADatasetThatLoadsBack) {
  const std::string dir = Dir("small");
  GenerateRun r = Generate(SmallArgs(dir));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("wrote " + dir));
  EXPECT_THAT(r.out, HasSubstr("300 nodes, 900 edges (homophily 0.700"));
  EXPECT_EQ(r.err, "");  // no progress below 100,000 nodes
  auto d = LoadDataset(dir);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->meta.name, "generated");
  EXPECT_EQ(d->meta.source, "ldpgraph generate");
  EXPECT_EQ(d->meta.nodes, 300u);
  EXPECT_EQ(d->meta.edges, 900u);
  EXPECT_EQ(d->meta.features, 20u);
  EXPECT_EQ(d->meta.classes, 3);
  ASSERT_TRUE(d->meta.feature_range.has_value());
  EXPECT_EQ(*d->meta.feature_range, std::make_pair(0.0, 1.0));
  EXPECT_EQ(d->graph.num_edges(), 900u);
  EXPECT_NEAR(EdgeHomophily(d->graph, d->labels), 0.7, 1e-9);
  auto gen = nlohmann::json::parse(d->meta.generator_json);
  EXPECT_EQ(gen["seed"], 5);
  EXPECT_EQ(gen["nodes"], 300);
  EXPECT_EQ(gen["homophily"], 0.7);
  EXPECT_EQ(gen["features_per_node"], 5);

  // The files hold exactly what the generator makes in memory.
  GeneratorOptions o = DefaultGeneratorOptions();
  o.nodes = 300;
  o.classes = 3;
  o.features = 20;
  o.avg_degree = 6;
  o.homophily = 0.7;
  o.seed = 5;
  auto mem = GenerateDataset(o);
  ASSERT_TRUE(mem.ok());
  EXPECT_EQ(d->graph.Edges(), mem->graph.Edges());
  EXPECT_EQ(d->labels, mem->labels);
  EXPECT_EQ(d->features.offsets, mem->features.offsets);
  EXPECT_EQ(d->features.indices, mem->features.indices);
  EXPECT_EQ(d->features.values, mem->features.values);
}

TEST_F(GenerateCommandTest, SameSeedByteIdenticalFilesOtherSeedDifferent) {
  const std::string a = Dir("a"), b = Dir("b"), c = Dir("c");
  ASSERT_EQ(Generate(SmallArgs(a)).code, 0);
  ASSERT_EQ(Generate(SmallArgs(b)).code, 0);
  ASSERT_EQ(Generate(SmallArgs(c, 6)).code, 0);
  for (const char* file : {"meta.json", "edges.txt", "nodes.svm"}) {
    const std::string fa = ReadAll(a + "/" + file);
    EXPECT_FALSE(fa.empty()) << file;
    EXPECT_EQ(fa, ReadAll(b + "/" + file)) << file;
    EXPECT_NE(fa, ReadAll(c + "/" + file)) << file;
  }
}

TEST_F(GenerateCommandTest, OnlyOutUsesTheDefaults) {
  const std::string dir = Dir("defaults");
  GenerateRun r = Generate({"--out", dir});
  ASSERT_EQ(r.code, 0) << r.err;
  auto d = LoadDataset(dir);
  ASSERT_TRUE(d.ok()) << d.status();
  const GeneratorOptions o = DefaultGeneratorOptions();
  EXPECT_EQ(d->meta.nodes, o.nodes);
  EXPECT_EQ(d->meta.classes, o.classes);
  EXPECT_EQ(d->meta.features, size_t(o.features));
  EXPECT_EQ(d->meta.edges, size_t(o.nodes * o.avg_degree / 2));
}

TEST_F(GenerateCommandTest, JsonSummary) {
  const std::string dir = Dir("json");
  auto args = SmallArgs(dir);
  args.push_back("--json");
  GenerateRun r = Generate(args);
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  auto j = nlohmann::json::parse(r.out);
  for (const char* key :
       {"out", "nodes", "edges", "classes", "features", "homophily",
        "mean_degree", "max_degree", "nnz", "generate_seconds",
        "write_seconds", "seconds"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["out"], dir);
  EXPECT_EQ(j["nodes"], 300);
  EXPECT_EQ(j["edges"], 900);
  EXPECT_DOUBLE_EQ(j["homophily"].get<double>(), 0.7);
  EXPECT_DOUBLE_EQ(j["mean_degree"].get<double>(), 6.0);
  EXPECT_GT(j["max_degree"].get<int>(), 6);
  EXPECT_GT(j["nnz"].get<int>(), 0);
}

TEST_F(GenerateCommandTest, ProgressOnStderrForBigGraphs) {
  const std::string dir = Dir("big");
  GenerateRun r = Generate({"--nodes", "100000", "--avg-degree", "2",
                            "--features", "4", "--out", dir});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* phase : {"classes", "edges", "graph", "features", "write"}) {
    EXPECT_THAT(r.err, HasSubstr(phase));
  }
  EXPECT_THAT(r.out, HasSubstr("100000 nodes, 100000 edges"));
}

TEST_F(GenerateCommandTest, Help) {
  GenerateRun r = Generate({"--help"});
  EXPECT_EQ(r.code, 0);
  for (const char* flag :
       {"--out", "--nodes", "--classes", "--features", "--avg-degree",
        "--homophily", "--seed", "--degree-exponent", "--features-per-node",
        "--topic-weight", "--force", "--json", "stochastic block model"}) {
    EXPECT_THAT(r.out, HasSubstr(flag));
  }
  EXPECT_THAT(r.out, HasSubstr("(default 3000)"));
}

TEST_F(GenerateCommandTest, BadFlagsExitTwoNamingTheFlag) {
  const std::string dir = Dir("bad");
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{"--nodes", "100"}, "--out is required"},
      {{"--out", dir, "--bogus", "1"}, "bogus"},
      {{"--out", dir, "--nodes", "abc"}, "--nodes"},
      {{"--out", dir, "--nodes", "-5"}, "--nodes"},
      {{"--out", dir, "--nodes", "5"}, "--nodes must be >= 2 * classes"},
      {{"--out", dir, "--classes", "1"}, "--classes must be >= 2"},
      {{"--out", dir, "--classes", "99999999999"}, "--classes out of range"},
      {{"--out", dir, "--features", "0"}, "--features must be >= 1"},
      {{"--out", dir, "--avg-degree", "nan"}, "--avg-degree"},
      {{"--out", dir, "--avg-degree", "3000"}, "--avg-degree must be > 0"},
      {{"--out", dir, "--homophily", "1.5"}, "--homophily must be in [0, 1]"},
      {{"--out", dir, "--seed", "x"}, "--seed"},
      {{"--out", dir, "--degree-exponent", "1.5"}, "--degree-exponent must"},
      {{"--out", dir, "--features", "20", "--features-per-node", "21"},
       "--features-per-node must be in [1, features] = [1, 20]"},
      {{"--out", dir, "--topic-weight", "-1"}, "--topic-weight must be in"},
      {{"--out", dir, "--nodes", "100", "--classes", "10", "--avg-degree",
        "8", "--homophily", "0.9"},
       "--avg-degree 8 with homophily 0.9"},
  };
  for (const Case& c : cases) {
    GenerateRun r = Generate(c.args);
    EXPECT_EQ(r.code, 2) << c.expected;
    EXPECT_THAT(r.err, HasSubstr(c.expected));
    EXPECT_EQ(r.out, "");
  }
  EXPECT_FALSE(fs::exists(dir));  // nothing written on bad usage
}

TEST_F(GenerateCommandTest, RefusesNonEmptyFolderUnlessForce) {
  const std::string dir = Dir("full");
  fs::create_directories(dir);
  { std::ofstream(dir + "/keep.txt") << "mine\n"; }
  GenerateRun r = Generate(SmallArgs(dir));
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("not empty"));
  EXPECT_THAT(r.err, HasSubstr("--force"));
  EXPECT_FALSE(fs::exists(dir + "/meta.json"));

  auto args = SmallArgs(dir);
  args.push_back("--force");
  r = Generate(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(LoadDataset(dir).ok());
  EXPECT_EQ(ReadAll(dir + "/keep.txt"), "mine\n");  // left alone

  // Regenerating over an existing dataset also needs --force.
  r = Generate(SmallArgs(dir, 9));
  EXPECT_EQ(r.code, 2);
}

TEST_F(GenerateCommandTest, EmptyExistingFolderIsFine) {
  const std::string dir = Dir("empty");
  fs::create_directories(dir);
  GenerateRun r = Generate(SmallArgs(dir));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("--force")));
}

TEST_F(GenerateCommandTest, OutThatIsAFileIsRefused) {
  const std::string path = Dir("file");
  { std::ofstream(path) << "x"; }
  GenerateRun r = Generate(SmallArgs(path));
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("is not a folder"));
  r = Generate([&] {
    auto a = SmallArgs(path);
    a.push_back("--force");
    return a;
  }());
  EXPECT_EQ(r.code, 2);
}

}  // namespace
}  // namespace ldpgraph::tool
