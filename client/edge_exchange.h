// Neighbour substitution in a real deployment: the agent host's side of the
// exchange (common/edges/substitution.h, MECHANISM_KIND_EDGE_SUBSTITUTION).
//
// When a substitution task arrives, the host runs one SubstitutionNode per
// node of the task that it holds, on a thread of the exchange's own (the
// host keeps serving its other tasks). Every message between two agents
// goes through the curator's relay, sealed end to end (common/crypto/
// sealed.h) under the context
//     "edge-exchange|<campaign_id>|<round>|<from>|<to>"
// (ExchangeContext), so the curator reads no payload and cannot move a
// message to another campaign, round or pair of nodes. Nodes of the same
// host talk through the relay too: the curator sees the same pattern for
// every node.
//
// One exchange, for the host's nodes in one campaign:
//   1. Budget (AgentShard::BeginSubstitution): each node's features are the
//      features question of the task's feature spec (memo or fresh, durable
//      before it leaves); a node that refuses sends its Refusal at once and
//      takes part as an abstaining node, so its neighbours stop waiting; a
//      node that answered the same question before sends its stored answer
//      at once and still takes part, with its stored dropped set.
//   2. Keys: the neighbours' public keys from the curator's directory
//      (AgentService.PublicKeys), one SealingKey per direction and pair,
//      derived once. A neighbour without a (valid) key is absent from the
//      start.
//   3. Rounds: each node's outgoing messages are sealed and relayed in
//      batches (AgentService.Relay); the host polls its campaign's messages
//      (AgentService.FetchSealed with campaign_id, tracking after_sequence
//      from 0, so that messages relayed before the task arrived, or before a
//      restart, are read too), opens them and delivers them. A message that
//      does not open (tampered, forged, another context), does not parse,
//      or is refused by the node is logged and counted, never fatal; one
//      for a node that is done or not in the exchange is ignored. A node
//      whose neighbours stay silent for round_timeout_ms in a round marks
//      them absent and moves on (time while the curator is unreachable does
//      not count).
//   4. A node that is done answers the edges question with its perturbed
//      list (AgentShard::FinishSubstitution: durable first) and reports it
//      through the normal Report path.
//
// Randomness: a node's part in an exchange draws from a ChaCha20 stream
// keyed by HKDF-SHA256 of the node's private key and the campaign id
// (ExchangeRandomSource), not from its perturbation source. A host that
// restarts mid-exchange therefore sends exactly the messages it sent before
// (its features are memoized), which its neighbours recognise as repeats,
// and reaches the same result. The features themselves come from the node's
// budget, as for any features campaign.
//
// Framing: a sealed box longer than the relay's bound (65536 bytes) is split
// over several SealedMessages, each ciphertext
//     0xF1 || message id (8 bytes) || part index (2 bytes, big endian)
//          || part count (2 bytes) || the part's bytes,
// at most 256 parts; the recipient reassembles the box by (sender, message
// id) before opening it. A whole box starts with sealed.h's version byte
// 0x01. The curator sees the parts' sizes, as it sees a box's.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/agent.h"
#include "common/crypto/sealed.h"
#include "common/edges/substitution.h"
#include "common/random/random.h"
#include "ldpgraph/v1/agent.pb.h"

