// The framing of the exchange's split boxes (client/edge_exchange_internal.h):
// each part's header, and the reassembly of the parts received under a bound
// on the bytes held.
#include "client/edge_exchange_internal.h"

#include <string>
#include <utility>

namespace ldpgraph::agent::exchange_internal {

bool ParseFragment(absl::string_view c, Fragment* f) {
  if (c.size() < kFragmentHeader ||
      static_cast<uint8_t>(c[0]) != kFragmentTag) {
    return false;
  }
  const auto* p = reinterpret_cast<const uint8_t*>(c.data());
  f->id = 0;
  for (int i = 0; i < 8; ++i) f->id = (f->id << 8) | p[1 + i];
  f->index = static_cast<uint16_t>((p[9] << 8) | p[10]);
  f->count = static_cast<uint16_t>((p[11] << 8) | p[12]);
  f->bytes = c.substr(kFragmentHeader);
  return f->count >= 1 && f->count <= kMaxParts && f->index < f->count;
}

std::string FragmentHeader(uint64_t id, size_t index, size_t count) {
  std::string h(kFragmentHeader, '\0');
  h[0] = static_cast<char>(kFragmentTag);
  for (int i = 0; i < 8; ++i) h[1 + i] = static_cast<char>(id >> (56 - 8 * i));
  h[9] = static_cast<char>(index >> 8);
  h[10] = static_cast<char>(index & 0xff);
  h[11] = static_cast<char>(count >> 8);
  h[12] = static_cast<char>(count & 0xff);
  return h;
}

BoxReassembly::Outcome BoxReassembly::Add(uint32_t from,
                                          absl::string_view ciphertext,
                                          std::string* box, int* evicted) {
  Fragment f;
  if (!ParseFragment(ciphertext, &f)) return Outcome::kMalformed;
  const auto key = std::make_pair(from, f.id);
  Partial& p = partial_[key];
  if (p.parts.empty()) {
    p.parts.resize(f.count);
    p.order = ++order_;
  }
  if (p.parts.size() != f.count) return Outcome::kOtherSize;
  if (p.parts[f.index].empty() && !f.bytes.empty()) {
    p.parts[f.index] = std::string(f.bytes);
    ++p.have;
    p.bytes += f.bytes.size();
    bytes_ += f.bytes.size();
  }
  // Bounded memory: drop the oldest incomplete boxes.
  *evicted = 0;
  while (bytes_ > max_bytes_ && !partial_.empty()) {
    auto oldest = partial_.begin();
    for (auto i = partial_.begin(); i != partial_.end(); ++i) {
      if (i->second.order < oldest->second.order) oldest = i;
    }
    bytes_ -= oldest->second.bytes;
    partial_.erase(oldest);
    ++*evicted;
  }
  auto held = partial_.find(key);
  if (held == partial_.end() || held->second.have < held->second.parts.size()) {
    return Outcome::kHeld;
  }
  for (const std::string& part : held->second.parts) *box += part;
  bytes_ -= held->second.bytes;
  partial_.erase(held);
  return Outcome::kComplete;
}

}  // namespace ldpgraph::agent::exchange_internal
