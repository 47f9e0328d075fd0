#include "server/store/store.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/sqlite.h"
#include "common/status_macros.h"
#include "server/store/answer_index.h"
#include "server/store/answer_log.h"
#include "server/store/log_core.h"
#include "server/store/postgres_store.h"

namespace ldpgraph::store {
namespace {

constexpr int kSchemaVersion = 2;
constexpr char kFileName[] = "curator.db";

// Version 2. AUTOINCREMENT keeps ids from being reused after a deletion
// (there is none today, but an id a client has seen must stay unique).
// answer_log holds the answers: one row per campaign per AppendAnswers call,
// its blob packing the answers that call stored (server/store/answer_log.h);
// rows are never updated or deleted. It has no index: the store keeps one in
// memory (server/store/answer_index.h), built at Open by reading the log,
// which also lists each campaign's rows. (Version 1 had one row per answer in a WITHOUT ROWID
// table answers(campaign, node, ...).)
// fleet holds the shard plan of hosts that ask the curator for their
// nodes; the table was added without a version change, since a version 2
// store without it gets it (empty) at the next Open.
// sealed's index on to_node carries the rowid (sequence), so a fetch is a
// range scan per recipient.
constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS campaigns(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  open INTEGER NOT NULL,
  record BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS answer_log(
  id INTEGER PRIMARY KEY,
  campaign INTEGER NOT NULL,
  answers BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS caps(
  node INTEGER PRIMARY KEY,
  caps BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS audit(
  sequence INTEGER PRIMARY KEY AUTOINCREMENT,
  unix_ms INTEGER NOT NULL,
  actor TEXT NOT NULL,
  action TEXT NOT NULL,
  details_json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sealed(
  sequence INTEGER PRIMARY KEY AUTOINCREMENT,
  campaign TEXT NOT NULL,
  from_node INTEGER NOT NULL,
  to_node INTEGER NOT NULL,
  ciphertext BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS sealed_to_node ON sealed(to_node);
CREATE TABLE IF NOT EXISTS fleet(
  shard INTEGER PRIMARY KEY,
  holder TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  record BLOB NOT NULL,
  matrix_path TEXT NOT NULL);
)sql";

// Added to version 2 without a version change, so run at every Open (after
// kSchema for a new file): frontends holds the status curator frontends
// publish (roles.h); node_keys holds each node's sealing public key
// (AgentService.PublicKeys), the latest one it enrolled with; the index
// serves FetchSealed of one campaign's messages (an exchange reading its
// campaign from sequence 0) without scanning other campaigns' traffic.
constexpr char kAdditiveSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS node_keys(
  node INTEGER PRIMARY KEY,
  public_key BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS sealed_campaign_to_node ON sealed(campaign, to_node);
CREATE TABLE IF NOT EXISTS frontends(
  name BLOB PRIMARY KEY,
  status BLOB NOT NULL,
  unix_ms INTEGER NOT NULL);
)sql";

using sqlite::Blob;
using sqlite::BlobHandle;
using sqlite::ColumnBlob;
using sqlite::ColumnView;
using sqlite::Db;
using sqlite::ScopedReset;
using sqlite::Stmt;
using sqlite::Text;

absl::Status CheckLimit(int limit) {
  if (limit <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit must be > 0, got ", limit));
  }
  return absl::OkStatus();
}

}  // namespace

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
    Stmt put_node_key, all_node_keys;
    Stmt put_frontend, drop_frontends, fresh_frontends;
    Stmt insert_result, set_result_record, list_results, get_result;
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
  absl::Mutex mu;
  // Declared before stmts, so destroyed after them.
  Db db ABSL_GUARDED_BY(mu);
  Statements stmts ABSL_GUARDED_BY(mu);


  // The failure rc of SQLite as a status (common/sqlite.h's SqliteError:
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

  absl::Status PrepareAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Statements& s = stmts;
    ASSIGN_OR_RETURN(s.begin, Prepare("BEGIN IMMEDIATE"));
    ASSIGN_OR_RETURN(s.begin_read, Prepare("BEGIN"));
    ASSIGN_OR_RETURN(s.commit, Prepare("COMMIT"));
    ASSIGN_OR_RETURN(s.rollback, Prepare("ROLLBACK"));
    ASSIGN_OR_RETURN(s.insert_campaign,
                     Prepare("INSERT INTO campaigns(open, record) "
                             "VALUES(1, x'')"));
    ASSIGN_OR_RETURN(s.set_campaign_record,
                     Prepare("UPDATE campaigns SET record = ?2 WHERE id = ?1"));
    ASSIGN_OR_RETURN(s.update_campaign,
                     Prepare("UPDATE campaigns SET open = ?2, record = ?3 "
                             "WHERE id = ?1"));
    ASSIGN_OR_RETURN(s.list_campaigns,
                     Prepare("SELECT id, open, record FROM campaigns "
                             "ORDER BY id"));
    ASSIGN_OR_RETURN(s.insert_log,
                     Prepare("INSERT INTO answer_log(campaign, answers) "
                             "VALUES(?1, ?2)"));
    ASSIGN_OR_RETURN(s.log_after,
                     Prepare("SELECT id, campaign, answers FROM answer_log "
                             "WHERE id > ?1 ORDER BY id"));
    ASSIGN_OR_RETURN(s.log_row,
                     Prepare("SELECT id, campaign, answers FROM answer_log "
                             "WHERE id = ?1"));
    ASSIGN_OR_RETURN(
        s.closed_campaigns,
        Prepare("SELECT open FROM campaigns WHERE id = ?1"));
    ASSIGN_OR_RETURN(s.put_caps,
                     Prepare("INSERT INTO caps(node, caps) VALUES(?1, ?2) "
                             "ON CONFLICT(node) DO UPDATE SET "
                             "caps = excluded.caps"));
    ASSIGN_OR_RETURN(s.all_caps,
                     Prepare("SELECT node, caps FROM caps ORDER BY node"));
    ASSIGN_OR_RETURN(s.clear_fleet, Prepare("DELETE FROM fleet"));
    ASSIGN_OR_RETURN(s.put_fleet,
                     Prepare("INSERT INTO fleet(shard, holder) VALUES(?1, ?2)"));
    ASSIGN_OR_RETURN(s.get_fleet,
                     Prepare("SELECT shard, holder FROM fleet ORDER BY shard"));
    ASSIGN_OR_RETURN(
        s.insert_audit,
        Prepare("INSERT INTO audit(unix_ms, actor, action, details_json) "
                "VALUES(?1, ?2, ?3, ?4)"));
    ASSIGN_OR_RETURN(
        s.list_audit,
        Prepare("SELECT sequence, unix_ms, actor, action, details_json "
                "FROM audit WHERE sequence > ?1 ORDER BY sequence LIMIT ?2"));
    ASSIGN_OR_RETURN(
        s.insert_sealed,
        Prepare("INSERT INTO sealed(campaign, from_node, to_node, ciphertext) "
                "VALUES(?1, ?2, ?3, ?4)"));
    // The recipients come as one JSON array, so the statement is prepared
    // once whatever their number.
    ASSIGN_OR_RETURN(
        s.fetch_sealed,
        Prepare(
            "SELECT sequence, campaign, from_node, to_node, ciphertext "
            "FROM sealed WHERE to_node IN (SELECT value FROM json_each(?1)) "
            "AND sequence > ?2 ORDER BY sequence LIMIT ?3"));
    ASSIGN_OR_RETURN(
        s.fetch_sealed_campaign,
        Prepare(
            "SELECT sequence, campaign, from_node, to_node, ciphertext "
            "FROM sealed WHERE campaign = ?4 AND "
            "to_node IN (SELECT value FROM json_each(?1)) "
            "AND sequence > ?2 ORDER BY sequence LIMIT ?3"));
    ASSIGN_OR_RETURN(s.put_node_key,
                     Prepare("INSERT INTO node_keys(node, public_key) "
                             "VALUES(?1, ?2) ON CONFLICT(node) DO UPDATE SET "
                             "public_key = excluded.public_key"));
    ASSIGN_OR_RETURN(s.all_node_keys,
                     Prepare("SELECT node, public_key FROM node_keys "
                             "ORDER BY node"));
    ASSIGN_OR_RETURN(s.put_frontend,
                     Prepare("INSERT INTO frontends(name, status, unix_ms) "
                             "VALUES(?1, ?2, ?3) ON CONFLICT(name) DO UPDATE "
                             "SET status = excluded.status, "
                             "unix_ms = excluded.unix_ms"));
    ASSIGN_OR_RETURN(s.drop_frontends,
                     Prepare("DELETE FROM frontends WHERE unix_ms < ?1"));
    ASSIGN_OR_RETURN(s.fresh_frontends,
                     Prepare("SELECT status FROM frontends WHERE unix_ms >= ?1 "
                             "ORDER BY name"));
    ASSIGN_OR_RETURN(s.insert_result,
                     Prepare("INSERT INTO results(record, matrix_path) "
                             "VALUES(x'', ?1)"));
    ASSIGN_OR_RETURN(s.set_result_record,
                     Prepare("UPDATE results SET record = ?2 WHERE id = ?1"));
    ASSIGN_OR_RETURN(s.list_results,
                     Prepare("SELECT id, record, matrix_path FROM results "
                             "ORDER BY id"));
    ASSIGN_OR_RETURN(s.get_result,
                     Prepare("SELECT id, record, matrix_path FROM results "
                             "WHERE id = ?1"));
    return absl::OkStatus();
  }

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
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return sqlite::InTransaction(
        db.get(), path, operation,
        {stmts.begin.get(), stmts.commit.get(), stmts.rollback.get()}, body);
  }

  // Inside a write transaction: replaces campaign row.id's state and
  // record; NOT_FOUND (the caller's transaction rolls back) if there is no
  // such campaign.
  absl::Status UpdateCampaignRow(absl::string_view operation,
                                 const CampaignRow& row)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    sqlite3_stmt* stmt = stmts.update_campaign.get();
    ScopedReset reset(stmt);
    RETURN_IF_ERROR(BindOrError(operation, stmt, row.id,
                                int64_t{row.open ? 1 : 0}, Blob{row.record}));
    RETURN_IF_ERROR(StepDone(operation, stmt));
    if (sqlite3_changes(db.get()) == 0) {
      return absl::NotFoundError(absl::StrCat("no campaign ", row.id));
    }
    return absl::OkStatus();
  }

