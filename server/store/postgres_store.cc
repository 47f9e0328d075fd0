#include "server/store/postgres_store.h"

#include <libpq-fe.h>

#include <cstring>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "server/store/answer_index.h"
#include "server/store/log_core.h"

namespace ldpgraph::store {
namespace {

// Advisory lock keys (one 64-bit space per database): "ldpg" + a number.
constexpr int64_t kMigrationLock = 0x6c647067'00000001;
constexpr int64_t kAnswerLogLock = 0x6c647067'00000002;
constexpr int64_t kAuditLock = 0x6c647067'00000003;
constexpr int64_t kSealedLock = 0x6c647067'00000004;
constexpr int64_t kOperatorLease = 0x6c647067'00000005;

// Migration i (1-based) takes a database of version i - 1 to version i.
// Never edit one that shipped: add the next.
constexpr const char* kMigrations[] = {
    // 1: the tables of the SQLite store's version 2.
    R"sql(
CREATE TABLE campaigns(
  id BIGSERIAL PRIMARY KEY,
  open BOOLEAN NOT NULL,
  record BYTEA NOT NULL);
CREATE TABLE answer_log(
  id BIGSERIAL PRIMARY KEY,
  campaign BIGINT NOT NULL,
  answers BYTEA NOT NULL);
CREATE TABLE caps(
  node BIGINT PRIMARY KEY,
  caps BYTEA NOT NULL);
CREATE TABLE audit(
  sequence BIGSERIAL PRIMARY KEY,
  unix_ms BIGINT NOT NULL,
  actor BYTEA NOT NULL,
  action BYTEA NOT NULL,
  details_json BYTEA NOT NULL);
CREATE TABLE sealed(
  sequence BIGSERIAL PRIMARY KEY,
  campaign BYTEA NOT NULL,
  from_node BIGINT NOT NULL,
  to_node BIGINT NOT NULL,
  ciphertext BYTEA NOT NULL);
CREATE INDEX sealed_to_node ON sealed(to_node, sequence);
CREATE INDEX sealed_campaign_to_node ON sealed(campaign, to_node, sequence);
CREATE TABLE fleet(
  shard BIGINT PRIMARY KEY,
  holder BYTEA NOT NULL);
CREATE TABLE node_keys(
  node BIGINT PRIMARY KEY,
  public_key BYTEA NOT NULL);
CREATE TABLE results(
  id BIGSERIAL PRIMARY KEY,
  record BYTEA NOT NULL,
  matrix_path BYTEA NOT NULL);
)sql",
    // 2: the answer log's blobs are perturbed reports, which do not
    // compress: stored out of line without PostgreSQL's compression pass
    // (which cost the database server about a third of its CPU at ingest).
    R"sql(
ALTER TABLE answer_log ALTER COLUMN answers SET STORAGE EXTERNAL;
)sql",
    // 3: the status frontends publish for the operator (roles.h).
    R"sql(
CREATE TABLE frontends(
  name BYTEA PRIMARY KEY,
  status BYTEA NOT NULL,
  unix_ms BIGINT NOT NULL);
)sql",
};
static_assert(std::size(kMigrations) == kPostgresSchemaVersion);

// A query parameter: binary (int8 big-endian, bytea raw) or text.
struct Param {
  std::string bytes;
  bool binary = true;
};
Param Int8(int64_t v) {
  std::string b(8, '\0');
  for (int i = 7; i >= 0; --i) {
    b[i] = static_cast<char>(v & 0xff);
    v = static_cast<int64_t>(static_cast<uint64_t>(v) >> 8);
  }
  return Param{std::move(b), true};
}
Param Bytes(absl::string_view b) { return Param{std::string(b), true}; }
Param TextParam(std::string t) { return Param{std::move(t), false}; }
// A bigint[] parameter in text form: {1,2,3}.
template <typename T>
Param ArrayParam(const std::vector<T>& v) {
  return TextParam(absl::StrCat("{", absl::StrJoin(v, ","), "}"));
}

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;
struct ConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using Conn = std::unique_ptr<PGconn, ConnDeleter>;

