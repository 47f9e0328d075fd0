// The curator's campaigns: their records and persisted state machine, the
// tasks they set, and the reports that answer them. One job: a campaign
// from its creation to its close, and every answer to it.
//
// State machine (persisted in the store on every transition):
//   OPEN --(operator | quorum reached | deadline passed)--> CLOSED.
// An open campaign asks its targeted nodes one question (attribute,
// mechanism, parameters, epsilon). Each node answers at most once: a report
// or a refusal. A report is validated against the campaign (mechanism,
// dimension, indices, value domain, number of sampled dimensions) and stored
// durably before it is acknowledged. The generation counts openings and
// closings, so task streams can wait for a change (WaitForChange).
//
// A campaign's spec is compiled once (wire::CompiledSpec), when the
// campaign is created or loaded (Open, Sync), and kept with it, as an agent
// compiles a task's spec once for all its nodes: the question key and the
// charges derive from it, ingest checks feature reports with its mechanism,
// and the stages estimate with it (Spec). Nothing builds the mechanism
// again.
//
// The book charges the ledger (ledger.h) for every stored report, with the
// questions the campaign asks (as wire::CampaignQuestions lists them: a
// neighbour substitution report answers an "edges" and a "features"
// question), and asks it whether the targeted nodes can afford a new
// campaign. At Open it rebuilds every campaign's progress, and the ledger's
// charges, from the stored answers, so neither can lose nor double-count a
// report across a crash.
//
// Thread-safe. Locking: one reader/writer lock over the campaigns. Ingest
// validates a batch and appends it to the store under the lock in shared
// mode, so batches of several sessions are checked at once, and takes it
// exclusively only to apply the outcomes (progress, ledger, quorum close);
// every other change (create, close) takes it exclusively. Lock order: this
// lock, then the store's, then the ledger's (Open charges the ledger from
// inside a store scan).
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ldpgraph/v1/admin.pb.h"
#include "common/wire/codec.h"
#include "ldpgraph/v1/agent.pb.h"
#include "server/curator/ledger.h"
#include "server/curator/sessions.h"
#include "server/store/store.h"

namespace ldpgraph::curator {

// Counters the service exposes as metrics; monotonic.
struct IngestCounters {
  std::atomic<uint64_t> reports_accepted{0};
  std::atomic<uint64_t> reports_duplicate{0};
  // Refusals stored, by v1::RefusalReason (index = the reason's value; only
  // known reasons are stored, so slot 0, UNSPECIFIED, stays 0).
  std::atomic<uint64_t> refusals_by_reason[v1::RefusalReason_ARRAYSIZE] = {};
  // Refusals stored, whatever the reason.
  uint64_t refusals() const {
    uint64_t n = 0;
    for (const auto& r : refusals_by_reason) n += r.load();
    return n;
  }
  // Rejected reports by gRPC code (index = code, 0..16).
  std::atomic<uint64_t> rejected[17] = {};
  std::atomic<uint64_t> report_bytes{0};
};

// The most node ids a campaign's explicit node list may hold
// (NodeSelection.node_ids): every Campaign reply echoes the list, so it is
// bounded (at most about 5 MB); a larger selection is a range or all.
inline constexpr int kMaxListedNodes = 1000000;

class CampaignBook {
 public:
  struct Options {
    // Node ids are [0, num_nodes); must be > 0.
    uint32_t num_nodes = 0;
    // Largest batch accepted (reports); larger batches fail whole.
    int max_batch = 65536;
    // Whether Ingest closes a campaign that reaches its quorum. A frontend
    // (roles.h) does not: it sees only the reports it took until a Sync,
    // and the operator closes (CloseQuorate).
    bool close_on_quorum = true;
  };

  // Loads the campaigns of `store`, and rebuilds their progress and the
  // charges of `ledger` from the stored answers. Campaigns past their
  // deadline stay open until CloseExpired. `store` and `ledger` must
  // outlive the book. DATA_LOSS for a stored campaign that does not parse
  // or an answer to an unknown campaign; store errors otherwise.
  static absl::StatusOr<std::unique_ptr<CampaignBook>> Open(
      store::CuratorStore* store, Ledger* ledger, Options options);
  ~CampaignBook();

