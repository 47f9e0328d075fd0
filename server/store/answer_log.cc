#include "server/store/answer_log.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace ldpgraph::store {
namespace {

// Writes v as a varint at p; returns the end.
char* PutVarint(char* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

uint64_t ZigZag(uint64_t delta) {
  const auto v = static_cast<int64_t>(delta);
  return (delta << 1) ^ static_cast<uint64_t>(v >> 63);
}

uint64_t UnZigZag(uint64_t v) { return (v >> 1) ^ (~(v & 1) + 1); }

}  // namespace

void StartLogBlob(std::string& blob) {
  blob.clear();
  blob.push_back(static_cast<char>(kLogFormat));
  blob.append(4, '\0');
}

void FinishLogBlob(std::string& blob, uint32_t count) {
  for (int i = 0; i < 4; ++i) {
    blob[1 + i] = static_cast<char>((count >> (8 * i)) & 0xff);
  }
}

size_t EncodeEntry(std::string& blob, uint32_t node, bool refusal,
                   absl::string_view payload, int64_t unix_ms,
                   int64_t previous_ms) {
  char head[kMaxEntryOverhead];
  char* p = PutVarint(head, uint64_t{node} << 1 | (refusal ? 1 : 0));
  p = PutVarint(p, ZigZag(static_cast<uint64_t>(unix_ms) -
                          static_cast<uint64_t>(previous_ms)));
  p = PutVarint(p, payload.size());
  blob.append(head, p - head);
  const size_t offset = blob.size();
  blob.append(payload.data(), payload.size());
  return offset;
}

absl::Status LogReader::Read(absl::FunctionRef<void(const LogEntry&)> fn) {
  if (blob_.size() > std::numeric_limits<uint32_t>::max()) {
    return absl::DataLossError(absl::StrCat("blob of ", blob_.size(), " bytes"));
  }
  if (blob_.size() < kLogHeaderBytes) {
    return absl::DataLossError(absl::StrCat(
        "blob of ", blob_.size(), " bytes, shorter than the header"));
  }
  if (static_cast<uint8_t>(blob_[0]) != kLogFormat) {
    return absl::DataLossError(
        absl::StrCat("unknown format ",
                     static_cast<int>(static_cast<uint8_t>(blob_[0]))));
  }
  uint32_t count = 0;
  for (int i = 0; i < 4; ++i) {
    count |= uint32_t{static_cast<uint8_t>(blob_[1 + i])} << (8 * i);
  }
  if (count == 0) return absl::DataLossError("no entries");
  pos_ = kLogHeaderBytes;
  LogEntry e;
  uint64_t ms = 0;
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t key = 0, delta = 0, length = 0;
    if (!Varint(key) || !Varint(delta) || !Varint(length)) {
      return absl::DataLossError(absl::StrCat("entry ", i, " of ", count,
                                              ": bad varint at byte ", pos_,
                                              " of ", blob_.size()));
    }
    if ((key >> 1) > std::numeric_limits<uint32_t>::max()) {
      return absl::DataLossError(
          absl::StrCat("entry ", i, ": node ", key >> 1, " out of range"));
    }
    if (length > blob_.size() - pos_) {
      return absl::DataLossError(absl::StrCat(
          "entry ", i, " of ", count, ": payload of ", length,
          " bytes at byte ", pos_, " runs past the end (", blob_.size(),
          " bytes)"));
    }
    ms += UnZigZag(delta);
    e.node = static_cast<uint32_t>(key >> 1);
    e.refusal = (key & 1) != 0;
    e.unix_ms = static_cast<int64_t>(ms);
    e.offset = static_cast<uint32_t>(pos_);
    e.length = static_cast<uint32_t>(length);
    pos_ += length;
    fn(e);
  }
  if (pos_ != blob_.size()) {
    return absl::DataLossError(absl::StrCat(
        blob_.size() - pos_, " bytes after the last of ", count, " entries"));
  }
  return absl::OkStatus();
}

bool LogReader::Varint(uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (pos_ >= blob_.size()) return false;
    const auto byte = static_cast<uint8_t>(blob_[pos_++]);
    if (shift == 63 && byte > 1) return false;
    v |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

}  // namespace ldpgraph::store
