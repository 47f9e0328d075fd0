// The curator's core, as a plain library: sessions, campaigns and their
// persisted state machine, report ingestion and validation, and the ledger.
// The gRPC services (server/curator/services.h) only adapt requests to these
// calls; tests and benchmarks call them directly.
//
// Campaign state machine (persisted in the store on every transition):
//   OPEN --(operator | quorum reached | deadline passed)--> CLOSED.
// An open campaign asks its targeted nodes one question (attribute,
// mechanism, parameters, epsilon). Each node answers at most once: a report
// or a refusal. A report is validated against the campaign (mechanism,
// dimension, indices, value domain, number of sampled dimensions) and stored
// durably before it is acknowledged.
//
// Ledger: mirrors what each node has spent. A node's spend on an attribute
// is the sum of the epsilons of the distinct questions it has answered with
// a report (a question repeated identically is answered from the agent's
// memo and costs nothing, so it is charged once). A neighbour substitution
// report answers two questions, charged as the agent charges them: eps_e on
// "edges", and the campaign's feature sub-spec as a "features" question
// (the same question as a features campaign with that spec, so a node that
// answered both is charged eps_x once; wire::CampaignQuestions).
//
// Key directory: the sealing public key each node sent at enrolment
// (NodeCredential.sealing_key), stored and served to authenticated
// sessions (PublicKeys). A node that enrols with another key replaces its
// old one, and the replacement is audited. The ledger is rebuilt from
// the stored answers at start-up, so it can neither lose nor double-count a
// report across a crash. CreateCampaign refuses a campaign that a node
// whose caps are known could not afford, counting what that node has spent
// and what the open campaigns still ask of it.
//
// Thread-safe. Ingest takes the state lock once per batch.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/mechanisms/feature_mechanism.h"
#include "ldpgraph/v1/admin.pb.h"
#include "ldpgraph/v1/agent.pb.h"
#include "server/curator/fleet.h"
#include "server/curator/key_directory.h"
#include "server/curator/ledger.h"
#include "server/curator/relay_mailbox.h"
#include "server/curator/sessions.h"
#include "server/store/store.h"

namespace ldpgraph::curator {

// Counters the service exposes as metrics; monotonic.
struct IngestCounters {
  std::atomic<uint64_t> reports_accepted{0};
  std::atomic<uint64_t> reports_duplicate{0};
  std::atomic<uint64_t> refusals{0};
  // The same refusals by v1::RefusalReason (index = the reason's value; 0
  // for a value this build does not know, as UNSPECIFIED is never stored).
  std::atomic<uint64_t> refusals_by_reason[v1::RefusalReason_ARRAYSIZE] = {};
  // Rejected reports by gRPC code (index = code, 0..16).
  std::atomic<uint64_t> rejected[17] = {};
  std::atomic<uint64_t> report_bytes{0};
};

class Curator {
 public:
  struct Options {
    // Number of nodes of the curator's graph: node ids are [0, num_nodes).
    uint32_t num_nodes = 0;
    // The operator's node key (raw bytes); credentials are derived from it.
    std::string node_key;
    // Largest batch accepted (reports); larger batches fail whole.
    int max_batch = 65536;
    // Largest nodes per enrolment.
    int max_enrol = 100000;
    // Fleet shard plans (fleet.h): quiet time before a plan is fixed, and
    // how long a holder's lease lasts without a renewal.
    absl::Duration fleet_settle = absl::Seconds(5);
    absl::Duration fleet_lease = absl::Seconds(30);
    size_t fleet_min_hosts = 1;
  };

  // Opens the curator over an opened store: loads campaigns, rebuilds the
  // progress of every campaign and the ledger from the stored answers, and
  // closes campaigns whose deadline passed while it was down.
  static absl::StatusOr<std::unique_ptr<Curator>> Open(
      std::unique_ptr<store::CuratorStore> store, Options options);

  // --- agents ---------------------------------------------------------------
  // Verifies every credential (UNAUTHENTICATED naming the first bad node,
  // nothing opened), records the declared caps, opens a session. A session
  // of exactly the same nodes opened earlier is replaced (sessions.h).
  absl::StatusOr<std::shared_ptr<const Session>> Enrol(
      const v1::EnrolRequest& request);
  // The session of a token; UNAUTHENTICATED if unknown (issued before a
  // restart, or replaced).
  absl::StatusOr<std::shared_ptr<const Session>> FindSession(
      absl::string_view token) const;
  // One task per open campaign that still waits for some of the session's
  // nodes.
  std::vector<v1::Task> PendingTasks(const Session& session) const;
  // Increases whenever a campaign opens or closes. WaitForChange blocks
  // until the generation differs from `seen` or the deadline passes, and
  // returns the current generation.
  uint64_t generation() const;
  uint64_t WaitForChange(uint64_t seen, absl::Time deadline) const;

  // Validates and stores a batch; one result per report, in order. The
  // accepted reports are durable when this returns OK. An error status
  // (INVALID_ARGUMENT for an oversized batch, or a store failure: INTERNAL,
  // RESOURCE_EXHAUSTED for a full disk) means nothing of the batch was
  // stored and nothing was acknowledged.
  absl::StatusOr<v1::ReportAck> Ingest(const Session& session,
                                       const v1::ReportBatch& batch);
  // As above, into *ack (cleared first; it may live on the batch's arena).
  absl::Status Ingest(const Session& session, const v1::ReportBatch& batch,
                      v1::ReportAck* ack);