namespace ldpgraph::agent {

// "edge-exchange|<campaign>|<round>|<from>|<to>".
std::string ExchangeContext(absl::string_view campaign, uint32_t round,
                            uint32_t from, uint32_t to);

// A node's randomness in one exchange: the ChaCha20 stream
// (KeyedChaCha20Random, common/random/random.h) keyed by
// HKDF-SHA256(ikm = private key, salt = "ldpgraph-exchange-rng-v1",
// info = campaign). Deterministic for a (key, campaign), independent across
// campaigns, secure as long as the private key is secret. INTERNAL if
// OpenSSL fails.
absl::StatusOr<std::unique_ptr<RandomSource>> ExchangeRandomSource(
    const crypto::KeyPair& key, absl::string_view campaign);

// What the exchange needs of the curator: the agent API, in the host's
// current session. Implementations are thread-safe; errors are the
// call's (UNAVAILABLE while the host has no session or the curator is
// unreachable: the runner retries).
class ExchangeTransport {
 public:
  virtual ~ExchangeTransport() = default;
  // The public keys of nodes that have one (AgentService.PublicKeys); at
  // most 100000 nodes per call.
  virtual absl::StatusOr<std::vector<std::pair<uint32_t, std::string>>>
  PublicKeys(const std::vector<uint32_t>& nodes) = 0;
  // Stores messages for delivery (AgentService.Relay): at most 4096, each
  // ciphertext at most 65536 bytes.
  virtual absl::Status Relay(const std::vector<v1::SealedMessage>& messages) = 0;
  // Messages of `campaign` to the host's nodes with sequence > after,
  // ascending, at most max (AgentService.FetchSealed).
  virtual absl::StatusOr<std::vector<v1::SealedMessage>> Fetch(
      const std::string& campaign, uint64_t after, uint32_t max) = 0;
  // Sends reports through the Report stream; OK once the curator has
  // acknowledged each (stored, a duplicate, or rejected: the transport
  // counts and logs rejections).
  virtual absl::Status Report(std::vector<v1::Report> reports) = 0;
};

struct ExchangeOptions {
  // Pause between polls when nothing happened.
  absl::Duration poll_interval = absl::Milliseconds(20);
  // Retry of a failed transport call: initial, doubling up to max.
  absl::Duration retry_initial = absl::Milliseconds(100);
  absl::Duration retry_max = absl::Seconds(5);
  // Per Relay call: messages (<= 4096) and ciphertext bytes.
  int relay_batch = 4096;
  size_t relay_bytes = size_t{16} << 20;
  // The relay's bound on one ciphertext; longer boxes are split.
  size_t max_ciphertext = 65536;
  // Per FetchSealed call.
  uint32_t fetch_batch = 1024;
  // Bytes of partly received split boxes held per exchange; beyond it the
  // oldest are dropped (counted as rejected).
  size_t max_reassembly_bytes = size_t{64} << 20;
  // Where log lines go (one call per line); default: stderr with a prefix.
  std::function<void(const std::string&)> log;
};

// Totals over every exchange of a runner, for metrics and tests.
struct ExchangeCounters {
  std::atomic<uint64_t> exchanges_started{0};
  std::atomic<uint64_t> exchanges_finished{0};
  std::atomic<uint64_t> messages_sent{0};       // sealed messages relayed
  std::atomic<uint64_t> messages_received{0};   // opened and delivered
  // Fetched messages that failed to open, parse or deliver.
  std::atomic<uint64_t> messages_rejected{0};
  // Fetched messages for a node not in the exchange or already done.
  std::atomic<uint64_t> messages_ignored{0};
  std::atomic<uint64_t> neighbours_timed_out{0};
  std::atomic<uint64_t> nodes_done{0};
  std::atomic<uint64_t> reports_sent{0};  // refusals, memo hits, results
  std::atomic<uint64_t> transport_errors{0};
};

// The outcome of one node of a finished (or running) exchange.
struct ExchangeNodeOutcome {
  NodeAgent::SubstitutionStart::Role role =
      NodeAgent::SubstitutionStart::Role::kRefuse;
  bool abstained = false;  // took part as an abstaining node
  bool done = false;
  edges::SubstitutionStats stats;  // when done and not abstaining
  std::vector<uint32_t> result;    // the protocol's list, when done
};

// Runs the host's substitution exchanges, one thread each. Thread-safe.
// shard and transport must outlive the runner.
class ExchangeRunner {
 public:
  ExchangeRunner(AgentShard* shard, ExchangeTransport* transport,
                 ExchangeOptions options = {});
  // Stops and joins every exchange.
  ~ExchangeRunner();
  ExchangeRunner(const ExchangeRunner&) = delete;
  ExchangeRunner& operator=(const ExchangeRunner&) = delete;

  // Starts the exchange of a substitution task on a thread of its own and
  // returns at once. A task for a campaign whose exchange is still running
  // is ignored (the curator re-sends tasks after a reconnect); one for a
  // campaign whose exchange finished starts a new exchange (its nodes
  // answer from their memo). INVALID_ARGUMENT for a task of another
  // mechanism; FAILED_PRECONDITION after Stop.
  absl::Status Start(const v1::Task& task);
  // Asks every exchange to stop and joins them. Idempotent.
  void Stop();

  // Exchanges running now.
  int running() const;
  const ExchangeCounters& counters() const { return counters_; }
  // Per node outcome of the campaign's latest exchange (empty if none).
  std::map<uint32_t, ExchangeNodeOutcome> Outcomes(
      const std::string& campaign) const;
  // Waits until no exchange runs; false on timeout.
  bool WaitIdle(absl::Duration timeout) const;

 private:
  class Exchange;
  struct Entry {
    std::shared_ptr<Exchange> exchange;
    std::thread thread;
    std::atomic<bool> finished{false};
  };
  void Log(const std::string& line) const;
  void ReapLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  AgentShard* const shard_;
  ExchangeTransport* const transport_;
  const ExchangeOptions options_;
  ExchangeCounters counters_;
  std::atomic<bool> stopping_{false};
  mutable absl::Mutex mu_;
  // The latest exchange of each campaign.
  std::map<std::string, std::unique_ptr<Entry>> exchanges_ ABSL_GUARDED_BY(mu_);
  // Threads of replaced exchanges, joined by ReapLocked / Stop.
  std::vector<std::unique_ptr<Entry>> retired_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ldpgraph::agent
