#include "server/store/store.h"

#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::store {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A fresh directory under the test's temporary directory, removed with it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "/store_test_XXXXXX";
    char* made = mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr) << "mkdtemp " << pattern;
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::unique_ptr<CuratorStore> OpenOrDie(const std::string& dir,
                                        CuratorStore::Options options = {}) {
  auto store = CuratorStore::Open(dir, options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

AnswerRow Answer(int64_t campaign, uint32_t node, std::string payload,
                 bool refusal = false) {
  AnswerRow row;
  row.campaign = campaign;
  row.node = node;
  row.refusal = refusal;
  row.payload = std::move(payload);
  row.unix_ms = 1000 + node;
  return row;
}

std::vector<AnswerRow> AllAnswers(CuratorStore& store) {
  std::vector<AnswerRow> rows;
  absl::Status status = store.ForEachAnswer([&](const AnswerRow& row) {
    rows.push_back(row);
    return true;
  });
  EXPECT_TRUE(status.ok()) << status;
  return rows;
}

// The stored answers of one campaign, by node (ForEachAnswer(campaign)).
std::vector<AnswerRow> CampaignAnswers(CuratorStore& store, int64_t campaign) {
  std::vector<AnswerRow> rows;
  absl::Status status = store.ForEachAnswer(campaign, [&](const AnswerRow& row) {
    rows.push_back(row);
    return true;
  });
  EXPECT_TRUE(status.ok()) << status;
  return rows;
}

// (campaign, node) of each row, for compact comparisons.
std::vector<std::pair<int64_t, uint32_t>> Keys(
    const std::vector<AnswerRow>& rows) {
  std::vector<std::pair<int64_t, uint32_t>> keys;
  for (const AnswerRow& row : rows) keys.emplace_back(row.campaign, row.node);
  return keys;
}

TEST(CuratorStoreTest, AnswerKeysMatchTheAnswersAcrossReopen) {
  TempDir dir;
  {
    auto store = OpenOrDie(dir.path());
    ASSERT_NE(store, nullptr);
    // Dense nodes, a far node (the sparse part of the index), refusals,
    // two campaigns, several batches.
    ASSERT_TRUE(store
                    ->AppendAnswers({Answer(1, 3, "a"), Answer(1, 0, "b", true),
                                     Answer(2, 4000000000u, "c")})
                    .ok());
    ASSERT_TRUE(
        store->AppendAnswers({Answer(1, 7, "d"), Answer(2, 1, "e", true)}).ok());
  }
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  std::vector<std::tuple<int64_t, uint32_t, bool>> expected, keys;
  for (const AnswerRow& row : AllAnswers(*store)) {
    expected.emplace_back(row.campaign, row.node, row.refusal);
  }
  ASSERT_TRUE(store
                  ->ForEachAnswerKey([&](int64_t c, uint32_t v, bool refusal) {
                    keys.emplace_back(c, v, refusal);
                  })
                  .ok());
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, expected);
  EXPECT_EQ(keys.size(), 5u);
}

TEST(CuratorStoreTest, FleetPlanIsReplacedWholeAndSurvivesReopen) {
  TempDir dir;
  {
    auto store = OpenOrDie(dir.path());
    ASSERT_NE(store, nullptr);
    auto none = store->GetFleetPlan();
    ASSERT_TRUE(none.ok()) << none.status();
    EXPECT_THAT(*none, IsEmpty());
    ASSERT_TRUE(store->PutFleetPlan({"a", "b", "c"}).ok());
    ASSERT_TRUE(store->PutFleetPlan({"b", "host with spaces"}).ok());
  }
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  auto plan = store->GetFleetPlan();
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(*plan, (std::vector<std::string>{"b", "host with spaces"}));
  ASSERT_TRUE(store->PutFleetPlan({}).ok());
  EXPECT_THAT(*store->GetFleetPlan(), IsEmpty());
}

TEST(CuratorStoreTest, FrontendStatusIsReplacedAndSurvivesReopen) {
  TempDir dir;
  {
    auto store = OpenOrDie(dir.path());
    ASSERT_TRUE(store->PutFrontendStatus("f1", "one").ok());
    ASSERT_TRUE(store->PutFrontendStatus("f1", std::string("u\0o", 3)).ok());
    ASSERT_TRUE(store->PutFrontendStatus("f2", "two").ok());
  }
  auto store = OpenOrDie(dir.path());
  auto fresh = store->FreshFrontendStatus(absl::Seconds(60));
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_THAT(*fresh, ElementsAre(std::string("u\0o", 3), "two"));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_THAT(*store->FreshFrontendStatus(absl::Milliseconds(10)), IsEmpty());
}

TEST(CuratorStoreTest, NodeKeysOfSomeNodesByAscendingNode) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_TRUE(store->PutNodeKeys({{7, "seven"}, {2, std::string("t\0o", 3)}}).ok());
  ASSERT_TRUE(store->PutNodeKeys({{7, "SEVEN"}}).ok());  // replaced
  std::vector<std::pair<uint32_t, std::string>> keys;
  ASSERT_TRUE(store->GetNodeKeys({7, 5, 2}, [&](uint32_t n, const std::string& k) {
                       keys.emplace_back(n, k);
                     }).ok());
  EXPECT_THAT(keys, ElementsAre(std::pair<uint32_t, std::string>{2, std::string("t\0o", 3)},
                                std::pair<uint32_t, std::string>{7, "SEVEN"}));
  keys.clear();
  ASSERT_TRUE(store->GetNodeKeys({}, [&](uint32_t n, const std::string& k) {
                       keys.emplace_back(n, k);
                     }).ok());
  EXPECT_THAT(keys, IsEmpty());
}

TEST(CuratorStoreTest, TheSharedFleetPlannerIsPostgresOnly) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  FleetClaim q;
  q.host = "h";
  auto g = store->ClaimFleetShard(q);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(g.status().message(), HasSubstr("keeps the protocol in memory"));
}

TEST(CuratorStoreTest, CreatesListsAndUpdatesCampaigns) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  auto first = store->CreateCampaign(
      [](int64_t id) { return absl::StrCat("campaign-", id); });
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = store->CreateCampaign(
      [](int64_t id) { return absl::StrCat("campaign-", id); });
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*first, 1);
  EXPECT_EQ(*second, 2);

  auto campaigns = store->ListCampaigns();
  ASSERT_TRUE(campaigns.ok()) << campaigns.status();
  ASSERT_EQ(campaigns->size(), 2u);
  EXPECT_EQ((*campaigns)[0].id, 1);
  EXPECT_TRUE((*campaigns)[0].open);
  EXPECT_EQ((*campaigns)[0].record, "campaign-1");
  EXPECT_EQ((*campaigns)[1].id, 2);
  EXPECT_EQ((*campaigns)[1].record, "campaign-2");

  ASSERT_TRUE(store->UpdateCampaign(CampaignRow{2, false, "closed-2"}).ok());
  campaigns = store->ListCampaigns();
  ASSERT_TRUE(campaigns.ok());
  EXPECT_TRUE((*campaigns)[0].open);
  EXPECT_FALSE((*campaigns)[1].open);
  EXPECT_EQ((*campaigns)[1].record, "closed-2");
}

TEST(CuratorStoreTest, UpdateUnknownCampaignIsNotFound) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  absl::Status status = store->UpdateCampaign(CampaignRow{7, true, "x"});
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("7"));
}

