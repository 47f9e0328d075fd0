// A rows x cols float matrix kept on disk, row-major, for features too
// wide to hold in memory (PrivGE's propagated Z on wide feature sets): it
// is written once by slices of columns, as a column-wise propagation
// produces them, and read back by rows, as the MLP's mini-batches,
// validation passes and predictions take them (MlpRows). The process then
// holds one slice and one batch; the rest is the operating system's page
// cache, which it may drop and read again from disk.
//
// The file is created in a scratch folder and unlinked at once: it holds
// no name, nothing else opens it, and it is gone when the RowFile is
// destroyed or the process dies. Its space is reserved when it is created
// (posix_fallocate), so a full disk is an error there, naming the folder
// and the bytes asked for, not a failure halfway through.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ldpgraph::training {

class RowFile {
 public:
  // A zeroed rows x cols file in `dir` (empty: $TMPDIR, else /tmp).
  // INVALID_ARGUMENT for an empty shape; the folder's error (NOT_FOUND,
  // PERMISSION_DENIED, RESOURCE_EXHAUSTED for a full disk...) with its
  // path otherwise.
  static absl::StatusOr<std::unique_ptr<RowFile>> Create(
      const std::string& dir, size_t rows, size_t cols);
  ~RowFile();
  RowFile(const RowFile&) = delete;
  RowFile& operator=(const RowFile&) = delete;

  size_t rows() const { return rows_; }
  size_t cols() const { return cols_; }
  // The folder the file was made in (for messages).
  const std::string& dir() const { return dir_; }

  // Columns [first_col, first_col + width) of every row from `slice`
  // (rows() x width floats, row-major). first_col + width <= cols().
  // INVALID_ARGUMENT for a slice out of range or holding a NaN or an
  // infinity; the write's error (a full disk, an I/O error) naming the
  // folder. Not thread-safe against other calls.
  absl::Status WriteColumns(size_t first_col, size_t width,
                            const float* slice);

  // Rows rows[0 .. count) into out (count x cols() floats, row-major),
  // each rows[i] < rows(). Safe to call from several threads. A read error
  // (an I/O error of the disk) leaves zeros in out and is kept: status()
  // returns the first one, so that a caller that cannot fail mid-loop (a
  // training step) checks once after.
  void ReadRows(const uint32_t* rows, size_t count, float* out) const;

  // OK, or the first read error.
  absl::Status status() const;

 private:
  RowFile(int fd, std::string dir, size_t rows, size_t cols);

  const int fd_;
  const std::string dir_;
  const size_t rows_, cols_;
  struct ReadError;
  std::unique_ptr<ReadError> error_;
};

}  // namespace ldpgraph::training
