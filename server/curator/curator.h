// The curator's core, as a plain library: a facade over components with
// one job each. The gRPC services (server/curator/services.h) only adapt
// requests to these calls; tests and benchmarks call them directly.
//
//   SessionTable  (sessions.h)       which agent host proved which nodes,
//                                    by bearer token; not persisted.
//   CampaignBook  (campaigns.h)      campaigns and their persisted state
//                                    machine (OPEN -> CLOSED by operator,
//                                    quorum or deadline), the tasks they set,
//                                    and report ingestion and validation.
//   Ledger        (ledger.h)         each node's caps and privacy spend per
//                                    attribute, a question charged once;
//                                    rebuilt from the stored answers at
//                                    start-up; refuses a campaign a node
//                                    with known caps could not afford.
//   KeyDirectory  (key_directory.h)  the sealing public keys nodes sent at
//                                    enrolment; a replacement is audited.
//   RelayMailbox  (relay_mailbox.h)  sealed messages between nodes.
//   FleetPlanner  (fleet.h)          shard plans for interchangeable hosts.
//
// The Curator owns the store and the components (those that persist keep
// a pointer to the store; none outlives the Curator), verifies node
// credentials, and composes an enrolment: credentials and caps checked,
// caps stored and recorded in the ledger, keys put in the directory, a
// session opened and the enrolment audited. It does not hand out the
// store: the stages and the admin service reach results and the audit log
// through narrow calls.
//
// Thread-safe. Each component has its own lock (none for the relay, which
// has no state of its own besides the store). Where locks nest, the order
// is: the campaign book's or the key directory's, then the store's, then
// the ledger's. Ingest checks batches of several sessions at once
// (campaigns.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ldpgraph/v1/admin.pb.h"
#include "ldpgraph/v1/agent.pb.h"
#include "server/curator/campaigns.h"
#include "server/curator/check_ins.h"
#include "server/curator/fleet.h"
#include "server/curator/key_directory.h"
#include "server/curator/ledger.h"
#include "server/curator/relay_mailbox.h"
#include "server/curator/sessions.h"
#include "server/store/store.h"

namespace ldpgraph::curator {

class Curator {
 public:
  struct Options {
    // Number of nodes of the curator's graph: node ids are [0, num_nodes).
    uint32_t num_nodes = 0;
    // The operator's node key (raw bytes); credentials are derived from it.
    std::string node_key;
    // Largest batch accepted (reports); larger batches fail whole.
    int max_batch = 65536;
    // Largest nodes per Enrol call (a host with more enrols in parts).
    int max_enrol = 100000;
    // Fleet shard plans (fleet.h): quiet time before a plan is fixed, and
    // how long a holder's lease lasts without a renewal.
    absl::Duration fleet_settle = absl::Seconds(5);
    absl::Duration fleet_lease = absl::Seconds(30);
    size_t fleet_min_hosts = 1;
    // Devices in check-in mode: pacing, intervals, session TTL
    // (check_ins.h); num_nodes is taken from above.
    CheckInDesk::Options check_in;
    // The store is shared with other curator processes (roles.h): Sync
    // brings in what they stored, and CreateCampaign reads the caps nodes
    // declared to any of them before its ledger check.
    bool shared_store = false;
    // Whether ingest closes a campaign at its quorum (a frontend does not:
    // the operator closes, after a Sync).
    bool close_on_quorum = true;
    // An operator's Status adds up the frontends' published status
    // (PublishStatus), those of the last 2 s.
    bool add_frontend_status = false;
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
  // INVALID_ARGUMENT for no nodes, more than max_enrol, or a node twice.
  // Enrolment in parts (agent.proto EnrolRequest.more, continues): each
  // part is checked and recorded as above; a part with `more` returns the
  // session built so far, held aside (not found by FindSession), and the
  // last part opens it. FAILED_PRECONDITION for a `continues` token with
  // no enrolment under way; a failed part ends its enrolment.
  absl::StatusOr<std::shared_ptr<const Session>> Enrol(
      const v1::EnrolRequest& request);
  // A device's check-in (agent.proto CheckIn) at `now`: verifies every
  // credential as Enrol does (nothing recorded on a failure;
  // INVALID_ARGUMENT for no nodes, more than kMaxCheckInNodes or a node
  // twice), records caps and keys that changed (audited as "check-in"; an
  // unchanged device writes nothing), then asks the desk: PACED (nothing
  // opened), IDLE (no task waits for the nodes), or SERVED with the tasks
  // and a session that lapses after the desk's session TTL.
  static constexpr int kMaxCheckInNodes = 1000;
  struct CheckInResult {
    CheckInDesk::Outcome outcome = CheckInDesk::Outcome::kIdle;
    std::shared_ptr<const Session> session;  // kServed only
    std::vector<v1::Task> tasks;             // kServed only
    absl::Duration retry_after;
  };
  absl::StatusOr<CheckInResult> CheckIn(const v1::CheckInRequest& request,
                                        absl::Time now);
  const CheckInDesk& check_in_desk() const { return *desk_; }

