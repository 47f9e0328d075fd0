// The curator's gRPC services at the wire: raw bytes through a generic stub
// to an in-process curator (plaintext on loopback: the transport is not what
// is tested). The admin service authenticates before it parses, refuses a
// malformed request with INVALID_ARGUMENT naming the method and the message
// type, and no caller can make the curator's log grow without bound.
#include "server/curator/services.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/testing/temp_folder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "ldpgraph/v1/agent.grpc.pb.h"
#include "server/curator/log_limiter.h"
#include "server/curator/server.h"

namespace ldpgraph::curator {
namespace {

using ::testing::HasSubstr;

const std::string kAdminToken = "0123456789abcdef0123456789abcdef";

// Field 1, length-delimited, says 5 bytes and has 2: not a message of any
// type (an unknown field 1 is skipped by its length, which overruns too).
const std::string kTruncated("\x0a\x05" "ab", 4);
// Field 1 (a proto3 string in GetCampaignRequest, CreateCampaignRequest,
// ExportEmbeddingsRequest) of two bytes that are not UTF-8.
const std::string kInvalidUtf8("\x0a\x02\xc3\x28", 4);
// The line protobuf's parser writes for each such string.
constexpr absl::string_view kProtobufUtf8Line = "invalid UTF-8";

TEST(LogLimiterTest, LetsOneLinePerIntervalThroughAndCountsTheRest) {
  LogLimiter limiter(absl::Seconds(60));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_EQ(limiter.Admit(t0), 0u);
  EXPECT_EQ(limiter.Admit(t0), std::nullopt);
  EXPECT_EQ(limiter.Admit(t0 + absl::Seconds(59)), std::nullopt);
  // The next line through says how many were held back.
  EXPECT_EQ(limiter.Admit(t0 + absl::Seconds(60)), 2u);
  EXPECT_EQ(limiter.Admit(t0 + absl::Seconds(61)), std::nullopt);
  EXPECT_EQ(limiter.Admit(t0 + absl::Seconds(600)), 1u);
  EXPECT_EQ(limiter.Admit(t0 + absl::Seconds(700)), 0u);
}

int CountLines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

class ServicesWireTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.listen = "127.0.0.1:0";
    o.data_dir = folder_.path() + "/curator";
    o.nodes = 100;
    o.node_key = std::string(32, 'k');
    o.admin_token = kAdminToken;
    o.insecure = true;
    o.synchronous_full = false;
    o.max_threads = 4;
    auto server = CuratorServer::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                   grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    if (server_) server_->Shutdown(absl::Seconds(1));
  }

  struct Reply {
    grpc::Status status;
    std::vector<std::string> messages;  // raw response messages
  };

  // Sends `bytes` as the one request message of `method` (unary or server
  // streaming), with `Bearer token` unless token is empty, and reads the
  // call to its end.
  Reply RawCall(const std::string& method, const std::string& bytes,
                const std::string& token) {
    grpc::GenericStub generic(channel_);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    grpc::CompletionQueue cq;
    void* tag = nullptr;
    bool ok = false;
    Reply reply;
    auto call = generic.PrepareCall(&ctx, method, &cq);
    call->StartCall(reinterpret_cast<void*>(1));
    EXPECT_TRUE(cq.Next(&tag, &ok));
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1);
    call->WriteLast(request, grpc::WriteOptions(), reinterpret_cast<void*>(2));
    EXPECT_TRUE(cq.Next(&tag, &ok));
    for (;;) {
      grpc::ByteBuffer response;
      call->Read(&response, reinterpret_cast<void*>(3));
      EXPECT_TRUE(cq.Next(&tag, &ok));
      if (!ok) break;
      std::vector<grpc::Slice> slices;
      EXPECT_TRUE(response.Dump(&slices).ok());
      std::string message;
      for (const grpc::Slice& s : slices) {
        message.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
      reply.messages.push_back(std::move(message));
    }
    call->Finish(&reply.status, reinterpret_cast<void*>(4));
    EXPECT_TRUE(cq.Next(&tag, &ok));
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
    return reply;
  }

  // Every method of the admin service, from its descriptor: a method added
  // later is tested too.
  static std::vector<const google::protobuf::MethodDescriptor*> AdminMethods() {
    const google::protobuf::ServiceDescriptor* service =
        v1::GetStatusRequest::descriptor()->file()->FindServiceByName(
            "AdminService");
    std::vector<const google::protobuf::MethodDescriptor*> out;
    for (int i = 0; service != nullptr && i < service->method_count(); ++i) {
      out.push_back(service->method(i));
    }
    return out;
  }
  static std::string Path(const google::protobuf::MethodDescriptor* m) {
    return absl::StrCat("/", m->service()->full_name(), "/", m->name());
  }

