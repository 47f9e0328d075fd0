#include "client/agent_state.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/storage/sqlite.h"
#include "common/status_macros.h"

namespace ldpgraph::agent {
namespace {

namespace fs = std::filesystem;

constexpr int kSchemaVersion = 1;

constexpr char kCreateSchema[] =
    "CREATE TABLE IF NOT EXISTS memo("
    "  node INTEGER NOT NULL,"
    "  key TEXT NOT NULL,"
    "  attribute TEXT NOT NULL,"
    "  mechanism TEXT NOT NULL,"
    "  parameters TEXT NOT NULL,"
    "  epsilon REAL NOT NULL,"
    "  answer BLOB NOT NULL,"
    "  draws INTEGER NOT NULL DEFAULT 0,"
    "  PRIMARY KEY(node, key));"
    "PRAGMA user_version = 1;";

// Added to version 1 without a version change; created at every Open.
constexpr char kCreateKeys[] =
    "CREATE TABLE IF NOT EXISTS keys("
    "  node INTEGER PRIMARY KEY,"
    "  private_key BLOB NOT NULL);";

using sqlite::Bind;
using sqlite::Blob;
using sqlite::ColumnBlob;
using sqlite::ColumnText;
using sqlite::Prepare;
using sqlite::QueryText;
using sqlite::ScopedReset;
using sqlite::SqliteError;
using Statement = sqlite::Stmt;
using sqlite::Text;

}  // namespace

absl::StatusOr<std::unique_ptr<AgentStateStore>> AgentStateStore::Open(
    const std::string& dir, Options options) {
  if (dir.empty()) {
    return absl::InvalidArgumentError("the agent state directory is empty");
  }
  if (options.busy_timeout_ms < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "busy_timeout_ms must be >= 0, got ", options.busy_timeout_ms));
  }
  if (options.max_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_bytes must be >= 0, got ", options.max_bytes));
  }
  std::error_code ec;
  if (options.read_only) return OpenReadOnly(dir);
  const bool created = fs::create_directories(dir, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat(
        "cannot create the agent state directory ", dir, ": ", ec.message()));
  }
  if (!fs::is_directory(dir, ec)) {
    return absl::InternalError(
        absl::StrCat("agent state directory ", dir, " is not a directory"));
  }
  if (created) {
    fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
    // Best effort: a filesystem without modes still holds the memo.
  }
  const std::string path = (fs::path(dir) / "agent.db").string();

  ASSIGN_OR_RETURN(sqlite::Db db, sqlite::OpenDatabase(path));
  sqlite3* raw = db.get();
  // From here on the store owns the connection and closes it on every error
  // path.
  std::unique_ptr<AgentStateStore> store(
      new AgentStateStore(path, db.release(), /*read_only=*/false));
  sqlite3_busy_timeout(raw, options.busy_timeout_ms);

  // The first statement reads the file: a file that is not a database
  // fails here ("file is not a database").
  ASSIGN_OR_RETURN(std::string mode,
                   QueryText(raw, path, "PRAGMA journal_mode=WAL",
                             "set journal_mode=WAL"));
  if (mode != "wal") {
    return absl::InternalError(absl::StrCat(
        path, ": cannot switch to WAL mode (journal_mode is '", mode, "')"));
  }
  RETURN_IF_ERROR(sqlite::Exec(raw, path, "PRAGMA synchronous=FULL",
                               "set synchronous=FULL"));
  if (options.max_bytes > 0) {
    ASSIGN_OR_RETURN(const int64_t page_size,
                     sqlite::QueryInt(raw, path, "PRAGMA page_size",
                                      "read page_size"));
    const int64_t pages = std::max<int64_t>(1, options.max_bytes / page_size);
    const std::string sql = absl::StrCat("PRAGMA max_page_count=", pages);
    RETURN_IF_ERROR(
        QueryText(raw, path, sql.c_str(), "set max_page_count").status());
  }

  ASSIGN_OR_RETURN(const int64_t version,
                   sqlite::QueryInt(raw, path, "PRAGMA user_version",
                                    "read the schema version"));
  if (version == 0) {
    // A new database (or one another process is creating right now: the
    // schema statements are idempotent).
    RETURN_IF_ERROR(sqlite::InTransaction(raw, path, "create the schema", [&] {
      return sqlite::Exec(raw, path, kCreateSchema, "create the schema");
    }));
  } else if (version != kSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " holds agent state of schema version ", version,
                     "; this build reads version ", kSchemaVersion));
  }
  RETURN_IF_ERROR(
      sqlite::Exec(raw, path, kCreateKeys, "create the keys table"));
  // memo.draws was added to version 1 without a version change.
  sqlite3_stmt* probe = nullptr;
  const bool has_draws = sqlite3_prepare_v2(raw, "SELECT draws FROM memo LIMIT 0",
                                            -1, &probe, nullptr) == SQLITE_OK;
  sqlite3_finalize(probe);
  if (!has_draws) {
    RETURN_IF_ERROR(sqlite::Exec(
        raw, path, "ALTER TABLE memo ADD COLUMN draws INTEGER NOT NULL DEFAULT 0",
        "add the memo's draws column"));
  }
  return store;
}

