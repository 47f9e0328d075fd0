// The curator's gRPC services: thin adapters from ldpgraph.v1 requests to
// Curator and Stages calls, with one status conversion (ToGrpcStatus) and
// authentication from request metadata. No domain logic lives here.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "ldpgraph/v1/agent.grpc.pb.h"
#include "server/curator/curator.h"
#include "server/curator/stages.h"

namespace ldpgraph::curator {

// absl and gRPC share their status codes: a 1:1 conversion.
grpc::Status ToGrpcStatus(const absl::Status& s);

// Called with (method, seconds, code) after every RPC, for metrics.
using RpcObserver =
    std::function<void(absl::string_view method, double seconds, int code)>;

class TaskStreamHub;
class WorkPool;

// The agent service on gRPC's callback API: no call holds a server thread
// while it waits. A Subscribe stream is a reactor parked in the TaskStreamHub
// until a campaign opens or closes; a Report stream reads a batch, ingests it
// and acknowledges it. So an idle host costs memory, not a thread. Work that
// may block (Enrol, ingest, the relay, looking up a stream's tasks) runs on
// the service's own small pool, never on gRPC's callback threads (two on a
// two-core machine), which would stall every other stream and the admin
// service, which keeps its own threads (AdminServiceImpl).
//
// Every method takes its request as raw bytes and parses it here, so that a
// request that is not a valid message ends the call with INVALID_ARGUMENT
// naming the method and the message type (gRPC's own parser would end a
// stream with OK, or a unary call with an empty INTERNAL).
class AgentServiceImpl final
    : public v1::AgentService::WithRawCallbackMethod_Enrol<
          v1::AgentService::WithRawCallbackMethod_Subscribe<
              v1::AgentService::WithRawCallbackMethod_Report<
                  v1::AgentService::WithRawCallbackMethod_Relay<
                      v1::AgentService::WithRawCallbackMethod_FetchSealed<
                          v1::AgentService::WithRawCallbackMethod_PublicKeys<
                              v1::AgentService::WithRawCallbackMethod_ClaimShard<
                                  v1::AgentService::WithRawCallbackMethod_CheckIn<
                                      v1::AgentService::WithRawCallbackMethod_Submit<
                                          v1::AgentService::Service>>>>>>>>> {
 public:
  AgentServiceImpl(Curator* curator, RpcObserver observer);
  ~AgentServiceImpl() override;

  // Ends every open Subscribe stream with OK and refuses new ones
  // (UNAVAILABLE); call before the server shuts down. Idempotent.
  void Stop();

  grpc::ServerUnaryReactor* Enrol(grpc::CallbackServerContext* ctx,
                                  const grpc::ByteBuffer* req,
                                  grpc::ByteBuffer* resp) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Subscribe(
      grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Report(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* Relay(grpc::CallbackServerContext* ctx,
                                  const grpc::ByteBuffer* req,
                                  grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* FetchSealed(grpc::CallbackServerContext* ctx,
                                        const grpc::ByteBuffer* req,
                                        grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* ClaimShard(grpc::CallbackServerContext* ctx,
                                       const grpc::ByteBuffer* req,
                                       grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* PublicKeys(grpc::CallbackServerContext* ctx,
                                       const grpc::ByteBuffer* req,
                                       grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* CheckIn(grpc::CallbackServerContext* ctx,
                                    const grpc::ByteBuffer* req,
                                    grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* Submit(grpc::CallbackServerContext* ctx,
                                   const grpc::ByteBuffer* req,
                                   grpc::ByteBuffer* resp) override;

 private:
  absl::StatusOr<std::shared_ptr<const Session>> Authenticate(
      grpc::CallbackServerContext* ctx) const;
  // Threads for agent work that may block (services.cc, WorkPool): store
  // writes are serialised anyway, so a few suffice.
  static constexpr int kAgentThreads = 8;
  // Their niceness above the process's: bulk agent work yields the CPU to
  // gRPC's threads and the admin service, so ldpctl stays responsive on a
  // saturated machine.
  static constexpr int kAgentNice = 5;
  Curator* curator_;
  RpcObserver observe_;
  std::unique_ptr<TaskStreamHub> hub_;
  std::unique_ptr<WorkPool> pool_;
};

// The admin service on gRPC's callback API too. Every call runs on the
// admin service's own pool of at most max_threads threads, which agent
// traffic never uses (even GetStatus waits on the core's lock, which ingest
// holds across a store write). So ldpctl stays responsive whatever the fleet does, and a long
// Evaluate never holds a thread that an agent stream needs.
class AdminServiceImpl final : public v1::AdminService::CallbackService {
 public:
  // admin_token: the bearer token every call must carry. base_status: the
  // fields of GetStatus the core does not know (start time, graph edges and
  // classes, insecure). max_threads: the admin pool's bound (>= 1); calls
  // beyond it wait in order.
  AdminServiceImpl(Curator* curator, Stages* stages, std::string admin_token,
                   RpcObserver observer, v1::CuratorStatus base_status = {},
                   int max_threads = 16);
  ~AdminServiceImpl() override;

  grpc::ServerUnaryReactor* CreateCampaign(grpc::CallbackServerContext* ctx,
                                           const v1::CreateCampaignRequest* req,
                                           v1::Campaign* resp) override;
  grpc::ServerUnaryReactor* ListCampaigns(grpc::CallbackServerContext* ctx,
                                          const v1::ListCampaignsRequest* req,
                                          v1::ListCampaignsResponse* resp) override;
  grpc::ServerUnaryReactor* GetCampaign(grpc::CallbackServerContext* ctx,
                                        const v1::GetCampaignRequest* req,
                                        v1::Campaign* resp) override;
  grpc::ServerUnaryReactor* CloseCampaign(grpc::CallbackServerContext* ctx,
                                          const v1::CloseCampaignRequest* req,
                                          v1::Campaign* resp) override;
  grpc::ServerUnaryReactor* ListRefusals(grpc::CallbackServerContext* ctx,
                                         const v1::ListRefusalsRequest* req,
                                         v1::ListRefusalsResponse* resp) override;
  grpc::ServerUnaryReactor* GetBudgets(grpc::CallbackServerContext* ctx,
                                       const v1::GetBudgetsRequest* req,
                                       v1::GetBudgetsResponse* resp) override;
  grpc::ServerUnaryReactor* Estimate(grpc::CallbackServerContext* ctx,
                                     const v1::EstimateRequest* req,
                                     v1::StageResult* resp) override;
  grpc::ServerUnaryReactor* Propagate(grpc::CallbackServerContext* ctx,
                                      const v1::PropagateRequest* req,
                                      v1::StageResult* resp) override;
  grpc::ServerUnaryReactor* Evaluate(grpc::CallbackServerContext* ctx,
                                     const v1::EvaluateRequest* req,
                                     v1::StageResult* resp) override;
  grpc::ServerUnaryReactor* Release(grpc::CallbackServerContext* ctx,
                                    const v1::ReleaseRequest* req,
                                    v1::StageResult* resp) override;
  grpc::ServerUnaryReactor* GetReleaseLedger(
      grpc::CallbackServerContext* ctx, const v1::GetReleaseLedgerRequest* req,
      v1::ReleaseLedger* resp) override;
  grpc::ServerUnaryReactor* ListResults(grpc::CallbackServerContext* ctx,
                                        const v1::ListResultsRequest* req,
                                        v1::ListResultsResponse* resp) override;
  grpc::ServerWriteReactor<v1::EmbeddingChunk>* ExportEmbeddings(
      grpc::CallbackServerContext* ctx,
      const v1::ExportEmbeddingsRequest* req) override;
  grpc::ServerUnaryReactor* ListAudit(grpc::CallbackServerContext* ctx,
                                      const v1::ListAuditRequest* req,
                                      v1::ListAuditResponse* resp) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* ctx,
                                      const v1::GetStatusRequest* req,
                                      v1::CuratorStatus* resp) override;

 private:
  absl::Status Authorize(grpc::CallbackServerContext* ctx) const;
  // Authorizes, runs fn on the pool, observes, finishes.
  grpc::ServerUnaryReactor* Serve(absl::string_view method,
                                  grpc::CallbackServerContext* ctx,
                                  std::function<absl::Status()> fn);
  Curator* curator_;
  Stages* stages_;
  std::string token_;
  RpcObserver observe_;
  v1::CuratorStatus base_status_;
  std::unique_ptr<WorkPool> pool_;
};

}  // namespace ldpgraph::curator