  // The session of a token; UNAUTHENTICATED if unknown (issued before a
  // restart, or replaced).
  absl::StatusOr<std::shared_ptr<const Session>> FindSession(
      absl::string_view token) const;
  // One task per open campaign, not past its deadline, that still waits
  // for some of the session's nodes.
  std::vector<v1::Task> PendingTasks(const Session& session) const;
  // Increases whenever a campaign opens or closes. WaitForChange blocks
  // until the generation differs from `seen` or the deadline passes, and
  // returns the current generation.
  uint64_t generation() const;
  uint64_t WaitForChange(uint64_t seen, absl::Time deadline) const;

  // Validates and stores a batch; one result per report, in order. The
  // accepted reports are durable when this returns OK. An error status
  // (INVALID_ARGUMENT for an oversized batch, or a store failure: INTERNAL,
  // RESOURCE_EXHAUSTED for a full disk, UNAVAILABLE while another connection
  // holds the store's lock) means nothing of the batch was stored and
  // nothing was acknowledged.
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

  // --- several processes on one store (roles.h) ------------------------------
  // Brings in campaigns other processes opened or closed and the answers
  // they stored (CampaignBook::Sync); with close_quorate, then closes the
  // campaigns that reached their quorum. Store errors.
  absl::StatusOr<CampaignBook::SyncCounts> Sync(bool close_quorate);
  // A frontend's Status, stored under `name` for the operator's
  // (store.h, PutFrontendStatus).
  absl::Status PublishStatus(const std::string& name);
  // Whether this process holds the store's operator lease (store.h,
  // TryOperatorLease; taking it if free).
  absl::StatusOr<bool> HoldsOperatorLease() { return store_->TryOperatorLease(); }
  // The store, for logs: "sqlite <path>" or "postgres <host:port/db>".
  std::string DescribeStore() const { return store_->Describe(); }

  // --- operator -------------------------------------------------------------
  // Validates the request (INVALID_ARGUMENT naming what is wrong), refuses
  // a campaign that a targeted node with known caps could not afford
  // (FAILED_PRECONDITION, campaigns.h), and stores it open.
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
  // The ledger's budgets of `nodes` (ledger.h); for no nodes, those of
  // every node that declared caps or spent anything.
  std::vector<v1::NodeBudget> GetBudgets(
      const std::vector<uint32_t>& nodes) const;

  // Stored reports of a campaign as (node, report), ascending by node;
  // refusals excluded. NOT_FOUND for an unknown campaign.
  absl::StatusOr<std::vector<std::pair<uint32_t, v1::Report>>> Reports(
      absl::string_view id) const;