absl::StatusOr<std::unique_ptr<AgentStateStore>> AgentStateStore::OpenReadOnly(
    const std::string& dir) {
  const std::string path = (fs::path(dir) / "agent.db").string();
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return absl::NotFoundError(
        absl::StrCat("agent state ", path, " does not exist (opened read-only)"));
  }
  ASSIGN_OR_RETURN(sqlite::Db db, sqlite::OpenDatabaseReadOnly(path));
  sqlite3* raw = db.get();
  std::unique_ptr<AgentStateStore> store(
      new AgentStateStore(path, db.release(), /*read_only=*/true));
  sqlite3_busy_timeout(raw, Options().busy_timeout_ms);
  ASSIGN_OR_RETURN(const int64_t version,
                   sqlite::QueryInt(raw, path, "PRAGMA user_version",
                                    "read the schema version"));
  if (version != kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " holds agent state of schema version ", version,
        "; this build reads version ", kSchemaVersion));
  }
  return store;
}

absl::Status AgentStateStore::Writable(absl::string_view what) const {
  if (!read_only_) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(path_, " is open read-only: cannot ", what));
}

AgentStateStore::~AgentStateStore() { sqlite::DbCloser()(db_); }

absl::Status AgentStateStore::ForEach(
    absl::FunctionRef<absl::Status(const MemoRow&)> fn) const {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      Statement stmt,
      Prepare(db_, path_,
              "SELECT node, key, attribute, mechanism, parameters, epsilon, "
              "answer, draws FROM memo ORDER BY node, key"));
  for (;;) {
    const int rc = sqlite3_step(stmt.get());
    if (rc == SQLITE_DONE) return absl::OkStatus();
    if (rc != SQLITE_ROW) return SqliteError(rc, db_, path_, "read the memo");
    const int64_t node = sqlite3_column_int64(stmt.get(), 0);
    const std::string key = ColumnText(stmt.get(), 1);
    if (node < 0 || node > int64_t{UINT32_MAX}) {
      return absl::DataLossError(absl::StrCat(
          path_, ": memo row (", node, ", ", key, ") has an invalid node id"));
    }
    MemoRow row;
    row.node = static_cast<uint32_t>(node);
    row.key.attribute = ColumnText(stmt.get(), 2);
    row.key.mechanism = ColumnText(stmt.get(), 3);
    row.key.parameters = ColumnText(stmt.get(), 4);
    row.key.epsilon = sqlite3_column_double(stmt.get(), 5);
    row.answer = ColumnBlob(stmt.get(), 6);
    row.draws = static_cast<uint64_t>(
        std::max<int64_t>(0, sqlite3_column_int64(stmt.get(), 7)));
    if (row.key.Canonical() != key) {
      return absl::DataLossError(absl::StrCat(
          path_, ": memo row (", node, ", ", key,
          ") does not match its columns, which give ", row.key.Canonical()));
    }
    RETURN_IF_ERROR(fn(row));
  }
}

absl::Status AgentStateStore::Commit(const std::vector<MemoRow>& rows) {
  for (size_t i = 0; i < rows.size(); ++i) {
    const double eps = rows[i].key.epsilon;
    if (!std::isfinite(eps) || !(eps > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "memo row ", i, " (node ", rows[i].node,
          "): epsilon must be finite and > 0, got ", eps));
    }
  }
  if (rows.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(Writable("commit memo rows"));
  absl::MutexLock lock(&mu_);
  return sqlite::InTransaction(
      db_, path_, "the memo transaction",
      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return CommitLocked(rows); });
}

