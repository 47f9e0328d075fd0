#include "server/store/store.h"

#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"

namespace ldpgraph::store {
namespace {

constexpr int kSchemaVersion = 1;
constexpr int kBusyTimeoutMs = 5000;
constexpr char kFileName[] = "curator.db";

// Version 1. AUTOINCREMENT keeps ids from being reused after a deletion
// (there is none today, but an id a client has seen must stay unique).
// answers is WITHOUT ROWID: the primary key is the lookup and the scan order.
// sealed's index on to_node carries the rowid (sequence), so a fetch is a
// range scan per recipient.
constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS campaigns(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  open INTEGER NOT NULL,
  record BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS answers(
  campaign INTEGER NOT NULL,
  node INTEGER NOT NULL,
  refusal INTEGER NOT NULL,
  payload BLOB NOT NULL,
  unix_ms INTEGER NOT NULL,
  PRIMARY KEY(campaign, node)) WITHOUT ROWID;
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
CREATE TABLE IF NOT EXISTS results(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  record BLOB NOT NULL,
  matrix_path TEXT NOT NULL);
)sql";

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
struct StmtFinalizer {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};
using Db = std::unique_ptr<sqlite3, DbCloser>;
using Stmt = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

// Resets a cached statement when a use of it ends, however it ends: a
// SELECT left mid-scan would otherwise hold its read transaction open, and
// bindings made with SQLITE_STATIC must not outlive the caller's strings.
class ScopedReset {
 public:
  explicit ScopedReset(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~ScopedReset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  ScopedReset(const ScopedReset&) = delete;
  ScopedReset& operator=(const ScopedReset&) = delete;

 private:
  sqlite3_stmt* stmt_;
};

// Bound as a BLOB or as TEXT, without a copy (SQLITE_STATIC: the bytes must
// live until the statement is reset, which ScopedReset sees to).
struct Blob {
  const std::string& bytes;
};
struct Text {
  const std::string& text;
};

int BindValue(sqlite3_stmt* s, int i, int64_t v) {
  return sqlite3_bind_int64(s, i, v);
}
int BindValue(sqlite3_stmt* s, int i, const Blob& b) {
  return sqlite3_bind_blob64(s, i, b.bytes.data(), b.bytes.size(),
                             SQLITE_STATIC);
}
int BindValue(sqlite3_stmt* s, int i, const Text& t) {
  return sqlite3_bind_text64(s, i, t.text.data(), t.text.size(), SQLITE_STATIC,
                             SQLITE_UTF8);
}

// Binds args to parameters 1, 2, ...; the first failing code, or SQLITE_OK.
template <typename... Args>
int BindAll(sqlite3_stmt* s, const Args&... args) {
  int i = 0;
  int rc = SQLITE_OK;
  ((rc = rc == SQLITE_OK ? BindValue(s, ++i, args) : rc), ...);
  return rc;
}

std::string ColumnBytes(sqlite3_stmt* s, int i) {
  const void* data = sqlite3_column_blob(s, i);
  const int size = sqlite3_column_bytes(s, i);
  if (data == nullptr || size <= 0) return std::string();
  return std::string(static_cast<const char*>(data), size);
}

AnswerRow ReadAnswer(sqlite3_stmt* s) {
  AnswerRow row;
  row.campaign = sqlite3_column_int64(s, 0);
  row.node = static_cast<uint32_t>(sqlite3_column_int64(s, 1));
  row.refusal = sqlite3_column_int(s, 2) != 0;
  row.payload = ColumnBytes(s, 3);
  row.unix_ms = sqlite3_column_int64(s, 4);
  return row;
}

absl::Status CheckLimit(int limit) {
  if (limit <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit must be > 0, got ", limit));
  }
  return absl::OkStatus();
}

}  // namespace

struct CuratorStore::Impl {
  // Statements prepared once at Open (SQLITE_PREPARE_PERSISTENT) and reused.
  struct Statements {
    Stmt begin, commit, rollback;
    Stmt insert_campaign, set_campaign_record, update_campaign, list_campaigns;
    Stmt insert_answer, select_answer, answers_of_campaign, all_answers;
    Stmt put_caps, all_caps;
    Stmt insert_audit, list_audit;
    Stmt insert_sealed, fetch_sealed;
    Stmt insert_result, set_result_record, list_results, get_result;
  };

  explicit Impl(std::string path) : path(std::move(path)) {}

