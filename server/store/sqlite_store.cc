// The SQLite store (store.h): campaigns, the answer log, caps and the
// fleet plan. The class is declared in
// server/store/internal/sqlite_backend.h.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/storage/sqlite.h"
#include "common/status_macros.h"
#include "server/store/internal/sqlite_backend.h"

namespace ldpgraph::store::sqlite_internal {

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
  if (answers.empty()) return std::vector<AppendOutcome>{};
  GroupWrite w;
  w.answers = &answers;
  w.operation = "appending answers";
  for (const AnswerRow& a : answers) w.bytes += a.payload.size();
  RETURN_IF_ERROR(Write(w));
  return std::move(w.outcomes);
}

absl::Status SqliteStore::Write(GroupWrite& w) {
  SqliteImpl& s = *impl_;
  w.now_ms = absl::ToUnixMillis(absl::Now());
  s.queue_mu.Lock();
  s.writers.push_back(&w);
  struct Waiter {
    SqliteImpl* s;
    GroupWrite* w;
  } waiter{&s, &w};
  s.queue_mu.Await(absl::Condition(
      +[](Waiter* x) ABSL_EXCLUSIVE_LOCKS_REQUIRED(x->s->queue_mu) {
        return x->w->done || x->s->writers.front() == x->w;
      },
      &waiter));
  if (w.done) {  // a leader wrote it
    s.queue_mu.Unlock();
    return w.status;
  }
  // The leader: it stays at the front, so no other leads, while it takes
  // the store's mutex; the writes queued by then form its group.
  s.queue_mu.Unlock();
  std::vector<GroupWrite*> group;
  {
    absl::MutexLock lock(&s.mu);
    {
      absl::MutexLock queue(&s.queue_mu);
      size_t bytes = 0;
      for (GroupWrite* x : s.writers) {
        if (!group.empty() && (group.size() == kMaxGroupWrites ||
                               bytes + x->bytes > kMaxGroupBytes)) {
          break;
        }
        group.push_back(x);
        bytes += x->bytes;
      }
    }
    const absl::Status status = s.WriteGroup(group);
    if (status.ok() || group.size() == 1) {
      for (GroupWrite* x : group) x->status = status;
      s.group_commits.fetch_add(1, std::memory_order_relaxed);
    } else {
      for (GroupWrite* x : group) {
        x->status = s.WriteGroup({x});
        s.group_commits.fetch_add(1, std::memory_order_relaxed);
      }
    }
    s.group_writes.fetch_add(group.size(), std::memory_order_relaxed);
  }
  absl::MutexLock queue(&s.queue_mu);
  for (size_t i = 0; i < group.size(); ++i) {
    s.writers.front()->done = true;
    s.writers.pop_front();
  }
  return w.status;
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

absl::StatusOr<std::vector<AnswerRow>> SqliteStore::ListAnswers(
    int64_t campaign, uint32_t first_node, int limit, bool refusals_only) {
  RETURN_IF_ERROR(CheckPageLimit(limit));
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  const std::string operation =
      absl::StrCat("reading a page of the answers of campaign ", campaign);
  std::vector<AnswerRow> out;
  RETURN_IF_ERROR(s.InReadTransaction(
      operation, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) -> absl::Status {
        SqliteImpl::Rows rows(s, operation);
        return s.core.EmitPage(rows, campaign, first_node,
                               static_cast<size_t>(limit), refusals_only, &out);
      }));
  return out;
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
  GroupWrite w;
  w.caps = &caps;
  w.operation = "storing caps";
  for (const auto& [node, bytes] : caps) w.bytes += bytes.size();
  return Write(w);
}

absl::Status SqliteStore::PutCapsAndAudit(
    const std::vector<std::pair<uint32_t, std::string>>& caps,
    const std::string& actor, const std::string& action,
    const std::string& details_json) {
  GroupWrite w;
  w.caps = &caps;
  w.actor = &actor;
  w.action = &action;
  w.details_json = &details_json;
  w.operation = absl::StrCat("storing caps and auditing ", action);
  for (const auto& [node, bytes] : caps) w.bytes += bytes.size();
  w.bytes += details_json.size();
  return Write(w);
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

absl::StatusOr<FleetGrant> SqliteStore::ClaimFleetShard(const FleetClaim&) {
  return absl::FailedPreconditionError(
      "a SQLite store serves one curator process, whose fleet planner keeps "
      "the protocol in memory (FleetPlanner::Options::shared is for "
      "PostgreSQL)");
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

absl::Status SqliteStore::ForEachNewAnswerKey(
    absl::FunctionRef<void(int64_t, uint32_t, bool)> fn) {
  SqliteImpl& s = *impl_;
  absl::MutexLock lock(&s.mu);
  RETURN_IF_ERROR(s.InReadTransaction("reading new answers",
                                      [] { return absl::OkStatus(); }));
  s.core.TakeForeign(fn);
  return absl::OkStatus();
}

}  // namespace ldpgraph::store::sqlite_internal
