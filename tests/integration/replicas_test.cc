// Curator roles on a shared PostgreSQL store (server/curator/roles.h),
// through the real binaries and a real PostgreSQL server: one operator at a
// time (a standby takes over when the active one is killed, with the
// campaigns it created), a frontend that answers GetStatus and nothing else
// of the admin API, and roles refused without a shared store.
#include <sys/stat.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/store/local_postgres.h"
#include "tests/integration/admin_client.h"
#include "tests/integration/test_util.h"

namespace ldpgraph::integration {
namespace {

using ::testing::HasSubstr;

class ReplicasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewTempDir("replicas");
    // PostgreSQL runs as another user when the test runs as root.
    ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
    store::LocalPostgres::Options o;
    o.dir = dir_ + "/pg";
    o.fsync = false;
    auto pg = store::LocalPostgres::Start(o);
    ASSERT_TRUE(pg.ok()) << pg.status();
    pg_ = std::move(*pg);
    auto certs = MakeDevCerts(dir_ + "/certs");
    ASSERT_TRUE(certs.ok()) << certs.status();
    certs_ = *certs;
  }
  void TearDown() override {
    for (ChildProcess* p : {&a_, &b_, &frontend_}) p->Kill();
    pg_.reset();
    RemoveTempDir(dir_);
  }

  std::vector<std::string> Curator(const std::string& name,
                                   const std::string& role) {
    const std::string c = dir_ + "/certs/";
    return {std::string(LDPGRAPH_BINARY_DIR) + "/ldpgraph-curator",
            "--role", role, "--store", pg_->url(), "--store-password-file",
            pg_->password_file(), "--nodes", "100", "--data-dir",
            dir_ + "/" + name, "--admin-token", c + "admin.token",
            "--node-key", c + "node.key", "--tls-cert", c + "curator.pem",
            "--tls-key", c + "curator.key", "--listen", "127.0.0.1:0",
            "--http", "off", "--ready-file", Ready(name)};
  }
  std::string Ready(const std::string& name) const {
    return dir_ + "/" + name + ".ready";
  }
  // The gRPC port of a started curator, once its ready file is there.
  int WaitReady(const std::string& name, ChildProcess& p,
                absl::Duration timeout) {
    int port = 0;
    PollUntil(
        [&] {
          auto text = ReadFile(Ready(name));
          if (!text.ok()) return false;
          auto j = nlohmann::json::parse(*text, nullptr, false);
          if (j.is_discarded() || !j.contains("grpc_port")) return false;
          port = j["grpc_port"].get<int>();
          return true;
        },
        timeout);
    EXPECT_GT(port, 0) << name << " not ready: " << p.LogTail();
    return port;
  }
  Admin AdminAt(int port) {
    return Admin(TlsChannel(port, certs_.ca_pem), certs_.admin_hex);
  }

  static v1::CreateCampaignRequest Features() {
    v1::CreateCampaignRequest r;
    r.set_name("features");
    r.set_attribute(v1::ATTRIBUTE_FEATURES);
    v1::MechanismSpec* s = r.mutable_spec();
    s->set_kind(v1::MECHANISM_KIND_HDS);
    s->set_epsilon(1);
    s->set_dimension(8);
    s->set_sampled(1);
    s->set_range_low(-1);
    s->set_range_high(1);
    r.mutable_nodes()->set_all(true);
    r.set_quorum(1);
    return r;
  }

  std::string dir_;
  std::unique_ptr<store::LocalPostgres> pg_;
  DevCerts certs_;
  ChildProcess a_, b_, frontend_;
};

