// The admin listings at the wire (listings.h): a real curator whose gRPC
// messages are limited to 16 KiB (64 MiB in production) and whose pages to
// 4 KiB (4 MiB), holding more of every listed item than one 16 KiB reply
// could carry: 2,000 nodes with caps, 2,000 refusals, 41 campaigns of
// which 40 with explicit node lists, 500 results, a result's list of
// 20,000 ids, 400 graphs in the release ledger and some 350 audit
// entries. Each listing, read page by page with the clients' helper
// (server/ldpctl/pages.h), gives every item exactly once, in order, in
// replies under the limit; a bad page token is INVALID_ARGUMENT naming it.
#include "server/curator/listings.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/dp/rdp_accountant.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "server/curator/credentials.h"
#include "server/curator/detail_lists.h"
#include "server/curator/server.h"
#include "server/curator/test_requests.h"
#include "server/ldpctl/pages.h"

namespace ldpgraph::curator {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using Stub = v1::AdminService::Stub;

constexpr int kMaxMessage = 16 << 10;
constexpr int kPageBytes = 4 << 10;
constexpr uint32_t kNodes = 2000;
constexpr int kListedCampaigns = 40;
constexpr uint32_t kListed = 500;  // nodes each of those lists
constexpr int kResults = 100;
constexpr int kGraphs = 400;
constexpr uint32_t kIds = 20000;
constexpr int kAuditEntries = 300;
const std::string kAdminToken = "0123456789abcdef0123456789abcdef";
const std::string kNodeKey(32, 'k');

// What a listing's pages held: the items in order, the pages, the bytes of
// the largest reply, and the bytes of all the items together.
template <typename Item>
struct Read {
  std::vector<Item> items;
  int pages = 0;
  size_t largest = 0, total = 0, largest_item = 0;
};

class ListingsWireTest : public ::testing::Test {
 protected:
  // One curator for the suite: filling it is most of the time.
  static void SetUpTestSuite() {
    std::string pattern = ::testing::TempDir() + "/curator_listings_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    folder_ = new std::string(pattern);
    ServerOptions o;
    o.data_dir = *folder_ + "/curator";
    o.nodes = kNodes;
    o.node_key = kNodeKey;
    o.admin_token = kAdminToken;
    o.insecure = true;
    o.synchronous_full = false;
    o.max_threads = 4;
    o.max_message_bytes = kMaxMessage;
    o.admin_page_bytes = kPageBytes;
    auto server = CuratorServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
    Fill();
  }
  static void TearDownTestSuite() {
    if (server_ != nullptr) server_->Shutdown(absl::Seconds(1));
    delete server_;
    server_ = nullptr;
    std::error_code ec;
    if (folder_ != nullptr) std::filesystem::remove_all(*folder_, ec);
    delete folder_;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    stub_ = v1::AdminService::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                            grpc::InsecureChannelCredentials()));
  }

  static ResultStore Store() {
    return server_->curator().operators().store();
  }

  static void Fill() {
    Curator& curator = server_->curator();
    // Every node enrolled with caps: the ledger knows them all.
    v1::EnrolRequest enrol;
    for (uint32_t v = 0; v < kNodes; ++v) {
      v1::NodeCredential* n = enrol.add_nodes();
      n->set_node_id(v);
      n->set_secret(NodeCredential(kNodeKey, v));
      n->mutable_caps()->set_total(1000);
      (*n->mutable_caps()->mutable_per_attribute())["features"] = 500;
    }
    auto session = curator.agents().Enrol(enrol);
    ASSERT_TRUE(session.ok()) << session.status();
    // c1 asks every node, which all refuse; c2.. list kListed nodes each.
    ASSERT_TRUE(curator.operators().CreateCampaign(requests::HdsCampaign(0.01)).ok());
    for (int c = 0; c < kListedCampaigns; ++c) {
      v1::CreateCampaignRequest r = requests::HdsCampaign(0.01);
      r.mutable_nodes()->clear_all();
      for (uint32_t v = 0; v < kListed; ++v) {
        r.mutable_nodes()->add_node_ids((v * 7 + c) % kNodes);
      }
      auto created = curator.operators().CreateCampaign(r);
      ASSERT_TRUE(created.ok()) << created.status();
    }
    v1::ReportBatch batch;
    for (uint32_t v = 0; v < kNodes; ++v) {
      v1::Report* r = batch.add_reports();
      r->set_campaign_id("c1");
      r->set_node_id(v);
      r->mutable_refusal()->set_reason(v1::REFUSAL_REASON_POLICY);
      r->mutable_refusal()->set_message("this node's policy refuses features");
    }
    auto ack = requests::Ingest(curator.agents(), **session, batch);
    ASSERT_TRUE(ack.ok()) << ack.status();
    for (const auto& a : ack->results()) ASSERT_EQ(a.code(), 0) << a.message();
    // Results: plain ones, releases of kGraphs graphs, one whose id list
    // was cut.
    for (int i = 0; i < kResults; ++i) {
      v1::StageResult r;
      r.set_stage("propagate");
      r.set_input(absl::StrCat("r", i));
      r.set_details_json(nlohmann::json({{"input", r.input()},
                                         {"method", "ppr"},
                                         {"note", std::string(200, 'x')}})
                             .dump());
      AddResult(r);
    }
    dp::RdpAccountant curve;
    ASSERT_TRUE(curve.ComposePureDp(0.001).ok());
    for (int i = 0; i < kGraphs; ++i) {
      v1::StageResult r;
      r.set_stage("release");
      r.set_input(absl::StrCat("campaign:c", 10000 + i));
      r.set_details_json(nlohmann::json({{"rdp", curve.ToJson()},
                                         {"epsilon", 0.001},
                                         {"delta", 0.0}})
                             .dump());
      AddResult(r);
    }
    v1::StageResult cut;
    cut.set_stage("estimate");
    cut.set_input("c1");
    cut.set_created_unix_ms(1234);
    nlohmann::json details = {{"flagged_nodes", kIds}, {"flagged", Ids()}};
    const IdLists whole = TruncateIdLists(&details);
    ASSERT_EQ(whole.size(), 1u);
    cut.set_details_json(details.dump());
    ASSERT_TRUE(
        WriteIdLists(server_->stages().IdListFile(cut), whole).ok());
    cut_id_ = AddResult(cut);
    for (int i = 0; i < kAuditEntries; ++i) {
      ASSERT_TRUE(Store()
                      .Audit("admin", "test.entry",
                             nlohmann::json({{"i", i},
                                             {"note", std::string(150, 'y')}})
                                 .dump())
                      .ok());
    }
  }
  static std::string AddResult(v1::StageResult r) {
    auto id = Store().AddResult(
        [&](int64_t id) {
          r.set_id(absl::StrCat("r", id));
          return r.SerializeAsString();
        },
        "");
    EXPECT_TRUE(id.ok()) << id.status();
    return r.id();
  }
  // The cut result's whole list.
  static std::vector<uint32_t> Ids() {
    std::vector<uint32_t> ids(kIds);
    for (uint32_t i = 0; i < kIds; ++i) ids[i] = i * 7;
    return ids;
  }

  // Every page of a listing; `items` picks a page's items.
  template <typename Request, typename Response, typename Items>
  auto ReadAll(grpc::Status (Stub::*method)(grpc::ClientContext*,
                                            const Request&, Response*),
               Request request, Items items, absl::Status* status) {
    using Item = typename std::decay_t<
        decltype(items(std::declval<const Response&>()))>::value_type;
    Read<Item> out;
    *status = ldpctl::ForEachPage(
        *stub_, method, std::move(request),
        [](grpc::ClientContext* ctx) {
          ctx->AddMetadata("authorization", "Bearer " + kAdminToken);
        },
        &ldpctl::GrpcToAbsl,
        [&](const Response& page) {
          ++out.pages;
          out.largest = std::max(out.largest, page.ByteSizeLong());
          for (const auto& item : items(page)) {
            out.total += ItemBytes(item);
            out.largest_item = std::max(out.largest_item, ItemBytes(item));
            out.items.push_back(item);
          }
          return absl::OkStatus();
        });
    return out;
  }
  // One call's status.
  template <typename Request, typename Response>
  absl::Status Call(grpc::Status (Stub::*method)(grpc::ClientContext*,
                                                 const Request&, Response*),
                    const Request& request) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + kAdminToken);
    Response out;
    return ldpctl::GrpcToAbsl(((*stub_).*method)(&ctx, request, &out));
  }
  static size_t ItemBytes(const google::protobuf::Message& m) {
    return m.ByteSizeLong();
  }
  static size_t ItemBytes(uint32_t) { return 1; }

  // Expects a listing read in several pages, each under the message limit
  // and within the page budget (or one item over it, alone), whose items
  // together would not have fitted in one reply.
  template <typename Item>
  static void ExpectPaged(const Read<Item>& r, const char* what) {
    EXPECT_GT(r.total, static_cast<size_t>(kMaxMessage)) << what;
    EXPECT_GT(r.pages, 3) << what;
    EXPECT_LE(r.largest, static_cast<size_t>(kMaxMessage)) << what;
    EXPECT_LE(r.largest,
              std::max<size_t>(kPageBytes, r.largest_item + 16) + 64)
        << what;
  }

  static std::string* folder_;
  static CuratorServer* server_;
  static std::string cut_id_;
  std::unique_ptr<Stub> stub_;
};