  // Inside a write transaction: appends one row to the audit log.
  // Inside a transaction: each node's caps, replacing any earlier.
  absl::Status InsertCaps(
      absl::string_view operation,
      const std::vector<std::pair<uint32_t, std::string>>& caps)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    sqlite3_stmt* stmt = stmts.put_caps.get();
    for (const auto& [node, bytes] : caps) {
      ScopedReset reset(stmt);
      RETURN_IF_ERROR(BindOrError(operation, stmt, int64_t{node}, Blob{bytes}));
      RETURN_IF_ERROR(StepDone(operation, stmt));
    }
    return absl::OkStatus();
  }

  absl::Status InsertAudit(absl::string_view operation, int64_t unix_ms,
                           const std::string& actor, const std::string& action,
                           const std::string& details_json)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    sqlite3_stmt* stmt = stmts.insert_audit.get();
    ScopedReset reset(stmt);
    RETURN_IF_ERROR(BindOrError(operation, stmt, unix_ms, Text{actor},
                                Text{action}, Text{details_json}));
    return StepDone(operation, stmt);
  }

  // answer_log inside this store's current transaction, for LogCore.
  class Rows final : public LogRows {
   public:
    Rows(SqliteImpl& s, absl::string_view operation)
        : s_(s), operation_(operation) {}

    absl::Status ReadAfter(
        int64_t after,
        absl::FunctionRef<absl::Status(int64_t, int64_t, absl::string_view)> fn)
        override ABSL_NO_THREAD_SAFETY_ANALYSIS {
      sqlite3_stmt* stmt = s_.stmts.log_after.get();
      ScopedReset reset(stmt);
      RETURN_IF_ERROR(s_.BindOrError(operation_, stmt, after));
      int rc;
      while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        RETURN_IF_ERROR(CheckLogRow(stmt));
        RETURN_IF_ERROR(fn(sqlite3_column_int64(stmt, 0),
                           sqlite3_column_int64(stmt, 1), ColumnView(stmt, 2)));
      }
      if (rc != SQLITE_DONE) return s_.Error(operation_, rc);
      return absl::OkStatus();
    }

    absl::Status ReadRow(int64_t id, int64_t* campaign, std::string* blob)
        override ABSL_NO_THREAD_SAFETY_ANALYSIS {
      sqlite3_stmt* stmt = s_.stmts.log_row.get();
      ScopedReset reset(stmt);
      RETURN_IF_ERROR(s_.BindOrError(operation_, stmt, id));
      const int rc = sqlite3_step(stmt);
      if (rc == SQLITE_DONE) {
        return absl::DataLossError(absl::StrCat(
            "curator store ", s_.path, ": answer_log row ", id, " is gone"));
      }
      if (rc != SQLITE_ROW) return s_.Error(operation_, rc);
      RETURN_IF_ERROR(CheckLogRow(stmt));
      *campaign = sqlite3_column_int64(stmt, 1);
      { const absl::string_view v = ColumnView(stmt, 2); blob->assign(v.data(), v.size()); }
      return absl::OkStatus();
    }

    absl::Status ReadBytes(int64_t id, uint32_t offset, uint32_t length,
                           std::string& out) override
        ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return s_.ReadLogBytes(operation_, blob_, &blob_row_, id, offset, length,
                             out);
    }

    absl::StatusOr<int64_t> Insert(int64_t campaign, absl::string_view blob)
        override ABSL_NO_THREAD_SAFETY_ANALYSIS {
      sqlite3_stmt* insert = s_.stmts.insert_log.get();
      ScopedReset reset(insert);
      RETURN_IF_ERROR(s_.BindOrError(operation_, insert, campaign, Blob{blob}));
      RETURN_IF_ERROR(s_.StepDone(operation_, insert));
      return sqlite3_last_insert_rowid(s_.db.get());
    }

    absl::StatusOr<absl::flat_hash_set<int64_t>> Closed(
        const std::vector<int64_t>& campaigns) override
        ABSL_NO_THREAD_SAFETY_ANALYSIS {
      // One primary-key lookup per campaign (a batch has one or two).
      sqlite3_stmt* stmt = s_.stmts.closed_campaigns.get();
      absl::flat_hash_set<int64_t> closed;
      for (const int64_t id : campaigns) {
        ScopedReset reset(stmt);
        RETURN_IF_ERROR(s_.BindOrError(operation_, stmt, id));
        const int rc = sqlite3_step(stmt);
        if (rc == SQLITE_ROW) {
          if (sqlite3_column_int(stmt, 0) == 0) closed.insert(id);
        } else if (rc != SQLITE_DONE) {
          return s_.Error(operation_, rc);
        }
      }
      return closed;
    }

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
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Rows rows(*this, operation);
    return core.CatchUp(rows, initial);
  }

  // Reads bytes [offset, offset + length) of the blob of answer_log row
  // `row` into out, through handle (opened, or moved to the row, as
  // needed; *handle_row is the row it is on).
  absl::Status ReadLogBytes(absl::string_view operation, BlobHandle& handle,
                            int64_t* handle_row, int64_t row, uint32_t offset,
                            uint32_t length, std::string& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    int rc = SQLITE_OK;
    if (handle == nullptr) {
      sqlite3_blob* raw = nullptr;
      rc = sqlite3_blob_open(db.get(), "main", "answer_log", "answers", row,
                             /*flags=*/0, &raw);
      handle.reset(raw);
    } else if (*handle_row != row) {
      rc = sqlite3_blob_reopen(handle.get(), row);
    }
    if (rc == SQLITE_OK) {
      *handle_row = row;
      out.resize(length);
      rc = sqlite3_blob_read(handle.get(), out.data(), static_cast<int>(length),
                             static_cast<int>(offset));
    }
    if (rc == SQLITE_OK) return absl::OkStatus();
    // A handle that failed is of no further use.
    const absl::Status error =
        rc == SQLITE_ERROR
            ? absl::DataLossError(absl::StrCat(
                  "curator store ", path, ": answer_log row ", row,
                  " does not hold the ", length, " bytes at ", offset,
                  " the index has for it: ", sqlite3_errmsg(db.get())))
            : Error(operation, rc);
    handle.reset();
    return error;
  }

  // Runs body in one read transaction, after catching the index up with
  // what other connections committed, so that it reads one snapshot that
  // the index covers.
  absl::Status InReadTransaction(absl::string_view operation,
                                 absl::FunctionRef<absl::Status()> body)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    RETURN_IF_ERROR(
        Run(absl::StrCat(operation, ": begin"), stmts.begin_read.get()));
    absl::Status status = CatchUp(operation);
    if (status.ok()) status = body();
    // Nothing was written: ending the transaction either way is the same.
    ScopedReset reset(stmts.rollback.get());
    sqlite3_step(stmts.rollback.get());
    return status;
  }

  // The shared part of CreateCampaign and AddResult, in one transaction:
  // insert a placeholder row (after bind_insert binds its parameters), learn
  // its id, store the record built for it.
  absl::StatusOr<int64_t> InsertWithId(
      absl::string_view operation, sqlite3_stmt* insert,
      absl::FunctionRef<absl::Status()> bind_insert, sqlite3_stmt* update,
      absl::FunctionRef<std::string(int64_t)> record_for_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    int64_t id = 0;
    RETURN_IF_ERROR(InTransaction(
        operation, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) -> absl::Status {
          {
            ScopedReset reset(insert);
            RETURN_IF_ERROR(bind_insert());
            RETURN_IF_ERROR(StepDone(operation, insert));
          }
          id = sqlite3_last_insert_rowid(db.get());
          const std::string record = record_for_id(id);
          ScopedReset reset(update);
          RETURN_IF_ERROR(BindOrError(operation, update, id, Blob{record}));
          return StepDone(operation, update);
        }));
    return id;
  }
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
  absl::StatusOr<int64_t> AddResult(
      absl::FunctionRef<std::string(int64_t id)> record_for_id,
      const std::string& matrix_path) override;
  absl::StatusOr<std::vector<ResultRow>> ListResults() override;
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

 private:
  std::unique_ptr<SqliteImpl> impl_;
};

