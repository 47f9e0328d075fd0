// ldpctl's listing commands read every page (pages.h): against a curator
// served in this process (plaintext on loopback) whose pages hold at most
// 1 KiB and whose messages 16 KiB, `campaign list`, `campaign refusals`,
// `budget show`, `results` (and a result's whole id list) and `audit`
// print every item once, in order, as one table or one JSON message. And
// ForEachPage itself stops at a curator that would page forever.
#include "server/ldpctl/pages.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/testing/temp_folder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "server/curator/credentials.h"
#include "server/curator/detail_lists.h"
#include "server/curator/server.h"
#include "server/curator/test_requests.h"
#include "server/ldpctl/commands.h"

namespace ldpgraph::ldpctl {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr uint32_t kNodes = 600;
constexpr int kCampaigns = 30;
constexpr int kResults = 60;
constexpr int kAudit = 200;

struct Result {
  int code;
  std::string out, err;
};

class LdpctlPagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    token_file_ = dir_.path() + "/admin.token";
    std::ofstream(token_file_) << std::string(32, 'a') << "\n";
    curator::ServerOptions o;
    o.data_dir = dir_.path() + "/curator";
    o.nodes = kNodes;
    o.node_key = std::string(32, 'k');
    o.admin_token = std::string(32, 'a');
    o.insecure = true;
    o.http_listen.clear();
    o.synchronous_full = false;
    o.max_message_bytes = 16 << 10;
    o.admin_page_bytes = 1 << 10;
    auto server = curator::CuratorServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    Fill(o.node_key);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(absl::Seconds(1));
  }

  void Fill(const std::string& key) {
    curator::Curator& c = server_->curator();
    v1::EnrolRequest enrol;
    for (uint32_t v = 0; v < kNodes; ++v) {
      v1::NodeCredential* n = enrol.add_nodes();
      n->set_node_id(v);
      n->set_secret(curator::NodeCredential(key, v));
      n->mutable_caps()->set_total(100);
    }
    auto session = c.agents().Enrol(enrol);
    ASSERT_TRUE(session.ok()) << session.status();
    for (int i = 0; i < kCampaigns; ++i) {
      ASSERT_TRUE(
          c.operators().CreateCampaign(curator::requests::HdsCampaign(0.1)).ok());
    }
    v1::ReportBatch batch;
    for (uint32_t v = 0; v < kNodes; ++v) {
      v1::Report* r = batch.add_reports();
      r->set_campaign_id("c1");
      r->set_node_id(v);
      r->mutable_refusal()->set_reason(v1::REFUSAL_REASON_NO_DATA);
      r->mutable_refusal()->set_message(absl::StrCat("no data at node ", v));
    }
    ASSERT_TRUE(curator::requests::Ingest(c.agents(), **session, batch).ok());
    curator::ResultStore store = c.operators().store();
    for (int i = 0; i < kResults; ++i) {
      v1::StageResult r;
      r.set_stage("propagate");
      r.set_input(absl::StrCat("r", i));
      r.set_details_json(json({{"note", std::string(100, 'x')}}).dump());
      if (i == kResults - 1) {  // the newest: a cut id list of 1,000 nodes
        r.set_stage("estimate");
        r.set_created_unix_ms(77);
        std::vector<uint32_t> flagged(1000);
        for (uint32_t v = 0; v < 1000; ++v) flagged[v] = 3 * v;
        json details = {{"flagged", flagged}};
        const curator::IdLists whole = curator::TruncateIdLists(&details);
        r.set_details_json(details.dump());
        ASSERT_TRUE(curator::WriteIdLists(server_->stages().IdListFile(r), whole)
                        .ok());
      }
      ASSERT_TRUE(store
                      .AddResult(
                          [&](int64_t id) {
                            r.set_id(absl::StrCat("r", id));
                            return r.SerializeAsString();
                          },
                          "")
                      .ok());
    }
    for (int i = 0; i < kAudit; ++i) {
      ASSERT_TRUE(store.Audit("admin", "test.entry",
                              absl::StrCat(R"({"i":)", i, "}"))
                      .ok());
    }
  }

  Result Ldpctl(std::vector<std::string> args) {
    for (const std::string& a :
         {std::string("--curator"), absl::StrCat("127.0.0.1:", server_->port()),
          std::string("--insecure"), std::string("--admin-token"), token_file_}) {
      args.push_back(a);
    }
    std::ostringstream out, err;
    const int code = RunLdpctl(args, "ldpctl", out, err);
    return {code, out.str(), err.str()};
  }
  static json Json(const Result& r) {
    EXPECT_EQ(r.code, 0) << r.err;
    return json::parse(r.out, nullptr, false);
  }
  static std::vector<std::string> Lines(const std::string& text) {
    return absl::StrSplit(text, '\n', absl::SkipEmpty());
  }

  TempFolder dir_;
  std::string token_file_;
  std::unique_ptr<curator::CuratorServer> server_;
};