std::string* ListingsWireTest::folder_ = nullptr;
CuratorServer* ListingsWireTest::server_ = nullptr;
std::string ListingsWireTest::cut_id_;

TEST_F(ListingsWireTest, CampaignsNewestFirstEachOnce) {
  std::vector<std::string> expected;
  for (const v1::Campaign& c : server_->curator().operators().campaigns().List()) {
    expected.push_back(c.id());
  }
  ASSERT_EQ(expected.size(), size_t{kListedCampaigns + 1});
  EXPECT_EQ(expected.front(), absl::StrCat("c", kListedCampaigns + 1));
  // By bytes (a campaign with 500 node ids is about 1.3 KiB), then by
  // count.
  for (uint32_t page_size : {100000u, 2u}) {
    v1::ListCampaignsRequest req;
    req.set_page_size(page_size);
    absl::Status s;
    auto r = ReadAll(&Stub::ListCampaigns, req,
                     [](const v1::ListCampaignsResponse& p) -> const auto& {
                       return p.campaigns();
                     },
                     &s);
    ASSERT_TRUE(s.ok()) << s;
    std::vector<std::string> ids;
    for (const auto& c : r.items) ids.push_back(c.id());
    EXPECT_THAT(ids, ElementsAreArray(expected)) << page_size;
    ExpectPaged(r, "campaigns");
    if (page_size == 2) {
      EXPECT_EQ(r.pages, (kListedCampaigns + 2) / 2);
    }
    EXPECT_EQ(r.items.back().nodes().all(), true);
    EXPECT_EQ(r.items.front().nodes().node_ids_size(), static_cast<int>(kListed));
  }
}

