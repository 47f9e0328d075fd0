// The life of an agent host started with --nodes from-curator
// (docs/operators.md, "Container images and agent replicas"): claim a shard
// of nodes from the curator, run the shard's agents while renewing its
// lease, give the shard up when they stop, and claim again when the lease
// was lost. No gRPC here: the curator's calls (ShardLeases), the shard's
// agents (ShardRunner) and time (LoopClock) are small interfaces, so that
// the loop is tested without processes or threads; the agent host
// implements them over its gRPC stub (GrpcShardLeases, client/agent_host.h)
// and AgentHost.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ldpgraph::agent {

// A shard the curator handed this host (AgentService.ClaimShard; the
// protocol is in server/curator/fleet.h): shard `shard` of `shards`, nodes
// [begin, end), to renew every `renew_every`.
struct ShardClaim {
  uint32_t shard = 0, shards = 0, begin = 0, end = 0;
  absl::Duration renew_every;
};

// What one claim call returned.
struct ClaimReply {
  enum class State {
    // `claim` is this host's shard.
    kAssigned,
    // The fleet is still gathering: ask again after retry_after.
    kWaiting,
    // Every shard has a live holder: ask again after retry_after, when a
    // lease may have lapsed.
    kSpare,
    // No shard is left for this host: the loop ends. (The curator's
    // ClaimShard never says so, a host it does not need is a spare, so a
    // deployed host loops until it is stopped.)
    kNoneLeft,
  };
  State state = State::kWaiting;
  ShardClaim claim;
  absl::Duration retry_after;
};

// The curator's side of the shard protocol.
class ShardLeases {
 public:
  virtual ~ShardLeases() = default;
  // One claim call. Errors: the call's. UNAUTHENTICATED, INVALID_ARGUMENT,
  // PERMISSION_DENIED and UNIMPLEMENTED are for good (the loop returns
  // them); any other (UNAVAILABLE while the curator is down) is retried.
  virtual absl::StatusOr<ClaimReply> Claim() = 0;
  // One renewal of `held`: OK if this host still holds it;
  // FAILED_PRECONDITION if it does not (the lease lapsed and another host
  // took the shard); the call's error otherwise (retried at the next
  // renewal; the host keeps its shard meanwhile).
  virtual absl::Status Renew(const ShardClaim& held) = 0;
  // The host has stopped the agents of `held` and no longer serves it.
  virtual void Release(const ShardClaim& held) = 0;
};

// A shard whose agents are serving.
class RunningShard {
 public:
  // Stops the agents if they still run.
  virtual ~RunningShard() = default;
  // True once the agents stopped by themselves (a permanent error).
  virtual bool Done() = 0;
  // Stops the agents, waits for them, and returns their result: OK when
  // stopped here, else the error that stopped them.
  virtual absl::Status Stop() = 0;
};

// Starts one shard's agents.
class ShardRunner {
 public:
  virtual ~ShardRunner() = default;
  // Loads the shard (records, state, keys) and starts its agents serving on
  // threads of their own. Errors end the loop.
  virtual absl::StatusOr<std::unique_ptr<RunningShard>> Start(
      const ShardClaim& claim) = 0;
};

// Time as the loop sees it.
class LoopClock {
 public:
  virtual ~LoopClock() = default;
  virtual absl::Time Now() = 0;
  virtual void SleepFor(absl::Duration d) = 0;
};

// absl::Now and absl::SleepFor.
LoopClock& RealLoopClock();

struct ShardLoopOptions {
  // How often the loop looks at its stop flag and the running shard.
  absl::Duration tick = absl::Milliseconds(50);
  // Wait before asking again after a claim call failed (curator down).
  absl::Duration claim_retry = absl::Seconds(1);
  // Bounds on the curator's retry_after while waiting or spare.
  absl::Duration min_retry = absl::Milliseconds(100);
  absl::Duration max_retry = absl::Seconds(60);
  // What the loop is doing or waiting for, for logs and /readyz: called
  // with each new state of a claim ("waiting for the fleet to settle"),
  // "holding shard I of K", a lost lease, the first failed renewal of a
  // streak. May be empty.
  std::function<void(const std::string&)> note;
};

class ShardLoop {
 public:
  // leases, runner and clock must outlive the loop.
  ShardLoop(ShardLeases& leases, ShardRunner& runner, LoopClock& clock,
            ShardLoopOptions options = {});

  // Claims a shard (waiting while the fleet gathers or the host is a spare,
  // retrying while the curator is unreachable), runs it, renewing the lease
  // every claim.renew_every, and releases it once its agents stopped; then
  // claims again. Returns OK when stopped (Stop) or when no shard is left;
  // a permanent claim error (see ShardLeases::Claim); INTERNAL for a
  // malformed assignment; a shard's start or run error (an agent host's
  // permanent error). A lost lease (FAILED_PRECONDITION from Renew) stops
  // the shard's agents and claims again.
  absl::Status Run();
  // Asks Run to return within a tick (after a curator call or a shard's
  // start in progress): the shard being run is stopped first. Thread-safe,
  // idempotent; before Run, Run returns at once.
  void Stop();

  // Shards claimed so far, and lost leases (for logs and tests).
  uint64_t claims() const { return claims_.load(); }
  uint64_t lost_leases() const { return lost_.load(); }

 private:
  // The next shard: OK with a claim, NOT_FOUND when none is left,
  // CANCELLED when stopped, a permanent claim error, INTERNAL for a
  // malformed assignment (no shards, shard >= shards, begin > end).
  absl::StatusOr<ShardClaim> ClaimNext();
  // Runs claim's agents while renewing until they stop, the loop is
  // stopped or the lease is lost (then lost is set): their result.
  absl::Status RunShard(const ShardClaim& claim, bool& lost);
  // Sleeps up to d in ticks; false if stopped meanwhile.
  bool Wait(absl::Duration d);
  void Note(const std::string& text);

  ShardLeases& leases_;
  ShardRunner& runner_;
  LoopClock& clock_;
  const ShardLoopOptions options_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> claims_{0};
  std::atomic<uint64_t> lost_{0};
};

}  // namespace ldpgraph::agent