absl::StatusOr<std::unique_ptr<CuratorStore>> CuratorStore::Open(
    const std::string& dir, Options options) {
  if (options.max_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "curator store: max_bytes must be >= 0, got ", options.max_bytes));
  }
  if (options.busy_timeout_ms < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("curator store: busy_timeout_ms must be >= 0, got ",
                     options.busy_timeout_ms));
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat("curator store: data directory ", dir,
                     " does not exist or is not a directory",
                     ec ? absl::StrCat(" (", ec.message(), ")") : ""));
  }
  auto impl =
      std::make_unique<SqliteImpl>((std::filesystem::path(dir) / kFileName).string());
  absl::MutexLock lock(&impl->mu);
  ASSIGN_OR_RETURN(impl->db, sqlite::OpenDatabase(impl->path));
  sqlite3* db = impl->db.get();
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, options.busy_timeout_ms);

  // The version first: a file of another schema is left untouched.
  ASSIGN_OR_RETURN(
      const int64_t version,
      impl->QueryInt("reading the schema version", "PRAGMA user_version"));
  if (version != 0 && version != kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "curator store ", impl->path, " has schema version ", version,
        ", this build reads version ", kSchemaVersion,
        " only (it does not migrate a store of version 1)"));
  }

  ASSIGN_OR_RETURN(const std::string mode,
                   sqlite::QueryText(db, impl->path, "PRAGMA journal_mode = WAL",
                                     "setting journal_mode=WAL"));
  if (mode != "wal") {
    return absl::InternalError(absl::StrCat(
        "curator store ", impl->path,
        ": SQLite refused WAL mode (journal_mode is ", mode, ")"));
  }
  RETURN_IF_ERROR(
      impl->Exec("setting synchronous", options.synchronous_full
                                            ? "PRAGMA synchronous = FULL"
                                            : "PRAGMA synchronous = NORMAL"));
  if (options.max_bytes > 0) {
    ASSIGN_OR_RETURN(const int64_t page_size,
                     impl->QueryInt("reading page_size", "PRAGMA page_size"));
    // SQLite keeps the limit at least the current size.
    const int64_t pages = std::max<int64_t>(1, options.max_bytes / page_size);
    RETURN_IF_ERROR(
        impl->QueryInt("setting max_page_count",
                       absl::StrCat("PRAGMA max_page_count = ", pages))
            .status());
  }

  if (version == 0) {
    // A new file (or one another Open is initialising: the transaction
    // waits for it, and CREATE ... IF NOT EXISTS makes the second a no-op).
    RETURN_IF_ERROR(sqlite::InTransaction(
        db, impl->path, "creating the schema", [&]() -> absl::Status {
          RETURN_IF_ERROR(sqlite::Exec(db, impl->path, kSchema,
                                       "creating the schema"));
          return sqlite::Exec(
              db, impl->path,
              absl::StrCat("PRAGMA user_version = ", kSchemaVersion).c_str(),
              "setting the schema version");
        }));
  }
  RETURN_IF_ERROR(sqlite::InTransaction(db, impl->path, "adding tables", [&] {
    return sqlite::Exec(db, impl->path, kAdditiveSchema, "adding tables");
  }));
  RETURN_IF_ERROR(impl->PrepareAll());
  RETURN_IF_ERROR(impl->CatchUp("indexing the answer log", /*initial=*/true));
  return std::unique_ptr<CuratorStore>(new SqliteStore(std::move(impl)));
}