TEST(CuratorStoreTest, CampaignRecordMayHoldAnyBytes) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  const std::string bytes("\0\x01\xff\0", 4);
  ASSERT_TRUE(store->CreateCampaign([&](int64_t) { return bytes; }).ok());
  ASSERT_TRUE(
      store->CreateCampaign([](int64_t) { return std::string(); }).ok());
  auto campaigns = store->ListCampaigns();
  ASSERT_TRUE(campaigns.ok());
  EXPECT_EQ((*campaigns)[0].record, bytes);
  EXPECT_EQ((*campaigns)[1].record, "");
}

TEST(CuratorStoreTest, AppendAnswersReportsStoredDuplicateConflict) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  auto outcomes = store->AppendAnswers(
      {Answer(1, 5, "five"), Answer(1, 6, "six"), Answer(2, 5, "")});
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  EXPECT_THAT(*outcomes,
              ElementsAre(AppendOutcome::kStored, AppendOutcome::kStored,
                          AppendOutcome::kStored));

  outcomes = store->AppendAnswers({
      Answer(1, 5, "five"),                // resend
      Answer(1, 6, "SIX"),                 // other payload
      Answer(2, 5, ""),                    // resend of an empty payload
      Answer(2, 6, "", /*refusal=*/true),  // new refusal
  });
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  EXPECT_THAT(*outcomes,
              ElementsAre(AppendOutcome::kDuplicate, AppendOutcome::kConflict,
                          AppendOutcome::kDuplicate, AppendOutcome::kStored));

  // A refusal is not the same answer as a report with the same bytes.
  outcomes = store->AppendAnswers({Answer(2, 5, "", /*refusal=*/true)});
  ASSERT_TRUE(outcomes.ok());
  EXPECT_THAT(*outcomes, ElementsAre(AppendOutcome::kConflict));

  // The conflicting answers changed nothing.
  std::vector<AnswerRow> rows = AllAnswers(*store);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[1].payload, "six");
  EXPECT_FALSE(rows[2].refusal);
  EXPECT_TRUE(rows[3].refusal);
}

TEST(CuratorStoreTest, DuplicateAndConflictWithinOneBatch) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  auto outcomes = store->AppendAnswers({
      Answer(1, 1, "a"),
      Answer(1, 1, "a"),
      Answer(1, 1, "b"),
      Answer(1, 2, "c"),
  });
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  EXPECT_THAT(*outcomes,
              ElementsAre(AppendOutcome::kStored, AppendOutcome::kDuplicate,
                          AppendOutcome::kConflict, AppendOutcome::kStored));
  std::vector<AnswerRow> rows = AllAnswers(*store);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].payload, "a");
}

TEST(CuratorStoreTest, AnswersKeepAllFieldsAndStampZeroTime) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  const std::string payload("\0binary\xff", 8);
  AnswerRow stamped = Answer(3, 4000000000u, payload);
  stamped.unix_ms = 0;
  const int64_t before = absl::ToUnixMillis(absl::Now());
  ASSERT_TRUE(
      store->AppendAnswers({Answer(3, 1, "x", /*refusal=*/true), stamped})
          .ok());
  const int64_t after = absl::ToUnixMillis(absl::Now());
  std::vector<AnswerRow> rows = AllAnswers(*store);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].campaign, 3);
  EXPECT_EQ(rows[0].node, 1u);
  EXPECT_TRUE(rows[0].refusal);
  EXPECT_EQ(rows[0].payload, "x");
  EXPECT_EQ(rows[0].unix_ms, 1001);
  EXPECT_EQ(rows[1].node, 4000000000u);  // a uint32 above INT32_MAX
  EXPECT_FALSE(rows[1].refusal);
  EXPECT_EQ(rows[1].payload, payload);
  EXPECT_GE(rows[1].unix_ms, before);
  EXPECT_LE(rows[1].unix_ms, after);
}

TEST(CuratorStoreTest, EmptyBatchIsOk) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  auto outcomes = store->AppendAnswers({});
  ASSERT_TRUE(outcomes.ok());
  EXPECT_THAT(*outcomes, IsEmpty());
}

TEST(CuratorStoreTest, ForEachAnswerOrdersByCampaignAndNodeAndStops) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store
                  ->AppendAnswers({Answer(2, 9, "a"), Answer(1, 7, "b"),
                                   Answer(2, 3, "c"), Answer(1, 2, "d"),
                                   Answer(3, 1, "e")})
                  .ok());
  EXPECT_THAT(Keys(AllAnswers(*store)),
              ElementsAre(std::pair<int64_t, uint32_t>{1, 2},
                          std::pair<int64_t, uint32_t>{1, 7},
                          std::pair<int64_t, uint32_t>{2, 3},
                          std::pair<int64_t, uint32_t>{2, 9},
                          std::pair<int64_t, uint32_t>{3, 1}));

  std::vector<uint32_t> nodes;
  ASSERT_TRUE(store
                  ->ForEachAnswer(2,
                                  [&](const AnswerRow& row) {
                                    EXPECT_EQ(row.campaign, 2);
                                    nodes.push_back(row.node);
                                    return true;
                                  })
                  .ok());
  EXPECT_THAT(nodes, ElementsAre(3u, 9u));

  // Early stop, in both forms; the store is usable afterwards (the scan's
  // statement was reset).
  int seen = 0;
  ASSERT_TRUE(store
                  ->ForEachAnswer([&](const AnswerRow&) {
                    ++seen;
                    return seen < 2;
                  })
                  .ok());
  EXPECT_EQ(seen, 2);
  seen = 0;
  ASSERT_TRUE(store
                  ->ForEachAnswer(1,
                                  [&](const AnswerRow&) {
                                    ++seen;
                                    return false;
                                  })
                  .ok());
  EXPECT_EQ(seen, 1);
  ASSERT_TRUE(store->AppendAnswers({Answer(4, 1, "f")}).ok());
  EXPECT_EQ(AllAnswers(*store).size(), 6u);
}

TEST(CuratorStoreTest, StateSurvivesCloseAndReopen) {
  TempDir dir;
  {
    auto store = OpenOrDie(dir.path());
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(
        store->CreateCampaign([](int64_t id) { return absl::StrCat("c", id); })
            .ok());
    ASSERT_TRUE(
        store->AppendAnswers({Answer(1, 1, "one"), Answer(1, 2, "two")}).ok());
    ASSERT_TRUE(store->PutCaps({{1, "caps1"}}).ok());
    ASSERT_TRUE(store->Audit("admin", "create", "{}").ok());
  }
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  auto campaigns = store->ListCampaigns();
  ASSERT_TRUE(campaigns.ok());
  ASSERT_EQ(campaigns->size(), 1u);
  EXPECT_EQ((*campaigns)[0].record, "c1");
  std::vector<AnswerRow> rows = AllAnswers(*store);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].payload, "one");
  EXPECT_EQ(rows[1].payload, "two");
  // A resend after the restart still gets its acknowledgement.
  auto outcomes = store->AppendAnswers({Answer(1, 2, "two")});
  ASSERT_TRUE(outcomes.ok());
  EXPECT_THAT(*outcomes, ElementsAre(AppendOutcome::kDuplicate));
  // Ids continue.
  auto next = store->CreateCampaign([](int64_t) { return std::string(); });
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, 2);
  auto audit = store->ListAudit(0, 10);
  ASSERT_TRUE(audit.ok());
  EXPECT_EQ(audit->size(), 1u);
}

