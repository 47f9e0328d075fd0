// Internal to the store library: the SQLite store's parts that its files
// share -- SqliteImpl (the connection, its prepared statements, the answer
// log's index, and the helpers every call uses) and SqliteStore (the
// CuratorStore methods over it; contract in server/store/store.h). Defined
// by responsibility: sqlite_schema.cc (the schema, Open, the statements),
// sqlite_impl.cc (transactions and the answer log's rows), sqlite_store.cc
// (campaigns, answers, caps, the fleet plan) and sqlite_records.cc (audit,
// sealed messages, node keys, results, frontends). Not for use outside
// server/store/.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/storage/sqlite.h"
#include "server/store/log_core.h"
#include "server/store/store.h"

namespace ldpgraph::store::sqlite_internal {

using sqlite::Blob;
using sqlite::BlobHandle;
using sqlite::ColumnBlob;
using sqlite::ColumnView;
using sqlite::Db;
using sqlite::ScopedReset;
using sqlite::Stmt;
using sqlite::Text;

// One write waiting in SqliteImpl's group commit (SqliteStore::Write): the
// answers to append, or caps to put with an optional audit row. Lives on its
// writer's stack until done.
struct GroupWrite {
  // AppendAnswers: the answers, and their outcomes once written.
  const std::vector<AnswerRow>* answers = nullptr;
  std::vector<AppendOutcome> outcomes;
  // PutCaps, PutCapsAndAudit, Audit: caps to put (may be null), and an
  // audit row when action is not null.
  const std::vector<std::pair<uint32_t, std::string>>* caps = nullptr;
  const std::string* actor = nullptr;
  const std::string* action = nullptr;
  const std::string* details_json = nullptr;
  int64_t now_ms = 0;
  // What the write is, for messages when it is written alone.
  std::string operation;
  // Payload bytes, for the group's size limit.
  size_t bytes = 0;
  // Set by the leader that wrote it, under SqliteImpl::queue_mu.
  absl::Status status;
  bool done = false;
};

struct SqliteImpl {
  // Statements prepared once at Open (SQLITE_PREPARE_PERSISTENT) and reused.
  struct Statements {
    Stmt begin, begin_read, commit, rollback;
    Stmt insert_campaign, set_campaign_record, update_campaign, list_campaigns;
    Stmt insert_log, log_after, log_row, closed_campaigns;
    Stmt put_caps, all_caps;
    Stmt clear_fleet, put_fleet, get_fleet;
    Stmt insert_audit, list_audit;
    Stmt insert_sealed, fetch_sealed, fetch_sealed_campaign;
    Stmt put_node_key, all_node_keys, some_node_keys;
    Stmt put_frontend, drop_frontends, fresh_frontends;
    Stmt insert_result, set_result_record, list_results, list_results_before,
        get_result;
  };

  explicit SqliteImpl(std::string path) : core(path), path(std::move(path)) {}

  // The answer log's engine-free logic and its in-memory index
  // (log_core.h). Built at Open, extended after each commit of
  // AppendAnswers, and caught up (CatchUp) at the start of each
  // AppendAnswers transaction with the rows another connection may have
  // added.
  LogCore core;
  // The database file, for messages.
  const std::string path;
  // Opened read-only (CuratorStore::Options::read_only): set once at Open.
  bool read_only = false;
  absl::Mutex mu;
  // Group commit: the writes waiting, in arrival order; the first is the
  // leader, which writes a group of them in one transaction (WriteGroup).
  // Lock order: mu before queue_mu.
  absl::Mutex queue_mu ABSL_ACQUIRED_AFTER(mu);
  std::deque<GroupWrite*> writers ABSL_GUARDED_BY(queue_mu);
  std::atomic<uint64_t> group_writes{0}, group_commits{0};
  // Declared before stmts, so destroyed after them.
  Db db ABSL_GUARDED_BY(mu);
  Statements stmts ABSL_GUARDED_BY(mu);

  // The failure rc of SQLite as a status (common/storage/sqlite.h's SqliteError:
  // RESOURCE_EXHAUSTED for SQLITE_FULL, UNAVAILABLE for SQLITE_BUSY and
  // SQLITE_LOCKED, INTERNAL otherwise) naming the path, the operation, and
  // SQLite's message.
  absl::Status Error(absl::string_view operation, int rc)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return sqlite::SqliteError(rc, db.get(), path, operation);
  }

