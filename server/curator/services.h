// The curator's gRPC services: thin adapters from ldpgraph.v1 requests to
// the calls of the curator's two narrow interfaces (curator.h): the agent
// service to AgentSide's, the admin service to OperatorSide's and the
// Stages'. One status conversion (ToGrpcStatus), authentication from
// request metadata. No domain logic lives here. Defined in agent_service.cc
// (the agent service), admin_service.cc (the admin service) and services.cc
// (what they share, with internal/services.h).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "ldpgraph/v1/agent.grpc.pb.h"
#include "server/curator/agent_side.h"
#include "server/curator/listings.h"
#include "server/curator/operator_side.h"
#include "server/curator/stages.h"

namespace ldpgraph::curator {

// absl and gRPC share their status codes: a 1:1 conversion.
grpc::Status ToGrpcStatus(const absl::Status& s);

// Called with (method, seconds, code) after every RPC, for metrics.
using RpcObserver =
    std::function<void(absl::string_view method, double seconds, int code)>;

class TaskStreamHub;
class WorkPool;

// WithMethods<S, M1, M2, ...> is M1<M2<...<S>>>: gRPC's per-method mixins
// (WithRawCallbackMethod_X) applied to a generated service, listed rather
// than nested by hand.
template <typename Service, template <typename> class... Mixins>
struct WithMethodsOf {
  using type = Service;
};
template <typename Service, template <typename> class First,
          template <typename> class... Rest>
struct WithMethodsOf<Service, First, Rest...> {
  using type = First<typename WithMethodsOf<Service, Rest...>::type>;
};
template <typename Service, template <typename> class... Mixins>
using WithMethods = typename WithMethodsOf<Service, Mixins...>::type;

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
// stream with OK, or a unary call with an empty INTERNAL). The log learns
// of such requests at most once a minute (as AdminServiceImpl says), since
// Enrol, ClaimShard and CheckIn take requests from anyone.
class AgentServiceImpl final
    : public WithMethods<
          v1::AgentService::Service,
          v1::AgentService::WithRawCallbackMethod_Enrol,
          v1::AgentService::WithRawCallbackMethod_Subscribe,
          v1::AgentService::WithRawCallbackMethod_Report,
          v1::AgentService::WithRawCallbackMethod_Relay,
          v1::AgentService::WithRawCallbackMethod_FetchSealed,
          v1::AgentService::WithRawCallbackMethod_PublicKeys,
          v1::AgentService::WithRawCallbackMethod_ClaimShard,
          v1::AgentService::WithRawCallbackMethod_CheckIn,
          v1::AgentService::WithRawCallbackMethod_Submit> {
 public:
  // The curator's agent side is not owned and must outlive the service.
  AgentServiceImpl(AgentSide* curator, RpcObserver observer);
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
  // Threads for agent work that may block (WorkPool, internal/services.h):
  // store writes are serialised anyway, so a few suffice.
  static constexpr int kAgentThreads = 8;
  // Their niceness above the process's: bulk agent work yields the CPU to
  // gRPC's threads and the admin service, so ldpctl stays responsive on a
  // saturated machine.
  static constexpr int kAgentNice = 5;
  AgentSide* curator_;
  RpcObserver observe_;
  std::unique_ptr<TaskStreamHub> hub_;
  std::unique_ptr<WorkPool> pool_;
};

// The admin service on gRPC's callback API too. Every call runs on the
// admin service's own pool of at most max_threads threads, which agent
// traffic never uses (even GetStatus waits on the core's lock, which ingest
// holds across a store write). So ldpctl stays responsive whatever the fleet
// does, and a long Evaluate never holds a thread that an agent stream needs.
//
// Every method takes its request as raw bytes, and every call goes the same
// way (Serve):
//  1. Authentication first, from the request metadata alone
//     (authorization: Bearer <admin token>): without it, or with a wrong
//     one, the call ends at once with UNAUTHENTICATED, whatever its bytes;
//     they are never parsed, and the refusal takes no pool thread.
//  2. Then, on the pool, the bytes are parsed: bytes that are not a message
//     of the method's request type (truncated, invalid UTF-8 in a string
//     field, ...) end the call with INVALID_ARGUMENT naming the method and
//     the type (gRPC's own parser answered UNIMPLEMENTED with no message).
//  3. Then the handler runs and its response is serialised.
// Logging: a refused authentication writes nothing to the log (the metric
// ldpgraph_curator_rpcs_total counts it by method and code). A malformed
// request writes at most one line a minute, with the number held back since
// the last one (one bound for the whole process, the agent service's
// requests included); protobuf's own line for a string that is not UTF-8 is
// silenced. So no request, whatever its bytes or credential, makes the log
// grow faster than that. (gRPC's own transport lines, such as one per failed
// TLS handshake, come before any request and are not this service's.)
//
// Thread-safe; the curator's operator side and the stages are not owned and
// must outlive it.
class AdminServiceImpl final
    : public WithMethods<
          v1::AdminService::Service,
          v1::AdminService::WithRawCallbackMethod_CreateCampaign,
          v1::AdminService::WithRawCallbackMethod_ListCampaigns,
          v1::AdminService::WithRawCallbackMethod_GetCampaign,
          v1::AdminService::WithRawCallbackMethod_CloseCampaign,
          v1::AdminService::WithRawCallbackMethod_ListRefusals,
          v1::AdminService::WithRawCallbackMethod_GetBudgets,
          v1::AdminService::WithRawCallbackMethod_Estimate,
          v1::AdminService::WithRawCallbackMethod_Propagate,
          v1::AdminService::WithRawCallbackMethod_Evaluate,
          v1::AdminService::WithRawCallbackMethod_ListResults,
          v1::AdminService::WithRawCallbackMethod_ListResultIds,
          v1::AdminService::WithRawCallbackMethod_ExportEmbeddings,
          v1::AdminService::WithRawCallbackMethod_Release,
          v1::AdminService::WithRawCallbackMethod_GetReleaseLedger,
          v1::AdminService::WithRawCallbackMethod_ListAudit,
          v1::AdminService::WithRawCallbackMethod_GetStatus> {
 public:
  // admin_token: the bearer token every call must carry. base_status: the
  // fields of GetStatus the core does not know (start time, graph edges and
  // classes, insecure). max_threads: the admin pool's bound (>= 1); calls
  // beyond it wait in order. pages: the listings' page byte budget
  // (listings.h).
  AdminServiceImpl(OperatorSide* curator, Stages* stages,
                   std::string admin_token,
                   RpcObserver observer, v1::CuratorStatus base_status = {},
                   int max_threads = 16, Listings::Options pages = {});
  ~AdminServiceImpl() override;
  // A frontend's (roles.h): GetStatus only; every other method is
  // FAILED_PRECONDITION naming the operator, after authentication.
  void ServeStatusOnly() { status_only_ = true; }

  // Each takes the bytes of its ldpgraph.v1 request and answers the bytes of
  // its response (admin.proto), as the class comment says.
  grpc::ServerUnaryReactor* CreateCampaign(grpc::CallbackServerContext* ctx,
                                           const grpc::ByteBuffer* req,
                                           grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* ListCampaigns(grpc::CallbackServerContext* ctx,
                                          const grpc::ByteBuffer* req,
                                          grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* GetCampaign(grpc::CallbackServerContext* ctx,
                                        const grpc::ByteBuffer* req,
                                        grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* CloseCampaign(grpc::CallbackServerContext* ctx,
                                          const grpc::ByteBuffer* req,
                                          grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* ListRefusals(grpc::CallbackServerContext* ctx,
                                         const grpc::ByteBuffer* req,
                                         grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* GetBudgets(grpc::CallbackServerContext* ctx,
                                       const grpc::ByteBuffer* req,
                                       grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* Estimate(grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* req,
                                     grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* Propagate(grpc::CallbackServerContext* ctx,
                                      const grpc::ByteBuffer* req,
                                      grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* Evaluate(grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* req,
                                     grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* Release(grpc::CallbackServerContext* ctx,
                                    const grpc::ByteBuffer* req,
                                    grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* GetReleaseLedger(grpc::CallbackServerContext* ctx,
                                             const grpc::ByteBuffer* req,
                                             grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* ListResults(grpc::CallbackServerContext* ctx,
                                        const grpc::ByteBuffer* req,
                                        grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* ListResultIds(grpc::CallbackServerContext* ctx,
                                          const grpc::ByteBuffer* req,
                                          grpc::ByteBuffer* resp) override;
  // A stream of EmbeddingChunk messages; authentication, parsing and their
  // errors as for the unary methods, before the first chunk.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* ExportEmbeddings(
      grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req) override;
  grpc::ServerUnaryReactor* ListAudit(grpc::CallbackServerContext* ctx,
                                      const grpc::ByteBuffer* req,
                                      grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* ctx,
                                      const grpc::ByteBuffer* req,
                                      grpc::ByteBuffer* resp) override;

 private:
  bool status_only_ = false;
  // OK, or UNAUTHENTICATED: from ctx's metadata only.
  absl::Status Authorize(grpc::CallbackServerContext* ctx) const;
  // Every unary method: authorizes (a refusal finishes at once), then on the
  // pool parses the request, runs fn(request, &response), serialises the
  // response; observes and finishes. Defined in admin_service.cc, its only
  // user.
  template <typename Request, typename Response, typename Fn>
  grpc::ServerUnaryReactor* Serve(absl::string_view method,
                                  grpc::CallbackServerContext* ctx,
                                  const grpc::ByteBuffer* raw_request,
                                  grpc::ByteBuffer* raw_response, Fn fn);
  OperatorSide* curator_;
  Stages* stages_;
  Listings listings_;
  std::string token_;
  RpcObserver observe_;
  v1::CuratorStatus base_status_;
  std::unique_ptr<WorkPool> pool_;
};

}  // namespace ldpgraph::curator
