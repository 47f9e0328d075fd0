// Crash tests with real processes: the ldpgraph-curator binary (TLS) and
// four ldpgraph-agent processes over cora shards, with SECURE noise (no
// --seed): a report perturbed again would differ from the first, so an
// answer that survives a crash can only have come from durable state.
// Agents send small batches at a bounded rate so that a campaign lasts a
// few seconds and a process can be killed (SIGKILL) in the middle of it.
//
//   CuratorKilledMidCampaign  kill -9 the curator while reports flow and
//       restart it on the same data directory and port: no acknowledged
//       report is lost (the hosts are frozen with SIGSTOP across the
//       restart, so the first look sees only what the store kept), the
//       campaign completes once they resume, every node is charged epsilon
//       exactly once, no report is rejected, and every stored report is the
//       one its agent memoized.
//   HostsComeBackAfterACuratorRestart  kill -9 the curator while the hosts
//       idle, keep it down for 3 s (longer than a backoff that doubles from
//       100 ms would wait), restart it, and wait (up to 60 s, a deadline for
//       a hung test, not a bound) until every host is enrolled and
//       subscribed again, with one session each. How long that takes is
//       printed, not checked: the 2 s target is restart_bench's
//       (tests/bench/restart_bench.cc), where a busy machine cannot fail a
//       test.
//   AgentKilledMidCampaign    kill -9 one agent host and restart it on the
//       same state directory: the campaign completes without rejections;
//       the same question asked again is answered from the persisted memo
//       (bit-identical estimates, no extra epsilon, one memo row per node).
#include <signal.h>
#include <sys/wait.h>

#include <array>
#include <iostream>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/agent_state.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/linalg/npy.h"
#include "common/status_macros.h"
#include "common/wire/codec.h"
#include "gtest/gtest.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "tests/integration/admin_client.h"
#include "tests/integration/test_util.h"

