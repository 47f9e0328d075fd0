// LocalPostgres's server binaries and the user it runs them as
// (server/store/local_postgres.h: "Binaries", "Running as root").
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/wait_status.h"
#include "server/store/internal/local_postgres_parts.h"

namespace ldpgraph::store::internal {
namespace {

namespace fs = std::filesystem;

constexpr char kInstallHint[] =
    "install them: apt-get install postgresql-15 (Debian 12)";

bool IsExecutable(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

bool HasServerBinaries(const std::string& dir) {
  return !dir.empty() && IsExecutable(dir + "/initdb") &&
         IsExecutable(dir + "/postgres");
}

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    if (dir.empty()) continue;
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (IsExecutable(candidate)) return candidate;
  }
  return "";
}

// `pg_config --bindir`'s output, or "" (with why in *note).
std::string PgConfigBinDir(std::string* note) {
  const std::string pg_config = FindOnPath("pg_config");
  if (pg_config.empty()) {
    *note = "no pg_config on PATH";
    return "";
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    *note = absl::StrCat("pipe for ", pg_config, ": ", std::strerror(errno));
    return "";
  }
  const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  SpawnSpec spec;
  spec.argv = {pg_config, "--bindir"};
  spec.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
  spec.cwd.assign(1, '/');
  spec.out_fd = fds[1];
  spec.err_fd = null_fd >= 0 ? null_fd : fds[1];
  absl::StatusOr<pid_t> pid = Spawn(spec, ProcessUser{});
  ::close(fds[1]);
  if (null_fd >= 0) ::close(null_fd);
  std::string out;
  if (pid.ok()) {
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof(buf))) != 0) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      out.append(buf, n);
    }
  }
  ::close(fds[0]);
  if (!pid.ok()) {
    *note = std::string(pid.status().message());
    return "";
  }
  int status = 0;
  WaitPid(*pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *note = absl::StrCat(pg_config, " --bindir ", DescribeWaitStatus(status));
    return "";
  }
  return std::string(absl::StripAsciiWhitespace(out));
}

}  // namespace

absl::StatusOr<std::string> FindBinDir(const std::string& configured) {
  if (!configured.empty()) {
    if (HasServerBinaries(configured)) return configured;
    return absl::FailedPreconditionError(absl::StrCat(
        "LocalPostgres: Options::bin_dir ", configured,
        " holds no PostgreSQL server binaries (initdb and postgres); ",
        kInstallHint));
  }
  std::vector<std::string> tried;
  std::string note;
  const std::string from_pg_config = PgConfigBinDir(&note);
  if (HasServerBinaries(from_pg_config)) return from_pg_config;
  tried.push_back(from_pg_config.empty()
                      ? note
                      : absl::StrCat("pg_config --bindir is ", from_pg_config,
                                     ", which has no initdb and postgres"));
  // Debian's layout: /usr/lib/postgresql/<major>/bin, the highest first.
  std::vector<std::pair<int, std::string>> versions;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    int major = 0;
    if (absl::SimpleAtoi(entry.path().filename().string(), &major)) {
      versions.emplace_back(major, (entry.path() / "bin").string());
    }
  }
  std::sort(versions.rbegin(), versions.rend());
  for (const auto& [major, bin] : versions) {
    if (HasServerBinaries(bin)) return bin;
  }
  tried.push_back(versions.empty()
                      ? "no /usr/lib/postgresql/<major>/bin"
                      : "no /usr/lib/postgresql/<major>/bin holds initdb and "
                        "postgres");
  return absl::FailedPreconditionError(absl::StrCat(
      "LocalPostgres: no PostgreSQL server binaries (initdb and postgres) "
      "found (",
      absl::StrJoin(tried, "; "), "); ", kInstallHint));
}

// The first folder on the way to path (path included) that `user` may not
// search by its mode bits, as "<folder> (mode 0700, owner uid 0)"; "" if
// none (ACLs aside).
std::string FirstUnsearchable(const std::string& path,
                              const ProcessUser& user) {
  fs::path so_far = "/";
  for (const fs::path& part : fs::path(path).relative_path()) {
    so_far /= part;
    struct stat st;
    if (::stat(so_far.c_str(), &st) != 0) break;
    mode_t bit = S_IXOTH;
    if (st.st_uid == user.uid) {
      bit = S_IXUSR;
    } else if (st.st_gid == user.gid ||
               std::find(user.groups.begin(), user.groups.end(), st.st_gid) !=
                   user.groups.end()) {
      bit = S_IXGRP;
    }
    if ((st.st_mode & bit) == 0) {
      char mode[8];
      std::snprintf(mode, sizeof(mode), "%04o", st.st_mode & 07777);
      return absl::StrCat(so_far.string(), " (mode ", mode, ", owner uid ",
                          st.st_uid, ")");
    }
  }
  return "";
}

absl::StatusOr<ProcessUser> ChooseUser() {
  ProcessUser user;
  if (::geteuid() != 0) {
    user.uid = ::geteuid();
    user.gid = ::getegid();
    const passwd* pw = ::getpwuid(user.uid);
    user.name = pw != nullptr ? pw->pw_name : absl::StrCat("uid ", user.uid);
    return user;
  }
  // initdb and postgres refuse root: run them as a system user.
  const passwd* pw = ::getpwnam("postgres");
  if (pw == nullptr) pw = ::getpwnam("nobody");
  if (pw == nullptr) {
    return absl::FailedPreconditionError(
        "LocalPostgres: running as root, and there is neither a `postgres` "
        "nor a `nobody` user to run PostgreSQL as (initdb and postgres refuse "
        "root); apt-get install postgresql-15 creates `postgres`");
  }
  user.drop = true;
  user.uid = pw->pw_uid;
  user.gid = pw->pw_gid;
  user.name = pw->pw_name;
  int n = 16;
  user.groups.resize(n);
  while (::getgrouplist(user.name.c_str(), user.gid, user.groups.data(), &n) <
         0) {
    user.groups.resize(n);
  }
  user.groups.resize(n);
  return user;
}

}  // namespace ldpgraph::store::internal