// Column readers for binary results.
int64_t GetInt8(const PGresult* r, int row, int col) {
  const auto* p = reinterpret_cast<const unsigned char*>(PQgetvalue(r, row, col));
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | p[i];
  return static_cast<int64_t>(v);
}
bool GetBool(const PGresult* r, int row, int col) {
  return PQgetvalue(r, row, col)[0] != 0;
}
absl::string_view GetBytes(const PGresult* r, int row, int col) {
  return absl::string_view(PQgetvalue(r, row, col),
                           static_cast<size_t>(PQgetlength(r, row, col)));
}

// The status for a failed result or connection (see postgres_store.h).
absl::StatusCode CodeFor(PGconn* conn, const PGresult* result) {
  if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
    return absl::StatusCode::kUnavailable;
  }
  const char* state =
      result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  if (state == nullptr) return absl::StatusCode::kUnavailable;
  const absl::string_view s(state);
  if (absl::StartsWith(s, "08") || absl::StartsWith(s, "57P") ||
      s == "40001" || s == "40P01" || s == "55P03") {
    return absl::StatusCode::kUnavailable;
  }
  if (absl::StartsWith(s, "53")) return absl::StatusCode::kResourceExhausted;
  return absl::StatusCode::kInternal;
}

class PgStore;

// One connection with the helpers every call uses. Not thread-safe.
class Connection {
 public:
  Connection(std::string conninfo_url, std::string password,
             std::string name, int connect_timeout_s, bool synchronous_full)
      : url_(std::move(conninfo_url)),
        password_(std::move(password)),
        name_(std::move(name)),
        connect_timeout_(absl::StrCat(connect_timeout_s)),
        synchronous_full_(synchronous_full) {}

