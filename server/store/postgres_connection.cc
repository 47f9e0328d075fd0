// Connection and PgRows (server/store/internal/postgres_backend.h): one
// libpq connection with the helpers every call uses, and the answer log
// read and written through it.
#include <libpq-fe.h>
#include <poll.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "server/store/internal/postgres_backend.h"

namespace ldpgraph::store::postgres_internal {
namespace {

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

// Whether the server has closed an idle connection since its last use. It
// sends nothing to an idle client of ours (no LISTEN, no SET) but, on its
// way down, an error ("terminating connection due to administrator
// command") and the end of the stream; a crashed server only the end. So
// an idle socket with nothing to read is open, without a round trip; one
// with input is read and parsed (libpq hands such an error to the notice
// processor and keeps the connection OK) and read again, to reach the end.
bool ClosedByServer(PGconn* conn) {
  pollfd p{};
  p.fd = PQsocket(conn);
  p.events = POLLIN;
  if (p.fd < 0) return true;
  if (poll(&p, 1, 0) == 0) return false;
  for (int i = 0; i < 2; ++i) {
    if (PQconsumeInput(conn) == 0 || PQstatus(conn) != CONNECTION_OK) {
      return true;
    }
    PQisBusy(conn);  // parses what came in
  }
  return PQstatus(conn) != CONNECTION_OK;
}

}  // namespace

absl::Status Connection::Ensure() {
  if (conn_ != nullptr && PQstatus(conn_.get()) == CONNECTION_OK &&
      PQtransactionStatus(conn_.get()) == PQTRANS_IDLE) {
    // An idle connection the server has since closed (a restart, a crash,
    // an administrator's pg_terminate_backend) still says CONNECTION_OK
    // until it is used: read what the socket holds, without waiting, so
    // that its end shows now and not as the next statement's failure.
    if (!ClosedByServer(conn_.get())) return absl::OkStatus();
    conn_.reset();
    ++reconnects_;
  } else if (conn_ != nullptr && PQstatus(conn_.get()) == CONNECTION_OK) {
    return absl::OkStatus();
  } else if (conn_ != nullptr) {
    conn_.reset();
    ++reconnects_;
  }
  // A statement whose bytes the server never acknowledges fails after the
  // connect timeout (tcp_user_timeout), not after the kernel's 15 minutes of
  // retransmissions: a database that vanished without closing its sockets
  // (a container or machine gone, its address dropping packets) is noticed
  // as soon as an idle connection would be by its keepalives.
  const std::string user_timeout_ms = absl::StrCat(
      std::stoi(connect_timeout_) * 1000);
  const char* keys[] = {"dbname",           "password",
                        "connect_timeout",  "application_name",
                        "keepalives_idle",  "keepalives_interval",
                        "keepalives_count", "tcp_user_timeout",
                        nullptr};
  const char* values[] = {url_.c_str(),
                          password_.empty() ? nullptr : password_.c_str(),
                          connect_timeout_.c_str(),
                          "ldpgraph-curator",
                          "5",
                          "2",
                          "3",
                          user_timeout_ms.c_str(),
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

absl::StatusOr<Result> Connection::Exec(absl::string_view operation,
                                        const char* sql,
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

absl::Status Connection::InTransaction(absl::string_view operation,
                                       absl::FunctionRef<absl::Status()> body,
                                       bool read_only) {
  const char* begin = read_only
                          ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
                          : "BEGIN";
  RETURN_IF_ERROR(Ensure());
  if (absl::Status s = Exec(operation, begin, {}).status(); !s.ok()) {
    // BEGIN changes nothing: when the connection broke under it (the server
    // went away between Ensure's look and the statement), connect again and
    // begin once more.
    if (conn_ == nullptr || PQstatus(conn_.get()) == CONNECTION_OK) return s;
    RETURN_IF_ERROR(Ensure());
    RETURN_IF_ERROR(Exec(operation, begin, {}).status());
  }
  absl::Status status = body();
  if (status.ok()) status = Exec(operation, "COMMIT", {}).status();
  if (!status.ok() && conn_ != nullptr &&
      PQstatus(conn_.get()) == CONNECTION_OK &&
      PQtransactionStatus(conn_.get()) != PQTRANS_IDLE) {
    Result ignored(PQexec(conn_.get(), "ROLLBACK"));
  }
  return status;
}

absl::Status Connection::XactLock(absl::string_view operation, int64_t key) {
  return Exec(operation, "SELECT pg_advisory_xact_lock($1::bigint)", {Int8(key)})
      .status();
}

absl::Status PgRows::ReadAfter(
    int64_t after,
    absl::FunctionRef<absl::Status(int64_t, int64_t, absl::string_view)> fn) {
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

absl::Status PgRows::ReadRow(int64_t id, int64_t* campaign,
                             std::string* blob) {
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

absl::Status PgRows::ReadBytes(int64_t id, uint32_t offset, uint32_t length,
                               std::string& out) {
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

absl::StatusOr<int64_t> PgRows::Insert(int64_t campaign,
                                       absl::string_view blob) {
  ASSIGN_OR_RETURN(Result r,
                   c_.Exec(operation_,
                           "INSERT INTO answer_log(campaign, answers) "
                           "VALUES($1, $2) RETURNING id",
                           {Int8(campaign), Bytes(blob)}));
  return GetInt8(r.get(), 0, 0);
}

absl::StatusOr<absl::flat_hash_set<int64_t>> PgRows::Closed(
    const std::vector<int64_t>& campaigns) {
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

}  // namespace ldpgraph::store::postgres_internal
