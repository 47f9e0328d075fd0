// The format of the curator store's answer log (the answers blob of a row
// of table answer_log): the encoder AppendAnswers writes with and the
// reader that decodes a blob, checking every length. See
// server/store/store.h for how the log is kept; nothing here knows SQLite.
//
// A blob (format 1):
//   byte 0       the format, 1
//   bytes 1..4   the number of entries, little-endian uint32, >= 1
//   entries, each
//     varint     node << 1 | refusal
//     varint     unix_ms minus the previous entry's (0 for the first),
//                zigzag-encoded, modulo 2^64
//     varint     payload length
//     bytes      the payload
// and nothing after the last entry. Varints are LEB128 (7 bits a byte, low
// first, at most 10 bytes). Stores written by earlier builds hold exactly
// these bytes: the format must not change without a new format byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ldpgraph::store {

inline constexpr uint8_t kLogFormat = 1;
inline constexpr size_t kLogHeaderBytes = 5;
// A batch's answers to one campaign are split over rows of about this size
// at most (an answer larger than it gets a row of its own), so that no blob
// nears SQLite's limit on a value (1e9 bytes) and offsets fit in 32 bits.
inline constexpr size_t kMaxLogBlobBytes = size_t{64} << 20;
// The longest an entry's varints can be.
inline constexpr size_t kMaxEntryOverhead = 3 * 10;

// Starts a blob in `blob` (cleared first): the format and a count to be set
// by FinishLogBlob once the entries are appended.
void StartLogBlob(std::string& blob);
// Sets the count of a blob StartLogBlob started.
void FinishLogBlob(std::string& blob, uint32_t count);
// Appends one entry, stamped unix_ms (previous_ms: the previous entry's
// stamp, 0 for the first); returns the offset of its payload in the blob.
size_t EncodeEntry(std::string& blob, uint32_t node, bool refusal,
                   absl::string_view payload, int64_t unix_ms,
                   int64_t previous_ms);

// One decoded entry: the payload is bytes [offset, offset + length) of the
// blob.
struct LogEntry {
  uint32_t node = 0;
  bool refusal = false;
  int64_t unix_ms = 0;
  uint32_t offset = 0;
  uint32_t length = 0;
};

// Decodes one blob; never reads outside it.
class LogReader {
 public:
  explicit LogReader(absl::string_view blob) : blob_(blob) {}

  // Calls fn for every entry, in order. DATA_LOSS describing the first
  // fault if the blob does not parse: shorter than the header or over
  // 2^32 - 1 bytes, another format byte, a count of 0, a truncated or
  // overlong varint (over 10 bytes, or past 64 bits), a node past 32 bits,
  // a payload running past the end, or bytes after the last entry. fn may
  // have seen the entries before the fault.
  absl::Status Read(absl::FunctionRef<void(const LogEntry&)> fn);

 private:
  bool Varint(uint64_t& v);

  absl::string_view blob_;
  size_t pos_ = 0;
};

}  // namespace ldpgraph::store
