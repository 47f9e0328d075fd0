// End to end, the topology of docker-compose.yml and deploy/k8s without
// containers: real ldpgraph-curator and ldpgraph-agent processes over TLS,
// agent hosts started as interchangeable replicas (--nodes from-curator),
// and `ldpctl run` as the one-shot job.
//  - Three replicas get distinct shards that cover every node once, and a
//    campaign over them finishes with every node reporting once.
//  - A host killed mid-deployment is replaced by a spare once its lease
//    lapses; the spare takes over the shard's state folder, so it restores
//    the memo of every node of the shard (nothing revealed is forgotten),
//    and the killed host, back with its old name, is now the spare.
//  - A wrong credential, and two hosts on one state folder, are refused
//    with a clear message.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/test_util.h"

namespace ldpgraph::integration {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

constexpr absl::Duration kLong = absl::Seconds(300);
constexpr int kNodes = 600;

class FleetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bin_ = LDPGRAPH_BINARY_DIR;
    dir_ = NewTempDir("fleet");
    dataset_ = dir_ + "/dataset";
    secrets_ = dir_ + "/secrets";
    CommandResult g = Run({bin_ + "/ldpgraph", "generate", "--nodes",
                           absl::StrCat(kNodes), "--out", dataset_});
    ASSERT_EQ(g.exit_code, 0) << g.err;
    CommandResult s = Run({bin_ + "/ldpctl", "secrets", "--out", secrets_,
                           "--dataset", dataset_, "--tls-names", "localhost"});
    ASSERT_EQ(s.exit_code, 0) << s.err;
  }
  void TearDown() override {
    for (auto& a : agents_) a->Kill();
    if (curator_) curator_->Kill();
    RemoveTempDir(dir_);
  }

  CommandResult Run(const std::vector<std::string>& argv) {
    auto r = RunCommand(argv, dir_, kLong);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : CommandResult{};
  }

  void StartCurator() {
    auto port = FreePort();
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
    curator_ = std::make_unique<ChildProcess>();
    ASSERT_TRUE(curator_
                    ->Start({bin_ + "/ldpgraph-curator", "--listen",
                             absl::StrCat("127.0.0.1:", port_), "--http", "off",
                             "--data-dir", dir_ + "/curator", "--graph", dataset_,
                             "--admin-token", secrets_ + "/admin.token",
                             "--node-key", secrets_ + "/node.key", "--tls-cert",
                             secrets_ + "/curator.pem", "--tls-key",
                             secrets_ + "/curator.key", "--fleet-settle", "1",
                             "--fleet-min-hosts", "3", "--fleet-lease", "3"},
                            dir_ + "/curator.log")
                    .ok());
  }

  // An agent host replica named `name`; returns its index in agents_.
  size_t StartReplica(const std::string& name,
                      const std::string& credentials = "") {
    auto child = std::make_unique<ChildProcess>();
    EXPECT_TRUE(child
                    ->Start({bin_ + "/ldpgraph-agent", "--curator",
                             absl::StrCat("127.0.0.1:", port_), "--ca",
                             secrets_ + "/ca.pem", "--server-name", "localhost",
                             "--credentials",
                             credentials.empty() ? secrets_ + "/nodes.credentials"
                                                 : credentials,
                             "--dataset", dataset_, "--nodes", "from-curator",
                             "--state-dir", dir_ + "/state", "--http", "off",
                             "--name", name},
                            absl::StrCat(dir_, "/", name, ".log"))
                    .ok());
    agents_.push_back(std::move(child));
    return agents_.size() - 1;
  }

  std::vector<std::string> Connection() const {
    return {"--curator", absl::StrCat("127.0.0.1:", port_), "--ca",
            secrets_ + "/ca.pem", "--server-name", "localhost", "--admin-token",
            secrets_ + "/admin.token"};
  }

  json Ldpctl(std::vector<std::string> args) {
    args.insert(args.begin(), bin_ + "/ldpctl");
    for (const auto& a : Connection()) args.push_back(a);
    args.push_back("--format");
    args.push_back("json");
    CommandResult r = Run(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out << r.err;
    return j;
  }

  bool LogSays(size_t agent, const std::string& text, absl::Duration timeout) {
    return PollUntil(
        [&] { return absl::StrContains(agents_[agent]->LogTail(20000), text); },
        timeout);
  }

  std::string bin_, dir_, dataset_, secrets_;
  int port_ = 0;
  std::unique_ptr<ChildProcess> curator_;
  std::vector<std::unique_ptr<ChildProcess>> agents_;
};

