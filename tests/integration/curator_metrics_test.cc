// /metrics of a running curator and of an agent host, scraped over HTTP
// after campaigns: an in-process CuratorServer (plaintext gRPC on
// 127.0.0.1:0, /metrics on an ephemeral port), a raw agent that sends
// chosen reports, refusals and bad reports, and an in-process AgentHost.
//
//   ReportsRefusalsRejectionsAndTheLedger  counters typed counter and named
//       _total, refusals by reason, rejections by code, the epsilon
//       histogram per attribute, the nodes at their cap and the open
//       campaigns' progress, against what was sent.
//   AgentHostCountersAfterACampaign        the agent host's counters while
//       it answers a campaign, and the curator's histogram counting its
//       nodes.
#include <httplib.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "client/agent.h"
#include "client/agent_host.h"
#include "client/agent_host_metrics.h"
#include "common/observability/metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "ldpgraph/v1/agent.grpc.pb.h"
#include "server/curator/credentials.h"
#include "server/curator/server.h"
#include "tests/integration/admin_client.h"
#include "tests/integration/test_util.h"

namespace ldpgraph::integration {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint32_t kNodes = 16;
constexpr uint32_t kDimension = 4;
const std::string kNodeKey(32, 'n');
const std::string kAdminToken = "0123456789abcdef0123456789abcdef";

// The value of the sample `series` (name and labels, as rendered) in a
// scrape; NaN if there is none.
double Sample(const std::string& text, const std::string& series) {
  const std::string prefix = series + " ";
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    if (text.compare(at, prefix.size(), prefix) == 0) {
      double v = 0;
      if (absl::SimpleAtod(text.substr(at + prefix.size(), end - at - prefix.size()),
                           &v)) {
        return v;
      }
      return std::nan("");
    }
    at = end + 1;
  }
  return std::nan("");
}

// GET /metrics on 127.0.0.1:port; the body, or "" with a test failure.
std::string Scrape(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5);
  client.set_read_timeout(30);
  auto response = client.Get("/metrics");
  EXPECT_TRUE(response) << httplib::to_string(response.error());
  if (!response) return "";
  EXPECT_EQ(response->status, 200);
  return response->body;
}

v1::CreateCampaignRequest Features(double epsilon, uint32_t begin, uint32_t end) {
  v1::CreateCampaignRequest r;
  r.set_name(absl::StrCat("features-", begin, "-", end));
  r.set_attribute(v1::ATTRIBUTE_FEATURES);
  v1::MechanismSpec* s = r.mutable_spec();
  s->set_kind(v1::MECHANISM_KIND_HDS);
  s->set_epsilon(epsilon);
  s->set_dimension(kDimension);
  s->set_sampled(1);
  s->set_range_low(-1);
  s->set_range_high(1);
  r.mutable_nodes()->set_range_begin(begin);
  r.mutable_nodes()->set_range_end(end);
  r.set_quorum(1);
  return r;
}

v1::Report FeatureReport(const std::string& campaign, uint32_t v,
                         uint32_t index = 0) {
  v1::Report r;
  r.set_campaign_id(campaign);
  r.set_node_id(v);
  r.mutable_features()->add_indices(index);
  r.mutable_features()->add_values(0.5);
  return r;
}

v1::Report Refusal(const std::string& campaign, uint32_t v,
                   v1::RefusalReason reason) {
  v1::Report r;
  r.set_campaign_id(campaign);
  r.set_node_id(v);
  r.mutable_refusal()->set_reason(reason);
  return r;
}

class CuratorMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewTempDir("curator-metrics");
    curator::ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.data_dir = dir_ + "/curator";
    o.nodes = kNodes;
    o.node_key = kNodeKey;
    o.admin_token = kAdminToken;
    o.insecure = true;
    o.http_listen = "127.0.0.1:0";
    auto server = curator::CuratorServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    ASSERT_GT(server_->http_port(), 0);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                   grpc::InsecureChannelCredentials());
    agent_ = v1::AgentService::NewStub(channel_);
    admin_ = std::make_unique<Admin>(channel_, kAdminToken);
  }

  void TearDown() override {
    if (host_ != nullptr) {
      host_->Stop();
      if (host_thread_.joinable()) host_thread_.join();
    }
    if (server_ != nullptr) server_->Shutdown(absl::Seconds(2));
    server_.reset();
    if (!HasFailure()) RemoveTempDir(dir_);
  }

  // Enrols nodes with these caps; the session token.
  std::string Enrol(const std::vector<uint32_t>& nodes, double total,
                    const std::string& capped_attribute = "",
                    double attribute_cap = 0) {
    v1::EnrolRequest req;
    req.set_host_name("metrics-test");
    for (uint32_t v : nodes) {
      v1::NodeCredential* c = req.add_nodes();
      c->set_node_id(v);
      c->set_secret(curator::NodeCredential(kNodeKey, v));
      c->mutable_caps()->set_total(total);
      if (!capped_attribute.empty()) {
        (*c->mutable_caps()->mutable_per_attribute())[capped_attribute] =
            attribute_cap;
      }
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::EnrolResponse resp;
    grpc::Status s = agent_->Enrol(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.session_token();
  }

  // Sends one batch under token; the status code of each report.
  std::vector<int> Send(const std::string& token,
                        const std::vector<v1::Report>& reports) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("ldpgraph-session", token);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto stream = agent_->Report(&ctx);
    v1::ReportBatch batch;
    batch.set_batch_id(++batch_id_);
    for (const v1::Report& r : reports) *batch.add_reports() = r;
    v1::ReportAck ack;
    const bool acked = stream->Write(batch) && stream->Read(&ack);
    stream->WritesDone();
    grpc::Status s = stream->Finish();
    EXPECT_TRUE(acked) << s.error_message();
    std::vector<int> codes;
    for (const auto& result : ack.results()) codes.push_back(result.code());
    return codes;
  }

  std::string Create(const v1::CreateCampaignRequest& req) {
    v1::Campaign c;
    grpc::Status s = admin_->Create(req, &c);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return c.id();
  }

  // An agent host over nodes [begin, end) on a thread, with features of
  // dimension kDimension.
  void StartHost(uint32_t begin, uint32_t end) {
    std::vector<agent::NodeRecord> records;
    for (uint32_t v = begin; v < end; ++v) {
      agent::NodeRecord r;
      r.node = v;
      r.features = agent::NodeFeatures::FromDense(
          std::vector<double>(kDimension, 0.25));
      r.label = 0;
      records.push_back(std::move(r));
    }
    agent::AgentPolicy policy;
    policy.caps.total = 8;
    auto shard = agent::AgentShard::Create(std::move(records), policy,
                                           std::nullopt, dir_ + "/agent");
    ASSERT_TRUE(shard.ok()) << shard.status();
    agent::AgentHostOptions o;
    o.curator = absl::StrCat("127.0.0.1:", server_->port());
    o.insecure = true;
    o.host_name = "metrics-test-host";
    for (uint32_t v = begin; v < end; ++v) {
      o.credentials.emplace_back(v, curator::NodeCredential(kNodeKey, v));
    }
    o.caps = policy.caps;
    o.backoff_initial = absl::Milliseconds(50);
    o.backoff_max = absl::Seconds(1);
    auto host = agent::AgentHost::Create(std::move(o), std::move(*shard));
    ASSERT_TRUE(host.ok()) << host.status();
    host_ = std::move(*host);
    host_thread_ = std::thread([this] { host_->Run().IgnoreError(); });
  }

  std::string dir_;
  std::unique_ptr<curator::CuratorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::AgentService::Stub> agent_;
  std::unique_ptr<Admin> admin_;
  uint64_t batch_id_ = 0;
  std::unique_ptr<agent::AgentHost> host_;
  std::thread host_thread_;
};

