#include "server/pipeline/report_screen.h"

#include <cmath>
#include <memory>

#include "common/mechanisms/feature_mechanism.h"
#include "common/mechanisms/hds.h"
#include "common/random/random.h"
#include "common/random/seed_mix.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::pipeline {
namespace {

constexpr int kNodes = 5000;
constexpr int kDims = 500;
constexpr int kTargets = 10;  // R

std::unique_ptr<FeatureMechanism> Mechanism(MechanismKind kind, int k,
                                            double alpha = -1, double beta = 1) {
  MechanismSpec spec;
  spec.kind = kind;
  spec.epsilon = 2.0;
  spec.dimension = kind == MechanismKind::kSquareWave ? 1 : kDims;
  if (kind != MechanismKind::kSquareWave && kind != MechanismKind::kOneBit) {
    spec.sampled = k;
  }
  spec.alpha = alpha;
  spec.beta = beta;
  return *CreateFeatureMechanism(spec);
}

// Honest reports of nodes [first, first + count): each node perturbs its own
// feature vector (a few ones, class-like) with the real mechanism.
void AddHonest(const FeatureMechanism& mech, uint32_t first, int count,
               uint64_t seed, ReportedDims* out) {
  SeededRandomForTesting rng(seed);
  std::vector<double> x(mech.dimension(), mech.spec().alpha);
  for (int i = 0; i < count; ++i) {
    const uint32_t v = first + i;
    std::fill(x.begin(), x.end(), mech.spec().alpha);
    for (int j = 0; j < 8; ++j) x[(v * 7 + j * 31) % x.size()] = mech.spec().beta;
    auto report = mech.Perturb(x, rng);
    ASSERT_TRUE(report.ok()) << report.status();
    out->Add(v, report->indices);
  }
}

// The maximal-gain attack's report from node v: k of the R target dims
// (dims 100..100+R-1), every one at the mechanism's maximal value, rotating
// over the targets so that each target gets the same share. Checked to be
// a valid report of mech: the curator cannot tell it from its form.
SparseReport Crafted(const FeatureMechanism& mech, uint32_t v) {
  SparseReport r;
  r.dimension = mech.dimension();
  const int k = mech.sampled();
  for (int j = 0; j < k; ++j) {
    r.indices.push_back(100 + (v * k + j) % kTargets);
  }
  std::sort(r.indices.begin(), r.indices.end());
  if (mech.kind() == MechanismKind::kMultiBit) {
    r.bits.assign(k, true);
  } else {
    const auto& hds = static_cast<const HdsMechanism&>(mech);
    r.values.assign(k, 1.0 + hds.square_wave().b());
  }
  return r;
}

TEST(BinomialUpperQuantileTest, MatchesTheTailSummedOverEveryTerm) {
  for (auto [n, p, level] : {std::tuple{200, 0.05, 1e-4},
                             std::tuple{5000, 0.002, 2e-6},
                             std::tuple{30, 0.5, 1e-3},
                             std::tuple{3, 0.01, 0.1}}) {
    std::vector<double> pmf(n + 1);
    for (int i = 0; i <= n; ++i) {
      pmf[i] = std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) -
                        std::lgamma(n - i + 1.0) + i * std::log(p) +
                        (n - i) * std::log1p(-p));
    }
    auto above = [&](int t) {  // P(X > t)
      double s = 0;
      for (int i = t + 1; i <= n; ++i) s += pmf[i];
      return s;
    };
    const uint64_t t = BinomialUpperQuantile(n, p, level);
    EXPECT_LE(above(static_cast<int>(t)), level) << n << " " << p;
    if (t > 0) {
      EXPECT_GT(above(static_cast<int>(t) - 1), level) << n << " " << p;
    }
  }
  EXPECT_EQ(BinomialUpperQuantile(0, 0.3, 0.01), 0u);
  EXPECT_EQ(BinomialUpperQuantile(10, 1.0, 0.01), 10u);
}

TEST(HypergeometricTailTest, MatchesEnumerationOfEveryDraw) {
  // d = 10, m = 3 marked (0, 1, 2), k = 4 drawn: count the subsets.
  const int d = 10, m = 3, k = 4;
  std::vector<int> at_least(k + 2, 0);
  int total = 0;
  for (int mask = 0; mask < (1 << d); ++mask) {
    if (__builtin_popcount(mask) != k) continue;
    ++total;
    const int hits = __builtin_popcount(mask & 7);
    for (int h = 0; h <= hits; ++h) ++at_least[h];
  }
  for (int h = 0; h <= k + 1; ++h) {
    EXPECT_NEAR(HypergeometricTailAtLeast(d, m, k, h),
                double(at_least[h]) / total, 1e-12)
        << h;
  }
}

// Honest reports only: at alpha = 1e-3 the screen should flag nobody with
// probability >= 0.999, so at most one of 20 seeds may flag anything.
void ExpectFewFalseAlarms(MechanismKind kind, int k) {
  const auto mech = Mechanism(kind, k, kind == MechanismKind::kMultiBit ? 0 : -1);
  int seeds_with_flags = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    ReportedDims reports;
    AddHonest(*mech, 0, kNodes, SeedMix(seed), &reports);
    auto s = ScreenReports(reports, *mech, 1e-3);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE(s->applicable);
    seeds_with_flags += !s->flagged.empty() || !s->overreported.empty();
  }
  EXPECT_LE(seeds_with_flags, 1);
}

