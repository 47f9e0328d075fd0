#include "server/curator/curator.h"

#include <cmath>
#include <cstdlib>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/testing/temp_folder.h"
#include "common/wire/codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/curator/credentials.h"
#include "server/curator/stages.h"
#include "server/curator/test_requests.h"

namespace ldpgraph::curator {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kNodes = 20;
const std::string kKey(32, 'k');

class CuratorTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  void TearDown() override { curator_.reset(); }
  void Reopen(store::CuratorStore::Options store_options = {}) {
    curator_.reset();
    store_ = nullptr;
    auto c = requests::OpenTestCurator(dir_.path(), kNodes, kKey,
                                       store_options, &store_);
    ASSERT_TRUE(c.ok()) << c.status();
    curator_ = std::move(*c);
  }
  // The curator's two interfaces (curator.h).
  AgentSide& agents() { return curator_->agents(); }
  OperatorSide& operators() { return curator_->operators(); }
  absl::StatusOr<v1::ReportAck> Ingest(const Session& session,
                                       const v1::ReportBatch& batch) {
    return requests::Ingest(agents(), session, batch);
  }
  static v1::CreateCampaignRequest Hds(double eps) {
    return requests::HdsCampaign(eps);
  }
  std::shared_ptr<const Session> Enrol(std::vector<uint32_t> nodes,
                                       double cap_total = 0) {
    v1::EnrolRequest req;
    for (uint32_t v : nodes) {
      auto* n = req.add_nodes();
      n->set_node_id(v);
      n->set_secret(NodeCredential(kKey, v));
      if (cap_total > 0) n->mutable_caps()->set_total(cap_total);
    }
    auto s = agents().Enrol(req);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : nullptr;
  }
  // A valid HDS report of node v to campaign id.
  static v1::Report Report(const std::string& id, uint32_t v, double value) {
    return requests::FeaturesReport(id, v, value);
  }
  TempFolder dir_;  // outlives curator_
  std::unique_ptr<Curator> curator_;
  // The store curator_ owns, for the tests that look beneath the curator.
  store::CuratorStore* store_ = nullptr;
};

// The credentials themselves: credentials_test.
// --- check-ins -------------------------------------------------------------

v1::CheckInRequest CheckInOf(std::vector<uint32_t> nodes, double cap_total = 4,
                             const std::string& key = kKey) {
  v1::CheckInRequest req;
  req.set_device_name("phone");
  for (uint32_t v : nodes) {
    auto* n = req.add_nodes();
    n->set_node_id(v);
    n->set_secret(NodeCredential(key, v));
    n->mutable_caps()->set_total(cap_total);
  }
  return req;
}

TEST_F(CuratorTest, ACheckInIsServedItsTasksThenFindsNothingOnceAnswered) {
  const absl::Time now = absl::Now();
  auto idle = agents().CheckIn(CheckInOf({3}), now);
  ASSERT_TRUE(idle.ok()) << idle.status();
  EXPECT_EQ(idle->outcome, CheckInDesk::Outcome::kIdle);
  EXPECT_EQ(idle->session, nullptr);
  auto campaign = operators().CreateCampaign(Hds(1));
  ASSERT_TRUE(campaign.ok()) << campaign.status();
  auto served = agents().CheckIn(CheckInOf({3}), now);
  ASSERT_TRUE(served.ok()) << served.status();
  ASSERT_EQ(served->outcome, CheckInDesk::Outcome::kServed);
  ASSERT_EQ(served->tasks.size(), 1u);
  EXPECT_THAT(served->tasks[0].node_ids(), ::testing::ElementsAre(3));
  EXPECT_GT(served->retry_after, absl::Seconds(40));  // 60 s +- 20 %
  EXPECT_EQ(served->session_ttl, CheckInDesk::Options().session_ttl);
  // The session submits for its node, and for no other.
  auto session = agents().sessions().Find(served->session->token);
  ASSERT_TRUE(session.ok()) << session.status();
  v1::ReportBatch batch;
  *batch.add_reports() = Report(campaign->id(), 3, 0.5);
  *batch.add_reports() = Report(campaign->id(), 4, 0.5);
  auto ack = Ingest(**session, batch);
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->results(0).code(), 0);
  EXPECT_EQ(ack->results(1).code(), int(absl::StatusCode::kPermissionDenied));
  auto again = agents().CheckIn(CheckInOf({3}), now);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->outcome, CheckInDesk::Outcome::kIdle);
  const v1::CuratorStatus st = operators().Status();
  EXPECT_EQ(st.check_ins(), 3u);
  EXPECT_EQ(st.devices_seen(), 1u);
  EXPECT_EQ(st.check_ins_served(), 1u);
  EXPECT_EQ(st.check_ins_idle(), 2u);
  EXPECT_EQ(st.check_in_sessions(), 1u);
}

