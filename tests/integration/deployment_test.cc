// Integration tests of the gRPC deployment, in one process: a CuratorServer
// on 127.0.0.1:0 with TLS material from deploy/dev-certs.sh, agent hosts
// (AgentHost over AgentShard) on threads, and raw AgentService/AdminService
// stubs that play a misbehaving agent or operator.
//
//   SeededCampaignEqualsTheLibraryPath  a features campaign over cora from 4
//       agent hosts; the curator's estimate equals, float for float, what
//       the library computes from the same seeds.
//   ReportValidation                    every kind of malformed report is
//       INVALID_ARGUMENT and never stored; PERMISSION_DENIED,
//       ALREADY_EXISTS, duplicate, FAILED_PRECONDITION.
//   AuthenticationAndTls                forged node credentials, made-up
//       session tokens, wrong admin tokens, plaintext clients.
//   BudgetCapsLedgerAndAgentRefusal     the ledger refuses what declared
//       caps forbid; the agent refuses what only it knows it cannot afford,
//       and the refusal reaches the operator.
//   AHostWithMoreNodesThanOneEnrolTakesEnrolsInParts  a host over more
//       nodes than the curator's per-call limit completes a campaign, and
//       its restart replaces its session.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/agent.h"
#include "client/agent_host.h"
#include "common/dataset/dataset.h"
#include "common/dataset/generator.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/mechanisms/hds.h"
#include "common/random/random.h"
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

constexpr uint32_t kCoraNodes = 2708;
constexpr uint32_t kCoraFeatures = 1433;
constexpr int kInvalidArgument = static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT);

// --- request builders ---------------------------------------------------------

v1::CreateCampaignRequest FeaturesCampaign(v1::MechanismKind kind, double epsilon,
                                           uint32_t sampled, uint32_t begin,
                                           uint32_t end, double quorum = 1.0) {
  v1::CreateCampaignRequest r;
  r.set_name(absl::StrCat(v1::MechanismKind_Name(kind), "-", begin, "-", end));
  r.set_attribute(v1::ATTRIBUTE_FEATURES);
  v1::MechanismSpec* s = r.mutable_spec();
  s->set_kind(kind);
  s->set_epsilon(epsilon);
  s->set_dimension(kCoraFeatures);
  s->set_sampled(sampled);
  s->set_range_low(-1.0);
  s->set_range_high(1.0);
  r.mutable_nodes()->set_range_begin(begin);
  r.mutable_nodes()->set_range_end(end);
  r.set_quorum(quorum);
  return r;
}

// --- a raw agent: what a misbehaving agent host could send ---------------------

class RawAgent {
 public:
  explicit RawAgent(std::shared_ptr<grpc::Channel> channel)
      : stub_(v1::AgentService::NewStub(std::move(channel))) {}
  v1::AgentService::Stub& stub() { return *stub_; }

  grpc::Status Enrol(const v1::EnrolRequest& req, v1::EnrolResponse* out) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return stub_->Enrol(&ctx, req, out);
  }

  // One Report stream carrying one batch under `token`; the ack, or the
  // stream's status if there is none.
  absl::StatusOr<v1::ReportAck> Send(const std::vector<v1::Report>& reports,
                                     const std::string& token) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("ldpgraph-session", token);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto stream = stub_->Report(&ctx);
    v1::ReportBatch batch;
    batch.set_batch_id(++batch_id_);
    for (const auto& r : reports) *batch.add_reports() = r;
    v1::ReportAck ack;
    bool have_ack = false;
    if (stream->Write(batch)) have_ack = stream->Read(&ack);
    stream->WritesDone();
    grpc::Status s = stream->Finish();
    if (!have_ack) {
      if (s.ok()) return absl::UnknownError("stream ended without an ack");
      return Admin::Convert(s);
    }
    if (ack.batch_id() != batch.batch_id()) {
      return absl::InternalError("ack of another batch");
    }
    if (ack.results_size() != batch.reports_size()) {
      return absl::InternalError(absl::StrCat("ack with ", ack.results_size(),
                                              " results for ",
                                              batch.reports_size(), " reports"));
    }
    return ack;
  }

  // Sends one report; its result.
  absl::StatusOr<v1::ReportResult> SendOne(const v1::Report& report,
                                           const std::string& token) {
    absl::StatusOr<v1::ReportAck> ack = Send({report}, token);
    if (!ack.ok()) return ack.status();
    return ack->results(0);
  }

 private:
  std::unique_ptr<v1::AgentService::Stub> stub_;
  uint64_t batch_id_ = 0;
};

// --- an agent host on a thread ---------------------------------------------------

class HostThread {
 public:
  HostThread(std::unique_ptr<agent::AgentHost> host) : host_(std::move(host)) {
    thread_ = std::thread([this] {
      result_ = host_->Run();
      finished_.store(true);
    });
  }
  // True once Run returned (after Stop, or on a permanent error).
  bool finished() const { return finished_.load(); }
  ~HostThread() { Stop().IgnoreError(); }
  // Stops the host and joins; the status Run returned.
  absl::Status Stop() {
    if (thread_.joinable()) {
      host_->Stop();
      thread_.join();
    }
    return result_;
  }
  agent::AgentHost& host() { return *host_; }
  agent::AgentShard& shard() { return host_->shard(); }

 private:
  std::unique_ptr<agent::AgentHost> host_;
  std::thread thread_;
  absl::Status result_;
  std::atomic<bool> finished_{false};
};

// --- the fixture ----------------------------------------------------------------

class DeploymentTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto certs = MakeDevCerts(NewTempDir("certs"));
    if (certs.ok()) {
      certs_ = new DevCerts(std::move(*certs));
    } else {
      certs_error_ = new std::string(certs.status().ToString());
    }
  }
  static void TearDownTestSuite() {
    if (certs_ != nullptr) RemoveTempDir(certs_->dir);
    delete certs_;
    certs_ = nullptr;
    delete certs_error_;
    certs_error_ = nullptr;
  }

  void SetUp() override {
    ASSERT_EQ(certs_error_, nullptr) << *certs_error_;
    ASSERT_NE(certs_, nullptr);
  }

  void TearDown() override {
    // Hosts first: they talk to the server.
    hosts_.clear();
    if (server_ != nullptr) server_->Shutdown(absl::Seconds(2));
    server_.reset();
    // Keep the state of a failed test for a post-mortem.
    if (!HasFailure()) {
      for (const std::string& d : dirs_) RemoveTempDir(d);
    }
  }

  std::string TempDir(const std::string& name) {
    dirs_.push_back(NewTempDir(name));
    return dirs_.back();
  }

  const DevCerts& certs() const { return *certs_; }

  // ListCampaigns, CreateCampaign and CloseCampaign(campaign_id) with the
  // authorization header `header` (none if empty) are UNAUTHENTICATED.
  void ExpectAdminRefuses(const std::string& header,
                          const std::string& campaign_id);

  // Host b serves nodes 24..47 under a features cap of 1.2 it keeps to
  // itself (the ledger knows only a total of 8): a first features question
  // at epsilon 1 is answered; a second is refused by every node, for its
  // budget, with nothing spent, stored or charged.
  void ExpectAgentRefusesPrivateCap(HostThread& host);

  // After node 3's one report (`good`) to the open HDS campaign `hds` (nodes 0..19
  // targeted, nodes 0..9 in raw's session `token`): a report to an unknown
  // campaign, for a node outside the session, a second answer, a mixed
  // batch and a report after the close each get their code, and only
  // acknowledged reports are stored. Closes the campaign.
  void ExpectAnswerRules(RawAgent& raw, const std::string& token,
                         const std::string& hds, const FeatureMechanism& mech,
                         const v1::Report& good);

  // A TLS curator on 127.0.0.1:0 over graph_dir, or over `nodes` nodes
  // without a graph, taking at most max_enrol nodes per Enrol call.
  void StartCurator(const std::string& graph_dir, uint32_t nodes,
                    int max_enrol = 100000) {
    curator::ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.data_dir = TempDir("curator");
    o.graph_dir = graph_dir;
    o.nodes = graph_dir.empty() ? nodes : 0;
    o.node_key = certs().node_key;
    o.admin_token = certs().admin_hex;
    o.tls_cert_pem = certs().cert_pem;
    o.tls_key_pem = certs().key_pem;
    o.http_listen.clear();
    o.max_enrol = max_enrol;
    auto server = curator::CuratorServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    ASSERT_GT(server_->port(), 0);
    channel_ = TlsChannel(server_->port(), certs().ca_pem);
    admin_ = std::make_unique<Admin>(channel_, certs().admin_hex);
  }

  // An agent host over cora nodes [begin, end) on a thread.
  HostThread* StartHost(const std::string& cora, uint32_t begin, uint32_t end,
                        const agent::AgentPolicy& policy,
                        const BudgetCaps& declared, std::optional<uint64_t> seed,
                        int batch_size = 512, int enrol_part = 100000) {
    auto records = agent::LoadShard(cora, FeatureScaling::kSymmetric, begin, end);
    EXPECT_TRUE(records.ok()) << records.status();
    if (!records.ok()) return nullptr;
    auto shard = agent::AgentShard::Create(
        std::move(*records), policy, seed,
        TempDir(absl::StrCat("agent-", begin, "-", end)));
    EXPECT_TRUE(shard.ok()) << shard.status();
    if (!shard.ok()) return nullptr;
    agent::AgentHostOptions o;
    o.curator = absl::StrCat("127.0.0.1:", server_->port());
    o.ca_pem = certs().ca_pem;
    o.host_name = absl::StrCat("host-", begin, "-", end);
    for (uint32_t v = begin; v < end; ++v) {
      o.credentials.emplace_back(v, curator::NodeCredential(certs().node_key, v));
    }
    o.caps = declared;
    o.batch_size = batch_size;
    o.enrol_part = enrol_part;
    o.backoff_initial = absl::Milliseconds(50);
    o.backoff_max = absl::Seconds(1);
    auto host = agent::AgentHost::Create(std::move(o), std::move(*shard));
    EXPECT_TRUE(host.ok()) << host.status();
    if (!host.ok()) return nullptr;
    hosts_.push_back(std::make_unique<HostThread>(std::move(*host)));
    return hosts_.back().get();
  }

  // Waits until the ledger knows the caps of every node of [begin, end):
  // their hosts have enrolled.
  void WaitEnrolled(uint32_t begin, uint32_t end) {
    absl::StatusOr<std::vector<v1::NodeBudget>> budgets;
    const bool enrolled = PollUntil(
        [&] {
          budgets = admin_->Budgets(begin, end);
          if (!budgets.ok()) return false;
          for (const auto& b : *budgets) {
            if (!b.caps_known()) return false;
          }
          return budgets->size() == end - begin;
        },
        absl::Seconds(300), absl::Milliseconds(50));
    ASSERT_TRUE(enrolled) << "nodes " << begin << ".." << end - 1
                          << " did not enrol: " << budgets.status();
  }

  // A session over nodes with valid credentials, declaring caps.
  std::string EnrolRaw(RawAgent& raw, const std::vector<uint32_t>& nodes) {
    v1::EnrolRequest req;
    req.set_host_name("raw-test-client");
    for (uint32_t v : nodes) {
      v1::NodeCredential* c = req.add_nodes();
      c->set_node_id(v);
      c->set_secret(curator::NodeCredential(certs().node_key, v));
      c->mutable_caps()->set_total(100);
    }
    v1::EnrolResponse resp;
    grpc::Status s = raw.Enrol(req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.node_count(), nodes.size());
    return resp.session_token();
  }

  static inline DevCerts* certs_ = nullptr;
  static inline std::string* certs_error_ = nullptr;

  std::unique_ptr<curator::CuratorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Admin> admin_;
  std::vector<std::unique_ptr<HostThread>> hosts_;
  std::vector<std::string> dirs_;
};

// A feature report of mech for x = (0.25, ..., 0.25), from a seeded stream.
v1::Report FeatureReport(const FeatureMechanism& mech, const std::string& campaign,
                         uint32_t node, uint64_t seed) {
  std::vector<double> x(static_cast<size_t>(mech.dimension()), 0.25);
  SeededRandomForTesting rng(seed);
  absl::StatusOr<SparseReport> r = mech.Perturb(x, rng);
  EXPECT_TRUE(r.ok()) << r.status();
  v1::Report out;
  out.set_campaign_id(campaign);
  out.set_node_id(node);
  if (r.ok()) *out.mutable_features() = wire::EncodeFeatureReport(*r);
  return out;
}

