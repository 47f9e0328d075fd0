// Tests for `ldpgraph eval --edges`: every rule of the flags is a usage error
// naming the flag; a run learns on the private graph and reports its
// figures; the graph is `ldpgraph edges`' for the same seed and run; the
// fake-edges attacker's nodes are the pipeline's and the screen flags them.
#include "server/ldpgraph/eval_edges.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/attacks/poisoning.h"
#include "common/dataset/generator.h"
#include "server/ldpgraph/edges_command.h"
#include "server/ldpgraph/eval_command.h"

namespace ldpgraph::tool {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct Result {
  int code;
  std::string out, err;
};

Result Eval(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = RunEval(args, out, err);
  return {code, out.str(), err.str()};
}

class EvalEdgesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(
        (fs::temp_directory_path() /
         ("ldpgraph_eval_edges_test_" + std::to_string(getpid())))
            .string());
    GeneratorOptions o = DefaultGeneratorOptions();
    o.nodes = 600;
    o.features = 16;
    o.classes = 3;
    auto d = GenerateDataset(o);
    ASSERT_TRUE(d.ok());
    dataset_ = new Dataset(std::move(*d));
    ASSERT_TRUE(WriteDataset(*dataset_, *dir_ + "/gen").ok());
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete dataset_;
  }
  static std::string gen() { return *dir_ + "/gen"; }
  static std::string* dir_;
  static Dataset* dataset_;
};
std::string* EvalEdgesTest::dir_ = nullptr;
Dataset* EvalEdgesTest::dataset_ = nullptr;

TEST_F(EvalEdgesTest, UsageErrorsNameTheFlag) {
  const std::string d = gen();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--edges", "ns1"}, "--edges must be one of rr, blink, got 'ns1'"},
      {{"--edge-epsilon", "2"},
       "--edge-epsilon applies to --edges rr or blink"},
      {{"--blink-delta", "0.2"},
       "--blink-delta applies to --edges rr or blink"},
      {{"--edges", "rr", "--blink-delta", "0.2"},
       "--blink-delta applies to --edges blink"},
      {{"--edges", "rr", "--blink-variant", "topk"},
       "--blink-variant applies to --edges blink"},
      {{"--edges", "blink", "--blink-variant", "soft"},
       "--blink-variant must be one of hard, topk, hybrid, got 'soft'"},
      {{"--edges", "blink", "--edge-epsilon", "0"},
       "--edges blink: edge epsilon must be finite and > 0, got 0"},
      {{"--edges", "blink", "--blink-delta", "1"}, "--edges blink: "},
      {{"--edges", "rr", "--task", "link"}, "--edges applies to the node task"},
      {{"--malicious", "0.1", "--attack", "fake-edges"},
       "--attack fake-edges crafts edge reports: it needs --edges rr or blink"},
      {{"--defence", "edge-consistency"},
       "--defence edge-consistency screens edge reports: it needs --edges"},
      {{"--edges", "rr", "--attack-edges", "5"},
       "--attack-edges applies to --attack fake-edges"},
      {{"--edges", "rr", "--malicious", "0.1", "--attack", "input",
        "--attack-edges", "5"},
       "--attack-edges applies to --attack fake-edges"},
      {{"--edges", "rr", "--malicious", "0.1", "--attack", "fake-edges",
        "--attack-edges", "0"},
       "--attack-edges must be an integer >= 1, got 0"},
  };
  for (const auto& [args, message] : cases) {
    std::vector<std::string> full = {"--dataset", d};
    full.insert(full.end(), args.begin(), args.end());
    Result r = Eval(full);
    EXPECT_EQ(r.code, 2) << message;
    EXPECT_THAT(r.err, HasSubstr(message));
  }
}

TEST_F(EvalEdgesTest, HelpListsTheFlags) {
  Result r = Eval({"--help"});
  EXPECT_EQ(r.code, 0);
  for (const char* flag : {"--edges K", "--edge-epsilon E", "--blink-delta D",
                           "--blink-variant V", "--attack-edges V"}) {
    EXPECT_THAT(r.out, HasSubstr(flag));
  }
}

