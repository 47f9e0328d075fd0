// Tests for the in-memory index of the answer log: dense and sparse nodes,
// repeated answers refused without a change, and the campaigns' order.
#include "server/store/answer_index.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::store {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

AnswerLoc Loc(uint32_t row, uint32_t offset, uint32_t length, bool refusal) {
  return AnswerLoc{row, offset, length << 1 | (refusal ? 1u : 0u)};
}

LogEntry Entry(uint32_t node, uint32_t offset = 5, uint32_t length = 1,
               bool refusal = false) {
  LogEntry e;
  e.node = node;
  e.refusal = refusal;
  e.offset = offset;
  e.length = length;
  return e;
}

std::map<uint32_t, uint32_t> Nodes(const CampaignIndex& c) {
  std::map<uint32_t, uint32_t> out;  // node -> offset
  c.ForEach([&](uint32_t node, const AnswerLoc& loc) { out[node] = loc.offset; });
  return out;
}

TEST(CampaignIndexTest, FindsDenseAndSparseNodes) {
  CampaignIndex c;
  std::map<uint32_t, uint32_t> want;
  std::mt19937_64 rng(11);
  std::vector<uint32_t> nodes;
  for (uint32_t v = 0; v < 5000; ++v) nodes.push_back(v);
  for (uint32_t v : {100000u, 2147483648u, 4294967295u}) nodes.push_back(v);
  std::shuffle(nodes.begin(), nodes.end(), rng);
  for (uint32_t v : nodes) {
    ASSERT_TRUE(c.Insert(v, Loc(0, v + 1, 3, v % 2 == 0)));
    want[v] = v + 1;
  }
  EXPECT_EQ(c.count(), nodes.size());
  for (uint32_t v : nodes) {
    const AnswerLoc* loc = c.Find(v);
    ASSERT_NE(loc, nullptr) << v;
    EXPECT_EQ(loc->offset, v + 1);
    EXPECT_EQ(loc->length(), 3u);
    EXPECT_EQ(loc->refusal(), v % 2 == 0);
  }
  EXPECT_EQ(c.Find(5000), nullptr);
  EXPECT_EQ(c.Find(100001), nullptr);
  EXPECT_EQ(Nodes(c), want);
}

TEST(CampaignIndexTest, ASecondInsertOfANodeChangesNothing) {
  CampaignIndex c;
  ASSERT_TRUE(c.Insert(3, Loc(0, 10, 1, false)));
  ASSERT_TRUE(c.Insert(4000000000u, Loc(0, 20, 1, false)));
  EXPECT_FALSE(c.Insert(3, Loc(1, 99, 2, true)));
  EXPECT_FALSE(c.Insert(4000000000u, Loc(1, 99, 2, true)));
  EXPECT_EQ(c.count(), 2u);
  EXPECT_EQ(c.Find(3)->offset, 10u);
  EXPECT_EQ(c.Find(4000000000u)->offset, 20u);
}

TEST(CampaignIndexTest, EraseUndoesInsert) {
  CampaignIndex c;
  ASSERT_TRUE(c.Insert(1, Loc(0, 10, 1, false)));
  ASSERT_TRUE(c.Insert(3000000000u, Loc(0, 20, 1, false)));
  c.Erase(1);
  c.Erase(3000000000u);
  c.Erase(2);  // absent: nothing
  EXPECT_EQ(c.count(), 0u);
  EXPECT_EQ(c.Find(1), nullptr);
  EXPECT_EQ(c.Find(3000000000u), nullptr);
  EXPECT_TRUE(c.Insert(1, Loc(0, 30, 1, false)));
}

TEST(AnswerIndexTest, IndexesLoggedRowsByCampaign) {
  AnswerIndex index;
  EXPECT_EQ(index.last_row(), 0);
  ASSERT_TRUE(index.AddLoggedRow(1, 7, {Entry(1), Entry(2)}).ok());
  ASSERT_TRUE(index.AddLoggedRow(2, 3, {Entry(1)}).ok());
  ASSERT_TRUE(index.AddLoggedRow(4, 7, {Entry(5, 40, 2, true)}).ok());
  EXPECT_EQ(index.last_row(), 4);
  EXPECT_THAT(index.Campaigns(), ElementsAre(3, 7));
  const CampaignIndex* c = index.Find(7);
  ASSERT_NE(c, nullptr);
  EXPECT_THAT(c->rows, ElementsAre(1, 4));
  EXPECT_EQ(c->count(), 3u);
  const AnswerLoc* loc = c->Find(5);
  ASSERT_NE(loc, nullptr);
  EXPECT_EQ(c->rows[loc->row], 4);
  EXPECT_EQ(loc->offset, 40u);
  EXPECT_EQ(loc->length(), 2u);
  EXPECT_TRUE(loc->refusal());
  EXPECT_EQ(index.Find(8), nullptr);
}

TEST(AnswerIndexTest, ARepeatedNodeIsDataLossAndChangesNothing) {
  AnswerIndex index;
  ASSERT_TRUE(index.AddLoggedRow(1, 7, {Entry(1), Entry(2)}).ok());
  // Across rows: nodes 9 and 10 are not left behind.
  absl::Status s = index.AddLoggedRow(2, 7, {Entry(9), Entry(10), Entry(2)});
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("a second answer of node 2"));
  EXPECT_THAT(s.message(), HasSubstr("the first is in row 1"));
  // Within one row, of a new campaign: the campaign is not left behind.
  s = index.AddLoggedRow(3, 8, {Entry(4), Entry(4)});
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("the first is in row 3"));

  EXPECT_EQ(index.last_row(), 1);
  EXPECT_THAT(index.Campaigns(), ElementsAre(7));
  EXPECT_EQ(index.Find(7)->count(), 2u);
  EXPECT_THAT(index.Find(7)->rows, ElementsAre(1));
  EXPECT_EQ(index.Find(7)->Find(9), nullptr);
}

TEST(AnswerIndexTest, AddsNewRows) {
  AnswerIndex index;
  ASSERT_TRUE(index.AddLoggedRow(1, 7, {Entry(1)}).ok());
  index.AddNewRows({NewRow{5, 7, {NewEntry{2, 12, 3 << 1}}},
                    NewRow{6, 9, {NewEntry{0, 8, 0 << 1 | 1}}}});
  EXPECT_EQ(index.last_row(), 6);
  EXPECT_THAT(index.Campaigns(), ElementsAre(7, 9));
  EXPECT_THAT(index.Find(7)->rows, ElementsAre(1, 5));
  const AnswerLoc* loc = index.Find(7)->Find(2);
  ASSERT_NE(loc, nullptr);
  EXPECT_EQ(loc->row, 1u);
  EXPECT_EQ(loc->offset, 12u);
  EXPECT_EQ(loc->length(), 3u);
  EXPECT_TRUE(index.Find(9)->Find(0)->refusal());
}

}  // namespace
}  // namespace ldpgraph::store
