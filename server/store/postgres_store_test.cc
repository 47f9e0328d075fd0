// The PostgreSQL store against a real server (LocalPostgres): the store
// contract it shares with SQLite, and what several curator processes on one
// database rely on (roles.h): exactly once across stores, closes seen by
// appends, the operator lease, a database that crashes and comes back.
#include "server/store/postgres_store.h"

#include <libpq-fe.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/store/local_postgres.h"

namespace ldpgraph::store {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// One server for the whole binary; a database per test.
class PostgresStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string pattern = ::testing::TempDir() + "/pgstore_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    // The server runs as another user when the test runs as root: it must
    // be able to enter the folder.
    ASSERT_EQ(chmod(pattern.c_str(), 0755), 0);
    dir_ = new std::string(pattern);
    LocalPostgres::Options o;
    o.dir = *dir_ + "/pg";
    o.fsync = false;
    auto pg = LocalPostgres::Start(o);
    ASSERT_TRUE(pg.ok()) << pg.status();
    pg_ = pg->release();
  }
  static void TearDownTestSuite() {
    delete pg_;
    pg_ = nullptr;
    std::error_code ec;
    std::filesystem::remove_all(*dir_, ec);
    delete dir_;
  }

  void SetUp() override {
    ASSERT_NE(pg_, nullptr);
    // A database of its own for each test.
    database_ = absl::StrCat(
        "t_", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    for (char& ch : database_) ch = static_cast<char>(std::tolower(ch));
    Sql(absl::StrCat("DROP DATABASE IF EXISTS ", database_));
    Sql(absl::StrCat("CREATE DATABASE ", database_));
  }

  std::string Url() const {
    return absl::StrCat("postgres://", pg_->user(), "@127.0.0.1:", pg_->port(),
                        "/", database_);
  }

  std::unique_ptr<CuratorStore> OpenOrDie() {
    PostgresStore::Options o;
    o.url = Url();
    o.password_file = pg_->password_file();
    auto store = PostgresStore::Open(o);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  // Runs a statement on the role's own database as the role.
  static void Sql(const std::string& sql, const std::string& database = "") {
    const std::string info = absl::StrCat(
        "host=127.0.0.1 port=", pg_->port(), " user=", pg_->user(),
        " password=", pg_->password(),
        " dbname=", database.empty() ? pg_->database() : database);
    PGconn* c = PQconnectdb(info.c_str());
    ASSERT_EQ(PQstatus(c), CONNECTION_OK) << PQerrorMessage(c);
    PGresult* r = PQexec(c, sql.c_str());
    EXPECT_TRUE(PQresultStatus(r) == PGRES_COMMAND_OK ||
                PQresultStatus(r) == PGRES_TUPLES_OK)
        << sql << ": " << PQresultErrorMessage(r);
    PQclear(r);
    PQfinish(c);
  }

  static int64_t CreateCampaign(CuratorStore& s) {
    auto id = s.CreateCampaign([](int64_t id) { return absl::StrCat("rec", id); });
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : 0;
  }

  static AnswerRow Answer(int64_t campaign, uint32_t node, std::string payload,
                          bool refusal = false) {
    AnswerRow a;
    a.campaign = campaign;
    a.node = node;
    a.payload = std::move(payload);
    a.refusal = refusal;
    return a;
  }

  static std::vector<std::pair<uint32_t, std::string>> Answers(
      CuratorStore& s, int64_t campaign) {
    std::vector<std::pair<uint32_t, std::string>> out;
    EXPECT_TRUE(s.ForEachAnswer(campaign, [&](const AnswerRow& a) {
                   out.emplace_back(a.node, a.payload);
                   return true;
                 }).ok());
    return out;
  }

  static std::string* dir_;
  static LocalPostgres* pg_;
  std::string database_;
};

std::string* PostgresStoreTest::dir_ = nullptr;
LocalPostgres* PostgresStoreTest::pg_ = nullptr;

TEST_F(PostgresStoreTest, RoundTripsEveryRecord) {
  auto s = OpenOrDie();
  ASSERT_NE(s, nullptr);
  EXPECT_THAT(s->Describe(), HasSubstr(absl::StrCat("postgres 127.0.0.1:",
                                                    pg_->port(), "/", database_)));
  const int64_t c = CreateCampaign(*s);
  EXPECT_EQ(c, 1);
  EXPECT_EQ(CreateCampaign(*s), 2);
  auto campaigns = s->ListCampaigns();
  ASSERT_TRUE(campaigns.ok());
  ASSERT_EQ(campaigns->size(), 2u);
  EXPECT_EQ((*campaigns)[0].record, "rec1");
  EXPECT_TRUE((*campaigns)[0].open);
  ASSERT_TRUE(s->UpdateCampaignAndAudit(CampaignRow{1, false, "closed1"},
                                        "admin", "campaign.close", "{}")
                  .ok());
  EXPECT_EQ(s->UpdateCampaign(CampaignRow{9, false, "x"}).code(),
            absl::StatusCode::kNotFound);
  campaigns = s->ListCampaigns();
  EXPECT_FALSE((*campaigns)[0].open);
  EXPECT_EQ((*campaigns)[0].record, "closed1");

  // Caps and keys: replaced, read back by node; bytes of every value.
  std::string binary("\0\x01\xff\"\\,{}", 9);
  ASSERT_TRUE(s->PutCaps({{5, "a"}, {3, binary}, {5, "b"}}).ok());
  ASSERT_TRUE(s->PutCapsAndAudit({{7, "c"}}, "agent", "enrol", "{\"n\":1}").ok());
  std::vector<std::pair<uint32_t, std::string>> caps;
  ASSERT_TRUE(s->ForEachCaps([&](uint32_t n, const std::string& b) {
                 caps.emplace_back(n, b);
               }).ok());
  EXPECT_THAT(caps, ElementsAre(std::pair<uint32_t, std::string>{3, binary},
                                std::pair<uint32_t, std::string>{5, "b"},
                                std::pair<uint32_t, std::string>{7, "c"}));
  ASSERT_TRUE(s->PutNodeKeys({{2, binary}}).ok());
  std::vector<std::pair<uint32_t, std::string>> keys;
  ASSERT_TRUE(s->ForEachNodeKey([&](uint32_t n, const std::string& k) {
                 keys.emplace_back(n, k);
               }).ok());
  EXPECT_THAT(keys, ElementsAre(std::pair<uint32_t, std::string>{2, binary}));
  ASSERT_TRUE(s->PutNodeKeys({{9, "k9"}}).ok());
  keys.clear();
  ASSERT_TRUE(s->GetNodeKeys({9, 4, 2}, [&](uint32_t n, const std::string& k) {
                 keys.emplace_back(n, k);
               }).ok());
  EXPECT_THAT(keys, ElementsAre(std::pair<uint32_t, std::string>{2, binary},
                                std::pair<uint32_t, std::string>{9, "k9"}));

  // Audit: the close, the enrolment, one more; paged.
  ASSERT_TRUE(s->Audit("me", "x", "{}").ok());
  auto audit = s->ListAudit(0, 2);
  ASSERT_TRUE(audit.ok());
  ASSERT_EQ(audit->size(), 2u);
  EXPECT_EQ((*audit)[0].action, "campaign.close");
  EXPECT_EQ((*audit)[1].details_json, "{\"n\":1}");
  audit = s->ListAudit((*audit)[1].sequence, 10);
  ASSERT_EQ(audit->size(), 1u);
  EXPECT_EQ((*audit)[0].actor, "me");
  EXPECT_EQ(s->ListAudit(0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);

  // Sealed messages by recipient and campaign.
  ASSERT_TRUE(s->PutSealed({{0, "c1", 1, 2, "m1"},
                            {0, "c2", 1, 3, "m2"},
                            {0, "c1", 4, 3, binary}})
                  .ok());
  auto sealed = s->FetchSealed({3}, 0, 10);
  ASSERT_TRUE(sealed.ok());
  ASSERT_EQ(sealed->size(), 2u);
  EXPECT_EQ((*sealed)[1].ciphertext, binary);
  sealed = s->FetchSealed({2, 3}, 0, 10, "c1");
  ASSERT_EQ(sealed->size(), 2u);
  EXPECT_EQ((*sealed)[0].to_node, 2u);
  sealed = s->FetchSealed({2, 3}, (*sealed)[0].sequence, 10, "c1");
  ASSERT_EQ(sealed->size(), 1u);
  EXPECT_EQ((*sealed)[0].from_node, 4u);

  // Fleet plan and results.
  ASSERT_TRUE(s->PutFleetPlan({"h0", "h1"}).ok());
  EXPECT_THAT(*s->GetFleetPlan(), ElementsAre("h0", "h1"));
  ASSERT_TRUE(s->PutFleetPlan({}).ok());
  EXPECT_TRUE(s->GetFleetPlan()->empty());
  auto result = s->AddResult([](int64_t id) { return absl::StrCat("r", id); },
                             "results/1.bin");
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(s->GetResult(*result)->record, "r1");
  EXPECT_EQ(s->GetResult(*result)->matrix_path, "results/1.bin");
  EXPECT_EQ(s->ListResults()->size(), 1u);
  EXPECT_EQ(s->GetResult(7).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(PostgresStoreTest, AnswersStoredOnceAcrossReopen) {
  auto s = OpenOrDie();
  ASSERT_NE(s, nullptr);
  const int64_t c = CreateCampaign(*s);
  auto out = s->AppendAnswers({Answer(c, 4, "d"), Answer(c, 1, "a"),
                               Answer(c, 4, "d"), Answer(c, 1, "z"),
                               Answer(c, 2, "", /*refusal=*/true)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(*out, ElementsAre(AppendOutcome::kStored, AppendOutcome::kStored,
                                AppendOutcome::kDuplicate,
                                AppendOutcome::kConflict,
                                AppendOutcome::kStored));
  s.reset();
  s = OpenOrDie();  // the index is rebuilt from the database
  out = s->AppendAnswers({Answer(c, 1, "a"), Answer(c, 4, "x"), Answer(c, 3, "c")});
  ASSERT_TRUE(out.ok());
  EXPECT_THAT(*out, ElementsAre(AppendOutcome::kDuplicate,
                                AppendOutcome::kConflict, AppendOutcome::kStored));
  using P = std::pair<uint32_t, std::string>;
  EXPECT_THAT(Answers(*s, c),
              ElementsAre(P{1, "a"}, P{2, ""}, P{3, "c"}, P{4, "d"}));
  std::vector<std::tuple<int64_t, uint32_t, bool>> keys;
  ASSERT_TRUE(s->ForEachAnswerKey([&](int64_t c, uint32_t n, bool r) {
                 keys.emplace_back(c, n, r);
               }).ok());
  EXPECT_EQ(keys.size(), 4u);
}

// The paged reads of the admin listings, as in SQLite (store_test.cc):
// results newest first before an id; a campaign's answers from a node on,
// refusals only if asked, including those another store wrote.
TEST_F(PostgresStoreTest, PagesOfResultsAndAnswers) {
  auto s = OpenOrDie();
  auto other = OpenOrDie();
  ASSERT_NE(s, nullptr);
  ASSERT_NE(other, nullptr);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(
        s->AddResult([](int64_t id) { return absl::StrCat("r", id); }, "").ok());
  }
  auto page = s->ListResultsBefore(INT64_MAX, 2);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].record, "r3");
  EXPECT_EQ((*page)[1].record, "r2");
  page = s->ListResultsBefore(2, 2);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].id, 1);
  EXPECT_EQ(s->ListResultsBefore(2, 0).status().code(),
            absl::StatusCode::kInvalidArgument);

  const int64_t c = CreateCampaign(*s);
  ASSERT_TRUE(s->AppendAnswers({Answer(c, 8, "h", true), Answer(c, 2, "b"),
                                Answer(c, 5, "e", true)})
                  .ok());
  ASSERT_TRUE(other->AppendAnswers({Answer(c, 6, "f", true)}).ok());
  const auto nodes = [](const std::vector<AnswerRow>& rows) {
    std::vector<uint32_t> out;
    for (const AnswerRow& r : rows) out.push_back(r.node);
    return out;
  };
  auto refusals = s->ListAnswers(c, 0, 2, true);
  ASSERT_TRUE(refusals.ok()) << refusals.status();
  EXPECT_THAT(nodes(*refusals), ElementsAre(5, 6));
  EXPECT_EQ((*refusals)[1].payload, "f");
  refusals = s->ListAnswers(c, 7, 2, true);
  ASSERT_TRUE(refusals.ok());
  EXPECT_THAT(nodes(*refusals), ElementsAre(8));
  auto all = s->ListAnswers(c, 0, 10, false);
  ASSERT_TRUE(all.ok());
  EXPECT_THAT(nodes(*all), ElementsAre(2, 5, 6, 8));
}

// Two frontends on one database: a report acknowledged by one and resent
// to the other is a duplicate; each learns the other's answers once.
TEST_F(PostgresStoreTest, TwoStoresStoreEachAnswerOnce) {
  auto a = OpenOrDie();
  auto b = OpenOrDie();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const int64_t c = CreateCampaign(*a);
  ASSERT_THAT(*a->AppendAnswers({Answer(c, 1, "one"), Answer(c, 2, "two")}),
              ElementsAre(AppendOutcome::kStored, AppendOutcome::kStored));
  auto out = b->AppendAnswers({Answer(c, 2, "two"), Answer(c, 1, "uno"),
                               Answer(c, 3, "three")});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(*out, ElementsAre(AppendOutcome::kDuplicate,
                                AppendOutcome::kConflict,
                                AppendOutcome::kStored));
  std::vector<uint32_t> learnt_by_b, learnt_by_a;
  ASSERT_TRUE(b->ForEachNewAnswerKey([&](int64_t, uint32_t n, bool) {
                 learnt_by_b.push_back(n);
               }).ok());
  EXPECT_THAT(learnt_by_b, ElementsAre(1, 2));  // a's, not its own 3
  ASSERT_TRUE(a->ForEachNewAnswerKey([&](int64_t, uint32_t n, bool) {
                 learnt_by_a.push_back(n);
               }).ok());
  EXPECT_THAT(learnt_by_a, ElementsAre(3));
  learnt_by_a.clear();
  ASSERT_TRUE(a->ForEachNewAnswerKey([&](int64_t, uint32_t n, bool) {
                 learnt_by_a.push_back(n);
               }).ok());
  EXPECT_TRUE(learnt_by_a.empty());  // once
  EXPECT_EQ(Answers(*a, c).size(), 3u);
  EXPECT_EQ(Answers(*b, c).size(), 3u);
}

// Many writers at once: every answer stored exactly once whichever store
// took it, however often it was sent.
TEST_F(PostgresStoreTest, ConcurrentStoresNeverStoreTwice) {
  constexpr int kStores = 4, kNodes = 2000, kRounds = 3;
  std::vector<std::unique_ptr<CuratorStore>> stores;
  for (int i = 0; i < kStores; ++i) stores.push_back(OpenOrDie());
  const int64_t c = CreateCampaign(*stores[0]);
  std::vector<int> stored(kStores, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStores; ++i) {
    threads.emplace_back([&, i] {
      for (int round = 0; round < kRounds; ++round) {
        for (int begin = (i * 37) % kNodes; begin < kNodes; begin += 250) {
          std::vector<AnswerRow> batch;
          for (int n = begin; n < std::min(kNodes, begin + 250); ++n) {
            batch.push_back(Answer(c, n, absl::StrCat("r", n)));
          }
          auto out = stores[i]->AppendAnswers(batch);
          ASSERT_TRUE(out.ok()) << out.status();
          for (AppendOutcome o : *out) {
            ASSERT_NE(o, AppendOutcome::kConflict);
            stored[i] += o == AppendOutcome::kStored;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  int total = 0;
  for (int n : stored) total += n;
  // Node 0..(first begin) are never sent by every store, but all of
  // [min begin, kNodes) are: store 0 starts at 0, so all are sent.
  EXPECT_EQ(total, kNodes);
  const auto answers = Answers(*stores[1], c);
  ASSERT_EQ(answers.size(), static_cast<size_t>(kNodes));
  for (int n = 0; n < kNodes; ++n) {
    EXPECT_EQ(answers[n].first, static_cast<uint32_t>(n));
  }
}

TEST_F(PostgresStoreTest, AnswersToACampaignClosedElsewhereAreNotStored) {
  auto op = OpenOrDie();
  auto frontend = OpenOrDie();
  const int64_t c = CreateCampaign(*op);
  const int64_t d = CreateCampaign(*op);
  ASSERT_TRUE(frontend->AppendAnswers({Answer(c, 1, "x")}).ok());
  ASSERT_TRUE(op->UpdateCampaign(CampaignRow{c, false, "closed"}).ok());
  auto out = frontend->AppendAnswers(
      {Answer(c, 1, "x"), Answer(c, 2, "y"), Answer(d, 2, "y")});
  ASSERT_TRUE(out.ok());
  // A resend of a stored answer is still a duplicate; a new one is refused.
  EXPECT_THAT(*out, ElementsAre(AppendOutcome::kDuplicate,
                                AppendOutcome::kClosed, AppendOutcome::kStored));
  EXPECT_EQ(Answers(*op, c).size(), 1u);
}

TEST_F(PostgresStoreTest, OneOperatorLeaseAtATime) {
  auto a = OpenOrDie();
  auto b = OpenOrDie();
  ASSERT_TRUE(*a->TryOperatorLease());
  EXPECT_TRUE(*a->TryOperatorLease());  // still
  EXPECT_FALSE(*b->TryOperatorLease());
  a.reset();  // its connections end: the lease is free
  bool taken = false;
  for (int i = 0; i < 100 && !taken; ++i) {
    taken = *b->TryOperatorLease();
    if (!taken) absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(taken);
}

TEST_F(PostgresStoreTest, FrontendsPublishTheirStatus) {
  auto a = OpenOrDie();
  auto b = OpenOrDie();
  ASSERT_TRUE(a->PutFrontendStatus("f1", "one").ok());
  ASSERT_TRUE(a->PutFrontendStatus("f1", "uno").ok());  // replaced
  ASSERT_TRUE(b->PutFrontendStatus("f2", "two").ok());
  auto fresh = a->FreshFrontendStatus(absl::Seconds(5));
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_THAT(*fresh, ElementsAre("uno", "two"));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_TRUE(a->FreshFrontendStatus(absl::Milliseconds(10))->empty());
}

TEST_F(PostgresStoreTest, RefusesPasswordsInTheUrlAndBadUrls) {
  PostgresStore::Options o;
  o.url = absl::StrCat("postgres://", pg_->user(), ":secret@127.0.0.1:",
                       pg_->port(), "/", database_);
  auto s = PostgresStore::Open(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("--store-password-file"));
  o.url = "postgres://[::1";
  EXPECT_EQ(PostgresStore::Open(o).status().code(),
            absl::StatusCode::kInvalidArgument);
  // The wrong password: the server refuses, named.
  const std::string wrong = *dir_ + "/wrong";
  FILE* f = fopen(wrong.c_str(), "w");
  fputs("not-the-password\n", f);
  fclose(f);
  o.url = Url();
  o.password_file = wrong;
  s = PostgresStore::Open(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.status().message(), HasSubstr("password authentication failed"));
  // Through OpenUrl, as --store gives it.
  EXPECT_EQ(CuratorStore::OpenUrl("mysql://x", "", *dir_, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto ok = CuratorStore::OpenUrl(Url(), pg_->password_file(), *dir_, {});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_THAT((*ok)->Describe(), HasSubstr("postgres"));
}

TEST_F(PostgresStoreTest, RefusesANewerSchema) {
  { auto s = OpenOrDie(); }
  Sql("INSERT INTO ldpgraph_schema VALUES (99, 0)", database_);
  PostgresStore::Options o;
  o.url = Url();
  o.password_file = pg_->password_file();
  auto s = PostgresStore::Open(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("schema version 99"));
}

// The database crashes mid-collection: calls fail UNAVAILABLE (nothing
// acknowledged), and once it is back the same store carries on; nothing
// committed is lost.
TEST_F(PostgresStoreTest, SurvivesADatabaseCrash) {
  auto s = OpenOrDie();
  const int64_t c = CreateCampaign(*s);
  ASSERT_TRUE(s->AppendAnswers({Answer(c, 1, "a")}).ok());
  ASSERT_TRUE(pg_->Kill().ok());
  auto out = s->AppendAnswers({Answer(c, 2, "b")});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kUnavailable) << out.status();
  ASSERT_TRUE(pg_->Restart().ok());
  out = s->AppendAnswers({Answer(c, 2, "b"), Answer(c, 1, "a")});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(*out, ElementsAre(AppendOutcome::kStored, AppendOutcome::kDuplicate));
  EXPECT_EQ(Answers(*s, c).size(), 2u);
}

// The failure the operator met (a standby exiting on "server closed the
// connection unexpectedly"): every kind of call, made first after the
// database restarted under an idle connection, succeeds.
TEST_F(PostgresStoreTest, FirstCallsAfterARestartSucceed) {
  auto s = OpenOrDie();
  const int64_t c = CreateCampaign(*s);
  ASSERT_TRUE(s->PutFleetPlan({"host-0"}).ok());
  for (int round = 0; round < 2; ++round) {
    // A fast shutdown in round 0 (the server tells its clients), a crash
    // in round 1 (the sockets just close).
    ASSERT_TRUE((round == 0 ? pg_->Stop() : pg_->Kill()).ok());
    ASSERT_TRUE(pg_->Restart().ok());
    auto plan = s->GetFleetPlan();  // a read outside a transaction
    ASSERT_TRUE(plan.ok()) << "round " << round << ": " << plan.status();
    EXPECT_THAT(*plan, ElementsAre("host-0"));
    ASSERT_TRUE(pg_->Kill().ok());
    ASSERT_TRUE(pg_->Restart().ok());
    auto out = s->AppendAnswers({Answer(c, 10 + round, "x")});  // a transaction
    ASSERT_TRUE(out.ok()) << "round " << round << ": " << out.status();
  }
}

// PostgreSQL's sequences skip ahead after a crash (by 32); campaign and
// result ids do not.
TEST_F(PostgresStoreTest, IdsHaveNoGapAfterACrash) {
  auto s = OpenOrDie();
  EXPECT_EQ(CreateCampaign(*s), 1);
  EXPECT_EQ(CreateCampaign(*s), 2);
  auto r1 = s->AddResult([](int64_t id) { return absl::StrCat("r", id); }, "");
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_EQ(*r1, 1);
  ASSERT_TRUE(pg_->Kill().ok());
  ASSERT_TRUE(pg_->Restart().ok());
  EXPECT_EQ(CreateCampaign(*s), 3);
  auto r2 = s->AddResult([](int64_t id) { return absl::StrCat("r", id); }, "");
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(*r2, 2);
  // Two stores creating at once take distinct, consecutive ids.
  auto t = OpenOrDie();
  std::vector<int64_t> ids(40);
  std::thread other([&] {
    for (int i = 0; i < 20; ++i) ids[20 + i] = CreateCampaign(*t);
  });
  for (int i = 0; i < 20; ++i) ids[i] = CreateCampaign(*s);
  other.join();
  std::sort(ids.begin(), ids.end());
  for (int i = 0; i < 40; ++i) EXPECT_EQ(ids[i], 4 + i);
}

// A restart of the database frees the lease; the operator that held it
// takes it back, and a standby that polls all along does not get it first.
TEST_F(PostgresStoreTest, TheLeaseStaysWithItsHolderAcrossARestart) {
  auto active = OpenOrDie();
  auto standby = OpenOrDie();
  ASSERT_TRUE(*active->TryOperatorLease());
  EXPECT_FALSE(*standby->TryOperatorLease());
  ASSERT_TRUE(pg_->Kill().ok());
  EXPECT_FALSE(active->TryOperatorLease().ok());   // the database is away
  EXPECT_FALSE(standby->TryOperatorLease().ok());
  ASSERT_TRUE(pg_->Restart().ok());
  // The standby polls first and often, as a standby's server does.
  for (int i = 0; i < 5; ++i) {
    auto held = standby->TryOperatorLease();
    ASSERT_TRUE(held.ok()) << held.status();
    EXPECT_FALSE(*held) << "poll " << i;
    absl::SleepFor(absl::Milliseconds(100));
  }
  auto held = active->TryOperatorLease();
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_TRUE(*held);
  EXPECT_FALSE(*standby->TryOperatorLease());
  // When the holder does not come back, the standby takes the lease once
  // its grace is over.
  ASSERT_TRUE(pg_->Kill().ok());
  active.reset();
  ASSERT_TRUE(pg_->Restart().ok());
  bool taken = false;
  const absl::Time start = absl::Now();
  while (!taken && absl::Now() - start < absl::Seconds(10)) {
    auto t = standby->TryOperatorLease();
    taken = t.ok() && *t;
    if (!taken) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(taken);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(2500));  // after its grace (3 s)
}

// The fleet planner run in the database: two stores (two frontends) answer
// from one plan. Hosts gather until the gathering is quiet for `settle`,
// the plan takes the live ones in the order they first claimed, a holder
// renews at either frontend, and a stranger is a spare until a holder's
// lease lapses, then takes that shard.
TEST_F(PostgresStoreTest, OneFleetPlanAcrossFrontends) {
  auto f1 = OpenOrDie();
  auto f2 = OpenOrDie();
  auto claim = [](CuratorStore& s, const std::string& host, int64_t now_ms) {
    FleetClaim q;
    q.host = host;
    q.now_ms = now_ms;
    q.settle_ms = 1000;
    q.lease_ms = 5000;
    q.min_hosts = 2;
    q.max_hosts = 100;
    q.num_nodes = 10;
    auto g = s.ClaimFleetShard(q);
    EXPECT_TRUE(g.ok()) << g.status();
    return g.ok() ? *g : FleetGrant();
  };
  using State = FleetGrant::State;
  EXPECT_EQ(claim(*f1, "host-b", 0).state, State::kWaiting);   // first
  FleetGrant g = claim(*f2, "host-a", 100);                    // second
  EXPECT_EQ(g.state, State::kWaiting);
  EXPECT_EQ(g.retry_after_ms, 1000);  // a new host: 1 s of quiet from now
  g = claim(*f1, "host-a", 600);  // renews: no new host
  EXPECT_EQ(g.state, State::kWaiting);
  EXPECT_EQ(g.retry_after_ms, 500);
  // Quiet for 1 s since host-a joined: the plan, by first claim.
  g = claim(*f2, "host-a", 1100);
  EXPECT_EQ(g.state, State::kAssigned);
  EXPECT_EQ(g.shard, 1u);
  EXPECT_EQ(g.shards, 2u);
  g = claim(*f1, "host-b", 1200);
  EXPECT_EQ(g.state, State::kAssigned);
  EXPECT_EQ(g.shard, 0u);
  // The plan is the store's, as PutFleetPlan's readers see it.
  EXPECT_THAT(*f2->GetFleetPlan(), ElementsAre("host-b", "host-a"));
  // A third host after the plan: a spare while both holders renew...
  EXPECT_EQ(claim(*f2, "host-c", 3000).state, State::kSpare);
  EXPECT_EQ(claim(*f1, "host-a", 5500).shard, 1u);  // renewed at the other
  // ...host-b's lease lapses (last renewal 1200 + 5000): host-c takes it.
  g = claim(*f1, "host-c", 6300);
  EXPECT_EQ(g.state, State::kAssigned);
  EXPECT_EQ(g.shard, 0u);
  EXPECT_THAT(*f1->GetFleetPlan(), ElementsAre("host-c", "host-a"));
  EXPECT_EQ(claim(*f2, "host-b", 6400).state, State::kSpare);  // came back late
}

}  // namespace
}  // namespace ldpgraph::store