  // A shard for an interchangeable agent host (fleet.h): verifies the
  // proof credential (UNAUTHENTICATED if it does not verify, INVALID_ARGUMENT
  // for a node out of range), then claims.
  absl::StatusOr<FleetPlanner::Grant> ClaimShard(
      const v1::ClaimShardRequest& request, absl::Time now);

  // Sealed messages: the sender must be one of the session's nodes and the
  // recipient a node of the graph.
  absl::StatusOr<int> Relay(const Session& session,
                            const v1::RelayRequest& request);
  // Messages to the session's nodes after `after`, at most limit (0 or
  // beyond 1024: 1024), only `campaign`'s when not empty.
  absl::StatusOr<std::vector<v1::SealedMessage>> FetchSealed(
      const Session& session, uint64_t after, int limit,
      const std::string& campaign = "");
  // The sealing public keys of nodes, in request order, leaving out nodes
  // without one. INVALID_ARGUMENT for more than 100000 ids or an id outside
  // the graph. Any session may ask: the keys are public.
  absl::StatusOr<std::vector<v1::NodeKey>> PublicKeys(
      const Session& session, const std::vector<uint32_t>& nodes) const;

  // --- operator -------------------------------------------------------------
  absl::StatusOr<v1::Campaign> CreateCampaign(
      const v1::CreateCampaignRequest& request);
  std::vector<v1::Campaign> ListCampaigns() const;
  absl::StatusOr<v1::Campaign> GetCampaign(absl::string_view id) const;
  // Closes an open campaign (reason "operator"); a closed one is returned
  // unchanged.
  absl::StatusOr<v1::Campaign> CloseCampaign(absl::string_view id);
  // Closes every open campaign whose deadline is <= now. Returns how many.
  absl::StatusOr<int> CloseExpired(absl::Time now);
  absl::StatusOr<std::vector<v1::RefusalRecord>> ListRefusals(
      absl::string_view id) const;
  std::vector<v1::NodeBudget> GetBudgets(
      const std::vector<uint32_t>& nodes) const;

  // Stored reports of a campaign as (node, report), ascending by node;
  // refusals excluded. NOT_FOUND for an unknown campaign.
  absl::StatusOr<std::vector<std::pair<uint32_t, v1::Report>>> Reports(
      absl::string_view id) const;

  // Number of open campaigns (a gauge).
  int open_campaigns() const;
  // What the core knows for GetStatus: sessions, enrolled nodes, task
  // streams, campaigns by state, stored answers and the ingest counters.
  // The caller fills the rest (start time, graph, results, insecure).
  v1::CuratorStatus Status() const;
  // Task streams open now; the Subscribe service counts them.
  std::atomic<int>& task_streams() { return task_streams_; }
  const IngestCounters& counters() const { return counters_; }
  store::CuratorStore& store() { return *store_; }
  uint32_t num_nodes() const { return options_.num_nodes; }

  // Parses "c<id>"; INVALID_ARGUMENT otherwise.
  static absl::StatusOr<int64_t> ParseCampaignId(absl::string_view id);

  ~Curator();

  // What the ledger holds now, for the metrics (ledger.h): per attribute,
  // what each node that spent on it spent, and the nodes at a cap. One pass
  // over the ledger under its lock, allocating per attribute, never per
  // node (cheap at a million nodes: a scrape).
  using LedgerSummary = curator::LedgerSummary;
  LedgerSummary PrivacySummary() const;

 private:
  struct CampaignState;
  Curator(std::unique_ptr<store::CuratorStore> store, Options options);

  absl::Status Load();
  // A node credential: INVALID_ARGUMENT for a node outside the graph,
  // UNAUTHENTICATED if the secret is not the node's.
  absl::Status CheckCredential(const v1::NodeCredential& credential) const;
  // Records a stored answer in memory: progress and, for a report, the
  // ledger.
  void ApplyAnswer(CampaignState& c, uint32_t node, bool refusal)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CloseLocked(CampaignState& c, absl::string_view reason,
                           absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::Campaign ToProto(const CampaignState& c) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Checks one report against its campaign; OK or the status to send.
  // *campaign: in, the previous report's campaign (a lookup cache, may be
  // null); out, this report's campaign (null if unknown).
  absl::Status Check(const Session& session, const v1::Report& report,
                     int64_t now_ms, CampaignState** campaign)
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  CampaignState* FindLocked(int64_t id) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::StatusOr<CampaignState*> FindLocked(absl::string_view id) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void BumpGeneration() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  std::unique_ptr<store::CuratorStore> store_;
  IngestCounters counters_;
  std::atomic<int> task_streams_{0};
  std::unique_ptr<FleetPlanner> fleet_;

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<CampaignState>> campaigns_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  Ledger ledger_;

  std::unique_ptr<KeyDirectory> keys_;
  std::unique_ptr<RelayMailbox> relay_;
  SessionTable sessions_;
};

}  // namespace ldpgraph::curator
