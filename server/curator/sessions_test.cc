#include "server/curator/sessions.h"

#include <gtest/gtest.h>

namespace ldpgraph::curator {
namespace {

std::shared_ptr<const Session> Make(std::string token,
                                    std::vector<uint32_t> nodes) {
  auto s = std::make_shared<Session>();
  s->token = std::move(token);
  s->nodes = std::move(nodes);
  s->Index();
  return s;
}

TEST(SessionTableTest, EnrollingTheSameNodesAgainReplacesTheSession) {
  SessionTable t(10);
  EXPECT_EQ(t.Open(Make("a", {1, 2, 3})), 0);
  EXPECT_EQ(t.Open(Make("b", {4, 5})), 0);
  EXPECT_EQ(t.sessions(), 2u);
  EXPECT_EQ(t.enrolled_nodes(), 5u);
  // The host of {1,2,3} enrols again, 1,000 times (a reconnect loop).
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(t.Open(Make("a" + std::to_string(i), {1, 2, 3})), 1);
  }
  EXPECT_EQ(t.sessions(), 2u);
  EXPECT_EQ(t.enrolled_nodes(), 5u);
  EXPECT_EQ(t.replaced(), 1000u);
  EXPECT_EQ(t.Find("a").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(t.Find("a998").status().code(),
            absl::StatusCode::kUnauthenticated);
  ASSERT_TRUE(t.Find("a999").ok());
  EXPECT_EQ((*t.Find("a999"))->nodes, (std::vector<uint32_t>{1, 2, 3}));
  ASSERT_TRUE(t.Find("b").ok());
}

TEST(SessionTableTest, OverlappingButDifferentNodeSetsBothStay) {
  SessionTable t(10);
  t.Open(Make("a", {1, 2, 3}));
  EXPECT_EQ(t.Open(Make("b", {1, 2})), 0);
  EXPECT_EQ(t.Open(Make("c", {1, 2, 3, 4})), 0);
  EXPECT_EQ(t.sessions(), 3u);
  EXPECT_EQ(t.enrolled_nodes(), 4u);
  // Replacing "a" keeps nodes 1..3 enrolled: other sessions still cover them.
  EXPECT_EQ(t.Open(Make("d", {1, 2, 3})), 1);
  EXPECT_EQ(t.enrolled_nodes(), 4u);
  EXPECT_EQ(t.sessions(), 3u);
}

TEST(SessionTableTest, HeldEnrolmentsLapseAndAreBounded) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  SessionTable t(4, absl::Minutes(2));
  auto held = std::make_shared<Session>();
  held->token = "p";
  held->nodes = {0, 1, 2};
  ASSERT_TRUE(t.Hold(held, t0).ok());
  EXPECT_EQ(t.Find("p").status().code(), absl::StatusCode::kUnauthenticated);
  auto back = t.Resume("p", t0 + absl::Minutes(1));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)->nodes.size(), 3u);
  // Resumed once: gone.
  EXPECT_EQ(t.Resume("p", t0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Lapses after hold_for without a part.
  ASSERT_TRUE(t.Hold(held, t0).ok());
  EXPECT_EQ(t.Resume("p", t0 + absl::Minutes(3)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // At most twice the graph's nodes held at once (8 here).
  auto other = std::make_shared<Session>();
  other->token = "q";
  other->nodes = {0, 1, 2, 3};
  ASSERT_TRUE(t.Hold(held, t0).ok());
  ASSERT_TRUE(t.Hold(other, t0).ok());
  auto third = std::make_shared<Session>();
  third->token = "r";
  third->nodes = {0, 1};
  EXPECT_EQ(t.Hold(third, t0).code(), absl::StatusCode::kResourceExhausted);
  // Lapsed ones make room.
  EXPECT_TRUE(t.Hold(third, t0 + absl::Minutes(3)).ok());
  EXPECT_EQ(t.sessions(), 0u);
}

TEST(SessionTest, CoversARangeOrAScatteredSet) {
  Session range;
  range.nodes = {10, 11, 12, 13};
  range.Index();
  EXPECT_TRUE(range.Covers(10));
  EXPECT_TRUE(range.Covers(13));
  EXPECT_FALSE(range.Covers(9));
  EXPECT_FALSE(range.Covers(14));
  Session scattered;
  scattered.nodes = {1, 5, 9};
  scattered.Index();
  EXPECT_TRUE(scattered.Covers(5));
  EXPECT_FALSE(scattered.Covers(4));
  EXPECT_FALSE(scattered.Covers(2));
}

}  // namespace
}  // namespace ldpgraph::curator