  // The database file, for messages.
  const std::string path;
  absl::Mutex mu;
  // Declared before stmts, so destroyed after them.
  Db db ABSL_GUARDED_BY(mu);
  Statements stmts ABSL_GUARDED_BY(mu);

  // INTERNAL (RESOURCE_EXHAUSTED for SQLITE_FULL) naming the path, the
  // operation, and SQLite's message for rc.
  absl::Status Error(absl::string_view operation, int rc)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    // sqlite3_errmsg describes the most recent failure on the connection;
    // fall back on the generic text if that was something else.
    const char* message = db != nullptr && sqlite3_errcode(db.get()) == rc
                              ? sqlite3_errmsg(db.get())
                              : sqlite3_errstr(rc);
    std::string text = absl::StrCat("curator store ", path, ": ", operation,
                                    ": ", message, " (SQLite code ", rc, ")");
    if ((rc & 0xff) == SQLITE_FULL) {
      return absl::ResourceExhaustedError(std::move(text));
    }
    return absl::InternalError(std::move(text));
  }

  absl::Status Exec(absl::string_view operation, const char* sql)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const int rc = sqlite3_exec(db.get(), sql, nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return Error(operation, rc);
    return absl::OkStatus();
  }

  // Runs a statement returning one integer (a PRAGMA).
  absl::StatusOr<int64_t> QueryInt(absl::string_view operation,
                                   const std::string& sql)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    sqlite3_stmt* raw = nullptr;
    int rc = sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &raw, nullptr);
    Stmt stmt(raw);
    if (rc != SQLITE_OK) return Error(operation, rc);
    rc = sqlite3_step(stmt.get());
    if (rc != SQLITE_ROW) {
      return Error(operation, rc == SQLITE_DONE ? SQLITE_ERROR : rc);
    }
    return sqlite3_column_int64(stmt.get(), 0);
  }

  absl::StatusOr<Stmt> Prepare(const char* sql)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    sqlite3_stmt* raw = nullptr;
    const int rc = sqlite3_prepare_v3(db.get(), sql, -1,
                                      SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
    Stmt stmt(raw);
    if (rc != SQLITE_OK) {
      return Error(absl::StrCat("preparing \"", sql, "\""), rc);
    }
    return stmt;
  }

  absl::Status PrepareAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Statements& s = stmts;
    ASSIGN_OR_RETURN(s.begin, Prepare("BEGIN IMMEDIATE"));
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
    ASSIGN_OR_RETURN(
        s.insert_answer,
        Prepare("INSERT INTO answers(campaign, node, refusal, payload, "
                "unix_ms) VALUES(?1, ?2, ?3, ?4, ?5) "
                "ON CONFLICT(campaign, node) DO NOTHING"));
    ASSIGN_OR_RETURN(s.select_answer,
                     Prepare("SELECT refusal, payload FROM answers "
                             "WHERE campaign = ?1 AND node = ?2"));
    ASSIGN_OR_RETURN(s.answers_of_campaign,
                     Prepare("SELECT campaign, node, refusal, payload, unix_ms "
                             "FROM answers WHERE campaign = ?1 ORDER BY node"));
    ASSIGN_OR_RETURN(s.all_answers,
                     Prepare("SELECT campaign, node, refusal, payload, unix_ms "
                             "FROM answers ORDER BY campaign, node"));
    ASSIGN_OR_RETURN(s.put_caps,
                     Prepare("INSERT INTO caps(node, caps) VALUES(?1, ?2) "
                             "ON CONFLICT(node) DO UPDATE SET "
                             "caps = excluded.caps"));
    ASSIGN_OR_RETURN(s.all_caps,
                     Prepare("SELECT node, caps FROM caps ORDER BY node"));
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
    const int rc = sqlite3_step(stmt);
    if (rc != SQLITE_DONE) {
      return Error(operation, rc == SQLITE_ROW ? SQLITE_ERROR : rc);
    }
    return absl::OkStatus();
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
    const int rc = BindAll(stmt, args...);
    if (rc != SQLITE_OK) return Error(operation, rc);
    return absl::OkStatus();
  }

  // Runs body in one write transaction (BEGIN IMMEDIATE ... COMMIT). On any
  // failure, of body or of COMMIT, rolls back, so nothing of it is stored,
  // and returns the first error.
  absl::Status InTransaction(absl::string_view operation,
                             absl::FunctionRef<absl::Status()> body)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    RETURN_IF_ERROR(Run(absl::StrCat(operation, ": begin"), stmts.begin.get()));
    absl::Status status = body();
    if (status.ok()) {
      status = Run(absl::StrCat(operation, ": commit"), stmts.commit.get());
    }
    // SQLite may already have rolled back (e.g. after SQLITE_FULL); a
    // failed COMMIT otherwise leaves the transaction open.
    if (!status.ok() && sqlite3_get_autocommit(db.get()) == 0) {
      ScopedReset reset(stmts.rollback.get());
      sqlite3_step(stmts.rollback.get());
    }
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