TEST_F(FleetTest, ReplicasShareTheNodesAndASpareTakesOverALapsedShard) {
  ASSERT_NO_FATAL_FAILURE(StartCurator());
  for (const char* name : {"replica-a", "replica-b", "replica-c"}) {
    StartReplica(name);
  }

  // The one-shot job: waits for enrolment, collects, evaluates.
  json run = Ldpctl({"run", "--dataset", dataset_, "--timeout", "120"});
  ASSERT_TRUE(run.contains("deployment")) << run.dump();
  const json& d = run["deployment"];
  EXPECT_EQ(d["hosts"], 3);
  EXPECT_EQ(d["reports"], kNodes);
  EXPECT_EQ(d["rejected"], 0);
  EXPECT_DOUBLE_EQ(d["epsilon_spent_per_node"]["min"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(d["epsilon_spent_per_node"]["max"].get<double>(), 1.0);
  EXPECT_GT(run["mean"].get<double>(), 0.3);  // six classes: chance is 1/6
  json status = Ldpctl({"status"});
  EXPECT_EQ(status["fleet_shards"], 3);
  EXPECT_EQ(status["enrolled_nodes"], kNodes);

  // Distinct shards, one state folder each, covering the nodes once: the
  // ledger counts every node once (min = max = 1 above) and each folder is
  // there.
  for (int s = 0; s < 3; ++s) {
    EXPECT_TRUE(std::filesystem::exists(
        absl::StrCat(dir_, "/state/shard-", s, "-of-3/agent.db")))
        << "shard " << s;
  }
  // Whichever replica holds shard 1 (nodes 200..399; the order of first
  // claims decides) dies. A new replica waits as a spare until the dead
  // one's lease (3 s) lapses, then takes shard 1 with its state: every node
  // of the shard answered once, so 200 memo entries come back.
  int holder = -1;
  for (int i = 0; i < 3; ++i) {
    if (LogSays(i, "nodes 200..399", absl::ZeroDuration())) holder = i;
  }
  ASSERT_GE(holder, 0) << "no replica holds nodes 200..399";
  const std::string holder_name =
      std::vector<std::string>{"replica-a", "replica-b", "replica-c"}[holder];
  agents_[holder]->Kill();
  const size_t d_index = StartReplica("replica-d");
  ASSERT_TRUE(LogSays(d_index, "holding shard 1 of 3", absl::Seconds(30)))
      << agents_[d_index]->LogTail();
  EXPECT_TRUE(LogSays(d_index, "nodes 200..399, 200 memo entries restored",
                      absl::Seconds(10)))
      << agents_[d_index]->LogTail();

  // The dead replica comes back under its old name: the plan now names
  // replica-d, so it is a spare, and not a second holder of shard 1.
  const size_t b_again = StartReplica(holder_name);
  EXPECT_TRUE(LogSays(b_again, "spare", absl::Seconds(10)))
      << agents_[b_again]->LogTail();
  EXPECT_FALSE(agents_[b_again]->Exited());

  // A second campaign with the same question: shard 1 answers from its
  // restored memo (no new spend), so the ledger still says 1 per node.
  json again = Ldpctl({"run", "--dataset", dataset_, "--timeout", "120"});
  ASSERT_TRUE(again.contains("deployment")) << again.dump();
  EXPECT_EQ(again["deployment"]["reports"], kNodes);
  EXPECT_DOUBLE_EQ(
      again["deployment"]["epsilon_spent_per_node"]["max"].get<double>(), 1.0);
}

TEST_F(FleetTest, AWrongCredentialOrASharedStateFolderIsRefused) {
  ASSERT_NO_FATAL_FAILURE(StartCurator());
  // A credentials file whose first secret is wrong.
  const std::string forged = dir_ + "/forged.credentials";
  {
    std::ofstream f(forged);
    f << "0\t" << std::string(64, '0') << "\n";
  }
  const size_t bad = StartReplica("forger", forged);
  auto status = agents_[bad]->Wait(absl::Seconds(30));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1);
  EXPECT_THAT(agents_[bad]->LogTail(), HasSubstr("does not verify"));

  // Two hosts given the same explicit shard and state folder: the second
  // stops before answering anything.
  std::vector<std::unique_ptr<ChildProcess>> hosts;
  for (int i = 0; i < 2; ++i) {
    hosts.push_back(std::make_unique<ChildProcess>());
    ASSERT_TRUE(hosts.back()
                    ->Start({bin_ + "/ldpgraph-agent", "--curator",
                             absl::StrCat("127.0.0.1:", port_), "--ca",
                             secrets_ + "/ca.pem", "--server-name", "localhost",
                             "--credentials", secrets_ + "/nodes.credentials",
                             "--dataset", dataset_, "--nodes", "0-10",
                             "--state-dir", dir_ + "/shared", "--http", "off"},
                            absl::StrCat(dir_, "/shared-", i, ".log"))
                    .ok());
    if (i == 0) {
      ASSERT_TRUE(PollUntil(
          [&] { return absl::StrContains(hosts[0]->LogTail(), "memo entries restored"); },
          absl::Seconds(30)))
          << hosts[0]->LogTail();
    }
  }
  auto second = hosts[1]->Wait(absl::Seconds(30));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(WIFEXITED(*second) && WEXITSTATUS(*second) == 1);
  EXPECT_THAT(hosts[1]->LogTail(), HasSubstr("in use by another agent host"));
  EXPECT_FALSE(hosts[0]->Exited());
}

}  // namespace
}  // namespace ldpgraph::integration