TEST(ReportScreenTest, HonestHdsReportsAreNotFlagged) {
  ExpectFewFalseAlarms(MechanismKind::kHds, 1);
  ExpectFewFalseAlarms(MechanismKind::kHds, 4);
}

TEST(ReportScreenTest, HonestMultiBitReportsAreNotFlagged) {
  ExpectFewFalseAlarms(MechanismKind::kMultiBit, 4);
}

// 5% of the nodes send the maximal-gain attack's reports on R = 10 targets.
void ExpectAttackCaught(MechanismKind kind, int k, size_t max_honest_flagged) {
  const auto mech = Mechanism(kind, k, kind == MechanismKind::kMultiBit ? 0 : -1);
  const int attackers = kNodes / 20;
  ReportedDims reports;
  AddHonest(*mech, attackers, kNodes - attackers, SeedMix(99), &reports);
  for (uint32_t v = 0; v < static_cast<uint32_t>(attackers); ++v) {
    const SparseReport r = Crafted(*mech, v);
    ASSERT_TRUE(mech->ValidateReport(r).ok()) << mech->ValidateReport(r);
    reports.Add(v, r.indices);
  }
  auto s = ScreenReports(reports, *mech, 1e-3);
  ASSERT_TRUE(s.ok()) << s.status();
  size_t caught = 0, honest = 0;
  for (uint32_t v : s->flagged) (v < static_cast<uint32_t>(attackers) ? caught : honest)++;
  EXPECT_GE(caught, 0.95 * attackers) << "k " << k;
  EXPECT_LE(honest, max_honest_flagged) << "k " << k;
  EXPECT_EQ(s->overreported.size(), static_cast<size_t>(kTargets));
  EXPECT_TRUE(std::is_sorted(s->flagged.begin(), s->flagged.end()));
}

TEST(ReportScreenTest, MaximalGainAttackIsCaughtWithK1) {
  // k = 1: every honest report on a target dim is collateral, about
  // 4750 * 10 / 500 = 95 of them.
  ExpectAttackCaught(MechanismKind::kHds, 1, 150);
}

TEST(ReportScreenTest, MaximalGainAttackIsCaughtWithK4) {
  // k = 4: an honest report needs 3 of its 4 dims among 10 of 500 (about
  // 3e-5 of them).
  ExpectAttackCaught(MechanismKind::kHds, 4, 5);
  ExpectAttackCaught(MechanismKind::kMultiBit, 4, 5);
}

TEST(ReportScreenTest, MechanismsWithoutSamplingAreNotScreened) {
  // Reports of every dimension: even a set concentrated on one dimension
  // (all the square wave can send) is passed unread.
  for (const auto& mech :
       {Mechanism(MechanismKind::kSquareWave, 1),
        Mechanism(MechanismKind::kOneBit, kDims),
        Mechanism(MechanismKind::kLaplace, kDims),
        Mechanism(MechanismKind::kPiecewise, kDims)}) {
    EXPECT_FALSE(ScreenApplies(*mech)) << MechanismName(mech->kind());
    ReportedDims reports;
    for (uint32_t v = 0; v < 100; ++v) reports.Add(v, {0});
    auto s = ScreenReports(reports, *mech, 1e-3);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_FALSE(s->applicable);
    EXPECT_TRUE(s->flagged.empty());
    EXPECT_EQ(ScreenToJson(*s)["screen"], "not applicable");
    EXPECT_FALSE(ScreenToJson(*s).contains("flagged"));
  }
  EXPECT_TRUE(ScreenApplies(*Mechanism(MechanismKind::kLaplace, 3)));
  EXPECT_TRUE(ScreenApplies(*Mechanism(MechanismKind::kPiecewise, 1)));
}

TEST(ReportScreenTest, RejectsBadInput) {
  ReportedDims reports;
  reports.Add(7, {3, 3});
  auto s = ScreenReports(reports, 10, 2, 1e-3);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), testing::HasSubstr("node 7"));
  EXPECT_THAT(ScreenReports(ReportedDims{}, 10, 2, 0).status().message(),
              testing::HasSubstr("screen-alpha must be in (0, 1), got 0"));
  EXPECT_FALSE(ScreenReports(ReportedDims{}, 10, 11, 1e-3).ok());
}

TEST(ReportScreenTest, JsonNamesTheFlaggedNodes) {
  ReportedDims reports;
  for (uint32_t v = 0; v < 1000; ++v) {
    const uint32_t dim = v < 50 ? 0 : 1 + v % 99;  // 50 attackers on dim 0
    reports.Add(v, {dim});
  }
  auto s = ScreenReports(reports, 100, 1, 1e-3);
  ASSERT_TRUE(s.ok()) << s.status();
  const auto j = ScreenToJson(*s);
  EXPECT_EQ(j["screen"], "applied");
  EXPECT_EQ(j["overreported_dims"], 1);
  EXPECT_EQ(j["overreported"], nlohmann::json::array({0}));
  EXPECT_EQ(j["flagged_nodes"], 50);
  EXPECT_EQ(j["flagged"][49], 49);
  EXPECT_EQ(j["hit_threshold"], 1);
}

}  // namespace
}  // namespace ldpgraph::pipeline