TEST_F(ListingsWireTest, RefusalsByNodeEachOnce) {
  v1::ListRefusalsRequest req;
  req.set_campaign_id("c1");
  req.set_page_size(100000);
  absl::Status s;
  auto r = ReadAll(&Stub::ListRefusals, req,
                   [](const v1::ListRefusalsResponse& p) -> const auto& {
                     return p.refusals();
                   },
                   &s);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(r.items.size(), kNodes);
  for (uint32_t v = 0; v < kNodes; ++v) {
    EXPECT_EQ(r.items[v].node_id(), v);
    EXPECT_EQ(r.items[v].reason(), v1::REFUSAL_REASON_POLICY);
  }
  EXPECT_EQ(r.items[0].message(), "this node's policy refuses features");
  ExpectPaged(r, "refusals");
}

TEST_F(ListingsWireTest, BudgetsOfEveryKnownNodeARangeAndAListEachOnce) {
  const auto nodes = [](const Read<v1::NodeBudget>& r) {
    std::vector<uint32_t> out;
    for (const auto& b : r.items) out.push_back(b.node_id());
    return out;
  };
  const auto budgets = [](const v1::GetBudgetsResponse& p) -> const auto& {
    return p.budgets();
  };
  absl::Status s;
  v1::GetBudgetsRequest all;
  all.set_page_size(100000);
  auto r = ReadAll(&Stub::GetBudgets, all, budgets, &s);
  ASSERT_TRUE(s.ok()) << s;
  std::vector<uint32_t> expected(kNodes);
  for (uint32_t v = 0; v < kNodes; ++v) expected[v] = v;
  EXPECT_THAT(nodes(r), ElementsAreArray(expected));
  EXPECT_TRUE(r.items[17].caps_known());
  EXPECT_EQ(r.items[17].caps().total(), 1000);
  ExpectPaged(r, "budgets");

  v1::GetBudgetsRequest range;
  range.set_range_begin(100);
  range.set_range_end(kNodes + 50);  // past the graph: its nodes only
  range.set_page_size(100000);
  r = ReadAll(&Stub::GetBudgets, range, budgets, &s);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(nodes(r), ElementsAreArray(expected.begin() + 100, expected.end()));
  ExpectPaged(r, "a range of budgets");

  // A list, in its order; ids outside the graph left out.
  v1::GetBudgetsRequest list;
  std::vector<uint32_t> listed;
  for (uint32_t v = kNodes; v-- > 0;) {
    list.add_node_ids(v);
    listed.push_back(v);
    if (v % 1000 == 0) list.add_node_ids(kNodes + v);
  }
  list.set_page_size(100000);
  r = ReadAll(&Stub::GetBudgets, list, budgets, &s);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(nodes(r), ElementsAreArray(listed));
  ExpectPaged(r, "a list of budgets");
}