// The graph eval learns on is `ldpgraph edges`' for the same seed and run.
TEST_F(EvalEdgesTest, GraphIsTheEdgesCommandsGraph) {
  pipeline::PipelineConfig c = pipeline::DefaultConfig(
      v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE);
  EvalEdgesOptions o;
  o.config = pipeline::PrivateEdgesConfig();
  o.config->epsilon = 4;
  auto mine = BuildEvalRunGraph(*dataset_, c, o, /*seed=*/3, /*run=*/1);
  ASSERT_TRUE(mine.ok()) << mine.status();
  auto graph = GraphConfig(EdgeGraph::kBlink, 4, EdgesOptions());
  ASSERT_TRUE(graph.ok()) << graph.status();
  auto noise = pipeline::EdgeNoise::Create(600, false);
  ASSERT_TRUE(noise.ok());
  noise->Reset(3, 1);
  auto theirs = pipeline::BuildPrivateGraph(dataset_->graph, *graph, nullptr,
                                            {}, *noise);
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  EXPECT_EQ(mine->edges->graph.Edges(), theirs->graph.Edges());
  EXPECT_EQ(mine->overrides().graph, &mine->edges->graph);
  EXPECT_EQ(EvalRunGraph().overrides().graph, nullptr);
}

// The attacker is the pipeline's (MaliciousNodes of --seed); Blink's
// degree check flags every one of its nodes.
TEST_F(EvalEdgesTest, FakeEdgesUnderBlinkAreFlagged) {
  const std::vector<std::string> base = {
      "--dataset", gen(), "--method", "lpgnn", "--epsilon", "3",
      "--label-epsilon", "3", "--edges", "blink", "--edge-epsilon", "1",
      "--malicious", "0.1", "--attack", "fake-edges", "--attack-edges", "20",
      "--runs", "1", "--seed", "2", "--epochs", "20", "--format", "json"};
  std::vector<std::string> screened = base;
  screened.insert(screened.end(), {"--defence", "edge-consistency"});
  Result plain = Eval(base), with = Eval(screened);
  ASSERT_EQ(plain.code, 0) << plain.err;
  ASSERT_EQ(with.code, 0) << with.err;
  const auto p = nlohmann::json::parse(plain.out);
  const auto w = nlohmann::json::parse(with.out);
  const size_t malicious = poisoning::MaliciousNodes(600, 2, 0.1).size();
  ASSERT_GT(malicious, 30u);
  const auto& pe = p["per_run"][0]["edges"];
  EXPECT_EQ(pe["mechanism"], "blink");
  EXPECT_EQ(pe["malicious"], malicious);
  EXPECT_EQ(pe["victims_per_node"], 20);
  EXPECT_TRUE(pe["screen"].is_null());
  // Hubs: more edges than their victims alone.
  EXPECT_GT(pe["malicious_edges"].get<uint64_t>(), 20 * malicious);
  const auto& we = w["per_run"][0]["edges"];
  EXPECT_EQ(we["malicious_flagged"], malicious);
  EXPECT_LE(we["screen"]["flagged_nodes"].get<size_t>(), malicious + 2);
  EXPECT_EQ(we["malicious_edges"], 0);
  EXPECT_EQ(w["parameters"]["edges"]["mechanism"], "blink");
  EXPECT_EQ(w["parameters"]["edges"]["edge_consistency"], true);
  EXPECT_EQ(w["parameters"]["edges"]["attack_edges"], 20);
  EXPECT_FALSE(p["parameters"]["edges"].contains("screen_alpha"));
  // The table says it too.
  std::vector<std::string> table = screened;
  table.erase(std::find(table.begin(), table.end(), "--format"),
              std::find(table.begin(), table.end(), "--format") + 2);
  Result t = Eval(table);
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_THAT(t.out, HasSubstr(absl::StrCat("flagged (", malicious, " of ",
                                            malicious, " malicious)")));
}

// Without --edges nothing changes: no "edges" anywhere.
TEST_F(EvalEdgesTest, WithoutEdgesTheCuratorKnowsTheGraph) {
  Result r = Eval({"--dataset", gen(), "--runs", "1", "--epochs", "5",
                   "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j["parameters"].contains("edges"));
  EXPECT_FALSE(j["per_run"][0].contains("edges"));
}

TEST_F(EvalEdgesTest, RrGraphRunsWithPrivge) {
  Result r = Eval({"--dataset", gen(), "--edges", "rr", "--edge-epsilon", "6",
                   "--runs", "1", "--epochs", "5", "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["parameters"]["edges"]["mechanism"], "rr");
  EXPECT_FALSE(j["parameters"]["edges"].contains("blink_delta"));
  EXPECT_GT(j["per_run"][0]["edges"]["edges"].get<uint64_t>(), 0u);
  EXPECT_FALSE(j["per_run"][0]["edges"].contains("blink"));
}

}  // namespace
}  // namespace ldpgraph::tool