absl::StatusOr<std::unique_ptr<CuratorStore>> CuratorStore::Open(
    const std::string& dir, Options options) {
  if (options.max_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "curator store: max_bytes must be >= 0, got ", options.max_bytes));
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat("curator store: data directory ", dir,
                     " does not exist or is not a directory",
                     ec ? absl::StrCat(" (", ec.message(), ")") : ""));
  }
  auto impl =
      std::make_unique<Impl>((std::filesystem::path(dir) / kFileName).string());
  absl::MutexLock lock(&impl->mu);
  {
    sqlite3* raw = nullptr;
    const int rc = sqlite3_open_v2(
        impl->path.c_str(), &raw,
        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
        nullptr);
    impl->db.reset(raw);  // a handle even on failure, to be closed
    if (rc != SQLITE_OK) return impl->Error("opening", rc);
  }
  sqlite3* db = impl->db.get();
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, kBusyTimeoutMs);

  // The version first: a file of another schema is left untouched.
  ASSIGN_OR_RETURN(
      const int64_t version,
      impl->QueryInt("reading the schema version", "PRAGMA user_version"));
  if (version != 0 && version != kSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("curator store ", impl->path, " has schema version ",
                     version, ", this build reads version ", kSchemaVersion));
  }

  {
    sqlite3_stmt* raw = nullptr;
    int rc =
        sqlite3_prepare_v2(db, "PRAGMA journal_mode = WAL", -1, &raw, nullptr);
    Stmt stmt(raw);
    if (rc == SQLITE_OK) rc = sqlite3_step(stmt.get());
    if (rc != SQLITE_ROW) {
      return impl->Error("setting journal_mode=WAL", rc);
    }
    const std::string mode = ColumnBytes(stmt.get(), 0);
    if (mode != "wal") {
      return absl::InternalError(absl::StrCat(
          "curator store ", impl->path,
          ": SQLite refused WAL mode (journal_mode is ", mode, ")"));
    }
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
    RETURN_IF_ERROR(impl->Exec("creating the schema", "BEGIN IMMEDIATE"));
    absl::Status status = impl->Exec("creating the schema", kSchema);
    if (status.ok()) {
      status = impl->Exec(
          "setting the schema version",
          absl::StrCat("PRAGMA user_version = ", kSchemaVersion).c_str());
    }
    if (status.ok()) status = impl->Exec("creating the schema", "COMMIT");
    if (!status.ok()) {
      if (sqlite3_get_autocommit(db) == 0) {
        sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      }
      return status;
    }
  }
  RETURN_IF_ERROR(impl->PrepareAll());
  return std::unique_ptr<CuratorStore>(new CuratorStore(std::move(impl)));
}