CuratorStore::~CuratorStore() = default;

absl::StatusOr<int64_t> SqliteStore::CreateCampaign(
    absl::FunctionRef<std::string(int64_t id)> record_for_id) {
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  return s.InsertWithId(
      "creating a campaign", s.stmts.insert_campaign.get(),
      [] { return absl::OkStatus(); }, s.stmts.set_campaign_record.get(),
      record_for_id);
}

absl::Status SqliteStore::UpdateCampaign(const CampaignRow& row) {
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  const std::string operation = absl::StrCat("updating campaign ", row.id);
  return s.InTransaction(
      operation, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
        return s.UpdateCampaignRow(operation, row);
      });
}

absl::Status SqliteStore::UpdateCampaignAndAudit(
    const CampaignRow& row, const std::string& actor,
    const std::string& action, const std::string& details_json) {
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  const std::string operation =
      absl::StrCat("updating campaign ", row.id, " and auditing ", action);
  return s.InTransaction(
      operation, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) -> absl::Status {
        RETURN_IF_ERROR(s.UpdateCampaignRow(operation, row));
        return s.InsertAudit(operation, now_ms, actor, action, details_json);
      });
}

absl::StatusOr<std::vector<CampaignRow>> SqliteStore::ListCampaigns() {
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  sqlite3_stmt* stmt = s.stmts.list_campaigns.get();
  ScopedReset reset(stmt);
  std::vector<CampaignRow> rows;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    CampaignRow& row = rows.emplace_back();
    row.id = sqlite3_column_int64(stmt, 0);
    row.open = sqlite3_column_int(stmt, 1) != 0;
    row.record = ColumnBlob(stmt, 2);
  }
  if (rc != SQLITE_DONE) return s.Error("listing campaigns", rc);
  return rows;
}

