#include "server/store/store.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/store/postgres_store.h"

// CuratorStore's backends are defined in sqlite_*.cc (CuratorStore::Open,
// server/store/internal/sqlite_backend.h) and postgres_*.cc
// (PostgresStore::Open); this file picks one from a --store URL.
namespace ldpgraph::store {

std::string CampaignName(int64_t id) { return absl::StrCat("c", id); }

absl::StatusOr<int64_t> ParseCampaignName(absl::string_view name) {
  int64_t id = 0;
  if (name.size() < 2 || name[0] != 'c' ||
      !absl::SimpleAtoi(name.substr(1), &id) || id <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "campaign id must look like c1, c2, ...; got '", name, "'"));
  }
  return id;
}

absl::Status CheckPageLimit(int limit) {
  if (limit <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit must be > 0, got ", limit));
  }
  return absl::OkStatus();
}

CuratorStore::~CuratorStore() = default;

absl::StatusOr<std::unique_ptr<CuratorStore>> CuratorStore::OpenUrl(
    const std::string& url, const std::string& password_file,
    const std::string& dir, Options options) {
  if (url.empty() || url == "sqlite") {
    if (!password_file.empty()) {
      return absl::InvalidArgumentError(
          "a password file applies to a postgres:// store, not to SQLite");
    }
    return Open(dir, options);
  }
  if (absl::StartsWith(url, "postgres://") ||
      absl::StartsWith(url, "postgresql://")) {
    PostgresStore::Options pg;
    pg.url = url;
    pg.password_file = password_file;
    if (options.read_only) {
      return absl::InvalidArgumentError(
          "a read-only store is a SQLite file under the data directory, not a "
          "postgres:// URL");
    }
    pg.synchronous_full = options.synchronous_full;
    return PostgresStore::Open(std::move(pg));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--store must be sqlite (the file under the data directory) or a "
      "postgres://USER@HOST:PORT/DATABASE URL, got '",
      url, "'"));
}

}  // namespace ldpgraph::store
