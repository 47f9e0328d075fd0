// The SQLite store (store.h): the audit log, sealed messages, node keys,
// results and frontends' status. The class is declared in
// server/store/internal/sqlite_backend.h.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/storage/sqlite.h"
#include "common/status_macros.h"
#include "server/store/internal/sqlite_backend.h"

namespace ldpgraph::store::sqlite_internal {

absl::Status SqliteStore::Audit(const std::string& actor,
                                 const std::string& action,
                                 const std::string& details_json) {
  GroupWrite w;
  w.actor = &actor;
  w.action = &action;
  w.details_json = &details_json;
  w.operation = "appending to the audit log";
  w.bytes = details_json.size();
  return Write(w);
}

absl::StatusOr<std::vector<AuditRow>> SqliteStore::ListAudit(
    int64_t after_sequence, int limit) {
  RETURN_IF_ERROR(CheckPageLimit(limit));
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
  RETURN_IF_ERROR(CheckPageLimit(limit));
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

absl::Status SqliteStore::GetNodeKeys(
    const std::vector<uint32_t>& nodes,
    absl::FunctionRef<void(uint32_t node, const std::string& key)> fn) {
  if (nodes.empty()) return absl::OkStatus();
  const std::string nodes_json = absl::StrCat("[", absl::StrJoin(nodes, ","), "]");
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  constexpr absl::string_view kOperation = "reading node keys";
  sqlite3_stmt* stmt = s.stmts.some_node_keys.get();
  ScopedReset reset(stmt);
  RETURN_IF_ERROR(s.BindOrError(kOperation, stmt, Text{nodes_json}));
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    fn(static_cast<uint32_t>(sqlite3_column_int64(stmt, 0)), ColumnBlob(stmt, 1));
  }
  if (rc != SQLITE_DONE) return s.Error(kOperation, rc);
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

absl::StatusOr<std::vector<ResultRow>> SqliteStore::ListResultsBefore(
    int64_t before_id, int limit) {
  RETURN_IF_ERROR(CheckPageLimit(limit));
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  constexpr absl::string_view kOperation = "listing results";
  sqlite3_stmt* stmt = s.stmts.list_results_before.get();
  ScopedReset reset(stmt);
  RETURN_IF_ERROR(s.BindOrError(kOperation, stmt, before_id, int64_t{limit}));
  std::vector<ResultRow> rows;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    ResultRow& row = rows.emplace_back();
    row.id = sqlite3_column_int64(stmt, 0);
    row.record = ColumnBlob(stmt, 1);
    row.matrix_path = ColumnBlob(stmt, 2);
  }
  if (rc != SQLITE_DONE) return s.Error(kOperation, rc);
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

}  // namespace ldpgraph::store::sqlite_internal
