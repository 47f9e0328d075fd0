// The curator's sessions: which agent host proved which nodes, by bearer
// token. One job: issue, find and replace sessions; nothing here touches the
// store (sessions do not survive a restart: a host enrols again).
//
// A host that enrols again (its stream broke, or it restarted), or another
// host that took over the same shard, replaces the earlier session of
// exactly the same nodes: the earlier token stops working at once, so the
// table holds one session per live node set, not one per enrolment.
//
// An enrolment in parts (agent.proto EnrolRequest.more) builds its session
// over several calls: between parts the table holds it aside (Hold,
// Resume), where Find does not see it, so it authenticates nothing and
// replaces nothing until its last part is in and it is Opened.
//
// Sessions of check-ins (Session::expires set) lapse: the table drops them
// as later sessions open, so it holds the check-ins of the last TTL, not
// every device ever seen.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ldpgraph::curator {

// An authenticated agent host: the nodes whose credentials it proved.
struct Session {
  std::string token;
  std::string host_name;
  // Ascending, no repeats, not empty.
  std::vector<uint32_t> nodes;
  // A check-in's session (agent.proto CheckIn) lapses at this time: Find
  // no longer knows it, and the table forgets it. Enrolled sessions never
  // lapse.
  absl::Time expires = absl::InfiniteFuture();

  // Call once `nodes` is final: indexes it for Covers.
  void Index() {
    contiguous_ = !nodes.empty() &&
                  nodes.back() - nodes.front() + 1 == nodes.size();
    if (!contiguous_) node_set_.insert(nodes.begin(), nodes.end());
  }
  // O(1) without a memory access per node for a range of ids (a shard, the
  // usual case), a hash lookup otherwise.
  bool Covers(uint32_t node) const {
    if (contiguous_) return node >= nodes.front() && node <= nodes.back();
    return node_set_.contains(node);
  }

 private:
  bool contiguous_ = false;
  absl::flat_hash_set<uint32_t> node_set_;
};

class SessionTable {
 public:
  // num_nodes: node ids are [0, num_nodes). hold_for: how long an
  // enrolment in parts is kept after its latest part.
  explicit SessionTable(uint32_t num_nodes,
                        absl::Duration hold_for = absl::Minutes(2));

  // Registers `session` (its token must be new and its nodes in range and
  // ascending). Drops an earlier session of exactly the same nodes, and the
  // sessions lapsed as of now, and returns how many were replaced (0 or 1).
  int Open(std::shared_ptr<const Session> session);
  // The session of a token; UNAUTHENTICATED if unknown (issued before a
  // restart, replaced, or lapsed).
  absl::StatusOr<std::shared_ptr<const Session>> Find(
      absl::string_view token) const;

  // Enrolments in parts. Hold keeps `partial` (token set, nodes ascending
  // and in range) until its next part; RESOURCE_EXHAUSTED, nothing held, if
  // the enrolments held would then list more than 2 x num_nodes nodes (a
  // host retries later: held enrolments lapse). Resume takes a held
  // enrolment out by its token; FAILED_PRECONDITION if there is none (never
  // held, already resumed, or lapsed: no part for hold_for). Both drop the
  // lapsed enrolments as of `now`.
  absl::Status Hold(std::shared_ptr<Session> partial, absl::Time now);
  absl::StatusOr<std::shared_ptr<Session>> Resume(absl::string_view token,
                                                  absl::Time now);

  // Live sessions and the distinct nodes they cover; O(1).
  uint32_t sessions() const;
  uint32_t enrolled_nodes() const;
  // Sessions dropped because a later enrolment replaced them (monotonic).
  uint64_t replaced() const;
  // Live sessions that lapse (check-ins').
  uint32_t lapsing() const;

 private:
  static uint64_t Fingerprint(const std::vector<uint32_t>& nodes);
  void DropLocked(const std::string& token) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropLapsedLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropExpiredLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct Held {
    std::shared_ptr<Session> session;
    absl::Time lapses;
  };

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const Session>> by_token_
      ABSL_GUARDED_BY(mu_);
  // Node-set fingerprint -> tokens of the sessions with that fingerprint
  // (more than one only on a hash collision).
  absl::flat_hash_map<uint64_t, std::vector<std::string>> by_nodes_
      ABSL_GUARDED_BY(mu_);
  // Sessions covering each node, and how many nodes have at least one.
  std::vector<uint32_t> cover_ ABSL_GUARDED_BY(mu_);
  uint32_t enrolled_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t replaced_ ABSL_GUARDED_BY(mu_) = 0;
  // Sessions that lapse, in the order they lapse (their TTL is one
  // constant), and how many of them are live.
  std::deque<std::pair<absl::Time, std::string>> lapsing_ ABSL_GUARDED_BY(mu_);
  uint32_t lapsing_live_ ABSL_GUARDED_BY(mu_) = 0;
  // Enrolments in parts between two parts, by token, and their nodes.
  const absl::Duration hold_for_;
  absl::flat_hash_map<std::string, Held> held_ ABSL_GUARDED_BY(mu_);
  uint64_t held_nodes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ldpgraph::curator