TEST(CuratorStoreTest, PutCapsReplaces) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->PutCaps({{7, "seven"}, {3, "three"}}).ok());
  ASSERT_TRUE(store->PutCaps({{7, "SEVEN"}}).ok());
  std::vector<std::pair<uint32_t, std::string>> caps;
  ASSERT_TRUE(store
                  ->ForEachCaps([&](uint32_t node, const std::string& c) {
                    caps.emplace_back(node, c);
                  })
                  .ok());
  EXPECT_THAT(caps, ElementsAre(std::pair<uint32_t, std::string>{3, "three"},
                                std::pair<uint32_t, std::string>{7, "SEVEN"}));
}

TEST(CuratorStoreTest, PutCapsAndAuditWritesBoth) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(
      store->PutCapsAndAudit({{4, "four"}}, "host:a", "enrol", R"({"nodes":1})")
          .ok());
  // No caps (a host that declares none) still audits.
  ASSERT_TRUE(store->PutCapsAndAudit({}, "host:b", "enrol", "{}").ok());
  std::vector<std::pair<uint32_t, std::string>> caps;
  ASSERT_TRUE(store
                  ->ForEachCaps([&](uint32_t node, const std::string& c) {
                    caps.emplace_back(node, c);
                  })
                  .ok());
  EXPECT_THAT(caps, ElementsAre(std::pair<uint32_t, std::string>{4, "four"}));
  auto audit = store->ListAudit(0, 10);
  ASSERT_TRUE(audit.ok()) << audit.status();
  ASSERT_EQ(audit->size(), 2u);
  EXPECT_EQ((*audit)[0].actor, "host:a");
  EXPECT_EQ((*audit)[0].action, "enrol");
  EXPECT_EQ((*audit)[1].actor, "host:b");
}

TEST(CuratorStoreTest, AuditIsAscendingAndPaged) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  const int64_t before = absl::ToUnixMillis(absl::Now());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(store
                    ->Audit(absl::StrCat("actor", i), "act",
                            absl::StrCat("{\"i\":", i, "}"))
                    .ok());
  }
  auto all = store->ListAudit(0, 100);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ((*all)[i].sequence, i + 1);
    EXPECT_EQ((*all)[i].actor, absl::StrCat("actor", i));
    EXPECT_EQ((*all)[i].action, "act");
    EXPECT_EQ((*all)[i].details_json, absl::StrCat("{\"i\":", i, "}"));
    EXPECT_GE((*all)[i].unix_ms, before);
  }
  auto page = store->ListAudit(2, 2);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].sequence, 3);
  EXPECT_EQ((*page)[1].sequence, 4);
  page = store->ListAudit(5, 10);
  ASSERT_TRUE(page.ok());
  EXPECT_THAT(*page, IsEmpty());
}

TEST(CuratorStoreTest, ListAuditRejectsNonPositiveLimit) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  auto page = store->ListAudit(0, 0);
  EXPECT_EQ(page.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(page.status().message(), HasSubstr("limit"));
}

TEST(CuratorStoreTest, FetchSealedByRecipientsAfterAndLimit) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  std::vector<SealedRow> messages;
  for (uint32_t i = 0; i < 10; ++i) {
    SealedRow m;
    m.campaign = "c1";
    m.from_node = 100 + i;
    m.to_node = i % 3;  // 0,1,2,0,1,2,0,1,2,0
    m.ciphertext = std::string("\0ct", 3) + std::to_string(i);
    messages.push_back(m);
  }
  ASSERT_TRUE(store->PutSealed(messages).ok());

  auto to_0_and_2 = store->FetchSealed({2, 0}, 0, 100);
  ASSERT_TRUE(to_0_and_2.ok()) << to_0_and_2.status();
  std::vector<int64_t> sequences;
  for (const SealedRow& m : *to_0_and_2) sequences.push_back(m.sequence);
  EXPECT_THAT(sequences, ElementsAre(1, 3, 4, 6, 7, 9, 10));
  EXPECT_EQ((*to_0_and_2)[1].campaign, "c1");
  EXPECT_EQ((*to_0_and_2)[1].from_node, 102u);
  EXPECT_EQ((*to_0_and_2)[1].to_node, 2u);
  EXPECT_EQ((*to_0_and_2)[1].ciphertext, std::string("\0ct", 3) + "2");

  auto page = store->FetchSealed({0, 2}, 4, 2);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].sequence, 6);
  EXPECT_EQ((*page)[1].sequence, 7);

  auto none = store->FetchSealed({5}, 0, 10);
  ASSERT_TRUE(none.ok());
  EXPECT_THAT(*none, IsEmpty());
  none = store->FetchSealed({}, 0, 10);
  ASSERT_TRUE(none.ok());
  EXPECT_THAT(*none, IsEmpty());
  EXPECT_EQ(store->FetchSealed({0}, 0, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CuratorStoreTest, ResultsAddListGet) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  auto first = store->AddResult(
      [](int64_t id) { return absl::StrCat("result-", id); }, "m/1.npy");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = store->AddResult(
      [](int64_t id) { return absl::StrCat("result-", id); }, "");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*first, 1);
  EXPECT_EQ(*second, 2);

  auto all = store->ListResults();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].record, "result-1");
  EXPECT_EQ((*all)[0].matrix_path, "m/1.npy");
  EXPECT_EQ((*all)[1].record, "result-2");
  EXPECT_EQ((*all)[1].matrix_path, "");

  auto one = store->GetResult(2);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->id, 2);
  EXPECT_EQ(one->record, "result-2");
  auto missing = store->GetResult(3);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("3"));
}

TEST(CuratorStoreTest, ResultsBeforeAPageNewestFirst) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(store
                    ->AddResult(
                        [](int64_t id) { return absl::StrCat("result-", id); },
                        absl::StrCat("m/", i))
                    .ok());
  }
  const auto ids = [](const std::vector<ResultRow>& rows) {
    std::vector<int64_t> out;
    for (const ResultRow& r : rows) out.push_back(r.id);
    return out;
  };
  auto page = store->ListResultsBefore(INT64_MAX, 2);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(ids(*page), ElementsAre(5, 4));
  EXPECT_EQ((*page)[0].record, "result-5");
  EXPECT_EQ((*page)[0].matrix_path, "m/4");
  page = store->ListResultsBefore(4, 2);
  ASSERT_TRUE(page.ok());
  EXPECT_THAT(ids(*page), ElementsAre(3, 2));
  page = store->ListResultsBefore(2, 2);
  ASSERT_TRUE(page.ok());
  EXPECT_THAT(ids(*page), ElementsAre(1));
  page = store->ListResultsBefore(1, 2);
  ASSERT_TRUE(page.ok());
  EXPECT_THAT(*page, IsEmpty());
  EXPECT_EQ(store->ListResultsBefore(3, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A page of a campaign's answers picks them from the index: nodes from
// first_node on, ascending across batches and rows, refusals only if asked,
// every field as stored; pages put end to end list each answer once.
TEST(CuratorStoreTest, ListAnswersPagesByNode) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store
                  ->AppendAnswers({Answer(1, 50, "a", true), Answer(2, 4, "b"),
                                   Answer(1, 7, "x")})
                  .ok());
  ASSERT_TRUE(store
                  ->AppendAnswers({Answer(1, 9, "c", true), Answer(1, 70, "d"),
                                   Answer(1, 3, "e", true)})
                  .ok());
  ASSERT_TRUE(store->AppendAnswers({Answer(1, 10, "g", true)}).ok());
  const auto nodes = [](const std::vector<AnswerRow>& rows) {
    std::vector<uint32_t> out;
    for (const AnswerRow& r : rows) out.push_back(r.node);
    return out;
  };
  auto all = store->ListAnswers(1, 0, 100, false);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_THAT(nodes(*all), ElementsAre(3, 7, 9, 10, 50, 70));
  auto refusals = store->ListAnswers(1, 0, 100, true);
  ASSERT_TRUE(refusals.ok());
  EXPECT_THAT(nodes(*refusals), ElementsAre(3, 9, 10, 50));
  EXPECT_EQ((*refusals)[0].payload, "e");
  EXPECT_TRUE((*refusals)[0].refusal);
  EXPECT_EQ((*refusals)[0].unix_ms, 1003);
  EXPECT_EQ((*refusals)[0].campaign, 1);
  EXPECT_EQ((*refusals)[3].payload, "a");
  EXPECT_EQ((*refusals)[3].unix_ms, 1050);
  // Pages of two refusals, each from the node after the last one.
  std::vector<uint32_t> paged;
  uint32_t from = 0;
  for (int pages = 0; pages < 10; ++pages) {
    auto page = store->ListAnswers(1, from, 2, true);
    ASSERT_TRUE(page.ok());
    ASSERT_LE(page->size(), 2u);
    if (page->empty()) break;
    for (const AnswerRow& r : *page) paged.push_back(r.node);
    from = page->back().node + 1;
  }
  EXPECT_THAT(paged, ElementsAre(3, 9, 10, 50));
  auto later = store->ListAnswers(1, 10, 2, false);
  ASSERT_TRUE(later.ok());
  EXPECT_THAT(nodes(*later), ElementsAre(10, 50));
  EXPECT_EQ((*later)[1].payload, "a");
  auto none = store->ListAnswers(3, 0, 10, false);
  ASSERT_TRUE(none.ok());
  EXPECT_THAT(*none, IsEmpty());
  EXPECT_EQ(store->ListAnswers(1, 0, 0, false).status().code(),
            absl::StatusCode::kInvalidArgument);
  // The same after a reopen (the index rebuilt from the log).
  store.reset();
  store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  auto reopened = store->ListAnswers(1, 4, 3, true);
  ASSERT_TRUE(reopened.ok());
  EXPECT_THAT(nodes(*reopened), ElementsAre(9, 10, 50));
}