std::unique_ptr<FeatureMechanism> MechanismOf(const v1::MechanismSpec& spec) {
  absl::StatusOr<MechanismSpec> s = wire::FromWireFeatureSpec(spec);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<FeatureMechanism>> m = CreateFeatureMechanism(*s);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

// The stored report of node in campaign, if any (via the curator library).
std::optional<v1::Report> StoredReport(curator::Curator& c, const std::string& id,
                                       uint32_t node) {
  auto reports = c.operators().campaigns().Reports(id);
  EXPECT_TRUE(reports.ok()) << reports.status();
  if (!reports.ok()) return std::nullopt;
  for (auto& [v, r] : *reports) {
    if (v == node) return r;
  }
  return std::nullopt;
}

// --- 1. the seeded campaign -------------------------------------------------------

TEST_F(DeploymentTest, SeededCampaignEqualsTheLibraryPath) {
  const std::string cora = CoraDir();
  if (cora.empty()) {
    LDPGRAPH_SKIP_OR_FAIL_IN_CI()
        << "no dataset at " << DatasetsDir()
        << "/cora (set LDPGRAPH_DATASETS to the datasets folder)";
  }
  ASSERT_NO_FATAL_FAILURE(StartCurator(cora, 0));
  ASSERT_EQ(server_->curator().num_nodes(), kCoraNodes);

  constexpr uint64_t kSeed = 20240917;
  agent::AgentPolicy policy;
  policy.caps.total = 8;
  for (uint32_t q = 0; q < 4; ++q) {
    ASSERT_NE(StartHost(cora, q * kCoraNodes / 4, (q + 1) * kCoraNodes / 4,
                        policy, policy.caps, kSeed),
              nullptr);
  }

  v1::CreateCampaignRequest req = FeaturesCampaign(v1::MECHANISM_KIND_HDS, 1.0,
                                                   /*sampled=*/10, 0, 0);
  req.mutable_nodes()->Clear();
  req.mutable_nodes()->set_all(true);
  v1::Campaign created;
  grpc::Status s = admin_->Create(req, &created);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(created.progress().targeted(), kCoraNodes);

  absl::StatusOr<v1::Campaign> done = admin_->WaitClosed(created.id(), absl::Seconds(600));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->close_reason(), "quorum");
  EXPECT_EQ(done->progress().reported(), kCoraNodes);
  EXPECT_EQ(done->progress().refused(), 0u);
  EXPECT_EQ(done->progress().rejected(), 0u);

  absl::StatusOr<v1::StageResult> estimate = admin_->Estimate(created.id());
  ASSERT_TRUE(estimate.ok()) << estimate.status();
  EXPECT_EQ(estimate->rows(), kCoraNodes);
  EXPECT_EQ(estimate->cols(), kCoraFeatures);
  absl::StatusOr<DenseMatrix> m = server_->stages().Matrix(estimate->id());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->rows, kCoraNodes);
  ASSERT_EQ(m->cols, kCoraFeatures);

  // The library path: the same records, mechanism and per-node seeds.
  auto records = agent::LoadShard(cora, FeatureScaling::kSymmetric, 0, kCoraNodes);
  ASSERT_TRUE(records.ok()) << records.status();
  std::unique_ptr<FeatureMechanism> mech = MechanismOf(req.spec());
  ASSERT_NE(mech, nullptr);
  std::vector<double> est(kCoraFeatures);
  size_t mismatches = 0, nonzero = 0;
  std::string first_mismatch;
  for (uint32_t v = 0; v < kCoraNodes; ++v) {
    SeededRandomForTesting rng(agent::NodeNoiseSeed(kSeed, v));
    absl::StatusOr<SparseReport> report = mech->Perturb((*records)[v].features.Dense(), rng);
    ASSERT_TRUE(report.ok()) << report.status();
    ASSERT_TRUE(mech->Estimate(*report, absl::MakeSpan(est)).ok());
    for (uint32_t j = 0; j < kCoraFeatures; ++j) {
      const float want = static_cast<float>(est[j]);
      const float got = m->at(v, j);
      nonzero += got != 0.0f ? 1 : 0;
      if (!(want == got)) {
        if (mismatches++ == 0) {
          first_mismatch = absl::StrCat("node ", v, " feature ", j, ": curator ",
                                        got, ", library ", want);
        }
      }
    }
  }
  EXPECT_EQ(mismatches, 0u) << "first: " << first_mismatch;
  // HDS with k = 10: ten reported values per node, so the comparison above
  // is over a matrix that is not trivially zero.
  EXPECT_GT(nonzero, size_t{kCoraNodes} * 9);
  EXPECT_LE(nonzero, size_t{kCoraNodes} * 10);

  // Control: another seed gives another row, so equality is not vacuous.
  {
    SeededRandomForTesting rng(agent::NodeNoiseSeed(kSeed + 1, 0));
    auto report = mech->Perturb((*records)[0].features.Dense(), rng);
    ASSERT_TRUE(report.ok());
    ASSERT_TRUE(mech->Estimate(*report, absl::MakeSpan(est)).ok());
    bool differs = false;
    for (uint32_t j = 0; j < kCoraFeatures; ++j) {
      differs |= static_cast<float>(est[j]) != m->at(0, j);
    }
    EXPECT_TRUE(differs);
  }

  // The export API serves the same matrix.
  absl::StatusOr<DenseMatrix> exported = admin_->Export(estimate->id());
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->rows, m->rows);
  EXPECT_EQ(exported->cols, m->cols);
  EXPECT_TRUE(exported->data == m->data);

  // Every node spent exactly epsilon, on the agent and in the ledger.
  for (auto& h : hosts_) {
    for (uint32_t v : h->shard().nodes()) {
      ASSERT_EQ(h->shard().spent(v).value_or(-1), 1.0) << "node " << v;
    }
  }
  auto budgets = admin_->Budgets(0, kCoraNodes);
  ASSERT_TRUE(budgets.ok()) << budgets.status();
  ASSERT_EQ(budgets->size(), kCoraNodes);
  for (const auto& b : *budgets) {
    ASSERT_EQ(b.total_spent(), 1.0) << "node " << b.node_id();
  }
  for (auto& h : hosts_) EXPECT_TRUE(h->Stop().ok());
}

// Malformed variants of `good`, a well-formed HDS report of 10 sampled
// dimensions of kCoraFeatures (output values within +-limit), each named by
// what is wrong with it: a body of the wrong kind, a spec that differs, and
// every way its indices and values can break the mechanism's shape.
std::vector<std::pair<std::string, v1::Report>> MalformedHdsReports(
    const v1::Report& good, const v1::MechanismSpec& spec, double limit) {
  std::vector<std::pair<std::string, v1::Report>> bad;
  {
    v1::Report r = good;
    r.mutable_label()->set_label(1);
    bad.emplace_back("label body to a features campaign", r);
  }
  {
    v1::Report r = good;
    r.mutable_edges()->add_neighbours(5);
    bad.emplace_back("edges body to a features campaign", r);
  }
  {
    v1::Report r = good;
    *r.mutable_features()->mutable_spec() = spec;
    r.mutable_features()->mutable_spec()->set_dimension(kCoraFeatures - 1);
    bad.emplace_back("spec with another dimension", r);
  }
  {
    v1::Report r = good;
    *r.mutable_features()->mutable_spec() = spec;
    r.mutable_features()->mutable_spec()->set_epsilon(2.0);
    bad.emplace_back("spec with another epsilon", r);
  }
  {
    v1::Report r = good;
    r.mutable_features()->set_indices(9, kCoraFeatures);
    bad.emplace_back("index out of range (= d)", r);
  }
  {
    v1::Report r = good;
    auto* idx = r.mutable_features()->mutable_indices();
    std::swap(*idx->Mutable(3), *idx->Mutable(4));
    bad.emplace_back("indices not ascending", r);
  }
  {
    v1::Report r = good;
    r.mutable_features()->set_indices(4, r.features().indices(3));
    bad.emplace_back("repeated index", r);
  }
  {
    v1::Report r = good;
    r.mutable_features()->set_values(0, std::nextafter(limit, 10.0));
    bad.emplace_back("value just above HDS's output range", r);
  }
  {
    v1::Report r = good;
    r.mutable_features()->set_values(5, -std::nextafter(limit, 10.0));
    bad.emplace_back("value just below HDS's output range", r);
  }
  {
    v1::Report r = good;
    r.mutable_features()->set_values(2, std::nan(""));
    bad.emplace_back("NaN value", r);
  }
  {
    v1::Report r = good;
    r.mutable_features()->mutable_indices()->RemoveLast();
    r.mutable_features()->mutable_values()->RemoveLast();
    bad.emplace_back("9 sampled dimensions instead of 10", r);
  }
  {
    v1::Report r = good;
    uint32_t extra = 0;
    while (std::find(r.features().indices().begin(), r.features().indices().end(),
                     extra) != r.features().indices().end()) {
      ++extra;
    }
    std::vector<std::pair<uint32_t, double>> entries;
    for (int i = 0; i < 10; ++i) {
      entries.emplace_back(r.features().indices(i), r.features().values(i));
    }
    entries.emplace_back(extra, 0.5);
    std::sort(entries.begin(), entries.end());
    r.mutable_features()->clear_indices();
    r.mutable_features()->clear_values();
    for (auto& [i, x] : entries) {
      r.mutable_features()->add_indices(i);
      r.mutable_features()->add_values(x);
    }
    bad.emplace_back("11 sampled dimensions instead of 10", r);
  }
  {
    v1::Report r = good;
    r.mutable_features()->mutable_values()->RemoveLast();
    bad.emplace_back("fewer values than indices", r);
  }
  {
    v1::Report r = good;
    r.mutable_features()->clear_indices();
    r.mutable_features()->clear_values();
    r.mutable_features()->set_dense(true);
    for (uint32_t j = 0; j < kCoraFeatures; ++j) r.mutable_features()->add_values(0.1);
    bad.emplace_back("dense report for a sampled mechanism", r);
  }
  {
    v1::Report r = good;
    r.mutable_features()->clear_values();
    r.mutable_features()->set_bits(std::string("\x05\x01", 2));
    r.mutable_features()->set_bit_count(10);
    bad.emplace_back("bits for a value mechanism (HDS)", r);
  }
  return bad;
}

