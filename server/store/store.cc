#include "server/store/store.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/store/postgres_store.h"

// CuratorStore's backends are defined in sqlite_*.cc (CuratorStore::Open,
// server/store/internal/sqlite_backend.h) and postgres_*.cc
// (PostgresStore::Open); this file picks one from a --store URL.
namespace ldpgraph::store {

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
    pg.synchronous_full = options.synchronous_full;
    return PostgresStore::Open(std::move(pg));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--store must be sqlite (the file under the data directory) or a "
      "postgres://USER@HOST:PORT/DATABASE URL, got '",
      url, "'"));
}

}  // namespace ldpgraph::store