TEST(CuratorStoreTest, OpenMissingDirectoryNamesIt) {
  TempDir dir;
  const std::string missing = dir.path() + "/no/such/dir";
  auto store = CuratorStore::Open(missing, {});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(store.status().message(), HasSubstr(missing));
}

TEST(CuratorStoreTest, OpenRejectsNegativeMaxBytes) {
  TempDir dir;
  CuratorStore::Options options;
  options.max_bytes = -1;
  auto store = CuratorStore::Open(dir.path(), options);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(store.status().message(), HasSubstr("max_bytes"));
}

TEST(CuratorStoreTest, OpenRejectsOtherSchemaVersion) {
  TempDir dir;
  const std::string path = dir.path() + "/curator.db";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE t(x); PRAGMA user_version = 7;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);

  auto store = CuratorStore::Open(dir.path(), {});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr(path));
  EXPECT_THAT(store.status().message(), HasSubstr("version 7"));
  EXPECT_THAT(store.status().message(), HasSubstr("version 1"));
}

TEST(CuratorStoreTest, OpenRejectsAFileThatIsNotADatabase) {
  TempDir dir;
  const std::string path = dir.path() + "/curator.db";
  FILE* f = fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  const std::string junk(8192, 'x');
  fwrite(junk.data(), 1, junk.size(), f);
  fclose(f);
  auto store = CuratorStore::Open(dir.path(), {});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(store.status().message(), HasSubstr(path));
}

TEST(CuratorStoreTest, FullDatabaseIsResourceExhaustedAndStoresNothing) {
  TempDir dir;
  CuratorStore::Options options;
  options.max_bytes = 64 * 1024;
  auto store = OpenOrDie(dir.path(), options);
  ASSERT_NE(store, nullptr);

  // Batches of four 2 KiB answers until one fails.
  const std::string big(2048, 'p');
  absl::Status failure;
  std::vector<AnswerRow> failed_batch;
  uint32_t node = 0;
  for (int batch = 0; batch < 100 && failure.ok(); ++batch) {
    std::vector<AnswerRow> answers;
    for (int i = 0; i < 4; ++i) answers.push_back(Answer(1, node++, big));
    const size_t before = AllAnswers(*store).size();
    auto outcomes = store->AppendAnswers(answers);
    if (!outcomes.ok()) {
      failure = outcomes.status();
      failed_batch = answers;
      // Nothing of the failed batch is stored.
      EXPECT_EQ(AllAnswers(*store).size(), before);
    }
  }
  ASSERT_FALSE(failure.ok()) << "64 KiB never filled up";
  EXPECT_EQ(failure.code(), absl::StatusCode::kResourceExhausted) << failure;
  EXPECT_THAT(failure.message(), HasSubstr("appending answers"));
  EXPECT_THAT(failure.message(), HasSubstr("full"));
  for (const AnswerRow& row : AllAnswers(*store)) {
    EXPECT_LT(row.node, failed_batch.front().node);
  }

  // Reads still work; the same batch fails again, cleanly.
  const size_t stored = AllAnswers(*store).size();
  EXPECT_GT(stored, 0u);
  auto campaigns = store->ListCampaigns();
  EXPECT_TRUE(campaigns.ok()) << campaigns.status();
  auto again = store->AppendAnswers(failed_batch);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(AllAnswers(*store).size(), stored);
  // A resend of a stored answer is still acknowledged.
  auto resend = store->AppendAnswers({Answer(1, 0, big)});
  ASSERT_TRUE(resend.ok()) << resend.status();
  EXPECT_THAT(*resend, ElementsAre(AppendOutcome::kDuplicate));

  // After a reopen without the limit the stored answers are all there and
  // the batch fits.
  store.reset();
  store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(AllAnswers(*store).size(), stored);
  auto outcomes = store->AppendAnswers(failed_batch);
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  EXPECT_EQ(AllAnswers(*store).size(), stored + failed_batch.size());
}

// Another connection holding the write lock past busy_timeout_ms is
// UNAVAILABLE (SQLITE_BUSY: retry later), not INTERNAL, and stores nothing;
// once the lock is released the same calls succeed.
TEST(CuratorStoreTest, ALockHeldElsewhereIsUnavailableThenClears) {
  TempDir dir;
  CuratorStore::Options options;
  options.busy_timeout_ms = 20;
  auto store = OpenOrDie(dir.path(), options);
  ASSERT_NE(store, nullptr);
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open((dir.path() + "/curator.db").c_str(), &other),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr),
            SQLITE_OK);

  auto outcomes = store->AppendAnswers({Answer(1, 0, "a")});
  EXPECT_EQ(outcomes.status().code(), absl::StatusCode::kUnavailable)
      << outcomes.status();
  EXPECT_THAT(outcomes.status().message(), HasSubstr("appending answers"));
  EXPECT_THAT(outcomes.status().message(), HasSubstr("curator.db"));
  const absl::Status audit = store->Audit("operator", "locked", "{}");
  EXPECT_EQ(audit.code(), absl::StatusCode::kUnavailable) << audit;

  ASSERT_EQ(sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(other);
  EXPECT_TRUE(AllAnswers(*store).empty());
  outcomes = store->AppendAnswers({Answer(1, 0, "a")});
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  EXPECT_THAT(*outcomes, ElementsAre(AppendOutcome::kStored));
  EXPECT_TRUE(store->Audit("operator", "unlocked", "{}").ok());
  EXPECT_EQ(AllAnswers(*store).size(), 1u);
}

