// Internal to the store library: the parts of the PostgreSQL store
// (server/store/postgres_store.h) that its files share -- the advisory lock
// keys, query parameters and result readers, one connection with its
// helpers (Connection), the answer log as LogCore reads it (PgRows), and
// the store itself (PgStore). Its methods are defined by responsibility:
// postgres_connection.cc (Connection, PgRows), postgres_schema.cc
// (migrations, Open), postgres_store.cc (campaigns, answers, caps, the
// fleet plan) and postgres_records.cc (audit, sealed messages, node keys,
// results, frontends, the operator lease). Not for use outside
// server/store/.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/store/log_core.h"
#include "server/store/postgres_store.h"
#include "server/store/store.h"

namespace ldpgraph::store::postgres_internal {

// Advisory lock keys (one 64-bit space per database): "ldpg" + a number.
constexpr int64_t kMigrationLock = 0x6c647067'00000001;
constexpr int64_t kAnswerLogLock = 0x6c647067'00000002;
constexpr int64_t kAuditLock = 0x6c647067'00000003;
constexpr int64_t kSealedLock = 0x6c647067'00000004;
constexpr int64_t kOperatorLease = 0x6c647067'00000005;
constexpr int64_t kCampaignIdLock = 0x6c647067'00000006;
constexpr int64_t kResultIdLock = 0x6c647067'00000007;
constexpr int64_t kFleetLock = 0x6c647067'00000008;

// How long an operator that did not hold the lease waits, after its lease
// connection broke and came back, before it tries to take the lease: the
// former holder's chance to take it again after a database restart. The
// holder checks every 500 ms, and one of its attempts may be stuck for
// kLeaseConnectTimeoutS (libpq's least; also the connection's
// tcp_user_timeout) on the database's old address when the database came
// back elsewhere (a container restarted): the grace covers both.
constexpr int kLeaseConnectTimeoutS = 2;
constexpr absl::Duration kOperatorLeaseGrace = absl::Seconds(3);

// A query parameter: binary (int8 big-endian, bytea raw) or text.
struct Param {
  std::string bytes;
  bool binary = true;
};
inline Param Int8(int64_t v) {
  std::string b(8, '\0');
  for (int i = 7; i >= 0; --i) {
    b[i] = static_cast<char>(v & 0xff);
    v = static_cast<int64_t>(static_cast<uint64_t>(v) >> 8);
  }
  return Param{std::move(b), true};
}
inline Param Bytes(absl::string_view b) { return Param{std::string(b), true}; }
inline Param TextParam(std::string t) { return Param{std::move(t), false}; }
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
inline int64_t GetInt8(const PGresult* r, int row, int col) {
  const auto* p = reinterpret_cast<const unsigned char*>(PQgetvalue(r, row, col));
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | p[i];
  return static_cast<int64_t>(v);
}
inline bool GetBool(const PGresult* r, int row, int col) {
  return PQgetvalue(r, row, col)[0] != 0;
}
inline absl::string_view GetBytes(const PGresult* r, int row, int col) {
  return absl::string_view(PQgetvalue(r, row, col),
                           static_cast<size_t>(PQgetlength(r, row, col)));
}

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

  // Connected, reconnecting if the connection broke -- including an idle
  // one the server closed since its last use (a database restart), which
  // is noticed here, without a round trip, rather than as the next
  // statement's failure: UNAVAILABLE naming the server and libpq's words
  // otherwise.
  absl::Status Ensure();

  absl::StatusOr<Result> Exec(absl::string_view operation, const char* sql,
                              const std::vector<Param>& params);

  // Runs body in one transaction; rolls back on any failure.
  absl::Status InTransaction(absl::string_view operation,
                             absl::FunctionRef<absl::Status()> body,
                             bool read_only = false);

  // Holds a transaction-scoped advisory lock until the transaction ends.
  absl::Status XactLock(absl::string_view operation, int64_t key);

  PGconn* get() { return conn_.get(); }
  void Drop() { conn_.reset(); }
  // Connections dropped because they broke (not the first connect).
  int64_t reconnects() const { return reconnects_; }
  const std::string& name() const { return name_; }

 private:
  const std::string url_, password_, name_, connect_timeout_;
  const bool synchronous_full_;
  Conn conn_;
  int64_t reconnects_ = 0;
};

// answer_log through a connection inside its transaction, for LogCore.
class PgRows final : public LogRows {
 public:
  PgRows(Connection& c, absl::string_view operation)
      : c_(c), operation_(operation) {}

  absl::Status ReadAfter(
      int64_t after,
      absl::FunctionRef<absl::Status(int64_t, int64_t, absl::string_view)> fn)
      override;

  absl::Status ReadRow(int64_t id, int64_t* campaign,
                       std::string* blob) override;

  absl::Status ReadBytes(int64_t id, uint32_t offset, uint32_t length,
                         std::string& out) override;

  absl::StatusOr<int64_t> Insert(int64_t campaign,
                                 absl::string_view blob) override;

  absl::StatusOr<absl::flat_hash_set<int64_t>> Closed(
      const std::vector<int64_t>& campaigns) override;

 private:
  Connection& c_;
  const absl::string_view operation_;
  int64_t cached_row_ = -1;
  std::string cached_;
};

// The PostgreSQL store: CuratorStore over one connection (c_, for every
// call but the lease) and a second one that holds the operator lease.
class PgStore final : public CuratorStore {
 public:
  PgStore(std::string url, std::string password, std::string name,
          const PostgresStore::Options& o)
      : name_(name),
        core_(name),
        c_(url, password, name, o.connect_timeout_s, o.synchronous_full),
        lease_(url, password, name, kLeaseConnectTimeoutS, true) {}

  absl::Status Init();

