// The SQLite wrapper the agent's memo (client/agent_state.h) and the
// curator's store (server/store/store.h) share: owners of the connection,
// statement and blob handles, prepare/bind/step/read helpers, transactions,
// and the one mapping of SQLite's result codes to absl::Status.
//
// Every failure of SQLite is reported by SqliteError below: its code is
// chosen by SQLite's primary result code, and its message names the
// database path, the operation and SQLite's own words, so that a log line
// says which file failed doing what. Nothing here takes a lock: callers
// serialise the use of a connection.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ldpgraph::sqlite {

// A SQLite failure as a status:
//   SQLITE_FULL                   RESOURCE_EXHAUSTED (a full disk, or the
//                                 database's max_page_count)
//   SQLITE_BUSY, SQLITE_LOCKED    UNAVAILABLE (another connection holds the
//                                 lock past the busy timeout: retry later)
//   anything else                 INTERNAL
// Extended result codes map as their primary code. The message is
// "<path>: <operation>: <SQLite's message> (SQLite code <rc>)"; SQLite's
// message is sqlite3_errmsg(db) when the connection's last failure was rc,
// sqlite3_errstr(rc) otherwise (db may be null).
absl::Status SqliteError(int rc, sqlite3* db, absl::string_view path,
                         absl::string_view operation);

struct DbCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
struct StmtFinalizer {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};
struct BlobCloser {
  void operator()(sqlite3_blob* blob) const { sqlite3_blob_close(blob); }
};
using Db = std::unique_ptr<sqlite3, DbCloser>;
using Stmt = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;
using BlobHandle = std::unique_ptr<sqlite3_blob, BlobCloser>;

// Opens (creating if missing) the database at path, read-write, without
// SQLite's own mutex (callers serialise). The error of a failed open (as
// SqliteError, operation "open") names path; nothing is left open then.
absl::StatusOr<Db> OpenDatabase(const std::string& path);
// Opens an existing database read-only (an inspection of another process's
// store: in WAL mode it reads the last committed state while the owner
// writes). Errors as OpenDatabase's; a missing file is one.
absl::StatusOr<Db> OpenDatabaseReadOnly(const std::string& path);

// Prepares one statement; SqliteError naming the SQL on failure. flags are
// sqlite3_prepare_v3's (SQLITE_PREPARE_PERSISTENT for a statement kept and
// reused).
absl::StatusOr<Stmt> Prepare(sqlite3* db, absl::string_view path,
                             const char* sql, unsigned int flags = 0);

// Runs sql (one or more statements, no rows wanted) with sqlite3_exec;
// SqliteError on failure.
absl::Status Exec(sqlite3* db, absl::string_view path, const char* sql,
                  absl::string_view operation);

// Runs a single-row query (a PRAGMA, a COUNT) and returns the first column
// of its first row: as text, empty if there is no row; as an integer,
// INTERNAL if there is no row. SqliteError on failure.
absl::StatusOr<std::string> QueryText(sqlite3* db, absl::string_view path,
                                      const char* sql,
                                      absl::string_view operation);
absl::StatusOr<int64_t> QueryInt(sqlite3* db, absl::string_view path,
                                 const char* sql, absl::string_view operation);

// Steps a statement that returns no rows (INSERT, UPDATE, BEGIN, ...):
// OK on SQLITE_DONE; SqliteError otherwise (a row is INTERNAL).
absl::Status StepDone(sqlite3* db, absl::string_view path,
                      sqlite3_stmt* stmt, absl::string_view operation);

// Resets a statement when a use of it ends, however it ends, and clears its
// bindings: a SELECT left mid-scan would otherwise hold its read
// transaction open, and bindings made with SQLITE_STATIC (Blob, Text) must
// not outlive the caller's bytes.
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

// Bound as a BLOB or as TEXT without a copy (SQLITE_STATIC): the bytes must
// stay alive until the statement is reset and its bindings cleared, which a
// ScopedReset made before binding sees to.
struct Blob {
  absl::string_view bytes;
};
struct Text {
  absl::string_view text;
};

inline int BindValue(sqlite3_stmt* s, int i, int64_t v) {
  return sqlite3_bind_int64(s, i, v);
}
inline int BindValue(sqlite3_stmt* s, int i, double v) {
  return sqlite3_bind_double(s, i, v);
}
inline int BindValue(sqlite3_stmt* s, int i, const Blob& b) {
  // A null pointer would bind NULL: an empty blob is a zero-length value.
  return sqlite3_bind_blob64(s, i, b.bytes.data() != nullptr ? b.bytes.data() : "",
                             b.bytes.size(), SQLITE_STATIC);
}
inline int BindValue(sqlite3_stmt* s, int i, const Text& t) {
  return sqlite3_bind_text64(s, i, t.text.data() != nullptr ? t.text.data() : "",
                             t.text.size(), SQLITE_STATIC, SQLITE_UTF8);
}

// Binds args to parameters 1, 2, ... (each an int64_t, a double, a Blob or
// a Text); SqliteError for the first that fails.
template <typename... Args>
absl::Status Bind(sqlite3* db, absl::string_view path,
                  absl::string_view operation, sqlite3_stmt* stmt,
                  const Args&... args) {
  int i = 0;
  int rc = SQLITE_OK;
  ((rc = rc == SQLITE_OK ? BindValue(stmt, ++i, args) : rc), ...);
  if (rc != SQLITE_OK) return SqliteError(rc, db, path, operation);
  return absl::OkStatus();
}

// Column i of the current row: a copy of its bytes (empty for NULL), or a
// view valid until the statement steps, resets or is finalised.
std::string ColumnText(sqlite3_stmt* stmt, int i);
std::string ColumnBlob(sqlite3_stmt* stmt, int i);
absl::string_view ColumnView(sqlite3_stmt* stmt, int i);

// The statements of a transaction, prepared once by a connection that runs
// many (see InTransaction).
struct TransactionStatements {
  sqlite3_stmt* begin;     // BEGIN IMMEDIATE (or BEGIN, for a read)
  sqlite3_stmt* commit;    // COMMIT
  sqlite3_stmt* rollback;  // ROLLBACK
};

// Runs body in one write transaction: BEGIN IMMEDIATE, body, COMMIT. On any
// failure, of body or of COMMIT, rolls back (if SQLite has not already), so
// nothing of it is stored, and returns the first error: body's, or
// SqliteError with operation "<operation>: begin" / "<operation>: commit".
// The second form runs prepared statements instead of parsing the SQL
// each time.
absl::Status InTransaction(sqlite3* db, absl::string_view path,
                           absl::string_view operation,
                           absl::FunctionRef<absl::Status()> body);
absl::Status InTransaction(sqlite3* db, absl::string_view path,
                           absl::string_view operation,
                           const TransactionStatements& statements,
                           absl::FunctionRef<absl::Status()> body);

}  // namespace ldpgraph::sqlite
