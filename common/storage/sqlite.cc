#include "common/storage/sqlite.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ldpgraph::sqlite {

absl::Status SqliteError(int rc, sqlite3* db, absl::string_view path,
                         absl::string_view operation) {
  // sqlite3_errmsg describes the most recent failure on the connection;
  // fall back on the generic text if that was something else.
  const bool own = db != nullptr && (sqlite3_extended_errcode(db) == rc ||
                                     sqlite3_errcode(db) == rc);
  std::string message =
      absl::StrCat(path, ": ", operation, ": ",
                   own ? sqlite3_errmsg(db) : sqlite3_errstr(rc),
                   " (SQLite code ", rc, ")");
  switch (rc & 0xff) {
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(std::move(message));
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(std::move(message));
    default:
      return absl::InternalError(std::move(message));
  }
}

absl::StatusOr<Db> OpenDatabase(const std::string& path) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &raw,
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
      nullptr);
  Db db(raw);  // a handle even on failure, to be closed
  if (rc != SQLITE_OK) return SqliteError(rc, db.get(), path, "open");
  return db;
}

absl::StatusOr<Db> OpenDatabaseReadOnly(const std::string& path) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw,
                                 SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
                                 nullptr);
  Db db(raw);
  if (rc != SQLITE_OK) return SqliteError(rc, db.get(), path, "open read-only");
  return db;
}

absl::StatusOr<Stmt> Prepare(sqlite3* db, absl::string_view path,
                             const char* sql, unsigned int flags) {
  sqlite3_stmt* raw = nullptr;
  const int rc = sqlite3_prepare_v3(db, sql, -1, flags, &raw, nullptr);
  Stmt stmt(raw);
  if (rc != SQLITE_OK) {
    return SqliteError(rc, db, path, absl::StrCat("prepare \"", sql, "\""));
  }
  return stmt;
}

absl::Status Exec(sqlite3* db, absl::string_view path, const char* sql,
                  absl::string_view operation) {
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return SqliteError(rc, db, path, operation);
  return absl::OkStatus();
}

absl::StatusOr<std::string> QueryText(sqlite3* db, absl::string_view path,
                                      const char* sql,
                                      absl::string_view operation) {
  ASSIGN_OR_RETURN(Stmt stmt, Prepare(db, path, sql));
  const int rc = sqlite3_step(stmt.get());
  if (rc == SQLITE_ROW) return ColumnText(stmt.get(), 0);
  if (rc == SQLITE_DONE) return std::string();
  return SqliteError(rc, db, path, operation);
}

absl::StatusOr<int64_t> QueryInt(sqlite3* db, absl::string_view path,
                                 const char* sql, absl::string_view operation) {
  ASSIGN_OR_RETURN(Stmt stmt, Prepare(db, path, sql));
  const int rc = sqlite3_step(stmt.get());
  if (rc == SQLITE_ROW) return sqlite3_column_int64(stmt.get(), 0);
  return SqliteError(rc == SQLITE_DONE ? SQLITE_ERROR : rc, db, path,
                     operation);
}

absl::Status StepDone(sqlite3* db, absl::string_view path, sqlite3_stmt* stmt,
                      absl::string_view operation) {
  const int rc = sqlite3_step(stmt);
  if (rc != SQLITE_DONE) {
    return SqliteError(rc == SQLITE_ROW ? SQLITE_ERROR : rc, db, path,
                       operation);
  }
  return absl::OkStatus();
}

std::string ColumnText(sqlite3_stmt* stmt, int i) {
  const unsigned char* data = sqlite3_column_text(stmt, i);
  const int size = sqlite3_column_bytes(stmt, i);
  if (data == nullptr || size <= 0) return std::string();
  return std::string(reinterpret_cast<const char*>(data), size);
}

std::string ColumnBlob(sqlite3_stmt* stmt, int i) {
  return std::string(ColumnView(stmt, i));
}

absl::string_view ColumnView(sqlite3_stmt* stmt, int i) {
  // sqlite3_column_blob before sqlite3_column_bytes: the documented order
  // that leaves a text value unconverted.
  const void* data = sqlite3_column_blob(stmt, i);
  const int size = sqlite3_column_bytes(stmt, i);
  if (data == nullptr || size <= 0) return absl::string_view();
  return absl::string_view(static_cast<const char*>(data), size);
}

namespace {

// Rolls back if a transaction is still open: SQLite may already have
// rolled back (after SQLITE_FULL, say), and a failed COMMIT leaves it open.
void RollbackIfOpen(sqlite3* db, sqlite3_stmt* rollback) {
  if (sqlite3_get_autocommit(db) != 0) return;
  if (rollback != nullptr) {
    ScopedReset reset(rollback);
    sqlite3_step(rollback);
  } else {
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

absl::Status RunStatement(sqlite3* db, absl::string_view path,
                          sqlite3_stmt* stmt, const char* sql,
                          absl::string_view operation) {
  if (stmt == nullptr) return Exec(db, path, sql, operation);
  ScopedReset reset(stmt);
  return StepDone(db, path, stmt, operation);
}

absl::Status Transact(sqlite3* db, absl::string_view path,
                      absl::string_view operation,
                      const TransactionStatements& statements,
                      absl::FunctionRef<absl::Status()> body) {
  RETURN_IF_ERROR(RunStatement(db, path, statements.begin, "BEGIN IMMEDIATE",
                               absl::StrCat(operation, ": begin")));
  absl::Status status = body();
  if (status.ok()) {
    status = RunStatement(db, path, statements.commit, "COMMIT",
                          absl::StrCat(operation, ": commit"));
  }
  if (!status.ok()) RollbackIfOpen(db, statements.rollback);
  return status;
}

}  // namespace

absl::Status InTransaction(sqlite3* db, absl::string_view path,
                           absl::string_view operation,
                           absl::FunctionRef<absl::Status()> body) {
  return Transact(db, path, operation, {nullptr, nullptr, nullptr}, body);
}

absl::Status InTransaction(sqlite3* db, absl::string_view path,
                           absl::string_view operation,
                           const TransactionStatements& statements,
                           absl::FunctionRef<absl::Status()> body) {
  return Transact(db, path, operation, statements, body);
}

}  // namespace ldpgraph::sqlite