TEST(CuratorStoreTest, ReadOnlyReadsBesideTheWriterAndChangesNothing) {
  TempDir dir;
  CuratorStore::Options ro;
  ro.read_only = true;
  auto missing = CuratorStore::Open(dir.path(), ro);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("curator.db"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/curator.db"));

  auto writer = OpenOrDie(dir.path());
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->AppendAnswers({Answer(1, 0, "a"), Answer(1, 1, "b", true)}).ok());
  auto reader = CuratorStore::Open(dir.path(), ro);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(AllAnswers(**reader).size(), 2u);
  // It catches up with what the writer stores later.
  ASSERT_TRUE(writer->AppendAnswers({Answer(2, 4, "c")}).ok());
  EXPECT_THAT(Keys(AllAnswers(**reader)),
              ElementsAre(std::pair<int64_t, uint32_t>{1, 0},
                          std::pair<int64_t, uint32_t>{1, 1},
                          std::pair<int64_t, uint32_t>{2, 4}));
  auto appended = (*reader)->AppendAnswers({Answer(3, 0, "x")});
  EXPECT_EQ(appended.status().code(), absl::StatusCode::kFailedPrecondition)
      << appended.status();
  EXPECT_THAT(appended.status().message(), HasSubstr("read-only"));
  EXPECT_EQ((*reader)->Audit("ldpctl", "nothing", "{}").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(AllAnswers(*writer).size(), 3u);
  // Read-only applies to the SQLite file only.
  EXPECT_EQ(CuratorStore::OpenUrl("postgres://u@127.0.0.1:1/db", "", dir.path(), ro)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CuratorStoreTest, CampaignNamesRoundTrip) {
  EXPECT_EQ(CampaignName(12), "c12");
  auto id = ParseCampaignName("c12");
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, 12);
  for (const char* bad : {"", "c", "c0", "c-1", "x12", "12", "c1x"}) {
    auto parsed = ParseCampaignName(bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr(absl::StrCat("'", bad, "'")));
  }
}

TEST(CuratorStoreTest, OpenRejectsNegativeBusyTimeout) {
  TempDir dir;
  CuratorStore::Options options;
  options.busy_timeout_ms = -1;
  auto store = CuratorStore::Open(dir.path(), options);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(store.status().message(), HasSubstr("busy_timeout_ms"));
}

// Runs SQL on the store's file behind its back (the store closed, or open
// in this process: SQLite's locks serialise the two).
void ExecSql(const std::string& dir, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir + "/curator.db").c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
      << sql << ": " << (error != nullptr ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
}

// Audit rows, the largest first, until not even an empty one fits: then no
// write that needs room in the audit table can succeed. False if the store
// never filled up.
bool FillUpTheAuditLog(CuratorStore& store) {
  int failures = 0;
  for (size_t size : {4096, 512, 64, 0}) {
    for (int i = 0; i < 10000; ++i) {
      absl::Status s = store.Audit("filler", "fill", std::string(size, 'f'));
      if (s.ok()) continue;
      EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
      ++failures;
      break;
    }
  }
  return failures == 4;
}

bool Audited(CuratorStore& store, const std::string& action) {
  auto rows = store.ListAudit(0, 100000);
  EXPECT_TRUE(rows.ok()) << rows.status();
  if (!rows.ok()) return false;
  return std::any_of(rows->begin(), rows->end(),
                     [&](const AuditRow& r) { return r.action == action; });
}

TEST(CuratorStoreTest, UpdateCampaignAndAuditStoresBothOrNeither) {
  TempDir dir;
  CuratorStore::Options options;
  options.max_bytes = 64 * 1024;
  auto store = OpenOrDie(dir.path(), options);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->CreateCampaign([](int64_t) { return std::string("open-1"); })
                  .ok());
  ASSERT_TRUE(store->CreateCampaign([](int64_t) { return std::string("open-2"); })
                  .ok());

  // Both, when there is room.
  ASSERT_TRUE(store
                  ->UpdateCampaignAndAudit(CampaignRow{1, false, "shut-1"},
                                           "admin", "campaign.close",
                                           R"({"campaign":"c1"})")
                  .ok());
  auto campaigns = store->ListCampaigns();
  ASSERT_TRUE(campaigns.ok());
  EXPECT_FALSE((*campaigns)[0].open);
  EXPECT_EQ((*campaigns)[0].record, "shut-1");
  auto audit = store->ListAudit(0, 10);
  ASSERT_TRUE(audit.ok());
  ASSERT_EQ(audit->size(), 1u);
  EXPECT_EQ((*audit)[0].actor, "admin");
  EXPECT_EQ((*audit)[0].action, "campaign.close");
  EXPECT_EQ((*audit)[0].details_json, R"({"campaign":"c1"})");

  // No such campaign: no audit entry either.
  absl::Status status = store->UpdateCampaignAndAudit(
      CampaignRow{7, false, "x"}, "admin", "campaign.seven", "{}");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_FALSE(Audited(*store, "campaign.seven"));

  // A full disk: the campaign's row (same size, so it would fit alone) is
  // rolled back with the audit entry that did not fit.
  ASSERT_TRUE(FillUpTheAuditLog(*store));
  status = store->UpdateCampaignAndAudit(CampaignRow{2, false, "shut-2"},
                                         "curator", "campaign.close2",
                                         std::string(200, 'd'));
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(status.message(), HasSubstr("campaign 2"));
  campaigns = store->ListCampaigns();
  ASSERT_TRUE(campaigns.ok());
  EXPECT_TRUE((*campaigns)[1].open);
  EXPECT_EQ((*campaigns)[1].record, "open-2");
  EXPECT_FALSE(Audited(*store, "campaign.close2"));

  // Space freed (behind the store's back): the same call succeeds.
  ExecSql(dir.path(), "DELETE FROM audit WHERE actor = 'filler'");
  ASSERT_TRUE(store
                  ->UpdateCampaignAndAudit(CampaignRow{2, false, "shut-2"},
                                           "curator", "campaign.close2",
                                           std::string(200, 'd'))
                  .ok());
  campaigns = store->ListCampaigns();
  ASSERT_TRUE(campaigns.ok());
  EXPECT_FALSE((*campaigns)[1].open);
  EXPECT_EQ((*campaigns)[1].record, "shut-2");
  EXPECT_TRUE(Audited(*store, "campaign.close2"));
}

TEST(CuratorStoreTest, OpenRejectsAVersionOneStore) {
  TempDir dir;
  // Version 1 kept one row per answer; there is no migration.
  ExecSql(dir.path(),
          "CREATE TABLE answers(campaign INTEGER NOT NULL, node INTEGER NOT "
          "NULL, refusal INTEGER NOT NULL, payload BLOB NOT NULL, unix_ms "
          "INTEGER NOT NULL, PRIMARY KEY(campaign, node)) WITHOUT ROWID; "
          "PRAGMA user_version = 1;");
  auto store = CuratorStore::Open(dir.path(), {});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("schema version 1"));
  EXPECT_THAT(store.status().message(), HasSubstr("reads version 2"));
}

