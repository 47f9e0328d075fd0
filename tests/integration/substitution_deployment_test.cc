// Neighbour substitution (MECHANISM_KIND_EDGE_SUBSTITUTION) through the
// real deployment, in one process: a CuratorServer started with private
// edges (it keeps the node count and labels of a generated graph and drops
// its edges) on 127.0.0.1:0 with TLS from deploy/dev-certs.sh, three agent
// hosts (AgentHost over AgentShard) on threads exchanging sealed messages
// through the curator's relay, and a raw AgentService client playing a
// forger. One campaign over 300 nodes, then a second identical one, then a
// features campaign with the substitution's feature question and the
// pipeline over the assembled graph. Checked:
//   - every node reports; each list is its true degree minus the drops
//     nothing resolved for (the agent's own count), and the curator
//     assembles the union of the lists;
//   - the key directory serves every node's enrolled public key;
//   - the curator's relay table holds no node's feature report in clear
//     (it reads no payload); and, stated as what it is, its routing pairs
//     are exactly the true edges (docs: common/edges/README.md, "Routing
//     metadata");
//   - forged and misaddressed messages are refused by their recipients,
//     counted, and the exchange completes;
//   - the ledger and the agents charge eps_e on edges and eps_x on
//     features once: the second identical campaign and the features
//     campaign with the same feature question spend nothing more, and
//     the second campaign's answers equal the first's;
//   - the curator holds no edges: a stage without graph_campaign_id is
//     refused; with it, it runs and says which graph it used.
#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/agent.h"
#include "client/agent_host.h"
#include "client/edge_exchange.h"
#include "common/crypto/sealed.h"
#include "common/dataset/dataset.h"
#include "common/dataset/generator.h"
#include "common/wire/codec.h"
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

constexpr uint32_t kNodes = 300;
constexpr int kHosts = 3;
constexpr double kEdgeEpsilon = 1.0;
constexpr double kFeatureEpsilon = 2.0;

class HostThread {
 public:
  explicit HostThread(std::unique_ptr<agent::AgentHost> host)
      : host_(std::move(host)) {
    thread_ = std::thread([this] { result_ = host_->Run(); });
  }
  ~HostThread() {
    if (thread_.joinable()) {
      host_->Stop();
      thread_.join();
    }
  }
  agent::AgentHost& host() { return *host_; }

 private:
  std::unique_ptr<agent::AgentHost> host_;
  std::thread thread_;
  absl::Status result_;
};

class SubstitutionDeploymentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto certs = MakeDevCerts(NewTempDir("certs"));
    ASSERT_TRUE(certs.ok()) << certs.status();
    certs_ = *std::move(certs);
    dirs_.push_back(certs_.dir);
    // A generated graph with planted classes; features in [0, 1].
    GeneratorOptions g = DefaultGeneratorOptions();
    g.nodes = kNodes;
    g.features = 32;
    auto data = GenerateDataset(g);
    ASSERT_TRUE(data.ok()) << data.status();
    data_ = *std::move(data);
    dataset_dir_ = TempDir("dataset");
    ASSERT_TRUE(WriteDataset(data_, dataset_dir_).ok());
  }
  void TearDown() override {
    hosts_.clear();
    if (server_ != nullptr) server_->Shutdown(absl::Seconds(2));
    server_.reset();
    if (!HasFailure()) {
      for (const std::string& d : dirs_) RemoveTempDir(d);
    }
  }
  std::string TempDir(const std::string& name) {
    dirs_.push_back(NewTempDir(name));
    return dirs_.back();
  }

  void StartCurator() {
    curator::ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.data_dir = TempDir("curator");
    o.graph_dir = dataset_dir_;
    o.private_edges = true;
    o.node_key = certs_.node_key;
    o.admin_token = certs_.admin_hex;
    o.tls_cert_pem = certs_.cert_pem;
    o.tls_key_pem = certs_.key_pem;
    o.http_listen.clear();
    auto server = curator::CuratorServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = TlsChannel(server_->port(), certs_.ca_pem);
    admin_ = std::make_unique<Admin>(channel_, certs_.admin_hex);
  }

  void StartHost(uint32_t begin, uint32_t end) {
    auto records = agent::LoadShard(dataset_dir_, FeatureScaling::kNone, begin, end);
    ASSERT_TRUE(records.ok()) << records.status();
    agent::AgentPolicy policy;
    policy.caps.total = 10;
    auto shard = agent::AgentShard::Create(
        std::move(*records), policy, /*seed=*/17,
        TempDir(absl::StrCat("agent-", begin)));
    ASSERT_TRUE(shard.ok()) << shard.status();
    agent::AgentHostOptions o;
    o.curator = absl::StrCat("127.0.0.1:", server_->port());
    o.ca_pem = certs_.ca_pem;
    o.host_name = absl::StrCat("host-", begin, "-", end);
    for (uint32_t v = begin; v < end; ++v) {
      o.credentials.emplace_back(v, curator::NodeCredential(certs_.node_key, v));
    }
    o.caps = policy.caps;
    o.backoff_initial = absl::Milliseconds(50);
    o.backoff_max = absl::Seconds(1);
    auto host = agent::AgentHost::Create(std::move(o), *std::move(shard));
    ASSERT_TRUE(host.ok()) << host.status();
    hosts_.push_back(std::make_unique<HostThread>(*std::move(host)));
  }

  agent::AgentHost& HostOf(uint32_t v) {
    return hosts_[v * kHosts / kNodes]->host();
  }

  v1::MechanismSpec FeatureSpec() const {
    v1::MechanismSpec f;
    f.set_kind(v1::MECHANISM_KIND_MULTIBIT);
    f.set_epsilon(kFeatureEpsilon);
    f.set_dimension(static_cast<uint32_t>(data_.meta.features));
    f.set_range_low(0);
    f.set_range_high(1);
    return f;
  }

  v1::CreateCampaignRequest SubstitutionCampaign() const {
    v1::CreateCampaignRequest r;
    r.set_name("substitution");
    r.set_attribute(v1::ATTRIBUTE_EDGES);
    v1::MechanismSpec* s = r.mutable_spec();
    s->set_kind(v1::MECHANISM_KIND_EDGE_SUBSTITUTION);
    s->set_epsilon(kEdgeEpsilon);
    s->set_dimension(kNodes);
    v1::SubstitutionSpec* sub = s->mutable_substitution();
    sub->set_approach(1);
    sub->set_similarity("cosine");
    sub->set_top_k(5);
    sub->set_max_dummies(3);
    sub->set_dummy_mean(0.5);
    sub->set_dummy_std(0.5);
    sub->set_round_timeout_ms(60000);
    *sub->mutable_features() = FeatureSpec();
    r.mutable_nodes()->set_all(true);
    r.set_quorum(1.0);
    return r;
  }

  absl::StatusOr<v1::Campaign> CreateAndWait(const v1::CreateCampaignRequest& r) {
    v1::Campaign c;
    grpc::Status s = admin_->Create(r, &c);
    if (!s.ok()) return Admin::Convert(s);
    return admin_->WaitClosed(c.id(), absl::Seconds(300));
  }

  std::map<uint32_t, v1::Report> StoredReports(const std::string& id) {
    std::map<uint32_t, v1::Report> out;
    auto reports = server_->curator().operators().campaigns().Reports(id);
    EXPECT_TRUE(reports.ok()) << reports.status();
    if (reports.ok()) {
      for (auto& [v, r] : *reports) out[v] = std::move(r);
    }
    return out;
  }

  // A forger's session (a neighbour u of *victim and a *stranger, with
  // their credentials but not their keys) reads the key directory and, before
  // campaign c1 opens, relays three forged messages to the victim: garbage
  // from u, a box sealed under a key that is not u's, the same from the
  // stranger.
  void RelayForgeries(uint32_t* victim, uint32_t* stranger);
  // The relay's table of campaign c1, as a session of every node reads it,
  // holds no node's feature report in the clear; its routing pairs are the
  // true edges both ways, besides the forger's (stranger -> victim).
  void ExpectRelayShowsRoutesOnly(const Graph& g, uint32_t stranger,
                                  uint32_t victim);
  // LPGNN on the estimate of features_campaign: refused without a graph
  // campaign, trained over c1's assembled graph (graph_edges edges) with it.
  void ExpectPipelineOnAssembledGraph(const std::string& features_campaign,
                                      size_t graph_edges);

  std::map<uint32_t, double> LedgerTotals() {
    std::map<uint32_t, double> out;
    auto budgets = admin_->Budgets(0, kNodes);
    EXPECT_TRUE(budgets.ok()) << budgets.status();
    if (budgets.ok()) {
      for (const auto& b : *budgets) out[b.node_id()] = b.total_spent();
    }
    return out;
  }

  DevCerts certs_;
  Dataset data_;
  std::string dataset_dir_;
  std::unique_ptr<curator::CuratorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Admin> admin_;
  std::vector<std::unique_ptr<HostThread>> hosts_;
  std::vector<std::string> dirs_;
};

