// The curator's agent service at the wire: requests that are not valid
// messages, thousands of idle streams on a server with a handful of
// threads, and sessions replaced by a host that enrols again. An in-process
// curator (plaintext on loopback: the transport is not what is tested) and
// raw or asynchronous gRPC clients, so that one test thread can hold many
// streams.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "ldpgraph/v1/agent.grpc.pb.h"
#include "server/curator/credentials.h"
#include "server/curator/server.h"
#include "tests/integration/admin_client.h"
#include "tests/integration/test_util.h"

namespace ldpgraph::integration {
namespace {

constexpr uint32_t kNodes = 2000;
const std::string kNodeKey(32, 'k');
const std::string kAdminToken = "0123456789abcdef0123456789abcdef";

class AgentServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = NewTempDir("agent-service");
    curator::ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.data_dir = root_ + "/curator";
    o.nodes = kNodes;
    o.node_key = kNodeKey;
    o.admin_token = kAdminToken;
    o.insecure = true;
    o.synchronous_full = false;
    // Fewer threads than the streams below: only the admin calls use them.
    o.max_threads = 8;
    auto server = curator::CuratorServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    target_ = absl::StrCat("127.0.0.1:", server_->port());
    channel_ = grpc::CreateChannel(target_, grpc::InsecureChannelCredentials());
    admin_ = std::make_unique<Admin>(channel_, kAdminToken);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(absl::Seconds(1));
    if (!root_.empty() && !HasFailure()) RemoveTempDir(root_);
  }

  static v1::EnrolRequest EnrolFor(std::vector<uint32_t> nodes) {
    v1::EnrolRequest req;
    req.set_host_name("test-host");
    for (uint32_t v : nodes) {
      v1::NodeCredential* c = req.add_nodes();
      c->set_node_id(v);
      c->set_secret(curator::NodeCredential(kNodeKey, v));
    }
    return req;
  }

  std::string Enrol(v1::AgentService::Stub& stub, std::vector<uint32_t> nodes) {
    grpc::ClientContext ctx;
    v1::EnrolResponse resp;
    grpc::Status s = stub.Enrol(&ctx, EnrolFor(std::move(nodes)), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.session_token();
  }

  // Sends raw bytes as a unary call's request.
  grpc::Status RawUnary(const std::string& method, const std::string& bytes) {
    grpc::GenericStub generic(channel_);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1), response;
    grpc::Status status;
    absl::Notification done;
    generic.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                      [&](grpc::Status s) {
                        status = std::move(s);
                        done.Notify();
                      });
    done.WaitForNotification();
    return status;
  }

  std::string root_, target_;
  std::unique_ptr<curator::CuratorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Admin> admin_;
};

// Not a protobuf message: field 1 with wire type 7, which does not exist.
const std::string kGarbage = "\x0f\xff\xff\xff";

TEST_F(AgentServiceTest, AnUnparsableUnaryRequestIsInvalidArgument) {
  grpc::Status s = RawUnary("/ldpgraph.v1.AgentService/Enrol", kGarbage);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("ldpgraph.v1.EnrolRequest"),
            std::string::npos)
      << s.error_message();
  s = RawUnary("/ldpgraph.v1.AgentService/ClaimShard", kGarbage);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("ClaimShardRequest"), std::string::npos);
}

TEST_F(AgentServiceTest, AnUnparsableReportBatchEndsTheStreamWithInvalidArgument) {
  auto stub = v1::AgentService::NewStub(channel_);
  const std::string token = Enrol(*stub, {1, 2});
  grpc::GenericStub generic(channel_);
  grpc::ClientContext ctx;
  ctx.AddMetadata("ldpgraph-session", token);
  grpc::CompletionQueue cq;
  auto call = generic.PrepareCall(&ctx, "/ldpgraph.v1.AgentService/Report", &cq);
  void* tag = nullptr;
  bool ok = false;
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  grpc::Slice slice(kGarbage);
  grpc::ByteBuffer batch(&slice, 1), ack;
  call->Write(batch, reinterpret_cast<void*>(2));
  ASSERT_TRUE(cq.Next(&tag, &ok));
  call->Read(&ack, reinterpret_cast<void*>(3));
  ASSERT_TRUE(cq.Next(&tag, &ok));
  EXPECT_FALSE(ok) << "the curator acknowledged an unparsable batch";
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(4));
  ASSERT_TRUE(cq.Next(&tag, &ok));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("not a valid ldpgraph.v1.ReportBatch"),
            std::string::npos)
      << status.error_message();
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  // Nothing was stored or counted as accepted.
  auto st = admin_->Status();
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->reports_accepted(), 0u);
}

