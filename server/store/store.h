// The curator's durable state: one SQLite database (WAL) under its data
// directory holding campaigns, answers (reports and refusals), the caps
// nodes declared, the nodes' sealing public keys, the audit log, sealed
// messages in transit, and pipeline results. Nothing here knows gRPC; rows hold serialised proto messages
// where a message is the natural record.
//
// Durability: every mutating call is one transaction, committed before it
// returns OK. With Options::synchronous_full (the default) a commit is on
// disk when the call returns, so an acknowledgement the curator sends after
// it survives a crash of the process or the machine. Concurrent writes of
// answers, caps and audit rows are committed in groups (one transaction and
// one sync for all the calls waiting when a commit starts, leveldb's group
// commit): each call still returns only once its writes are durable, and a
// group that fails is retried call by call, so a call's error is its own.
//
// Answers are stored as a log: each commit of AppendAnswers calls writes one row per
// campaign it stored new answers for (more for over 64 MiB of them), whose
// blob packs those answers in a compact, versioned, length-checked
// encoding; rows are never changed. The store keeps an index in memory of
// where each stored answer is, keyed by (campaign, node) -- about 12 bytes
// an answer when a campaign's nodes are dense (0, 1, ...), up to about 40
// when they are scattered -- built at Open by reading the whole log, and
// caught up at each AppendAnswers and ForEachAnswer with rows another store
// on the same directory added. Telling a new answer from a resend needs no
// query; telling a resend from a conflict reads the stored payload's bytes.
//
// The privacy ledger is not a table: it is derived from the stored answers
// (a node's spend is the sum of the epsilons of the distinct questions it
// answered, read from the campaigns' specs), so it can never disagree with
// what was actually collected, and a restarted curator rebuilds it with
// ForEachAnswer.
//
// Errors: a failure of SQLite is mapped by common/storage/sqlite.h's SqliteError:
// RESOURCE_EXHAUSTED for a full disk (SQLITE_FULL, or max_bytes);
// UNAVAILABLE when another connection holds the lock past busy_timeout_ms
// (SQLITE_BUSY, SQLITE_LOCKED): nothing is wrong with the store, the call
// may be retried; INTERNAL otherwise; the message names the database path,
// the operation and SQLite's words. The failed transaction is rolled back,
// so nothing of it is stored. A row of
// the answer log that does not parse (or repeats a stored answer) is
// DATA_LOSS naming the row, from Open, AppendAnswers or ForEachAnswer.
//
// Thread-safe: calls are serialised by an internal mutex. The callbacks
// (record_for_id, the ForEach functions) run under that mutex, inside the
// call's transaction or scan: they must not call the store.
//
// Two stores on one directory (in one process or two) are serialised by
// SQLite's file locks, waiting up to Options::busy_timeout_ms (5 s by
// default) for each other, then UNAVAILABLE; the curator opens one.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ldpgraph::store {

// One campaign. The store treats `record` (a serialised
// ldpgraph.v1.Campaign) as opaque but keeps id and state in columns.
struct CampaignRow {
  int64_t id = 0;      // assigned by CreateCampaign, 1, 2, ...
  bool open = true;
  std::string record;  // serialised v1::Campaign
};

// One node's answer to one campaign: a report body or a refusal.
struct AnswerRow {
  int64_t campaign = 0;
  uint32_t node = 0;
  bool refusal = false;
  std::string payload;  // serialised v1::Report, as received
  int64_t unix_ms = 0;  // when received; 0 in AppendAnswers: the time of the call
};

// The outcome of storing one answer.
enum class AppendOutcome {
  kStored,     // new; now durable
  kDuplicate,  // an identical answer (same refusal flag, same payload
               // bytes) was already stored: nothing changed
  kConflict,   // a different answer is stored for (campaign, node): kept
  kClosed,     // new, but the store holds its campaign closed (another
               // curator process closed it): not stored
};

struct AuditRow {
  int64_t sequence = 0;  // assigned by Audit, ascending
  int64_t unix_ms = 0;   // the time of the Audit call
  std::string actor;
  std::string action;
  std::string details_json;
};

struct SealedRow {
  int64_t sequence = 0;  // assigned by PutSealed (ignored there), ascending
  std::string campaign;
  uint32_t from_node = 0;
  uint32_t to_node = 0;
  std::string ciphertext;
};