// Many batches to several campaigns, nodes in no order (some far apart,
// some above INT32_MAX), a reopen: the rebuilt index still tells resends
// and conflicts, and the scans come out ordered.
TEST(CuratorStoreTest, IndexIsRebuiltAtOpenFromManyBatches) {
  TempDir dir;
  std::mt19937_64 rng(7);
  // campaign -> node -> (payload, refusal)
  std::map<int64_t, std::map<uint32_t, std::pair<std::string, bool>>> want;
  std::vector<AnswerRow> all;
  {
    auto store = OpenOrDie(dir.path());
    ASSERT_NE(store, nullptr);
    std::vector<uint32_t> nodes;
    for (uint32_t v = 0; v < 3000; ++v) nodes.push_back(v);
    for (uint32_t v : {100000u, 2147483648u, 4000000000u, 4294967295u}) {
      nodes.push_back(v);
    }
    for (int64_t campaign :
         {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{1} << 40}) {
      std::shuffle(nodes.begin(), nodes.end(), rng);
      for (uint32_t v : nodes) {
        if (campaign == 7 && v % 3 != 0) continue;  // a sparser campaign
        const bool refusal = rng() % 5 == 0;
        AnswerRow a = Answer(campaign, v,
                             refusal ? std::string()
                                     : absl::StrCat("p", campaign, "/", v,
                                                    std::string(rng() % 50,
                                                                'x')),
                             refusal);
        want[campaign][v] = {a.payload, refusal};
        all.push_back(std::move(a));
      }
    }
    // Batches of varied sizes, campaigns interleaved.
    std::shuffle(all.begin(), all.end(), rng);
    for (size_t i = 0; i < all.size();) {
      const size_t n = std::min<size_t>(1 + rng() % 700, all.size() - i);
      std::vector<AnswerRow> batch(all.begin() + i, all.begin() + i + n);
      auto outcomes = store->AppendAnswers(batch);
      ASSERT_TRUE(outcomes.ok()) << outcomes.status();
      for (AppendOutcome o : *outcomes) ASSERT_EQ(o, AppendOutcome::kStored);
      i += n;
      if (i > all.size() / 2 && i - n <= all.size() / 2) {
        // A reopen half-way: the rest is indexed on top of a rebuilt index.
        store.reset();
        store = OpenOrDie(dir.path());
        ASSERT_NE(store, nullptr);
      }
    }
  }
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);

  // Every answer sent again: duplicates. Changed: conflicts (another
  // payload, or the refusal flag flipped).
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<AnswerRow> changed;
  for (size_t i = 0; i < all.size(); ++i) {
    AnswerRow a = all[i];
    if (i % 2 == 0) {
      a.payload += "!";
    } else {
      a.refusal = !a.refusal;
    }
    changed.push_back(std::move(a));
  }
  auto outcomes = store->AppendAnswers(all);
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  EXPECT_EQ(std::count(outcomes->begin(), outcomes->end(),
                       AppendOutcome::kDuplicate),
            static_cast<long>(all.size()));
  outcomes = store->AppendAnswers(changed);
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  EXPECT_EQ(std::count(outcomes->begin(), outcomes->end(),
                       AppendOutcome::kConflict),
            static_cast<long>(all.size()));

  // The scans: everything, ordered, unchanged.
  std::vector<AnswerRow> rows = AllAnswers(*store);
  ASSERT_EQ(rows.size(), all.size());
  size_t k = 0;
  for (const auto& [campaign, nodes] : want) {
    std::vector<uint32_t> seen;
    ASSERT_TRUE(store
                    ->ForEachAnswer(campaign,
                                    [&](const AnswerRow& row) {
                                      seen.push_back(row.node);
                                      return true;
                                    })
                    .ok());
    ASSERT_EQ(seen.size(), nodes.size());
    size_t j = 0;
    for (const auto& [node, answer] : nodes) {
      EXPECT_EQ(seen[j++], node);
      const AnswerRow& row = rows[k++];
      EXPECT_EQ(row.campaign, campaign);
      EXPECT_EQ(row.node, node);
      EXPECT_EQ(row.payload, answer.first);
      EXPECT_EQ(row.refusal, answer.second);
      EXPECT_EQ(row.unix_ms, 1000 + node);
    }
  }
  EXPECT_EQ(k, rows.size());

  // New answers still go in after all that.
  outcomes = store->AppendAnswers({Answer(2, 5000, "new"), Answer(9, 1, "x")});
  ASSERT_TRUE(outcomes.ok());
  EXPECT_THAT(*outcomes,
              ElementsAre(AppendOutcome::kStored, AppendOutcome::kStored));
}

TEST(CuratorStoreTest, ForEachAnswerOrdersByNodeAcrossBatches) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(
      store->AppendAnswers({Answer(1, 50, "a"), Answer(2, 4, "b")}).ok());
  ASSERT_TRUE(store
                  ->AppendAnswers({Answer(1, 9, "c"), Answer(1, 70, "d"),
                                   Answer(1, 3, "e")})
                  .ok());
  ASSERT_TRUE(
      store->AppendAnswers({Answer(2, 1, "f"), Answer(1, 10, "g")}).ok());
  EXPECT_THAT(Keys(AllAnswers(*store)),
              ElementsAre(std::pair<int64_t, uint32_t>{1, 3},
                          std::pair<int64_t, uint32_t>{1, 9},
                          std::pair<int64_t, uint32_t>{1, 10},
                          std::pair<int64_t, uint32_t>{1, 50},
                          std::pair<int64_t, uint32_t>{1, 70},
                          std::pair<int64_t, uint32_t>{2, 1},
                          std::pair<int64_t, uint32_t>{2, 4}));
  std::string payloads;
  ASSERT_TRUE(store
                  ->ForEachAnswer(1,
                                  [&](const AnswerRow& row) {
                                    payloads += row.payload;
                                    return row.node < 10;
                                  })
                  .ok());
  EXPECT_EQ(payloads, "ecg");  // stopped after node 10
  // Early stop between campaigns, in the scan of all.
  int seen = 0;
  ASSERT_TRUE(store
                  ->ForEachAnswer([&](const AnswerRow& row) {
                    ++seen;
                    return row.campaign == 1;
                  })
                  .ok());
  EXPECT_EQ(seen, 6);
  // Unknown campaign: nothing.
  seen = 0;
  ASSERT_TRUE(store
                  ->ForEachAnswer(3,
                                  [&](const AnswerRow&) {
                                    ++seen;
                                    return true;
                                  })
                  .ok());
  EXPECT_EQ(seen, 0);
}

TEST(CuratorStoreTest, ABatchOfOnlyResendsWritesNoRow) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(
      store->AppendAnswers({Answer(1, 1, "a"), Answer(2, 1, "b")}).ok());
  auto outcomes =
      store->AppendAnswers({Answer(1, 1, "a"), Answer(2, 1, "B")});
  ASSERT_TRUE(outcomes.ok());
  EXPECT_THAT(*outcomes,
              ElementsAre(AppendOutcome::kDuplicate, AppendOutcome::kConflict));
  store.reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir.path() + "/curator.db").c_str(), &db),
            SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM answer_log", -1,
                               &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(stmt, 0), 2);  // one per campaign
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

// A row of the answer log that does not parse makes Open fail with
// DATA_LOSS naming it, whatever the fault. (Every fault of the blob format
// itself is tested in answer_log_test; a few of them here.)
TEST(CuratorStoreTest, CorruptAnswerLogIsDataLossNamingTheRow) {
  // Row 1 holds nodes 1 and 2 ("aa", "bbb"), row 2 node 3 ("c").
  const std::vector<std::pair<std::string, std::string>> faults = {
      {"empty", "x''"},
      {"unknown format", "x'02010000000200'"},
      {"payload past the end", "x'0101000000020005616161'"},
      {"overlong varint", "x'01010000008280808080808080808001000161'"},
      {"not a blob", "'text'"},
      {"a second answer of node 3", "x'010100000006000161'"},
  };
  for (const auto& [what, blob] : faults) {
    SCOPED_TRACE(what);
    TempDir dir;
    {
      auto store = OpenOrDie(dir.path());
      ASSERT_NE(store, nullptr);
      ASSERT_TRUE(
          store->AppendAnswers({Answer(1, 1, "aa"), Answer(1, 2, "bbb")})
              .ok());
      ASSERT_TRUE(store->AppendAnswers({Answer(1, 3, "c")}).ok());
    }
    ExecSql(dir.path(),
            absl::StrCat("UPDATE answer_log SET answers = ", blob,
                         " WHERE id = 1"));
    auto store = CuratorStore::Open(dir.path(), {});
    EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss)
        << store.status();
    EXPECT_THAT(store.status().message(), HasSubstr("answer_log row"));
    EXPECT_THAT(store.status().message(), HasSubstr("campaign 1"));
    if (what == "a second answer of node 3") {
      // Row 1 now repeats node 3, found when row 2 is read.
      EXPECT_THAT(store.status().message(), HasSubstr("row 2"));
      EXPECT_THAT(store.status().message(), HasSubstr("node 3"));
    } else {
      EXPECT_THAT(store.status().message(), HasSubstr("row 1"));
    }
  }
}