TEST_F(CuratorTest, ACheckInWithABadCredentialRecordsNothing) {
  auto bad = agents().CheckIn(CheckInOf({2}, 4, std::string(32, 'x')),
                               absl::Now());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(bad.status().message(), HasSubstr("node 2"));
  EXPECT_EQ(operators().Status().check_ins(), 0u);
  EXPECT_THAT(agents().CheckIn(CheckInOf({1, 1}), absl::Now()).status().message(),
              HasSubstr("node 1 listed twice"));
  EXPECT_EQ(agents().CheckIn(CheckInOf({}), absl::Now()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A device checking in again with its policy unchanged costs no store
// write: its caps are recorded (and audited) once.
TEST_F(CuratorTest, AnUnchangedDeviceChecksInWithoutAStoreWrite) {
  const auto audit_rows = [&] { return operators().store().ListAudit(0, 100000)->size(); };
  const size_t before = audit_rows();
  ASSERT_TRUE(agents().CheckIn(CheckInOf({5}, 3), absl::Now()).ok());
  EXPECT_EQ(audit_rows(), before + 1);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(agents().CheckIn(CheckInOf({5}, 3), absl::Now()).ok());
  }
  EXPECT_EQ(audit_rows(), before + 1);
  ASSERT_TRUE(agents().CheckIn(CheckInOf({5}, 2), absl::Now()).ok());
  EXPECT_EQ(audit_rows(), before + 2);
  auto budgets = operators().ledger().Budgets({5});
  ASSERT_EQ(budgets.size(), 1u);
  EXPECT_EQ(budgets[0].caps().total(), 2);
}

TEST_F(CuratorTest, CheckInsBeyondTheRateArePacedAndOpenNothing) {
  CheckInDesk::Options desk;
  desk.max_per_second = 2;
  desk.session_ttl = absl::Milliseconds(200);
  curator_.reset();
  auto c = requests::OpenTestCurator(dir_.path(), kNodes, kKey, {}, nullptr,
                                     desk);
  ASSERT_TRUE(c.ok()) << c.status();
  curator_ = std::move(*c);
  ASSERT_TRUE(operators().CreateCampaign(Hds(1)).ok());
  const absl::Time now = absl::Now();
  std::vector<std::string> tokens;
  for (uint32_t v = 0; v < 2; ++v) {
    auto r = agents().CheckIn(CheckInOf({v}), now);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->outcome, CheckInDesk::Outcome::kServed);
    tokens.push_back(r->session->token);
  }
  auto paced = agents().CheckIn(CheckInOf({2}), now);
  ASSERT_TRUE(paced.ok());
  EXPECT_EQ(paced->outcome, CheckInDesk::Outcome::kPaced);
  EXPECT_EQ(paced->retry_after, absl::Milliseconds(500));
  EXPECT_TRUE(paced->tasks.empty());
  EXPECT_EQ(operators().Status().check_in_sessions(), 2u);
  EXPECT_EQ(operators().Status().check_ins_paced(), 1u);
  // Sessions lapse after their TTL: refused, then forgotten. (600 ms: past
  // the paced device's slot, and a token has accrued again.)
  absl::SleepFor(absl::Milliseconds(600));
  auto lapsed = agents().sessions().Find(tokens[0]);
  EXPECT_EQ(lapsed.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(lapsed.status().message(), HasSubstr("lapsed"));
  auto next = agents().CheckIn(CheckInOf({2}), absl::Now());
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->outcome, CheckInDesk::Outcome::kServed);
  EXPECT_EQ(operators().Status().check_in_sessions(), 1u);
}

TEST_F(CuratorTest, EnrolRefusesAnotherNodesCredential) {
  v1::EnrolRequest req;
  auto* n = req.add_nodes();
  n->set_node_id(3);
  n->set_secret(NodeCredential(kKey, 4));  // node 4's secret for node 3
  auto s = agents().Enrol(req);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(s.status().message(), HasSubstr("node 3"));
}

// The request of one part of an enrolment in parts.
v1::EnrolRequest Part(std::vector<uint32_t> nodes, bool more,
                      std::string continues) {
  v1::EnrolRequest req;
  req.set_host_name("parts");
  req.set_more(more);
  req.set_continues(std::move(continues));
  for (uint32_t v : nodes) {
    auto* n = req.add_nodes();
    n->set_node_id(v);
    n->set_secret(NodeCredential(kKey, v));
    n->mutable_caps()->set_total(4);
  }
  return req;
}

TEST_F(CuratorTest, EnrolmentInPartsOpensOneSessionWithTheLastPart) {
  auto first = agents().Enrol(Part({5, 4, 3}, /*more=*/true, ""));
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string token = (*first)->token;
  EXPECT_EQ((*first)->nodes.size(), 3u);
  // Between parts the token authenticates nothing, and nothing is enrolled.
  EXPECT_EQ(agents().sessions().Find(token).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(operators().Status().enrolled_nodes(), 0u);
  // Each part's caps are recorded as it comes.
  EXPECT_TRUE(operators().ledger().Budgets({4})[0].caps_known());
  auto second = agents().Enrol(Part({0, 1}, /*more=*/true, token));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)->token, token);
  auto last = agents().Enrol(Part({9}, /*more=*/false, token));
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ((*last)->token, token);
  EXPECT_EQ((*last)->nodes, (std::vector<uint32_t>{0, 1, 3, 4, 5, 9}));
  auto found = agents().sessions().Find(token);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_TRUE((*found)->Covers(9));
  EXPECT_FALSE((*found)->Covers(2));
  EXPECT_EQ(operators().Status().enrolled_nodes(), 6u);
  // The token is spent: it continues nothing any more.
  EXPECT_EQ(agents().Enrol(Part({12}, false, token)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(operators().Status().sessions(), 1u);
}

TEST_F(CuratorTest, EnrollingInPartsAgainReplacesTheEarlierSession) {
  std::string old_token;
  for (int round = 0; round < 3; ++round) {
    auto a = agents().Enrol(Part({0, 1, 2}, true, ""));
    ASSERT_TRUE(a.ok()) << a.status();
    auto b = agents().Enrol(Part({3, 4}, false, (*a)->token));
    ASSERT_TRUE(b.ok()) << b.status();
    if (!old_token.empty()) {
      EXPECT_EQ(agents().sessions().Find(old_token).status().code(),
                absl::StatusCode::kUnauthenticated);
    }
    old_token = (*b)->token;
    EXPECT_EQ(operators().Status().sessions(), 1u);
    EXPECT_EQ(operators().Status().enrolled_nodes(), 5u);
  }
  // A one-call enrolment of the same nodes replaces it too.
  auto whole = Enrol({0, 1, 2, 3, 4});
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(operators().Status().sessions(), 1u);
  EXPECT_FALSE(agents().sessions().Find(old_token).ok());
}

TEST_F(CuratorTest, EnrolmentInPartsRefusesANodeTwiceAndAnUnknownToken) {
  auto a = agents().Enrol(Part({0, 1, 2}, true, ""));
  ASSERT_TRUE(a.ok()) << a.status();
  auto twice = agents().Enrol(Part({2, 3}, false, (*a)->token));
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(twice.status().message(), HasSubstr("node 2 listed twice"));
  // A failed part ends the enrolment.
  EXPECT_EQ(agents().Enrol(Part({3}, false, (*a)->token)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto unknown = agents().Enrol(Part({3}, false, "not-a-token"));
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(unknown.status().message(), HasSubstr("enrol again"));
  EXPECT_EQ(operators().Status().sessions(), 0u);
}

TEST_F(CuratorTest, EnrolRefusesMoreNodesThanMaxEnrolPerCall) {
  curator_.reset();
  auto store = store::CuratorStore::Open(dir_.path(), {});
  ASSERT_TRUE(store.ok()) << store.status();
  Curator::Options o;
  o.num_nodes = kNodes;
  o.node_key = kKey;
  o.max_enrol = 2;
  auto c = Curator::Open(std::move(*store), o);
  ASSERT_TRUE(c.ok()) << c.status();
  curator_ = std::move(*c);
  auto big = agents().Enrol(Part({0, 1, 2}, false, ""));
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(big.status().message(), HasSubstr("at most 2 allowed per call"));
  auto a = agents().Enrol(Part({0, 1}, true, ""));
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = agents().Enrol(Part({2}, false, (*a)->token));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->nodes.size(), 3u);
}

TEST_F(CuratorTest, CreateCampaignRejectsEachBadRequest) {
  auto expect_invalid = [&](v1::CreateCampaignRequest r, const char* what) {
    auto c = operators().CreateCampaign(r);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << what;
    EXPECT_THAT(c.status().message(), HasSubstr(what));
  };
  auto r = Hds(1);
  r.mutable_spec()->set_epsilon(-1);
  expect_invalid(r, "epsilon");
  r = Hds(1);
  r.set_attribute(v1::ATTRIBUTE_LABEL);
  expect_invalid(r, "answers about");
  r = Hds(1);
  r.set_quorum(1.5);
  expect_invalid(r, "quorum");
  r = Hds(1);
  r.set_deadline_unix_ms(1000);
  expect_invalid(r, "deadline");
  r = Hds(1);
  r.mutable_nodes()->set_range_end(5);
  expect_invalid(r, "exactly one");
  r = Hds(1);
  r.mutable_nodes()->set_all(false);
  r.mutable_nodes()->set_range_end(kNodes + 1);
  expect_invalid(r, "beyond");
  r = Hds(1);
  r.mutable_nodes()->set_all(false);
  r.mutable_nodes()->add_node_ids(2);
  r.mutable_nodes()->add_node_ids(2);
  expect_invalid(r, "listed twice");
  r = Hds(1);
  r.set_attribute(v1::ATTRIBUTE_EDGES);
  r.mutable_spec()->set_kind(v1::MECHANISM_KIND_EDGE_RR);
  r.mutable_spec()->set_dimension(kNodes + 1);
  expect_invalid(r, "number of nodes");
  EXPECT_TRUE(operators().campaigns().List().empty());
}

TEST_F(CuratorTest, LedgerSurvivesRestartAndChargesAQuestionOnce) {
  auto session = Enrol({0, 1, 2, 3}, /*cap_total=*/1.5);
  ASSERT_NE(session, nullptr);
  auto c1 = operators().CreateCampaign(Hds(1));
  ASSERT_TRUE(c1.ok()) << c1.status();
  v1::ReportBatch batch;
  for (uint32_t v : {0u, 1u}) *batch.add_reports() = Report("c1", v, 0.5);
  auto ack = Ingest(*session, batch);
  ASSERT_TRUE(ack.ok());
  // The same question again (another campaign) costs nothing more...
  auto c2 = operators().CreateCampaign(Hds(1));
  ASSERT_TRUE(c2.ok()) << c2.status();
  batch.Clear();
  *batch.add_reports() = Report("c2", 0, 0.5);
  ASSERT_TRUE(Ingest(*session, batch).ok());
  Reopen();
  auto budgets = operators().ledger().Budgets({0, 1, 2});
  ASSERT_EQ(budgets.size(), 3u);
  EXPECT_DOUBLE_EQ(budgets[0].total_spent(), 1.0);
  EXPECT_DOUBLE_EQ(budgets[1].total_spent(), 1.0);
  EXPECT_DOUBLE_EQ(budgets[2].total_spent(), 0.0);
  EXPECT_TRUE(budgets[0].caps_known());
  // ...but a different question at epsilon 1 would take nodes over 1.5.
  auto c3 = operators().CreateCampaign(Hds(0.75));
  EXPECT_EQ(c3.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(c3.status().message(), HasSubstr("cannot afford"));
  // Progress was rebuilt from the store.
  auto again = operators().campaigns().Get("c1");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->progress().reported(), 2u);
  EXPECT_EQ(again->state(), v1::CAMPAIGN_STATE_OPEN);
}

TEST_F(CuratorTest, QuorumClosesAndLateReportsAreRefused) {
  auto session = Enrol({0, 1});
  auto r = Hds(1);
  r.mutable_nodes()->set_all(false);
  r.mutable_nodes()->add_node_ids(0);
  r.mutable_nodes()->add_node_ids(1);
  r.set_quorum(0.5);
  ASSERT_TRUE(operators().CreateCampaign(r).ok());
  v1::ReportBatch batch;
  *batch.add_reports() = Report("c1", 0, 0.5);
  ASSERT_TRUE(Ingest(*session, batch).ok());
  auto c = operators().campaigns().Get("c1");
  EXPECT_EQ(c->state(), v1::CAMPAIGN_STATE_CLOSED);
  EXPECT_EQ(c->close_reason(), "quorum");
  batch.Clear();
  *batch.add_reports() = Report("c1", 1, 0.5);
  *batch.add_reports() = Report("c1", 0, 0.5);  // an identical resend
  auto ack = Ingest(*session, batch);
  ASSERT_TRUE(ack.ok());
  EXPECT_EQ(ack->results(0).code(),
            static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(ack->results(1).code(), 0);
  EXPECT_TRUE(ack->results(1).duplicate());
  Reopen();
  EXPECT_EQ(operators().campaigns().Get("c1")->state(), v1::CAMPAIGN_STATE_CLOSED);
}

// A refusal's reason must be one the curator knows: proto3 parses any
// number, and an unknown one would be stored with no meaning to show.
TEST_F(CuratorTest, RefusalWithAnUnknownReasonIsRejectedAndNotStored) {
  auto session = Enrol({0, 1, 2, 3});
  ASSERT_TRUE(operators().CreateCampaign(Hds(1)).ok());
  v1::ReportBatch batch;
  const std::vector<int> unknown = {5, 13, 99};
  for (size_t i = 0; i < unknown.size(); ++i) {
    v1::Report* r = batch.add_reports();
    r->set_campaign_id("c1");
    r->set_node_id(static_cast<uint32_t>(i));
    r->mutable_refusal()->set_reason(static_cast<v1::RefusalReason>(unknown[i]));
    r->mutable_refusal()->set_message("from a newer agent");
  }
  v1::Report* known = batch.add_reports();
  known->set_campaign_id("c1");
  known->set_node_id(3);
  known->mutable_refusal()->set_reason(v1::REFUSAL_REASON_POLICY);
  auto ack = Ingest(*session, batch);
  ASSERT_TRUE(ack.ok()) << ack.status();
  for (size_t i = 0; i < unknown.size(); ++i) {
    SCOPED_TRACE(unknown[i]);
    EXPECT_EQ(ack->results(static_cast<int>(i)).code(),
              static_cast<int>(absl::StatusCode::kInvalidArgument));
    EXPECT_EQ(ack->results(static_cast<int>(i)).message(),
              absl::StrCat("refusal reason ", unknown[i],
                           " is not a known RefusalReason"));
  }
  EXPECT_EQ(ack->results(3).code(), 0);
  auto refusals = operators().campaigns().Refusals("c1");
  ASSERT_TRUE(refusals.ok()) << refusals.status();
  ASSERT_EQ(refusals->size(), 1u);
  EXPECT_EQ((*refusals)[0].node_id(), 3u);
  EXPECT_EQ((*refusals)[0].reason(), v1::REFUSAL_REASON_POLICY);
  EXPECT_EQ(operators().campaigns().Get("c1")->progress().refused(), 1u);
}

// Closing stores the closed state and its audit entry in one transaction,
// and changes the campaign in memory only once that is done: on a full disk
// it stays open (in memory, in the store, in the audit log), and a retry
// once there is room closes it, audited once.
TEST_F(CuratorTest, ACloseThatFailsOnAFullDiskLeavesTheCampaignOpen) {
  store::CuratorStore::Options full;
  full.max_bytes = 64 * 1024;
  Reopen(full);
  ASSERT_TRUE(operators().CreateCampaign(Hds(1)).ok());
  // Audit rows, the largest first, until not even an empty one fits.
  store::CuratorStore& store = *store_;
  int filled = 0;
  for (size_t size : {4096, 512, 64, 0}) {
    for (int i = 0; i < 10000; ++i) {
      if (!store.Audit("filler", "fill", std::string(size, 'f')).ok()) {
        ++filled;
        break;
      }
    }
  }
  ASSERT_EQ(filled, 4) << "64 KiB never filled up";
  auto close_audits = [](store::CuratorStore& s) {
    auto rows = s.ListAudit(0, 100000);
    EXPECT_TRUE(rows.ok()) << rows.status();
    int n = 0;
    for (const auto& r : rows.ok() ? *rows : std::vector<store::AuditRow>()) {
      n += r.action == "campaign.close" ? 1 : 0;
    }
    return n;
  };
  auto stored_open = [](store::CuratorStore& s) {
    auto rows = s.ListCampaigns();
    EXPECT_TRUE(rows.ok()) << rows.status();
    if (!rows.ok() || rows->size() != 1) return false;
    v1::Campaign c;
    EXPECT_TRUE(c.ParseFromString((*rows)[0].record));
    return (*rows)[0].open && c.state() == v1::CAMPAIGN_STATE_OPEN;
  };

  for (int attempt = 0; attempt < 2; ++attempt) {
    SCOPED_TRACE(attempt);
    auto closed = operators().campaigns().Close("c1");
    EXPECT_EQ(closed.status().code(), absl::StatusCode::kResourceExhausted)
        << closed.status();
    EXPECT_EQ(operators().campaigns().Get("c1")->state(), v1::CAMPAIGN_STATE_OPEN);
    EXPECT_TRUE(stored_open(*store_));
    EXPECT_EQ(close_audits(*store_), 0);
  }

  // Room again (the store reopened without the limit): it reloads open, and
  // the retry closes it with one audit entry.
  Reopen();
  EXPECT_EQ(operators().campaigns().Get("c1")->state(), v1::CAMPAIGN_STATE_OPEN);
  auto closed = operators().campaigns().Close("c1");
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_EQ(closed->state(), v1::CAMPAIGN_STATE_CLOSED);
  EXPECT_EQ(closed->close_reason(), "operator");
  EXPECT_FALSE(stored_open(*store_));
  EXPECT_EQ(close_audits(*store_), 1);
}

TEST_F(CuratorTest, TasksGoOnlyToPendingNodesOfTheSession) {
  auto session = Enrol({0, 1, 2});
  ASSERT_TRUE(operators().CreateCampaign(Hds(1)).ok());
  auto tasks = agents().campaigns().PendingTasks(*session);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].node_ids_size(), 3);
  v1::ReportBatch batch;
  *batch.add_reports() = Report("c1", 1, 0.5);
  ASSERT_TRUE(Ingest(*session, batch).ok());
  tasks = agents().campaigns().PendingTasks(*session);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_THAT(std::vector<uint32_t>(tasks[0].node_ids().begin(),
                                    tasks[0].node_ids().end()),
              ::testing::ElementsAre(0u, 2u));
}

TEST_F(CuratorTest, RelayDeliversSealedMessagesToTheirRecipientsOnly) {
  auto alice = Enrol({0, 1});
  auto bob = Enrol({5});
  v1::RelayRequest req;
  auto* m = req.add_messages();
  m->set_campaign_id("c9");
  m->set_from_node(1);
  m->set_to_node(5);
  m->set_ciphertext("sealed");
  auto sent = agents().relay().Relay(*alice, req);
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_EQ(*sent, 1);
  auto got = agents().relay().Fetch(*bob, 0, 10);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].from_node(), 1u);
  EXPECT_EQ((*got)[0].ciphertext(), "sealed");
  EXPECT_TRUE(agents().relay().Fetch(*bob, (*got)[0].sequence(), 10)->empty());
  EXPECT_TRUE(agents().relay().Fetch(*alice, 0, 10)->empty());
  // A sender outside the session, a recipient outside the graph, a payload
  // over 64 KiB: refused, nothing stored.
  m->set_from_node(5);
  EXPECT_EQ(agents().relay().Relay(*alice, req).status().code(),
            absl::StatusCode::kPermissionDenied);
  m->set_from_node(0);
  m->set_to_node(kNodes);
  EXPECT_EQ(agents().relay().Relay(*alice, req).status().code(),
            absl::StatusCode::kInvalidArgument);
  m->set_to_node(5);
  m->set_ciphertext(std::string(65537, 'x'));
  EXPECT_EQ(agents().relay().Relay(*alice, req).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(agents().relay().Fetch(*bob, 0, 10)->size(), 1u);
}

// --- neighbour substitution ---------------------------------------------------

// The feature spec of the substitution campaigns below: the Hds(1.5)
// question of a features campaign.
v1::CreateCampaignRequest Substitution(double eps_e, double eps_x = 1.5) {
  return requests::SubstitutionCampaign(kNodes, eps_e, eps_x);
}

using requests::EdgesReport;

// A report charges eps_e on edges and the feature question on features,
// once, whichever campaign asked it first.
TEST_F(CuratorTest, SubstitutionChargesItsTwoQuestionsOnce) {
  auto session = Enrol({0, 1, 2});
  auto sub = operators().CreateCampaign(Substitution(1.0));
  ASSERT_TRUE(sub.ok()) << sub.status();
  EXPECT_EQ(sub->attribute(), v1::ATTRIBUTE_EDGES);
  v1::ReportBatch batch;
  *batch.add_reports() = EdgesReport("c1", 0, {1, 7});
  auto ack = Ingest(*session, batch);
  ASSERT_TRUE(ack.ok());
  ASSERT_EQ(ack->results(0).code(), 0) << ack->results(0).message();
  auto budgets = operators().ledger().Budgets({0});
  EXPECT_DOUBLE_EQ(budgets[0].spent().at("edges"), 1.0);
  EXPECT_DOUBLE_EQ(budgets[0].spent().at("features"), 1.5);
  EXPECT_DOUBLE_EQ(budgets[0].total_spent(), 2.5);
  // A features campaign asking the same feature question: node 0 answered
  // it already (one report, spent once).
  ASSERT_TRUE(operators().CreateCampaign(Hds(1.5)).ok());
  batch.Clear();
  *batch.add_reports() = Report("c2", 0, 0.5);
  ASSERT_EQ(Ingest(*session, batch)->results(0).code(), 0);
  EXPECT_DOUBLE_EQ(operators().ledger().Budgets({0})[0].total_spent(), 2.5);
  // A second identical substitution campaign: nothing more.
  ASSERT_TRUE(operators().CreateCampaign(Substitution(1.0)).ok());
  batch.Clear();
  *batch.add_reports() = EdgesReport("c3", 0, {1, 7});
  ASSERT_EQ(Ingest(*session, batch)->results(0).code(), 0);
  EXPECT_DOUBLE_EQ(operators().ledger().Budgets({0})[0].total_spent(), 2.5);
  // And the ledger is rebuilt so after a restart.
  Reopen();
  EXPECT_DOUBLE_EQ(operators().ledger().Budgets({0})[0].total_spent(), 2.5);
  EXPECT_DOUBLE_EQ(operators().ledger().Budgets({0})[0].spent().at("features"), 1.5);
}

// The ledger counts both questions when deciding whether a node can afford
// a substitution campaign.
TEST_F(CuratorTest, TheLedgerRefusesASubstitutionNodesCannotAfford) {
  Enrol({0, 1}, /*cap_total=*/2.0);
  auto c = operators().CreateCampaign(Substitution(1.0, 1.5));  // 2.5 > 2
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(c.status().message(), HasSubstr("total 2.5 > cap 2"));
  EXPECT_TRUE(operators().CreateCampaign(Substitution(0.5, 1.5)).ok());
}

TEST_F(CuratorTest, SubstitutionReportsAreValidated) {
  auto session = Enrol({3});
  ASSERT_TRUE(operators().CreateCampaign(Substitution(1.0)).ok());
  auto code = [&](v1::Report r) {
    v1::ReportBatch b;
    *b.add_reports() = std::move(r);
    auto ack = Ingest(*session, b);
    EXPECT_TRUE(ack.ok());
    return static_cast<absl::StatusCode>(ack->results(0).code());
  };
  EXPECT_EQ(code(EdgesReport("c1", 3, {5, 4})), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(EdgesReport("c1", 3, {3})), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(EdgesReport("c1", 3, {kNodes})),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Report("c1", 3, 0.5)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(EdgesReport("c1", 3, {0, 4, 19})), absl::StatusCode::kOk);
  // A bad substitution spec is no campaign.
  auto bad = Substitution(1.0);
  bad.mutable_spec()->mutable_substitution()->mutable_features()->set_epsilon(
      INFINITY);
  EXPECT_EQ(operators().CreateCampaign(bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = Substitution(1.0);
  bad.mutable_spec()->set_dimension(kNodes + 1);
  EXPECT_THAT(operators().CreateCampaign(bad).status().message(),
              HasSubstr("dimension = number of nodes"));
}

TEST_F(CuratorTest, TheKeyDirectoryServesEnrolledKeysAndAuditsChanges) {
  auto enrol = [&](uint32_t v, std::string key) {
    v1::EnrolRequest req;
    req.set_host_name("h");
    auto* n = req.add_nodes();
    n->set_node_id(v);
    n->set_secret(NodeCredential(kKey, v));
    n->set_sealing_key(std::move(key));
    return agents().Enrol(req);
  };
  auto a = enrol(1, std::string(32, 'a'));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(enrol(4, std::string(32, 'b')).ok());
  ASSERT_TRUE(enrol(6, "").ok());  // no key: left out
  auto keys = agents().keys().Get({6, 4, 1});
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[0].node_id(), 4u);
  EXPECT_EQ((*keys)[0].public_key(), std::string(32, 'b'));
  EXPECT_EQ((*keys)[1].node_id(), 1u);
  // A key of the wrong size is refused, nothing enrolled.
  EXPECT_THAT(enrol(2, "short").status().message(), HasSubstr("32 bytes"));
  // Bounds of the request.
  EXPECT_EQ(agents().keys().Get({kNodes}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(agents().keys().Get(std::vector<uint32_t>(100001, 1))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  // Enrolling without a key keeps the key; another key replaces it,
  // audited.
  ASSERT_TRUE(enrol(1, "").ok());
  EXPECT_EQ(agents().keys().Get({1})->at(0).public_key(),
            std::string(32, 'a'));
  ASSERT_TRUE(enrol(1, std::string(32, 'c')).ok());
  auto audit = operators().store().ListAudit(0, 1000);
  ASSERT_TRUE(audit.ok());
  int replaced = 0;
  for (const auto& row : *audit) {
    if (row.action == "node.key.replace") {
      ++replaced;
      EXPECT_THAT(row.details_json, HasSubstr("[1]"));
    }
  }
  EXPECT_EQ(replaced, 1);
  // Durable: a restarted curator serves the latest key.
  Reopen();
  auto b = enrol(6, "");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(agents().keys().Get({1})->at(0).public_key(),
            std::string(32, 'c'));
}

TEST_F(CuratorTest, FetchSealedCanReadOneCampaign) {
  auto alice = Enrol({0});
  auto bob = Enrol({5});
  v1::RelayRequest req;
  for (const char* c : {"c1", "c2", "c1"}) {
    auto* m = req.add_messages();
    m->set_campaign_id(c);
    m->set_from_node(0);
    m->set_to_node(5);
    m->set_ciphertext(c);
  }
  ASSERT_TRUE(agents().relay().Relay(*alice, req).ok());
  EXPECT_EQ(agents().relay().Fetch(*bob, 0, 10)->size(), 3u);
  auto c1 = agents().relay().Fetch(*bob, 0, 10, "c1");
  ASSERT_TRUE(c1.ok());
  ASSERT_EQ(c1->size(), 2u);
  EXPECT_EQ(agents().relay().Fetch(*bob, (*c1)[0].sequence(), 10, "c1")->size(),
            1u);
  EXPECT_EQ(agents().relay().Fetch(*bob, 0, 10, "c2")->size(), 1u);
  EXPECT_TRUE(agents().relay().Fetch(*bob, 0, 10, "c3")->empty());
}

// The stages' graph of an edges campaign: union for substitution, the
// lower id for randomized response.
TEST_F(CuratorTest, StagesAssembleTheGraphOfAnEdgesCampaign) {
  auto session = Enrol({0, 1, 2, 3});
  ASSERT_TRUE(operators().CreateCampaign(Substitution(1.0)).ok());
  v1::CreateCampaignRequest rr;
  rr.set_attribute(v1::ATTRIBUTE_EDGES);
  rr.mutable_spec()->set_kind(v1::MECHANISM_KIND_EDGE_RR);
  rr.mutable_spec()->set_epsilon(1);
  rr.mutable_spec()->set_dimension(kNodes);
  rr.mutable_nodes()->set_all(true);
  ASSERT_TRUE(operators().CreateCampaign(rr).ok());
  ASSERT_TRUE(operators().CreateCampaign(Hds(1)).ok());
  v1::ReportBatch batch;
  for (const char* c : {"c1", "c2"}) {
    // 0 lists 1; 1 lists 2; 2 lists 0 and 3.
    *batch.add_reports() = EdgesReport(c, 0, {1});
    *batch.add_reports() = EdgesReport(c, 1, {2});
    *batch.add_reports() = EdgesReport(c, 2, {0, 3});
  }
  auto ack = Ingest(*session, batch);
  ASSERT_TRUE(ack.ok());
  for (const auto& r : ack->results()) ASSERT_EQ(r.code(), 0) << r.message();
  Dataset data;
  data.meta.nodes = kNodes;
  auto empty = Graph::FromEdges(kNodes, {});
  ASSERT_TRUE(empty.ok());
  data.graph = *std::move(empty);
  Stages stages(&operators(), &data, dir_.path(), /*private_edges=*/true);
  auto un = stages.AssembledGraph("c1");
  ASSERT_TRUE(un.ok()) << un.status();
  EXPECT_EQ(un->num_edges(), 4u);  // {0,1} {1,2} {0,2} {2,3}
  auto low = stages.AssembledGraph("c2");
  ASSERT_TRUE(low.ok());
  // {0,1}, {1,2}, {2,3}: each pair by its lower end's word (2's word about
  // 0 is discarded).
  EXPECT_EQ(low->num_edges(), 3u);
  EXPECT_EQ(stages.AssembledGraph("c3").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(stages.AssembledGraph("c9").status().code(),
            absl::StatusCode::kNotFound);
  // Without a graph campaign a curator whose edges are private refuses;
  // with one, the result says which graph it ran on.
  batch.Clear();
  *batch.add_reports() = Report("c3", 0, 0.5);
  ASSERT_EQ(Ingest(*session, batch)->results(0).code(), 0);
  v1::EstimateRequest e;
  e.set_campaign_id("c3");
  auto estimate = stages.Estimate(e);
  ASSERT_TRUE(estimate.ok()) << estimate.status();
  v1::PropagateRequest p;
  p.set_input(estimate->id());
  auto refused = stages.Propagate(p);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("--private-edges"));
  p.set_graph_campaign_id("c1");
  auto propagated = stages.Propagate(p);
  ASSERT_TRUE(propagated.ok()) << propagated.status();
  EXPECT_THAT(propagated->details_json(), HasSubstr(R"("graph":"c1")"));
  EXPECT_THAT(propagated->details_json(), HasSubstr(R"("graph_rule":"union")"));
  EXPECT_THAT(propagated->details_json(), HasSubstr(R"("graph_edges":4)"));
  // The PPR settings recorded are the ones run: the request's alpha over
  // PrivGE's defaults, rmax scaled by the input's magnitude.
  p.set_alpha(0.2);
  auto with_alpha = stages.Propagate(p);
  ASSERT_TRUE(with_alpha.ok()) << with_alpha.status();
  const auto ppr = nlohmann::json::parse(with_alpha->details_json());
  EXPECT_EQ(ppr["alpha"], 0.2);
  EXPECT_EQ(ppr["rmax_scaled_by_max_abs_input"], true);
  p.set_alpha(1.5);
  EXPECT_THAT(stages.Propagate(p).status().message(),
              HasSubstr("alpha must be in (0, 1]"));
  p.set_alpha(0);
  p.set_graph_campaign_id("c3");
  EXPECT_EQ(stages.Propagate(p).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// Evaluate names the field a request leaves unspecified, and takes only the
// feature pipelines' methods; both are checked before the input is looked up.
TEST_F(CuratorTest, EvaluateRejectsUnspecifiedTaskAndMethod) {
  Dataset data;
  data.meta.nodes = kNodes;
  auto empty = Graph::FromEdges(kNodes, {});
  ASSERT_TRUE(empty.ok());
  data.graph = *std::move(empty);
  Stages stages(&operators(), &data, dir_.path(), /*private_edges=*/false);
  v1::EvaluateRequest q;
  q.set_input("r1");
  q.set_pipeline_task(v1::PIPELINE_TASK_NODE);
  auto no_method = stages.Evaluate(q);
  EXPECT_EQ(no_method.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(no_method.status().message(),
            "pipeline_method is unspecified; it must be one of privge, lpgnn, "
            "upgnet");
  q.set_pipeline_method(v1::PIPELINE_METHOD_DPNE);
  auto release = stages.Evaluate(q);
  EXPECT_EQ(release.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(release.status().message(),
            "pipeline_method must be one of privge, lpgnn, upgnet, got 'dpne'");
  q.set_pipeline_method(v1::PIPELINE_METHOD_LPGNN);
  q.clear_pipeline_task();
  auto no_task = stages.Evaluate(q);
  EXPECT_EQ(no_task.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(no_task.status().message(),
            "pipeline_task is unspecified; it must be one of node, link");
  q.set_pipeline_task(v1::PIPELINE_TASK_LINK);
  EXPECT_EQ(stages.Evaluate(q).status().code(), absl::StatusCode::kNotFound);
}

// Central-DP releases: each is charged to its graph's ledger, which
// composes them, refuses what would pass the cap (and discards a release
// found over it after training), and survives a restart.
TEST_F(CuratorTest, ReleasesAreChargedToTheirGraphsLedger) {
  Dataset data;
  data.meta.nodes = kNodes;
  std::vector<Edge> edges;
  for (uint32_t v = 0; v < kNodes; ++v) {
    edges.push_back({v, (v + 1) % kNodes});
    edges.push_back({v, (v + 5) % kNodes});
  }
  auto graph = Graph::FromEdges(kNodes, edges);
  ASSERT_TRUE(graph.ok());
  data.graph = *std::move(graph);
  const ReleaseBudget budget{/*epsilon_cap=*/3.0, /*delta=*/1e-5};
  auto stages = std::make_unique<Stages>(&operators(), &data, dir_.path(),
                                         false, budget);
  v1::ReleaseRequest dpne;
  dpne.set_pipeline_method(v1::PIPELINE_METHOD_DPNE);
  dpne.set_epsilon(1.0);
  dpne.set_dim(8);
  auto first = stages->Release(dpne);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->stage(), "release");
  EXPECT_EQ(first->input(), "curator");
  EXPECT_EQ(first->rows(), kNodes);
  EXPECT_EQ(first->cols(), 8u);
  EXPECT_THAT(first->details_json(), HasSubstr(R"("rdp":)"));
  EXPECT_THAT(first->details_json(), HasSubstr(R"("noise_source":"secure")"));
  auto m = stages->Matrix(first->id());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->rows, kNodes);

  v1::ReleaseRequest sg;
  sg.set_pipeline_method(v1::PIPELINE_METHOD_SE_PRIVGEMB);
  sg.set_epsilon(1.0);
  sg.set_dim(8);
  sg.set_batch_size(8);
  sg.set_noise_multiplier(10.0);
  sg.set_max_epochs(5);
  auto second = stages->Release(sg);
  ASSERT_TRUE(second.ok()) << second.status();
  auto ledger = stages->Ledger();
  ASSERT_TRUE(ledger.ok()) << ledger.status();
  ASSERT_EQ(ledger->graphs_size(), 1);
  const v1::GraphReleases& g = ledger->graphs(0);
  EXPECT_EQ(g.graph(), "curator");
  EXPECT_EQ(g.result_ids_size(), 2);
  // Composed: no more than the plain sum (a valid bound, since the deltas
  // sum to at most the ledger's), and more than either release alone.
  EXPECT_LE(g.epsilon(), g.epsilon_sum() + 1e-12);
  EXPECT_GT(g.epsilon(), 1.0);
  EXPECT_LE(g.epsilon_sum(), 2.0 + 1e-9);

  // Alone over the cap: refused before any training.
  dpne.set_epsilon(3.5);
  auto over = stages->Release(dpne);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(), HasSubstr("cap of 3"));
  // Within the cap alone, over it with the others: discarded.
  dpne.set_epsilon(2.5);
  auto composed = stages->Release(dpne);
  EXPECT_EQ(composed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(composed.status().message(), HasSubstr("discarded"));
  EXPECT_EQ(stages->Ledger()->graphs(0).result_ids_size(), 2);

  v1::ReleaseRequest bad = dpne;
  bad.set_pipeline_method(v1::PIPELINE_METHOD_PRIVGE);
  EXPECT_EQ(stages->Release(bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(stages->Release(bad).status().message(),
            "pipeline_method must be one of se-privgemb, dpne, got 'privge'");
  bad.clear_pipeline_method();
  EXPECT_EQ(stages->Release(bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(stages->Release(bad).status().message(),
              HasSubstr("pipeline_method is unspecified"));
  bad = dpne;
  bad.set_noise_multiplier(3);
  EXPECT_EQ(stages->Release(bad).status().code(),
            absl::StatusCode::kInvalidArgument);

  // The ledger is the stored results: a restarted curator has it.
  stages.reset();
  Reopen();
  Stages again(&operators(), &data, dir_.path(), false, budget);
  auto reread = again.Ledger();
  ASSERT_TRUE(reread.ok()) << reread.status();
  ASSERT_EQ(reread->graphs_size(), 1);
  EXPECT_EQ(reread->graphs(0).result_ids_size(), 2);
  EXPECT_DOUBLE_EQ(reread->graphs(0).epsilon(), g.epsilon());
}

TEST_F(CuratorTest, PrivacySummaryHasTheLedgerAndRefusalsCountByReason) {
  LedgerSummary summary = operators().ledger().Summary();
  EXPECT_TRUE(summary.spent.empty());
  EXPECT_EQ(summary.nodes_at_cap, 0u);

  // Nodes 0 and 1 reach their total cap; 2 and 3 the cap on features; 4..8
  // have room; 9 declares no caps.
  auto capped = Enrol({0, 1}, /*cap_total=*/1);
  v1::EnrolRequest req;
  for (uint32_t v : {2u, 3u}) {
    auto* n = req.add_nodes();
    n->set_node_id(v);
    n->set_secret(NodeCredential(kKey, v));
    n->mutable_caps()->set_total(10);
    (*n->mutable_caps()->mutable_per_attribute())["features"] = 1;
  }
  auto features_capped = agents().Enrol(req);
  ASSERT_TRUE(features_capped.ok()) << features_capped.status();
  auto roomy = Enrol({4, 5, 6, 7, 8}, /*cap_total=*/10);
  auto uncapped = Enrol({9});
  ASSERT_TRUE(capped && roomy && uncapped);
  ASSERT_TRUE(operators().CreateCampaign(Hds(1)).ok());  // c1, every node
  auto refusal = [](uint32_t v, int reason) {
    v1::Report r;
    r.set_campaign_id("c1");
    r.set_node_id(v);
    r.mutable_refusal()->set_reason(static_cast<v1::RefusalReason>(reason));
    return r;
  };
  auto ingest = [&](const Session& session, std::vector<v1::Report> reports) {
    v1::ReportBatch batch;
    for (auto& r : reports) *batch.add_reports() = std::move(r);
    auto ack = Ingest(session, batch);
    ASSERT_TRUE(ack.ok()) << ack.status();
    for (const auto& result : ack->results()) {
      EXPECT_EQ(result.code(), 0) << result.message();
    }
  };
  ingest(*capped, {Report("c1", 0, 0.5), Report("c1", 1, 0.5)});
  ingest(**features_capped, {Report("c1", 2, 0.5), Report("c1", 3, 0.5)});
  ingest(*roomy, {Report("c1", 4, 0.5), refusal(5, v1::REFUSAL_REASON_POLICY),
                  refusal(6, v1::REFUSAL_REASON_BUDGET_EXHAUSTED),
                  refusal(7, v1::REFUSAL_REASON_NO_DATA)});
  ingest(*uncapped, {Report("c1", 9, 0.5)});
  v1::CreateCampaignRequest label;
  label.set_attribute(v1::ATTRIBUTE_LABEL);
  label.mutable_spec()->set_kind(v1::MECHANISM_KIND_LABEL_RR);
  label.mutable_spec()->set_epsilon(0.5);
  label.mutable_spec()->set_dimension(3);
  for (uint32_t v : {4u, 8u, 9u}) label.mutable_nodes()->add_node_ids(v);
  label.set_quorum(1);
  ASSERT_TRUE(operators().CreateCampaign(label).ok());  // c2
  auto label_report = [](uint32_t v) {
    v1::Report r;
    r.set_campaign_id("c2");
    r.set_node_id(v);
    r.mutable_label()->set_label(v % 3);
    return r;
  };
  ingest(*roomy, {label_report(8), label_report(4)});
  ingest(*uncapped, {label_report(9)});

  const std::map<std::string, std::vector<double>> spent = {
      {"features", {1, 1, 1, 1, 1, 1}},  // nodes 0..4 and 9, in node order
      {"label", {0.5, 0.5, 0.5}}};       // nodes 4, 8, 9
  summary = operators().ledger().Summary();
  EXPECT_EQ(summary.spent, spent);
  EXPECT_EQ(summary.nodes_at_cap, 4u);  // 0 and 1 in total, 2 and 3 on features
  const IngestCounters& c = operators().campaigns().counters();
  EXPECT_EQ(c.refusals(), 3u);
  EXPECT_EQ(c.refusals_by_reason[v1::REFUSAL_REASON_POLICY].load(), 1u);
  EXPECT_EQ(c.refusals_by_reason[v1::REFUSAL_REASON_BUDGET_EXHAUSTED].load(), 1u);
  EXPECT_EQ(c.refusals_by_reason[v1::REFUSAL_REASON_NO_DATA].load(), 1u);
  EXPECT_EQ(c.refusals_by_reason[v1::REFUSAL_REASON_INVALID_TASK].load(), 0u);
  // A reason this build does not know is rejected, never counted.
  EXPECT_EQ(c.refusals_by_reason[0].load(), 0u);

  // The ledger is rebuilt from the store; the counters are this process's.
  Reopen();
  summary = operators().ledger().Summary();
  EXPECT_EQ(summary.spent, spent);
  EXPECT_EQ(summary.nodes_at_cap, 4u);
  EXPECT_EQ(operators().campaigns().counters().refusals_by_reason[v1::REFUSAL_REASON_POLICY]
                .load(),
            0u);
}

}  // namespace
}  // namespace ldpgraph::curator

namespace ldpgraph::curator {
namespace {

// The estimate stage decodes and estimates reports in fixed parts across
// threads: the rows are the same for 1 and 3 threads, one per node, and
// empty for a node that did not report.
TEST(StagesEstimateRowsTest, SameRowsForAnyThreadCount) {
  v1::Campaign campaign;
  campaign.set_id("c1");
  campaign.set_attribute(v1::ATTRIBUTE_FEATURES);
  *campaign.mutable_spec() = requests::HdsCampaign(1).spec();
  const uint32_t n = 10000;  // 6,667 reports: two parts and a tail
  std::vector<std::pair<uint32_t, v1::Report>> reports;
  for (uint32_t v = 0; v < n; ++v) {
    if (v % 3 == 1) continue;
    reports.emplace_back(
        v, requests::FeaturesReport("c1", v, v % 2 ? 0.5 : -0.5));
  }
  auto spec = wire::CompiledSpec::Compile(campaign.spec());
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto one = Stages::EstimateRows(campaign, *spec, n, reports, 1);
  auto three = Stages::EstimateRows(campaign, *spec, n, reports, 3);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(one->rows, n);
  EXPECT_EQ(one->offsets, three->offsets);
  EXPECT_EQ(one->indices, three->indices);
  EXPECT_EQ(one->values, three->values);
  EXPECT_TRUE(one->row_indices(1).empty());
  ASSERT_EQ(one->row_indices(9998).size(), 1u);
  EXPECT_EQ(one->row_indices(9998)[0], 9998u % 4);
  EXPECT_LT(one->row_values(9998)[0], 0.0f);
  // A report that does not decode fails the estimate.
  reports[5000].second.mutable_features()->set_indices(0, 7);
  EXPECT_FALSE(Stages::EstimateRows(campaign, *spec, n, reports, 3).ok());
}

}  // namespace
}  // namespace ldpgraph::curator