  // Parses "c<id>"; INVALID_ARGUMENT otherwise.
  static absl::StatusOr<int64_t> ParseId(absl::string_view id);

  // --- operator -------------------------------------------------------------
  // Validates the request (INVALID_ARGUMENT naming what is wrong), checks
  // that every targeted node whose caps are known can afford the campaign
  // on top of what it spent and what the open campaigns still ask of it
  // (FAILED_PRECONDITION counting the nodes that cannot and naming the
  // first), then stores and audits the campaign, open. An explicit node
  // list of more than kMaxListedNodes ids is INVALID_ARGUMENT.
  absl::StatusOr<v1::Campaign> Create(const v1::CreateCampaignRequest& request);
  // Newest first: those whose store id (c<id>) is < before_id, at most
  // limit (a page: the admin listing's).
  std::vector<v1::Campaign> List(
      int64_t before_id = std::numeric_limits<int64_t>::max(),
      size_t limit = std::numeric_limits<size_t>::max()) const;
  // INVALID_ARGUMENT for a malformed id, NOT_FOUND for an unknown one (as
  // every call taking an id).
  absl::StatusOr<v1::Campaign> Get(absl::string_view id) const;
  // The campaign's spec as compiled when it was created or loaded: its
  // mechanism (the estimator of a features campaign's reports), its key.
  // Immutable, and shared: it stays valid after the book is gone.
  absl::StatusOr<std::shared_ptr<const wire::CompiledSpec>> Spec(
      absl::string_view id) const;
  // Closes an open campaign (reason "operator"); a closed one is returned
  // unchanged.
  absl::StatusOr<v1::Campaign> Close(absl::string_view id);
  // Closes every open campaign whose deadline is <= now. Returns how many.
  absl::StatusOr<int> CloseExpired(absl::Time now);
  // Stored refusals of a campaign, ascending by node: those of nodes >=
  // first_node, at most limit (> 0; a page: the admin listing's), reading
  // only the answers they are (store.h, ListAnswers).
  absl::StatusOr<std::vector<v1::RefusalRecord>> Refusals(
      absl::string_view id, uint32_t first_node = 0,
      int limit = std::numeric_limits<int>::max()) const;
  // Stored reports of a campaign as (node, report), ascending by node;
  // refusals excluded.
  absl::StatusOr<std::vector<std::pair<uint32_t, v1::Report>>> Reports(
      absl::string_view id) const;

  // --- agents ---------------------------------------------------------------
  // One task per open campaign, not past its deadline, that still waits
  // for some of the session's nodes.
  std::vector<v1::Task> PendingTasks(const Session& session) const;
  // Increases whenever a campaign opens or closes. WaitForChange blocks
  // until the generation differs from `seen` or the deadline passes, and
  // returns the current generation.
  uint64_t generation() const;
  uint64_t WaitForChange(uint64_t seen, absl::Time deadline) const;
  // Validates and stores a batch into *ack (cleared first): one result per
  // report, in order. The accepted reports are durable when this returns
  // OK. An error status (INVALID_ARGUMENT for a batch over max_batch, or a
  // store failure: INTERNAL, RESOURCE_EXHAUSTED for a full disk, UNAVAILABLE
  // while another connection holds the store's lock) means nothing of the
  // batch was stored and nothing was acknowledged.
  absl::Status Ingest(const Session& session, const v1::ReportBatch& batch,
                      v1::ReportAck* ack);

  // --- several curator processes on one store -------------------------------
  // Brings in what other processes stored (roles.h): campaigns created or
  // closed, and answers (their progress, and the ledger's charges, each
  // answer once). What a frontend does to learn of new tasks, and the
  // operator to see every frontend's reports. DATA_LOSS for a record that
  // does not parse or an answer to an unknown campaign; store errors.
  struct SyncCounts {
    int campaigns_opened = 0, campaigns_closed = 0;
    uint64_t answers = 0;
  };
  absl::StatusOr<SyncCounts> Sync();
  // Closes every open campaign that reached its quorum (reason "quorum"):
  // the operator's check after a Sync, since a frontend closes only on the
  // reports it took. Returns how many.
  absl::StatusOr<int> CloseQuorate(absl::Time now);

