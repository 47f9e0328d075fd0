#include "client/shard_loop.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ldpgraph::agent {
namespace {

class RealClock : public LoopClock {
 public:
  absl::Time Now() override { return absl::Now(); }
  void SleepFor(absl::Duration d) override { absl::SleepFor(d); }
};

bool Permanent(absl::StatusCode code) {
  return code == absl::StatusCode::kUnauthenticated ||
         code == absl::StatusCode::kInvalidArgument ||
         code == absl::StatusCode::kPermissionDenied ||
         code == absl::StatusCode::kUnimplemented;
}

}  // namespace

LoopClock& RealLoopClock() {
  static RealClock* clock = new RealClock();
  return *clock;
}

ShardLoop::ShardLoop(ShardLeases& leases, ShardRunner& runner,
                     LoopClock& clock, ShardLoopOptions options)
    : leases_(leases),
      runner_(runner),
      clock_(clock),
      options_(std::move(options)) {}

void ShardLoop::Stop() { stop_.store(true); }

void ShardLoop::Note(const std::string& text) {
  if (options_.note) options_.note(text);
}

bool ShardLoop::Wait(absl::Duration d) {
  for (const absl::Time until = clock_.Now() + d;
       clock_.Now() < until && !stop_.load();) {
    clock_.SleepFor(std::min(options_.tick, until - clock_.Now()));
  }
  return !stop_.load();
}

absl::StatusOr<ShardClaim> ShardLoop::ClaimNext() {
  std::string last_note;
  auto say = [&](std::string text) {
    if (text != last_note) Note(text);
    last_note = std::move(text);
  };
  while (!stop_.load()) {
    absl::Duration wait = options_.claim_retry;
    absl::StatusOr<ClaimReply> r = leases_.Claim();
    if (!r.ok()) {
      if (Permanent(r.status().code())) return r.status();
      say(absl::StrCat("curator not reachable yet (", r.status().message(),
                       ")"));
    } else if (r->state == ClaimReply::State::kAssigned) {
      const ShardClaim& c = r->claim;
      if (c.shards == 0 || c.shard >= c.shards || c.begin > c.end) {
        return absl::InternalError(absl::StrCat(
            "the curator assigned a malformed shard: shard ", c.shard, " of ",
            c.shards, ", nodes [", c.begin, ", ", c.end, ")"));
      }
      return c;
    } else if (r->state == ClaimReply::State::kNoneLeft) {
      return absl::NotFoundError("no shard is left for this host");
    } else {
      wait = std::clamp(r->retry_after, options_.min_retry, options_.max_retry);
      say(r->state == ClaimReply::State::kSpare
              ? "spare: every shard has a live host; waiting for a lease to "
                "lapse"
              : "waiting for the fleet to settle");
    }
    Wait(wait);
  }
  return absl::CancelledError("stopped while claiming a shard");
}

absl::Status ShardLoop::RunShard(const ShardClaim& claim, bool& lost) {
  lost = false;
  absl::StatusOr<std::unique_ptr<RunningShard>> running = runner_.Start(claim);
  if (!running.ok()) return running.status();
  bool warned = false;
  absl::Time next_renewal = clock_.Now() + claim.renew_every;
  while (!(*running)->Done() && !stop_.load()) {
    if (clock_.Now() < next_renewal) {
      clock_.SleepFor(std::min(options_.tick, next_renewal - clock_.Now()));
      continue;
    }
    const absl::Status s = leases_.Renew(claim);
    next_renewal = clock_.Now() + claim.renew_every;
    if (absl::IsFailedPrecondition(s)) {
      Note(absl::StrCat(s.message(), "; stopping the shard's agents"));
      lost = true;
      break;
    }
    if (!s.ok() && !warned) {
      Note(absl::StrCat("cannot renew the shard lease yet: ", s.message()));
    }
    warned = !s.ok();
  }
  return (*running)->Stop();
}

absl::Status ShardLoop::Run() {
  while (!stop_.load()) {
    absl::StatusOr<ShardClaim> claim = ClaimNext();
    if (absl::IsNotFound(claim.status()) || absl::IsCancelled(claim.status())) {
      return absl::OkStatus();
    }
    if (!claim.ok()) return claim.status();
    claims_.fetch_add(1);
    Note(absl::StrCat("holding shard ", claim->shard, " of ", claim->shards));
    bool lost = false;
    const absl::Status result = RunShard(*claim, lost);
    leases_.Release(*claim);
    if (lost) {
      lost_.fetch_add(1);
      continue;
    }
    if (!result.ok()) return result;
  }
  return absl::OkStatus();
}

}  // namespace ldpgraph::agent