TEST_F(CuratorMetricsTest, ReportsRefusalsRejectionsAndTheLedger) {
  // Before anything: every series there, at 0.
  std::string text = Scrape(server_->http_port());
  EXPECT_EQ(Sample(text, "ldpgraph_curator_reports_accepted_total"), 0);
  EXPECT_EQ(Sample(text, "ldpgraph_curator_refusals_total{reason=\"policy\"}"), 0);
  EXPECT_EQ(Sample(text, "ldpgraph_curator_reports_rejected_total{code=\"unauthenticated\"}"),
            0);
  EXPECT_EQ(Sample(text, "ldpgraph_curator_epsilon_spent_count{attribute=\"edges\"}"), 0);
  EXPECT_EQ(Sample(text, "ldpgraph_curator_nodes_at_cap"), 0);
  EXPECT_EQ(Sample(text, "ldpgraph_curator_open_campaign_targets"), 0);

  // Nodes 0, 1: total cap 1. Nodes 2..5: room. Nodes 6, 7: room, but a cap
  // of 0.5 on label.
  const std::string tight = Enrol({0, 1}, 1);
  const std::string roomy = Enrol({2, 3, 4, 5}, 10);
  const std::string label_capped = Enrol({6, 7}, 10, "label", 0.5);
  const std::string c1 = Create(Features(1.0, 0, 8));
  ASSERT_EQ(c1, "c1");
  constexpr int kOk = 0;
  const int kInvalid = static_cast<int>(absl::StatusCode::kInvalidArgument);
  const int kDenied = static_cast<int>(absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Send(tight, {FeatureReport(c1, 0), FeatureReport(c1, 1)}),
            (std::vector<int>{kOk, kOk}));
  EXPECT_EQ(Send(roomy, {FeatureReport(c1, 2), FeatureReport(c1, 3),
                         Refusal(c1, 4, v1::REFUSAL_REASON_POLICY),
                         Refusal(c1, 5, v1::REFUSAL_REASON_NO_DATA),
                         FeatureReport(c1, 6)}),  // not the session's node
            (std::vector<int>{kOk, kOk, kOk, kOk, kDenied}));
  EXPECT_EQ(Send(label_capped,
                 {FeatureReport(c1, 6), FeatureReport(c1, 7, /*index=*/99)}),
            (std::vector<int>{kOk, kInvalid}));
  v1::CreateCampaignRequest label;
  label.set_name("label-6-8");
  label.set_attribute(v1::ATTRIBUTE_LABEL);
  label.mutable_spec()->set_kind(v1::MECHANISM_KIND_LABEL_RR);
  label.mutable_spec()->set_epsilon(0.5);
  label.mutable_spec()->set_dimension(3);
  label.mutable_nodes()->set_range_begin(6);
  label.mutable_nodes()->set_range_end(8);
  label.set_quorum(1);
  const std::string c2 = Create(label);
  std::vector<v1::Report> labels(2);
  for (uint32_t v : {6u, 7u}) {
    labels[v - 6].set_campaign_id(c2);
    labels[v - 6].set_node_id(v);
    labels[v - 6].mutable_label()->set_label(v % 3);
  }
  EXPECT_EQ(Send(label_capped, labels), (std::vector<int>{kOk, kOk}));

  text = Scrape(server_->http_port());
  // Counters are counters, named _total; the old names are gone.
  for (const std::string name :
       {"ldpgraph_curator_reports_accepted_total",
        "ldpgraph_curator_reports_duplicate_total",
        "ldpgraph_curator_report_bytes_total", "ldpgraph_curator_refusals_total",
        "ldpgraph_curator_reports_rejected_total", "ldpgraph_curator_rpcs_total"}) {
    EXPECT_THAT(text, HasSubstr("# TYPE " + name + " counter\n")) << name;
  }
  EXPECT_THAT(text, HasSubstr("# TYPE ldpgraph_curator_epsilon_spent histogram\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE ldpgraph_curator_nodes_at_cap gauge\n"));
  EXPECT_THAT(text, Not(HasSubstr("ldpgraph_curator_reports_rejected_invalid_argument")));
  EXPECT_THAT(text, Not(HasSubstr("ldpgraph_curator_reports_accepted ")));

  EXPECT_EQ(Sample(text, "ldpgraph_curator_reports_accepted_total"), 7);
  EXPECT_GT(Sample(text, "ldpgraph_curator_report_bytes_total"), 0);
  // The store's group commit: the batches and enrolments were written, in
  // no more commits than writes.
  EXPECT_THAT(text, HasSubstr("# TYPE ldpgraph_store_writes_total counter\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE ldpgraph_store_commits_total counter\n"));
  const double writes = Sample(text, "ldpgraph_store_writes_total");
  const double commits = Sample(text, "ldpgraph_store_commits_total");
  EXPECT_GE(writes, 3);
  EXPECT_GE(commits, 1);
  EXPECT_LE(commits, writes);
  // Refusals by reason: every reason, the ones never given at 0.
  EXPECT_EQ(Sample(text, "ldpgraph_curator_refusals_total{reason=\"policy\"}"), 1);
  EXPECT_EQ(Sample(text, "ldpgraph_curator_refusals_total{reason=\"no_data\"}"), 1);
  EXPECT_EQ(Sample(text, "ldpgraph_curator_refusals_total{reason=\"budget_exhausted\"}"),
            0);
  EXPECT_EQ(Sample(text, "ldpgraph_curator_refusals_total{reason=\"invalid_task\"}"), 0);
  EXPECT_THAT(text, Not(HasSubstr("reason=\"other\"")));
  // Rejections by code: all 16 codes.
  EXPECT_EQ(Sample(text, "ldpgraph_curator_reports_rejected_total{code=\"invalid_argument\"}"),
            1);
  EXPECT_EQ(Sample(text, "ldpgraph_curator_reports_rejected_total{code=\"permission_denied\"}"),
            1);
  EXPECT_EQ(Sample(text, "ldpgraph_curator_reports_rejected_total{code=\"unauthenticated\"}"),
            0);
  size_t codes = 0;
  for (size_t at = text.find("ldpgraph_curator_reports_rejected_total{code=");
       at != std::string::npos;
       at = text.find("ldpgraph_curator_reports_rejected_total{code=", at + 1)) {
    ++codes;
  }
  EXPECT_EQ(codes, 16u);

  // The ledger: epsilon 1 on features for nodes 0, 1, 2, 3, 6; 0.5 on label
  // for nodes 6, 7; nothing on edges.
  const std::string features = "ldpgraph_curator_epsilon_spent_bucket{attribute=\"features\",le=";
  EXPECT_EQ(Sample(text, features + "\"0.5\"}"), 0);
  EXPECT_EQ(Sample(text, features + "\"1\"}"), 5);
  EXPECT_EQ(Sample(text, features + "\"+Inf\"}"), 5);
  EXPECT_EQ(Sample(text, "ldpgraph_curator_epsilon_spent_sum{attribute=\"features\"}"), 5);
  EXPECT_EQ(Sample(text, "ldpgraph_curator_epsilon_spent_count{attribute=\"features\"}"), 5);
  const std::string labels_bucket =
      "ldpgraph_curator_epsilon_spent_bucket{attribute=\"label\",le=";
  EXPECT_EQ(Sample(text, labels_bucket + "\"0.25\"}"), 0);
  EXPECT_EQ(Sample(text, labels_bucket + "\"0.5\"}"), 2);
  EXPECT_EQ(Sample(text, "ldpgraph_curator_epsilon_spent_sum{attribute=\"label\"}"), 1);
  EXPECT_EQ(Sample(text, "ldpgraph_curator_epsilon_spent_count{attribute=\"label\"}"), 2);
  EXPECT_EQ(Sample(text, "ldpgraph_curator_epsilon_spent_count{attribute=\"edges\"}"), 0);
  // At a cap: 0 and 1 in total, 6 and 7 on label.
  EXPECT_EQ(Sample(text, "ldpgraph_curator_nodes_at_cap"), 4);

  // Campaign progress: c2 closed at its quorum; c1 is open, 8 targets, 5
  // reports (0, 1, 2, 3, 6) and 2 refusals (4, 5); node 7's was rejected.
  EXPECT_THAT(text, HasSubstr("# TYPE ldpgraph_curator_open_campaign_targets gauge\n"));
  EXPECT_EQ(Sample(text, "ldpgraph_curator_open_campaigns"), 1);
  EXPECT_EQ(Sample(text, "ldpgraph_curator_open_campaign_targets"), 8);
  EXPECT_EQ(Sample(text, "ldpgraph_curator_open_campaign_reports"), 5);
  EXPECT_EQ(Sample(text, "ldpgraph_curator_open_campaign_refusals"), 2);
  ASSERT_TRUE(admin_->Close(c1).ok());
  text = Scrape(server_->http_port());
  EXPECT_EQ(Sample(text, "ldpgraph_curator_open_campaigns"), 0);
  EXPECT_EQ(Sample(text, "ldpgraph_curator_open_campaign_targets"), 0);
  EXPECT_EQ(Sample(text, "ldpgraph_curator_open_campaign_reports"), 0);
  EXPECT_EQ(Sample(text, "ldpgraph_curator_open_campaign_refusals"), 0);
}