// Malformed reports of other shapes: Multi-bit reports (of mb, 4 sampled
// bits, for campaign mb_id) with values or a wrong bit count, and reports
// for good's campaign and node with no body, an empty refusal, or a
// malformed campaign id.
std::vector<std::pair<std::string, v1::Report>> OtherMalformedReports(
    const v1::Report& good, const FeatureMechanism& mb,
    const std::string& mb_id) {
  std::vector<std::pair<std::string, v1::Report>> bad;
  {
    // A well-formed Multi-bit report, but with values instead of bits.
    v1::Report r = FeatureReport(mb, mb_id, good.node_id(), 12);
    EXPECT_EQ(r.features().indices_size(), 4);
    EXPECT_EQ(r.features().bit_count(), 4u);
    r.mutable_features()->clear_bits();
    r.mutable_features()->set_bit_count(0);
    for (int i = 0; i < 4; ++i) r.mutable_features()->add_values(1.0);
    bad.emplace_back("values for a bit mechanism (Multi-bit)", r);
  }
  {
    v1::Report r = FeatureReport(mb, mb_id, good.node_id(), 13);
    r.mutable_features()->set_bit_count(5);
    bad.emplace_back("Multi-bit bit_count differs from the indices", r);
  }
  {
    v1::Report r;
    r.set_campaign_id(good.campaign_id());
    r.set_node_id(good.node_id());
    bad.emplace_back("report without body", r);
  }
  {
    v1::Report r;
    r.set_campaign_id(good.campaign_id());
    r.set_node_id(good.node_id());
    r.mutable_refusal()->set_message("no reason given");
    bad.emplace_back("refusal without a reason", r);
  }
  {
    v1::Report r = good;
    r.set_campaign_id("campaign-1");
    bad.emplace_back("malformed campaign id", r);
  }

  return bad;
}

void DeploymentTest::ExpectAnswerRules(RawAgent& raw, const std::string& token,
                                       const std::string& hds,
                                       const FeatureMechanism& mech,
                                       const v1::Report& good) {
  curator::Curator& cur = server_->curator();
  // --- unknown campaign: NOT_FOUND, nothing stored ---
  {
    v1::Report r = good;
    r.set_campaign_id("c99");
    auto res = raw.SendOne(r, token);
    ASSERT_TRUE(res.ok()) << res.status();
    EXPECT_EQ(res->code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));
  }

  // --- a node outside the session: PERMISSION_DENIED, not stored ---
  {
    constexpr uint32_t kOutside = 15;  // targeted, but not this session's
    v1::Report r = FeatureReport(mech, hds, kOutside, 14);
    auto res = raw.SendOne(r, token);
    ASSERT_TRUE(res.ok()) << res.status();
    EXPECT_EQ(res->code(), static_cast<int>(grpc::StatusCode::PERMISSION_DENIED))
        << res->message();
    EXPECT_FALSE(StoredReport(cur, hds, kOutside).has_value());
    EXPECT_EQ(admin_->Get(hds)->progress().reported(), 1u);
  }

  // --- one answer per node: ALREADY_EXISTS, duplicate ---
  constexpr uint32_t kNode = 1;
  const v1::Report first = FeatureReport(mech, hds, kNode, 21);
  const v1::Report second = FeatureReport(mech, hds, kNode, 22);
  ASSERT_NE(first.SerializeAsString(), second.SerializeAsString());
  {
    auto res = raw.SendOne(first, token);
    ASSERT_TRUE(res.ok()) << res.status();
    EXPECT_EQ(res->code(), 0) << res->message();
    EXPECT_FALSE(res->duplicate());
    EXPECT_EQ(admin_->Get(hds)->progress().reported(), 2u);
  }
  {
    auto res = raw.SendOne(second, token);
    ASSERT_TRUE(res.ok()) << res.status();
    EXPECT_EQ(res->code(), static_cast<int>(grpc::StatusCode::ALREADY_EXISTS))
        << res->message();
    std::optional<v1::Report> stored = StoredReport(cur, hds, kNode);
    ASSERT_TRUE(stored.has_value());
    EXPECT_EQ(stored->SerializeAsString(), first.SerializeAsString());
    EXPECT_EQ(admin_->Get(hds)->progress().reported(), 2u);
  }
  {
    auto res = raw.SendOne(first, token);
    ASSERT_TRUE(res.ok()) << res.status();
    EXPECT_EQ(res->code(), 0) << res->message();
    EXPECT_TRUE(res->duplicate());
    EXPECT_EQ(admin_->Get(hds)->progress().reported(), 2u);
    std::optional<v1::Report> stored = StoredReport(cur, hds, kNode);
    ASSERT_TRUE(stored.has_value());
    EXPECT_EQ(stored->SerializeAsString(), first.SerializeAsString());
  }

  // --- a mixed batch: one result per report, in order ---
  {
    v1::Report no_body;
    no_body.set_campaign_id(hds);
    no_body.set_node_id(5);
    const v1::Report valid = FeatureReport(mech, hds, 6, 31);
    const v1::Report outside = FeatureReport(mech, hds, 16, 32);
    auto ack = raw.Send({no_body, valid, outside}, token);
    ASSERT_TRUE(ack.ok()) << ack.status();
    ASSERT_EQ(ack->results_size(), 3);
    EXPECT_EQ(ack->results(0).code(), kInvalidArgument);
    EXPECT_EQ(ack->results(1).code(), 0) << ack->results(1).message();
    EXPECT_EQ(ack->results(2).code(),
              static_cast<int>(grpc::StatusCode::PERMISSION_DENIED));
    EXPECT_FALSE(StoredReport(cur, hds, 5).has_value());
    EXPECT_TRUE(StoredReport(cur, hds, 6).has_value());
    EXPECT_FALSE(StoredReport(cur, hds, 16).has_value());
    EXPECT_EQ(admin_->Get(hds)->progress().reported(), 3u);
  }

  // --- after CloseCampaign: FAILED_PRECONDITION, not stored ---
  absl::StatusOr<v1::Campaign> closed = admin_->Close(hds);
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_EQ(closed->state(), v1::CAMPAIGN_STATE_CLOSED);
  EXPECT_EQ(closed->close_reason(), "operator");
  {
    const v1::Report late = FeatureReport(mech, hds, 2, 41);
    auto res = raw.SendOne(late, token);
    ASSERT_TRUE(res.ok()) << res.status();
    EXPECT_EQ(res->code(), static_cast<int>(grpc::StatusCode::FAILED_PRECONDITION))
        << res->message();
    EXPECT_FALSE(StoredReport(cur, hds, 2).has_value());
    EXPECT_EQ(admin_->Get(hds)->progress().reported(), 3u);
  }
  // A resend of an acknowledged report is still acknowledged after the
  // close (an agent whose ack was lost must not count as rejected).
  {
    auto res = raw.SendOne(first, token);
    ASSERT_TRUE(res.ok()) << res.status();
    EXPECT_EQ(res->code(), 0) << res->message();
    EXPECT_TRUE(res->duplicate());
  }
}

// --- 1b. report validation -----------------------------------------------------

