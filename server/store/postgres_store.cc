// The PostgreSQL store (postgres_store.h): campaigns, the answer log, caps
// and the fleet plan, and the helpers those calls share. The class is
// declared in server/store/internal/postgres_backend.h.
#include <libpq-fe.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "server/store/internal/postgres_backend.h"
#include "server/store/postgres_store.h"

namespace ldpgraph::store::postgres_internal {

absl::StatusOr<int64_t> PgStore::CreateCampaign(
    absl::FunctionRef<std::string(int64_t)> record_for_id) {
  absl::MutexLock lock(&mu_);
  // The id is the largest so far plus one, chosen in the inserting
  // transaction under a lock, not taken from the table's sequence: a
  // sequence skips ahead after a crash of the database (by up to 32) and
  // past rolled-back inserts, and campaign ids are promised to run c1, c2,
  // ... without a gap.
  return InsertWithId("creating a campaign", kCampaignIdLock,
                      "INSERT INTO campaigns(id, open, record) "
                      "SELECT COALESCE(MAX(id), 0) + 1, true, ''::bytea "
                      "FROM campaigns RETURNING id",
                      {}, "UPDATE campaigns SET record = $2 WHERE id = $1",
                      record_for_id);
}

absl::Status PgStore::UpdateCampaign(const CampaignRow& row) {
  absl::MutexLock lock(&mu_);
  const std::string operation = absl::StrCat("updating campaign ", row.id);
  return c_.InTransaction(operation,
                          [&] { return UpdateCampaignRow(operation, row); });
}

absl::Status PgStore::UpdateCampaignAndAudit(const CampaignRow& row,
                                             const std::string& actor,
                                             const std::string& action,
                                             const std::string& details) {
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  absl::MutexLock lock(&mu_);
  const std::string operation =
      absl::StrCat("updating campaign ", row.id, " and auditing ", action);
  return c_.InTransaction(operation, [&]() -> absl::Status {
    RETURN_IF_ERROR(UpdateCampaignRow(operation, row));
    return InsertAudit(operation, now_ms, actor, action, details);
  });
}

absl::StatusOr<std::vector<CampaignRow>> PgStore::ListCampaigns() {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(c_.Ensure());
  ASSIGN_OR_RETURN(Result r,
                   c_.Exec("listing campaigns",
                           "SELECT id, open, record FROM campaigns ORDER BY id",
                           {}));
  std::vector<CampaignRow> rows(static_cast<size_t>(PQntuples(r.get())));
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    rows[i].id = GetInt8(r.get(), i, 0);
    rows[i].open = GetBool(r.get(), i, 1);
    rows[i].record = std::string(GetBytes(r.get(), i, 2));
  }
  return rows;
}

absl::StatusOr<std::vector<AppendOutcome>> PgStore::AppendAnswers(
    const std::vector<AnswerRow>& answers) {
  std::vector<AppendOutcome> outcomes;
  if (answers.empty()) return outcomes;
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  absl::MutexLock lock(&mu_);
  constexpr absl::string_view kOperation = "appending answers";
  std::vector<NewRow> new_rows;
  RETURN_IF_ERROR(c_.InTransaction(kOperation, [&]() -> absl::Status {
    new_rows.clear();
    RETURN_IF_ERROR(c_.XactLock(kOperation, kAnswerLogLock));
    PgRows rows(c_, kOperation);
    RETURN_IF_ERROR(core_.CatchUp(rows));
    ASSIGN_OR_RETURN(outcomes, core_.Append(rows, answers, now_ms, &new_rows));
    return absl::OkStatus();
  }));
  core_.Commit(new_rows);
  return outcomes;
}

absl::Status PgStore::ForEachAnswer(
    int64_t campaign, absl::FunctionRef<bool(const AnswerRow&)> fn) {
  absl::MutexLock lock(&mu_);
  const std::string operation =
      absl::StrCat("reading the answers of campaign ", campaign);
  return c_.InTransaction(
      operation,
      [&]() -> absl::Status {
        PgRows rows(c_, operation);
        RETURN_IF_ERROR(core_.CatchUp(rows));
        bool stopped = false;
        return core_.Emit(rows, campaign, fn, &stopped);
      },
      /*read_only=*/true);
}

