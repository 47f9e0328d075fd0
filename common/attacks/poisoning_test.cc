// Tests for the maximal-gain attack's crafted reports: they pass the
// curator's checks (the mechanism's and the wire codec's), report the right
// number of dimensions inside the target set, carry the mechanism's maximal
// output, and the label report is always the target class; target
// dimensions from a toy record set.
#include "common/attacks/poisoning.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/dp/tails.h"
#include "common/mechanisms/hds.h"
#include "common/mechanisms/multibit.h"
#include "common/mechanisms/piecewise.h"
#include "common/random/seed_mix.h"
#include "common/wire/codec.h"

namespace ldpgraph::poisoning {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<FeatureMechanism> Make(MechanismKind kind, int d,
                                       std::optional<int> k, double eps,
                                       double alpha = -1, double beta = 1) {
  MechanismSpec spec;
  spec.kind = kind;
  spec.epsilon = eps;
  spec.dimension = d;
  spec.sampled = k;
  spec.alpha = alpha;
  spec.beta = beta;
  auto m = CreateFeatureMechanism(spec);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

std::unique_ptr<Adversary> MakeAdversary(int t, std::vector<uint32_t> dims) {
  auto a = Adversary::Create(t, std::move(dims));
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *std::move(a) : nullptr;
}

// The crafted report through the wire, as the curator reads it.
SparseReport ThroughWire(const SparseReport& r, const FeatureMechanism& m) {
  auto decoded = wire::DecodeFeatureReport(wire::EncodeFeatureReport(r), m);
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  return decoded.ok() ? *decoded : SparseReport{};
}

const std::vector<uint32_t> kTargets = {3, 7, 11, 20, 21, 30, 33, 40, 41, 49};

// HDS, R >= k: k dimensions, all targets, all at the grid's top; that top is
// within 1 + b, at least every honest output for the largest input, and so
// the curator's estimate of each reported dimension is maximal. Every target
// is chosen about equally often.
TEST(AdversaryTest, HdsReportsTheTopOnSampledTargets) {
  auto mech = Make(MechanismKind::kHds, 50, 3, 1.0);
  auto adv = MakeAdversary(2, kTargets);
  const auto& hds = static_cast<const HdsMechanism&>(*mech);
  const double limit = 1 + hds.square_wave().b();
  SeededRandomForTesting rng(5);
  std::vector<double> honest(50, 1.0);
  double honest_max = -limit;
  for (int i = 0; i < 2000; ++i) {
    auto r = mech->Perturb(honest, rng);
    ASSERT_TRUE(r.ok());
    for (double v : r->values) honest_max = std::max(honest_max, v);
  }
  const std::set<uint32_t> targets(kTargets.begin(), kTargets.end());
  std::map<uint32_t, int> count;
  std::vector<double> x(50, -1.0), est(50);
  for (int i = 0; i < 3000; ++i) {
    auto crafted = adv->CraftFeatureReport(*mech, x, rng);
    ASSERT_TRUE(crafted.ok()) << crafted.status();
    const SparseReport r = ThroughWire(*crafted, *mech);
    ASSERT_EQ(r.indices.size(), 3u);
    ASSERT_TRUE(mech->Estimate(r, absl::MakeSpan(est)).ok());
    for (size_t p = 0; p < r.indices.size(); ++p) {
      EXPECT_TRUE(targets.contains(r.indices[p])) << r.indices[p];
      EXPECT_LE(r.values[p], limit);
      EXPECT_GE(r.values[p], honest_max);
      EXPECT_EQ(est[r.indices[p]], r.values[p]);
      ++count[r.indices[p]];
    }
  }
  EXPECT_GT(honest_max, limit - 0.01);  // the check above is not vacuous
  // 9000 picks over 10 targets: 900 each, sd about 28.
  ASSERT_EQ(count.size(), 10u);
  for (const auto& [j, c] : count) EXPECT_NEAR(c, 900, 150) << j;
}

// HDS, R < k: every target reported at the top, k - R other dimensions at
// the centre (0).
TEST(AdversaryTest, HdsWithFewerTargetsThanKAddsOthersAtTheCentre) {
  auto mech = Make(MechanismKind::kHds, 20, 5, 2.0);
  auto adv = MakeAdversary(0, {4, 9});
  SeededRandomForTesting rng(6);
  std::vector<double> x(20, 0.5);
  std::set<uint32_t> others_seen;
  for (int i = 0; i < 200; ++i) {
    auto crafted = adv->CraftFeatureReport(*mech, x, rng);
    ASSERT_TRUE(crafted.ok()) << crafted.status();
    const SparseReport r = ThroughWire(*crafted, *mech);
    ASSERT_EQ(r.indices.size(), 5u);
    int targets = 0;
    for (size_t p = 0; p < 5; ++p) {
      if (r.indices[p] == 4 || r.indices[p] == 9) {
        ++targets;
        EXPECT_GT(r.values[p], 1.0);
      } else {
        EXPECT_EQ(r.values[p], 0.0);
        others_seen.insert(r.indices[p]);
      }
    }
    EXPECT_EQ(targets, 2);
  }
  EXPECT_EQ(others_seen.size(), 18u);  // every other dimension drawn
}

// Multi-bit: m target dimensions, every bit +1: the rectifier's largest
// value, mid + A, on each.
TEST(AdversaryTest, MultiBitSetsEveryBitOnTargets) {
  auto mech = Make(MechanismKind::kMultiBit, 50, 4, 8.0, 0, 1);
  auto adv = MakeAdversary(1, kTargets);
  const auto& mb = static_cast<const MultiBitMechanism&>(*mech);
  SeededRandomForTesting rng(7);
  std::vector<double> x(50, 0.0), est(50);
  for (int i = 0; i < 300; ++i) {
    auto crafted = adv->CraftFeatureReport(*mech, x, rng);
    ASSERT_TRUE(crafted.ok()) << crafted.status();
    const SparseReport r = ThroughWire(*crafted, *mech);
    ASSERT_EQ(r.indices.size(), 4u);
    ASSERT_TRUE(mech->Estimate(r, absl::MakeSpan(est)).ok());
    for (size_t p = 0; p < 4; ++p) {
      EXPECT_TRUE(std::count(kTargets.begin(), kTargets.end(), r.indices[p]));
      EXPECT_TRUE(r.bits[p]);
      EXPECT_DOUBLE_EQ(est[r.indices[p]], 0.5 + mb.rectifier_scale());
    }
  }
}

// Piecewise: the top of its grid, within C, on k target dimensions.
TEST(AdversaryTest, PiecewiseReportsTheTopWithinC) {
  auto mech = Make(MechanismKind::kPiecewise, 50, 2, 1.0);
  auto adv = MakeAdversary(1, kTargets);
  const double c =
      static_cast<const PiecewiseMechanism&>(*mech).piecewise().c();
  SeededRandomForTesting rng(8);
  std::vector<double> x(50, 0.0);
  for (int i = 0; i < 100; ++i) {
    auto crafted = adv->CraftFeatureReport(*mech, x, rng);
    ASSERT_TRUE(crafted.ok()) << crafted.status();
    const SparseReport r = ThroughWire(*crafted, *mech);
    ASSERT_EQ(r.indices.size(), 2u);
    for (size_t p = 0; p < 2; ++p) {
      EXPECT_TRUE(std::count(kTargets.begin(), kTargets.end(), r.indices[p]));
      EXPECT_LE(r.values[p], c);
      EXPECT_GT(r.values[p], c * (1 - 1e-5));
    }
  }
}

// One-bit: 1 on every target, the other bits honest (a node of all-alpha
// values at a large budget reports 0 there).
TEST(AdversaryTest, OneBitSetsTargetsAndAnswersTheRestHonestly) {
  auto mech = Make(MechanismKind::kOneBit, 50, std::nullopt, 2000.0);
  auto adv = MakeAdversary(1, kTargets);
  SeededRandomForTesting rng(9);
  std::vector<double> x(50, -1.0);
  auto crafted = adv->CraftFeatureReport(*mech, x, rng);
  ASSERT_TRUE(crafted.ok()) << crafted.status();
  const SparseReport r = ThroughWire(*crafted, *mech);
  ASSERT_TRUE(r.dense);
  for (uint32_t j = 0; j < 50; ++j) {
    const bool target = std::count(kTargets.begin(), kTargets.end(), j) > 0;
    EXPECT_EQ(r.bits[j], target) << j;
  }
}

// The 1-d square wave: its one value at the top.
TEST(AdversaryTest, SquareWaveReportsTheTop) {
  auto mech = Make(MechanismKind::kSquareWave, 1, std::nullopt, 1.0);
  auto adv = MakeAdversary(0, {0});
  SeededRandomForTesting rng(10);
  std::vector<double> x = {-1.0};
  auto crafted = adv->CraftFeatureReport(*mech, x, rng);
  ASSERT_TRUE(crafted.ok()) << crafted.status();
  const SparseReport r = ThroughWire(*crafted, *mech);
  ASSERT_EQ(r.values.size(), 1u);
  EXPECT_GT(r.values[0], 1.0);
}

TEST(AdversaryTest, LaplaceIsUnimplementedAndBadInputsAreRefused) {
  auto adv = MakeAdversary(0, kTargets);
  SeededRandomForTesting rng(11);
  std::vector<double> x(50, 0.0);
  auto laplace = Make(MechanismKind::kLaplace, 50, 5, 1.0);
  auto r = adv->CraftFeatureReport(*laplace, x, rng);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(r.status().message(), HasSubstr("unbounded"));
  auto small = Make(MechanismKind::kHds, 40, 1, 1.0);  // target 49 >= d
  std::vector<double> x40(40, 0.0);
  EXPECT_EQ(adv->CraftFeatureReport(*small, x40, rng).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto hds = Make(MechanismKind::kHds, 50, 1, 1.0);
  EXPECT_EQ(adv->CraftFeatureReport(*hds, x40, rng).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(Adversary::Create(0, {}).ok());
  EXPECT_FALSE(Adversary::Create(0, {3, 3}).ok());
  EXPECT_FALSE(Adversary::Create(-1, {3}).ok());
}

// The same seeded stream gives the same crafted report.
TEST(AdversaryTest, SeededCraftingReplays) {
  auto mech = Make(MechanismKind::kHds, 50, 2, 1.0);
  auto adv = MakeAdversary(0, kTargets);
  std::vector<double> x(50, 0.0);
  SeededRandomForTesting a(12), b(12);
  auto ra = adv->CraftFeatureReport(*mech, x, a);
  auto rb = adv->CraftFeatureReport(*mech, x, b);
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(ra->indices, rb->indices);
  EXPECT_EQ(ra->values, rb->values);
}

TEST(AdversaryTest, LabelIsAlwaysTheTarget) {
  auto rr = LabelRandomizedResponse::Create(1.0, 7);
  ASSERT_TRUE(rr.ok());
  auto adv = MakeAdversary(5, {0});
  SeededRandomForTesting rng(3);
  auto y = adv->CraftLabel(**rr, rng);
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(*y, 5);
  EXPECT_TRUE((*rr)->ValidateReport(*y).ok());
  auto far = MakeAdversary(7, {0});
  EXPECT_EQ(far->CraftLabel(**rr, rng).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Toy records: 5 dimensions, nodes 0..5. The attacker holds 0, 1, 2, 3, 5;
// node 4 (honest) would change the ranking if it were counted.
TEST(TargetDimsTest, ScoresTheAttackersOwnRecords) {
  SparseRows x;
  x.cols = 5;
  auto row = [&](std::vector<double> dense) { x.AppendDenseRow(dense); };
  row({1, 0, 1, 0, 0});    // 0: class 1
  row({1, 0, 0, 1, 0});    // 1: class 1
  row({0, 0, 1, 0, 1});    // 2: class 0
  row({0, 1, 0, 0, 1});    // 3: unlabelled: ignored
  row({0, 0, 0, 0, 9});    // 4: class 1, not the attacker's
  row({0, 0, 0, 1, 0});    // 5: class 0
  const std::vector<int32_t> labels = {1, 1, 0, -1, 1, 0};
  const std::vector<uint32_t> mine = {0, 1, 2, 3, 5};
  // Class 1: means (1, 0, .5, .5, 0) - (0, 0, .5, .5, .5) = (1, 0, 0, 0, -.5).
  auto dims = TargetDims(x, labels, mine, 1, 2);
  ASSERT_TRUE(dims.ok()) << dims.status();
  EXPECT_THAT(*dims, ElementsAre(0, 1));  // ties (0, 0, 0) to the lowest
  dims = TargetDims(x, labels, mine, 1, 1);
  ASSERT_TRUE(dims.ok());
  EXPECT_THAT(*dims, ElementsAre(0));
  // Class 0: (0, 0, .5, .5, .5) - (1, 0, .5, .5, 0) = (-1, 0, 0, 0, .5).
  dims = TargetDims(x, labels, mine, 0, 2);
  ASSERT_TRUE(dims.ok());
  EXPECT_THAT(*dims, ElementsAre(1, 4));
  // R above d: every dimension. No node of class 3: its mean is 0.
  dims = TargetDims(x, labels, mine, 3, 10);
  ASSERT_TRUE(dims.ok());
  EXPECT_THAT(*dims, ElementsAre(0, 1, 2, 3, 4));
  EXPECT_FALSE(TargetDims(x, labels, {0, 6}, 1, 2).ok());
  EXPECT_FALSE(TargetDims(x, {1, 1}, mine, 1, 2).ok());
  EXPECT_FALSE(TargetDims(x, labels, mine, 1, 0).ok());
}

TEST(MaliciousNodesTest, DrawsSimulatedMaliciousMinusOffline) {
  const auto all = MaliciousNodes(1000, 3, 0.2);
  size_t expected = 0;
  for (uint32_t v = 0; v < 1000; ++v) expected += SimulatedMalicious(3, v, 0.2);
  EXPECT_EQ(all.size(), expected);
  EXPECT_GT(all.size(), 100u);
  const auto online = MaliciousNodes(1000, 3, 0.2,
                                     [](uint32_t v) { return v % 2 == 0; });
  for (uint32_t v : online) EXPECT_EQ(v % 2, 1u);
  EXPECT_LT(online.size(), all.size());
  EXPECT_TRUE(MaliciousNodes(1000, 3, 0.0).empty());
  EXPECT_TRUE((AttackSettings{0.2, 0, 10}.Validate().ok()));
  EXPECT_FALSE((AttackSettings{1.0, 0, 10}.Validate().ok()));
  EXPECT_FALSE((AttackSettings{0.2, -1, 10}.Validate().ok()));
  EXPECT_FALSE((AttackSettings{0.2, 0, 0}.Validate().ok()));
}

}  // namespace
}  // namespace ldpgraph::poisoning

namespace ldpgraph::poisoning {
namespace {

// The other attackers: labels-only perturbs the node's own record as an
// honest agent would (the same report from the same stream); input perturbs
// the fake record (top of the range on the targets, bottom elsewhere), so
// its reports pass the curator's checks and lean to the targets; its label
// goes through randomized response.
TEST(AttackKindsTest, LabelsOnlyAndInputPerturbHonestly) {
  auto mech = Make(MechanismKind::kMultiBit, 50, 5, 3, 0, 1);
  std::vector<double> x(50, 0.2);
  auto labels_only = Adversary::Create(2, kTargets, AttackKind::kLabelsOnly);
  auto input = Adversary::Create(2, kTargets, AttackKind::kInput);
  ASSERT_TRUE(labels_only.ok() && input.ok());
  SeededRandomForTesting a(9), b(9);
  auto crafted = (*labels_only)->CraftFeatureReport(*mech, x, a);
  auto honest = mech->Perturb(x, b);
  ASSERT_TRUE(crafted.ok() && honest.ok());
  EXPECT_EQ(crafted->indices, honest->indices);
  EXPECT_EQ(crafted->bits, honest->bits);

  const std::vector<double> fake = (*input)->FakeRecord(*mech);
  for (uint32_t j = 0; j < 50; ++j) {
    const bool target = std::binary_search(kTargets.begin(), kTargets.end(), j);
    EXPECT_EQ(fake[j], target ? 1.0 : 0.0) << j;
  }
  // Over many reports a target dimension's bit is +1 far more often than
  // another's: the input attack leans, within the mechanism's output.
  SeededRandomForTesting rng(4);
  int on_target = 0, target_ones = 0, off_target = 0, off_ones = 0;
  for (int i = 0; i < 2000; ++i) {
    auto r = (*input)->CraftFeatureReport(*mech, x, rng);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(mech->ValidateReport(*r).ok());
    for (size_t p = 0; p < r->indices.size(); ++p) {
      const bool t = std::binary_search(kTargets.begin(), kTargets.end(),
                                        r->indices[p]);
      (t ? on_target : off_target) += 1;
      (t ? target_ones : off_ones) += r->bits[p];
    }
  }
  ASSERT_GT(on_target, 500);
  // Multi-bit at eps 3 over m = 5: a bit is its value's sign with
  // probability e^(eps/m) / (1 + e^(eps/m)).
  const double keep = std::exp(0.6) / (1 + std::exp(0.6));
  EXPECT_NEAR(double(target_ones) / on_target, keep, 0.03);
  EXPECT_NEAR(double(off_ones) / off_target, 1 - keep, 0.03);
  // The dimensions stay uniform: about k/d of reports hold each one.
  EXPECT_NEAR(double(on_target) / (2000 * 5), 10.0 / 50, 0.02);

  auto rr = LabelRandomizedResponse::Create(1.0, 7);
  ASSERT_TRUE(rr.ok());
  int kept = 0;
  for (int i = 0; i < 4000; ++i) {
    auto y = (*input)->CraftLabel(**rr, rng);
    ASSERT_TRUE(y.ok());
    kept += *y == 2;
  }
  EXPECT_NEAR(kept / 4000.0, (*rr)->keep_probability(), 0.03);
  SeededRandomForTesting s(1);
  EXPECT_EQ(*(*labels_only)->CraftLabel(**rr, s), 2);
}

// The adaptive attacker's target count: it grows with the attacker's nodes,
// the crafted counts stay under the screen's threshold at the accepted risk,
// and without sampling (k = d) nothing is widened.
TEST(AttackKindsTest, AdaptiveTargetsStayUnderTheThreshold) {
  const int few = AdaptiveTargetCount(2708, 27, 1433, 1, 1e-3, 10);
  const int many = AdaptiveTargetCount(2708, 270, 1433, 1, 1e-3, 10);
  EXPECT_GE(few, 10);
  EXPECT_GT(many, few);
  EXPECT_LT(many, 1433);
  EXPECT_EQ(AdaptiveTargetCount(2708, 270, 50, 50, 1e-3, 10), 10);
  EXPECT_EQ(AdaptiveTargetCount(1000, 999, 10, 1, 1e-3, 3), 10);  // no room

  // Simulated: 270 attackers over `many` targets next to 2438 honest
  // reports (k = 1 of 1433); the screen marks no target in most trials.
  const uint64_t threshold =
      BinomialUpperQuantile(2708, 1.0 / 1433, 1e-3 / 1433);
  SeededRandomForTesting rng(5);
  int marked_trials = 0;
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<int> count(1433, 0);
    for (int i = 0; i < 2438; ++i) ++count[rng.UniformInt(1433)];
    for (int i = 0; i < 270; ++i) ++count[rng.UniformInt(many)];
    bool marked = false;
    for (int j = 0; j < many; ++j) marked |= count[j] > int(threshold);
    marked_trials += marked;
  }
  EXPECT_LE(marked_trials, 6);  // kAdaptiveRisk 5 %: 2 expected of 40

  AdaptivePlan plan{2708, 270, 1e-3, {}};
  for (uint32_t j = 0; j < 50; ++j) plan.ranking.push_back(49 - j);
  auto adv = Adversary::Create(0, {40, 41, 42, 43, 44, 45, 46, 47, 48, 49},
                               AttackKind::kAdaptive, plan);
  ASSERT_TRUE(adv.ok()) << adv.status();
  auto mech = Make(MechanismKind::kMultiBit, 50, 1, 3, 0, 1);
  const std::vector<uint32_t> targets = (*adv)->TargetsFor(*mech);
  EXPECT_GE(targets.size(), 10u);
  EXPECT_EQ(targets.back(), 49u);
  EXPECT_FALSE(Adversary::Create(0, {1, 2}, AttackKind::kAdaptive).ok());
  plan.ranking = {5, 6, 7};
  EXPECT_THAT(Adversary::Create(0, {1, 2}, AttackKind::kAdaptive, plan)
                  .status()
                  .message(),
              HasSubstr("must start with its targets"));
}

}  // namespace
}  // namespace ldpgraph::poisoning