TEST_F(ListingsWireTest, ResultsNewestFirstEachOnce) {
  auto rows = Store().ListResults();
  ASSERT_TRUE(rows.ok());
  std::vector<std::string> expected;
  for (auto it = rows->rbegin(); it != rows->rend(); ++it) {
    expected.push_back(absl::StrCat("r", it->id));
  }
  v1::ListResultsRequest req;
  req.set_page_size(100000);
  absl::Status s;
  auto r = ReadAll(&Stub::ListResults, req,
                   [](const v1::ListResultsResponse& p) -> const auto& {
                     return p.results();
                   },
                   &s);
  ASSERT_TRUE(s.ok()) << s;
  std::vector<std::string> ids;
  for (const auto& x : r.items) ids.push_back(x.id());
  EXPECT_THAT(ids, ElementsAreArray(expected));
  ExpectPaged(r, "results");
}

TEST_F(ListingsWireTest, AResultsCutIdListWholeEachOnce) {
  // The details hold the first 100 ids and say so.
  v1::ListResultsRequest first;
  first.set_page_size(1);
  v1::ListResultsResponse newest;
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + kAdminToken);
    ASSERT_TRUE(stub_->ListResults(&ctx, first, &newest).ok());
  }
  ASSERT_EQ(newest.results_size(), 1);
  EXPECT_NE(newest.next_page_token(), "");
  const auto details = nlohmann::json::parse(newest.results(0).details_json());
  EXPECT_EQ(newest.results(0).id(), cut_id_);
  EXPECT_EQ(details["flagged"].size(), kDetailIds);
  EXPECT_EQ(details["flagged_truncated"], true);
  EXPECT_EQ(details["flagged_nodes"], kIds);

  v1::ListResultIdsRequest req;
  req.set_result_id(cut_id_);
  req.set_list("flagged");
  req.set_page_size(100000);
  absl::Status s;
  auto r = ReadAll(&Stub::ListResultIds, req,
                   [](const v1::ListResultIdsResponse& p) -> const auto& {
                     return p.ids();
                   },
                   &s);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(r.items, ElementsAreArray(Ids()));
  // Ids of 1 to 3 bytes each: the total counted in bytes of the reply.
  size_t bytes = 0;
  for (uint32_t id : r.items) {
    bytes += google::protobuf::io::CodedOutputStream::VarintSize32(id);
  }
  r.total = bytes;
  ExpectPaged(r, "result ids");

  req.set_list("robust.dropped_nodes");
  req.set_page_token("");
  r = ReadAll(&Stub::ListResultIds, req,
              [](const v1::ListResultIdsResponse& p) -> const auto& {
                return p.ids();
              },
              &s);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("its lists: flagged"));
}

