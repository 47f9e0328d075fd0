// SqliteImpl (server/store/internal/sqlite_backend.h): write and read
// transactions, the rows every call shares (campaigns, caps, audit), and
// the answer log's rows as LogCore reads and writes them.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/storage/sqlite.h"
#include "common/status_macros.h"
#include "server/store/internal/sqlite_backend.h"

namespace ldpgraph::store::sqlite_internal {

absl::Status SqliteImpl::InTransaction(absl::string_view operation,
                                       absl::FunctionRef<absl::Status()> body) {
  if (read_only) {
    return absl::FailedPreconditionError(absl::StrCat(
        "curator store ", path, " is open read-only: cannot ", operation));
  }
  return sqlite::InTransaction(
      db.get(), path, operation,
      {stmts.begin.get(), stmts.commit.get(), stmts.rollback.get()}, body);
}

absl::Status SqliteImpl::WriteGroup(const std::vector<GroupWrite*>& group) {
  const std::string operation =
      group.size() == 1
          ? group[0]->operation
          : absl::StrCat("writing ", group.size(),
                         " changes in one commit (the first: ",
                         group[0]->operation, ")");
  // All the group's answers, in queue order: the one write's own vector
  // when only one appends.
  std::vector<GroupWrite*> appenders;
  for (GroupWrite* w : group) {
    if (w->answers != nullptr && !w->answers->empty()) appenders.push_back(w);
  }
  std::vector<AnswerRow> merged;
  const std::vector<AnswerRow>* answers = nullptr;
  if (appenders.size() == 1) {
    answers = appenders[0]->answers;
  } else if (appenders.size() > 1) {
    size_t n = 0;
    for (const GroupWrite* w : appenders) n += w->answers->size();
    merged.reserve(n);
    for (const GroupWrite* w : appenders) {
      merged.insert(merged.end(), w->answers->begin(), w->answers->end());
    }
    answers = &merged;
  }
  std::vector<AppendOutcome> outcomes;
  std::vector<NewRow> new_rows;
  RETURN_IF_ERROR(InTransaction(
      operation, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) -> absl::Status {
        for (const GroupWrite* w : group) {
          if (w->caps != nullptr) RETURN_IF_ERROR(InsertCaps(operation, *w->caps));
          if (w->action != nullptr) {
            RETURN_IF_ERROR(InsertAudit(operation, w->now_ms, *w->actor,
                                        *w->action, *w->details_json));
          }
        }
        if (answers == nullptr) return absl::OkStatus();
        Rows rows(*this, operation);
        RETURN_IF_ERROR(core.CatchUp(rows));
        ASSIGN_OR_RETURN(outcomes, core.Append(rows, *answers,
                                               group[0]->now_ms, &new_rows));
        return absl::OkStatus();
      }));
  core.Commit(new_rows);
  size_t next = 0;
  for (GroupWrite* w : appenders) {
    w->outcomes.assign(outcomes.begin() + next,
                       outcomes.begin() + next + w->answers->size());
    next += w->answers->size();
  }
  return absl::OkStatus();
}

absl::Status SqliteImpl::UpdateCampaignRow(absl::string_view operation,
                                           const CampaignRow& row) {
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

absl::Status SqliteImpl::InsertCaps(
    absl::string_view operation,
    const std::vector<std::pair<uint32_t, std::string>>& caps) {
  sqlite3_stmt* stmt = stmts.put_caps.get();
  for (const auto& [node, bytes] : caps) {
    ScopedReset reset(stmt);
    RETURN_IF_ERROR(BindOrError(operation, stmt, int64_t{node}, Blob{bytes}));
    RETURN_IF_ERROR(StepDone(operation, stmt));
  }
  return absl::OkStatus();
}

absl::Status SqliteImpl::InsertAudit(absl::string_view operation,
                                     int64_t unix_ms, const std::string& actor,
                                     const std::string& action,
                                     const std::string& details_json) {
  sqlite3_stmt* stmt = stmts.insert_audit.get();
  ScopedReset reset(stmt);
  RETURN_IF_ERROR(BindOrError(operation, stmt, unix_ms, Text{actor},
                              Text{action}, Text{details_json}));
  return StepDone(operation, stmt);
}

absl::Status SqliteImpl::CatchUp(absl::string_view operation, bool initial) {
  Rows rows(*this, operation);
  return core.CatchUp(rows, initial);
}

absl::Status SqliteImpl::ReadLogBytes(absl::string_view operation,
                                      BlobHandle& handle, int64_t* handle_row,
                                      int64_t row, uint32_t offset,
                                      uint32_t length, std::string& out) {
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

absl::Status SqliteImpl::InReadTransaction(
    absl::string_view operation, absl::FunctionRef<absl::Status()> body) {
  RETURN_IF_ERROR(
      Run(absl::StrCat(operation, ": begin"), stmts.begin_read.get()));
  absl::Status status = CatchUp(operation);
  if (status.ok()) status = body();
  // Nothing was written: ending the transaction either way is the same.
  ScopedReset reset(stmts.rollback.get());
  sqlite3_step(stmts.rollback.get());
  return status;
}

absl::StatusOr<int64_t> SqliteImpl::InsertWithId(
    absl::string_view operation, sqlite3_stmt* insert,
    absl::FunctionRef<absl::Status()> bind_insert, sqlite3_stmt* update,
    absl::FunctionRef<std::string(int64_t)> record_for_id) {
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

absl::Status SqliteImpl::Rows::ReadAfter(
    int64_t after,
    absl::FunctionRef<absl::Status(int64_t, int64_t, absl::string_view)> fn) {
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

absl::Status SqliteImpl::Rows::ReadRow(int64_t id, int64_t* campaign,
                                       std::string* blob) {
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

absl::Status SqliteImpl::Rows::ReadBytes(int64_t id, uint32_t offset,
                                         uint32_t length, std::string& out) {
  return s_.ReadLogBytes(operation_, blob_, &blob_row_, id, offset, length,
                         out);
}

absl::StatusOr<int64_t> SqliteImpl::Rows::Insert(int64_t campaign,
                                                  absl::string_view blob) {
  sqlite3_stmt* insert = s_.stmts.insert_log.get();
  ScopedReset reset(insert);
  RETURN_IF_ERROR(s_.BindOrError(operation_, insert, campaign, Blob{blob}));
  RETURN_IF_ERROR(s_.StepDone(operation_, insert));
  return sqlite3_last_insert_rowid(s_.db.get());
}

absl::StatusOr<absl::flat_hash_set<int64_t>> SqliteImpl::Rows::Closed(
    const std::vector<int64_t>& campaigns) {
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

}  // namespace ldpgraph::store::sqlite_internal