namespace ldpgraph::integration {
namespace {

constexpr uint32_t kNodes = 2708;
constexpr uint32_t kFeatures = 1433;
constexpr int kHosts = 4;
constexpr uint32_t kShard = kNodes / kHosts;  // 677
constexpr double kEpsilon = 1.0;
// Per host: 8 reports per batch, at most this many reports per second, so a
// campaign over the 677 nodes of a shard takes about 4.5 s.
constexpr const char* kMaxRate = "150";
constexpr absl::Duration kLong = absl::Seconds(300);
// The longest wait for the hosts to come back after a curator restart: a
// deadline for a hung test; the timing itself is restart_bench's.
constexpr absl::Duration kComeBack = absl::Seconds(60);

class RestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cora_ = CoraDir();
    if (cora_.empty()) {
      LDPGRAPH_SKIP_OR_FAIL_IN_CI()
          << "no dataset at " << DatasetsDir()
          << "/cora (set LDPGRAPH_DATASETS to the datasets folder)";
    }
    bin_ = LDPGRAPH_BINARY_DIR;
    root_ = NewTempDir("restart");
    auto certs = MakeDevCerts(root_ + "/certs");
    ASSERT_TRUE(certs.ok()) << certs.status();
    certs_ = std::move(*certs);
    // Node credentials, as an operator provisions them.
    creds_ = root_ + "/credentials.txt";
    auto r = RunCommand({bin_ + "/ldpctl", "credentials", "--node-key",
                         certs_.dir + "/node.key", "--nodes",
                         absl::StrCat("0-", kNodes), "--out", creds_},
                        root_, absl::Seconds(60));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->exit_code, 0) << r->err;
    auto port = FreePort();
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
    admin_ = std::make_unique<Admin>(TlsChannel(port_, certs_.ca_pem),
                                     certs_.admin_hex);
    admin_->set_call_timeout(std::chrono::seconds(30));
  }

  void TearDown() override {
    for (auto& a : agents_) a.Kill();
    curator_.Kill();
    // Keep the logs and state of a failed test for a post-mortem.
    if (!root_.empty() && !HasFailure()) RemoveTempDir(root_);
  }

  std::string AgentStateDir(int i) const {
    return absl::StrCat(root_, "/agent-", i);
  }

  // Starts the curator and waits until its admin API answers.
  void StartCurator() {
    ASSERT_TRUE(curator_
                    .Start({bin_ + "/ldpgraph-curator", "--listen",
                            absl::StrCat("127.0.0.1:", port_), "--http", "off",
                            "--data-dir", root_ + "/curator", "--graph", cora_,
                            "--admin-token", certs_.dir + "/admin.token",
                            "--node-key", certs_.dir + "/node.key",
                            "--tls-cert", certs_.dir + "/curator.pem",
                            "--tls-key", certs_.dir + "/curator.key"},
                           root_ + "/curator.log")
                    .ok());
    bool exited = false;
    const bool ready = PollUntil(
        [&] {
          if (curator_.Exited()) {
            exited = true;
            return true;
          }
          return admin_->CountCampaigns().ok();
        },
        kLong, absl::Milliseconds(100));
    ASSERT_FALSE(exited) << "the curator exited:\n" << curator_.LogTail();
    ASSERT_TRUE(ready) << "the curator did not come up:\n" << curator_.LogTail();
  }

  void StartAgent(int i) {
    const uint32_t begin = i * kShard, end = (i + 1) * kShard;
    ASSERT_TRUE(agents_[i]
                    .Start({bin_ + "/ldpgraph-agent", "--curator",
                            absl::StrCat("127.0.0.1:", port_), "--ca",
                            certs_.dir + "/ca.pem", "--credentials", creds_,
                            "--dataset", cora_, "--nodes",
                            absl::StrCat(begin, "-", end), "--state-dir",
                            AgentStateDir(i), "--batch", "8", "--max-rate",
                            kMaxRate, "--http", "off", "--name",
                            absl::StrCat("host-", i)},
                           absl::StrCat(root_, "/agent-", i, ".log"))
                    .ok());
  }

  // Every process still running; a failure names the one that is not.
  void ExpectAllRunning() {
    int status = 0;
    ASSERT_FALSE(curator_.Exited(&status))
        << "the curator exited (status " << status << "):\n" << curator_.LogTail();
    for (int i = 0; i < kHosts; ++i) {
      ASSERT_FALSE(agents_[i].Exited(&status))
          << "agent " << i << " exited (status " << status << "):\n"
          << agents_[i].LogTail();
    }
  }

  // Waits until the ledger knows the caps of every node: all hosts enrolled.
  void WaitEnrolled() {
    size_t known = 0;
    const bool enrolled = PollUntil(
        [&] {
          auto budgets = admin_->Budgets(0, 0);  // every node the ledger knows
          if (!budgets.ok()) return false;
          known = 0;
          for (const auto& b : *budgets) known += b.caps_known() ? 1 : 0;
          return known == kNodes;
        },
        kLong, absl::Milliseconds(200));
    ASSERT_NO_FATAL_FAILURE(ExpectAllRunning());
    ASSERT_TRUE(enrolled) << known << " of " << kNodes << " nodes enrolled";
  }

  v1::Campaign CreateCampaign() {
    v1::CreateCampaignRequest req;
    req.set_name("restart");
    req.set_attribute(v1::ATTRIBUTE_FEATURES);
    v1::MechanismSpec* s = req.mutable_spec();
    s->set_kind(v1::MECHANISM_KIND_HDS);
    s->set_epsilon(kEpsilon);
    s->set_dimension(kFeatures);
    s->set_sampled(10);
    s->set_range_low(-1);
    s->set_range_high(1);
    req.mutable_nodes()->set_all(true);
    req.set_quorum(1.0);
    v1::Campaign out;
    grpc::Status st = admin_->Create(req, &out);
    EXPECT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(out.progress().targeted(), kNodes);
    return out;
  }

  // Polls the campaign until closed, tolerating transient RPC errors, and
  // failing early if a process dies.
  v1::Campaign WaitClosed(const std::string& id) {
    v1::Campaign last;
    bool died = false;
    const bool closed = PollUntil(
        [&] {
          if (curator_.Exited()) {
            died = true;
            return true;
          }
          for (auto& a : agents_) {
            if (a.Exited()) {
              died = true;
              return true;
            }
          }
          auto c = admin_->Get(id);
          if (!c.ok()) return false;
          last = *c;
          return c->state() == v1::CAMPAIGN_STATE_CLOSED;
        },
        kLong, absl::Milliseconds(200));
    EXPECT_FALSE(died) << "a process died; curator log:\n"
                       << curator_.LogTail() << "\nagent logs:\n"
                       << agents_[0].LogTail(1000) << agents_[1].LogTail(1000)
                       << agents_[2].LogTail(1000) << agents_[3].LogTail(1000);
    EXPECT_TRUE(closed) << id << " still open: " << last.ShortDebugString();
    return last;
  }

  // The ledger: every node charged exactly epsilon, on features only.
  void ExpectEveryNodeChargedOnce() {
    auto budgets = admin_->Budgets(0, kNodes);
    ASSERT_TRUE(budgets.ok()) << budgets.status();
    ASSERT_EQ(budgets->size(), kNodes);
    size_t wrong = 0;
    for (const auto& b : *budgets) {
      if (b.total_spent() != kEpsilon || b.spent().size() != 1 ||
          b.spent().at("features") != kEpsilon) {
        if (wrong++ < 5) {
          ADD_FAILURE() << "node " << b.node_id() << ": " << b.ShortDebugString();
        }
      }
    }
    EXPECT_EQ(wrong, 0u);
  }

  // Stops every agent host gracefully (SIGTERM) and checks its memo: one
  // row per node of its shard, each for the one question asked, and each
  // the very answer the curator estimated from: row v of `estimate` (the
  // curator's estimate of a campaign asking that question) equals the
  // library's estimate of v's memoized report. With secure noise, a node
  // that answered afresh after a crash would break this.
  void StopAgentsAndCheckMemos(const v1::MechanismSpec& spec,
                               const DenseMatrix& estimate) {
    for (int i = 0; i < kHosts; ++i) {
      auto status = agents_[i].Signal(SIGTERM, absl::Seconds(60));
      ASSERT_TRUE(status.ok()) << "agent " << i << ": " << status.status();
      EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
          << "agent " << i << " status " << *status << ":\n" << agents_[i].LogTail();
    }
    auto wire_spec = wire::FromWireFeatureSpec(spec);
    ASSERT_TRUE(wire_spec.ok()) << wire_spec.status();
    auto mech = CreateFeatureMechanism(*wire_spec);
    ASSERT_TRUE(mech.ok()) << mech.status();
    const std::string key =
        wire::WireQueryKey(v1::ATTRIBUTE_FEATURES, spec).Canonical();
    ASSERT_EQ(estimate.rows, kNodes);
    ASSERT_EQ(estimate.cols, kFeatures);
    std::vector<double> row(kFeatures);
    size_t mismatched_rows = 0;
    for (int i = 0; i < kHosts; ++i) {
      auto store = agent::AgentStateStore::Open(AgentStateDir(i));
      ASSERT_TRUE(store.ok()) << store.status();
      std::map<uint32_t, int> rows;
      std::set<std::string> keys;
      absl::Status scan = (*store)->ForEach(
          [&](const agent::MemoRow& memo) -> absl::Status {
            ++rows[memo.node];
            keys.insert(memo.key.Canonical());
            v1::Report body;
            if (!body.ParseFromString(memo.answer) || !body.has_features()) {
              return absl::DataLossError(
                  absl::StrCat("node ", memo.node, ": not a features body"));
            }
            auto report = wire::DecodeFeatureReport(body.features(), **mech);
            if (!report.ok()) return report.status();
            RETURN_IF_ERROR((*mech)->Estimate(*report, absl::MakeSpan(row)));
            if (memo.node >= kNodes) return absl::OutOfRangeError("node id");
            for (uint32_t j = 0; j < kFeatures; ++j) {
              if (static_cast<float>(row[j]) != estimate.at(memo.node, j)) {
                if (mismatched_rows++ < 5) {
                  ADD_FAILURE() << "node " << memo.node << " feature " << j
                                << ": memo " << row[j] << ", curator "
                                << estimate.at(memo.node, j);
                }
                break;
              }
            }
            return absl::OkStatus();
          });
      ASSERT_TRUE(scan.ok()) << scan;
      EXPECT_EQ((*store)->Count().value_or(-1), kShard) << "agent " << i;
      EXPECT_EQ(rows.size(), kShard) << "agent " << i;
      for (const auto& [node, n] : rows) {
        EXPECT_GE(node, i * kShard);
        EXPECT_LT(node, (i + 1) * kShard);
        EXPECT_EQ(n, 1) << "node " << node;
      }
      EXPECT_EQ(keys, std::set<std::string>{key}) << "agent " << i;
    }
    EXPECT_EQ(mismatched_rows, 0u)
        << "rows where the curator's estimate is not the agent's memo";
  }

  // Stops the curator gracefully (SIGTERM): it must exit 0.
  void StopCurator() {
    auto status = curator_.Signal(SIGTERM, absl::Seconds(60));
    ASSERT_TRUE(status.ok()) << "curator: " << status.status();
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
        << "curator status " << *status << ":\n" << curator_.LogTail();
  }

  // No agent host logged a rejected report.
  void ExpectNoRejectionLogged() {
    for (int i = 0; i < kHosts; ++i) {
      auto log = ReadFile(agents_[i].log_path());
      ASSERT_TRUE(log.ok());
      EXPECT_FALSE(absl::StrContains(*log, "rejected a report"))
          << "agent " << i << ":\n" << agents_[i].LogTail();
    }
  }

  // ldpctl with the connection flags; its stdout.
  std::string Ldpctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {bin_ + "/ldpctl"};
    argv.insert(argv.end(), args.begin(), args.end());
    for (const std::string& a :
         {std::string("--curator"), absl::StrCat("127.0.0.1:", port_),
          std::string("--admin-token"), certs_.dir + "/admin.token",
          std::string("--ca"), certs_.dir + "/ca.pem"}) {
      argv.push_back(a);
    }
    auto r = RunCommand(argv, root_, kLong);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return "";
    EXPECT_EQ(r->exit_code, 0) << r->err;
    return r->out;
  }

  std::string cora_, bin_, root_, creds_;
  DevCerts certs_;
  int port_ = 0;
  std::unique_ptr<Admin> admin_;
  ChildProcess curator_;
  std::array<ChildProcess, kHosts> agents_;
};