void SubstitutionDeploymentTest::ExpectRelayShowsRoutesOnly(
    const Graph& g, uint32_t stranger, uint32_t victim) {
  // No feature report in clear...
  curator::Session everyone;
  for (uint32_t v = 0; v < kNodes; ++v) everyone.nodes.push_back(v);
  everyone.Index();
  std::vector<v1::SealedMessage> sealed;
  for (uint64_t after = 0;;) {
    auto page =
        server_->curator().agents().relay().Fetch(everyone, after, 0, "c1");
    ASSERT_TRUE(page.ok()) << page.status();
    if (page->empty()) break;
    after = page->back().sequence();
    for (auto& m : *page) sealed.push_back(std::move(m));
  }
  ASSERT_GT(sealed.size(), 0u);
  const QueryKey features_key =
      wire::WireQueryKey(v1::ATTRIBUTE_FEATURES, FeatureSpec());
  std::set<std::pair<uint32_t, uint32_t>> routes;
  for (const auto& m : sealed) routes.emplace(m.from_node(), m.to_node());
  for (uint32_t v = 0; v < kNodes; ++v) {
    auto memo = HostOf(v).shard().agent(v)->budget().Lookup(features_key);
    ASSERT_TRUE(memo.has_value()) << "node " << v;
    v1::Report body;
    ASSERT_TRUE(body.ParseFromString(memo->answer));
    const std::string clear = body.features().SerializeAsString();
    ASSERT_GE(clear.size(), 4u);
    for (const auto& m : sealed) {
      ASSERT_FALSE(absl::StrContains(m.ciphertext(), clear))
          << "node " << v << "'s feature report in the clear in message "
          << m.sequence();
    }
  }
  // ... but its routing pairs are the true edges, both ways (besides the
  // forger's three): what the relay reveals (common/edges/README.md).
  std::set<std::pair<uint32_t, uint32_t>> true_edges;
  for (uint32_t v = 0; v < kNodes; ++v) {
    for (uint32_t w : g.neighbors(v)) true_edges.emplace(v, w);
  }
  routes.erase({stranger, victim});
  EXPECT_EQ(routes, true_edges);
}

void SubstitutionDeploymentTest::ExpectPipelineOnAssembledGraph(
    const std::string& features_campaign, size_t graph_edges) {
  auto estimate = admin_->Estimate(features_campaign);
  ASSERT_TRUE(estimate.ok()) << estimate.status();
  auto evaluate = [&](const std::string& graph) {
    v1::EvaluateRequest req;
    req.set_input(estimate->id());
    req.set_pipeline_method(v1::PIPELINE_METHOD_LPGNN);
    req.set_pipeline_task(v1::PIPELINE_TASK_NODE);
    req.set_graph_campaign_id(graph);
    req.set_seed(1);
    grpc::ClientContext ctx;
    admin_->Prepare(&ctx);
    v1::StageResult out;
    grpc::Status s = admin_->stub().Evaluate(&ctx, req, &out);
    if (!s.ok()) return absl::StatusOr<v1::StageResult>(Admin::Convert(s));
    return absl::StatusOr<v1::StageResult>(out);
  };
  auto refused = evaluate("");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("--private-edges"));
  auto evaluated = evaluate("c1");
  ASSERT_TRUE(evaluated.ok()) << evaluated.status();
  EXPECT_THAT(evaluated->details_json(), HasSubstr(R"("graph":"c1")"));
  EXPECT_THAT(evaluated->details_json(),
              HasSubstr(absl::StrCat(R"("graph_edges":)", graph_edges)));
  EXPECT_GT(evaluated->metric(), 0.0);
}

