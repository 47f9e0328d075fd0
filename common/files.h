// Files and directories on disk, the one copy of each: creating a folder and
// its missing parents (the curator's --data-dir, say), reading a whole file,
// and writing one atomically (readers see the old file or the new one,
// never part of it).
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ldpgraph {

// Creates the directory `path` and every missing parent, like `mkdir -p`:
// parents with mode 0755, the leaf with leaf_mode (both less the umask).
// Directories that already exist, the leaf included, are fine and keep their
// mode, so a second call is a no-op (and two processes may race). Relative
// paths are taken from the working directory; trailing and repeated '/' are
// ignored. INVALID_ARGUMENT for an empty path; FAILED_PRECONDITION
// "<prefix> exists and is not a directory" when a component is a file;
// otherwise the mkdir errno's code (PERMISSION_DENIED for EACCES, ...) with
// "cannot create directory <prefix>: <strerror>". On an error the parents
// created so far are left in place.
absl::Status MakeDirs(const std::string& path, mode_t leaf_mode = 0700);

// The whole content of a file (binary-safe). The open's errno as the code
// (NOT_FOUND for a missing file, PERMISSION_DENIED, ...) with "cannot open
// <path>"; INVALID_ARGUMENT "<path> is a directory, not a file" for a
// directory (which Linux lets fopen open, and whose SEEK_END offset is not a
// size); "cannot read <path>" with the read's errno.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// A file written through a large buffer to "<path>.tmp" and renamed to path
// by Commit(), so a reader never sees part of it. The temporary file is
// removed unless committed. Errors name both paths and carry errno's code.
class AtomicFileWriter {
 public:
  static constexpr size_t kBufferSize = size_t{1} << 20;
  // Room a single Reserve() may ask for.
  static constexpr size_t kMaxReserve = 4096;

  explicit AtomicFileWriter(std::string path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Creates the temporary file.
  absl::Status Open();

  // A pointer to at least n <= kMaxReserve writable bytes; report what was
  // written with Advance().
  char* Reserve(size_t n) {
    if (kBufferSize - used_ < n) Flush();
    return buffer_.get() + used_;
  }
  void Advance(char* end) { used_ = end - buffer_.get(); }

  void Append(absl::string_view s);

  // Flushes and closes the temporary file; the first write error, if any.
  absl::Status Close();

  // Renames the closed temporary file to its final name.
  absl::Status Commit();

 private:
  void Flush();
  absl::Status Error(int err, absl::string_view what) const;

  std::string path_;
  std::string tmp_;
  FILE* file_ = nullptr;
  bool opened_ = false;
  bool committed_ = false;
  std::unique_ptr<char[]> buffer_;
  size_t used_ = 0;
  int write_errno_ = 0;
};

// Open, Append(contents), Close and Commit of an AtomicFileWriter.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents);

}  // namespace ldpgraph