TEST_F(DeploymentTest, ReportValidation) {
  constexpr uint32_t kNodes = 64;
  ASSERT_NO_FATAL_FAILURE(StartCurator("", kNodes));
  curator::Curator& cur = server_->curator();

  // Two open campaigns over nodes 0..19, never closing on their own.
  v1::Campaign hds, multibit;
  ASSERT_TRUE(admin_->Create(FeaturesCampaign(v1::MECHANISM_KIND_HDS, 1.0, 10, 0, 20,
                                              /*quorum=*/0),
                             &hds)
                  .ok());
  ASSERT_TRUE(admin_->Create(FeaturesCampaign(v1::MECHANISM_KIND_MULTIBIT, 1.0, 4,
                                              0, 20, /*quorum=*/0),
                             &multibit)
                  .ok());
  std::unique_ptr<FeatureMechanism> hds_mech = MechanismOf(hds.spec());
  std::unique_ptr<FeatureMechanism> mb_mech = MechanismOf(multibit.spec());
  ASSERT_NE(hds_mech, nullptr);
  ASSERT_NE(mb_mech, nullptr);

  RawAgent raw(channel_);
  const std::string token = EnrolRaw(raw, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  ASSERT_FALSE(token.empty());

  // --- every kind of malformed report, for node 3 ---
  constexpr uint32_t kBad = 3;
  const v1::Report good = FeatureReport(*hds_mech, hds.id(), kBad, 11);
  ASSERT_EQ(good.features().indices_size(), 10);
  ASSERT_EQ(good.features().values_size(), 10);
  const double limit =
      1.0 + dynamic_cast<const HdsMechanism&>(*hds_mech).square_wave().b();

  std::vector<std::pair<std::string, v1::Report>> bad =
      MalformedHdsReports(good, hds.spec(), limit);
  for (auto& named : OtherMalformedReports(good, *mb_mech, multibit.id())) {
    bad.push_back(std::move(named));
  }

  uint64_t rejected_hds = 0, rejected_mb = 0;
  for (const auto& [what, report] : bad) {
    SCOPED_TRACE(what);
    absl::StatusOr<v1::ReportResult> result = raw.SendOne(report, token);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->code(), kInvalidArgument) << result->message();
    EXPECT_FALSE(result->message().empty());
    EXPECT_FALSE(result->duplicate());
    if (report.campaign_id() == hds.id()) ++rejected_hds;
    if (report.campaign_id() == multibit.id()) ++rejected_mb;
    for (const v1::Campaign* c : {&hds, &multibit}) {
      absl::StatusOr<v1::Campaign> now = admin_->Get(c->id());
      ASSERT_TRUE(now.ok()) << now.status();
      EXPECT_EQ(now->progress().reported(), 0u) << c->id();
      EXPECT_EQ(now->progress().refused(), 0u) << c->id();
      EXPECT_EQ(now->state(), v1::CAMPAIGN_STATE_OPEN);
      EXPECT_FALSE(StoredReport(cur, c->id(), kBad).has_value()) << c->id();
    }
    EXPECT_EQ(admin_->Get(hds.id())->progress().rejected(), rejected_hds);
    EXPECT_EQ(admin_->Get(multibit.id())->progress().rejected(), rejected_mb);
  }
  EXPECT_EQ(cur.operators().campaigns().counters().reports_accepted.load(), 0u);

  // Nothing of the above was stored: node 3 can still give its one answer.
  {
    absl::StatusOr<v1::ReportResult> r = raw.SendOne(good, token);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->code(), 0) << r->message();
    EXPECT_FALSE(r->duplicate());
    std::optional<v1::Report> stored = StoredReport(cur, hds.id(), kBad);
    ASSERT_TRUE(stored.has_value());
    EXPECT_EQ(stored->SerializeAsString(), good.SerializeAsString());
  }

  ASSERT_NO_FATAL_FAILURE(ExpectAnswerRules(raw, token, hds.id(), *hds_mech, good));
  // The Multi-bit campaign is untouched by all of this.
  EXPECT_EQ(admin_->Get(multibit.id())->progress().reported(), 0u);
}

// A node credential entry with a total cap of 3.
v1::NodeCredential Credential(uint32_t node, const std::string& secret) {
  v1::NodeCredential c;
  c.set_node_id(node);
  c.set_secret(secret);
  c.mutable_caps()->set_total(3);
  return c;
}

// An enrolment the curator must refuse, and the node it must blame.
struct Forgery {
  std::string what;
  v1::EnrolRequest request;
  uint32_t blamed;
};

// Forged enrolments under the node key `key`: a random, another node's, a
// foreign key's, a truncated and an empty secret, and a valid credential
// beside a forged one.
std::vector<Forgery> ForgedEnrolments(const std::string& key) {
  std::vector<Forgery> forgeries;
  {
    Forgery f{"random secret", {}, 20};
    *f.request.add_nodes() = Credential(20, std::string(32, '\x42'));
    forgeries.push_back(f);
  }
  {
    Forgery f{"node 22's secret presented for node 21", {}, 21};
    *f.request.add_nodes() = Credential(21, curator::NodeCredential(key, 22));
    forgeries.push_back(f);
  }
  {
    Forgery f{"a secret under another node key", {}, 23};
    *f.request.add_nodes() =
        Credential(23, curator::NodeCredential(std::string(32, '\x01'), 23));
    forgeries.push_back(f);
  }
  {
    Forgery f{"truncated secret", {}, 24};
    *f.request.add_nodes() = Credential(24, curator::NodeCredential(key, 24).substr(0, 16));
    forgeries.push_back(f);
  }
  {
    Forgery f{"empty secret", {}, 25};
    *f.request.add_nodes() = Credential(25, "");
    forgeries.push_back(f);
  }
  {
    // One good credential does not carry a bad one: nothing is opened.
    Forgery f{"valid node 26 with forged node 27", {}, 27};
    *f.request.add_nodes() = Credential(26, curator::NodeCredential(key, 26));
    *f.request.add_nodes() = Credential(27, curator::NodeCredential(key, 26));
    forgeries.push_back(f);
  }
  return forgeries;
}

