#include "client/shard_loop.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const absl::Time kStart = absl::FromUnixSeconds(1000);

// Time moves only when the loop sleeps.
class FakeClock : public LoopClock {
 public:
  absl::Time Now() override { return now_; }
  void SleepFor(absl::Duration d) override {
    ASSERT_GT(d, absl::ZeroDuration());
    now_ += d;
  }
  absl::Duration Elapsed() const { return now_ - kStart; }

 private:
  absl::Time now_ = kStart;
};

ShardClaim Shard(uint32_t i, absl::Duration renew_every = absl::Seconds(1)) {
  return ShardClaim{i, 4, i * 100, (i + 1) * 100, renew_every};
}

ClaimReply Assigned(const ShardClaim& claim) {
  ClaimReply r;
  r.state = ClaimReply::State::kAssigned;
  r.claim = claim;
  return r;
}

ClaimReply Waiting(ClaimReply::State state, absl::Duration retry_after) {
  ClaimReply r;
  r.state = state;
  r.retry_after = retry_after;
  return r;
}

// Answers claims from a script (then: no shard left), renewals through a
// function, and records every call with the time it came.
class FakeLeases : public ShardLeases {
 public:
  explicit FakeLeases(FakeClock& clock) : clock_(clock) {}

  absl::StatusOr<ClaimReply> Claim() override {
    claim_times.push_back(clock_.Elapsed());
    if (claims.empty()) return Waiting(ClaimReply::State::kNoneLeft, {});
    absl::StatusOr<ClaimReply> r = std::move(claims.front());
    claims.pop_front();
    return r;
  }
  absl::Status Renew(const ShardClaim& held) override {
    renewals.emplace_back(held.shard, clock_.Elapsed());
    return renew ? renew(held, renewals.size()) : absl::OkStatus();
  }
  void Release(const ShardClaim& held) override {
    released.push_back(held.shard);
  }

  std::deque<absl::StatusOr<ClaimReply>> claims;
  // (shard, 1-based renewal number) -> result.
  std::function<absl::Status(const ShardClaim&, size_t)> renew;
  std::vector<absl::Duration> claim_times;
  std::vector<std::pair<uint32_t, absl::Duration>> renewals;
  std::vector<uint32_t> released;

 private:
  FakeClock& clock_;
};

// Shards whose agents stop by themselves `runs_for` after starting (never
// if infinite), recording starts and stops.
class FakeRunner : public ShardRunner {
 public:
  explicit FakeRunner(FakeClock& clock) : clock_(clock) {}

  class Running : public RunningShard {
   public:
    Running(FakeRunner& runner, uint32_t shard, absl::Time done_at)
        : runner_(runner), shard_(shard), done_at_(done_at) {}
    bool Done() override { return runner_.clock_.Now() >= done_at_; }
    absl::Status Stop() override {
      runner_.stopped.emplace_back(shard_, !Done());
      return runner_.result;
    }

   private:
    FakeRunner& runner_;
    const uint32_t shard_;
    const absl::Time done_at_;
  };

  absl::StatusOr<std::unique_ptr<RunningShard>> Start(
      const ShardClaim& claim) override {
    started.push_back(claim.shard);
    return std::make_unique<Running>(*this, claim.shard,
                                     clock_.Now() + runs_for);
  }

  absl::Duration runs_for = absl::InfiniteDuration();
  absl::Status result;
  std::vector<uint32_t> started;
  // (shard, whether it was still running when stopped).
  std::vector<std::pair<uint32_t, bool>> stopped;

 private:
  FakeClock& clock_;
};

class ShardLoopTest : public ::testing::Test {
 protected:
  ShardLoopTest() : leases_(clock_), runner_(clock_) {
    options_.note = [this](const std::string& n) { notes_.push_back(n); };
  }
  FakeClock clock_;
  FakeLeases leases_;
  FakeRunner runner_;
  ShardLoopOptions options_;
  std::vector<std::string> notes_;
};

