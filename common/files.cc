#include "common/files.h"

#include <sys/stat.h>

#include <cerrno>

#include "absl/strings/str_cat.h"

namespace ldpgraph {
namespace {

// mkdir(dir, mode), with an existing directory counting as success.
absl::Status MakeOneDir(const std::string& dir, mode_t mode) {
  if (::mkdir(dir.c_str(), mode) == 0) return absl::OkStatus();
  const int err = errno;
  struct stat st;
  if (err == EEXIST && ::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " exists and is not a directory"));
  }
  return absl::ErrnoToStatus(err, absl::StrCat("cannot create directory ", dir));
}

}  // namespace

absl::Status MakeDirs(const std::string& path, mode_t leaf_mode) {
  if (path.empty()) {
    return absl::InvalidArgumentError("cannot create a directory without a path");
  }
  std::string leaf = path;
  while (leaf.size() > 1 && leaf.back() == '/') leaf.pop_back();
  // Each parent: the prefix before every '/' that ends a component (so "/",
  // "//" and a leading "/" create nothing of their own).
  for (size_t i = 1; i < leaf.size(); ++i) {
    if (leaf[i] != '/' || leaf[i - 1] == '/') continue;
    if (absl::Status s = MakeOneDir(leaf.substr(0, i), 0755); !s.ok()) {
      return s;
    }
  }
  return MakeOneDir(leaf, leaf_mode);
}

}  // namespace ldpgraph
