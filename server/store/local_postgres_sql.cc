// LocalPostgres's SQL (server/store/local_postgres.h: "Clients"): libpq
// connections, statements, quoting, and the identifiers Options accepts.
#include <libpq-fe.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "server/store/internal/local_postgres_parts.h"

namespace ldpgraph::store::internal {

bool IsPlainIdentifier(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  if (!(absl::ascii_islower(s[0]) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_';
  });
}

std::string ConnError(PGconn* c) {
  return c == nullptr
             ? "out of memory"
             : std::string(absl::StripAsciiWhitespace(PQerrorMessage(c)));
}

absl::StatusOr<PgConn> Connect(
    const std::vector<std::pair<std::string, std::string>>& params) {
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : params) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PgConn c(PQconnectdbParams(keys.data(), values.data(), 0));
  if (c == nullptr || PQstatus(c.get()) != CONNECTION_OK) {
    return absl::InternalError(ConnError(c.get()));
  }
  return c;
}

absl::Status Exec(PGconn* c, const std::string& sql, const std::string& what) {
  PgResult r(PQexec(c, sql.c_str()));
  if (r == nullptr || PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
    return absl::InternalError(
        absl::StrCat("LocalPostgres: ", what, ": ", ConnError(c)));
  }
  return absl::OkStatus();
}

std::string QuoteIdent(PGconn* c, const std::string& s) {
  char* q = PQescapeIdentifier(c, s.c_str(), s.size());
  std::string out = q != nullptr ? q : "";
  PQfreemem(q);
  return out;
}

std::string QuoteLiteral(PGconn* c, const std::string& s) {
  char* q = PQescapeLiteral(c, s.c_str(), s.size());
  std::string out = q != nullptr ? q : "";
  PQfreemem(q);
  return out;
}

}  // namespace ldpgraph::store::internal
