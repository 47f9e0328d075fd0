// End to end, devices in check-in mode: a real ldpgraph-curator with TLS
// pacing check-ins, and real `ldpgraph-agent --check-in` processes of one
// node each, each with only its own credential. They visit, are paced or
// served, answer, and leave; the campaign completes with every node
// reporting once and spending its epsilon once, and the curator's status
// shows the devices seen, served and paced.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/test_util.h"

namespace ldpgraph::integration {
namespace {

using nlohmann::json;

constexpr absl::Duration kLong = absl::Seconds(120);
constexpr int kDevices = 16;

// proto3 JSON writes 64-bit integers as strings.
uint64_t U64(const json& j, const char* key) {
  if (!j.contains(key)) return 0;
  return j[key].is_string() ? std::stoull(j[key].get<std::string>())
                            : j[key].get<uint64_t>();
}

class CheckInTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bin_ = LDPGRAPH_BINARY_DIR;
    dir_ = NewTempDir("check-in");
    dataset_ = dir_ + "/dataset";
    secrets_ = dir_ + "/secrets";
    ASSERT_EQ(Run({bin_ + "/ldpgraph", "generate", "--nodes",
                   absl::StrCat(kDevices), "--classes", "2", "--avg-degree", "2",
                   "--out", dataset_}).exit_code, 0);
    ASSERT_EQ(Run({bin_ + "/ldpctl", "secrets", "--out", secrets_, "--dataset",
                   dataset_, "--tls-names", "localhost"}).exit_code, 0);
  }
  void TearDown() override {
    for (auto& a : devices_) a->Kill();
    if (curator_) curator_->Kill();
    RemoveTempDir(dir_);
  }
  CommandResult Run(const std::vector<std::string>& argv) {
    auto r = RunCommand(argv, dir_, kLong);
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) {
      EXPECT_EQ(r->exit_code, 0) << r->err;
    }
    return r.ok() ? *r : CommandResult{};
  }
  json Ldpctl(std::vector<std::string> args) {
    args.insert(args.begin(), bin_ + "/ldpctl");
    for (const std::string& a :
         {std::string("--curator"), absl::StrCat("127.0.0.1:", port_),
          std::string("--ca"), secrets_ + "/ca.pem", std::string("--server-name"),
          std::string("localhost"), std::string("--admin-token"),
          secrets_ + "/admin.token", std::string("--format"), std::string("json")}) {
      args.push_back(a);
    }
    CommandResult r = Run(args);
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out << r.err;
    return j;
  }

  std::string bin_, dir_, dataset_, secrets_;
  int port_ = 0;
  std::unique_ptr<ChildProcess> curator_;
  std::vector<std::unique_ptr<ChildProcess>> devices_;
};

TEST_F(CheckInTest, PacedDevicesVisitAnswerOnceAndLeave) {
  auto port = FreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  port_ = *port;
  curator_ = std::make_unique<ChildProcess>();
  // 4 check-ins a second: most of the 16 devices starting at once are
  // paced, and come back at their slots.
  ASSERT_TRUE(curator_
                  ->Start({bin_ + "/ldpgraph-curator", "--listen",
                           absl::StrCat("127.0.0.1:", port_), "--http", "off",
                           "--data-dir", dir_ + "/curator", "--graph", dataset_,
                           "--admin-token", secrets_ + "/admin.token",
                           "--node-key", secrets_ + "/node.key", "--tls-cert",
                           secrets_ + "/curator.pem", "--tls-key",
                           secrets_ + "/curator.key", "--check-in-rate", "4",
                           "--check-in-interval", "0.5", "--ready-file",
                           dir_ + "/curator.ready"},
                          dir_ + "/curator.log")
                  .ok());
  ASSERT_TRUE(PollUntil(
      [&] { return std::filesystem::exists(dir_ + "/curator.ready"); }, kLong))
      << curator_->LogTail();
  json campaign = Ldpctl({"campaign", "create", "--attribute", "label",
                          "--mechanism", "label-rr", "--epsilon", "1",
                          "--dimension", "2"});
  const std::string id = campaign.value("id", "");
  ASSERT_FALSE(id.empty()) << campaign.dump();

  for (int v = 0; v < kDevices; ++v) {
    const std::string creds = absl::StrCat(dir_, "/device-", v, ".credentials");
    Run({bin_ + "/ldpctl", "credentials", "--node-key", secrets_ + "/node.key",
         "--nodes", absl::StrCat(v, "-", v + 1), "--out", creds});
    auto d = std::make_unique<ChildProcess>();
    ASSERT_TRUE(d->Start({bin_ + "/ldpgraph-agent", "--check-in",
                          "--exit-when-idle", "--check-in-interval", "0.5",
                          "--curator", absl::StrCat("127.0.0.1:", port_), "--ca",
                          secrets_ + "/ca.pem", "--server-name", "localhost",
                          "--credentials", creds, "--dataset", dataset_,
                          "--nodes", absl::StrCat(v, "-", v + 1), "--state-dir",
                          absl::StrCat(dir_, "/device-", v), "--http", "off",
                          "--seed", absl::StrCat(v + 1)},
                         absl::StrCat(dir_, "/device-", v, ".log"))
                    .ok());
    devices_.push_back(std::move(d));
  }
  for (auto& d : devices_) {
    auto code = d->Wait(kLong);
    ASSERT_TRUE(code.ok()) << code.status() << d->LogTail();
    EXPECT_EQ(*code, 0) << d->LogTail();
    EXPECT_THAT(d->LogTail(), ::testing::HasSubstr("1 reports acknowledged (0 duplicates)"));
  }
  json shown = Ldpctl({"campaign", "show", id});
  EXPECT_EQ(shown.value("state", ""), "CAMPAIGN_STATE_CLOSED") << shown.dump();
  EXPECT_EQ(U64(shown["progress"], "reported"), uint64_t{kDevices}) << shown.dump();
  // Each node spent its epsilon once: no extra epsilon for the visits.
  json budgets = Ldpctl({"budget", "show", "--per-node"});
  ASSERT_TRUE(budgets.contains("budgets")) << budgets.dump();
  ASSERT_EQ(budgets["budgets"].size(), size_t{kDevices}) << budgets.dump();
  for (const json& n : budgets["budgets"]) {
    EXPECT_DOUBLE_EQ(n.value("total_spent", 0.0), 1.0) << n.dump();
  }
  json status = Ldpctl({"status"});
  EXPECT_EQ(U64(status, "devices_seen"), uint64_t{kDevices}) << status.dump();
  EXPECT_EQ(U64(status, "check_ins_served"), uint64_t{kDevices});
  EXPECT_GT(U64(status, "check_ins_paced"), 0u);
  EXPECT_EQ(U64(status, "check_ins_idle"), uint64_t{kDevices});
}

}  // namespace
}  // namespace ldpgraph::integration