CuratorStore::CuratorStore(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

CuratorStore::~CuratorStore() = default;

absl::StatusOr<int64_t> CuratorStore::CreateCampaign(
    absl::FunctionRef<std::string(int64_t id)> record_for_id) {
  Impl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  return s.InsertWithId(
      "creating a campaign", s.stmts.insert_campaign.get(),
      [] { return absl::OkStatus(); }, s.stmts.set_campaign_record.get(),
      record_for_id);
}

absl::Status CuratorStore::UpdateCampaign(const CampaignRow& row) {
  Impl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  const std::string operation = absl::StrCat("updating campaign ", row.id);
  bool found = false;
  RETURN_IF_ERROR(s.InTransaction(
      operation, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) -> absl::Status {
        sqlite3_stmt* stmt = s.stmts.update_campaign.get();
        ScopedReset reset(stmt);
        RETURN_IF_ERROR(s.BindOrError(operation, stmt, row.id,
                                      int64_t{row.open ? 1 : 0},
                                      Blob{row.record}));
        RETURN_IF_ERROR(s.StepDone(operation, stmt));
        found = sqlite3_changes(s.db.get()) > 0;
        return absl::OkStatus();
      }));
  if (!found) {
    return absl::NotFoundError(absl::StrCat("no campaign ", row.id));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<CampaignRow>> CuratorStore::ListCampaigns() {
  Impl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  sqlite3_stmt* stmt = s.stmts.list_campaigns.get();
  ScopedReset reset(stmt);
  std::vector<CampaignRow> rows;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    CampaignRow& row = rows.emplace_back();
    row.id = sqlite3_column_int64(stmt, 0);
    row.open = sqlite3_column_int(stmt, 1) != 0;
    row.record = ColumnBytes(stmt, 2);
  }
  if (rc != SQLITE_DONE) return s.Error("listing campaigns", rc);
  return rows;
}

absl::StatusOr<std::vector<AppendOutcome>> CuratorStore::AppendAnswers(
    const std::vector<AnswerRow>& answers) {
  std::vector<AppendOutcome> outcomes;
  if (answers.empty()) return outcomes;
  outcomes.reserve(answers.size());
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  Impl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  constexpr absl::string_view kOperation = "appending answers";
  RETURN_IF_ERROR(s.InTransaction(
      kOperation, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) -> absl::Status {
        sqlite3_stmt* insert = s.stmts.insert_answer.get();
        sqlite3_stmt* select = s.stmts.select_answer.get();
        for (const AnswerRow& a : answers) {
          {
            ScopedReset reset(insert);
            RETURN_IF_ERROR(
                s.BindOrError(kOperation, insert, a.campaign, int64_t{a.node},
                              int64_t{a.refusal ? 1 : 0}, Blob{a.payload},
                              a.unix_ms != 0 ? a.unix_ms : now_ms));
            RETURN_IF_ERROR(s.StepDone(kOperation, insert));
            if (sqlite3_changes(s.db.get()) > 0) {
              outcomes.push_back(AppendOutcome::kStored);
              continue;
            }
          }
          // (campaign, node) already holds an answer: the same one or not?
          ScopedReset reset(select);
          RETURN_IF_ERROR(
              s.BindOrError(kOperation, select, a.campaign, int64_t{a.node}));
          const int rc = sqlite3_step(select);
          if (rc != SQLITE_ROW) {
            return s.Error(kOperation, rc == SQLITE_DONE ? SQLITE_ERROR : rc);
          }
          const bool refusal = sqlite3_column_int(select, 0) != 0;
          const void* data = sqlite3_column_blob(select, 1);
          const size_t size =
              static_cast<size_t>(sqlite3_column_bytes(select, 1));
          const bool same =
              refusal == a.refusal && size == a.payload.size() &&
              (size == 0 ||
               a.payload.compare(0, size, static_cast<const char*>(data),
                                 size) == 0);
          outcomes.push_back(same ? AppendOutcome::kDuplicate
                                  : AppendOutcome::kConflict);
        }
        return absl::OkStatus();
      }));
  return outcomes;
}

absl::Status CuratorStore::ForEachAnswer(
    int64_t campaign, absl::FunctionRef<bool(const AnswerRow&)> fn) {
  Impl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  const std::string operation =
      absl::StrCat("reading the answers of campaign ", campaign);
  sqlite3_stmt* stmt = s.stmts.answers_of_campaign.get();
  ScopedReset reset(stmt);
  RETURN_IF_ERROR(s.BindOrError(operation, stmt, campaign));
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    if (!fn(ReadAnswer(stmt))) return absl::OkStatus();
  }
  if (rc != SQLITE_DONE) return s.Error(operation, rc);
  return absl::OkStatus();
}

absl::Status CuratorStore::ForEachAnswer(
    absl::FunctionRef<bool(const AnswerRow&)> fn) {
  Impl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  sqlite3_stmt* stmt = s.stmts.all_answers.get();
  ScopedReset reset(stmt);
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    if (!fn(ReadAnswer(stmt))) return absl::OkStatus();
  }
  if (rc != SQLITE_DONE) return s.Error("reading all answers", rc);
  return absl::OkStatus();
}

absl::Status CuratorStore::PutCaps(
    const std::vector<std::pair<uint32_t, std::string>>& caps) {
  if (caps.empty()) return absl::OkStatus();
  Impl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  constexpr absl::string_view kOperation = "storing caps";
  return s.InTransaction(
      kOperation, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) -> absl::Status {
        sqlite3_stmt* stmt = s.stmts.put_caps.get();
        for (const auto& [node, bytes] : caps) {
          ScopedReset reset(stmt);
          RETURN_IF_ERROR(
              s.BindOrError(kOperation, stmt, int64_t{node}, Blob{bytes}));
          RETURN_IF_ERROR(s.StepDone(kOperation, stmt));
        }
        return absl::OkStatus();
      });
}

