// Shard plans for fleets of interchangeable agent hosts.
//
// In a simulated deployment one agent host process runs the logical agents
// of many nodes. When the hosts are replicas that an orchestrator starts
// (docker compose --scale agent=N, a Kubernetes StatefulSet), no host knows
// how many there are, so none can work out its own shard. Such a host asks
// the curator instead (AgentService.ClaimShard), and the FleetPlanner
// answers.
//
// Protocol, keyed by host name (a host's identity: the pod name, the
// container's hostname; names must be unique within the fleet):
//   Gathering. Every host that claims joins the gathering and is told to
//     wait. Once at least `min_hosts` have joined and `settle` has passed
//     since the last new one, the plan is fixed: K shards, one per host that claimed within the last
//     `lease` (hosts that stopped asking are dropped), in the order they
//     first claimed (ties by name), at most one per node.
//   Planned. A holder's claim renews its lease and returns its shard. A
//     host the plan does not name takes over the shard of a holder that has
//     not claimed for `lease`, and the plan records the new holder; if every
//     holder is live, it is a spare and asks again later.
// Shard i of K holds the nodes [n*i/K, n*(i+1)/K): contiguous, sizes
// differing by at most one.
//
// The plan is stored (CuratorStore::PutFleetPlan) before any host learns of
// it, so a restarted curator hands every host the shard it had; after a
// restart each holder's lease starts afresh. The plan never changes size:
// hosts added after it are spares, and a deployment that needs another
// partition starts with a new curator data directory. This keeps a node on
// the shard whose state directory holds its spent budget and memo.
//
// Several frontends on one PostgreSQL store (Options::shared) run the same
// protocol in the database, so a host may claim at any of them.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/store/store.h"

namespace ldpgraph::curator {

class FleetPlanner {
 public:
  struct Options {
    // Nodes of the graph: [0, num_nodes); > 0.
    uint32_t num_nodes = 0;
    // Quiet time after the last new host before the plan is fixed; > 0.
    absl::Duration settle = absl::Seconds(5);
    // A holder that has not claimed for this long may be replaced; > settle
    // is not required, but the lease must be > 0.
    absl::Duration lease = absl::Seconds(30);
    // Fewest hosts to gather before a plan (>= 1): an operator who knows
    // the fleet's size sets it, so that a host slow to start is never left
    // out of the plan.
    size_t min_hosts = 1;
    // Most hosts gathered at once; later ones are told to wait.
    size_t max_hosts = 100000;
    // The store is shared by several frontends (roles.h): the protocol runs
    // in it (CuratorStore::ClaimFleetShard), each claim one transaction, so
    // that every frontend answers from one plan. Otherwise it runs in this
    // object's memory and the store only keeps the plan.
    bool shared = false;
  };

  struct Grant {
    enum class State { kWaiting, kAssigned, kSpare };
    State state = State::kWaiting;
    // For kAssigned: shard `shard` of `shards`, nodes [begin, end).
    uint32_t shard = 0, shards = 0, begin = 0, end = 0;
    // When to claim again: to renew (kAssigned) or to ask anew.
    absl::Duration retry_after;
  };

  // Loads a stored plan from `store` (null: nothing is stored, for tests).
  // INVALID_ARGUMENT for bad options; FAILED_PRECONDITION for a stored plan
  // with more shards than nodes.
  static absl::StatusOr<std::unique_ptr<FleetPlanner>> Create(
      Options options, store::CuratorStore* store);

  // One claim by `host` (non-empty, at most 256 bytes: INVALID_ARGUMENT
  // otherwise) at time `now`. A store failure while fixing or changing the
  // plan is returned, and nothing changes.
  absl::StatusOr<Grant> Claim(absl::string_view host, absl::Time now);

  // Shards of the plan; 0 while gathering.
  uint32_t shards() const;
  // Hosts gathered and not yet planned (0 once planned).
  uint32_t gathering() const;

 private:
  struct Seen {
    absl::Time first, last;
  };
  FleetPlanner(Options options, store::CuratorStore* store)
      : options_(options), store_(store) {}
  Grant Assigned(uint32_t shard) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Grant Spare() const;

  // The claim as the shared store runs it (Options::shared).
  absl::StatusOr<Grant> ClaimShared(absl::string_view host, absl::Time now);

  const Options options_;
  store::CuratorStore* const store_;
  mutable absl::Mutex mu_;
  // Shared: the plan's size as the last claim saw it.
  uint32_t shared_shards_ ABSL_GUARDED_BY(mu_) = 0;
  // Gathering: every host that claimed, and when the last new one came.
  absl::flat_hash_map<std::string, Seen> gathered_ ABSL_GUARDED_BY(mu_);
  absl::Time last_join_ ABSL_GUARDED_BY(mu_);
  // Planned: holder of each shard, when each last claimed, and the shard of
  // each holder.
  std::vector<std::string> holders_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> renewed_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, uint32_t> shard_of_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ldpgraph::curator