TEST_F(RestartTest, CuratorKilledMidCampaign) {
  ASSERT_NO_FATAL_FAILURE(StartCurator());
  for (int i = 0; i < kHosts; ++i) ASSERT_NO_FATAL_FAILURE(StartAgent(i));
  ASSERT_NO_FATAL_FAILURE(WaitEnrolled());
  // Only host 0 answers until the kill: the others are frozen (SIGSTOP)
  // before the campaign opens, so the campaign cannot finish however fast
  // host 0 is (it holds kShard of kNodes), and "midway" is not a race
  // between this poll and the hosts.
  for (int i = 1; i < kHosts; ++i) ASSERT_TRUE(agents_[i].Send(SIGSTOP));
  const v1::Campaign campaign = CreateCampaign();
  ASSERT_FALSE(campaign.id().empty());

  // Wait until a good part, but not all, of the reports are stored.
  v1::Campaign before;
  const bool midway = PollUntil(
      [&] {
        auto c = admin_->Get(campaign.id());
        if (!c.ok()) return false;
        before = *c;
        return c->progress().reported() >= kNodes / 5 ||
               c->state() == v1::CAMPAIGN_STATE_CLOSED;
      },
      kLong, absl::Milliseconds(10));
  ASSERT_TRUE(midway) << before.ShortDebugString();
  ASSERT_EQ(before.state(), v1::CAMPAIGN_STATE_OPEN)
      << "the campaign finished before the curator could be killed";
  // Freeze the agent hosts (SIGSTOP) so that, right after the restart, the
  // curator's progress can only come from its store: a running host would
  // resend from its memo at once and hide a lost report.
  for (auto& a : agents_) ASSERT_TRUE(a.Send(SIGSTOP));
  auto frozen = admin_->Get(campaign.id());
  ASSERT_TRUE(frozen.ok()) << frozen.status();
  const uint32_t reported_before = frozen->progress().reported();
  ASSERT_GT(reported_before, 0u);
  ASSERT_LT(reported_before, kNodes)
      << "the campaign finished before the curator could be killed";
  EXPECT_EQ(frozen->progress().rejected(), 0u);
  curator_.Kill();  // SIGKILL
  std::cerr << "killed the curator at " << reported_before << " of " << kNodes
            << " reports\n";

  ASSERT_NO_FATAL_FAILURE(StartCurator());
  {
    auto c = admin_->Get(campaign.id());
    ASSERT_TRUE(c.ok()) << c.status();
    // No acknowledged report was lost.
    EXPECT_GE(c->progress().reported(), reported_before);
    EXPECT_LT(c->progress().reported(), kNodes);
    EXPECT_EQ(c->state(), v1::CAMPAIGN_STATE_OPEN);
    EXPECT_EQ(c->spec().SerializeAsString(), campaign.spec().SerializeAsString());
    std::cerr << "after the restart: " << c->progress().reported()
              << " reports stored\n";
    // The ledger, rebuilt from the same store, charges exactly the nodes
    // whose report is stored, once.
    auto budgets = admin_->Budgets(0, kNodes);
    ASSERT_TRUE(budgets.ok()) << budgets.status();
    uint32_t charged = 0;
    for (const auto& b : *budgets) {
      if (b.total_spent() == 0) continue;
      ++charged;
      EXPECT_EQ(b.total_spent(), kEpsilon) << "node " << b.node_id();
    }
    EXPECT_EQ(charged, c->progress().reported());
  }
  for (auto& a : agents_) ASSERT_TRUE(a.Send(SIGCONT));
  const v1::Campaign done = WaitClosed(campaign.id());
  EXPECT_EQ(done.state(), v1::CAMPAIGN_STATE_CLOSED);
  EXPECT_EQ(done.close_reason(), "quorum");
  EXPECT_EQ(done.progress().reported(), kNodes);
  EXPECT_EQ(done.progress().refused(), 0u);
  // A resend of a re-perturbed answer would be ALREADY_EXISTS.
  EXPECT_EQ(done.progress().rejected(), 0u);
  ASSERT_NO_FATAL_FAILURE(ExpectEveryNodeChargedOnce());
  ASSERT_NO_FATAL_FAILURE(ExpectNoRejectionLogged());
  auto estimate = admin_->Estimate(campaign.id());
  ASSERT_TRUE(estimate.ok()) << estimate.status();
  auto matrix = admin_->Export(estimate->id());
  ASSERT_TRUE(matrix.ok()) << matrix.status();
  ASSERT_NO_FATAL_FAILURE(StopAgentsAndCheckMemos(campaign.spec(), *matrix));
  ASSERT_NO_FATAL_FAILURE(StopCurator());
}

