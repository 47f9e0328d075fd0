// The SQLite store's schema and opening (store.h): the tables of schema
// version 2 and those added to it since, CuratorStore::Open (the version
// check, WAL, synchronous, the size limit, the schema) and the statements
// prepared once at Open.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/storage/sqlite.h"
#include "common/status_macros.h"
#include "server/store/internal/sqlite_backend.h"
#include "server/store/store.h"

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

// Open's arguments: INVALID_ARGUMENT for a negative max_bytes or
// busy_timeout_ms, NOT_FOUND when dir is not a directory.
absl::Status CheckOpenArguments(const std::string& dir,
                                const CuratorStore::Options& options) {
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
  return absl::OkStatus();
}

// A writable store's connection settings: WAL (INTERNAL if SQLite refuses
// it), synchronous, and the size limit when options.max_bytes is set.
absl::Status ConfigureWritable(sqlite_internal::SqliteImpl& impl,
                               const CuratorStore::Options& options)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl.mu) {
  ASSIGN_OR_RETURN(const std::string mode,
                   sqlite::QueryText(impl.db.get(), impl.path,
                                     "PRAGMA journal_mode = WAL",
                                     "setting journal_mode=WAL"));
  if (mode != "wal") {
    return absl::InternalError(absl::StrCat(
        "curator store ", impl.path,
        ": SQLite refused WAL mode (journal_mode is ", mode, ")"));
  }
  RETURN_IF_ERROR(
      impl.Exec("setting synchronous", options.synchronous_full
                                           ? "PRAGMA synchronous = FULL"
                                           : "PRAGMA synchronous = NORMAL"));
  if (options.max_bytes > 0) {
    ASSIGN_OR_RETURN(const int64_t page_size,
                     impl.QueryInt("reading page_size", "PRAGMA page_size"));
    // SQLite keeps the limit at least the current size.
    const int64_t pages = std::max<int64_t>(1, options.max_bytes / page_size);
    RETURN_IF_ERROR(
        impl.QueryInt("setting max_page_count",
                      absl::StrCat("PRAGMA max_page_count = ", pages))
            .status());
  }
  return absl::OkStatus();
}

// The schema of a writable store whose file is of `version` (0: new):
// kSchema and the version for a new file, in one transaction; then
// kAdditiveSchema in another.
absl::Status CreateSchema(sqlite_internal::SqliteImpl& impl, int64_t version)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl.mu) {
  sqlite3* db = impl.db.get();
  if (version == 0) {
    // A new file (or one another Open is initialising: the transaction
    // waits for it, and CREATE ... IF NOT EXISTS makes the second a no-op).
    RETURN_IF_ERROR(sqlite::InTransaction(
        db, impl.path, "creating the schema", [&]() -> absl::Status {
          RETURN_IF_ERROR(sqlite::Exec(db, impl.path, kSchema,
                                       "creating the schema"));
          return sqlite::Exec(
              db, impl.path,
              absl::StrCat("PRAGMA user_version = ", kSchemaVersion).c_str(),
              "setting the schema version");
        }));
  }
  return sqlite::InTransaction(db, impl.path, "adding tables", [&] {
    return sqlite::Exec(db, impl.path, kAdditiveSchema, "adding tables");
  });
}