TEST_F(CuratorMetricsTest, AgentHostCountersAfterACampaign) {
  ASSERT_NO_FATAL_FAILURE(StartHost(8, 12));
  observability::MetricsRegistry metrics;
  ASSERT_TRUE(agent::RegisterAgentHostMetrics(metrics, [this] {
                return host_.get();
              }).ok());
  absl::StatusOr<std::vector<v1::NodeBudget>> budgets;
  ASSERT_TRUE(PollUntil(
      [&] {
        budgets = admin_->Budgets(8, 12);
        if (!budgets.ok() || budgets->size() != 4) return false;
        for (const auto& b : *budgets) {
          if (!b.caps_known()) return false;
        }
        return true;
      },
      absl::Seconds(60)))
      << "the host did not enrol: " << budgets.status();
  const std::string c1 = Create(Features(2.0, 8, 12));
  auto closed = admin_->WaitClosed(c1, absl::Seconds(60));
  ASSERT_TRUE(closed.ok()) << closed.status();
  // The acks reach the host after the curator stored the reports.
  ASSERT_TRUE(PollUntil([&] { return host_->counters().reports_acked.load() == 4; },
                        absl::Seconds(30)));

  const std::string text = metrics.Render();
  for (const std::string name :
       {"ldpgraph_agent_tasks_total", "ldpgraph_agent_reports_sent_total",
        "ldpgraph_agent_reports_acked_total", "ldpgraph_agent_fresh_answers_total",
        "ldpgraph_agent_memo_hits_total", "ldpgraph_agent_refusals_total"}) {
    EXPECT_THAT(text, HasSubstr("# TYPE " + name + " counter\n")) << name;
  }
  EXPECT_GE(Sample(text, "ldpgraph_agent_tasks_total"), 1);
  EXPECT_EQ(Sample(text, "ldpgraph_agent_reports_sent_total"), 4);
  EXPECT_EQ(Sample(text, "ldpgraph_agent_reports_acked_total"), 4);
  EXPECT_EQ(Sample(text, "ldpgraph_agent_fresh_answers_total"), 4);
  EXPECT_EQ(Sample(text, "ldpgraph_agent_refusals_total"), 0);
  EXPECT_EQ(Sample(text, "ldpgraph_agent_reports_rejected_total"), 0);
  EXPECT_EQ(Sample(text, "ldpgraph_agent_epsilon_spent_max"), 2);

  // The curator counts the host's four nodes at epsilon 2.
  const std::string scraped = Scrape(server_->http_port());
  EXPECT_EQ(Sample(scraped, "ldpgraph_curator_reports_accepted_total"), 4);
  EXPECT_EQ(Sample(scraped,
                   "ldpgraph_curator_epsilon_spent_bucket{attribute=\"features\",le=\"1\"}"),
            0);
  EXPECT_EQ(Sample(scraped,
                   "ldpgraph_curator_epsilon_spent_bucket{attribute=\"features\",le=\"2\"}"),
            4);
  EXPECT_EQ(Sample(scraped, "ldpgraph_curator_epsilon_spent_sum{attribute=\"features\"}"), 8);
  EXPECT_EQ(Sample(scraped, "ldpgraph_curator_nodes_at_cap"), 0);
}

}  // namespace
}  // namespace ldpgraph::integration