  // --- status ---------------------------------------------------------------
  struct Tally {
    uint32_t open = 0, closed = 0;
    uint64_t reports = 0, refusals = 0;  // stored
    // The open campaigns' progress: nodes they target (a node once per
    // campaign), and the reports and refusals stored for them.
    uint64_t open_targeted = 0, open_reports = 0, open_refusals = 0;
  };
  Tally Count() const;
  int open_campaigns() const;
  const IngestCounters& counters() const { return counters_; }

 private:
  struct CampaignState;
  // A batch as checked under the shared lock (see Ingest).
  struct CheckedBatch;

  CampaignBook(store::CuratorStore* store, Ledger* ledger, Options options);

  absl::Status Load() ABSL_LOCKS_EXCLUDED(mu_);
  // The in-memory state of a stored campaign, its progress not yet rebuilt.
  absl::StatusOr<std::unique_ptr<CampaignState>> Restore(
      const store::CampaignRow& row);

  // Create, in steps: the request's checks (all but the node selection),
  // which compile its spec, and the selection's targets (ascending), both
  // INVALID_ARGUMENT; the ledger's check; storing the new campaign.
  absl::StatusOr<wire::CompiledSpec> ValidateRequest(
      const v1::CreateCampaignRequest& request, int64_t now_ms) const;
  // A campaign's state from its attribute and compiled spec: the
  // attribute's name, the key, the charges (interned in the ledger).
  // INVALID_ARGUMENT for an unknown attribute.
  absl::StatusOr<std::unique_ptr<CampaignState>> NewState(
      v1::Attribute attribute, wire::CompiledSpec spec) const;
  absl::StatusOr<std::vector<uint32_t>> Targets(
      const v1::NodeSelection& selection) const;
  absl::Status CheckAffordableLocked(const CampaignState& state,
                                     const std::vector<uint32_t>& targets,
                                     double epsilon) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AddLocked(std::unique_ptr<CampaignState> state,
                         const v1::CreateCampaignRequest& request,
                         const std::vector<uint32_t>& targets, int64_t now_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Records a stored answer in the campaign's progress. True for a report
  // recorded now (the ledger is then due its charges).
  bool ApplyAnswerLocked(CampaignState& c, uint32_t node, bool refusal)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An answer read from the store (Load, Sync): recorded as above. The
  // campaign when the ledger is due its charges, else null; an answer of an
  // unknown campaign or node sets *status to DATA_LOSS (once) and is skipped.
  CampaignState* ApplyStoredLocked(int64_t campaign, uint32_t node,
                                   bool refusal, absl::Status* status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Open, with a quorum, and heard from enough of its targets.
  bool QuorateLocked(const CampaignState& c) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Status CloseLocked(CampaignState& c, absl::string_view reason,
                           absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::Campaign ToProto(const CampaignState& c) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // Ingest, in steps: each report checked and the valid ones appended to
  // the store, under the shared lock; then, under the exclusive lock, the
  // outcomes into the ack, the progress, the ledger and quorum closes.
  absl::Status CheckAndAppendShared(const Session& session,
                                    const v1::ReportBatch& batch,
                                    CheckedBatch& checked)
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Status ApplyLocked(const v1::ReportBatch& batch,
                           CheckedBatch& checked, v1::ReportAck& ack)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Checks one report against its campaign; OK or the status to send.
  // *campaign: in, the previous report's campaign (a lookup cache, may be
  // null); out, this report's campaign (null if unknown).
  absl::Status CheckReport(const Session& session, const v1::Report& report,
                           int64_t now_ms, CampaignState** campaign) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  CampaignState* FindLocked(int64_t id) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::StatusOr<CampaignState*> FindLocked(absl::string_view id) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The store id of a campaign, looked up under the lock.
  absl::StatusOr<int64_t> StoredId(absl::string_view id) const
      ABSL_LOCKS_EXCLUDED(mu_);

  store::CuratorStore* const store_;
  Ledger* const ledger_;
  const Options options_;
  IngestCounters counters_;

  mutable absl::Mutex mu_;
  // By ascending id. Never shrinks, and a CampaignState never moves, so a
  // pointer to one stays valid after the lock is released (Ingest relies on
  // it between its shared and exclusive phases).
  std::vector<std::unique_ptr<CampaignState>> campaigns_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ldpgraph::curator
