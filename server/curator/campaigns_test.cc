#include "server/curator/campaigns.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "absl/strings/match.h"
#include "common/testing/temp_folder.h"
#include "common/wire/codec.h"
#include "server/curator/test_requests.h"

namespace ldpgraph::curator {
namespace {

using ::testing::HasSubstr;

class CampaignBookTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  // A book over the same store, with a new ledger, as after a restart.
  void Reopen(uint32_t num_nodes = 20) {
    book_.reset();
    store_.reset();
    auto store = store::CuratorStore::Open(dir_.path(), {});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    ledger_ = std::make_unique<Ledger>(num_nodes);
    CampaignBook::Options o;
    o.num_nodes = num_nodes;
    o.max_batch = 1000;
    auto book = CampaignBook::Open(store_.get(), ledger_.get(), o);
    ASSERT_TRUE(book.ok()) << book.status();
    book_ = std::move(*book);
  }
  static Session Of(std::vector<uint32_t> nodes) {
    Session s;
    s.nodes = std::move(nodes);
    s.Index();
    return s;
  }
  static Session Range(uint32_t begin, uint32_t end) {
    std::vector<uint32_t> nodes;
    for (uint32_t v = begin; v < end; ++v) nodes.push_back(v);
    return Of(std::move(nodes));
  }
  static v1::CreateCampaignRequest Hds(double eps) {
    return requests::HdsCampaign(eps);
  }
  // A substitution campaign over `num_nodes` whose features question is
  // Hds(eps_x)'s.
  static v1::CreateCampaignRequest Substitution(uint32_t num_nodes,
                                                double eps_e, double eps_x) {
    return requests::SubstitutionCampaign(num_nodes, eps_e, eps_x);
  }
  static v1::Report Features(const std::string& id, uint32_t v, double value) {
    return requests::FeaturesReport(id, v, value);
  }
  static v1::Report Edges(const std::string& id, uint32_t v,
                          std::vector<uint32_t> neighbours) {
    return requests::EdgesReport(id, v, std::move(neighbours));
  }
  static v1::Report Refusal(const std::string& id, uint32_t v) {
    v1::Report r;
    r.set_campaign_id(id);
    r.set_node_id(v);
    r.mutable_refusal()->set_reason(v1::REFUSAL_REASON_BUDGET_EXHAUSTED);
    r.mutable_refusal()->set_message("spent");
    return r;
  }
  v1::ReportAck Ingest(const Session& s, std::vector<v1::Report> reports) {
    v1::ReportBatch batch;
    for (auto& r : reports) *batch.add_reports() = std::move(r);
    v1::ReportAck ack;
    absl::Status status = book_->Ingest(s, batch, &ack);
    EXPECT_TRUE(status.ok()) << status;
    return ack;
  }
  int Audited(absl::string_view action) {
    auto rows = store_->ListAudit(0, 10000);
    EXPECT_TRUE(rows.ok());
    int n = 0;
    for (const auto& r : *rows) n += r.action == action ? 1 : 0;
    return n;
  }