TEST_F(ShardLoopTest, ClaimsAndRunsShardsUntilNoneAreLeft) {
  leases_.claims = {Waiting(ClaimReply::State::kWaiting, absl::Seconds(2)),
                    Assigned(Shard(0)), Assigned(Shard(1))};
  runner_.runs_for = absl::Milliseconds(2500);
  ShardLoop loop(leases_, runner_, clock_, options_);
  EXPECT_TRUE(loop.Run().ok());
  EXPECT_THAT(runner_.started, ElementsAre(0, 1));
  EXPECT_THAT(leases_.released, ElementsAre(0, 1));
  // Each ran to its end (not stopped while running).
  EXPECT_THAT(runner_.stopped,
              ElementsAre(std::pair<uint32_t, bool>(0, false),
                          std::pair<uint32_t, bool>(1, false)));
  EXPECT_EQ(loop.claims(), 2u);
  EXPECT_EQ(leases_.claim_times.size(), 4u);
  // The wait asked for by the curator, then at once.
  EXPECT_EQ(leases_.claim_times[1], absl::Seconds(2));
  EXPECT_THAT(notes_, ElementsAre("waiting for the fleet to settle",
                                  "holding shard 0 of 4",
                                  "holding shard 1 of 4"));
}

TEST_F(ShardLoopTest, RenewsEveryRenewalPeriodWhileTheShardRuns) {
  leases_.claims = {Assigned(Shard(2, absl::Milliseconds(700)))};
  runner_.runs_for = absl::Milliseconds(2500);
  ShardLoop loop(leases_, runner_, clock_, options_);
  EXPECT_TRUE(loop.Run().ok());
  // Renewals at 0.7, 1.4, 2.1 s: each before a lease of three periods
  // could lapse.
  ASSERT_EQ(leases_.renewals.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(leases_.renewals[i].first, 2u);
    EXPECT_EQ(leases_.renewals[i].second, absl::Milliseconds(700) * (i + 1));
  }
}

TEST_F(ShardLoopTest, StopsTheRunningShardOnAStopRequest) {
  leases_.claims = {Assigned(Shard(1)), Assigned(Shard(2))};
  ShardLoop loop(leases_, runner_, clock_, options_);
  leases_.renew = [&](const ShardClaim&, size_t n) {
    if (n == 2) loop.Stop();
    return absl::OkStatus();
  };
  EXPECT_TRUE(loop.Run().ok());
  EXPECT_THAT(runner_.started, ElementsAre(1));
  EXPECT_THAT(runner_.stopped, ElementsAre(std::pair<uint32_t, bool>(1, true)));
  EXPECT_THAT(leases_.released, ElementsAre(1));
  EXPECT_EQ(leases_.claim_times.size(), 1u);  // shard 2 is never claimed
  // Within a tick of the request.
  EXPECT_LE(clock_.Elapsed(), absl::Seconds(2) + options_.tick);
}

TEST_F(ShardLoopTest, AStopBeforeRunReturnsAtOnce) {
  leases_.claims = {Assigned(Shard(0))};
  ShardLoop loop(leases_, runner_, clock_, options_);
  loop.Stop();
  EXPECT_TRUE(loop.Run().ok());
  EXPECT_TRUE(leases_.claim_times.empty());
  EXPECT_TRUE(runner_.started.empty());
}