  absl::Status Exec(absl::string_view operation, const char* sql)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return sqlite::Exec(db.get(), path, sql, operation);
  }

  // Runs a statement returning one integer (a PRAGMA).
  absl::StatusOr<int64_t> QueryInt(absl::string_view operation,
                                   const std::string& sql)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return sqlite::QueryInt(db.get(), path, sql.c_str(), operation);
  }

  absl::StatusOr<Stmt> Prepare(const char* sql)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return sqlite::Prepare(db.get(), path, sql, SQLITE_PREPARE_PERSISTENT);
  }

  absl::Status PrepareAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Steps a statement that returns no rows (INSERT, UPDATE, BEGIN, ...).
  absl::Status StepDone(absl::string_view operation, sqlite3_stmt* stmt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return sqlite::StepDone(db.get(), path, stmt, operation);
  }

  absl::Status Run(absl::string_view operation, sqlite3_stmt* stmt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    ScopedReset reset(stmt);
    return StepDone(operation, stmt);
  }

  template <typename... Args>
  absl::Status BindOrError(absl::string_view operation, sqlite3_stmt* stmt,
                           const Args&... args)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return sqlite::Bind(db.get(), path, operation, stmt, args...);
  }

  // Runs body in one write transaction (BEGIN IMMEDIATE ... COMMIT) on the
  // prepared statements. On any failure, of body or of COMMIT, rolls back,
  // so nothing of it is stored, and returns the first error.
  absl::Status InTransaction(absl::string_view operation,
                             absl::FunctionRef<absl::Status()> body)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Writes `group` in one transaction (one sync to disk): every caps and
  // audit row, then all the answers as one LogCore::Append (so a node
  // answered twice within the group is stored once, the later answer
  // kDuplicate or kConflict, as if written one after the other). On success
  // fills each write's outcomes; on failure nothing of the group is stored.
  absl::Status WriteGroup(const std::vector<GroupWrite*>& group)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Inside a write transaction: replaces campaign row.id's state and
  // record; NOT_FOUND (the caller's transaction rolls back) if there is no
  // such campaign.
  absl::Status UpdateCampaignRow(absl::string_view operation,
                                 const CampaignRow& row)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Inside a transaction: each node's caps, replacing any earlier.
  absl::Status InsertCaps(
      absl::string_view operation,
      const std::vector<std::pair<uint32_t, std::string>>& caps)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Inside a write transaction: appends one row to the audit log.
  absl::Status InsertAudit(absl::string_view operation, int64_t unix_ms,
                           const std::string& actor, const std::string& action,
                           const std::string& details_json)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // answer_log inside this store's current transaction, for LogCore.
  class Rows final : public LogRows {
   public:
    Rows(SqliteImpl& s, absl::string_view operation)
        : s_(s), operation_(operation) {}

    absl::Status ReadAfter(
        int64_t after,
        absl::FunctionRef<absl::Status(int64_t, int64_t, absl::string_view)> fn)
        override ABSL_NO_THREAD_SAFETY_ANALYSIS;

    absl::Status ReadRow(int64_t id, int64_t* campaign, std::string* blob)
        override ABSL_NO_THREAD_SAFETY_ANALYSIS;

    absl::Status ReadBytes(int64_t id, uint32_t offset, uint32_t length,
                           std::string& out) override
        ABSL_NO_THREAD_SAFETY_ANALYSIS;

    absl::StatusOr<int64_t> Insert(int64_t campaign, absl::string_view blob)
        override ABSL_NO_THREAD_SAFETY_ANALYSIS;

    absl::StatusOr<absl::flat_hash_set<int64_t>> Closed(
        const std::vector<int64_t>& campaigns) override
        ABSL_NO_THREAD_SAFETY_ANALYSIS;

   private:
    // DATA_LOSS naming the row unless its columns are (id, campaign,
    // answers) as this store writes them.
    absl::Status CheckLogRow(sqlite3_stmt* stmt) {
      const int64_t id = sqlite3_column_int64(stmt, 0);
      if (sqlite3_column_type(stmt, 1) != SQLITE_INTEGER) {
        return absl::DataLossError(
            absl::StrCat("curator store ", s_.path, ": answer_log row ", id,
                         ": campaign is not an integer"));
      }
      if (sqlite3_column_type(stmt, 2) != SQLITE_BLOB) {
        return absl::DataLossError(absl::StrCat(
            "curator store ", s_.path, ": answer_log row ", id, " (campaign ",
            sqlite3_column_int64(stmt, 1), "): answers is not a blob"));
      }
      return absl::OkStatus();
    }

    SqliteImpl& s_;
    const absl::string_view operation_;
    BlobHandle blob_;  // for ReadBytes
    int64_t blob_row_ = 0;
  };

  absl::Status CatchUp(absl::string_view operation, bool initial = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Reads bytes [offset, offset + length) of the blob of answer_log row
  // `row` into out, through handle (opened, or moved to the row, as
  // needed; *handle_row is the row it is on).
  absl::Status ReadLogBytes(absl::string_view operation, BlobHandle& handle,
                            int64_t* handle_row, int64_t row, uint32_t offset,
                            uint32_t length, std::string& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Runs body in one read transaction, after catching the index up with
  // what other connections committed, so that it reads one snapshot that
  // the index covers.
  absl::Status InReadTransaction(absl::string_view operation,
                                 absl::FunctionRef<absl::Status()> body)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // The shared part of CreateCampaign and AddResult, in one transaction:
  // insert a placeholder row (after bind_insert binds its parameters), learn
  // its id, store the record built for it.
  absl::StatusOr<int64_t> InsertWithId(
      absl::string_view operation, sqlite3_stmt* insert,
      absl::FunctionRef<absl::Status()> bind_insert, sqlite3_stmt* update,
      absl::FunctionRef<std::string(int64_t)> record_for_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
};

// The SQLite store: the methods of CuratorStore over one SqliteImpl.
class SqliteStore final : public CuratorStore {
 public:
  explicit SqliteStore(std::unique_ptr<SqliteImpl> impl)
      : impl_(std::move(impl)) {}

  absl::StatusOr<int64_t> CreateCampaign(
      absl::FunctionRef<std::string(int64_t id)> record_for_id) override;
  absl::Status UpdateCampaign(const CampaignRow& row) override;
  absl::Status UpdateCampaignAndAudit(const CampaignRow& row,
                                      const std::string& actor,
                                      const std::string& action,
                                      const std::string& details_json) override;
  absl::StatusOr<std::vector<CampaignRow>> ListCampaigns() override;
  absl::StatusOr<std::vector<AppendOutcome>> AppendAnswers(
      const std::vector<AnswerRow>& answers) override;
  absl::Status ForEachAnswer(
      int64_t campaign, absl::FunctionRef<bool(const AnswerRow&)> fn) override;
  absl::StatusOr<std::vector<AnswerRow>> ListAnswers(
      int64_t campaign, uint32_t first_node, int limit,
      bool refusals_only) override;
  absl::Status ForEachAnswer(
      absl::FunctionRef<bool(const AnswerRow&)> fn) override;
  absl::Status ForEachAnswerKey(
      absl::FunctionRef<void(int64_t, uint32_t, bool)> fn) override;
  absl::Status PutCaps(
      const std::vector<std::pair<uint32_t, std::string>>& caps) override;
  absl::Status PutCapsAndAudit(
      const std::vector<std::pair<uint32_t, std::string>>& caps,
      const std::string& actor, const std::string& action,
      const std::string& details_json) override;
  absl::Status ForEachCaps(
      absl::FunctionRef<void(uint32_t, const std::string&)> fn) override;
  absl::Status PutFleetPlan(const std::vector<std::string>& holders) override;
  absl::StatusOr<std::vector<std::string>> GetFleetPlan() override;
  absl::StatusOr<FleetGrant> ClaimFleetShard(const FleetClaim& claim) override;
  absl::Status Audit(const std::string& actor, const std::string& action,
                     const std::string& details_json) override;
  absl::StatusOr<std::vector<AuditRow>> ListAudit(int64_t after_sequence,
                                                  int limit) override;
  absl::Status PutSealed(const std::vector<SealedRow>& messages) override;
  absl::StatusOr<std::vector<SealedRow>> FetchSealed(
      const std::vector<uint32_t>& to_nodes, int64_t after, int limit,
      const std::string& campaign) override;
  absl::Status PutNodeKeys(
      const std::vector<std::pair<uint32_t, std::string>>& keys) override;
  absl::Status ForEachNodeKey(
      absl::FunctionRef<void(uint32_t, const std::string&)> fn) override;
  absl::Status GetNodeKeys(
      const std::vector<uint32_t>& nodes,
      absl::FunctionRef<void(uint32_t, const std::string&)> fn) override;
  absl::StatusOr<int64_t> AddResult(
      absl::FunctionRef<std::string(int64_t id)> record_for_id,
      const std::string& matrix_path) override;
  absl::StatusOr<std::vector<ResultRow>> ListResults() override;
  absl::StatusOr<std::vector<ResultRow>> ListResultsBefore(
      int64_t before_id, int limit) override;
  absl::StatusOr<ResultRow> GetResult(int64_t id) override;
  absl::Status ForEachNewAnswerKey(
      absl::FunctionRef<void(int64_t, uint32_t, bool)> fn) override;
  absl::Status PutFrontendStatus(const std::string& name,
                                 const std::string& status) override;
  absl::StatusOr<std::vector<std::string>> FreshFrontendStatus(
      absl::Duration within) override;
  absl::StatusOr<bool> TryOperatorLease() override { return true; }
  std::string Describe() const override {
    return absl::StrCat("sqlite ", impl_->path);
  }
  WriteCounts write_counts() const override {
    return WriteCounts{impl_->group_writes.load(std::memory_order_relaxed),
                       impl_->group_commits.load(std::memory_order_relaxed)};
  }

 private:
  // Group commit, leveldb's writer queue: queues w; the writer at the
  // front leads, taking the mutex and writing the writes queued by then
  // (at most kMaxGroupWrites, kMaxGroupBytes of payload) in one
  // transaction; the others wait to be told their status. If the group's
  // transaction fails, each of its writes is tried alone, so that one
  // write's error is not another's.
  absl::Status Write(GroupWrite& w);
  static constexpr size_t kMaxGroupWrites = 256;
  static constexpr size_t kMaxGroupBytes = size_t{8} << 20;

  std::unique_ptr<SqliteImpl> impl_;
};

}  // namespace ldpgraph::store::sqlite_internal