// One shard claim of the fleet planner on a shared store
// (server/curator/fleet.h, FleetPlanner::Options::shared): the protocol's
// settings, the claimant and the time (milliseconds since the epoch).
struct FleetClaim {
  std::string host;
  int64_t now_ms = 0;
  int64_t settle_ms = 0, lease_ms = 0;
  uint32_t min_hosts = 1, max_hosts = 1, num_nodes = 1;
};
// Its answer: waiting (gathering), assigned shard `shard` of `shards`, or
// spare; when to claim again while waiting.
struct FleetGrant {
  enum class State { kWaiting, kAssigned, kSpare };
  State state = State::kWaiting;
  uint32_t shard = 0, shards = 0;
  int64_t retry_after_ms = 0;
};

struct ResultRow {
  int64_t id = 0;  // assigned by AddResult
  std::string record;  // serialised v1::StageResult
  std::string matrix_path;  // file under the data directory, or empty
};

// Campaigns are named "c<id>" outside the store (the admin API, ldpctl,
// logs): CampaignName(12) is "c12". ParseCampaignName is its inverse:
// INVALID_ARGUMENT, quoting the name, for anything but "c" and a positive
// decimal id.
std::string CampaignName(int64_t id);
absl::StatusOr<int64_t> ParseCampaignName(absl::string_view name);

// The listing calls' page size (ListAudit, ListAnswers, FetchSealed, ...):
// OK for limit > 0, INVALID_ARGUMENT quoting it otherwise. Every backend
// checks it first.
absl::Status CheckPageLimit(int limit);

class CuratorStore {
 public:
  struct Options {
    // PRAGMA synchronous=FULL (on disk at commit) or NORMAL (survives a
    // process crash, not a power cut). FULL by default.
    bool synchronous_full = true;
    // Upper bound on the database size in bytes (PRAGMA max_page_count);
    // 0: none. Writes beyond it fail with RESOURCE_EXHAUSTED, as a full disk
    // would: tests use it to simulate one. Rounded down to whole pages
    // (4 KiB); never below the database's current size. Must be >= 0.
    int64_t max_bytes = 0;
    // PRAGMA busy_timeout: how long a call waits for a lock another
    // connection holds before failing with UNAVAILABLE. Must be >= 0.
    int busy_timeout_ms = 5000;
    // Open an existing <dir>/curator.db read-only, for a reader beside the
    // curator that owns it (ldpctl's figures): nothing is created or
    // changed, the file must exist (NOT_FOUND naming it) and hold this
    // schema version (FAILED_PRECONDITION otherwise), and every write fails
    // with FAILED_PRECONDITION. SQLite only.
    bool read_only = false;
  };

  // Opens (creating if needed) <dir>/curator.db, in WAL mode, creating the
  // schema (version 2, kept in PRAGMA user_version), and reads the answer
  // log to build the in-memory index. dir must exist: NOT_FOUND naming it
  // otherwise. INVALID_ARGUMENT for a negative max_bytes or
  // busy_timeout_ms; UNAVAILABLE if another connection holds the lock past
  // busy_timeout_ms;
  // FAILED_PRECONDITION naming the path and both versions if the file holds
  // a schema of another version -- including version 1 (one row per answer):
  // there is no migration, a version-1 store must be replaced;
  // RESOURCE_EXHAUSTED if the schema does not fit in max_bytes; DATA_LOSS
  // naming the row if the answer log is corrupt; INTERNAL naming the path on
  // any other failure.
  static absl::StatusOr<std::unique_ptr<CuratorStore>> Open(
      const std::string& dir, Options options);
  // Opens the store a --store flag names (see StoreUrlHelp): "sqlite" (or
  // empty) for the SQLite file under dir, with options; a postgres:// URL
  // for a PostgreSQL database (postgres_store.h), its password read from
  // password_file (may be empty if the server needs none). INVALID_ARGUMENT
  // for another scheme, a password in the URL, or an unreadable file.
  static absl::StatusOr<std::unique_ptr<CuratorStore>> OpenUrl(
      const std::string& url, const std::string& password_file,
      const std::string& dir, Options options);
  virtual ~CuratorStore();

  // Campaigns. CreateCampaign assigns the id (1, 2, ...; never reused) and
  // stores the campaign open; record_for_id builds the record once the id is
  // known (the record embeds it), inside the transaction.
  virtual absl::StatusOr<int64_t> CreateCampaign(
      absl::FunctionRef<std::string(int64_t id)> record_for_id) = 0;
  // Replaces the record and state of an existing campaign (NOT_FOUND if
  // none).
  virtual absl::Status UpdateCampaign(const CampaignRow& row) = 0;
  // UpdateCampaign and Audit in one transaction: both are stored or neither
  // (NOT_FOUND for no such campaign, RESOURCE_EXHAUSTED for a full disk,
  // ...), so a campaign's change of state is never without its audit entry.
  virtual absl::Status UpdateCampaignAndAudit(const CampaignRow& row,
                                      const std::string& actor,
                                      const std::string& action,
                                      const std::string& details_json) = 0;
  // All campaigns, by ascending id.
  virtual absl::StatusOr<std::vector<CampaignRow>> ListCampaigns() = 0;