  TempFolder dir_;
  std::unique_ptr<store::CuratorStore> store_;
  std::unique_ptr<Ledger> ledger_;
  std::unique_ptr<CampaignBook> book_;
};

TEST_F(CampaignBookTest, ParseIdAcceptsOnlyCAndAPositiveNumber) {
  EXPECT_EQ(*CampaignBook::ParseId("c12"), 12);
  for (const char* bad : {"", "c", "c0", "c-1", "12", "cx", "C1"}) {
    EXPECT_EQ(CampaignBook::ParseId(bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_EQ(book_->Get("c1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(book_->Get("x1").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CampaignBookTest, CreateStoresAuditsAndBumpsTheGeneration) {
  const uint64_t g = book_->generation();
  auto c = book_->Create(Hds(1));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->id(), "c1");
  EXPECT_EQ(c->state(), v1::CAMPAIGN_STATE_OPEN);
  EXPECT_EQ(c->progress().targeted(), 20u);
  EXPECT_GT(book_->generation(), g);
  EXPECT_EQ(Audited("campaign.create"), 1);
  ASSERT_TRUE(book_->Create(Hds(2)).ok());
  auto all = book_->List();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id(), "c2");  // newest first
  EXPECT_EQ(book_->open_campaigns(), 2);
  const CampaignBook::Tally t = book_->Count();
  EXPECT_EQ(t.open, 2u);
  EXPECT_EQ(t.open_targeted, 40u);
  EXPECT_EQ(t.open_reports + t.open_refusals, 0u);
  ASSERT_TRUE(book_->Close("c1").ok());
  EXPECT_EQ(book_->Count().open_targeted, 20u);
}

TEST_F(CampaignBookTest, CreateRefusesWhatANodeWithCapsCannotAfford) {
  v1::BudgetCaps caps;
  caps.set_total(1.5);
  ledger_->SetCaps(3, caps);
  ASSERT_TRUE(book_->Create(Hds(1)).ok());
  // Node 3 has not answered c1 yet, but c1 still asks it for 1.
  auto c = book_->Create(Hds(0.75));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(c.status().message(),
              HasSubstr("1 of 20 targeted nodes cannot afford epsilon 0.75 on "
                        "'features'"));
  EXPECT_THAT(c.status().message(), HasSubstr("node 3: total 1.75 > cap 1.5"));
  EXPECT_EQ(book_->List().size(), 1u);  // nothing stored
  // Once c1 is closed it asks nothing more.
  ASSERT_TRUE(book_->Close("c1").ok());
  EXPECT_TRUE(book_->Create(Hds(0.5)).ok());
}

TEST_F(CampaignBookTest, CreateTargetsTheSelectedNodesOnly) {
  auto r = Hds(1);
  r.mutable_nodes()->set_all(false);
  r.mutable_nodes()->set_range_begin(5);
  r.mutable_nodes()->set_range_end(8);
  ASSERT_TRUE(book_->Create(r).ok());
  r.mutable_nodes()->Clear();
  for (uint32_t v : {9u, 2u}) r.mutable_nodes()->add_node_ids(v);
  auto listed = book_->Create(r);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->progress().targeted(), 2u);
  auto tasks = book_->PendingTasks(Range(0, 20));
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_THAT(tasks[0].node_ids(), ::testing::ElementsAre(5u, 6u, 7u));
  EXPECT_THAT(tasks[1].node_ids(), ::testing::ElementsAre(2u, 9u));
  auto ack = Ingest(Of({2, 6}), {Features("c1", 2, 0.5), Features("c2", 2, 0.5),
                                 Features("c1", 6, 0.5)});
  EXPECT_EQ(ack.results(0).code(),
            static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(ack.results(0).message(), HasSubstr("does not ask node 2"));
  EXPECT_EQ(ack.results(1).code(), 0);
  EXPECT_EQ(ack.results(2).code(), 0);
}

// Every Campaign reply echoes an explicit node list: it is capped, and a
// longer one is refused with the way out (a range or all).
TEST_F(CampaignBookTest, AnExplicitNodeListOverTheCapIsRefused) {
  auto r = Hds(1);
  r.mutable_nodes()->set_all(false);
  r.mutable_nodes()->mutable_node_ids()->Resize(kMaxListedNodes + 1, 0);
  auto refused = book_->Create(r);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("an explicit list holds at most 1000000 node ids, got "
                        "1000001; select a range (range_begin, range_end) or "
                        "all instead"));
  EXPECT_TRUE(book_->List().empty());
  // At the cap, the list's own checks apply (here: repeats).
  r.mutable_nodes()->mutable_node_ids()->RemoveLast();
  EXPECT_THAT(book_->Create(r).status().message(), HasSubstr("listed twice"));
}

// List pages newest first by store id, as the admin listing reads it.
TEST_F(CampaignBookTest, ListPagesNewestFirst) {
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(book_->Create(Hds(0.1)).ok());
  const auto ids = [](const std::vector<v1::Campaign>& cs) {
    std::vector<std::string> out;
    for (const auto& c : cs) out.push_back(c.id());
    return out;
  };
  EXPECT_THAT(ids(book_->List()),
              ::testing::ElementsAre("c5", "c4", "c3", "c2", "c1"));
  EXPECT_THAT(ids(book_->List(5, 2)), ::testing::ElementsAre("c4", "c3"));
  EXPECT_THAT(ids(book_->List(2, 2)), ::testing::ElementsAre("c1"));
  EXPECT_TRUE(book_->List(1, 2).empty());
  EXPECT_THAT(ids(book_->List(100, 1)), ::testing::ElementsAre("c5"));
}

TEST_F(CampaignBookTest, IngestTellsResendsFromConflicts) {
  ASSERT_TRUE(book_->Create(Hds(1)).ok());
  const Session s = Of({0, 1, 2});
  auto ack = Ingest(s, {Features("c1", 0, 0.5), Refusal("c1", 1)});
  EXPECT_EQ(ack.results(0).code(), 0);
  EXPECT_FALSE(ack.results(0).duplicate());
  EXPECT_EQ(ack.results(1).code(), 0);
  ack = Ingest(s, {Features("c1", 0, 0.5), Features("c1", 1, 0.5),
                   Features("c1", 0, -0.5)});
  EXPECT_TRUE(ack.results(0).duplicate());
  EXPECT_EQ(ack.results(1).code(),
            static_cast<int>(absl::StatusCode::kAlreadyExists));
  EXPECT_EQ(ack.results(2).code(),
            static_cast<int>(absl::StatusCode::kAlreadyExists));
  auto c = book_->Get("c1");
  EXPECT_EQ(c->progress().reported(), 1u);
  EXPECT_EQ(c->progress().refused(), 1u);
  EXPECT_EQ(c->progress().rejected(), 2u);
  const IngestCounters& n = book_->counters();
  EXPECT_EQ(n.reports_accepted.load(), 1u);
  EXPECT_EQ(n.refusals(), 1u);
  EXPECT_EQ(n.reports_duplicate.load(), 1u);
  EXPECT_EQ(
      n.rejected[static_cast<int>(absl::StatusCode::kAlreadyExists)].load(),
      2u);
  // Only the report is charged; the refusal is listed.
  EXPECT_DOUBLE_EQ(ledger_->Budgets({0, 1})[0].total_spent(), 1);
  EXPECT_DOUBLE_EQ(ledger_->Budgets({0, 1})[1].total_spent(), 0);
  auto refusals = book_->Refusals("c1");
  ASSERT_TRUE(refusals.ok());
  ASSERT_EQ(refusals->size(), 1u);
  EXPECT_EQ((*refusals)[0].node_id(), 1u);
  EXPECT_EQ((*refusals)[0].message(), "spent");
  auto reports = book_->Reports("c1");
  ASSERT_TRUE(reports.ok());
  ASSERT_EQ(reports->size(), 1u);
  EXPECT_EQ((*reports)[0].first, 0u);
}

TEST_F(CampaignBookTest, IngestRejectsAnOversizedBatchWhole) {
  ASSERT_TRUE(book_->Create(Hds(1)).ok());
  v1::ReportBatch batch;
  for (int i = 0; i < 1001; ++i) *batch.add_reports() = Features("c1", 0, 0.5);
  v1::ReportAck ack;
  absl::Status s = book_->Ingest(Of({0}), batch, &ack);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("at most 1000"));
  EXPECT_EQ(book_->Get("c1")->progress().reported(), 0u);
}

TEST_F(CampaignBookTest, QuorumClosesOnceAndWakesWaiters) {
  auto r = Hds(1);
  r.set_quorum(0.1);  // 2 of 20
  ASSERT_TRUE(book_->Create(r).ok());
  const uint64_t seen = book_->generation();
  std::atomic<uint64_t> woke{0};
  std::thread waiter([&] {
    woke = book_->WaitForChange(seen, absl::Now() + absl::Seconds(30));
  });
  const Session s = Range(0, 20);
  Ingest(s, {Features("c1", 0, 0.5)});
  EXPECT_EQ(book_->Get("c1")->state(), v1::CAMPAIGN_STATE_OPEN);
  Ingest(s, {Features("c1", 1, 0.5)});
  waiter.join();
  EXPECT_GT(woke.load(), seen);
  auto c = book_->Get("c1");
  EXPECT_EQ(c->state(), v1::CAMPAIGN_STATE_CLOSED);
  EXPECT_EQ(c->close_reason(), "quorum");
  EXPECT_EQ(Audited("campaign.close"), 1);
  EXPECT_TRUE(book_->PendingTasks(s).empty());
  auto late = Ingest(s, {Features("c1", 2, 0.5)});
  EXPECT_THAT(late.results(0).message(), HasSubstr("is closed"));
  // Without a change, WaitForChange returns at its deadline.
  const uint64_t now = book_->generation();
  EXPECT_EQ(book_->WaitForChange(now, absl::Now() + absl::Milliseconds(20)),
            now);
}

TEST_F(CampaignBookTest, CloseExpiredClosesCampaignsPastTheirDeadline) {
  auto r = Hds(1);
  r.set_deadline_unix_ms(absl::ToUnixMillis(absl::Now() + absl::Hours(1)));
  ASSERT_TRUE(book_->Create(r).ok());
  ASSERT_TRUE(book_->Create(Hds(2)).ok());  // no deadline
  EXPECT_EQ(*book_->CloseExpired(absl::Now()), 0);
  EXPECT_EQ(*book_->CloseExpired(absl::Now() + absl::Hours(2)), 1);
  EXPECT_EQ(book_->Get("c1")->close_reason(), "deadline");
  EXPECT_EQ(book_->Get("c2")->state(), v1::CAMPAIGN_STATE_OPEN);
  // Closing a closed campaign returns it unchanged.
  auto again = book_->Close("c1");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->close_reason(), "deadline");
}

TEST_F(CampaignBookTest, OpenRebuildsProgressAndTheLedger) {
  ASSERT_TRUE(book_->Create(Substitution(20, 1, 1.5)).ok());
  ASSERT_TRUE(book_->Create(Hds(1.5)).ok());  // the same features question
  const Session s = Range(0, 4);
  Ingest(s, {Edges("c1", 0, {1, 7}), Edges("c1", 1, {0}), Refusal("c1", 2),
             Features("c2", 0, 0.5), Features("c2", 3, 0.5)});
  Reopen();
  auto c1 = book_->Get("c1");
  EXPECT_EQ(c1->progress().reported(), 2u);
  EXPECT_EQ(c1->progress().refused(), 1u);
  EXPECT_EQ(book_->Get("c2")->progress().reported(), 2u);
  auto b = ledger_->Budgets({0, 1, 2, 3});
  EXPECT_DOUBLE_EQ(b[0].total_spent(), 2.5);  // features charged once
  EXPECT_DOUBLE_EQ(b[1].total_spent(), 2.5);
  EXPECT_DOUBLE_EQ(b[2].total_spent(), 0);
  EXPECT_DOUBLE_EQ(b[3].total_spent(), 1.5);
  EXPECT_DOUBLE_EQ(b[3].spent().at("features"), 1.5);
  // The rebuilt state goes on: node 1 is no longer asked by c1.
  auto tasks = book_->PendingTasks(s);
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_THAT(tasks[0].node_ids(), ::testing::ElementsAre(3u));
  EXPECT_THAT(tasks[1].node_ids(), ::testing::ElementsAre(1u, 2u));
}

// A campaign's spec is compiled once, when it is created or loaded, and
// kept: Spec hands out that one compiled spec (the same object each time),
// whose keys are those the wire's helpers derive, and whose mechanism is
// the one reports are checked and estimated with.
TEST_F(CampaignBookTest, SpecIsCompiledOnceAndKeptWithTheCampaign) {
  ASSERT_TRUE(book_->Create(Hds(1)).ok());
  ASSERT_TRUE(book_->Create(Substitution(20, 1, 1.5)).ok());
  for (int restarts = 0; restarts < 2; ++restarts) {
    SCOPED_TRACE(restarts == 0 ? "created" : "loaded");
    auto hds = book_->Spec("c1");
    ASSERT_TRUE(hds.ok()) << hds.status();
    EXPECT_EQ(hds->get(), book_->Spec("c1")->get());  // not compiled again
    ASSERT_NE((*hds)->feature(), nullptr);
    EXPECT_EQ((*hds)->feature()->kind(), MechanismKind::kHds);
    EXPECT_EQ((*hds)->feature()->epsilon(), 1);
    EXPECT_EQ((*hds)->Key(v1::ATTRIBUTE_FEATURES).Canonical(),
              wire::WireQueryKey(v1::ATTRIBUTE_FEATURES, Hds(1).spec())
                  .Canonical());
    auto sub = book_->Spec("c2");
    ASSERT_TRUE(sub.ok()) << sub.status();
    ASSERT_NE((*sub)->substitution_features(), nullptr);
    const std::vector<QueryKey> questions = wire::CampaignQuestions(
        v1::ATTRIBUTE_EDGES, Substitution(20, 1, 1.5).spec());
    ASSERT_EQ(questions.size(), 2u);
    EXPECT_EQ((*sub)->substitution_features()
                  ->Key(v1::ATTRIBUTE_FEATURES)
                  .Canonical(),
              questions[0].Canonical());
    EXPECT_EQ((*sub)->Key(v1::ATTRIBUTE_EDGES).Canonical(),
              questions[1].Canonical());
    EXPECT_EQ(book_->Spec("c3").status().code(), absl::StatusCode::kNotFound);
    Reopen();
  }
}

// Several sessions ingest at once, two per shard of nodes sending the same
// nodes' answers (identical for even nodes, different for odd ones), into
// two campaigns asking one features question between them. Every answer
// is stored exactly once, the others acknowledged as duplicates or refused
// as conflicts, and each node is charged once per question.
TEST_F(CampaignBookTest, ConcurrentIngestStoresEachAnswerOnce) {
  constexpr uint32_t kNodes = 2000;
  constexpr int kShards = 4, kThreads = 2 * kShards, kBatch = 7;
  Reopen(kNodes);
  ASSERT_TRUE(book_->Create(Substitution(kNodes, 1.0, 1.5)).ok());
  ASSERT_TRUE(book_->Create(Hds(1.5)).ok());
  std::atomic<uint64_t> stored{0}, duplicate{0}, conflict{0}, other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const uint32_t per = kNodes / kShards;
      const uint32_t begin = (t % kShards) * per;
      const Session s = Range(begin, begin + per);
      const double mine = t < kShards ? 0.5 : -0.5;
      std::vector<v1::Report> batch;
      auto send = [&] {
        v1::ReportBatch b;
        for (auto& r : batch) *b.add_reports() = std::move(r);
        batch.clear();
        v1::ReportAck ack;
        if (!book_->Ingest(s, b, &ack).ok()) {
          other += b.reports_size();
          return;
        }
        for (const auto& r : ack.results()) {
          if (r.code() == 0) {
            ++(r.duplicate() ? duplicate : stored);
          } else if (r.code() ==
                     static_cast<int>(absl::StatusCode::kAlreadyExists)) {
            ++conflict;
          } else {
            ++other;
          }
        }
      };
      for (uint32_t v = begin; v < begin + per; ++v) {
        const bool same = v % 2 == 0;
        const uint32_t u = (v + 1) % kNodes;
        batch.push_back(Features("c2", v, same ? 0.25 : mine));
        batch.push_back(
            Edges("c1", v, {same || t < kShards ? u : (v + 2) % kNodes}));
        if (batch.size() >= kBatch) send();
      }
      send();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(other.load(), 0u);
  EXPECT_EQ(stored.load(), 2u * kNodes);
  EXPECT_EQ(duplicate.load(), kNodes);  // even nodes, both campaigns
  EXPECT_EQ(conflict.load(), kNodes);   // odd nodes
  EXPECT_EQ(book_->counters().reports_accepted.load(), 2u * kNodes);
  for (const char* id : {"c1", "c2"}) {
    auto c = book_->Get(id);
    EXPECT_EQ(c->progress().reported(), kNodes) << id;
    EXPECT_EQ(c->state(), v1::CAMPAIGN_STATE_CLOSED) << id;  // quorum 1
    auto reports = book_->Reports(id);
    ASSERT_TRUE(reports.ok());
    ASSERT_EQ(reports->size(), kNodes) << id;
    for (uint32_t v = 0; v < kNodes; ++v) {
      ASSERT_EQ((*reports)[v].first, v) << id;
    }
  }
  EXPECT_EQ(Audited("campaign.close"), 2);
  auto check_ledger = [&] {
    for (const auto& b : ledger_->Budgets({})) {
      ASSERT_DOUBLE_EQ(b.total_spent(), 2.5) << b.node_id();
      ASSERT_DOUBLE_EQ(b.spent().at("features"), 1.5) << b.node_id();
    }
    EXPECT_EQ(ledger_->Budgets({}).size(), kNodes);
    const LedgerSummary summary = ledger_->Summary();
    EXPECT_EQ(summary.spent.at("edges").size(), kNodes);
    EXPECT_EQ(summary.spent.at("features").size(), kNodes);
  };
  check_ledger();
  Reopen(kNodes);  // the ledger rebuilt from the store agrees
  check_ledger();
}

}  // namespace
}  // namespace ldpgraph::curator