TEST_F(RestartTest, HostsComeBackAfterACuratorRestart) {
  ASSERT_NO_FATAL_FAILURE(StartCurator());
  for (int i = 0; i < kHosts; ++i) ASSERT_NO_FATAL_FAILURE(StartAgent(i));
  ASSERT_NO_FATAL_FAILURE(WaitEnrolled());
  auto subscribed = [&](v1::CuratorStatus* out) {
    auto s = admin_->Status();
    if (!s.ok()) return false;
    *out = *s;
    return s->task_streams() == kHosts && s->enrolled_nodes() == kNodes;
  };
  v1::CuratorStatus status;
  ASSERT_TRUE(PollUntil([&] { return subscribed(&status); }, kLong,
                        absl::Milliseconds(20)))
      << status.ShortDebugString();
  curator_.Kill();  // SIGKILL
  absl::SleepFor(absl::Seconds(3));
  ASSERT_NO_FATAL_FAILURE(StartCurator());
  const absl::Time ready = absl::Now();
  ASSERT_TRUE(PollUntil([&] { return subscribed(&status); }, kComeBack,
                        absl::Milliseconds(5)))
      << "the hosts were not all back " << absl::FormatDuration(kComeBack)
      << " after the restarted curator was ready: "
      << status.ShortDebugString();
  std::cerr << "every host enrolled and subscribed "
            << absl::ToDoubleMilliseconds(absl::Now() - ready)
            << " ms after the restarted curator was ready\n";
  // One session per host: the sessions of the first run died with it.
  EXPECT_EQ(status.sessions(), static_cast<uint32_t>(kHosts));
  ASSERT_NO_FATAL_FAILURE(ExpectAllRunning());
}