absl::StatusOr<std::vector<AppendOutcome>> SqliteStore::AppendAnswers(
    const std::vector<AnswerRow>& answers) {
  std::vector<AppendOutcome> outcomes;
  if (answers.empty()) return outcomes;
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  constexpr absl::string_view kOperation = "appending answers";
  std::vector<NewRow> new_rows;
  RETURN_IF_ERROR(s.InTransaction(
      kOperation, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) -> absl::Status {
        SqliteImpl::Rows rows(s, kOperation);
        RETURN_IF_ERROR(s.core.CatchUp(rows));
        ASSIGN_OR_RETURN(outcomes,
                         s.core.Append(rows, answers, now_ms, &new_rows));
        return absl::OkStatus();
      }));
  s.core.Commit(new_rows);
  return outcomes;
}

absl::Status SqliteStore::ForEachAnswer(
    int64_t campaign, absl::FunctionRef<bool(const AnswerRow&)> fn) {
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  const std::string operation =
      absl::StrCat("reading the answers of campaign ", campaign);
  return s.InReadTransaction(
      operation, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) -> absl::Status {
        SqliteImpl::Rows rows(s, operation);
        bool stopped = false;
        return s.core.Emit(rows, campaign, fn, &stopped);
      });
}

absl::Status SqliteStore::ForEachAnswer(
    absl::FunctionRef<bool(const AnswerRow&)> fn) {
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  constexpr absl::string_view kOperation = "reading all answers";
  return s.InReadTransaction(
      kOperation, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) -> absl::Status {
        SqliteImpl::Rows rows(s, kOperation);
        bool stopped = false;
        for (const int64_t campaign : s.core.index().Campaigns()) {
          RETURN_IF_ERROR(s.core.Emit(rows, campaign, fn, &stopped));
          if (stopped) break;
        }
        return absl::OkStatus();
      });
}