  // Stores a batch of answers in one transaction and reports each outcome,
  // in order. Within a batch, a second answer for the same (campaign, node)
  // is compared with the first, as if stored earlier. All or nothing: on an
  // error nothing of the batch is stored (nor indexed). The store does not
  // check that the campaign exists. This is the ingest hot path: batch
  // answers. A batch of only duplicates and conflicts writes nothing.
  virtual absl::StatusOr<std::vector<AppendOutcome>> AppendAnswers(
      const std::vector<AnswerRow>& answers) = 0;
  // Every stored answer of `campaign`, ordered by node. `fn` returning
  // false stops the scan (still OK). Holds the campaign's answers in memory
  // while it runs.
  virtual absl::Status ForEachAnswer(int64_t campaign,
                             absl::FunctionRef<bool(const AnswerRow&)> fn) = 0;
  // A page of `campaign`'s stored answers: those of nodes >= first_node
  // (refusals only, with refusals_only), ascending by node, at most limit
  // (> 0, INVALID_ARGUMENT otherwise). The in-memory index picks them, so
  // only the log rows that hold them are read; an admin listing reads a
  // campaign's refusals a page at a time this way.
  virtual absl::StatusOr<std::vector<AnswerRow>> ListAnswers(
      int64_t campaign, uint32_t first_node, int limit,
      bool refusals_only) = 0;
  // Every answer of every campaign, ordered by (campaign, node); one
  // campaign's answers in memory at a time.
  virtual absl::Status ForEachAnswer(absl::FunctionRef<bool(const AnswerRow&)> fn) = 0;
  // The key of every stored answer, (campaign, node, refusal), read from the
  // in-memory index without touching the payloads: what a restarted curator
  // needs to rebuild its progress and ledger. Ordered by campaign; within a
  // campaign, in no particular order.
  virtual absl::Status ForEachAnswerKey(
      absl::FunctionRef<void(int64_t campaign, uint32_t node, bool refusal)>
          fn) = 0;

  // Caps a node declared (serialised v1::BudgetCaps), replacing any earlier;
  // one transaction. ForEachCaps: by ascending node.
  virtual absl::Status PutCaps(const std::vector<std::pair<uint32_t, std::string>>& caps) = 0;
  // PutCaps and Audit(actor, action, details_json) in one transaction (one
  // sync to disk, not two): both or neither. An enrolment's write.
  virtual absl::Status PutCapsAndAudit(
      const std::vector<std::pair<uint32_t, std::string>>& caps,
      const std::string& actor, const std::string& action,
      const std::string& details_json) = 0;
  virtual absl::Status ForEachCaps(
      absl::FunctionRef<void(uint32_t node, const std::string& caps)> fn) = 0;

  // The fleet plan (server/curator/fleet.h): shard i's holder is
  // holders[i]. PutFleetPlan replaces the whole plan in one transaction
  // (an empty vector clears it); GetFleetPlan returns it by shard, empty if
  // none was stored.
  virtual absl::Status PutFleetPlan(const std::vector<std::string>& holders) = 0;
  virtual absl::StatusOr<std::vector<std::string>> GetFleetPlan() = 0;
  // The fleet planner's protocol (fleet.h) run in the database, for
  // frontends that share it: the gathered hosts, the plan and each holder's
  // last renewal are rows, and a claim reads and changes them in one
  // transaction under a lock, so that every frontend answers from one plan.
  // A store that serves one process (SQLite) answers FAILED_PRECONDITION:
  // its planner keeps the protocol in memory.
  virtual absl::StatusOr<FleetGrant> ClaimFleetShard(const FleetClaim& claim) = 0;

  // Audit log: append-only; rows are stamped with the time of the call.
  // ListAudit: rows with sequence > after_sequence, ascending, at most
  // limit (> 0, INVALID_ARGUMENT otherwise).
  virtual absl::Status Audit(const std::string& actor, const std::string& action,
                     const std::string& details_json) = 0;
  virtual absl::StatusOr<std::vector<AuditRow>> ListAudit(int64_t after_sequence,
                                                  int limit) = 0;

