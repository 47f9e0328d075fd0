// The PostgreSQL store's schema and opening (postgres_store.h): the
// numbered migrations, applied at Open under an advisory lock, and
// PostgresStore::Open.
#include <libpq-fe.h>

#include <iterator>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "server/store/internal/postgres_backend.h"
#include "server/store/postgres_store.h"

namespace ldpgraph::store {
namespace postgres_internal {
namespace {

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
    // 4: the fleet planner shared by the frontends (ClaimFleetShard): the
    // hosts gathering before a plan, and each shard's last renewal.
    R"sql(
CREATE TABLE fleet_hosts(
  host BYTEA PRIMARY KEY,
  first_ms BIGINT NOT NULL,
  last_ms BIGINT NOT NULL);
ALTER TABLE fleet ADD COLUMN renewed_ms BIGINT NOT NULL DEFAULT 0;
)sql",
};
static_assert(std::size(kMigrations) == kPostgresSchemaVersion);

}  // namespace

absl::Status PgStore::Init() {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(c_.Ensure());
  RETURN_IF_ERROR(Migrate());
  PgRows rows(c_, "indexing the answer log");
  return c_.InTransaction(
      "indexing the answer log",
      [&] { return core_.CatchUp(rows, /*initial=*/true); },
      /*read_only=*/true);
}

absl::Status PgStore::Migrate() {
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

}  // namespace postgres_internal

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
  auto store = std::make_unique<postgres_internal::PgStore>(
      options.url, std::move(password), name, options);
  RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<CuratorStore>(std::move(store));
}

}  // namespace ldpgraph::store