// A row spoiled while the store is open (by another writer): the scans
// report DATA_LOSS, a resend compared with it is DATA_LOSS, nothing
// crashes, and the store goes on working.
TEST(CuratorStoreTest, AnswerLogSpoiledWhileOpenIsDataLoss) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(
      store->AppendAnswers({Answer(1, 1, "aa"), Answer(1, 2, "bbb")}).ok());
  ASSERT_TRUE(store->AppendAnswers({Answer(2, 1, "z")}).ok());
  ExecSql(dir.path(), "UPDATE answer_log SET answers = x'0101' WHERE id = 1");
  absl::Status status = store->ForEachAnswer([](const AnswerRow&) {
    return true;
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(status.message(), HasSubstr("answer_log row 1"));
  status = store->ForEachAnswer(1, [](const AnswerRow&) { return true; });
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  auto outcomes = store->AppendAnswers({Answer(1, 2, "bbb")});
  EXPECT_EQ(outcomes.status().code(), absl::StatusCode::kDataLoss)
      << outcomes.status();
  EXPECT_THAT(outcomes.status().message(), HasSubstr("answer_log row 1"));
  // The other campaign is intact.
  const std::vector<AnswerRow> rows = CampaignAnswers(*store, 2);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].payload, "z");
  outcomes = store->AppendAnswers({Answer(2, 1, "z"), Answer(2, 2, "y")});
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  EXPECT_THAT(*outcomes,
              ElementsAre(AppendOutcome::kDuplicate, AppendOutcome::kStored));
}

// Two stores on one directory: each sees what the other stored.
TEST(CuratorStoreTest, TwoStoresOnOneDirectorySeeEachOthersAnswers) {
  TempDir dir;
  auto a = OpenOrDie(dir.path());
  auto b = OpenOrDie(dir.path());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(a->AppendAnswers({Answer(1, 1, "one"), Answer(1, 2, "two")})
                  .ok());
  auto outcomes = b->AppendAnswers(
      {Answer(1, 1, "one"), Answer(1, 2, "TWO"), Answer(1, 3, "three")});
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  EXPECT_THAT(*outcomes,
              ElementsAre(AppendOutcome::kDuplicate, AppendOutcome::kConflict,
                          AppendOutcome::kStored));
  outcomes = a->AppendAnswers({Answer(1, 3, "three"), Answer(1, 4, "four")});
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  EXPECT_THAT(*outcomes,
              ElementsAre(AppendOutcome::kDuplicate, AppendOutcome::kStored));
  EXPECT_EQ(AllAnswers(*a).size(), 4u);
  EXPECT_EQ(AllAnswers(*b).size(), 4u);
}

// A batch that failed left no trace in the index either: its answers are
// new when they are sent again.
TEST(CuratorStoreTest, AFailedBatchIsNotIndexed) {
  TempDir dir;
  CuratorStore::Options options;
  options.max_bytes = 64 * 1024;
  auto store = OpenOrDie(dir.path(), options);
  ASSERT_NE(store, nullptr);
  uint32_t node = 0;
  std::vector<AnswerRow> failed;
  for (int batch = 0; batch < 100 && failed.empty(); ++batch) {
    std::vector<AnswerRow> answers;
    for (int i = 0; i < 4; ++i) {
      answers.push_back(Answer(1, node++, std::string(2048, 'q')));
    }
    if (!store->AppendAnswers(answers).ok()) failed = answers;
  }
  ASSERT_FALSE(failed.empty());
  // One answer of it may fit; it is then stored, not a duplicate.
  auto one = store->AppendAnswers({failed.front()});
  if (one.ok()) {
    EXPECT_THAT(*one, ElementsAre(AppendOutcome::kStored));
  } else {
    EXPECT_EQ(one.status().code(), absl::StatusCode::kResourceExhausted);
  }
  store.reset();
  store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  auto outcomes = store->AppendAnswers(failed);
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  EXPECT_EQ(outcomes->back(), AppendOutcome::kStored);
  EXPECT_EQ((*outcomes)[0], one.ok() ? AppendOutcome::kDuplicate
                                     : AppendOutcome::kStored);
}

// A batch's answers to one campaign past 64 MiB are split over rows.
TEST(CuratorStoreTest, LargeBatchSpansSeveralRows) {
  TempDir dir;
  CuratorStore::Options options;
  options.synchronous_full = false;
  std::vector<AnswerRow> batch;
  for (uint32_t node = 0; node < 4; ++node) {
    batch.push_back(Answer(1, node, std::string(20 << 20, 'a' + node)));
  }
  batch.push_back(Answer(2, 0, "small"));
  {
    auto store = OpenOrDie(dir.path(), options);
    ASSERT_NE(store, nullptr);
    auto outcomes = store->AppendAnswers(batch);
    ASSERT_TRUE(outcomes.ok()) << outcomes.status();
    EXPECT_EQ(std::count(outcomes->begin(), outcomes->end(),
                         AppendOutcome::kStored),
              5);
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir.path() + "/curator.db").c_str(), &db),
            SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               "SELECT count(*) FROM answer_log "
                               "WHERE campaign = 1",
                               -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(stmt, 0), 2);
  sqlite3_finalize(stmt);
  sqlite3_close(db);

  auto store = OpenOrDie(dir.path(), options);
  ASSERT_NE(store, nullptr);
  size_t i = 0;
  ASSERT_TRUE(store
                  ->ForEachAnswer([&](const AnswerRow& row) {
                    EXPECT_EQ(row.campaign, batch[i].campaign);
                    EXPECT_EQ(row.node, batch[i].node);
                    EXPECT_TRUE(row.payload == batch[i].payload) << i;
                    ++i;
                    return true;
                  })
                  .ok());
  EXPECT_EQ(i, batch.size());
  batch[3].payload.back() = 'z';
  auto outcomes = store->AppendAnswers(batch);
  ASSERT_TRUE(outcomes.ok()) << outcomes.status();
  EXPECT_THAT(*outcomes,
              ElementsAre(AppendOutcome::kDuplicate, AppendOutcome::kDuplicate,
                          AppendOutcome::kDuplicate, AppendOutcome::kConflict,
                          AppendOutcome::kDuplicate));
}