absl::Status SqliteStore::ForEachAnswerKey(
    absl::FunctionRef<void(int64_t campaign, uint32_t node, bool refusal)> fn) {
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  return s.InReadTransaction(
      "reading the answer index",
      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) -> absl::Status {
        s.core.ForEachKey(fn);
        return absl::OkStatus();
      });
}

absl::Status SqliteStore::PutCaps(
    const std::vector<std::pair<uint32_t, std::string>>& caps) {
  if (caps.empty()) return absl::OkStatus();
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  constexpr absl::string_view kOperation = "storing caps";
  return s.InTransaction(
      kOperation, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) -> absl::Status {
        return s.InsertCaps(kOperation, caps);
      });
}

absl::Status SqliteStore::PutCapsAndAudit(
    const std::vector<std::pair<uint32_t, std::string>>& caps,
    const std::string& actor, const std::string& action,
    const std::string& details_json) {
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  const std::string operation = absl::StrCat("storing caps and auditing ", action);
  return s.InTransaction(
      operation, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) -> absl::Status {
        RETURN_IF_ERROR(s.InsertCaps(operation, caps));
        return s.InsertAudit(operation, now_ms, actor, action, details_json);
      });
}

absl::Status SqliteStore::ForEachCaps(
    absl::FunctionRef<void(uint32_t node, const std::string& caps)> fn) {
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  sqlite3_stmt* stmt = s.stmts.all_caps.get();
  ScopedReset reset(stmt);
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    fn(static_cast<uint32_t>(sqlite3_column_int64(stmt, 0)),
       ColumnBlob(stmt, 1));
  }
  if (rc != SQLITE_DONE) return s.Error("reading caps", rc);
  return absl::OkStatus();
}

