#include "server/training/row_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ldpgraph::training {
namespace {

// Every byte of [data, data + size) to offset, or the errno that stopped
// it (ENOSPC for a write that found the disk full after all).
int WriteAll(int fd, const char* data, size_t size, uint64_t offset) {
  while (size > 0) {
    const ssize_t n = pwrite(fd, data, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    data += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return 0;
}

int ReadAll(int fd, char* data, size_t size, uint64_t offset) {
  while (size > 0) {
    const ssize_t n = pread(fd, data, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;  // past the end: the file was cut short
    data += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return 0;
}

}  // namespace

struct RowFile::ReadError {
  std::mutex mu;
  absl::Status status;  // guarded by mu
};

absl::StatusOr<std::unique_ptr<RowFile>> RowFile::Create(
    const std::string& dir, size_t rows, size_t cols) {
  if (rows == 0 || cols == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a row file needs rows and columns, got ", rows, " x ",
                     cols));
  }
  std::string folder = dir;
  if (folder.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    folder = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  const uint64_t bytes = uint64_t{rows} * cols * sizeof(float);
  std::string path = folder + "/ldpgraph-rows-XXXXXX";
  std::vector<char> name(path.begin(), path.end());
  name.push_back('\0');
  const int fd = mkstemp(name.data());
  if (fd < 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("cannot create a row file in ", folder,
                            " (the scratch folder, --scratch-dir)"));
  }
  unlink(name.data());  // no name: gone with the descriptor
  std::unique_ptr<RowFile> file(new RowFile(fd, folder, rows, cols));
  if (const int e = posix_fallocate(fd, 0, static_cast<off_t>(bytes))) {
    return absl::ErrnoToStatus(
        e, absl::StrCat("cannot reserve ", bytes, " bytes for ", rows, " x ",
                        cols, " features in ", folder,
                        " (the scratch folder, --scratch-dir)"));
  }
  return file;
}

RowFile::RowFile(int fd, std::string dir, size_t rows, size_t cols)
    : fd_(fd), dir_(std::move(dir)), rows_(rows), cols_(cols),
      error_(std::make_unique<ReadError>()) {}

RowFile::~RowFile() { close(fd_); }

absl::Status RowFile::WriteColumns(size_t first_col, size_t width,
                                   const float* slice) {
  if (width == 0 || first_col > cols_ || width > cols_ - first_col) {
    return absl::InvalidArgumentError(absl::StrCat(
        "columns [", first_col, ", ", first_col + width,
        ") are outside the row file's ", cols_));
  }
  const size_t entries = rows_ * width;
  const float* bad = std::find_if(slice, slice + entries,
                                  [](float v) { return !std::isfinite(v); });
  if (bad != slice + entries) {
    const size_t at = static_cast<size_t>(bad - slice);
    return absl::InvalidArgumentError(absl::StrCat(
        "row ", at / width, ", column ", first_col + at % width,
        " is not finite (", *bad, ")"));
  }
  int e = 0;
  if (width == cols_) {
    // Whole rows: one contiguous span, written in pieces of 64 MiB.
    constexpr size_t kPiece = size_t{64} << 20;
    const char* data = reinterpret_cast<const char*>(slice);
    const size_t bytes = entries * sizeof(float);
    for (size_t at = 0; at < bytes && e == 0; at += kPiece) {
      e = WriteAll(fd_, data + at, std::min(kPiece, bytes - at), at);
    }
  } else {
    for (size_t r = 0; r < rows_ && e == 0; ++r) {
      e = WriteAll(fd_, reinterpret_cast<const char*>(slice + r * width),
                   width * sizeof(float),
                   (uint64_t{r} * cols_ + first_col) * sizeof(float));
    }
  }
  if (e != 0) {
    return absl::ErrnoToStatus(
        e, absl::StrCat("writing features to the row file in ", dir_));
  }
  return absl::OkStatus();
}

void RowFile::ReadRows(const uint32_t* rows, size_t count, float* out) const {
  const size_t row_bytes = cols_ * sizeof(float);
  for (size_t i = 0; i < count; ++i) {
    float* dst = out + i * cols_;
    const int e = ReadAll(fd_, reinterpret_cast<char*>(dst), row_bytes,
                          uint64_t{rows[i]} * row_bytes);
    if (e == 0) continue;
    std::fill_n(dst, cols_, 0.0f);
    std::lock_guard<std::mutex> lock(error_->mu);
    if (error_->status.ok()) {
      error_->status = absl::ErrnoToStatus(
          e, absl::StrCat("reading row ", rows[i], " of the row file in ",
                          dir_));
    }
  }
}

absl::Status RowFile::status() const {
  std::lock_guard<std::mutex> lock(error_->mu);
  return error_->status;
}

}  // namespace ldpgraph::training