// Open's last steps, on a connection whose schema is in place: the
// statements prepared, the answer log indexed, then the store over impl
// (moved there only then: the caller holds impl->mu until it returns).
absl::StatusOr<std::unique_ptr<CuratorStore>> ReadyStore(
    std::unique_ptr<sqlite_internal::SqliteImpl>& impl)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(impl->mu) {
  RETURN_IF_ERROR(impl->PrepareAll());
  RETURN_IF_ERROR(impl->CatchUp("indexing the answer log", /*initial=*/true));
  return std::unique_ptr<CuratorStore>(
      new sqlite_internal::SqliteStore(std::move(impl)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CuratorStore>> CuratorStore::Open(
    const std::string& dir, Options options) {
  RETURN_IF_ERROR(CheckOpenArguments(dir, options));
  auto impl = std::make_unique<sqlite_internal::SqliteImpl>(
      (std::filesystem::path(dir) / kFileName).string());
  absl::MutexLock lock(&impl->mu);
  impl->read_only = options.read_only;
  std::error_code ec;
  if (options.read_only && !std::filesystem::exists(impl->path, ec)) {
    return absl::NotFoundError(absl::StrCat(
        "curator store ", impl->path, " does not exist (opened read-only)"));
  }
  ASSIGN_OR_RETURN(impl->db, options.read_only
                                 ? sqlite::OpenDatabaseReadOnly(impl->path)
                                 : sqlite::OpenDatabase(impl->path));
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
  if (options.read_only) {
    if (version == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "curator store ", impl->path,
          " holds no curator state yet (opened read-only)"));
    }
    return ReadyStore(impl);
  }
  RETURN_IF_ERROR(ConfigureWritable(*impl, options));
  RETURN_IF_ERROR(CreateSchema(*impl, version));
  return ReadyStore(impl);
}

namespace sqlite_internal {
namespace {

using Statements = SqliteImpl::Statements;

// The statements PrepareAll prepares, in this order: where each is kept,
// and its SQL.
struct StatementSql {
  Stmt Statements::*stmt;
  const char* sql;
};
constexpr StatementSql kPreparedStatements[] = {
    {&Statements::begin, "BEGIN IMMEDIATE"},
    {&Statements::begin_read, "BEGIN"},
    {&Statements::commit, "COMMIT"},
    {&Statements::rollback, "ROLLBACK"},
    {&Statements::insert_campaign,
     "INSERT INTO campaigns(open, record) "
     "VALUES(1, x'')"},
    {&Statements::set_campaign_record,
     "UPDATE campaigns SET record = ?2 WHERE id = ?1"},
    {&Statements::update_campaign,
     "UPDATE campaigns SET open = ?2, record = ?3 "
     "WHERE id = ?1"},
    {&Statements::list_campaigns,
     "SELECT id, open, record FROM campaigns "
     "ORDER BY id"},
    {&Statements::insert_log,
     "INSERT INTO answer_log(campaign, answers) "
     "VALUES(?1, ?2)"},
    {&Statements::log_after,
     "SELECT id, campaign, answers FROM answer_log "
     "WHERE id > ?1 ORDER BY id"},
    {&Statements::log_row,
     "SELECT id, campaign, answers FROM answer_log "
     "WHERE id = ?1"},
    {&Statements::closed_campaigns, "SELECT open FROM campaigns WHERE id = ?1"},
    {&Statements::put_caps,
     "INSERT INTO caps(node, caps) VALUES(?1, ?2) "
     "ON CONFLICT(node) DO UPDATE SET "
     "caps = excluded.caps"},
    {&Statements::all_caps, "SELECT node, caps FROM caps ORDER BY node"},
    {&Statements::clear_fleet, "DELETE FROM fleet"},
    {&Statements::put_fleet, "INSERT INTO fleet(shard, holder) VALUES(?1, ?2)"},
    {&Statements::get_fleet, "SELECT shard, holder FROM fleet ORDER BY shard"},
    {&Statements::insert_audit,
     "INSERT INTO audit(unix_ms, actor, action, details_json) "
     "VALUES(?1, ?2, ?3, ?4)"},
    {&Statements::list_audit,
     "SELECT sequence, unix_ms, actor, action, details_json "
     "FROM audit WHERE sequence > ?1 ORDER BY sequence LIMIT ?2"},
    {&Statements::insert_sealed,
     "INSERT INTO sealed(campaign, from_node, to_node, ciphertext) "
     "VALUES(?1, ?2, ?3, ?4)"},
    // The recipients come as one JSON array, so the statement is prepared
    // once whatever their number.
    {&Statements::fetch_sealed,
     "SELECT sequence, campaign, from_node, to_node, ciphertext "
     "FROM sealed WHERE to_node IN (SELECT value FROM json_each(?1)) "
     "AND sequence > ?2 ORDER BY sequence LIMIT ?3"},
    {&Statements::fetch_sealed_campaign,
     "SELECT sequence, campaign, from_node, to_node, ciphertext "
     "FROM sealed WHERE campaign = ?4 AND "
     "to_node IN (SELECT value FROM json_each(?1)) "
     "AND sequence > ?2 ORDER BY sequence LIMIT ?3"},
    {&Statements::put_node_key,
     "INSERT INTO node_keys(node, public_key) "
     "VALUES(?1, ?2) ON CONFLICT(node) DO UPDATE SET "
     "public_key = excluded.public_key"},
    {&Statements::all_node_keys,
     "SELECT node, public_key FROM node_keys "
     "ORDER BY node"},
    {&Statements::some_node_keys,
     "SELECT node, public_key FROM node_keys WHERE node "
     "IN (SELECT value FROM json_each(?1)) ORDER BY node"},
    {&Statements::put_frontend,
     "INSERT INTO frontends(name, status, unix_ms) "
     "VALUES(?1, ?2, ?3) ON CONFLICT(name) DO UPDATE "
     "SET status = excluded.status, "
     "unix_ms = excluded.unix_ms"},
    {&Statements::drop_frontends, "DELETE FROM frontends WHERE unix_ms < ?1"},
    {&Statements::fresh_frontends,
     "SELECT status FROM frontends WHERE unix_ms >= ?1 "
     "ORDER BY name"},
    {&Statements::insert_result,
     "INSERT INTO results(record, matrix_path) "
     "VALUES(x'', ?1)"},
    {&Statements::set_result_record,
     "UPDATE results SET record = ?2 WHERE id = ?1"},
    {&Statements::list_results,
     "SELECT id, record, matrix_path FROM results "
     "ORDER BY id"},
    {&Statements::list_results_before,
     "SELECT id, record, matrix_path FROM results "
     "WHERE id < ?1 ORDER BY id DESC LIMIT ?2"},
    {&Statements::get_result,
     "SELECT id, record, matrix_path FROM results "
     "WHERE id = ?1"},
};

}  // namespace

absl::Status SqliteImpl::PrepareAll() {
  for (const StatementSql& s : kPreparedStatements) {
    ASSIGN_OR_RETURN(stmts.*s.stmt, Prepare(s.sql));
  }
  return absl::OkStatus();
}

}  // namespace sqlite_internal
}  // namespace ldpgraph::store