void DeploymentTest::ExpectAdminRefuses(const std::string& header,
                                        const std::string& campaign_id) {
  {
    grpc::ClientContext ctx;
    if (!header.empty()) ctx.AddMetadata("authorization", header);
    v1::ListCampaignsResponse out;
    grpc::Status s = admin_->stub().ListCampaigns(&ctx, v1::ListCampaignsRequest(), &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(out.campaigns_size(), 0);
  }
  {
    grpc::ClientContext ctx;
    if (!header.empty()) ctx.AddMetadata("authorization", header);
    v1::Campaign out;
    grpc::Status s = admin_->stub().CreateCampaign(
        &ctx, FeaturesCampaign(v1::MECHANISM_KIND_HDS, 0.5, 10, 0, 10), &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext ctx;
    if (!header.empty()) ctx.AddMetadata("authorization", header);
    v1::CloseCampaignRequest req;
    req.set_campaign_id(campaign_id);
    v1::Campaign out;
    grpc::Status s = admin_->stub().CloseCampaign(&ctx, req, &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
}

// --- 1c. authentication and TLS ------------------------------------------------

TEST_F(DeploymentTest, AuthenticationAndTls) {
  constexpr uint32_t kNodes = 64;
  ASSERT_NO_FATAL_FAILURE(StartCurator("", kNodes));
  v1::Campaign campaign;
  ASSERT_TRUE(admin_->Create(FeaturesCampaign(v1::MECHANISM_KIND_HDS, 1.0, 10, 0,
                                              kNodes, /*quorum=*/0),
                             &campaign)
                  .ok());
  std::unique_ptr<FeatureMechanism> mech = MechanismOf(campaign.spec());
  ASSERT_NE(mech, nullptr);
  RawAgent raw(channel_);
  const std::string key = certs().node_key;
  absl::StatusOr<int> enrols_before = admin_->CountAudit("enrol");
  ASSERT_TRUE(enrols_before.ok()) << enrols_before.status();

  auto caps_known = [&](uint32_t node) {
    auto b = admin_->Budgets(node, node + 1);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() && b->size() == 1 && (*b)[0].caps_known();
  };
  const std::vector<Forgery> forgeries = ForgedEnrolments(key);
  for (const Forgery& f : forgeries) {
    SCOPED_TRACE(f.what);
    v1::EnrolRequest req = f.request;
    req.set_host_name("forger");
    v1::EnrolResponse resp;
    grpc::Status s = raw.Enrol(req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(absl::StrCat("node ", f.blamed)));
    EXPECT_TRUE(resp.session_token().empty());
    for (const auto& n : req.nodes()) {
      EXPECT_FALSE(caps_known(n.node_id())) << "node " << n.node_id();
    }
  }
  // No session was opened (the audit log records every enrolment).
  EXPECT_EQ(admin_->CountAudit("enrol").value_or(-1), *enrols_before);

  // A made-up session token, or none: UNAUTHENTICATED, nothing stored.
  const v1::Report report = FeatureReport(*mech, campaign.id(), 30, 1);
  for (const std::string& token :
       {std::string(64, 'a'), curator::ToHex(curator::NodeCredential(key, 30)),
        std::string()}) {
    SCOPED_TRACE(absl::StrCat("token '", token, "'"));
    absl::StatusOr<v1::ReportAck> ack = raw.Send({report}, token);
    EXPECT_EQ(ack.status().code(), absl::StatusCode::kUnauthenticated)
        << ack.status();
    grpc::ClientContext ctx;
    if (!token.empty()) ctx.AddMetadata("ldpgraph-session", token);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto tasks = raw.stub().Subscribe(&ctx, v1::SubscribeRequest());
    v1::Task task;
    EXPECT_FALSE(tasks->Read(&task));
    EXPECT_EQ(tasks->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_FALSE(StoredReport(server_->curator(), campaign.id(), 30).has_value());
  EXPECT_EQ(admin_->Get(campaign.id())->progress().reported(), 0u);

  // A real session still works (the checks above are not vacuous).
  {
    const std::string token = EnrolRaw(raw, {30});
    auto res = raw.SendOne(report, token);
    ASSERT_TRUE(res.ok()) << res.status();
    EXPECT_EQ(res->code(), 0) << res->message();
    EXPECT_TRUE(StoredReport(server_->curator(), campaign.id(), 30).has_value());
    EXPECT_EQ(admin_->CountAudit("enrol").value_or(-1), *enrols_before + 1);
  }

  // The admin API with a wrong, missing or node credential: UNAUTHENTICATED.
  const int campaigns_before = admin_->CountCampaigns().value_or(-1);
  for (const std::string& header :
       {absl::StrCat("Bearer ", std::string(64, '0')),
        absl::StrCat("Bearer ", certs().admin_hex.substr(0, 63)),
        absl::StrCat("Bearer ", certs().admin_hex, "0"),
        absl::StrCat("Bearer ", curator::ToHex(curator::NodeCredential(key, 1))),
        absl::StrCat("Basic ", certs().admin_hex), certs().admin_hex,
        std::string()}) {
    SCOPED_TRACE(absl::StrCat("authorization '", header, "'"));
    ExpectAdminRefuses(header, campaign.id());
  }
  EXPECT_EQ(admin_->CountCampaigns().value_or(-2), campaigns_before);
  EXPECT_EQ(admin_->Get(campaign.id())->state(), v1::CAMPAIGN_STATE_OPEN);

  // TLS: a plaintext client cannot talk to the curator at all.
  {
    auto insecure = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                        grpc::InsecureChannelCredentials());
    auto stub = v1::AdminService::NewStub(insecure);
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + certs().admin_hex);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    v1::ListCampaignsResponse out;
    grpc::Status s = stub->ListCampaigns(&ctx, v1::ListCampaignsRequest(), &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
    EXPECT_EQ(out.campaigns_size(), 0);

    auto agent_stub = v1::AgentService::NewStub(insecure);
    grpc::ClientContext ctx2;
    ctx2.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    v1::EnrolRequest req;
    *req.add_nodes() = Credential(40, curator::NodeCredential(key, 40));
    v1::EnrolResponse resp;
    grpc::Status s2 = agent_stub->Enrol(&ctx2, req, &resp);
    EXPECT_EQ(s2.error_code(), grpc::StatusCode::UNAVAILABLE) << s2.error_message();
    EXPECT_FALSE(caps_known(40));
  }
  // ... and a TLS client that does not trust the dev CA refuses the curator.
  {
    auto other = MakeDevCerts(TempDir("other-ca"));
    ASSERT_TRUE(other.ok()) << other.status();
    auto stub = v1::AdminService::NewStub(TlsChannel(server_->port(), other->ca_pem));
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + certs().admin_hex);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    v1::ListCampaignsResponse out;
    grpc::Status s = stub->ListCampaigns(&ctx, v1::ListCampaignsRequest(), &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  }
}

void DeploymentTest::ExpectAgentRefusesPrivateCap(HostThread& host) {
  HostThread* b = &host;
  v1::Campaign b1;
  ASSERT_TRUE(
      admin_->Create(FeaturesCampaign(v1::MECHANISM_KIND_HDS, 1.0, 10, 24, 48), &b1)
          .ok());
  auto b1_done = admin_->WaitClosed(b1.id(), absl::Seconds(300));
  ASSERT_TRUE(b1_done.ok()) << b1_done.status();
  EXPECT_EQ(b1_done->progress().reported(), 24u);
  std::map<uint32_t, double> spent_before;
  for (uint32_t v = 24; v < 48; ++v) {
    spent_before[v] = b->shard().spent(v).value_or(-1);
    EXPECT_EQ(spent_before[v], 1.0);
  }
  // Another question about features at epsilon 1: 2 <= 8 for the ledger,
  // 2 > 1.2 for the nodes.
  v1::Campaign b2;
  grpc::Status created = admin_->Create(
      FeaturesCampaign(v1::MECHANISM_KIND_PIECEWISE, 1.0, 0, 24, 48), &b2);
  ASSERT_TRUE(created.ok()) << created.error_message();
  auto b2_done = admin_->WaitClosed(b2.id(), absl::Seconds(300));
  ASSERT_TRUE(b2_done.ok()) << b2_done.status();
  EXPECT_EQ(b2_done->close_reason(), "quorum");
  EXPECT_EQ(b2_done->progress().targeted(), 24u);
  EXPECT_EQ(b2_done->progress().refused(), 24u);
  EXPECT_EQ(b2_done->progress().reported(), 0u);
  EXPECT_EQ(b2_done->progress().rejected(), 0u);
  auto refusals = admin_->Refusals(b2.id());
  ASSERT_TRUE(refusals.ok()) << refusals.status();
  ASSERT_EQ(refusals->size(), 24u);
  std::vector<uint32_t> refused_nodes;
  for (const auto& r : *refusals) {
    refused_nodes.push_back(r.node_id());
    EXPECT_EQ(r.reason(), v1::REFUSAL_REASON_BUDGET_EXHAUSTED) << "node " << r.node_id();
    EXPECT_THAT(r.message(), HasSubstr("budget exhausted"));
    EXPECT_THAT(r.message(), HasSubstr("features"));
    EXPECT_GT(r.unix_ms(), 0);
  }
  std::sort(refused_nodes.begin(), refused_nodes.end());
  for (uint32_t i = 0; i < 24; ++i) EXPECT_EQ(refused_nodes[i], 24 + i);
  auto stored = server_->curator().operators().campaigns().Reports(b2.id());
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(stored->empty());
  // The agents spent nothing on the refused question.
  for (uint32_t v = 24; v < 48; ++v) {
    EXPECT_EQ(b->shard().spent(v).value_or(-1), spent_before[v]) << "node " << v;
    EXPECT_EQ(b->shard().spent(v, "features").value_or(-1), 1.0);
  }
  const agent::ShardCounters bc = b->shard().counters();
  EXPECT_EQ(bc.fresh, 24u);
  EXPECT_EQ(bc.refusals.count(v1::REFUSAL_REASON_BUDGET_EXHAUSTED)
                ? bc.refusals.at(v1::REFUSAL_REASON_BUDGET_EXHAUSTED)
                : 0u,
            24u);
  // Nor does the ledger charge a refusal.
  {
    auto budgets = admin_->Budgets(24, 48);
    ASSERT_TRUE(budgets.ok());
    for (const auto& nb : *budgets) {
      EXPECT_EQ(nb.total_spent(), 1.0) << "node " << nb.node_id();
    }
  }
}

// --- 2. budget caps: the ledger mirrors, the agent decides -------------------

TEST_F(DeploymentTest, BudgetCapsLedgerAndAgentRefusal) {
  const std::string cora = CoraDir();
  if (cora.empty()) {
    LDPGRAPH_SKIP_OR_FAIL_IN_CI()
        << "no dataset at " << DatasetsDir()
        << "/cora (set LDPGRAPH_DATASETS to the datasets folder)";
  }
  ASSERT_NO_FATAL_FAILURE(StartCurator("", kCoraNodes));

  // Host A (nodes 0..23): total cap 1.5, declared as it is.
  agent::AgentPolicy tight;
  tight.caps.total = 1.5;
  HostThread* a = StartHost(cora, 0, 24, tight, tight.caps, std::nullopt, 8);
  ASSERT_NE(a, nullptr);
  // Host B (nodes 24..47): a per-attribute cap features = 1.2 that it keeps
  // to itself; it declares only a generous total, so the ledger cannot know.
  agent::AgentPolicy secretive;
  secretive.caps.total = 8;
  secretive.caps.per_attribute["features"] = 1.2;
  BudgetCaps declared;
  declared.total = 8;
  HostThread* b = StartHost(cora, 24, 48, secretive, declared, std::nullopt, 8);
  ASSERT_NE(b, nullptr);
  ASSERT_NO_FATAL_FAILURE(WaitEnrolled(0, 48));
  {
    auto budgets = admin_->Budgets(0, 48);
    ASSERT_TRUE(budgets.ok());
    for (const auto& nb : *budgets) {
      EXPECT_EQ(nb.caps().total(), nb.node_id() < 24 ? 1.5 : 8.0);
      EXPECT_TRUE(nb.caps().per_attribute().empty());
    }
  }

  // --- the ledger refuses what declared caps forbid ---
  const v1::CreateCampaignRequest a1_req =
      FeaturesCampaign(v1::MECHANISM_KIND_HDS, 1.0, 10, 0, 24);
  v1::Campaign a1;
  ASSERT_TRUE(admin_->Create(a1_req, &a1).ok());
  auto a1_done = admin_->WaitClosed(a1.id(), absl::Seconds(300));
  ASSERT_TRUE(a1_done.ok()) << a1_done.status();
  EXPECT_EQ(a1_done->progress().reported(), 24u);
  EXPECT_EQ(a1_done->progress().rejected(), 0u);
  {
    auto budgets = admin_->Budgets(0, 24);
    ASSERT_TRUE(budgets.ok());
    for (const auto& nb : *budgets) {
      EXPECT_EQ(nb.total_spent(), 1.0) << "node " << nb.node_id();
      EXPECT_EQ(nb.spent().at("features"), 1.0);
    }
  }
  const int campaigns_before = admin_->CountCampaigns().value_or(-1);
  for (const v1::CreateCampaignRequest& req :
       {FeaturesCampaign(v1::MECHANISM_KIND_PIECEWISE, 1.0, 0, 0, 24),
        FeaturesCampaign(v1::MECHANISM_KIND_HDS, 1.0, 5, 0, 24),
        FeaturesCampaign(v1::MECHANISM_KIND_HDS, 1.0, 5, 23, 24)}) {
    SCOPED_TRACE(req.ShortDebugString());
    v1::Campaign out;
    grpc::Status s = admin_->Create(req, &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
        << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("ledger"));
  }
  EXPECT_EQ(admin_->CountCampaigns().value_or(-2), campaigns_before);
  // ... but not the same question again: it costs nothing, the agents answer
  // it from their memo.
  v1::Campaign a2;
  ASSERT_TRUE(admin_->Create(a1_req, &a2).ok());
  auto a2_done = admin_->WaitClosed(a2.id(), absl::Seconds(300));
  ASSERT_TRUE(a2_done.ok()) << a2_done.status();
  EXPECT_EQ(a2_done->progress().reported(), 24u);
  EXPECT_EQ(a2_done->progress().rejected(), 0u);
  EXPECT_EQ(a->shard().counters().fresh, 24u);
  EXPECT_EQ(a->shard().counters().memo_hits, 24u);
  for (uint32_t v = 0; v < 24; ++v) {
    EXPECT_EQ(a->shard().spent(v).value_or(-1), 1.0) << "node " << v;
    auto r1 = StoredReport(server_->curator(), a1.id(), v);
    auto r2 = StoredReport(server_->curator(), a2.id(), v);
    ASSERT_TRUE(r1.has_value() && r2.has_value()) << "node " << v;
    EXPECT_EQ(r1->features().SerializeAsString(), r2->features().SerializeAsString())
        << "node " << v;
  }
  {
    auto budgets = admin_->Budgets(0, 24);
    ASSERT_TRUE(budgets.ok());
    for (const auto& nb : *budgets) {
      EXPECT_EQ(nb.total_spent(), 1.0) << "node " << nb.node_id();
    }
  }

  // --- the agent refuses what only it knows it cannot afford ---
  ASSERT_NO_FATAL_FAILURE(ExpectAgentRefusesPrivateCap(*b));
  EXPECT_TRUE(a->Stop().ok());
  EXPECT_TRUE(b->Stop().ok());
}

// --- central-DP releases through the admin API ---------------------------------

// A release over TLS: the curator trains with its secure generator, records
// the result, charges the graph's ledger, serves the rows through the
// export API, and refuses a release over the cap; an unauthenticated caller
// gets nothing.
TEST_F(DeploymentTest, ReleaseIsChargedToTheLedgerAndExported) {
  GeneratorOptions g = DefaultGeneratorOptions();
  g.nodes = 300;
  g.features = 8;
  g.classes = 3;
  auto data = GenerateDataset(g);
  ASSERT_TRUE(data.ok()) << data.status();
  const std::string graph_dir = TempDir("release-graph");
  ASSERT_TRUE(WriteDataset(*data, graph_dir).ok());
  ASSERT_NO_FATAL_FAILURE(StartCurator(graph_dir, 0));

  v1::ReleaseRequest req;
  req.set_pipeline_method(v1::PIPELINE_METHOD_DPNE);
  req.set_epsilon(1.0);
  req.set_dim(8);
  v1::StageResult released;
  {
    grpc::ClientContext ctx;
    admin_->Prepare(&ctx);
    grpc::Status s = admin_->stub().Release(&ctx, req, &released);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_EQ(released.stage(), "release");
  EXPECT_EQ(released.rows(), 300u);
  EXPECT_EQ(released.cols(), 8u);
  EXPECT_THAT(released.details_json(), HasSubstr(R"("noise_source":"secure")"));
  absl::StatusOr<DenseMatrix> exported = admin_->Export(released.id());
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->rows, 300u);
  EXPECT_EQ(exported->cols, 8u);

  v1::ReleaseLedger ledger;
  {
    grpc::ClientContext ctx;
    admin_->Prepare(&ctx);
    grpc::Status s = admin_->stub().GetReleaseLedger(
        &ctx, v1::GetReleaseLedgerRequest(), &ledger);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_EQ(ledger.epsilon_cap(), 10.0);
  ASSERT_EQ(ledger.graphs_size(), 1);
  EXPECT_EQ(ledger.graphs(0).graph(), "curator");
  EXPECT_NEAR(ledger.graphs(0).epsilon(), 1.0, 1e-9);

  req.set_epsilon(10.5);
  {
    grpc::ClientContext ctx;
    admin_->Prepare(&ctx);
    v1::StageResult out;
    grpc::Status s = admin_->stub().Release(&ctx, req, &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(s.error_message(), HasSubstr("cap of 10"));
  }
  {
    grpc::ClientContext ctx;  // no credential
    v1::StageResult out;
    grpc::Status s = admin_->stub().Release(&ctx, req, &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
}

// A host over more nodes than the curator takes in one Enrol call enrols in
// parts (agent.proto EnrolRequest.more): its one session covers them all,
// a campaign over every node completes, and a restarted host's enrolment
// replaces the earlier session instead of adding one.
TEST_F(DeploymentTest, AHostWithMoreNodesThanOneEnrolTakesEnrolsInParts) {
  constexpr uint32_t kNodes = 300;
  constexpr int kMaxEnrol = 64;  // 300 nodes: 5 parts
  GeneratorOptions g = DefaultGeneratorOptions();
  g.nodes = kNodes;
  g.features = 8;
  g.classes = 3;
  auto data = GenerateDataset(g);
  ASSERT_TRUE(data.ok()) << data.status();
  const std::string graph_dir = TempDir("parts-graph");
  ASSERT_TRUE(WriteDataset(*data, graph_dir).ok());
  ASSERT_NO_FATAL_FAILURE(StartCurator(graph_dir, 0, kMaxEnrol));

  agent::AgentPolicy policy;
  policy.caps.total = 8;
  {
    // A part of no nodes is a configuration error.
    auto records = agent::LoadShard(graph_dir, FeatureScaling::kSymmetric, 0, 2);
    ASSERT_TRUE(records.ok()) << records.status();
    auto shard = agent::AgentShard::Create(std::move(*records), policy, 7,
                                           TempDir("parts-zero"));
    ASSERT_TRUE(shard.ok()) << shard.status();
    agent::AgentHostOptions o;
    o.curator = absl::StrCat("127.0.0.1:", server_->port());
    o.ca_pem = certs().ca_pem;
    for (uint32_t v = 0; v < 2; ++v) {
      o.credentials.emplace_back(v, curator::NodeCredential(certs().node_key, v));
    }
    o.enrol_part = 0;
    auto host = agent::AgentHost::Create(std::move(o), std::move(*shard));
    EXPECT_EQ(host.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(host.status().message(), HasSubstr("enrol_part must be >= 1"));
  }
  // A host that sends more per call than the curator takes is refused for
  // good, with the limit named.
  HostThread* too_big = StartHost(graph_dir, 0, kNodes, policy, policy.caps,
                                  /*seed=*/7, 512, /*enrol_part=*/kMaxEnrol + 1);
  ASSERT_NE(too_big, nullptr);
  const absl::Status refused = [&] {
    PollUntil([&] { return too_big->finished(); }, absl::Seconds(30),
              absl::Milliseconds(20));
    return too_big->Stop();
  }();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("at most 64 allowed per call"));
  hosts_.clear();

  HostThread* host = StartHost(graph_dir, 0, kNodes, policy, policy.caps,
                               /*seed=*/7, 512, /*enrol_part=*/kMaxEnrol);
  ASSERT_NE(host, nullptr);
  ASSERT_NO_FATAL_FAILURE(WaitEnrolled(0, kNodes));
  ASSERT_TRUE(PollUntil([&] { return host->host().ready(); }, absl::Seconds(30),
                        absl::Milliseconds(20)));
  absl::StatusOr<v1::CuratorStatus> status = admin_->Status();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->sessions(), 1u);
  EXPECT_EQ(status->enrolled_nodes(), kNodes);

  v1::CreateCampaignRequest req;
  req.set_name("parts");
  req.set_attribute(v1::ATTRIBUTE_FEATURES);
  v1::MechanismSpec* spec = req.mutable_spec();
  spec->set_kind(v1::MECHANISM_KIND_HDS);
  spec->set_epsilon(1.0);
  spec->set_dimension(8);
  spec->set_sampled(2);
  spec->set_range_low(-1.0);
  spec->set_range_high(1.0);
  req.mutable_nodes()->set_all(true);
  req.set_quorum(1.0);
  v1::Campaign created;
  grpc::Status s = admin_->Create(req, &created);
  ASSERT_TRUE(s.ok()) << s.error_message();
  absl::StatusOr<v1::Campaign> done =
      admin_->WaitClosed(created.id(), absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->close_reason(), "quorum");
  EXPECT_EQ(done->progress().reported(), kNodes);
  EXPECT_EQ(done->progress().rejected(), 0u);
  // The curator closes on the stored reports; the host counts an ack when
  // the reply reaches it, which may be a moment later.
  EXPECT_TRUE(PollUntil(
      [&] { return host->host().counters().reports_acked.load() == kNodes; },
      absl::Seconds(30), absl::Milliseconds(20)))
      << host->host().counters().reports_acked.load() << " of " << kNodes
      << " reports acknowledged";
  EXPECT_EQ(host->host().counters().sessions.load(), 1u);
  ASSERT_TRUE(host->Stop().ok());

  // The host restarts: its new enrolment in parts replaces the old session.
  HostThread* again = StartHost(graph_dir, 0, kNodes, policy, policy.caps,
                                /*seed=*/7, 512, /*enrol_part=*/kMaxEnrol);
  ASSERT_NE(again, nullptr);
  ASSERT_TRUE(PollUntil([&] { return again->host().ready(); },
                        absl::Seconds(30), absl::Milliseconds(20)));
  status = admin_->Status();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->sessions(), 1u);
  EXPECT_EQ(status->enrolled_nodes(), kNodes);
  // Nothing was charged twice: one question, epsilon 1 per node.
  auto budgets = admin_->Budgets(0, kNodes);
  ASSERT_TRUE(budgets.ok()) << budgets.status();
  ASSERT_EQ(budgets->size(), kNodes);
  for (const auto& b : *budgets) {
    ASSERT_EQ(b.total_spent(), 1.0) << "node " << b.node_id();
  }
}

}  // namespace
}  // namespace ldpgraph::integration
