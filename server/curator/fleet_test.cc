#include "server/curator/fleet.h"

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/testing/temp_folder.h"

namespace ldpgraph::curator {
namespace {

using State = FleetPlanner::Grant::State;

const absl::Time kT0 = absl::FromUnixSeconds(1000000);

std::unique_ptr<FleetPlanner> Planner(uint32_t nodes, store::CuratorStore* store = nullptr) {
  FleetPlanner::Options o;
  o.num_nodes = nodes;
  o.settle = absl::Seconds(5);
  o.lease = absl::Seconds(30);
  auto p = FleetPlanner::Create(o, store);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::move(*p) : nullptr;
}

FleetPlanner::Grant ClaimOrDie(FleetPlanner& p, const std::string& host, absl::Time t) {
  auto g = p.Claim(host, t);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : FleetPlanner::Grant{};
}

TEST(FleetPlannerTest, RejectsBadOptionsAndNames) {
  FleetPlanner::Options o;
  EXPECT_FALSE(FleetPlanner::Create(o, nullptr).ok());  // no nodes
  o.num_nodes = 10;
  o.settle = absl::ZeroDuration();
  EXPECT_FALSE(FleetPlanner::Create(o, nullptr).ok());
  auto p = Planner(10);
  EXPECT_EQ(p->Claim("", kT0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p->Claim(std::string(257, 'h'), kT0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FleetPlannerTest, WaitsUntilSettledThenCoversEveryNodeOnce) {
  auto p = Planner(10);
  // Three hosts arrive over four seconds; each new one restarts the wait.
  EXPECT_EQ(ClaimOrDie(*p, "c", kT0).state, State::kWaiting);
  EXPECT_EQ(ClaimOrDie(*p, "a", kT0 + absl::Seconds(2)).state, State::kWaiting);
  EXPECT_EQ(ClaimOrDie(*p, "b", kT0 + absl::Seconds(4)).state, State::kWaiting);
  // Five seconds after c it is not yet quiet: b came at 4.
  EXPECT_EQ(ClaimOrDie(*p, "c", kT0 + absl::Seconds(6)).state, State::kWaiting);
  EXPECT_EQ(p->shards(), 0u);
  EXPECT_EQ(p->gathering(), 3u);
  const absl::Time t = kT0 + absl::Seconds(9);
  FleetPlanner::Grant c = ClaimOrDie(*p, "c", t);
  FleetPlanner::Grant a = ClaimOrDie(*p, "a", t);
  FleetPlanner::Grant b = ClaimOrDie(*p, "b", t);
  EXPECT_EQ(p->shards(), 3u);
  EXPECT_EQ(p->gathering(), 0u);
  // In order of first claim: c, a, b.
  EXPECT_EQ(c.shard, 0u);
  EXPECT_EQ(a.shard, 1u);
  EXPECT_EQ(b.shard, 2u);
  std::set<uint32_t> covered;
  for (const auto& g : {c, a, b}) {
    EXPECT_EQ(g.state, State::kAssigned);
    EXPECT_EQ(g.shards, 3u);
    EXPECT_GE(g.end - g.begin, 3u);
    EXPECT_LE(g.end - g.begin, 4u);
    for (uint32_t v = g.begin; v < g.end; ++v) EXPECT_TRUE(covered.insert(v).second);
    EXPECT_EQ(g.retry_after, absl::Seconds(10));  // lease / 3
  }
  EXPECT_EQ(covered.size(), 10u);
}

TEST(FleetPlannerTest, WaitsForTheFewestHostsItWasToldOf) {
  FleetPlanner::Options o;
  o.num_nodes = 10;
  o.min_hosts = 2;
  auto p = FleetPlanner::Create(o, nullptr);
  ASSERT_TRUE(p.ok());
  ClaimOrDie(**p, "a", kT0);
  // Long quiet, but only one host: still gathering.
  EXPECT_EQ(ClaimOrDie(**p, "a", kT0 + absl::Seconds(20)).state, State::kWaiting);
  ClaimOrDie(**p, "b", kT0 + absl::Seconds(21));
  EXPECT_EQ(ClaimOrDie(**p, "a", kT0 + absl::Seconds(26)).state, State::kAssigned);
  EXPECT_EQ((*p)->shards(), 2u);
  o.min_hosts = 0;
  EXPECT_FALSE(FleetPlanner::Create(o, nullptr).ok());
}

TEST(FleetPlannerTest, HostsThatStoppedAskingAreLeftOutOfThePlan) {
  auto p = Planner(100);
  ClaimOrDie(*p, "gone", kT0);
  ClaimOrDie(*p, "here", kT0 + absl::Seconds(1));
  // "gone" never asks again; 40 s later its claim is older than the lease.
  ClaimOrDie(*p, "here", kT0 + absl::Seconds(35));
  FleetPlanner::Grant g = ClaimOrDie(*p, "here", kT0 + absl::Seconds(41));
  EXPECT_EQ(g.state, State::kAssigned);
  EXPECT_EQ(g.shards, 1u);
  EXPECT_EQ(g.begin, 0u);
  EXPECT_EQ(g.end, 100u);
}

TEST(FleetPlannerTest, NeverMoreShardsThanNodes) {
  auto p = Planner(2);
  for (const char* h : {"a", "b", "c"}) ClaimOrDie(*p, h, kT0);
  EXPECT_EQ(ClaimOrDie(*p, "a", kT0 + absl::Seconds(6)).state, State::kAssigned);
  EXPECT_EQ(p->shards(), 2u);
  EXPECT_EQ(ClaimOrDie(*p, "c", kT0 + absl::Seconds(6)).state, State::kSpare);
}

TEST(FleetPlannerTest, SpareTakesOverOnlyALapsedLease) {
  auto p = Planner(10);
  ClaimOrDie(*p, "a", kT0);
  ClaimOrDie(*p, "b", kT0);
  ASSERT_EQ(ClaimOrDie(*p, "a", kT0 + absl::Seconds(5)).shard, 0u);
  ASSERT_EQ(ClaimOrDie(*p, "b", kT0 + absl::Seconds(5)).shard, 1u);
  // Both renew; a newcomer is a spare.
  EXPECT_EQ(ClaimOrDie(*p, "new", kT0 + absl::Seconds(20)).state, State::kSpare);
  ClaimOrDie(*p, "a", kT0 + absl::Seconds(30));
  // b last renewed at 5: at 36 its lease (30 s) has lapsed, a's has not.
  FleetPlanner::Grant g = ClaimOrDie(*p, "new", kT0 + absl::Seconds(36));
  EXPECT_EQ(g.state, State::kAssigned);
  EXPECT_EQ(g.shard, 1u);
  EXPECT_EQ(g.begin, 5u);
  EXPECT_EQ(g.end, 10u);
  // b comes back: it is no longer a holder, so it is a spare.
  EXPECT_EQ(ClaimOrDie(*p, "b", kT0 + absl::Seconds(37)).state, State::kSpare);
  EXPECT_EQ(p->shards(), 2u);
}

TEST(FleetPlannerTest, StoredPlanSurvivesARestartWithItsTakeovers) {
  TempFolder dir;
  {
    auto store = store::CuratorStore::Open(dir.path(), {});
    ASSERT_TRUE(store.ok()) << store.status();
    auto p = Planner(9, store->get());
    for (const char* h : {"x", "y", "z"}) ClaimOrDie(*p, h, kT0);
    ASSERT_EQ(ClaimOrDie(*p, "z", kT0 + absl::Seconds(5)).state, State::kAssigned);
    // y lapses and w takes its shard.
    ClaimOrDie(*p, "x", kT0 + absl::Seconds(40));
    ClaimOrDie(*p, "z", kT0 + absl::Seconds(40));
    ASSERT_EQ(ClaimOrDie(*p, "w", kT0 + absl::Seconds(40)).shard, 1u);
  }
  auto store = store::CuratorStore::Open(dir.path(), {});
  ASSERT_TRUE(store.ok()) << store.status();
  auto p = Planner(9, store->get());
  EXPECT_EQ(p->shards(), 3u);
  const absl::Time now = absl::Now();
  // No gathering after a restart: each holder gets its shard at once.
  FleetPlanner::Grant w = ClaimOrDie(*p, "w", now);
  EXPECT_EQ(w.state, State::kAssigned);
  EXPECT_EQ(w.shard, 1u);
  EXPECT_EQ(ClaimOrDie(*p, "x", now).shard, 0u);
  EXPECT_EQ(ClaimOrDie(*p, "z", now).shard, 2u);
  // Leases start afresh at the restart: y cannot take anything back.
  EXPECT_EQ(ClaimOrDie(*p, "y", now).state, State::kSpare);
}

TEST(FleetPlannerTest, StoredPlanLargerThanTheGraphIsRefused) {
  TempFolder dir;
  auto store = store::CuratorStore::Open(dir.path(), {});
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->PutFleetPlan({"a", "b", "c"}).ok());
  FleetPlanner::Options o;
  o.num_nodes = 2;
  auto p = FleetPlanner::Create(o, store->get());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(p.status().message(), ::testing::HasSubstr("3 shards"));
}

}  // namespace
}  // namespace ldpgraph::curator