void SubstitutionDeploymentTest::RelayForgeries(uint32_t* victim_out,
                                                uint32_t* stranger_out) {
  const Graph& g = data_.graph;
  // A forger: a session for node u (its credential, no key), relaying into
  // the campaign about to open (c1) before any agent has started.
  uint32_t& victim = *victim_out;
  victim = 0;
  while (g.degree(victim) == 0) ++victim;
  const uint32_t u = g.neighbors(victim)[0];
  uint32_t& stranger = *stranger_out;  // not a neighbour of victim
  stranger = 0;
  while (stranger == victim ||
         std::binary_search(g.neighbors(victim).begin(),
                            g.neighbors(victim).end(), stranger)) {
    ++stranger;
  }
  auto raw = v1::AgentService::NewStub(channel_);
  std::string token;
  {
    v1::EnrolRequest req;
    req.set_host_name("forger");
    for (uint32_t v : {u, stranger}) {
      v1::NodeCredential* c = req.add_nodes();
      c->set_node_id(v);
      c->set_secret(curator::NodeCredential(certs_.node_key, v));
    }
    v1::EnrolResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(raw->Enrol(&ctx, req, &resp).ok());
    token = resp.session_token();
  }
  // The key directory, as any session sees it: every node's enrolled key.
  {
    v1::PublicKeysRequest req;
    for (uint32_t v = 0; v < kNodes; ++v) req.add_node_ids(v);
    v1::PublicKeysResponse resp;
    grpc::ClientContext ctx;
    ctx.AddMetadata("ldpgraph-session", token);
    ASSERT_TRUE(raw->PublicKeys(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.keys_size(), static_cast<int>(kNodes));
    for (const auto& k : resp.keys()) {
      EXPECT_EQ(k.public_key(),
                HostOf(k.node_id()).shard().key_pair(k.node_id())->public_key());
    }
    // Unauthenticated: refused.
    grpc::ClientContext anon;
    EXPECT_EQ(raw->PublicKeys(&anon, req, &resp).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  const std::string victim_key(
      HostOf(victim).shard().key_pair(victim)->public_key());
  auto mallory = crypto::KeyPair::Generate();
  ASSERT_TRUE(mallory.ok());
  v1::EdgeExchange abstain;
  abstain.set_round(1);
  abstain.set_abstain(true);
  auto forged_box = crypto::Seal(*mallory, victim_key,
                                 agent::ExchangeContext("c1", 1, u, victim),
                                 abstain.SerializeAsString());
  ASSERT_TRUE(forged_box.ok());
  {
    v1::RelayRequest req;
    auto add = [&](uint32_t from, std::string box) {
      v1::SealedMessage* m = req.add_messages();
      m->set_campaign_id("c1");
      m->set_from_node(from);
      m->set_to_node(victim);
      m->set_ciphertext(std::move(box));
    };
    add(u, std::string(100, 'x'));  // garbage "from" a neighbour
    add(u, *forged_box);            // sealed under a key that is not u's
    add(stranger, *forged_box);     // from a node that is not a neighbour
    v1::RelayResponse resp;
    grpc::ClientContext ctx;
    ctx.AddMetadata("ldpgraph-session", token);
    ASSERT_TRUE(raw->Relay(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.accepted(), 3u);
  }

}

TEST_F(SubstitutionDeploymentTest, RunsThroughTheSealedRelay) {
  StartCurator();
  for (int h = 0; h < kHosts; ++h) {
    StartHost(kNodes * h / kHosts, kNodes * (h + 1) / kHosts);
  }
  // Every node enrolled, with its key in the curator's directory.
  ASSERT_TRUE(PollUntil(
      [&] {
        auto b = admin_->Budgets(0, kNodes);
        if (!b.ok() || b->size() != kNodes) return false;
        for (const auto& x : *b) {
          if (!x.caps_known()) return false;
        }
        return true;
      },
      absl::Seconds(120)));

  // The curator keeps no edges.
  {
    grpc::ClientContext ctx;
    admin_->Prepare(&ctx);
    v1::CuratorStatus status;
    ASSERT_TRUE(
        admin_->stub().GetStatus(&ctx, v1::GetStatusRequest(), &status).ok());
    EXPECT_EQ(status.graph_nodes(), kNodes);
    EXPECT_EQ(status.graph_edges(), 0u);
  }

  const Graph& g = data_.graph;
  uint32_t victim = 0, stranger = 0;
  ASSERT_NO_FATAL_FAILURE(RelayForgeries(&victim, &stranger));

  // --- the campaign -------------------------------------------------------
  const absl::Time start = absl::Now();
  auto c1 = CreateAndWait(SubstitutionCampaign());
  ASSERT_TRUE(c1.ok()) << c1.status();
  ASSERT_EQ(c1->id(), "c1");
  EXPECT_EQ(c1->progress().reported(), kNodes);
  EXPECT_EQ(c1->progress().refused(), 0u);
  EXPECT_EQ(c1->progress().rejected(), 0u);
  std::cerr << "substitution over " << kNodes << " nodes, " << kHosts
            << " hosts: " << absl::FormatDuration(absl::Now() - start) << "\n";
  for (auto& h : hosts_) {
    ASSERT_TRUE(h->host().exchanges().WaitIdle(absl::Seconds(60)));
  }
  const auto reports = StoredReports("c1");
  ASSERT_EQ(reports.size(), kNodes);

  // Degrees: true degree minus the drops nothing resolved for.
  uint64_t dropped = 0, substituted = 0, unresolved = 0;
  std::vector<std::vector<uint32_t>> lists(kNodes);
  for (uint32_t v = 0; v < kNodes; ++v) {
    const v1::Report& r = reports.at(v);
    ASSERT_TRUE(r.has_edges()) << r.ShortDebugString();
    lists[v].assign(r.edges().neighbours().begin(), r.edges().neighbours().end());
    const auto outcomes = HostOf(v).exchanges().Outcomes("c1");
    ASSERT_TRUE(outcomes.contains(v));
    const agent::ExchangeNodeOutcome& o = outcomes.at(v);
    ASSERT_TRUE(o.done);
    EXPECT_EQ(o.stats.degree, g.degree(v));
    EXPECT_EQ(o.stats.absent, 0u) << "node " << v;
    EXPECT_EQ(lists[v].size(), g.degree(v) - o.stats.unresolved) << "node " << v;
    EXPECT_EQ(lists[v], o.result);
    dropped += o.stats.dropped;
    substituted += o.stats.substituted;
    unresolved += o.stats.unresolved;
  }
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(substituted + unresolved, dropped);
  // The curator's assembled graph is the union of the lists.
  auto assembled = server_->stages().AssembledGraph("c1");
  ASSERT_TRUE(assembled.ok()) << assembled.status();
  std::set<std::pair<uint32_t, uint32_t>> union_edges;
  for (uint32_t v = 0; v < kNodes; ++v) {
    for (uint32_t w : lists[v]) union_edges.emplace(std::min(v, w), std::max(v, w));
  }
  EXPECT_EQ(assembled->num_edges(), union_edges.size());
  for (uint32_t v = 0; v < kNodes; ++v) {
    EXPECT_GE(assembled->degree(v), lists[v].size());
  }

  // The forged messages were refused by the victim; the exchange went on.
  uint64_t rejected = 0;
  for (auto& h : hosts_) {
    rejected += h->host().exchanges().counters().messages_rejected.load();
  }
  EXPECT_GE(rejected, 3u);
  EXPECT_TRUE(reports.at(victim).has_edges());

  // The relay's table: no feature report in clear, the true edges as routes.
  ASSERT_NO_FATAL_FAILURE(ExpectRelayShowsRoutesOnly(g, stranger, victim));

  // --- the ledger ---------------------------------------------------------
  const auto spent = LedgerTotals();
  for (uint32_t v = 0; v < kNodes; ++v) {
    EXPECT_DOUBLE_EQ(spent.at(v), kEdgeEpsilon + kFeatureEpsilon) << v;
    EXPECT_DOUBLE_EQ(*HostOf(v).shard().spent(v, "edges"), kEdgeEpsilon);
    EXPECT_DOUBLE_EQ(*HostOf(v).shard().spent(v, "features"), kFeatureEpsilon);
  }

  // A second identical campaign: the memo answers, nothing is spent, the
  // answers are the first's.
  auto c2 = CreateAndWait(SubstitutionCampaign());
  ASSERT_TRUE(c2.ok()) << c2.status();
  EXPECT_EQ(c2->progress().reported(), kNodes);
  const auto again = StoredReports(c2->id());
  ASSERT_EQ(again.size(), kNodes);
  for (uint32_t v = 0; v < kNodes; ++v) {
    EXPECT_EQ(again.at(v).edges().SerializeAsString(),
              reports.at(v).edges().SerializeAsString())
        << "node " << v;
  }
  EXPECT_EQ(LedgerTotals(), spent);
  for (auto& h : hosts_) {
    ASSERT_TRUE(h->host().exchanges().WaitIdle(absl::Seconds(120)));
  }
  for (uint32_t v = 0; v < kNodes; ++v) {
    EXPECT_DOUBLE_EQ(*HostOf(v).shard().spent(v), kEdgeEpsilon + kFeatureEpsilon);
  }

  // A features campaign with the substitution's feature question: the same
  // reports (memo), no spend.
  v1::CreateCampaignRequest features;
  features.set_attribute(v1::ATTRIBUTE_FEATURES);
  *features.mutable_spec() = FeatureSpec();
  features.mutable_nodes()->set_all(true);
  features.set_quorum(1.0);
  auto c3 = CreateAndWait(features);
  ASSERT_TRUE(c3.ok()) << c3.status();
  EXPECT_EQ(c3->progress().reported(), kNodes);
  EXPECT_EQ(LedgerTotals(), spent);

  // --- the pipeline over the assembled graph --------------------------------
  ASSERT_NO_FATAL_FAILURE(
      ExpectPipelineOnAssembledGraph(c3->id(), union_edges.size()));
}

}  // namespace
}  // namespace ldpgraph::integration
