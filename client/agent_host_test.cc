// Tests for what an agent host holds per node without a curator: its
// credentials (NodeSecret, inline) and the credential it enrols each node
// with (FillCredential); AgentHost::Create's checks of them.
#include "client/agent_host.h"

#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/net/free_port.h"
#include "common/testing/temp_folder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::agent {
namespace {

using ::testing::HasSubstr;

std::string Secret(char c) { return std::string(NodeSecret::kBytes, c); }

std::unique_ptr<AgentShard> Shard(const std::string& dir,
                                  std::vector<uint32_t> nodes) {
  std::vector<NodeRecord> records;
  for (uint32_t v : nodes) {
    NodeRecord r;
    r.node = v;
    r.features = NodeFeatures::FromDense({0.5, 0.0});
    records.push_back(std::move(r));
  }
  AgentPolicy policy;
  policy.caps.total = 4;
  policy.caps.per_attribute["label"] = 1;
  auto shard = AgentShard::Create(std::move(records), policy, 1, dir);
  EXPECT_TRUE(shard.ok()) << shard.status();
  return shard.ok() ? std::move(*shard) : nullptr;
}

TEST(NodeSecretTest, KeepsThirtyTwoBytesInline) {
  const NodeSecret s(7, Secret('a'));
  EXPECT_EQ(s.node(), 7u);
  EXPECT_TRUE(s.valid());
  EXPECT_EQ(s.secret(), Secret('a'));
  // Not 32 bytes: kept as invalid, whatever its size.
  for (const std::string& bad :
       {std::string(), std::string(31, 'a'), std::string(33, 'a'),
        std::string(300, 'a')}) {
    const NodeSecret b(7, bad);
    EXPECT_FALSE(b.valid()) << bad.size();
    EXPECT_TRUE(b.secret().empty());
  }
  EXPECT_LE(sizeof(NodeSecret), 40u);  // no heap, a few bytes of its own
  EXPECT_TRUE(CheckSecrets({s, NodeSecret(8, Secret('b'))}).ok());
  EXPECT_THAT(CheckSecrets({s, NodeSecret(9, "short")}).message(),
              HasSubstr("the credential of node 9 is not 32 bytes"));
}

TEST(FillCredentialTest, SendsTheSecretCapsAndThePublicKeyOnly) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  auto shard = Shard(tmp.path(), {3, 4});
  ASSERT_NE(shard, nullptr);
  AgentHostOptions options;
  options.caps.total = 4;
  options.caps.per_attribute["label"] = 1;
  v1::NodeCredential c;
  FillCredential(options, *shard, NodeSecret(4, Secret('z')), &c);
  EXPECT_EQ(c.node_id(), 4u);
  EXPECT_EQ(c.secret(), Secret('z'));
  EXPECT_EQ(c.caps().total(), 4.0);
  EXPECT_EQ(c.caps().per_attribute().at("label"), 1.0);
  EXPECT_EQ(c.sealing_key(), shard->key_pair(4)->public_key());
  EXPECT_NE(c.sealing_key(), shard->key_pair(4)->private_key());
}

TEST(AgentHostTest, CreateWantsAValidCredentialForEachNode) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  AgentHostOptions options;
  options.curator = "127.0.0.1:1";
  options.insecure = true;
  options.credentials = {NodeSecret(3, Secret('a')), NodeSecret(4, "short")};
  auto bad = AgentHost::Create(options, Shard(tmp.path() + "/a", {3, 4}));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("node 4 is not 32 bytes"));

  options.credentials = {NodeSecret(3, Secret('a'))};
  auto missing = AgentHost::Create(options, Shard(tmp.path() + "/b", {3, 4}));
  EXPECT_THAT(missing.status().message(), HasSubstr("no credential for node 4"));

  options.credentials = {NodeSecret(4, Secret('b')), NodeSecret(3, Secret('a'))};
  options.answer_part = 0;
  auto no_part = AgentHost::Create(options, Shard(tmp.path() + "/c", {3, 4}));
  EXPECT_THAT(no_part.status().message(), HasSubstr("answer_part must be >= 1"));

  options.answer_part = 1;
  auto host = AgentHost::Create(options, Shard(tmp.path() + "/d", {3, 4}));
  EXPECT_TRUE(host.ok()) << host.status();
}

// A host whose curator is gone waits in Enrol (wait-for-ready, 30 s): Stop
// cancels the call, so a host stops at once on SIGTERM rather than being
// killed by its supervisor (podman and Kubernetes wait 10 to 30 s).
TEST(AgentHostTest, StopCancelsACallWaitingForAGoneCurator) {
  TempFolder tmp(TempFolder::kLeaveMissing);
  AgentHostOptions options;
  auto port = net::FreeLoopbackPort();  // nothing listens on it
  ASSERT_TRUE(port.ok()) << port.status();
  options.curator = absl::StrCat("127.0.0.1:", *port);
  options.insecure = true;
  options.credentials = {NodeSecret(3, Secret('a'))};
  auto host = AgentHost::Create(options, Shard(tmp.path() + "/s", {3}));
  ASSERT_TRUE(host.ok()) << host.status();
  absl::Status result = absl::UnknownError("still running");
  absl::Notification done;
  std::thread run([&] {
    result = (*host)->Run();
    done.Notify();
  });
  absl::SleepFor(absl::Seconds(1));  // in Enrol by now
  EXPECT_FALSE(done.HasBeenNotified());
  const absl::Time stop = absl::Now();
  (*host)->Stop();
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  run.join();
  const absl::Duration took = absl::Now() - stop;
  std::cerr << "stopped in " << absl::FormatDuration(took) << "\n";
  EXPECT_LT(took, absl::Seconds(5));  // Enrol's deadline is 30 s
  EXPECT_TRUE(result.ok()) << result;
}

}  // namespace
}  // namespace ldpgraph::agent