TEST_F(ReplicasTest, StandbyOperatorTakesOverWithTheCampaigns) {
  ASSERT_TRUE(a_.Start(Curator("a", "operator"), dir_ + "/a.log").ok());
  const int port_a = WaitReady("a", a_, absl::Seconds(30));
  ASSERT_GT(port_a, 0);
  Admin admin_a = AdminAt(port_a);
  v1::Campaign created;
  grpc::Status g = admin_a.Create(Features(), &created);
  ASSERT_TRUE(g.ok()) << g.error_message();

  // A second operator waits: it does not serve while the first holds the
  // lease.
  ASSERT_TRUE(b_.Start(Curator("b", "operator"), dir_ + "/b.log").ok());
  EXPECT_TRUE(PollUntil(
      [&] { return absl::StrContains(b_.LogTail(), "standby"); },
      absl::Seconds(20)))
      << b_.LogTail();
  absl::SleepFor(absl::Seconds(1));
  EXPECT_FALSE(ReadFile(Ready("b")).ok()) << "the standby serves too";

  // The active one crashes: the standby serves within seconds, with the
  // campaign the first created.
  const absl::Time killed = absl::Now();
  a_.Kill();
  const int port_b = WaitReady("b", b_, absl::Seconds(30));
  ASSERT_GT(port_b, 0);
  const double takeover_s = absl::ToDoubleSeconds(absl::Now() - killed);
  std::cerr << "standby took over " << takeover_s << " s after the kill\n";
  EXPECT_LT(takeover_s, 15);
  EXPECT_THAT(b_.LogTail(), HasSubstr("took the operator lease"));
  auto got = AdminAt(port_b).Get(created.id());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->state(), v1::CAMPAIGN_STATE_OPEN);
  auto closed = AdminAt(port_b).Close(created.id());
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_EQ(closed->state(), v1::CAMPAIGN_STATE_CLOSED);
}

TEST_F(ReplicasTest, AFrontendAnswersStatusOnlyAndSeesTheOperatorsCampaigns) {
  ASSERT_TRUE(a_.Start(Curator("a", "operator"), dir_ + "/a.log").ok());
  ASSERT_TRUE(
      frontend_.Start(Curator("f", "frontend"), dir_ + "/f.log").ok());
  const int port_a = WaitReady("a", a_, absl::Seconds(30));
  const int port_f = WaitReady("f", frontend_, absl::Seconds(30));
  ASSERT_GT(port_a, 0);
  ASSERT_GT(port_f, 0);
  Admin operator_admin = AdminAt(port_a);
  Admin frontend_admin = AdminAt(port_f);
  auto status = frontend_admin.Status();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->open_campaigns(), 0u);
  // The operator counts the frontend, which publishes its status.
  EXPECT_TRUE(PollUntil(
      [&] {
        auto s = operator_admin.Status();
        return s.ok() && s->frontends() == 1;
      },
      absl::Seconds(10)));
  v1::Campaign created;
  grpc::Status g = frontend_admin.Create(Features(), &created);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(g.error_message(), HasSubstr("--role operator"));
  ASSERT_TRUE(operator_admin.Create(Features(), &created).ok());
  // The frontend learns of it from the store within its sync interval.
  const absl::Time t = absl::Now();
  EXPECT_TRUE(PollUntil(
      [&] {
        auto s = frontend_admin.Status();
        return s.ok() && s->open_campaigns() == 1;
      },
      absl::Seconds(10), absl::Milliseconds(10)));
  std::cerr << "the frontend saw the new campaign after "
            << absl::ToDoubleSeconds(absl::Now() - t) << " s\n";
  EXPECT_LT(absl::Now() - t, absl::Seconds(2));
  ASSERT_TRUE(operator_admin.Close(created.id()).ok());
  EXPECT_TRUE(PollUntil(
      [&] {
        auto s = frontend_admin.Status();
        return s.ok() && s->open_campaigns() == 0;
      },
      absl::Seconds(10), absl::Milliseconds(10)));
}

