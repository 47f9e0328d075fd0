// The PostgreSQL store (postgres_store.h): the audit log, sealed
// messages, node keys, results, frontends' status and the operator lease.
// The class is declared in server/store/internal/postgres_backend.h.
#include <libpq-fe.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "server/store/internal/postgres_backend.h"

namespace ldpgraph::store::postgres_internal {

absl::Status PgStore::Audit(const std::string& actor, const std::string& action,
                            const std::string& details) {
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  absl::MutexLock lock(&mu_);
  constexpr absl::string_view kOperation = "appending to the audit log";
  return c_.InTransaction(kOperation, [&] {
    return InsertAudit(kOperation, now_ms, actor, action, details);
  });
}

absl::StatusOr<std::vector<AuditRow>> PgStore::ListAudit(int64_t after,
                                                         int limit) {
  RETURN_IF_ERROR(CheckPageLimit(limit));
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(c_.Ensure());
  ASSIGN_OR_RETURN(
      Result r,
      c_.Exec("reading the audit log",
              "SELECT sequence, unix_ms, actor, action, details_json FROM "
              "audit WHERE sequence > $1 ORDER BY sequence LIMIT $2",
              {Int8(after), Int8(limit)}));
  std::vector<AuditRow> rows(static_cast<size_t>(PQntuples(r.get())));
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    rows[i].sequence = GetInt8(r.get(), i, 0);
    rows[i].unix_ms = GetInt8(r.get(), i, 1);
    rows[i].actor = std::string(GetBytes(r.get(), i, 2));
    rows[i].action = std::string(GetBytes(r.get(), i, 3));
    rows[i].details_json = std::string(GetBytes(r.get(), i, 4));
  }
  return rows;
}