TEST_F(LdpctlPagesTest, EveryListingCommandReadsEveryPage) {
  // Campaigns, newest first: a table row each, or one JSON message.
  Result r = Ldpctl({"campaign", "list"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> rows = Lines(r.out);
  ASSERT_EQ(rows.size(), size_t{kCampaigns + 1});  // and the header
  EXPECT_THAT(rows[1], HasSubstr(absl::StrCat("c", kCampaigns)));
  EXPECT_THAT(rows.back(), HasSubstr("c1 "));
  json j = Json(Ldpctl({"campaign", "list", "--format", "json"}));
  ASSERT_EQ(j["campaigns"].size(), size_t{kCampaigns});
  EXPECT_EQ(j["next_page_token"], "");

  // Refusals, by node.
  j = Json(Ldpctl({"campaign", "refusals", "c1", "--format", "json"}));
  ASSERT_EQ(j["refusals"].size(), kNodes);
  for (uint32_t v = 0; v < kNodes; ++v) {
    ASSERT_EQ(j["refusals"][v]["node_id"], v);
  }
  r = Ldpctl({"campaign", "refusals", "c1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Lines(r.out).size(), kNodes + 1);
  EXPECT_THAT(r.out, HasSubstr("no data at node 599"));

  // Budgets: every known node, and a range.
  j = Json(Ldpctl({"budget", "show", "--per-node", "--format", "json"}));
  EXPECT_EQ(j["summary"]["nodes"], kNodes);
  EXPECT_EQ(j["summary"]["caps_known"], kNodes);
  ASSERT_EQ(j["budgets"].size(), kNodes);
  EXPECT_EQ(j["budgets"][kNodes - 1]["node_id"], kNodes - 1);
  j = Json(Ldpctl({"budget", "show", "--nodes", "10-260", "--format", "json"}));
  ASSERT_EQ(j["budgets"].size(), 250u);
  EXPECT_EQ(j["budgets"][0]["node_id"], 10);
  EXPECT_EQ(j["budgets"][249]["node_id"], 259);

  // Results, newest first; the newest's cut list, whole.
  j = Json(Ldpctl({"results", "--format", "json"}));
  ASSERT_EQ(j["results"].size(), size_t{kResults});
  EXPECT_EQ(j["results"][0]["id"], absl::StrCat("r", kResults));
  EXPECT_EQ(j["results"][kResults - 1]["id"], "r1");
  r = Ldpctl({"results", absl::StrCat("r", kResults), "--list", "flagged"});
  ASSERT_EQ(r.code, 0) << r.err;
  rows = Lines(r.out);
  ASSERT_EQ(rows.size(), 1000u);
  EXPECT_EQ(rows[0], "0");
  EXPECT_EQ(rows[999], "2997");
  r = Ldpctl({"results", "r1", "--list", "flagged"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("no id list 'flagged'"));
  r = Ldpctl({"results", "--list", "flagged"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("results ID --list PATH"));

  // The audit log: --limit entries over several pages, or all of it.
  r = Ldpctl({"audit", "--limit", "150"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Lines(r.out).size(), 150u);
  j = Json(Ldpctl({"audit", "--after", "5", "--format", "json"}));
  const size_t entries = j["entries"].size();
  EXPECT_GT(entries, size_t{kAudit});
  for (size_t i = 0; i < entries; ++i) {
    ASSERT_EQ(j["entries"][i]["sequence"], absl::StrCat(6 + i));  // 64-bit
  }
}

// A curator that hands back the token it was sent would page forever:
// ForEachPage stops with INTERNAL.
class LoopingAdmin final : public v1::AdminService::Service {
 public:
  grpc::Status ListResults(grpc::ServerContext*, const v1::ListResultsRequest*,
                           v1::ListResultsResponse* out) override {
    out->add_results()->set_id("r1");
    out->set_next_page_token("results:1");
    return grpc::Status::OK;
  }
};

TEST(ForEachPageTest, ACuratorRepeatingItsTokenIsAnError) {
  LoopingAdmin service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = v1::AdminService::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  int pages = 0;
  absl::Status s = ForEachPage(
      *stub, &v1::AdminService::Stub::ListResults, v1::ListResultsRequest(),
      [](grpc::ClientContext*) {}, &GrpcToAbsl,
      [&](const v1::ListResultsResponse&) {
        ++pages;
        return absl::OkStatus();
      });
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("'results:1' with itself"));
  EXPECT_EQ(pages, 2);
  server->Shutdown();
}

}  // namespace
}  // namespace ldpgraph::ldpctl