  // Number of open campaigns (a gauge).
  int open_campaigns() const;
  // Campaigns by state, stored answers, and the open campaigns' progress
  // (CampaignBook::Tally), counted now.
  CampaignBook::Tally CampaignTally() const;
  // What the core knows for GetStatus: sessions, enrolled nodes, task
  // streams, campaigns by state, stored answers and the ingest counters;
  // with add_frontend_status, plus the frontends' (admin.proto,
  // CuratorStatus.frontends; a store error leaves them out).
  // The caller fills the rest (start time, graph, results, insecure).
  v1::CuratorStatus Status() const;
  // Task streams open now; the Subscribe service counts them.
  std::atomic<int>& task_streams() { return task_streams_; }
  const IngestCounters& counters() const { return campaigns_->counters(); }
  uint32_t num_nodes() const { return options_.num_nodes; }

  // --- pipeline results and the audit log -----------------------------------
  // For the stages (stages.h) and the admin service, with the store's
  // contracts (store.h). AddResult assigns the id (1, 2, ...) and builds
  // the serialised v1::StageResult with it; matrix_path names the result's
  // matrix file, or is empty. GetResult: NOT_FOUND for an unknown id.
  absl::StatusOr<int64_t> AddResult(
      absl::FunctionRef<std::string(int64_t id)> record_for_id,
      const std::string& matrix_path);
  absl::StatusOr<std::vector<store::ResultRow>> ListResults() const;
  absl::StatusOr<store::ResultRow> GetResult(int64_t id) const;
  // Appends to the audit log, stamped with the time of the call.
  absl::Status Audit(const std::string& actor, const std::string& action,
                     const std::string& details_json);
  // Audit rows with sequence > after_sequence, ascending, at most limit
  // (> 0; INVALID_ARGUMENT otherwise).
  absl::StatusOr<std::vector<store::AuditRow>> ListAudit(int64_t after_sequence,
                                                         int limit) const;

  // Parses "c<id>"; INVALID_ARGUMENT otherwise.
  static absl::StatusOr<int64_t> ParseCampaignId(absl::string_view id) {
    return CampaignBook::ParseId(id);
  }

  ~Curator();

  // What the ledger holds now, for the metrics (ledger.h): per attribute,
  // what each node that spent on it spent, and the nodes at a cap. One pass
  // over the ledger under its lock, allocating per attribute, never per
  // node (cheap at a million nodes: a scrape).
  using LedgerSummary = curator::LedgerSummary;
  LedgerSummary PrivacySummary() const;

 private:
  Curator(std::unique_ptr<store::CuratorStore> store, Options options);

  // The caps nodes declared, from the store into the ledger.
  absl::Status LoadCaps();
  // A node credential: INVALID_ARGUMENT for a node outside the graph,
  // UNAUTHENTICATED if the secret is not the node's.
  absl::Status CheckCredential(const v1::NodeCredential& credential) const;
  // What Enrol and CheckIn check of each node: its credential, then its
  // caps and sealing key when given.
  absl::Status CheckNode(const v1::NodeCredential& node) const;
  // Records the caps and keys of `nodes` that changed, with one audit
  // entry `action` when anything did (curator.cc).
  absl::Status RecordCapsAndKeys(
      const google::protobuf::RepeatedPtrField<v1::NodeCredential>& nodes,
      const std::string& actor);

  const Options options_;
  // Declared before the components, so destroyed after them: they point
  // into it (and the book into the ledger).
  std::unique_ptr<store::CuratorStore> store_;
  std::atomic<int> task_streams_{0};
  SessionTable sessions_;
  Ledger ledger_;
  std::unique_ptr<CampaignBook> campaigns_;
  std::unique_ptr<KeyDirectory> keys_;
  std::unique_ptr<RelayMailbox> relay_;
  std::unique_ptr<FleetPlanner> fleet_;
  std::unique_ptr<CheckInDesk> desk_;
};

}  // namespace ldpgraph::curator