absl::Status SqliteStore::PutFleetPlan(const std::vector<std::string>& holders) {
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  constexpr absl::string_view kOperation = "storing the fleet plan";
  return s.InTransaction(
      kOperation, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) -> absl::Status {
        RETURN_IF_ERROR(s.Run(kOperation, s.stmts.clear_fleet.get()));
        sqlite3_stmt* stmt = s.stmts.put_fleet.get();
        for (size_t i = 0; i < holders.size(); ++i) {
          ScopedReset reset(stmt);
          RETURN_IF_ERROR(s.BindOrError(kOperation, stmt, static_cast<int64_t>(i),
                                        Text{holders[i]}));
          RETURN_IF_ERROR(s.StepDone(kOperation, stmt));
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<std::vector<std::string>> SqliteStore::GetFleetPlan() {
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  sqlite3_stmt* stmt = s.stmts.get_fleet.get();
  ScopedReset reset(stmt);
  std::vector<std::string> holders;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    if (sqlite3_column_int64(stmt, 0) != static_cast<int64_t>(holders.size())) {
      return absl::DataLossError(absl::StrCat(
          "curator store ", s.path, ": the fleet plan skips shard ",
          holders.size()));
    }
    holders.push_back(ColumnBlob(stmt, 1));
  }
  if (rc != SQLITE_DONE) return s.Error("reading the fleet plan", rc);
  return holders;
}

absl::Status SqliteStore::Audit(const std::string& actor,
                                 const std::string& action,
                                 const std::string& details_json) {
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  constexpr absl::string_view kOperation = "appending to the audit log";
  return s.InTransaction(
      kOperation, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
        return s.InsertAudit(kOperation, now_ms, actor, action, details_json);
      });
}

absl::StatusOr<std::vector<AuditRow>> SqliteStore::ListAudit(
    int64_t after_sequence, int limit) {
  RETURN_IF_ERROR(CheckLimit(limit));
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  constexpr absl::string_view kOperation = "reading the audit log";
  sqlite3_stmt* stmt = s.stmts.list_audit.get();
  ScopedReset reset(stmt);
  RETURN_IF_ERROR(
      s.BindOrError(kOperation, stmt, after_sequence, int64_t{limit}));
  std::vector<AuditRow> rows;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    AuditRow& row = rows.emplace_back();
    row.sequence = sqlite3_column_int64(stmt, 0);
    row.unix_ms = sqlite3_column_int64(stmt, 1);
    row.actor = ColumnBlob(stmt, 2);
    row.action = ColumnBlob(stmt, 3);
    row.details_json = ColumnBlob(stmt, 4);
  }
  if (rc != SQLITE_DONE) return s.Error(kOperation, rc);
  return rows;
}

absl::Status SqliteStore::PutSealed(const std::vector<SealedRow>& messages) {
  if (messages.empty()) return absl::OkStatus();
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  constexpr absl::string_view kOperation = "storing sealed messages";
  return s.InTransaction(
      kOperation, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) -> absl::Status {
        sqlite3_stmt* stmt = s.stmts.insert_sealed.get();
        for (const SealedRow& m : messages) {
          ScopedReset reset(stmt);
          RETURN_IF_ERROR(s.BindOrError(
              kOperation, stmt, Text{m.campaign}, int64_t{m.from_node},
              int64_t{m.to_node}, Blob{m.ciphertext}));
          RETURN_IF_ERROR(s.StepDone(kOperation, stmt));
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<std::vector<SealedRow>> SqliteStore::FetchSealed(
    const std::vector<uint32_t>& to_nodes, int64_t after, int limit,
    const std::string& campaign) {
  RETURN_IF_ERROR(CheckLimit(limit));
  std::vector<SealedRow> rows;
  if (to_nodes.empty()) return rows;
  const std::string nodes_json =
      absl::StrCat("[", absl::StrJoin(to_nodes, ","), "]");
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  constexpr absl::string_view kOperation = "fetching sealed messages";
  sqlite3_stmt* stmt = campaign.empty() ? s.stmts.fetch_sealed.get()
                                        : s.stmts.fetch_sealed_campaign.get();
  ScopedReset reset(stmt);
  if (campaign.empty()) {
    RETURN_IF_ERROR(s.BindOrError(kOperation, stmt, Text{nodes_json}, after,
                                  int64_t{limit}));
  } else {
    RETURN_IF_ERROR(s.BindOrError(kOperation, stmt, Text{nodes_json}, after,
                                  int64_t{limit}, Text{campaign}));
  }
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    SealedRow& row = rows.emplace_back();
    row.sequence = sqlite3_column_int64(stmt, 0);
    row.campaign = ColumnBlob(stmt, 1);
    row.from_node = static_cast<uint32_t>(sqlite3_column_int64(stmt, 2));
    row.to_node = static_cast<uint32_t>(sqlite3_column_int64(stmt, 3));
    row.ciphertext = ColumnBlob(stmt, 4);
  }
  if (rc != SQLITE_DONE) return s.Error(kOperation, rc);
  return rows;
}

absl::Status SqliteStore::PutNodeKeys(
    const std::vector<std::pair<uint32_t, std::string>>& keys) {
  if (keys.empty()) return absl::OkStatus();
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  constexpr absl::string_view kOperation = "storing node keys";
  return s.InTransaction(
      kOperation, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) -> absl::Status {
        sqlite3_stmt* stmt = s.stmts.put_node_key.get();
        for (const auto& [node, key] : keys) {
          ScopedReset reset(stmt);
          RETURN_IF_ERROR(
              s.BindOrError(kOperation, stmt, int64_t{node}, Blob{key}));
          RETURN_IF_ERROR(s.StepDone(kOperation, stmt));
        }
        return absl::OkStatus();
      });
}

absl::Status SqliteStore::ForEachNodeKey(
    absl::FunctionRef<void(uint32_t node, const std::string& key)> fn) {
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  sqlite3_stmt* stmt = s.stmts.all_node_keys.get();
  ScopedReset reset(stmt);
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    fn(static_cast<uint32_t>(sqlite3_column_int64(stmt, 0)),
       ColumnBlob(stmt, 1));
  }
  if (rc != SQLITE_DONE) return s.Error("reading node keys", rc);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> SqliteStore::AddResult(
    absl::FunctionRef<std::string(int64_t id)> record_for_id,
    const std::string& matrix_path) {
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  constexpr absl::string_view kOperation = "adding a result";
  sqlite3_stmt* insert = s.stmts.insert_result.get();
  return s.InsertWithId(
      kOperation, insert,
      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
        return s.BindOrError(kOperation, insert, Text{matrix_path});
      },
      s.stmts.set_result_record.get(), record_for_id);
}