absl::StatusOr<std::vector<AnswerRow>> PgStore::ListAnswers(
    int64_t campaign, uint32_t first_node, int limit, bool refusals_only) {
  RETURN_IF_ERROR(CheckPageLimit(limit));
  absl::MutexLock lock(&mu_);
  const std::string operation =
      absl::StrCat("reading a page of the answers of campaign ", campaign);
  std::vector<AnswerRow> out;
  RETURN_IF_ERROR(c_.InTransaction(
      operation,
      [&]() -> absl::Status {
        PgRows rows(c_, operation);
        RETURN_IF_ERROR(core_.CatchUp(rows));
        return core_.EmitPage(rows, campaign, first_node,
                              static_cast<size_t>(limit), refusals_only, &out);
      },
      /*read_only=*/true));
  return out;
}

absl::Status PgStore::ForEachAnswer(
    absl::FunctionRef<bool(const AnswerRow&)> fn) {
  absl::MutexLock lock(&mu_);
  constexpr absl::string_view kOperation = "reading all answers";
  return c_.InTransaction(
      kOperation,
      [&]() -> absl::Status {
        PgRows rows(c_, kOperation);
        RETURN_IF_ERROR(core_.CatchUp(rows));
        bool stopped = false;
        for (const int64_t campaign : core_.index().Campaigns()) {
          RETURN_IF_ERROR(core_.Emit(rows, campaign, fn, &stopped));
          if (stopped) break;
        }
        return absl::OkStatus();
      },
      /*read_only=*/true);
}

absl::Status PgStore::ForEachAnswerKey(
    absl::FunctionRef<void(int64_t, uint32_t, bool)> fn) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CatchUpLocked("reading the answer index"));
  core_.ForEachKey(fn);
  return absl::OkStatus();
}

absl::Status PgStore::ForEachNewAnswerKey(
    absl::FunctionRef<void(int64_t, uint32_t, bool)> fn) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CatchUpLocked("reading new answers"));
  core_.TakeForeign(fn);
  return absl::OkStatus();
}