TEST_F(ShardLoopTest, ALostLeaseStopsTheShardAndClaimsAgain) {
  leases_.claims = {Assigned(Shard(0)),
                    Waiting(ClaimReply::State::kSpare, absl::Seconds(3)),
                    Assigned(Shard(3))};
  leases_.renew = [](const ShardClaim& held, size_t) {
    return held.shard == 0
               ? absl::FailedPreconditionError("shard 0 was given away")
               : absl::OkStatus();
  };
  runner_.runs_for = absl::Milliseconds(1500);
  ShardLoop loop(leases_, runner_, clock_, options_);
  EXPECT_TRUE(loop.Run().ok());
  EXPECT_THAT(runner_.started, ElementsAre(0, 3));
  // Shard 0 was still running when its lease was lost: stopped.
  EXPECT_THAT(runner_.stopped,
              ElementsAre(std::pair<uint32_t, bool>(0, true),
                          std::pair<uint32_t, bool>(3, false)));
  EXPECT_THAT(leases_.released, ElementsAre(0, 3));
  EXPECT_EQ(loop.claims(), 2u);
  EXPECT_EQ(loop.lost_leases(), 1u);
  EXPECT_THAT(notes_, ::testing::Contains(HasSubstr("shard 0 was given away")));
  EXPECT_THAT(notes_, ::testing::Contains(HasSubstr("spare")));
}

TEST_F(ShardLoopTest, BacksOffAndRetriesWhileTheCuratorIsUnavailable) {
  leases_.claims = {absl::UnavailableError("connection refused"),
                    absl::UnavailableError("connection refused"),
                    Assigned(Shard(1))};
  // Renewals fail while the curator is down; the shard is kept.
  leases_.renew = [](const ShardClaim&, size_t n) {
    return n <= 2 ? absl::UnavailableError("connection refused")
                  : absl::OkStatus();
  };
  runner_.runs_for = absl::Milliseconds(3500);
  ShardLoop loop(leases_, runner_, clock_, options_);
  EXPECT_TRUE(loop.Run().ok());
  ASSERT_GE(leases_.claim_times.size(), 3u);
  EXPECT_EQ(leases_.claim_times[1] - leases_.claim_times[0],
            options_.claim_retry);
  EXPECT_EQ(leases_.claim_times[2] - leases_.claim_times[1],
            options_.claim_retry);
  EXPECT_THAT(runner_.started, ElementsAre(1));
  EXPECT_THAT(runner_.stopped,
              ElementsAre(std::pair<uint32_t, bool>(1, false)));
  EXPECT_EQ(leases_.renewals.size(), 3u);
  EXPECT_EQ(loop.lost_leases(), 0u);
  // One note per streak, not one per attempt.
  EXPECT_EQ(std::count_if(notes_.begin(), notes_.end(),
                          [](const std::string& n) {
                            return n.find("not reachable") != std::string::npos;
                          }),
            1);
  EXPECT_EQ(std::count_if(notes_.begin(), notes_.end(),
                          [](const std::string& n) {
                            return n.find("cannot renew") != std::string::npos;
                          }),
            1);
}

TEST_F(ShardLoopTest, APermanentClaimErrorEndsTheLoop) {
  leases_.claims = {absl::UnauthenticatedError("does not verify")};
  ShardLoop loop(leases_, runner_, clock_, options_);
  absl::Status s = loop.Run();
  EXPECT_TRUE(absl::IsUnauthenticated(s)) << s;
  EXPECT_TRUE(runner_.started.empty());
}

TEST_F(ShardLoopTest, AMalformedAssignmentEndsTheLoop) {
  leases_.claims = {Assigned(ShardClaim{4, 4, 0, 100, absl::Seconds(1)})};
  ShardLoop loop(leases_, runner_, clock_, options_);
  absl::Status s = loop.Run();
  EXPECT_TRUE(absl::IsInternal(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("malformed"));
  EXPECT_TRUE(runner_.started.empty());
}

TEST_F(ShardLoopTest, AShardsErrorEndsTheLoop) {
  leases_.claims = {Assigned(Shard(0)), Assigned(Shard(1))};
  runner_.runs_for = absl::Milliseconds(200);
  runner_.result = absl::InvalidArgumentError("enrolment rejected");
  ShardLoop loop(leases_, runner_, clock_, options_);
  absl::Status s = loop.Run();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(runner_.started, ElementsAre(0));
  EXPECT_THAT(leases_.released, ElementsAre(0));
}

}  // namespace
}  // namespace ldpgraph::agent