absl::StatusOr<std::vector<ResultRow>> SqliteStore::ListResults() {
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  sqlite3_stmt* stmt = s.stmts.list_results.get();
  ScopedReset reset(stmt);
  std::vector<ResultRow> rows;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    ResultRow& row = rows.emplace_back();
    row.id = sqlite3_column_int64(stmt, 0);
    row.record = ColumnBlob(stmt, 1);
    row.matrix_path = ColumnBlob(stmt, 2);
  }
  if (rc != SQLITE_DONE) return s.Error("listing results", rc);
  return rows;
}

absl::StatusOr<ResultRow> SqliteStore::GetResult(int64_t id) {
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  const std::string operation = absl::StrCat("reading result ", id);
  sqlite3_stmt* stmt = s.stmts.get_result.get();
  ScopedReset reset(stmt);
  RETURN_IF_ERROR(s.BindOrError(operation, stmt, id));
  const int rc = sqlite3_step(stmt);
  if (rc == SQLITE_DONE) {
    return absl::NotFoundError(absl::StrCat("no result ", id));
  }
  if (rc != SQLITE_ROW) return s.Error(operation, rc);
  ResultRow row;
  row.id = sqlite3_column_int64(stmt, 0);
  row.record = ColumnBlob(stmt, 1);
  row.matrix_path = ColumnBlob(stmt, 2);
  return row;
}

}  // namespace ldpgraph::store

namespace ldpgraph::store {

absl::Status SqliteStore::ForEachNewAnswerKey(
    absl::FunctionRef<void(int64_t, uint32_t, bool)> fn) {
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  RETURN_IF_ERROR(s.InReadTransaction("reading new answers",
                                      [] { return absl::OkStatus(); }));
  s.core.TakeForeign(fn);
  return absl::OkStatus();
}

absl::Status SqliteStore::PutFrontendStatus(const std::string& name,
                                             const std::string& status) {
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  constexpr absl::string_view kOperation = "storing a frontend's status";
  return s.InTransaction(
      kOperation, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) -> absl::Status {
        {
          sqlite3_stmt* stmt = s.stmts.drop_frontends.get();
          ScopedReset reset(stmt);
          RETURN_IF_ERROR(s.BindOrError(kOperation, stmt, now_ms - 3600000));
          RETURN_IF_ERROR(s.StepDone(kOperation, stmt));
        }
        sqlite3_stmt* stmt = s.stmts.put_frontend.get();
        ScopedReset reset(stmt);
        RETURN_IF_ERROR(
            s.BindOrError(kOperation, stmt, Blob{name}, Blob{status}, now_ms));
        return s.StepDone(kOperation, stmt);
      });
}

absl::StatusOr<std::vector<std::string>> SqliteStore::FreshFrontendStatus(
    absl::Duration within) {
  const int64_t since = absl::ToUnixMillis(absl::Now() - within);
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  sqlite3_stmt* stmt = s.stmts.fresh_frontends.get();
  ScopedReset reset(stmt);
  RETURN_IF_ERROR(s.BindOrError("reading frontends' status", stmt, since));
  std::vector<std::string> out;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) out.push_back(ColumnBlob(stmt, 0));
  if (rc != SQLITE_DONE) return s.Error("reading frontends' status", rc);
  return out;
}

absl::StatusOr<std::unique_ptr<CuratorStore>> CuratorStore::OpenUrl(
    const std::string& url, const std::string& password_file,
    const std::string& dir, Options options) {
  if (url.empty() || url == "sqlite") {
    if (!password_file.empty()) {
      return absl::InvalidArgumentError(
          "a password file applies to a postgres:// store, not to SQLite");
    }
    return Open(dir, options);
  }
  if (absl::StartsWith(url, "postgres://") ||
      absl::StartsWith(url, "postgresql://")) {
    PostgresStore::Options pg;
    pg.url = url;
    pg.password_file = password_file;
    pg.synchronous_full = options.synchronous_full;
    return PostgresStore::Open(std::move(pg));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--store must be sqlite (the file under the data directory) or a "
      "postgres://USER@HOST:PORT/DATABASE URL, got '",
      url, "'"));
}

}  // namespace ldpgraph::store