TEST_F(RestartTest, AgentKilledMidCampaign) {
  ASSERT_NO_FATAL_FAILURE(StartCurator());
  for (int i = 0; i < kHosts; ++i) ASSERT_NO_FATAL_FAILURE(StartAgent(i));
  ASSERT_NO_FATAL_FAILURE(WaitEnrolled());
  const v1::Campaign first = CreateCampaign();
  ASSERT_FALSE(first.id().empty());

  // Kill host 1 once some, but not all, of its nodes' reports are stored.
  constexpr int kVictim = 1;
  const uint32_t begin = kVictim * kShard, end = begin + kShard;
  uint32_t stored = 0;
  const bool midway = PollUntil(
      [&] {
        auto budgets = admin_->Budgets(begin, end);
        if (!budgets.ok()) return false;
        stored = 0;
        for (const auto& b : *budgets) stored += b.total_spent() > 0 ? 1 : 0;
        return stored >= kShard / 10;
      },
      kLong, absl::Milliseconds(10));
  ASSERT_TRUE(midway) << stored;
  ASSERT_LT(stored, kShard) << "host " << kVictim
                            << " finished before it could be killed";
  agents_[kVictim].Kill();  // SIGKILL
  std::cerr << "killed agent host " << kVictim << " at " << stored << " of "
            << kShard << " reports\n";
  ASSERT_NO_FATAL_FAILURE(StartAgent(kVictim));

  const v1::Campaign done = WaitClosed(first.id());
  EXPECT_EQ(done.close_reason(), "quorum");
  EXPECT_EQ(done.progress().reported(), kNodes);
  EXPECT_EQ(done.progress().refused(), 0u);
  EXPECT_EQ(done.progress().rejected(), 0u);
  ASSERT_NO_FATAL_FAILURE(ExpectEveryNodeChargedOnce());

  // The identical question again, to every node.
  const v1::Campaign second = CreateCampaign();
  ASSERT_FALSE(second.id().empty());
  ASSERT_NE(second.id(), first.id());
  const v1::Campaign done2 = WaitClosed(second.id());
  EXPECT_EQ(done2.progress().reported(), kNodes);
  EXPECT_EQ(done2.progress().refused(), 0u);
  EXPECT_EQ(done2.progress().rejected(), 0u);
  ASSERT_NO_FATAL_FAILURE(ExpectEveryNodeChargedOnce());
  ASSERT_NO_FATAL_FAILURE(ExpectNoRejectionLogged());

  // Estimates of both campaigns, through ldpctl, bit for bit.
  std::vector<std::string> files;
  for (const std::string& id : {first.id(), second.id()}) {
    const std::string out = Ldpctl({"pipeline", "estimate", id, "--format", "json"});
    nlohmann::json result = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(result.is_discarded()) << out;
    ASSERT_TRUE(result.contains("id")) << out;
    const std::string rid = result["id"].get<std::string>();
    const std::string path = absl::StrCat(root_, "/estimate-", id, ".npy");
    Ldpctl({"export", rid, "--out", path});
    files.push_back(path);
  }
  auto a = ReadFile(files[0]);
  auto b = ReadFile(files[1]);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_GT(a->size(), size_t{kNodes} * kFeatures * 4);
  EXPECT_TRUE(*a == *b) << "the estimates of " << first.id() << " and "
                        << second.id() << " differ: a node answered afresh";
  auto m = ReadNpy(files[0]);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->rows, kNodes);
  ASSERT_EQ(m->cols, kFeatures);
  size_t nonzero = 0;
  for (float x : m->data) nonzero += x != 0.0f ? 1 : 0;
  EXPECT_GT(nonzero, size_t{kNodes} * 9);  // k = 10 values per node

  ASSERT_NO_FATAL_FAILURE(StopAgentsAndCheckMemos(first.spec(), *m));
  ASSERT_NO_FATAL_FAILURE(StopCurator());
}

}  // namespace
}  // namespace ldpgraph::integration