// Crash durability: a child process stores a batch, signals that
// AppendAnswers returned OK, and is killed with SIGKILL; the batch must be
// there when the parent reopens the store.
void AppendThenGetKilled(bool synchronous_full) {
  TempDir dir;
  std::vector<AnswerRow> batch;
  for (uint32_t node = 0; node < 50; ++node) {
    batch.push_back(Answer(1, node, absl::StrCat("report-", node)));
  }
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    CuratorStore::Options options;
    options.synchronous_full = synchronous_full;
    auto store = CuratorStore::Open(dir.path(), options);
    if (!store.ok()) _exit(2);
    auto outcomes = (*store)->AppendAnswers(batch);
    if (!outcomes.ok()) _exit(3);
    const char byte = 1;
    if (write(fds[1], &byte, 1) != 1) _exit(4);
    for (;;) pause();
  }
  close(fds[1]);
  char byte = 0;
  const ssize_t got = read(fds[0], &byte, 1);
  close(fds[0]);
  kill(child, SIGKILL);
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  ASSERT_EQ(got, 1) << "the child failed, exit status "
                    << (WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
  EXPECT_TRUE(WIFSIGNALED(wstatus));

  // The child died with the WAL un-checkpointed.
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/curator.db-wal"));
  auto store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  std::vector<AnswerRow> rows = AllAnswers(*store);
  ASSERT_EQ(rows.size(), batch.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].node, batch[i].node);
    EXPECT_EQ(rows[i].payload, batch[i].payload);
  }
}

TEST(CuratorStoreTest, BatchSurvivesSigkillSynchronousFull) {
  AppendThenGetKilled(/*synchronous_full=*/true);
}

TEST(CuratorStoreTest, BatchSurvivesSigkillSynchronousNormal) {
  AppendThenGetKilled(/*synchronous_full=*/false);
}

// Group commit. Another connection holds the database's lock, so the first
// writer leads and waits in BEGIN; the writers arriving meanwhile queue and
// are written by the next leader in one commit.
class HeldLock {
 public:
  explicit HeldLock(const std::string& dir) {
    EXPECT_EQ(sqlite3_open((dir + "/curator.db").c_str(), &db_), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db_, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr),
              SQLITE_OK);
  }
  void Release() {
    if (db_ == nullptr) return;
    EXPECT_EQ(sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db_);
    db_ = nullptr;
  }
  ~HeldLock() { Release(); }

 private:
  sqlite3* db_ = nullptr;
};

TEST(CuratorStoreTest, ConcurrentWritesShareACommitAndKeepTheirOutcomes) {
  TempDir dir;
  CuratorStore::Options options;
  options.busy_timeout_ms = 30000;
  auto store = OpenOrDie(dir.path(), options);
  ASSERT_NE(store, nullptr);
  const CuratorStore::WriteCounts before = store->write_counts();
  HeldLock held(dir.path());
  constexpr int kDistinct = 8, kSame = 4, kCaps = 4;
  std::vector<absl::StatusOr<std::vector<AppendOutcome>>> distinct(kDistinct),
      same(kSame);
  std::vector<absl::Status> caps(kCaps);
  std::vector<std::thread> threads;
  for (int i = 0; i < kDistinct; ++i) {
    threads.emplace_back([&, i] {
      distinct[i] = store->AppendAnswers(
          {Answer(1, 2 * i, absl::StrCat("d", i)), Answer(1, 2 * i + 1, "e")});
    });
  }
  for (int i = 0; i < kSame; ++i) {
    threads.emplace_back(
        [&, i] { same[i] = store->AppendAnswers({Answer(2, 0, "same")}); });
  }
  for (int i = 0; i < kCaps; ++i) {
    threads.emplace_back([&, i] {
      caps[i] = store->PutCapsAndAudit({{100 + i, "c"}}, absl::StrCat("d:", i),
                                       "check-in", "{}");
    });
  }
  absl::SleepFor(absl::Milliseconds(500));
  held.Release();
  for (std::thread& t : threads) t.join();

  for (int i = 0; i < kDistinct; ++i) {
    ASSERT_TRUE(distinct[i].ok()) << distinct[i].status();
    EXPECT_THAT(*distinct[i],
                ElementsAre(AppendOutcome::kStored, AppendOutcome::kStored));
  }
  // One node answered four times at once: stored once, three resends.
  int stored = 0, duplicates = 0;
  for (const auto& s : same) {
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_EQ(s->size(), 1u);
    stored += (*s)[0] == AppendOutcome::kStored;
    duplicates += (*s)[0] == AppendOutcome::kDuplicate;
  }
  EXPECT_EQ(stored, 1);
  EXPECT_EQ(duplicates, kSame - 1);
  for (const absl::Status& s : caps) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(AllAnswers(*store).size(), size_t{2 * kDistinct + 1});
  auto audit = store->ListAudit(0, 100);
  ASSERT_TRUE(audit.ok()) << audit.status();
  EXPECT_EQ(audit->size(), size_t{kCaps});
  // 16 writes; the first leads alone (it waited for the lock), the rest
  // queued behind it: two commits, a few more if a thread was slow to start.
  const CuratorStore::WriteCounts after = store->write_counts();
  EXPECT_EQ(after.writes - before.writes, uint64_t{kDistinct + kSame + kCaps});
  EXPECT_LE(after.commits - before.commits, 4u);

  // What was grouped survives a reopen, indexed: a resend is a duplicate.
  store.reset();
  store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  auto again = store->AppendAnswers({Answer(2, 0, "same"), Answer(1, 3, "e")});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_THAT(*again, ElementsAre(AppendOutcome::kDuplicate,
                                  AppendOutcome::kDuplicate));
}

// A group whose commit fails is written again write by write: one write's
// error (a spoiled campaign) is not its neighbours'.
TEST(CuratorStoreTest, AFailedGroupIsRetriedWriteByWrite) {
  TempDir dir;
  CuratorStore::Options options;
  options.busy_timeout_ms = 30000;
  auto store = OpenOrDie(dir.path(), options);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->AppendAnswers({Answer(1, 1, "aa")}).ok());
  ExecSql(dir.path(), "UPDATE answer_log SET answers = x'0101' WHERE id = 1");
  HeldLock held(dir.path());
  absl::Status first;
  std::thread leader([&] { first = store->Audit("operator", "first", "{}"); });
  absl::SleepFor(absl::Milliseconds(200));  // the leader waits in BEGIN
  absl::StatusOr<std::vector<AppendOutcome>> spoiled, good1, good2;
  absl::Status audit;
  std::vector<std::thread> threads;
  threads.emplace_back([&] { spoiled = store->AppendAnswers({Answer(1, 1, "aa")}); });
  threads.emplace_back([&] { good1 = store->AppendAnswers({Answer(2, 5, "x")}); });
  threads.emplace_back([&] { good2 = store->AppendAnswers({Answer(2, 6, "y")}); });
  threads.emplace_back([&] { audit = store->Audit("operator", "second", "{}"); });
  absl::SleepFor(absl::Milliseconds(300));
  held.Release();
  leader.join();
  for (std::thread& t : threads) t.join();

  EXPECT_TRUE(first.ok()) << first;
  EXPECT_EQ(spoiled.status().code(), absl::StatusCode::kDataLoss)
      << spoiled.status();
  EXPECT_THAT(spoiled.status().message(), HasSubstr("answer_log row 1"));
  ASSERT_TRUE(good1.ok()) << good1.status();
  EXPECT_THAT(*good1, ElementsAre(AppendOutcome::kStored));
  ASSERT_TRUE(good2.ok()) << good2.status();
  EXPECT_THAT(*good2, ElementsAre(AppendOutcome::kStored));
  EXPECT_TRUE(audit.ok()) << audit;
  const std::vector<AnswerRow> rows = CampaignAnswers(*store, 2);
  EXPECT_EQ(rows.size(), 2u);
  auto log = store->ListAudit(0, 10);
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(log->size(), 2u);
}

}  // namespace
}  // namespace ldpgraph::store
