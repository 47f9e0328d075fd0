// The check-in desk: how the curator paces devices in check-in mode
// (agent.proto CheckIn), and what it counts of them. One job: decide, for
// each check-in, whether it is served now or paced, and when the device
// comes back; nothing here touches the store or the sessions.
//
// Cross-device fleets are not served by concurrent connections but by
// check-ins per second: a device that is idle, charging and on an unmetered
// network checks in, answers, and leaves (Bonawitz et al., "Towards
// Federated Learning at Scale", SysML 2019). The curator admits at most
// max_per_second check-ins (a token bucket of one second's burst). A
// check-in beyond that is PACED: it is given the next free slot of a
// virtual queue that drains at the same rate, so the paced devices come
// back spread out at exactly the rate the curator serves ("pace
// steering"), not all at once. An admitted check-in is SERVED when tasks
// wait for its nodes, IDLE otherwise; either way the device is told to come
// back after the check-in interval, jittered by +-jitter so that devices
// told at once do not return at once.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ldpgraph::curator {

class CheckInDesk {
 public:
  struct Options {
    // Node ids are [0, num_nodes): devices are counted by node.
    uint32_t num_nodes = 0;
    // Check-ins admitted per second; 0: no limit (none is paced).
    double max_per_second = 0;
    // When an admitted device comes back, before jitter.
    absl::Duration interval = absl::Seconds(60);
    // Each interval is drawn uniformly from interval x [1 - jitter,
    // 1 + jitter]; in [0, 1).
    double jitter = 0.2;
    // How long a served check-in's session accepts Submit.
    absl::Duration session_ttl = absl::Seconds(60);

    // INVALID_ARGUMENT naming the option that is out of range.
    absl::Status Validate() const;
  };

  enum class Outcome { kServed, kIdle, kPaced };

  struct Counters {
    uint64_t check_ins = 0;  // every Admit
    uint64_t served = 0, idle = 0, paced = 0;
    uint32_t devices_seen = 0;  // distinct nodes seen in a check-in
  };

  // options must Validate.
  explicit CheckInDesk(Options options);

  const Options& options() const { return options_; }

  // One check-in of `nodes` (in range) at `now`: counts them as seen, and
  // decides whether it is admitted (true) or paced (false; *retry_after is
  // when to come back: the device's slot in the pacing queue).
  bool Admit(const std::vector<uint32_t>& nodes, absl::Time now,
             absl::Duration* retry_after);
  // Counts an admitted check-in's outcome (kServed or kIdle) and returns
  // its jittered interval until the next check-in.
  absl::Duration Finish(Outcome outcome);

  Counters counters() const;

 private:
  absl::Duration Jittered(absl::Duration d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable absl::Mutex mu_;
  Counters counters_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> seen_ ABSL_GUARDED_BY(mu_);
  // The token bucket (tokens, as of `refilled_`) and the pacing queue's
  // next free slot.
  double tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time refilled_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time next_slot_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Scheduling jitter, not privacy noise.
  absl::BitGen gen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ldpgraph::curator