TEST_F(AgentServiceTest, EnrollingAgainReplacesTheSession) {
  auto stub = v1::AgentService::NewStub(channel_);
  std::string first = Enrol(*stub, {5, 6, 7});
  std::string last;
  for (int i = 0; i < 50; ++i) last = Enrol(*stub, {5, 6, 7});
  Enrol(*stub, {8});
  auto st = admin_->Status();
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->sessions(), 2u);
  EXPECT_EQ(st->enrolled_nodes(), 4u);
  // The replaced token no longer opens a stream; the last one does.
  for (const auto& [token, code] :
       {std::pair{first, grpc::StatusCode::UNAUTHENTICATED},
        std::pair{last, grpc::StatusCode::OK}}) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("ldpgraph-session", token);
    v1::PublicKeysRequest req;
    req.add_node_ids(5);
    v1::PublicKeysResponse resp;
    EXPECT_EQ(stub->PublicKeys(&ctx, req, &resp).error_code(), code);
  }
}

// 1,000 task streams, each its own session, on a server with 8 threads: an
// idle stream holds no thread. The admin API answers meanwhile, and a new
// campaign reaches every stream.
TEST_F(AgentServiceTest, ThousandsOfIdleStreamsHoldNoThread) {
  constexpr int kStreams = 1000;
  constexpr int kChannels = 4;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<v1::AgentService::Stub>> stubs;
  for (int i = 0; i < kChannels; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("ldpgraph.test.channel", i);  // one connection each
    channels.push_back(grpc::CreateCustomChannel(
        target_, grpc::InsecureChannelCredentials(), args));
    stubs.push_back(v1::AgentService::NewStub(channels.back()));
  }
  struct Stream {
    grpc::ClientContext ctx;
    v1::Task task;
    std::unique_ptr<grpc::ClientAsyncReader<v1::Task>> reader;
  };
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<Stream>> streams(kStreams);
  for (int i = 0; i < kStreams; ++i) {
    auto& stub = *stubs[i % kChannels];
    const std::string token = Enrol(stub, {static_cast<uint32_t>(i)});
    streams[i] = std::make_unique<Stream>();
    streams[i]->ctx.AddMetadata("ldpgraph-session", token);
    streams[i]->reader = stub.PrepareAsyncSubscribe(
        &streams[i]->ctx, v1::SubscribeRequest(), &cq);
    streams[i]->reader->StartCall(reinterpret_cast<void*>(intptr_t{i}));
  }
  void* tag = nullptr;
  bool ok = false;
  for (int i = 0; i < kStreams; ++i) ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  v1::CuratorStatus status;
  ASSERT_TRUE(PollUntil(
      [&] {
        auto st = admin_->Status();
        if (!st.ok()) return false;
        status = *st;
        return st->task_streams() == kStreams;
      },
      absl::Seconds(60), absl::Milliseconds(20)))
      << status.ShortDebugString();
  EXPECT_EQ(status.sessions(), static_cast<uint32_t>(kStreams));

  for (int i = 0; i < kStreams; ++i) {
    streams[i]->reader->Read(&streams[i]->task,
                             reinterpret_cast<void*>(intptr_t{i}));
  }
  v1::CreateCampaignRequest req;
  req.set_name("streams");
  req.set_attribute(v1::ATTRIBUTE_FEATURES);
  v1::MechanismSpec* s = req.mutable_spec();
  s->set_kind(v1::MECHANISM_KIND_HDS);
  s->set_epsilon(1);
  s->set_dimension(16);
  s->set_sampled(1);
  s->set_range_low(-1);
  s->set_range_high(1);
  req.mutable_nodes()->set_all(true);
  v1::Campaign campaign;
  grpc::Status created = admin_->Create(req, &campaign);
  ASSERT_TRUE(created.ok()) << created.error_message();
  std::vector<bool> got(kStreams, false);
  for (int n = 0; n < kStreams; ++n) {
    ASSERT_TRUE(cq.Next(&tag, &ok));
    ASSERT_TRUE(ok) << "stream " << reinterpret_cast<intptr_t>(tag)
                    << " ended without its task";
    const int i = static_cast<int>(reinterpret_cast<intptr_t>(tag));
    EXPECT_EQ(streams[i]->task.campaign_id(), campaign.id());
    ASSERT_EQ(streams[i]->task.node_ids_size(), 1);
    EXPECT_EQ(streams[i]->task.node_ids(0), static_cast<uint32_t>(i));
    got[i] = true;
  }
  EXPECT_EQ(std::count(got.begin(), got.end(), true), kStreams);
  for (auto& st : streams) st->ctx.TryCancel();
  // Finish writes its status when the queue delivers it: keep them alive.
  std::vector<grpc::Status> finished(kStreams);
  for (int i = 0; i < kStreams; ++i) {
    streams[i]->reader->Finish(&finished[i], nullptr);
  }
  for (int i = 0; i < kStreams; ++i) cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

}  // namespace
}  // namespace ldpgraph::integration
