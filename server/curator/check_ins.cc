#include "server/curator/check_ins.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace ldpgraph::curator {

absl::Status CheckInDesk::Options::Validate() const {
  if (!(max_per_second >= 0) || !std::isfinite(max_per_second)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "check-in rate must be >= 0 per second (0: no limit), got ",
        max_per_second));
  }
  if (interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("check-in interval must be > 0");
  }
  if (!(jitter >= 0 && jitter < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("check-in jitter must be in [0, 1), got ", jitter));
  }
  if (session_ttl <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("check-in session TTL must be > 0");
  }
  return absl::OkStatus();
}

CheckInDesk::CheckInDesk(Options options)
    : options_(std::move(options)),
      seen_(options_.num_nodes, false),
      tokens_(std::max(1.0, options_.max_per_second)) {}

bool CheckInDesk::Admit(const std::vector<uint32_t>& nodes, absl::Time now,
                        absl::Duration* retry_after) {
  absl::MutexLock lock(&mu_);
  ++counters_.check_ins;
  for (uint32_t v : nodes) {
    if (v < seen_.size() && !seen_[v]) {
      seen_[v] = true;
      ++counters_.devices_seen;
    }
  }
  const double rate = options_.max_per_second;
  if (rate == 0) return true;
  const double burst = std::max(1.0, rate);  // one second's worth
  if (refilled_ == absl::InfinitePast()) refilled_ = now;
  if (now > refilled_) {
    tokens_ = std::min(burst,
                       tokens_ + absl::ToDoubleSeconds(now - refilled_) * rate);
    refilled_ = now;
  }
  if (tokens_ >= 1) {
    tokens_ -= 1;
    return true;
  }
  // The next free slot of a queue that drains at the admitted rate.
  next_slot_ = std::max(next_slot_, now) + absl::Seconds(1.0 / rate);
  *retry_after = next_slot_ - now;
  ++counters_.paced;
  return false;
}

absl::Duration CheckInDesk::Finish(Outcome outcome) {
  absl::MutexLock lock(&mu_);
  if (outcome == Outcome::kServed) ++counters_.served;
  if (outcome == Outcome::kIdle) ++counters_.idle;
  return Jittered(options_.interval);
}

absl::Duration CheckInDesk::Jittered(absl::Duration d) {
  if (options_.jitter == 0) return d;
  const double f = absl::Uniform(gen_, 1.0 - options_.jitter,
                                 1.0 + options_.jitter);
  return d * f;
}

CheckInDesk::Counters CheckInDesk::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

}  // namespace ldpgraph::curator