absl::Status CuratorStore::ForEachCaps(
    absl::FunctionRef<void(uint32_t node, const std::string& caps)> fn) {
  Impl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  sqlite3_stmt* stmt = s.stmts.all_caps.get();
  ScopedReset reset(stmt);
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    fn(static_cast<uint32_t>(sqlite3_column_int64(stmt, 0)),
       ColumnBytes(stmt, 1));
  }
  if (rc != SQLITE_DONE) return s.Error("reading caps", rc);
  return absl::OkStatus();
}

absl::Status CuratorStore::Audit(const std::string& actor,
                                 const std::string& action,
                                 const std::string& details_json) {
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  Impl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  constexpr absl::string_view kOperation = "appending to the audit log";
  return s.InTransaction(
      kOperation, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) -> absl::Status {
        sqlite3_stmt* stmt = s.stmts.insert_audit.get();
        ScopedReset reset(stmt);
        RETURN_IF_ERROR(s.BindOrError(kOperation, stmt, now_ms, Text{actor},
                                      Text{action}, Text{details_json}));
        return s.StepDone(kOperation, stmt);
      });
}

absl::StatusOr<std::vector<AuditRow>> CuratorStore::ListAudit(
    int64_t after_sequence, int limit) {
  RETURN_IF_ERROR(CheckLimit(limit));
  Impl& s = *impl_;
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
    row.actor = ColumnBytes(stmt, 2);
    row.action = ColumnBytes(stmt, 3);
    row.details_json = ColumnBytes(stmt, 4);
  }
  if (rc != SQLITE_DONE) return s.Error(kOperation, rc);
  return rows;
}

absl::Status CuratorStore::PutSealed(const std::vector<SealedRow>& messages) {
  if (messages.empty()) return absl::OkStatus();
  Impl& s = *impl_;
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

absl::StatusOr<std::vector<SealedRow>> CuratorStore::FetchSealed(
    const std::vector<uint32_t>& to_nodes, int64_t after, int limit) {
  RETURN_IF_ERROR(CheckLimit(limit));
  std::vector<SealedRow> rows;
  if (to_nodes.empty()) return rows;
  const std::string nodes_json =
      absl::StrCat("[", absl::StrJoin(to_nodes, ","), "]");
  Impl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  constexpr absl::string_view kOperation = "fetching sealed messages";
  sqlite3_stmt* stmt = s.stmts.fetch_sealed.get();
  ScopedReset reset(stmt);
  RETURN_IF_ERROR(
      s.BindOrError(kOperation, stmt, Text{nodes_json}, after, int64_t{limit}));
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    SealedRow& row = rows.emplace_back();
    row.sequence = sqlite3_column_int64(stmt, 0);
    row.campaign = ColumnBytes(stmt, 1);
    row.from_node = static_cast<uint32_t>(sqlite3_column_int64(stmt, 2));
    row.to_node = static_cast<uint32_t>(sqlite3_column_int64(stmt, 3));
    row.ciphertext = ColumnBytes(stmt, 4);
  }
  if (rc != SQLITE_DONE) return s.Error(kOperation, rc);
  return rows;
}

absl::StatusOr<int64_t> CuratorStore::AddResult(
    absl::FunctionRef<std::string(int64_t id)> record_for_id,
    const std::string& matrix_path) {
  Impl& s = *impl_;
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

absl::StatusOr<std::vector<ResultRow>> CuratorStore::ListResults() {
  Impl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  sqlite3_stmt* stmt = s.stmts.list_results.get();
  ScopedReset reset(stmt);
  std::vector<ResultRow> rows;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    ResultRow& row = rows.emplace_back();
    row.id = sqlite3_column_int64(stmt, 0);
    row.record = ColumnBytes(stmt, 1);
    row.matrix_path = ColumnBytes(stmt, 2);
  }
  if (rc != SQLITE_DONE) return s.Error("listing results", rc);
  return rows;
}

absl::StatusOr<ResultRow> CuratorStore::GetResult(int64_t id) {
  Impl& s = *impl_;
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
  row.record = ColumnBytes(stmt, 1);
  row.matrix_path = ColumnBytes(stmt, 2);
  return row;
}

}  // namespace ldpgraph::store
