#include "common/files.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/status/statusor.h"

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

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
  }
  struct stat st;
  if (fstat(fileno(f), &st) != 0) {
    const int err = errno;
    std::fclose(f);
    return absl::ErrnoToStatus(err, absl::StrCat("cannot stat ", path));
  }
  if (S_ISDIR(st.st_mode)) {
    std::fclose(f);
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is a directory, not a file"));
  }
  std::string out;
  // Only a regular file's size is its length (a pipe's or device's is not).
  if (S_ISREG(st.st_mode) && st.st_size > 0) {
    out.reserve(static_cast<size_t>(st.st_size));
  }
  constexpr size_t kChunk = size_t{1} << 20;
  while (true) {
    const size_t old = out.size();
    out.resize(old + kChunk);
    const size_t got = std::fread(out.data() + old, 1, kChunk, f);
    out.resize(old + got);
    if (got < kChunk) break;
  }
  if (std::ferror(f)) {
    const int err = errno;
    std::fclose(f);
    return absl::ErrnoToStatus(err, absl::StrCat("cannot read ", path));
  }
  std::fclose(f);
  return out;
}


AtomicFileWriter::AtomicFileWriter(std::string path)
    : path_(std::move(path)), tmp_(path_ + ".tmp") {}

AtomicFileWriter::~AtomicFileWriter() {
  if (file_ != nullptr) std::fclose(file_);
  if (opened_ && !committed_) std::remove(tmp_.c_str());
}

absl::Status AtomicFileWriter::Open() {
  file_ = std::fopen(tmp_.c_str(), "wb");
  if (file_ == nullptr) return Error(errno, "cannot create");
  opened_ = true;
  buffer_.reset(new char[kBufferSize]);
  return absl::OkStatus();
}

void AtomicFileWriter::Append(absl::string_view s) {
  while (!s.empty()) {
    if (used_ == kBufferSize) Flush();
    const size_t n = std::min(s.size(), kBufferSize - used_);
    std::memcpy(buffer_.get() + used_, s.data(), n);
    used_ += n;
    s.remove_prefix(n);
  }
}

absl::Status AtomicFileWriter::Close() {
  Flush();
  if (write_errno_ == 0 && std::fflush(file_) != 0) write_errno_ = errno;
  if (std::fclose(file_) != 0 && write_errno_ == 0) write_errno_ = errno;
  file_ = nullptr;
  if (write_errno_ != 0) return Error(write_errno_, "cannot write");
  return absl::OkStatus();
}

absl::Status AtomicFileWriter::Commit() {
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    return Error(errno, "cannot rename temporary file to");
  }
  committed_ = true;
  return absl::OkStatus();
}

void AtomicFileWriter::Flush() {
  if (used_ > 0 && write_errno_ == 0 &&
      std::fwrite(buffer_.get(), 1, used_, file_) != used_) {
    write_errno_ = errno != 0 ? errno : EIO;
  }
  used_ = 0;
}

absl::Status AtomicFileWriter::Error(int err, absl::string_view what) const {
  return absl::ErrnoToStatus(
      err, absl::StrCat(what, " ", path_, " (temporary file ", tmp_, ")"));
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view contents) {
  AtomicFileWriter f(path);
  if (absl::Status s = f.Open(); !s.ok()) return s;
  f.Append(contents);
  if (absl::Status s = f.Close(); !s.ok()) return s;
  return f.Commit();
}

}  // namespace ldpgraph
