#include "server/ldpctl/churn.h"

#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/agent_state.h"
#include "common/dp/accounting.h"
#include "common/wire/codec.h"
#include "gtest/gtest.h"
#include "server/store/store.h"

namespace ldpgraph::ldpctl {
namespace {

TEST(PlanChurnTest, DrawsCeilOfTheFractionOfDistinctHostsReproducibly) {
  auto plan = PlanChurn(5, 0, 10, 0.25, /*exchange=*/false);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 3u);  // ceil(2.5)
  std::set<int> hosts;
  for (const ChurnKill& k : *plan) {
    hosts.insert(k.host);
    EXPECT_GE(k.at_fraction, 0.1);
    EXPECT_LT(k.at_fraction, 0.6);
    EXPECT_FALSE(k.by_time);
  }
  EXPECT_EQ(hosts.size(), 3u);
  auto again = PlanChurn(5, 0, 10, 0.25, false);
  ASSERT_TRUE(again.ok());
  for (size_t i = 0; i < plan->size(); ++i) {
    EXPECT_EQ((*plan)[i].host, (*again)[i].host);
    EXPECT_EQ((*plan)[i].at_fraction, (*again)[i].at_fraction);
  }
  EXPECT_EQ(PlanChurn(5, 0, 10, 1.0, false)->size(), 10u);
  EXPECT_EQ(PlanChurn(5, 0, 10, 0.0, false)->size(), 0u);
  EXPECT_EQ(PlanChurn(5, 0, 3, 0.34, false)->size(), 2u);  // ceil(1.02)
  auto exchange = PlanChurn(5, 1, 4, 0.5, true);
  ASSERT_TRUE(exchange.ok());
  for (const ChurnKill& k : *exchange) {
    EXPECT_TRUE(k.by_time);
    EXPECT_GE(k.at_time, absl::Milliseconds(50));
    EXPECT_LE(k.at_time, absl::Milliseconds(500));
  }
  EXPECT_FALSE(PlanChurn(5, 0, 10, 1.5, false).ok());
  EXPECT_FALSE(PlanChurn(5, 0, 0, 0.5, false).ok());
}

TEST(ChurnDriverTest, KillsWhenDueAndRestartsAfterTheDownTime) {
  ChurnKill k;
  k.host = 2;
  k.at_fraction = 0.5;
  std::vector<std::string> events;
  ChurnDriver::Hooks hooks;
  hooks.before_kill = [&](int h) {
    events.push_back(absl::StrCat("look ", h));
    return absl::OkStatus();
  };
  hooks.kill = [&](int h) {
    events.push_back(absl::StrCat("kill ", h));
    return absl::OkStatus();
  };
  hooks.restart = [&](int h) {
    events.push_back(absl::StrCat("restart ", h));
    return absl::OkStatus();
  };
  ChurnDriver d({k}, absl::Milliseconds(200), hooks);
  ASSERT_TRUE(d.Poll(40, 100, absl::Milliseconds(1)).ok());
  EXPECT_TRUE(events.empty());
  EXPECT_TRUE(d.pending());
  ASSERT_TRUE(d.Poll(50, 100, absl::Milliseconds(2)).ok());
  EXPECT_EQ(events, (std::vector<std::string>{"look 2", "kill 2"}));
  EXPECT_TRUE(d.down(2));
  EXPECT_FALSE(d.pending());
  ASSERT_TRUE(d.Poll(60, 100, absl::Milliseconds(3)).ok());
  EXPECT_EQ(events.size(), 2u);  // still down, not killed twice
  ASSERT_TRUE(d.Finish().ok());  // waits out the 200 ms
  EXPECT_EQ(events.back(), "restart 2");
  EXPECT_FALSE(d.down(2));
  EXPECT_GE(d.kills()[0].down_s, 0.2);
  EXPECT_EQ(d.kills()[0].answered_at_kill, 50u);
}

TEST(ChurnDriverTest, AnExchangeKillIsDueByTime) {
  ChurnKill k;
  k.host = 0;
  k.by_time = true;
  k.at_time = absl::Milliseconds(100);
  int kills = 0;
  ChurnDriver::Hooks hooks;
  hooks.kill = [&](int) { ++kills; return absl::OkStatus(); };
  hooks.restart = [&](int) { return absl::InternalError("cannot start"); };
  ChurnDriver d({k}, absl::ZeroDuration(), hooks);
  ASSERT_TRUE(d.Poll(0, 10, absl::Milliseconds(99)).ok());
  EXPECT_EQ(kills, 0);
  ASSERT_TRUE(d.Poll(0, 10, absl::Milliseconds(100)).ok());
  EXPECT_EQ(kills, 1);
  // A restart that fails stops the run.
  EXPECT_EQ(d.Finish().code(), absl::StatusCode::kInternal);
}

TEST(ExpectedSpendingTest, SubstitutionSharesTheFeaturesQuestion) {
  v1::MechanismSpec features;
  features.set_kind(v1::MECHANISM_KIND_MULTIBIT);
  features.set_epsilon(2);
  features.set_dimension(8);
  features.set_range_low(0);
  features.set_range_high(1);
  v1::MechanismSpec edges;
  edges.set_kind(v1::MECHANISM_KIND_EDGE_SUBSTITUTION);
  edges.set_epsilon(1);
  edges.set_dimension(4);
  edges.mutable_substitution()->set_approach(1);
  *edges.mutable_substitution()->mutable_features() = features;
  std::vector<CampaignAnswers> c = {
      {v1::ATTRIBUTE_EDGES, edges, {0, 1, 2}},
      {v1::ATTRIBUTE_FEATURES, features, {0, 1, 3}}};
  auto e = ExpectedSpending(c, 4);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_DOUBLE_EQ((*e)[0], 3.0);  // features once, edges once
  EXPECT_DOUBLE_EQ((*e)[2], 3.0);
  EXPECT_DOUBLE_EQ((*e)[3], 2.0);
  EXPECT_DOUBLE_EQ(MaxExtraEpsilon({3, 3, 3, 2}, *e), 0.0);
  EXPECT_DOUBLE_EQ(MaxExtraEpsilon({3, 5, 3, 2}, *e), 2.0);
  c[0].reporters.push_back(9);
  EXPECT_EQ(ExpectedSpending(c, 4).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The readers on real databases of the stores' schemas.
// The readers go through the owners' interfaces: the curator's store and the
// agent's state, written here by those same interfaces, and read while the
// writer still has them open (as a running curator or host would).
class StoreReadersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat("churn_test_", getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

store::AnswerRow Answer(int64_t campaign, uint32_t node, bool refusal) {
  store::AnswerRow a;
  a.campaign = campaign;
  a.node = node;
  a.refusal = refusal;
  a.payload = "x";
  return a;
}

TEST_F(StoreReadersTest, StoredReportersReadsTheAnswerLogWithoutRefusals) {
  auto curator = store::CuratorStore::Open(dir_.string(), {});
  ASSERT_TRUE(curator.ok()) << curator.status();
  ASSERT_TRUE((*curator)
                  ->AppendAnswers({Answer(1, 5, false), Answer(1, 2, true),
                                   Answer(1, 3, false)})
                  .ok());
  ASSERT_TRUE((*curator)->AppendAnswers({Answer(2, 7, false)}).ok());
  ASSERT_TRUE((*curator)->AppendAnswers({Answer(1, 1, false)}).ok());

  auto r = StoredReporters(dir_.string(), "c1");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (std::vector<uint32_t>{1, 3, 5}));
  auto same = StoredReporters(**curator, "c1");  // through the open store
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(*same, *r);
  EXPECT_EQ(StoredReporters(dir_.string(), "x1").status().code(),
            absl::StatusCode::kInvalidArgument);
  std::filesystem::create_directories(dir_ / "empty");
  EXPECT_EQ(StoredReporters((dir_ / "empty").string(), "c1").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "empty" / "curator.db"));
  EXPECT_FALSE(StoredReporters((dir_ / "none").string(), "c1").ok());
}

TEST_F(StoreReadersTest, AddMemoSpendingSumsEachNodesRows) {
  auto state = agent::AgentStateStore::Open(dir_.string());
  ASSERT_TRUE(state.ok()) << state.status();
  auto row = [](uint32_t node, const char* attribute, double eps) {
    return agent::MemoRow{node, QueryKey{attribute, "rr", "k=2", eps}, "a"};
  };
  ASSERT_TRUE((*state)
                  ->Commit({row(0, "label", 1), row(0, "features", 2),
                            row(3, "label", 1)})
                  .ok());
  std::vector<double> spent;
  uint64_t rows = 0;
  ASSERT_TRUE(AddMemoSpending(dir_.string(), 4, &spent, &rows).ok());
  EXPECT_EQ(rows, 3u);
  EXPECT_EQ(spent, (std::vector<double>{3, 0, 0, 1}));
  EXPECT_EQ(AddMemoSpending(dir_.string(), 2, &spent, &rows).code(),
            absl::StatusCode::kInvalidArgument);
  // A host without state: NOT_FOUND, and nothing is created.
  const std::filesystem::path none = dir_ / "no-host";
  EXPECT_EQ(AddMemoSpending(none.string(), 4, &spent, &rows).code(),
            absl::StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(none));
}

}  // namespace
}  // namespace ldpgraph::ldpctl