  absl::StatusOr<int64_t> CreateCampaign(
      absl::FunctionRef<std::string(int64_t)> record_for_id) override;

  absl::Status UpdateCampaign(const CampaignRow& row) override;

  absl::Status UpdateCampaignAndAudit(const CampaignRow& row,
                                      const std::string& actor,
                                      const std::string& action,
                                      const std::string& details) override;

  absl::StatusOr<std::vector<CampaignRow>> ListCampaigns() override;

  absl::StatusOr<std::vector<AppendOutcome>> AppendAnswers(
      const std::vector<AnswerRow>& answers) override;

  absl::Status ForEachAnswer(
      int64_t campaign, absl::FunctionRef<bool(const AnswerRow&)> fn) override;

  absl::Status ForEachAnswer(
      absl::FunctionRef<bool(const AnswerRow&)> fn) override;

  absl::StatusOr<std::vector<AnswerRow>> ListAnswers(
      int64_t campaign, uint32_t first_node, int limit,
      bool refusals_only) override;

  absl::Status ForEachAnswerKey(
      absl::FunctionRef<void(int64_t, uint32_t, bool)> fn) override;

  absl::Status ForEachNewAnswerKey(
      absl::FunctionRef<void(int64_t, uint32_t, bool)> fn) override;

  absl::Status PutCaps(
      const std::vector<std::pair<uint32_t, std::string>>& caps) override;

  absl::Status PutCapsAndAudit(
      const std::vector<std::pair<uint32_t, std::string>>& caps,
      const std::string& actor, const std::string& action,
      const std::string& details) override;

  absl::Status ForEachCaps(
      absl::FunctionRef<void(uint32_t, const std::string&)> fn) override;

  absl::Status PutFleetPlan(const std::vector<std::string>& holders) override;

  absl::StatusOr<std::vector<std::string>> GetFleetPlan() override;
  absl::StatusOr<FleetGrant> ClaimFleetShard(const FleetClaim& claim) override;

  absl::Status Audit(const std::string& actor, const std::string& action,
                     const std::string& details) override;

  absl::StatusOr<std::vector<AuditRow>> ListAudit(int64_t after,
                                                  int limit) override;

  absl::Status PutSealed(const std::vector<SealedRow>& messages) override;

  absl::StatusOr<std::vector<SealedRow>> FetchSealed(
      const std::vector<uint32_t>& to_nodes, int64_t after, int limit,
      const std::string& campaign) override;

  absl::Status PutNodeKeys(
      const std::vector<std::pair<uint32_t, std::string>>& keys) override;

  absl::Status ForEachNodeKey(
      absl::FunctionRef<void(uint32_t, const std::string&)> fn) override;
  absl::Status GetNodeKeys(
      const std::vector<uint32_t>& nodes,
      absl::FunctionRef<void(uint32_t, const std::string&)> fn) override;

  absl::StatusOr<int64_t> AddResult(
      absl::FunctionRef<std::string(int64_t)> record_for_id,
      const std::string& matrix_path) override;

  absl::StatusOr<std::vector<ResultRow>> ListResults() override;

  absl::StatusOr<std::vector<ResultRow>> ListResultsBefore(
      int64_t before_id, int limit) override;

  absl::StatusOr<ResultRow> GetResult(int64_t id) override;

  absl::Status PutFrontendStatus(const std::string& name,
                                 const std::string& status) override;

  absl::StatusOr<std::vector<std::string>> FreshFrontendStatus(
      absl::Duration within) override;

  absl::StatusOr<bool> TryOperatorLease() override;

  std::string Describe() const override {
    return absl::StrCat("postgres ", name_);
  }

 private:
  absl::Status Migrate() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Status CatchUpLocked(absl::string_view operation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::StatusOr<int64_t> InsertWithId(
      absl::string_view operation, int64_t id_lock, const char* insert,
      const std::vector<Param>& params, const char* update,
      absl::FunctionRef<std::string(int64_t)> record_for_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Status UpdateCampaignRow(absl::string_view operation,
                                 const CampaignRow& row)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Status InsertAudit(absl::string_view operation, int64_t unix_ms,
                           const std::string& actor, const std::string& action,
                           const std::string& details)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Status InsertCaps(
      absl::string_view operation,
      const std::vector<std::pair<uint32_t, std::string>>& caps)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // One statement per chunk of (node, blob) pairs, as two arrays in text
  // form (bytea as \x hex). A node twice in one chunk would fail ON
  // CONFLICT: the last value wins, as in the SQLite store.
  absl::Status UpsertNodeBlobs(
      absl::string_view operation, const char* sql,
      const std::vector<std::pair<uint32_t, std::string>>& pairs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Reads (node, blob) rows in pages of `sql` (which takes $1 = the last
  // node read), ascending.
  absl::Status ForEachNodeBlob(
      absl::string_view operation, const char* sql,
      absl::FunctionRef<void(uint32_t, const std::string&)> fn);

  const std::string name_;
  absl::Mutex mu_;
  LogCore core_ ABSL_GUARDED_BY(mu_);
  Connection c_ ABSL_GUARDED_BY(mu_);
  absl::Mutex lease_mu_;
  Connection lease_ ABSL_GUARDED_BY(lease_mu_);
  bool held_ ABSL_GUARDED_BY(lease_mu_) = false;
  // The lease connection broke since the last attempt; we held the lease
  // when we last knew; no attempt before this time (TryOperatorLease).
  bool lease_broke_ ABSL_GUARDED_BY(lease_mu_) = false;
  bool was_holder_ ABSL_GUARDED_BY(lease_mu_) = false;
  absl::Time lease_grace_until_ ABSL_GUARDED_BY(lease_mu_) =
      absl::InfinitePast();
};

}  // namespace ldpgraph::store::postgres_internal
