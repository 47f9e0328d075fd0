// The agent host's network side: a thin gRPC client around an AgentShard.
// It connects out to the curator (agents never listen), enrols its nodes,
// subscribes for tasks, answers each task through the shard (which makes
// every new answer durable before it is released), and streams the reports
// in batches, reading one acknowledgement per batch.
//
// Neighbour substitution tasks run as exchanges through the curator's relay
// (client/edge_exchange.h), each on a thread of its own, so that the host
// keeps answering its other tasks; they use the host's current session and
// report through the same Report path. Enrol sends each node's sealing
// public key (NodeCredential.sealing_key).
//
// Failures: any broken call (curator down, restarted, network gone) ends
// the current session; the host waits with exponential backoff, enrols
// again and resubscribes. The curator re-sends the tasks still waiting for
// its nodes, and the shard answers them from its memo: a restart of either
// side costs no extra epsilon, and a resent report is acknowledged as a
// duplicate.
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/agent.h"
#include "client/edge_exchange.h"
#include "client/shard_loop.h"
#include "ldpgraph/v1/agent.grpc.pb.h"

namespace ldpgraph::agent {

// A node's credential as a host holds it: the node and its secret (agent.proto
// NodeCredential.secret, 32 bytes), inline: a host holds one per node.
class NodeSecret {
 public:
  static constexpr size_t kBytes = 32;
  // A secret of another size than kBytes is kept as invalid (valid() false;
  // AgentHost::Create and CheckInOptions::Validate reject it).
  NodeSecret(uint32_t node, absl::string_view secret);

  uint32_t node() const { return node_; }
  bool valid() const { return size_ == kBytes; }
  // The secret's bytes; empty when not valid().
  absl::string_view secret() const {
    return valid() ? absl::string_view(bytes_.data(), kBytes)
                   : absl::string_view();
  }

 private:
  uint32_t node_;
  std::array<char, kBytes> bytes_{};
  uint8_t size_;  // the given secret's size, capped at 255
};

// OK, or INVALID_ARGUMENT naming the first credential that is not valid().
absl::Status CheckSecrets(const std::vector<NodeSecret>& credentials);

struct AgentHostOptions {
  // host:port of the curator, or of its frontends as a comma-separated
  // list (server/curator/roles.h): the channel keeps to one and moves to
  // the next live one when it goes (CuratorTarget).
  std::string curator;
  // TLS: the CA that signed the curator's certificate (PEM); an optional
  // override of the name checked against it. insecure: plaintext (dev only).
  std::string ca_pem;
  std::string server_name;
  bool insecure = false;
  // A name for the curator's logs and audit trail.
  std::string host_name = "agent-host";
  // Every node's credential, in the shard's order.
  std::vector<NodeSecret> credentials;
  // The caps each node declares at enrolment (its policy's).
  BudgetCaps caps;
  // Most nodes per Enrol call: a host with more enrols in parts of this
  // many (agent.proto EnrolRequest.more). At most the curator's limit,
  // 100000 unless it was lowered. A part's request is built whole, about
  // 200 bytes per node with its serialised copy: 25,000 keeps that at a
  // few MB whatever the shard.
  int enrol_part = 25000;
  // Reports per batch, and batches in flight before waiting for an ack.
  int batch_size = 512;
  int window = 4;
  // Nodes of a task answered, made durable and sent at a time
  // (AgentShard::RespondAll in parts), so that a host never holds a report
  // per node of its shard at once; >= 1.
  int answer_part = 8192;
  // Upper bound on reports sent per second (0: none), so that a large
  // fleet does not flood a curator; enforced per batch.
  double max_reports_per_second = 0;
  // Wait between sessions that failed (an Enrol refused or timed out, a
  // stream that broke): initial, doubling up to max, back to initial once a
  // session got going. Reconnecting the channel itself is gRPC's job, every
  // 100 ms growing to 500 ms (MakeCuratorChannel), and Enrol waits for it.
  absl::Duration backoff_initial = absl::Milliseconds(100);
  absl::Duration backoff_max = absl::Seconds(5);
};

// Running totals, for metrics and tests.
struct AgentHostCounters {
  std::atomic<uint64_t> tasks{0};
  std::atomic<uint64_t> reports_sent{0};
  std::atomic<uint64_t> reports_acked{0};
  std::atomic<uint64_t> duplicates{0};
  std::atomic<uint64_t> rejected{0};
  std::atomic<uint64_t> refusals_sent{0};
  std::atomic<uint64_t> sessions{0};
  std::atomic<uint64_t> reconnects{0};
};

// A call's gRPC status as an absl::Status (the codes are the same), its
// message prefixed with what ("what: message").
absl::Status FromGrpc(const grpc::Status& s, absl::string_view what);

// One node's credential as the curator is sent it (Enrol, CheckIn): the
// secret, the caps of options, and the public half of the node's sealing
// key pair when the shard holds one.
void FillCredential(const AgentHostOptions& options, const AgentShard& shard,
                    const NodeSecret& credential, v1::NodeCredential* out);

// The gRPC channel to the curator that options describe (TLS unless
// insecure; keepalives; 64 MiB messages), added to `args`.

std::shared_ptr<grpc::Channel> MakeCuratorChannel(
    const AgentHostOptions& options,
    grpc::ChannelArguments args = grpc::ChannelArguments());

// The curator's side of the shard protocol (ShardLeases, client/shard_loop.h)
// over gRPC, for hosts started with --nodes from-curator: they hold every
// node's credential and learn from the curator which nodes to run.
class GrpcShardLeases : public ShardLeases {
 public:
  // options: the curator, TLS and host_name (the host's identity in the
  // fleet: unique, stable across restarts). proof: one node's credential.
  GrpcShardLeases(const AgentHostOptions& options, const NodeSecret& proof);