absl::Status PgStore::PutSealed(const std::vector<SealedRow>& messages) {
  if (messages.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  constexpr absl::string_view kOperation = "storing sealed messages";
  return c_.InTransaction(kOperation, [&]() -> absl::Status {
    RETURN_IF_ERROR(c_.XactLock(kOperation, kSealedLock));
    for (const SealedRow& m : messages) {
      RETURN_IF_ERROR(
          c_.Exec(kOperation,
                  "INSERT INTO sealed(campaign, from_node, to_node, "
                  "ciphertext) VALUES($1, $2, $3, $4)",
                  {Bytes(m.campaign), Int8(m.from_node), Int8(m.to_node),
                   Bytes(m.ciphertext)})
              .status());
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<SealedRow>> PgStore::FetchSealed(
    const std::vector<uint32_t>& to_nodes, int64_t after, int limit,
    const std::string& campaign) {
  RETURN_IF_ERROR(CheckPageLimit(limit));
  std::vector<SealedRow> rows;
  if (to_nodes.empty()) return rows;
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(c_.Ensure());
  constexpr absl::string_view kOperation = "fetching sealed messages";
  absl::StatusOr<Result> r =
      campaign.empty()
          ? c_.Exec(kOperation,
                    "SELECT sequence, campaign, from_node, to_node, "
                    "ciphertext FROM sealed WHERE to_node = ANY($1::bigint[]) "
                    "AND sequence > $2 ORDER BY sequence LIMIT $3",
                    {ArrayParam(to_nodes), Int8(after), Int8(limit)})
          : c_.Exec(kOperation,
                    "SELECT sequence, campaign, from_node, to_node, "
                    "ciphertext FROM sealed WHERE campaign = $4 AND "
                    "to_node = ANY($1::bigint[]) AND sequence > $2 "
                    "ORDER BY sequence LIMIT $3",
                    {ArrayParam(to_nodes), Int8(after), Int8(limit),
                     Bytes(campaign)});
  if (!r.ok()) return r.status();
  const PGresult* res = r->get();
  rows.resize(static_cast<size_t>(PQntuples(res)));
  for (int i = 0; i < PQntuples(res); ++i) {
    rows[i].sequence = GetInt8(res, i, 0);
    rows[i].campaign = std::string(GetBytes(res, i, 1));
    rows[i].from_node = static_cast<uint32_t>(GetInt8(res, i, 2));
    rows[i].to_node = static_cast<uint32_t>(GetInt8(res, i, 3));
    rows[i].ciphertext = std::string(GetBytes(res, i, 4));
  }
  return rows;
}

absl::Status PgStore::PutNodeKeys(
    const std::vector<std::pair<uint32_t, std::string>>& keys) {
  if (keys.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  constexpr absl::string_view kOperation = "storing node keys";
  return c_.InTransaction(kOperation, [&] {
    return UpsertNodeBlobs(kOperation,
                           "INSERT INTO node_keys(node, public_key) "
                           "SELECT * FROM unnest($1::bigint[], $2::bytea[]) "
                           "ON CONFLICT(node) DO UPDATE SET "
                           "public_key = excluded.public_key",
                           keys);
  });
}

absl::Status PgStore::ForEachNodeKey(
    absl::FunctionRef<void(uint32_t, const std::string&)> fn) {
  return ForEachNodeBlob("reading node keys",
                         "SELECT node, public_key FROM node_keys WHERE "
                         "node > $1 ORDER BY node LIMIT 65536",
                         fn);
}

absl::Status PgStore::GetNodeKeys(
    const std::vector<uint32_t>& nodes,
    absl::FunctionRef<void(uint32_t, const std::string&)> fn) {
  if (nodes.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(c_.Ensure());
  ASSIGN_OR_RETURN(Result r,
                   c_.Exec("reading node keys",
                           "SELECT node, public_key FROM node_keys WHERE "
                           "node = ANY($1::bigint[]) ORDER BY node",
                           {ArrayParam(nodes)}));
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    fn(static_cast<uint32_t>(GetInt8(r.get(), i, 0)),
       std::string(GetBytes(r.get(), i, 1)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PgStore::AddResult(
    absl::FunctionRef<std::string(int64_t)> record_for_id,
    const std::string& matrix_path) {
  absl::MutexLock lock(&mu_);
  // Without gaps, as campaign ids (PgStore::CreateCampaign).
  return InsertWithId("adding a result", kResultIdLock,
                      "INSERT INTO results(id, record, matrix_path) "
                      "SELECT COALESCE(MAX(id), 0) + 1, ''::bytea, $1 "
                      "FROM results RETURNING id",
                      {Bytes(matrix_path)},
                      "UPDATE results SET record = $2 WHERE id = $1",
                      record_for_id);
}

absl::StatusOr<std::vector<ResultRow>> PgStore::ListResults() {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(c_.Ensure());
  ASSIGN_OR_RETURN(Result r, c_.Exec("listing results",
                                     "SELECT id, record, matrix_path FROM "
                                     "results ORDER BY id",
                                     {}));
  std::vector<ResultRow> rows(static_cast<size_t>(PQntuples(r.get())));
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    rows[i].id = GetInt8(r.get(), i, 0);
    rows[i].record = std::string(GetBytes(r.get(), i, 1));
    rows[i].matrix_path = std::string(GetBytes(r.get(), i, 2));
  }
  return rows;
}

absl::StatusOr<std::vector<ResultRow>> PgStore::ListResultsBefore(
    int64_t before_id, int limit) {
  RETURN_IF_ERROR(CheckPageLimit(limit));
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(c_.Ensure());
  ASSIGN_OR_RETURN(Result r, c_.Exec("listing results",
                                     "SELECT id, record, matrix_path FROM "
                                     "results WHERE id < $1 ORDER BY id DESC "
                                     "LIMIT $2",
                                     {Int8(before_id), Int8(limit)}));
  std::vector<ResultRow> rows(static_cast<size_t>(PQntuples(r.get())));
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    rows[i].id = GetInt8(r.get(), i, 0);
    rows[i].record = std::string(GetBytes(r.get(), i, 1));
    rows[i].matrix_path = std::string(GetBytes(r.get(), i, 2));
  }
  return rows;
}

absl::StatusOr<ResultRow> PgStore::GetResult(int64_t id) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(c_.Ensure());
  ASSIGN_OR_RETURN(Result r, c_.Exec(absl::StrCat("reading result ", id),
                                     "SELECT id, record, matrix_path FROM "
                                     "results WHERE id = $1",
                                     {Int8(id)}));
  if (PQntuples(r.get()) == 0) {
    return absl::NotFoundError(absl::StrCat("no result ", id));
  }
  ResultRow row;
  row.id = GetInt8(r.get(), 0, 0);
  row.record = std::string(GetBytes(r.get(), 0, 1));
  row.matrix_path = std::string(GetBytes(r.get(), 0, 2));
  return row;
}

absl::Status PgStore::PutFrontendStatus(const std::string& name,
                                        const std::string& status) {
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  absl::MutexLock lock(&mu_);
  constexpr absl::string_view kOperation = "storing a frontend's status";
  return c_.InTransaction(kOperation, [&]() -> absl::Status {
    RETURN_IF_ERROR(c_.Exec(kOperation,
                            "DELETE FROM frontends WHERE unix_ms < $1",
                            {Int8(now_ms - 3600000)})
                        .status());
    return c_.Exec(kOperation,
                   "INSERT INTO frontends(name, status, unix_ms) "
                   "VALUES($1, $2, $3) ON CONFLICT(name) DO UPDATE SET "
                   "status = excluded.status, unix_ms = excluded.unix_ms",
                   {Bytes(name), Bytes(status), Int8(now_ms)})
        .status();
  });
}

absl::StatusOr<std::vector<std::string>> PgStore::FreshFrontendStatus(
    absl::Duration within) {
  const int64_t since = absl::ToUnixMillis(absl::Now() - within);
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(c_.Ensure());
  ASSIGN_OR_RETURN(Result r, c_.Exec("reading frontends' status",
                                     "SELECT status FROM frontends WHERE "
                                     "unix_ms >= $1 ORDER BY name",
                                     {Int8(since)}));
  std::vector<std::string> out;
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    out.emplace_back(GetBytes(r.get(), i, 0));
  }
  return out;
}

absl::StatusOr<bool> PgStore::TryOperatorLease() {
  absl::MutexLock lock(&lease_mu_);
  if (held_) {
    // Still ours while the connection that took it lives.
    if (lease_.Exec("checking the operator lease", "SELECT 1", {}).ok()) {
      return true;
    }
    held_ = false;
    lease_.Drop();
    lease_broke_ = true;
  }
  const int64_t reconnects = lease_.reconnects();
  if (absl::Status s = lease_.Ensure(); !s.ok()) {
    lease_broke_ = true;
    return s;
  }
  if (lease_.reconnects() != reconnects) lease_broke_ = true;
  if (lease_broke_) {
    // Back after a lost connection (a database restart frees every lock):
    // the operator that held the lease takes it again at once; one that did
    // not leaves it kOperatorLeaseGrace to do so, so that a restart of the
    // database does not move the work to the standby.
    lease_broke_ = false;
    if (!was_holder_) lease_grace_until_ = absl::Now() + kOperatorLeaseGrace;
  }
  if (absl::Now() < lease_grace_until_) return false;
  absl::StatusOr<Result> r =
      lease_.Exec("taking the operator lease",
                  "SELECT pg_try_advisory_lock($1::bigint)",
                  {Int8(kOperatorLease)});
  if (!r.ok()) {
    lease_broke_ = PQstatus(lease_.get()) != CONNECTION_OK;
    return r.status();
  }
  held_ = GetBool(r->get(), 0, 0);
  was_holder_ = held_;
  return held_;
}

}  // namespace ldpgraph::store::postgres_internal