  TempFolder folder_;
  std::unique_ptr<CuratorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(ServicesWireTest, AMalformedAdminRequestWithoutTheTokenIsUnauthenticated) {
  const auto methods = AdminMethods();
  ASSERT_GE(methods.size(), 15u);
  for (const auto* m : methods) {
    for (const std::string& token : {std::string(), std::string("wrong")}) {
      for (const std::string& bytes : {kTruncated, kInvalidUtf8}) {
        Reply r = RawCall(Path(m), bytes, token);
        EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
            << Path(m) << " token '" << token << "': "
            << r.status.error_message();
        EXPECT_THAT(r.status.error_message(), HasSubstr("admin credential"));
        EXPECT_TRUE(r.messages.empty());
      }
    }
  }
}

TEST_F(ServicesWireTest, AMalformedAdminRequestWithTheTokenNamesMethodAndType) {
  for (const auto* m : AdminMethods()) {
    Reply r = RawCall(Path(m), kTruncated, kAdminToken);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << Path(m) << ": " << r.status.error_message();
    EXPECT_THAT(r.status.error_message(), HasSubstr(m->name()));
    EXPECT_THAT(r.status.error_message(),
                HasSubstr(m->input_type()->full_name()));
    EXPECT_TRUE(r.messages.empty());
  }
}

TEST_F(ServicesWireTest, InvalidUtf8InAnAdminStringFieldIsInvalidArgument) {
  for (const auto& [method, type] :
       {std::pair{"GetCampaign", "ldpgraph.v1.GetCampaignRequest"},
        std::pair{"CreateCampaign", "ldpgraph.v1.CreateCampaignRequest"},
        std::pair{"ExportEmbeddings", "ldpgraph.v1.ExportEmbeddingsRequest"}}) {
    Reply r = RawCall(absl::StrCat("/ldpgraph.v1.AdminService/", method),
                      kInvalidUtf8, kAdminToken);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << method << ": " << r.status.error_message();
    EXPECT_THAT(r.status.error_message(), HasSubstr(method));
    EXPECT_THAT(r.status.error_message(), HasSubstr(type));
  }
  // Nothing was created.
  Reply list =
      RawCall("/ldpgraph.v1.AdminService/ListCampaigns", "", kAdminToken);
  ASSERT_TRUE(list.status.ok()) << list.status.error_message();
  ASSERT_EQ(list.messages.size(), 1u);
  v1::ListCampaignsResponse campaigns;
  ASSERT_TRUE(campaigns.ParseFromString(list.messages[0]));
  EXPECT_EQ(campaigns.campaigns_size(), 0);
}

TEST_F(ServicesWireTest, UnauthenticatedRequestsWriteABoundedNumberOfLogLines) {
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 200; ++i) {
    Reply r = RawCall("/ldpgraph.v1.AdminService/GetCampaign", kInvalidUtf8,
                      i % 2 == 0 ? std::string() : std::string("wrong"));
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_LE(CountLines(log), 2) << log;
}

TEST_F(ServicesWireTest, MalformedAuthenticatedRequestsWriteABoundedNumberOfLogLines) {
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 200; ++i) {
    Reply r = RawCall("/ldpgraph.v1.AdminService/GetCampaign", kInvalidUtf8,
                      kAdminToken);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_LE(CountLines(log), 2) << log;
  // The caller is told; protobuf's parser does not also write to the log.
  EXPECT_FALSE(absl::StrContains(log, kProtobufUtf8Line)) << log;
}

// Enrol takes no credential in its metadata, so anyone can send it bytes.
TEST_F(ServicesWireTest, MalformedEnrolRequestsWriteABoundedNumberOfLogLines) {
  // host_name (field 2), a proto3 string, of two bytes that are not UTF-8.
  const std::string bad_host("\x12\x02\xc3\x28", 4);
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 200; ++i) {
    Reply r = RawCall("/ldpgraph.v1.AgentService/Enrol", bad_host, "");
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(r.status.error_message(),
                HasSubstr("ldpgraph.v1.EnrolRequest"));
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_LE(CountLines(log), 2) << log;
  EXPECT_FALSE(absl::StrContains(log, kProtobufUtf8Line)) << log;
}

TEST_F(ServicesWireTest, WellFormedAdminRequestsAreServedAsBefore) {
  // Raw bytes of a valid request, through the generic stub.
  Reply r = RawCall("/ldpgraph.v1.AdminService/GetStatus",
                    v1::GetStatusRequest().SerializeAsString(), kAdminToken);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_EQ(r.messages.size(), 1u);
  v1::CuratorStatus raw_status;
  ASSERT_TRUE(raw_status.ParseFromString(r.messages[0]));
  EXPECT_EQ(raw_status.graph_nodes(), 100u);
  EXPECT_TRUE(raw_status.insecure());

  // The typed stubs ldpctl uses.
  auto stub = v1::AdminService::NewStub(channel_);
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + kAdminToken);
    v1::CuratorStatus status;
    grpc::Status s = stub->GetStatus(&ctx, v1::GetStatusRequest(), &status);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(status.graph_nodes(), 100u);
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + kAdminToken);
    v1::GetCampaignRequest req;
    req.set_campaign_id("c-none");
    v1::Campaign out;
    grpc::Status s = stub->GetCampaign(&ctx, req, &out);
    // The core's answer, not the parser's.
    const absl::Status core =
        server_->curator().operators().campaigns().Get("c-none").status();
    ASSERT_FALSE(core.ok());
    EXPECT_EQ(static_cast<int>(s.error_code()), static_cast<int>(core.code()));
    EXPECT_EQ(s.error_message(), core.message());
  }
  {
    // A stream refused by the stage (no such result), not by the parser.
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + kAdminToken);
    v1::ExportEmbeddingsRequest req;
    req.set_result_id("r-none");
    auto reader = stub->ExportEmbeddings(&ctx, req);
    v1::EmbeddingChunk chunk;
    EXPECT_FALSE(reader->Read(&chunk));
    grpc::Status s = reader->Finish();
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_THAT(s.error_message(), HasSubstr("r-none"));
  }
  {
    grpc::ClientContext ctx;  // no token
    v1::CuratorStatus status;
    EXPECT_EQ(stub->GetStatus(&ctx, v1::GetStatusRequest(), &status).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
}

}  // namespace
}  // namespace ldpgraph::curator