// Every process rides out a restart of the database (a fast shutdown, then
// a crash): the active operator stays active and serves within seconds of
// the database's return, the standby and the frontend stay up, and when
// the active one is killed afterwards the standby takes over with every
// campaign, their ids without a gap.
TEST_F(ReplicasTest, EveryProcessSurvivesADatabaseRestart) {
  ASSERT_TRUE(a_.Start(Curator("a", "operator"), dir_ + "/a.log").ok());
  const int port_a = WaitReady("a", a_, absl::Seconds(30));
  ASSERT_GT(port_a, 0);
  ASSERT_TRUE(b_.Start(Curator("b", "operator"), dir_ + "/b.log").ok());
  ASSERT_TRUE(
      frontend_.Start(Curator("f", "frontend"), dir_ + "/f.log").ok());
  ASSERT_GT(WaitReady("f", frontend_, absl::Seconds(30)), 0);
  EXPECT_TRUE(PollUntil(
      [&] { return absl::StrContains(b_.LogTail(), "standby"); },
      absl::Seconds(20)))
      << b_.LogTail();
  Admin admin_a = AdminAt(port_a);
  std::vector<std::string> ids;
  v1::Campaign created;
  ASSERT_TRUE(admin_a.Create(Features(), &created).ok());
  ids.push_back(created.id());

  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE((round == 0 ? pg_->Stop() : pg_->Kill()).ok());
    absl::SleepFor(absl::Seconds(1));
    ASSERT_TRUE(pg_->Restart().ok());
    const absl::Time back = absl::Now();
    // The active operator writes again (a campaign: the lease and the
    // store both), within seconds.
    ASSERT_TRUE(PollUntil(
        [&] { return admin_a.Create(Features(), &created).ok(); },
        absl::Seconds(20), absl::Milliseconds(50)))
        << "round " << round << ":\n" << a_.LogTail();
    const double serving_s = absl::ToDoubleSeconds(absl::Now() - back);
    std::cerr << "round " << round << ": the operator created a campaign "
              << serving_s << " s after the database came back\n";
    EXPECT_LT(serving_s, 10);
    ids.push_back(created.id());
    // Two seconds later, nobody has exited and the standby still waits.
    absl::SleepFor(absl::Seconds(2));
    for (ChildProcess* p : {&a_, &b_, &frontend_}) {
      EXPECT_FALSE(p->Exited())
          << "round " << round << ": " << p->LogTail();
    }
    EXPECT_FALSE(ReadFile(Ready("b")).ok()) << "the standby serves too";
  }
  EXPECT_THAT(ids, ::testing::ElementsAre("c1", "c2", "c3"));

  const absl::Time killed = absl::Now();
  a_.Kill();
  const int port_b = WaitReady("b", b_, absl::Seconds(30));
  ASSERT_GT(port_b, 0) << b_.LogTail();
  std::cerr << "standby took over " << absl::ToDoubleSeconds(absl::Now() - killed)
            << " s after the kill\n";
  for (const std::string& id : ids) {
    auto got = AdminAt(port_b).Get(id);
    EXPECT_TRUE(got.ok()) << id << ": " << got.status();
  }
  ASSERT_TRUE(AdminAt(port_b).Create(Features(), &created).ok());
  EXPECT_EQ(created.id(), "c4");
}

TEST_F(ReplicasTest, RolesNeedASharedStore) {
  const std::string c = dir_ + "/certs/";
  auto r = RunCommand(
      {std::string(LDPGRAPH_BINARY_DIR) + "/ldpgraph-curator", "--role",
       "frontend", "--nodes", "10", "--data-dir", dir_ + "/x", "--admin-token",
       c + "admin.token", "--node-key", c + "node.key", "--insecure",
       "--listen", "127.0.0.1:0", "--http", "off"},
      dir_, absl::Seconds(30));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->exit_code, 0);
  EXPECT_THAT(r->err, HasSubstr("needs a store shared with the other roles"));
  r = RunCommand({std::string(LDPGRAPH_BINARY_DIR) + "/ldpgraph-curator",
                  "--role", "boss", "--nodes", "10", "--data-dir",
                  dir_ + "/x", "--admin-token", c + "admin.token",
                  "--node-key", c + "node.key", "--insecure"},
                 dir_, absl::Seconds(30));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 2);
  EXPECT_THAT(r->err, HasSubstr("--role must be all, frontend or operator"));
  r = RunCommand({std::string(LDPGRAPH_BINARY_DIR) + "/ldpgraph-curator",
                  "--store", "postgres://me:secret@127.0.0.1:1/x", "--nodes",
                  "10", "--data-dir", dir_ + "/x", "--admin-token",
                  c + "admin.token", "--node-key", c + "node.key",
                  "--insecure"},
                 dir_, absl::Seconds(30));
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->exit_code, 0);
  EXPECT_THAT(r->err, HasSubstr("--store-password-file"));
}

}  // namespace
}  // namespace ldpgraph::integration