TEST_F(ListingsWireTest, ReleaseLedgerByGraphEachOnce) {
  auto whole = server_->stages().Ledger();
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->graphs_size(), kGraphs);
  std::vector<std::string> expected;
  for (const auto& g : whole->graphs()) expected.push_back(g.graph());
  EXPECT_TRUE(std::is_sorted(expected.begin(), expected.end()));
  v1::GetReleaseLedgerRequest req;
  req.set_page_size(100000);
  absl::Status s;
  auto r = ReadAll(&Stub::GetReleaseLedger, req,
                   [](const v1::ReleaseLedger& p) -> const auto& {
                     return p.graphs();
                   },
                   &s);
  ASSERT_TRUE(s.ok()) << s;
  std::vector<std::string> graphs;
  for (const auto& g : r.items) graphs.push_back(g.graph());
  EXPECT_THAT(graphs, ElementsAreArray(expected));
  ExpectPaged(r, "release ledger");
  EXPECT_EQ(r.items[5].releases(), 1u);
  EXPECT_EQ(r.items[5].result_ids(0), absl::StrCat("r", kResults + 6));
}

TEST_F(ListingsWireTest, AuditOldestFirstEachOnce) {
  auto rows = Store().ListAudit(0, 1000000);
  ASSERT_TRUE(rows.ok());
  ASSERT_GT(rows->size(), static_cast<size_t>(kAuditEntries));
  std::vector<uint64_t> expected;
  for (const auto& row : *rows) expected.push_back(row.sequence);
  v1::ListAuditRequest req;
  req.set_limit(10000);
  absl::Status s;
  auto r = ReadAll(&Stub::ListAudit, req,
                   [](const v1::ListAuditResponse& p) -> const auto& {
                     return p.entries();
                   },
                   &s);
  ASSERT_TRUE(s.ok()) << s;
  std::vector<uint64_t> sequences;
  for (const auto& e : r.items) sequences.push_back(e.sequence());
  EXPECT_THAT(sequences, ElementsAreArray(expected));
  ExpectPaged(r, "audit");
  // From after_sequence on, the same way.
  req.set_after_sequence(expected[10]);
  r = ReadAll(&Stub::ListAudit, req,
              [](const v1::ListAuditResponse& p) -> const auto& {
                return p.entries();
              },
              &s);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(r.items.size(), expected.size() - 11);
  EXPECT_EQ(r.items.front().sequence(), expected[11]);
}