absl::Status PgStore::PutCaps(
    const std::vector<std::pair<uint32_t, std::string>>& caps) {
  if (caps.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  return c_.InTransaction("storing caps",
                          [&] { return InsertCaps("storing caps", caps); });
}

absl::Status PgStore::PutCapsAndAudit(
    const std::vector<std::pair<uint32_t, std::string>>& caps,
    const std::string& actor, const std::string& action,
    const std::string& details) {
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  absl::MutexLock lock(&mu_);
  const std::string operation =
      absl::StrCat("storing caps and auditing ", action);
  return c_.InTransaction(operation, [&]() -> absl::Status {
    RETURN_IF_ERROR(InsertCaps(operation, caps));
    return InsertAudit(operation, now_ms, actor, action, details);
  });
}

absl::Status PgStore::ForEachCaps(
    absl::FunctionRef<void(uint32_t, const std::string&)> fn) {
  return ForEachNodeBlob("reading caps",
                         "SELECT node, caps FROM caps WHERE node > $1 "
                         "ORDER BY node LIMIT 65536",
                         fn);
}

absl::Status PgStore::PutFleetPlan(const std::vector<std::string>& holders) {
  absl::MutexLock lock(&mu_);
  constexpr absl::string_view kOperation = "storing the fleet plan";
  return c_.InTransaction(kOperation, [&]() -> absl::Status {
    RETURN_IF_ERROR(c_.Exec(kOperation, "DELETE FROM fleet", {}).status());
    for (size_t i = 0; i < holders.size(); ++i) {
      RETURN_IF_ERROR(c_.Exec(kOperation,
                              "INSERT INTO fleet(shard, holder) VALUES($1, $2)",
                              {Int8(static_cast<int64_t>(i)), Bytes(holders[i])})
                          .status());
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<FleetGrant> PgStore::ClaimFleetShard(const FleetClaim& q) {
  absl::MutexLock lock(&mu_);
  constexpr absl::string_view kOp = "claiming a fleet shard";
  FleetGrant g;
  RETURN_IF_ERROR(c_.InTransaction(kOp, [&]() -> absl::Status {
    g = FleetGrant();
    RETURN_IF_ERROR(c_.XactLock(kOp, kFleetLock));
    ASSIGN_OR_RETURN(Result k, c_.Exec(kOp, "SELECT count(*) FROM fleet", {}));
    int64_t shards = GetInt8(k.get(), 0, 0);
    if (shards == 0) {
      // Gathering: join (or renew), and fix the plan once the gathering
      // is large enough and quiet for `settle`.
      ASSIGN_OR_RETURN(
          Result have,
          c_.Exec(kOp,
                  "SELECT count(*), coalesce(max(first_ms), 0)::bigint, "
                  "coalesce(bool_or(host = $1), false) FROM fleet_hosts",
                  {Bytes(q.host)}));
      int64_t gathered = GetInt8(have.get(), 0, 0);
      int64_t last_join = GetInt8(have.get(), 0, 1);
      if (GetBool(have.get(), 0, 2)) {
        RETURN_IF_ERROR(c_.Exec(kOp,
                                "UPDATE fleet_hosts SET last_ms = $2 "
                                "WHERE host = $1",
                                {Bytes(q.host), Int8(q.now_ms)})
                            .status());
      } else if (gathered < static_cast<int64_t>(q.max_hosts)) {
        RETURN_IF_ERROR(c_.Exec(kOp,
                                "INSERT INTO fleet_hosts(host, first_ms, "
                                "last_ms) VALUES($1, $2, $2)",
                                {Bytes(q.host), Int8(q.now_ms)})
                            .status());
        ++gathered;
        last_join = std::max(last_join, q.now_ms);
      }
      const int64_t quiet = q.now_ms - last_join;
      if (gathered < static_cast<int64_t>(q.min_hosts) || quiet < q.settle_ms) {
        g.retry_after_ms = std::clamp<int64_t>(q.settle_ms - quiet, 100, 1000);
        return absl::OkStatus();
      }
      // The plan: live hosts, by first claim (then name), one per node.
      RETURN_IF_ERROR(
          c_.Exec(kOp,
                  "INSERT INTO fleet(shard, holder, renewed_ms) "
                  "SELECT row_number() OVER (ORDER BY first_ms, host) - 1, "
                  "host, $1::bigint FROM fleet_hosts WHERE last_ms > "
                  "$1::bigint - $2::bigint ORDER BY first_ms, host LIMIT "
                  "$3::bigint",
                  {Int8(q.now_ms), Int8(q.lease_ms), Int8(q.num_nodes)})
              .status());
      RETURN_IF_ERROR(c_.Exec(kOp, "DELETE FROM fleet_hosts", {}).status());
      ASSIGN_OR_RETURN(Result fixed,
                       c_.Exec(kOp, "SELECT count(*) FROM fleet", {}));
      shards = GetInt8(fixed.get(), 0, 0);
    }
    g.shards = static_cast<uint32_t>(shards);
    g.state = FleetGrant::State::kSpare;
    // A holder renews; a stranger takes the first lapsed shard.
    ASSIGN_OR_RETURN(Result mine,
                     c_.Exec(kOp,
                             "UPDATE fleet SET renewed_ms = $2 WHERE holder = "
                             "$1 RETURNING shard",
                             {Bytes(q.host), Int8(q.now_ms)}));
    if (PQntuples(mine.get()) == 0) {
      ASSIGN_OR_RETURN(
          mine, c_.Exec(kOp,
                        "UPDATE fleet SET holder = $1, renewed_ms = $2 WHERE "
                        "shard = (SELECT shard FROM fleet WHERE renewed_ms "
                        "<= $2::bigint - $3::bigint ORDER BY shard LIMIT 1) "
                        "RETURNING shard",
                        {Bytes(q.host), Int8(q.now_ms), Int8(q.lease_ms)}));
    }
    if (PQntuples(mine.get()) > 0) {
      g.state = FleetGrant::State::kAssigned;
      g.shard = static_cast<uint32_t>(GetInt8(mine.get(), 0, 0));
    }
    return absl::OkStatus();
  }));
  return g;
}

absl::StatusOr<std::vector<std::string>> PgStore::GetFleetPlan() {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(c_.Ensure());
  ASSIGN_OR_RETURN(Result r, c_.Exec("reading the fleet plan",
                                     "SELECT shard, holder FROM fleet "
                                     "ORDER BY shard",
                                     {}));
  std::vector<std::string> holders;
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    if (GetInt8(r.get(), i, 0) != static_cast<int64_t>(holders.size())) {
      return absl::DataLossError(absl::StrCat("curator store ", name_,
                                              ": the fleet plan skips shard ",
                                              holders.size()));
    }
    holders.emplace_back(GetBytes(r.get(), i, 1));
  }
  return holders;
}

absl::Status PgStore::CatchUpLocked(absl::string_view operation) {
  return c_.InTransaction(
      operation,
      [&] {
        PgRows rows(c_, operation);
        return core_.CatchUp(rows);
      },
      /*read_only=*/true);
}

absl::StatusOr<int64_t> PgStore::InsertWithId(
    absl::string_view operation, int64_t id_lock, const char* insert,
    const std::vector<Param>& params, const char* update,
    absl::FunctionRef<std::string(int64_t)> record_for_id) {
  int64_t id = 0;
  RETURN_IF_ERROR(c_.InTransaction(operation, [&]() -> absl::Status {
    RETURN_IF_ERROR(c_.XactLock(operation, id_lock));
    ASSIGN_OR_RETURN(Result r, c_.Exec(operation, insert, params));
    id = GetInt8(r.get(), 0, 0);
    return c_.Exec(operation, update, {Int8(id), Bytes(record_for_id(id))})
        .status();
  }));
  return id;
}

absl::Status PgStore::UpdateCampaignRow(absl::string_view operation,
                                        const CampaignRow& row) {
  // Under the answer log's lock: a close commits between appends, so an
  // append after it sees the campaign closed (postgres_store.h).
  RETURN_IF_ERROR(c_.XactLock(operation, kAnswerLogLock));
  ASSIGN_OR_RETURN(
      Result r,
      c_.Exec(operation,
              "UPDATE campaigns SET open = $2::int8 <> 0, record = $3 "
              "WHERE id = $1",
              {Int8(row.id), Int8(row.open ? 1 : 0), Bytes(row.record)}));
  if (std::strcmp(PQcmdTuples(r.get()), "0") == 0) {
    return absl::NotFoundError(absl::StrCat("no campaign ", row.id));
  }
  return absl::OkStatus();
}

absl::Status PgStore::InsertAudit(absl::string_view operation,
                                  int64_t unix_ms, const std::string& actor,
                                  const std::string& action,
                                  const std::string& details) {
  RETURN_IF_ERROR(c_.XactLock(operation, kAuditLock));
  return c_.Exec(operation,
                 "INSERT INTO audit(unix_ms, actor, action, details_json) "
                 "VALUES($1, $2, $3, $4)",
                 {Int8(unix_ms), Bytes(actor), Bytes(action), Bytes(details)})
      .status();
}

absl::Status PgStore::InsertCaps(
    absl::string_view operation,
    const std::vector<std::pair<uint32_t, std::string>>& caps) {
  return UpsertNodeBlobs(operation,
                         "INSERT INTO caps(node, caps) "
                         "SELECT * FROM unnest($1::bigint[], $2::bytea[]) "
                         "ON CONFLICT(node) DO UPDATE SET caps = excluded.caps",
                         caps);
}

absl::Status PgStore::UpsertNodeBlobs(
    absl::string_view operation, const char* sql,
    const std::vector<std::pair<uint32_t, std::string>>& pairs) {
  absl::flat_hash_map<uint32_t, size_t> last;
  for (size_t i = 0; i < pairs.size(); ++i) last[pairs[i].first] = i;
  constexpr size_t kChunk = 10000;
  static constexpr char kHex[] = "0123456789abcdef";
  std::vector<uint32_t> nodes;
  std::string blobs;
  size_t in_chunk = 0;
  auto flush = [&]() -> absl::Status {
    if (in_chunk == 0) return absl::OkStatus();
    blobs += "}";
    absl::Status s =
        c_.Exec(operation, sql, {ArrayParam(nodes), TextParam(blobs)}).status();
    nodes.clear();
    blobs.clear();
    in_chunk = 0;
    return s;
  };
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (last[pairs[i].first] != i) continue;
    blobs += in_chunk == 0 ? "{\"\\\\x" : ",\"\\\\x";
    for (const unsigned char ch : pairs[i].second) {
      blobs += kHex[ch >> 4];
      blobs += kHex[ch & 15];
    }
    blobs += "\"";
    nodes.push_back(pairs[i].first);
    if (++in_chunk == kChunk) RETURN_IF_ERROR(flush());
  }
  return flush();
}

absl::Status PgStore::ForEachNodeBlob(
    absl::string_view operation, const char* sql,
    absl::FunctionRef<void(uint32_t, const std::string&)> fn) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(c_.Ensure());
  int64_t after = -1;
  std::string blob;
  while (true) {
    ASSIGN_OR_RETURN(Result r, c_.Exec(operation, sql, {Int8(after)}));
    const int n = PQntuples(r.get());
    for (int i = 0; i < n; ++i) {
      after = GetInt8(r.get(), i, 0);
      { const absl::string_view v = GetBytes(r.get(), i, 1); blob.assign(v.data(), v.size()); }
      fn(static_cast<uint32_t>(after), blob);
    }
    if (n < 65536) return absl::OkStatus();
  }
}

}  // namespace ldpgraph::store::postgres_internal