  // One AgentService.ClaimShard call (waiting up to 5 s for the channel):
  // the curator's answer (an assignment as sent: ShardLoop checks it); the
  // call's error (UNAUTHENTICATED: the credential is wrong).
  absl::StatusOr<ClaimReply> Claim() override;
  // One renewal of `held` (a ClaimShard call): OK if the curator still
  // names this host its holder; FAILED_PRECONDITION if it does not (the
  // lease lapsed and another host took the shard); the call's error
  // otherwise (UNAVAILABLE while the curator is down).
  absl::Status Renew(const ShardClaim& held) override;
  // Nothing to call: the curator has no release; the lease lapses after
  // the curator's --fleet-lease and a spare takes the shard.
  void Release(const ShardClaim&) override {}
  // Cancels the call in flight, and every later one as it starts (CANCELLED):
  // for a host stopping on a signal, which must not wait out a claim's 5 s.
  void Cancel();

 private:
  absl::StatusOr<v1::ClaimShardResponse> Ask();

  v1::ClaimShardRequest request_;
  std::unique_ptr<v1::AgentService::Stub> stub_;
  absl::Mutex mu_;
  grpc::ClientContext* in_flight_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

class AgentHost {
 public:
  ~AgentHost();
  // Validates the options (valid credentials for exactly the shard's nodes,
  // a curator address, TLS material unless insecure, enrol_part >= 1).
  static absl::StatusOr<std::unique_ptr<AgentHost>> Create(
      AgentHostOptions options, std::unique_ptr<AgentShard> shard);

  // Serves until Stop: enrol, subscribe, answer, reconnect. Returns OK after
  // Stop, or a permanent error (UNAUTHENTICATED: the credentials are
  // wrong; INVALID_ARGUMENT: the curator rejects the enrolment).
  absl::Status Run();
  // Asks Run to return; the task being answered is finished first.
  // Thread-safe, idempotent.
  void Stop();

  // True while a session is open and the task stream is up.
  bool ready() const { return ready_.load(); }
  const AgentHostCounters& counters() const { return counters_; }
  AgentShard& shard() { return *shard_; }
  // The substitution exchanges (running count, counters, outcomes).
  ExchangeRunner& exchanges() { return *exchanges_; }
  // The last error that ended a session (for logs and /readyz).
  std::string last_error() const;

 private:
  class Transport;
  AgentHost(AgentHostOptions options, std::unique_ptr<AgentShard> shard);
  // One session: enrol, subscribe, answer until the stream breaks.
  absl::Status Session(v1::AgentService::Stub& stub);
  // Enrols every node, in parts of at most enrol_part; the session token.
  // Errors that retrying cannot fix carry kPermanent.
  absl::StatusOr<std::string> Enrol(v1::AgentService::Stub& stub);
  absl::Status Answer(v1::AgentService::Stub& stub, const std::string& token,
                      const v1::Task& task);
  // Streams reports in batches on one Report call, reading an ack per
  // batch; counts acks and rejections. Errors: the stream's.
  absl::Status SendReports(v1::AgentService::Stub& stub,
                           const std::string& token,
                           std::vector<v1::Report> reports);
  // SendReports, then counts the refusals among reports as sent.
  absl::Status SendAndCount(v1::AgentService::Stub& stub,
                            const std::string& token,
                            std::vector<v1::Report> reports);
  // The current session's token; empty between sessions.
  std::string token() const;
  // Every call in flight is registered while it runs, so that Stop cancels
  // it at once (an Enrol waiting 30 s for a curator that is gone, a report
  // stream, the task stream): a host stops promptly on SIGTERM. A call
  // registered after Stop is cancelled as it starts.
  class TrackedCall;
  void Track(grpc::ClientContext* ctx);
  void Untrack(grpc::ClientContext* ctx);

  const AgentHostOptions options_;
  const std::unique_ptr<AgentShard> shard_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<v1::AgentService::Stub> stub_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<ExchangeRunner> exchanges_;
  AgentHostCounters counters_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> ready_{false};
  mutable absl::Mutex mu_;
  absl::flat_hash_set<grpc::ClientContext*> calls_ ABSL_GUARDED_BY(mu_);
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  std::string token_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ldpgraph::agent