  // Connected, reconnecting if the connection broke: UNAVAILABLE naming
  // the server and libpq's words otherwise.
  absl::Status Ensure() {
    if (conn_ != nullptr && PQstatus(conn_.get()) == CONNECTION_OK) {
      return absl::OkStatus();
    }
    const char* keys[] = {"dbname",          "password",
                          "connect_timeout", "application_name",
                          "keepalives_idle", "keepalives_interval",
                          "keepalives_count", nullptr};
    const char* values[] = {url_.c_str(),
                            password_.empty() ? nullptr : password_.c_str(),
                            connect_timeout_.c_str(),
                            "ldpgraph-curator",
                            "5",
                            "2",
                            "3",
                            nullptr};
    conn_.reset(PQconnectdbParams(keys, values, /*expand_dbname=*/1));
    if (conn_ == nullptr || PQstatus(conn_.get()) != CONNECTION_OK) {
      std::string message = conn_ ? PQerrorMessage(conn_.get()) : "out of memory";
      conn_.reset();
      return absl::UnavailableError(
          absl::StrCat("curator store ", name_, ": cannot connect: ",
                       absl::StripTrailingAsciiWhitespace(message)));
    }
    // Quiet NOTICEs (CREATE ... IF NOT EXISTS) instead of stderr lines.
    PQsetNoticeProcessor(conn_.get(), [](void*, const char*) {}, nullptr);
    if (!synchronous_full_) {
      RETURN_IF_ERROR(Exec("setting synchronous_commit",
                           "SET synchronous_commit = off", {})
                          .status());
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Result> Exec(absl::string_view operation, const char* sql,
                              const std::vector<Param>& params) {
    if (conn_ == nullptr) {
      return absl::UnavailableError(absl::StrCat(
          "curator store ", name_, ": ", operation, ": not connected"));
    }
    std::vector<const char*> values(params.size());
    std::vector<int> lengths(params.size()), formats(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      values[i] = params[i].bytes.data();
      lengths[i] = static_cast<int>(params[i].bytes.size());
      formats[i] = params[i].binary ? 1 : 0;
    }
    Result r(PQexecParams(conn_.get(), sql, static_cast<int>(params.size()),
                          nullptr, values.data(), lengths.data(),
                          formats.data(), /*resultFormat=*/1));
    const ExecStatusType st =
        r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return r;
    const std::string message = absl::StrCat(absl::StripTrailingAsciiWhitespace(
        r ? PQresultErrorMessage(r.get()) : PQerrorMessage(conn_.get())));
    return absl::Status(CodeFor(conn_.get(), r.get()),
                        absl::StrCat("curator store ", name_, ": ", operation,
                                     ": ", message));
  }

  // Runs body in one transaction; rolls back on any failure.
  absl::Status InTransaction(absl::string_view operation,
                             absl::FunctionRef<absl::Status()> body,
                             bool read_only = false) {
    RETURN_IF_ERROR(Ensure());
    RETURN_IF_ERROR(
        Exec(operation,
             read_only ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
                       : "BEGIN",
             {})
            .status());
    absl::Status status = body();
    if (status.ok()) status = Exec(operation, "COMMIT", {}).status();
    if (!status.ok() && conn_ != nullptr &&
        PQstatus(conn_.get()) == CONNECTION_OK &&
        PQtransactionStatus(conn_.get()) != PQTRANS_IDLE) {
      Result ignored(PQexec(conn_.get(), "ROLLBACK"));
    }
    return status;
  }

  // Holds a transaction-scoped advisory lock until the transaction ends.
  absl::Status XactLock(absl::string_view operation, int64_t key) {
    return Exec(operation, "SELECT pg_advisory_xact_lock($1::bigint)", {Int8(key)})
        .status();
  }

  PGconn* get() { return conn_.get(); }
  void Drop() { conn_.reset(); }
  const std::string& name() const { return name_; }

 private:
  const std::string url_, password_, name_, connect_timeout_;
  const bool synchronous_full_;
  Conn conn_;
};

// answer_log through a connection inside its transaction, for LogCore.
class PgRows final : public LogRows {
 public:
  PgRows(Connection& c, absl::string_view operation)
      : c_(c), operation_(operation) {}

  absl::Status ReadAfter(
      int64_t after,
      absl::FunctionRef<absl::Status(int64_t, int64_t, absl::string_view)> fn)
      override {
    // In pages, so that a large log is never one result in memory.
    constexpr int kPage = 256;
    while (true) {
      ASSIGN_OR_RETURN(
          Result r,
          c_.Exec(operation_,
                  "SELECT id, campaign, answers FROM answer_log WHERE id > $1 "
                  "ORDER BY id LIMIT 256",
                  {Int8(after)}));
      const int n = PQntuples(r.get());
      for (int i = 0; i < n; ++i) {
        after = GetInt8(r.get(), i, 0);
        RETURN_IF_ERROR(
            fn(after, GetInt8(r.get(), i, 1), GetBytes(r.get(), i, 2)));
      }
      if (n < kPage) return absl::OkStatus();
    }
  }

  absl::Status ReadRow(int64_t id, int64_t* campaign,
                       std::string* blob) override {
    ASSIGN_OR_RETURN(Result r,
                     c_.Exec(operation_,
                             "SELECT campaign, answers FROM answer_log "
                             "WHERE id = $1",
                             {Int8(id)}));
    if (PQntuples(r.get()) == 0) {
      return absl::DataLossError(absl::StrCat("curator store ", c_.name(),
                                              ": answer_log row ", id,
                                              " is gone"));
    }
    *campaign = GetInt8(r.get(), 0, 0);
    { const absl::string_view v = GetBytes(r.get(), 0, 1); blob->assign(v.data(), v.size()); }
    return absl::OkStatus();
  }

  absl::Status ReadBytes(int64_t id, uint32_t offset, uint32_t length,
                         std::string& out) override {
    // Resends come in batches that mostly hit one row: keep the last.
    if (cached_row_ != id) {
      int64_t campaign = 0;
      RETURN_IF_ERROR(ReadRow(id, &campaign, &cached_));
      cached_row_ = id;
    }
    if (uint64_t{offset} + length > cached_.size()) {
      return absl::DataLossError(absl::StrCat(
          "curator store ", c_.name(), ": answer_log row ", id,
          " does not hold the ", length, " bytes at ", offset,
          " the index has for it"));
    }
    out.assign(cached_, offset, length);
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> Insert(int64_t campaign,
                                 absl::string_view blob) override {
    ASSIGN_OR_RETURN(Result r,
                     c_.Exec(operation_,
                             "INSERT INTO answer_log(campaign, answers) "
                             "VALUES($1, $2) RETURNING id",
                             {Int8(campaign), Bytes(blob)}));
    return GetInt8(r.get(), 0, 0);
  }

  absl::StatusOr<absl::flat_hash_set<int64_t>> Closed(
      const std::vector<int64_t>& campaigns) override {
    ASSIGN_OR_RETURN(Result r,
                     c_.Exec(operation_,
                             "SELECT id FROM campaigns WHERE NOT open AND "
                             "id = ANY($1::bigint[])",
                             {ArrayParam(campaigns)}));
    absl::flat_hash_set<int64_t> closed;
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      closed.insert(GetInt8(r.get(), i, 0));
    }
    return closed;
  }

 private:
  Connection& c_;
  const absl::string_view operation_;
  int64_t cached_row_ = -1;
  std::string cached_;
};

absl::Status CheckLimit(int limit) {
  if (limit <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit must be > 0, got ", limit));
  }
  return absl::OkStatus();
}

class PgStore final : public CuratorStore {
 public:
  PgStore(std::string url, std::string password, std::string name,
          const PostgresStore::Options& o)
      : name_(name),
        core_(name),
        c_(url, password, name, o.connect_timeout_s, o.synchronous_full),
        lease_(url, password, name, o.connect_timeout_s, true) {}

  absl::Status Init() {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(c_.Ensure());
    RETURN_IF_ERROR(Migrate());
    PgRows rows(c_, "indexing the answer log");
    return c_.InTransaction(
        "indexing the answer log",
        [&] { return core_.CatchUp(rows, /*initial=*/true); },
        /*read_only=*/true);
  }

  absl::StatusOr<int64_t> CreateCampaign(
      absl::FunctionRef<std::string(int64_t)> record_for_id) override {
    absl::MutexLock lock(&mu_);
    return InsertWithId("creating a campaign",
                        "INSERT INTO campaigns(open, record) VALUES(true, "
                        "''::bytea) RETURNING id",
                        {}, "UPDATE campaigns SET record = $2 WHERE id = $1",
                        record_for_id);
  }

  absl::Status UpdateCampaign(const CampaignRow& row) override {
    absl::MutexLock lock(&mu_);
    const std::string operation = absl::StrCat("updating campaign ", row.id);
    return c_.InTransaction(operation,
                            [&] { return UpdateCampaignRow(operation, row); });
  }

  absl::Status UpdateCampaignAndAudit(const CampaignRow& row,
                                      const std::string& actor,
                                      const std::string& action,
                                      const std::string& details) override {
    const int64_t now_ms = absl::ToUnixMillis(absl::Now());
    absl::MutexLock lock(&mu_);
    const std::string operation =
        absl::StrCat("updating campaign ", row.id, " and auditing ", action);
    return c_.InTransaction(operation, [&]() -> absl::Status {
      RETURN_IF_ERROR(UpdateCampaignRow(operation, row));
      return InsertAudit(operation, now_ms, actor, action, details);
    });
  }

  absl::StatusOr<std::vector<CampaignRow>> ListCampaigns() override {
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

  absl::StatusOr<std::vector<AppendOutcome>> AppendAnswers(
      const std::vector<AnswerRow>& answers) override {
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

  absl::Status ForEachAnswer(
      int64_t campaign, absl::FunctionRef<bool(const AnswerRow&)> fn) override {
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

  absl::Status ForEachAnswer(
      absl::FunctionRef<bool(const AnswerRow&)> fn) override {
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

  absl::Status ForEachAnswerKey(
      absl::FunctionRef<void(int64_t, uint32_t, bool)> fn) override {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CatchUpLocked("reading the answer index"));
    core_.ForEachKey(fn);
    return absl::OkStatus();
  }

  absl::Status ForEachNewAnswerKey(
      absl::FunctionRef<void(int64_t, uint32_t, bool)> fn) override {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CatchUpLocked("reading new answers"));
    core_.TakeForeign(fn);
    return absl::OkStatus();
  }

  absl::Status PutCaps(
      const std::vector<std::pair<uint32_t, std::string>>& caps) override {
    if (caps.empty()) return absl::OkStatus();
    absl::MutexLock lock(&mu_);
    return c_.InTransaction("storing caps",
                            [&] { return InsertCaps("storing caps", caps); });
  }

  absl::Status PutCapsAndAudit(
      const std::vector<std::pair<uint32_t, std::string>>& caps,
      const std::string& actor, const std::string& action,
      const std::string& details) override {
    const int64_t now_ms = absl::ToUnixMillis(absl::Now());
    absl::MutexLock lock(&mu_);
    const std::string operation =
        absl::StrCat("storing caps and auditing ", action);
    return c_.InTransaction(operation, [&]() -> absl::Status {
      RETURN_IF_ERROR(InsertCaps(operation, caps));
      return InsertAudit(operation, now_ms, actor, action, details);
    });
  }

  absl::Status ForEachCaps(
      absl::FunctionRef<void(uint32_t, const std::string&)> fn) override {
    return ForEachNodeBlob("reading caps",
                           "SELECT node, caps FROM caps WHERE node > $1 "
                           "ORDER BY node LIMIT 65536",
                           fn);
  }

  absl::Status PutFleetPlan(const std::vector<std::string>& holders) override {
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

  absl::StatusOr<std::vector<std::string>> GetFleetPlan() override {
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

  absl::Status Audit(const std::string& actor, const std::string& action,
                     const std::string& details) override {
    const int64_t now_ms = absl::ToUnixMillis(absl::Now());
    absl::MutexLock lock(&mu_);
    constexpr absl::string_view kOperation = "appending to the audit log";
    return c_.InTransaction(kOperation, [&] {
      return InsertAudit(kOperation, now_ms, actor, action, details);
    });
  }

  absl::StatusOr<std::vector<AuditRow>> ListAudit(int64_t after,
                                                  int limit) override {
    RETURN_IF_ERROR(CheckLimit(limit));
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

  absl::Status PutSealed(const std::vector<SealedRow>& messages) override {
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

  absl::StatusOr<std::vector<SealedRow>> FetchSealed(
      const std::vector<uint32_t>& to_nodes, int64_t after, int limit,
      const std::string& campaign) override {
    RETURN_IF_ERROR(CheckLimit(limit));
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

  absl::Status PutNodeKeys(
      const std::vector<std::pair<uint32_t, std::string>>& keys) override {
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

  absl::Status ForEachNodeKey(
      absl::FunctionRef<void(uint32_t, const std::string&)> fn) override {
    return ForEachNodeBlob("reading node keys",
                           "SELECT node, public_key FROM node_keys WHERE "
                           "node > $1 ORDER BY node LIMIT 65536",
                           fn);
  }

  absl::StatusOr<int64_t> AddResult(
      absl::FunctionRef<std::string(int64_t)> record_for_id,
      const std::string& matrix_path) override {
    absl::MutexLock lock(&mu_);
    return InsertWithId("adding a result",
                        "INSERT INTO results(record, matrix_path) "
                        "VALUES(''::bytea, $1) RETURNING id",
                        {Bytes(matrix_path)},
                        "UPDATE results SET record = $2 WHERE id = $1",
                        record_for_id);
  }

  absl::StatusOr<std::vector<ResultRow>> ListResults() override {
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

  absl::StatusOr<ResultRow> GetResult(int64_t id) override {
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

  absl::Status PutFrontendStatus(const std::string& name,
                                 const std::string& status) override {
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

  absl::StatusOr<std::vector<std::string>> FreshFrontendStatus(
      absl::Duration within) override {
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

  absl::StatusOr<bool> TryOperatorLease() override {
    absl::MutexLock lock(&lease_mu_);
    if (held_) {
      // Still ours while the connection that took it lives.
      if (lease_.Exec("checking the operator lease", "SELECT 1", {}).ok()) {
        return true;
      }
      held_ = false;
      lease_.Drop();
    }
    RETURN_IF_ERROR(lease_.Ensure());
    ASSIGN_OR_RETURN(Result r, lease_.Exec("taking the operator lease",
                                           "SELECT pg_try_advisory_lock($1::bigint)",
                                           {Int8(kOperatorLease)}));
    held_ = GetBool(r.get(), 0, 0);
    return held_;
  }

  std::string Describe() const override { return absl::StrCat("postgres ", name_); }

 private:
  absl::Status Migrate() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    constexpr absl::string_view kOperation = "migrating the schema";
    return c_.InTransaction(kOperation, [&]() -> absl::Status {
      RETURN_IF_ERROR(c_.XactLock(kOperation, kMigrationLock));
      RETURN_IF_ERROR(c_.Exec(kOperation,
                              "CREATE TABLE IF NOT EXISTS ldpgraph_schema("
                              "version INTEGER PRIMARY KEY, "
                              "applied_unix_ms BIGINT NOT NULL)",
                              {})
                          .status());
      ASSIGN_OR_RETURN(Result r,
                       c_.Exec(kOperation,
                               "SELECT coalesce(max(version), 0)::bigint "
                               "FROM ldpgraph_schema",
                               {}));
      const int64_t version = GetInt8(r.get(), 0, 0);
      if (version > kPostgresSchemaVersion) {
        return absl::FailedPreconditionError(absl::StrCat(
            "curator store ", name_, " has schema version ", version,
            ", this build knows versions up to ", kPostgresSchemaVersion,
            ": run a newer ldpgraph-curator"));
      }
      for (int64_t v = version + 1; v <= kPostgresSchemaVersion; ++v) {
        Result done(PQexec(c_.get(), kMigrations[v - 1]));
        if (PQresultStatus(done.get()) != PGRES_COMMAND_OK) {
          return absl::InternalError(absl::StrCat(
              "curator store ", name_, ": migration to version ", v, ": ",
              absl::StripTrailingAsciiWhitespace(
                  PQresultErrorMessage(done.get()))));
        }
        RETURN_IF_ERROR(
            c_.Exec(kOperation,
                    "INSERT INTO ldpgraph_schema(version, applied_unix_ms) "
                    "VALUES($1::bigint, $2::bigint)",
                    {Int8(v), Int8(absl::ToUnixMillis(absl::Now()))})
                .status());
      }
      return absl::OkStatus();
    });
  }

  absl::Status CatchUpLocked(absl::string_view operation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return c_.InTransaction(
        operation,
        [&] {
          PgRows rows(c_, operation);
          return core_.CatchUp(rows);
        },
        /*read_only=*/true);
  }

  absl::StatusOr<int64_t> InsertWithId(
      absl::string_view operation, const char* insert,
      const std::vector<Param>& params, const char* update,
      absl::FunctionRef<std::string(int64_t)> record_for_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    int64_t id = 0;
    RETURN_IF_ERROR(c_.InTransaction(operation, [&]() -> absl::Status {
      ASSIGN_OR_RETURN(Result r, c_.Exec(operation, insert, params));
      id = GetInt8(r.get(), 0, 0);
      return c_.Exec(operation, update, {Int8(id), Bytes(record_for_id(id))})
          .status();
    }));
    return id;
  }

  absl::Status UpdateCampaignRow(absl::string_view operation,
                                 const CampaignRow& row)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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

  absl::Status InsertAudit(absl::string_view operation, int64_t unix_ms,
                           const std::string& actor, const std::string& action,
                           const std::string& details)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    RETURN_IF_ERROR(c_.XactLock(operation, kAuditLock));
    return c_.Exec(operation,
                   "INSERT INTO audit(unix_ms, actor, action, details_json) "
                   "VALUES($1, $2, $3, $4)",
                   {Int8(unix_ms), Bytes(actor), Bytes(action), Bytes(details)})
        .status();
  }

  absl::Status InsertCaps(
      absl::string_view operation,
      const std::vector<std::pair<uint32_t, std::string>>& caps)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return UpsertNodeBlobs(operation,
                           "INSERT INTO caps(node, caps) "
                           "SELECT * FROM unnest($1::bigint[], $2::bytea[]) "
                           "ON CONFLICT(node) DO UPDATE SET caps = excluded.caps",
                           caps);
  }

  // One statement per chunk of (node, blob) pairs, as two arrays in text
  // form (bytea as \x hex). A node twice in one chunk would fail ON
  // CONFLICT: the last value wins, as in the SQLite store.
  absl::Status UpsertNodeBlobs(
      absl::string_view operation, const char* sql,
      const std::vector<std::pair<uint32_t, std::string>>& pairs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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

  // Reads (node, blob) rows in pages of `sql` (which takes $1 = the last
  // node read), ascending.
  absl::Status ForEachNodeBlob(
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

  const std::string name_;
  absl::Mutex mu_;
  LogCore core_ ABSL_GUARDED_BY(mu_);
  Connection c_ ABSL_GUARDED_BY(mu_);
  absl::Mutex lease_mu_;
  Connection lease_ ABSL_GUARDED_BY(lease_mu_);
  bool held_ ABSL_GUARDED_BY(lease_mu_) = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CuratorStore>> PostgresStore::Open(
    Options options) {
  char* error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(options.url.c_str(), &error);
  if (parsed == nullptr) {
    std::string message = error != nullptr ? error : "out of memory";
    PQfreemem(error);
    return absl::InvalidArgumentError(
        absl::StrCat("--store: not a PostgreSQL URL: ",
                     absl::StripTrailingAsciiWhitespace(message)));
  }
  std::string host = "localhost", port = "5432", dbname, user;
  bool has_password = false;
  for (PQconninfoOption* o = parsed; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    const absl::string_view k(o->keyword);
    if (k == "password") has_password = true;
    if (k == "host" || k == "hostaddr") host = o->val;
    if (k == "port") port = o->val;
    if (k == "dbname") dbname = o->val;
    if (k == "user") user = o->val;
  }
  PQconninfoFree(parsed);
  if (has_password) {
    return absl::InvalidArgumentError(
        "--store: the URL holds a password, which would show in process "
        "listings; put it in a file and give --store-password-file");
  }
  std::string password;
  if (!options.password_file.empty()) {
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(options.password_file));
    password = std::string(absl::StripTrailingAsciiWhitespace(
        absl::string_view(text).substr(0, text.find('\n'))));
    if (password.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--store-password-file ", options.password_file, " is empty"));
    }
  }
  if (dbname.empty()) dbname = user;
  const std::string name = absl::StrCat(host, ":", port, "/", dbname);
  auto store =
      std::make_unique<PgStore>(options.url, std::move(password), name, options);
  RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<CuratorStore>(std::move(store));
}

}  // namespace ldpgraph::store
