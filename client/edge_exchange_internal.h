// Internal to client/edge_exchange.cc and edge_exchange_framing.cc: the
// framing of sealed boxes longer than the relay's bound (edge_exchange.h,
// "Framing"): the header of each part of a split box, and the reassembly of
// the parts received.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace ldpgraph::agent::exchange_internal {

inline constexpr uint8_t kFragmentTag = 0xF1;
inline constexpr size_t kFragmentHeader = 1 + 8 + 2 + 2;
inline constexpr size_t kMaxParts = 256;

// The message id and position of a part of a split box.
struct Fragment {
  uint64_t id = 0;
  uint16_t index = 0, count = 0;
  absl::string_view bytes;
};

// Whether a ciphertext is a part of a split box (a whole box starts with
// sealed.h's version byte instead).
inline bool IsFragment(absl::string_view ciphertext) {
  return !ciphertext.empty() &&
         static_cast<uint8_t>(ciphertext[0]) == kFragmentTag;
}

// Parses a part into *f (its bytes a view of c); false if it is malformed
// (too short, not tagged, a count of 0 or over kMaxParts, an index not
// below the count).
bool ParseFragment(absl::string_view c, Fragment* f);

// The header of part `index` of `count` of message `id`.
std::string FragmentHeader(uint64_t id, size_t index, size_t count);

// The parts of split boxes received and not yet complete, by (sender,
// message id), holding at most max_bytes of them: beyond it the oldest
// incomplete boxes are dropped. Not thread-safe.
class BoxReassembly {
 public:
  enum class Outcome {
    kMalformed,  // the part does not parse (ParseFragment)
    kOtherSize,  // its count differs from the earlier parts' of its box
    kHeld,       // held until its box is complete
    kComplete,   // its box is complete: in *box, no longer held
  };

  explicit BoxReassembly(size_t max_bytes) : max_bytes_(max_bytes) {}

  // Adds a part (IsFragment(ciphertext)) sent by `from`. A part already
  // held, or with no bytes, changes nothing. On kHeld and kComplete,
  // *evicted is the number of incomplete boxes dropped (oldest first,
  // possibly the part's own) to bring the bytes held back to max_bytes.
  Outcome Add(uint32_t from, absl::string_view ciphertext, std::string* box,
              int* evicted);

 private:
  struct Partial {
    std::vector<std::string> parts;
    size_t have = 0, bytes = 0;
    uint64_t order = 0;
  };

  const size_t max_bytes_;
  absl::flat_hash_map<std::pair<uint32_t, uint64_t>, Partial> partial_;
  size_t bytes_ = 0;
  uint64_t order_ = 0;
};

}  // namespace ldpgraph::agent::exchange_internal
