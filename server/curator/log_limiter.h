// A bound on how often one kind of log line is written: whatever a caller
// can trigger at will (a malformed request, say) must not let it fill the
// curator's log.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ldpgraph::curator {

// Lets one line through per interval and counts the others. The count of
// the lines held back since the last one let through rides on the next one
// (the last window's count is written only if another line comes: exact
// counts belong in metrics). Thread-safe.
class LogLimiter {
 public:
  explicit LogLimiter(absl::Duration interval) : interval_(interval) {}

  // At `now`: the number of lines held back since the last one let through
  // if this one may be written, nullopt if it is held back (and counted).
  std::optional<uint64_t> Admit(absl::Time now) {
    absl::MutexLock lock(&mu_);
    if (last_.has_value() && now - *last_ < interval_) {
      ++held_;
      return std::nullopt;
    }
    last_ = now;
    const uint64_t held = held_;
    held_ = 0;
    return held;
  }

 private:
  const absl::Duration interval_;
  absl::Mutex mu_;
  std::optional<absl::Time> last_ ABSL_GUARDED_BY(mu_);
  uint64_t held_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ldpgraph::curator
