// Check-in mode: an agent as a device of a cross-device fleet, not a host
// holding a stream open. Each visit connects to the curator (a connection of
// its own, TLS resuming the previous session where the curator allows),
// checks in with its nodes' credentials (agent.proto CheckIn), answers the
// tasks it is given through the shard (budget, memo and durability exactly
// as a streaming host's: client/agent.h), submits the reports, and leaves.
// It comes back when the curator's reply says (its interval, or its pacing
// slot), or, when a visit fails, after a jittered backoff.
//
// Exactly-once: a report resent after a lost ack is answered from the memo
// and acknowledged as a duplicate, as for a streaming host. Neighbour
// substitution tasks need a live exchange between neighbours and are not
// answered in check-in mode (counted, logged once per campaign).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include <grpc/grpc_security.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/agent.h"
#include "client/agent_host.h"
#include "ldpgraph/v1/agent.grpc.pb.h"

namespace ldpgraph::agent {

struct CheckInOptions {
  // The curator, TLS, credentials, caps, device name (host_name) and
  // batch_size of a streaming host.
  AgentHostOptions host;
  // Until the first reply, and after a failed visit: the wait before the
  // next, doubling from `backoff` up to `interval`, jittered.
  absl::Duration interval = absl::Seconds(60);
  absl::Duration backoff = absl::Seconds(1);
  double jitter = 0.2;  // in [0, 1)
  // Stop after this many check-ins (0: until Stop), or after the first
  // check-in that finds nothing to do (tests, benchmarks, cron-like use).
  int max_check_ins = 0;
  bool exit_when_idle = false;
  // Longest wait for each call.
  absl::Duration call_timeout = absl::Seconds(30);
  // Resume TLS sessions across visits (a client-side session cache).
  bool resume_tls = true;
  // Progress lines (one per visit); nullptr: silent.
  std::function<void(const std::string&)> log;

  absl::Status Validate() const;
};

struct CheckInCounters {
  std::atomic<uint64_t> check_ins{0}, served{0}, idle{0}, paced{0};
  std::atomic<uint64_t> failed{0};  // visits that failed (network, curator)
  std::atomic<uint64_t> tasks{0}, skipped_tasks{0};
  std::atomic<uint64_t> reports_acked{0}, duplicates{0}, rejected{0};
};

class CheckInLoop {
 public:
  static absl::StatusOr<std::unique_ptr<CheckInLoop>> Create(
      CheckInOptions options, std::unique_ptr<AgentShard> shard);
  ~CheckInLoop();

  // Visits until Stop, max_check_ins, or (exit_when_idle) an idle check-in.
  // OK then; a permanent error (UNAUTHENTICATED: wrong credentials;
  // INVALID_ARGUMENT: a check-in the curator refuses) ends it.
  absl::Status Run();
  // One visit: connect, check in, answer, submit, leave. The curator's
  // reply; the first error otherwise.
  absl::StatusOr<v1::CheckInResponse> Visit();
  // Asks Run to return after the current visit. Thread-safe.
  void Stop();

  const CheckInCounters& counters() const { return counters_; }
  AgentShard& shard() { return *shard_; }
  // True once a visit succeeded (for /readyz).
  bool ready() const { return ready_.load(); }

 private:
  CheckInLoop(CheckInOptions options, std::unique_ptr<AgentShard> shard);
  absl::Duration Jittered(absl::Duration d);
  absl::Status Submit(v1::AgentService::Stub& stub, const std::string& token,
                      std::vector<v1::Report> reports);

  const CheckInOptions options_;
  const std::unique_ptr<AgentShard> shard_;
  grpc_ssl_session_cache* session_cache_ = nullptr;
  v1::CheckInRequest request_;
  CheckInCounters counters_;
  absl::Notification stop_;
  std::atomic<bool> ready_{false};
  std::set<std::string> skipped_campaigns_;
};

}  // namespace ldpgraph::agent