  // Sealed messages in transit, stored in order (one transaction).
  virtual absl::Status PutSealed(const std::vector<SealedRow>& messages) = 0;
  // Messages to any of `to_nodes` with sequence > after, ascending, at most
  // limit (> 0, INVALID_ARGUMENT otherwise); only `campaign`'s when it is
  // not empty. Nothing is deleted.
  virtual absl::StatusOr<std::vector<SealedRow>> FetchSealed(
      const std::vector<uint32_t>& to_nodes, int64_t after, int limit,
      const std::string& campaign = "") = 0;

  // Nodes' sealing public keys (opaque bytes here), replacing any earlier
  // key of the node; one transaction. ForEachNodeKey: by ascending node.
  virtual absl::Status PutNodeKeys(
      const std::vector<std::pair<uint32_t, std::string>>& keys) = 0;
  virtual absl::Status ForEachNodeKey(
      absl::FunctionRef<void(uint32_t node, const std::string& key)> fn) = 0;
  // The keys of those of `nodes` that have one, by ascending node: what a
  // frontend reads on a shared store, where other frontends enrol nodes.
  virtual absl::Status GetNodeKeys(
      const std::vector<uint32_t>& nodes,
      absl::FunctionRef<void(uint32_t node, const std::string& key)> fn) = 0;

  // Pipeline results. AddResult assigns the id (1, 2, ...) and calls
  // record_for_id with it inside the transaction. ListResults: ascending id.
  // ListResultsBefore: a page of them newest first, those with id <
  // before_id, descending, at most limit (> 0, INVALID_ARGUMENT otherwise).
  // GetResult: NOT_FOUND for an unknown id.
  virtual absl::StatusOr<int64_t> AddResult(
      absl::FunctionRef<std::string(int64_t id)> record_for_id,
      const std::string& matrix_path) = 0;
  virtual absl::StatusOr<std::vector<ResultRow>> ListResults() = 0;
  virtual absl::StatusOr<std::vector<ResultRow>> ListResultsBefore(
      int64_t before_id, int limit) = 0;
  virtual absl::StatusOr<ResultRow> GetResult(int64_t id) = 0;

  // --- several curator processes on one store -------------------------------
  // (The frontends and operator of server/curator/roles.h on a PostgreSQL
  // database; or SQLite stores on one directory.) Each store's index of the
  // answer log catches up with what the others committed at every
  // AppendAnswers and ForEachAnswer; this reads what they committed since,
  // and calls fn with the key of every answer another connection stored that
  // this store has not yet reported, once each, in log order. A curator
  // calls it periodically to keep its progress and ledger in step.
  virtual absl::Status ForEachNewAnswerKey(
      absl::FunctionRef<void(int64_t campaign, uint32_t node, bool refusal)>
          fn) = 0;
  // Frontends' published status (roles.h): PutFrontendStatus replaces the
  // row of `name` (a serialised v1::CuratorStatus), stamped now, and drops
  // rows not renewed for an hour (frontends that went); FreshFrontendStatus
  // returns those stamped within `within` of now.
  virtual absl::Status PutFrontendStatus(const std::string& name,
                                         const std::string& status) = 0;
  virtual absl::StatusOr<std::vector<std::string>> FreshFrontendStatus(
      absl::Duration within) = 0;
  // The operator lease: at most one store over a database holds it at a
  // time. True if this store holds it (taking it if free), false if another
  // does. A store that lost it (its database connection broke) says false
  // until it takes it again; after the database comes back, a store that
  // held the lease takes it again at once and one that did not waits a
  // grace period first, so that a database restart leaves the active
  // operator active. UNAVAILABLE while the database cannot be reached.
  // A SQLite store serves one curator: always true.
  virtual absl::StatusOr<bool> TryOperatorLease() = 0;
  // What the store is, for logs and status: "sqlite <path>", or
  // "postgres <host>:<port>/<database>" (never a password).
  virtual std::string Describe() const = 0;
  // Group commit (SQLite): concurrent AppendAnswers, PutCaps,
  // PutCapsAndAudit and Audit calls share one transaction and one sync to
  // disk; `writes` counts those calls, `commits` the transactions that wrote
  // them (commits <= writes; their ratio is the mean group). A PostgreSQL
  // store reports zeros: its server shares one WAL flush among concurrent
  // commits itself.
  struct WriteCounts {
    uint64_t writes = 0, commits = 0;
  };
  virtual WriteCounts write_counts() const { return {}; }

  CuratorStore(const CuratorStore&) = delete;
  CuratorStore& operator=(const CuratorStore&) = delete;

 protected:
  CuratorStore() = default;
};

}  // namespace ldpgraph::store
