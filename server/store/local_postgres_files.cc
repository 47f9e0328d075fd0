// LocalPostgres's files (server/store/local_postgres.h: the folder): log
// tails for messages, the password files, new passwords.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/hex.h"
#include "common/random/random.h"
#include "common/status_macros.h"
#include "server/store/internal/local_postgres_parts.h"

namespace ldpgraph::store::internal {

std::string Join(const std::vector<std::string>& argv) {
  return absl::StrJoin(argv, " ");
}

// The last `lines` lines of path from byte `offset` on, each as
// "  | line\n"; a note when there are none.
std::string FileTail(const std::string& path, off_t offset, int lines) {
  std::ifstream f(path);
  if (!f) return absl::StrCat("  (cannot read ", path, ")\n");
  f.seekg(offset);
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(f, line)) {
    tail.push_back(std::move(line));
    if (static_cast<int>(tail.size()) > lines) tail.pop_front();
  }
  if (tail.empty()) return "  (empty)\n";
  std::string out;
  for (const std::string& l : tail) absl::StrAppend(&out, "  | ", l, "\n");
  return out;
}

// Creates (or replaces) path with contents, mode 0600, through a temporary
// file renamed into place; owned by uid/gid when chown is true.
absl::Status WriteSecretFile(const std::string& path,
                             const std::string& contents, bool chown, uid_t uid,
                             gid_t gid) {
  const std::string tmp = path + ".tmp";
  ::unlink(tmp.c_str());
  const int fd = ::open(
      tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("LocalPostgres: cannot create ", tmp));
  }
  int err = 0;
  if (::fchmod(fd, 0600) != 0) err = errno;
  if (err == 0 && chown && ::fchown(fd, uid, gid) != 0) err = errno;
  size_t done = 0;
  while (err == 0 && done < contents.size()) {
    const ssize_t n =
        ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno;
      break;
    }
    done += n;
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return absl::ErrnoToStatus(
        err, absl::StrCat("LocalPostgres: cannot write ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadPassword(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  std::string pw(absl::StripAsciiWhitespace(text));
  if (pw.size() != 32 || !FromHex(pw).ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "LocalPostgres: ", path,
        " does not hold a password of 32 hex characters (not a folder of "
        "LocalPostgres, or damaged)"));
  }
  return pw;
}

absl::StatusOr<std::string> NewPassword() {
  ASSIGN_OR_RETURN(const std::string bytes, SecureRandomBytes(16));
  return ToHex(bytes);
}

}  // namespace ldpgraph::store::internal