absl::Status AgentStateStore::CommitLocked(const std::vector<MemoRow>& rows) {
  ASSIGN_OR_RETURN(
      Statement insert,
      Prepare(db_, path_,
              "INSERT INTO memo(node, key, attribute, mechanism, parameters, "
              "epsilon, answer, draws) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
              "ON CONFLICT(node, key) DO NOTHING"));
  ASSIGN_OR_RETURN(
      Statement select,
      Prepare(db_, path_,
              "SELECT answer FROM memo WHERE node = ?1 AND key = ?2"));
  for (const MemoRow& row : rows) {
    const std::string key = row.key.Canonical();
    const std::string operation =
        absl::StrCat("store the memo row of node ", row.node);
    {
      ScopedReset reset(insert.get());
      RETURN_IF_ERROR(Bind(db_, path_, operation, insert.get(),
                           int64_t{row.node}, Text{key},
                           Text{row.key.attribute}, Text{row.key.mechanism},
                           Text{row.key.parameters}, row.key.epsilon,
                           Blob{row.answer},
                           static_cast<int64_t>(std::min<uint64_t>(
                               row.draws, uint64_t{INT64_MAX}))));
      RETURN_IF_ERROR(sqlite::StepDone(db_, path_, insert.get(), operation));
    }
    if (sqlite3_changes(db_) != 0) continue;
    // (node, key) was stored before: it must hold the same answer.
    ScopedReset reset(select.get());
    RETURN_IF_ERROR(Bind(db_, path_, operation, select.get(),
                         int64_t{row.node}, Text{key}));
    const int found = sqlite3_step(select.get());
    if (found != SQLITE_ROW) {
      return SqliteError(found, db_, path_,
                         absl::StrCat("read the memo row of node ", row.node));
    }
    if (ColumnBlob(select.get(), 0) != row.answer) {
      return absl::InternalError(absl::StrCat(
          path_, ": memo invariant violated: node ", row.node,
          " already stored a different answer to ", key,
          "; nothing of this commit was stored"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::pair<uint32_t, std::string>>>
AgentStateStore::LoadKeys() const {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      Statement stmt,
      Prepare(db_, path_, "SELECT node, private_key FROM keys ORDER BY node"));
  std::vector<std::pair<uint32_t, std::string>> out;
  for (;;) {
    const int rc = sqlite3_step(stmt.get());
    if (rc == SQLITE_DONE) return out;
    if (rc != SQLITE_ROW) return SqliteError(rc, db_, path_, "read the keys");
    const int64_t node = sqlite3_column_int64(stmt.get(), 0);
    std::string key = ColumnBlob(stmt.get(), 1);
    if (node < 0 || node > int64_t{UINT32_MAX} || key.size() != 32) {
      return absl::DataLossError(absl::StrCat(
          path_, ": the stored key of node ", node, " is damaged"));
    }
    out.emplace_back(static_cast<uint32_t>(node), std::move(key));
  }
}

absl::Status AgentStateStore::StoreKeys(
    const std::vector<std::pair<uint32_t, std::string>>& keys) {
  for (const auto& [node, key] : keys) {
    if (key.size() != 32) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the private key of node ", node, " must be 32 bytes, got ",
          key.size()));
    }
  }
  if (keys.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(Writable("store keys"));
  absl::MutexLock lock(&mu_);
  return sqlite::InTransaction(
      db_, path_, "the keys transaction",
      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
        ASSIGN_OR_RETURN(
            Statement insert,
            Prepare(db_, path_,
                    "INSERT INTO keys(node, private_key) VALUES(?1, ?2) "
                    "ON CONFLICT(node) DO NOTHING"));
        ASSIGN_OR_RETURN(Statement select,
                         Prepare(db_, path_,
                                 "SELECT private_key FROM keys WHERE node = ?1"));
        for (const auto& [node, key] : keys) {
          const std::string operation =
              absl::StrCat("store the key of node ", node);
          {
            ScopedReset reset(insert.get());
            RETURN_IF_ERROR(Bind(db_, path_, operation, insert.get(),
                                 int64_t{node}, Blob{key}));
            RETURN_IF_ERROR(
                sqlite::StepDone(db_, path_, insert.get(), operation));
          }
          if (sqlite3_changes(db_) != 0) continue;
          ScopedReset reset(select.get());
          RETURN_IF_ERROR(
              Bind(db_, path_, operation, select.get(), int64_t{node}));
          const int found = sqlite3_step(select.get());
          if (found != SQLITE_ROW) {
            return SqliteError(found, db_, path_,
                               absl::StrCat("read the key of node ", node));
          }
          if (ColumnBlob(select.get(), 0) != key) {
            return absl::InternalError(absl::StrCat(
                path_, ": node ", node,
                " already has a different key; a node's key is never "
                "replaced"));
          }
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<int64_t> AgentStateStore::Count() const {
  absl::MutexLock lock(&mu_);
  return sqlite::QueryInt(db_, path_, "SELECT COUNT(*) FROM memo",
                          "count the memo rows");
}

}  // namespace ldpgraph::agent