// A page token that is not one of the listing's -- garbage, another
// listing's, another campaign's or list's -- is INVALID_ARGUMENT naming it.
TEST_F(ListingsWireTest, ABadPageTokenIsInvalidArgumentNamingIt) {
  const auto call = [&](auto method, const auto& request) {
    return Call(method, request);
  };
  // A real token of each kind, from a first page of one item.
  v1::ListCampaignsRequest campaigns;
  campaigns.set_page_size(1);
  v1::ListCampaignsResponse first;
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + kAdminToken);
    ASSERT_TRUE(stub_->ListCampaigns(&ctx, campaigns, &first).ok());
  }
  const std::string campaigns_token = first.next_page_token();
  ASSERT_FALSE(campaigns_token.empty());
  v1::ListRefusalsRequest refusals;
  refusals.set_campaign_id("c1");
  refusals.set_page_size(1);
  v1::ListRefusalsResponse refused;
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + kAdminToken);
    ASSERT_TRUE(stub_->ListRefusals(&ctx, refusals, &refused).ok());
  }
  ASSERT_FALSE(refused.next_page_token().empty());

  for (const std::string& token :
       {std::string("not-a-token"), std::string("campaigns:"),
        std::string("campaigns:-3"), std::string("audit:12x")}) {
    SCOPED_TRACE(token);
    std::vector<absl::Status> refusals_of;
    campaigns.set_page_token(token);
    refusals_of.push_back(call(&Stub::ListCampaigns, campaigns));
    v1::ListRefusalsRequest rr;
    rr.set_campaign_id("c1");
    rr.set_page_token(token);
    refusals_of.push_back(call(&Stub::ListRefusals, rr));
    v1::GetBudgetsRequest b;
    b.set_page_token(token);
    refusals_of.push_back(call(&Stub::GetBudgets, b));
    v1::ListResultsRequest res;
    res.set_page_token(token);
    refusals_of.push_back(call(&Stub::ListResults, res));
    v1::ListResultIdsRequest ids;
    ids.set_result_id(cut_id_);
    ids.set_list("flagged");
    ids.set_page_token(token);
    refusals_of.push_back(call(&Stub::ListResultIds, ids));
    v1::GetReleaseLedgerRequest ledger;
    ledger.set_page_token(token);
    refusals_of.push_back(call(&Stub::GetReleaseLedger, ledger));
    v1::ListAuditRequest audit;
    audit.set_page_token(token);
    refusals_of.push_back(call(&Stub::ListAudit, audit));
    for (const absl::Status& s : refusals_of) {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("page_token '", token, "'")));
    }
  }
  // Another listing's token, another campaign's, another budget mode's.
  v1::ListResultsRequest results;
  results.set_page_token(campaigns_token);
  EXPECT_EQ(call(&Stub::ListResults, results).code(),
            absl::StatusCode::kInvalidArgument);
  v1::ListRefusalsRequest other = refusals;
  other.set_campaign_id("c2");
  other.set_page_token(refused.next_page_token());
  EXPECT_EQ(call(&Stub::ListRefusals, other).code(),
            absl::StatusCode::kInvalidArgument);
  v1::GetBudgetsRequest range;
  range.set_range_begin(0);
  range.set_range_end(10);
  range.set_page_token("budgets:5");
  EXPECT_EQ(call(&Stub::GetBudgets, range).code(),
            absl::StatusCode::kInvalidArgument);
}

// GetBudgets' explicit list is capped as a campaign's is; a range is not.
TEST_F(ListingsWireTest, AnOverlongBudgetListIsRefusedForARange) {
  // In process: a request of a million ids is over this curator's 64 KiB.
  Listings listings(&server_->curator().operators(), &server_->stages(), {});
  v1::GetBudgetsRequest req;
  for (int i = 0; i <= kMaxListedNodes; ++i) req.add_node_ids(i % kNodes);
  auto r = listings.Budgets(req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("at most 1000000 ids"));
  EXPECT_THAT(r.status().message(), HasSubstr("give a range"));
  req.mutable_node_ids()->RemoveLast();
  r = listings.Budgets(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->budgets_size(), 1000);  // the default page size
  v1::GetBudgetsRequest both;
  both.add_node_ids(1);
  both.set_range_end(3);
  EXPECT_EQ(listings.Budgets(both).status().code(),
            absl::StatusCode::kInvalidArgument);
  v1::GetBudgetsRequest reversed;
  reversed.set_range_begin(5);
  reversed.set_range_end(5);
  EXPECT_THAT(listings.Budgets(reversed).status().message(),
              HasSubstr("range_end must be > range_begin"));
}

}  // namespace
}  // namespace ldpgraph::curator
