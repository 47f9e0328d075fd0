// The slow statistical privacy suite: every mechanism in common/mechanisms is
// run through the privacy tester (privacy_tester.h) on neighbouring inputs at
// the ends of its range, on crossed and interior pairs, at several epsilons,
// and must pass. To show that the tester has power at the sample size used,
// every pair where the mechanism's privacy loss reaches its full epsilon is
// also run with the same mechanism spending 1.3 * eps while the tester is told
// eps, and that must fail; and deliberately broken mechanisms (a square wave
// spending 2 eps, randomized response at 2 eps, a too-narrow Laplace, leaky
// mechanisms) must fail too, at the same sample size.
//
// Labelled slow (minutes in a RelWithDebInfo build): `ctest -LE slow` skips it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "common/mechanisms/edge_rr.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/mechanisms/hds.h"
#include "common/mechanisms/internal/discrete_sampling.h"
#include "common/mechanisms/label_rr.h"
#include "common/mechanisms/laplace.h"
#include "common/mechanisms/multibit.h"
#include "common/mechanisms/onebit.h"
#include "common/mechanisms/piecewise.h"
#include "common/mechanisms/square_wave.h"
#include "common/random/random.h"
#include "tests/privacy/privacy_tester.h"

namespace ldpgraph::testing_privacy {
namespace {

// N, draws per input, for every test here: real mechanisms, over-budget
// variants and broken mechanisms alike. At N = 2e6 a 30% overspend of eps is
// caught by every configuration below (the *OverBudget checks).
constexpr int64_t kSamples = 2'000'000;
// The overspend the power checks use.
constexpr double kOverBudget = 1.3;

// A stable seed per test configuration (FNV-1a of a name).
uint64_t SeedFor(absl::string_view name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

PrivacyTestOptions Options(double claimed_eps, absl::string_view name) {
  PrivacyTestOptions o;
  o.epsilon = claimed_eps;
  o.samples_per_input = kSamples;
  o.seed = SeedFor(name);
  return o;
}

// Prints the result line, so the log shows the margin of every run.
void Log(absl::string_view what, const PrivacyTestResult& r) {
  std::cout << "  [" << what << "] " << r.ToString() << std::endl;
}

// Asserts that the mechanism passes at its own epsilon and, when
// check_power, that the same construction spending kOverBudget * eps fails
// against eps. run(claimed_eps, true_eps) runs the tester.
template <typename Run>
void ExpectPrivateAndPowerful(const std::string& name, double eps,
                              bool check_power, Run run) {
  const PrivacyTestResult r = run(eps, eps);
  Log(name, r);
  EXPECT_TRUE(r.passed) << name << ": " << r.ToString();
  if (check_power) {
    const PrivacyTestResult over = run(eps, kOverBudget * eps);
    Log(absl::StrCat(name, " spending ", kOverBudget, "*eps"), over);
    EXPECT_FALSE(over.passed)
        << name << ": the tester missed a mechanism spending " << kOverBudget
        << "*eps: " << over.ToString();
  }
}

std::string EpsName(double eps) {
  return absl::StrReplaceAll(absl::StrCat("eps", eps), {{".", "_"}});
}

// Outcome ids for the report of a d = 2 sparse continuous mechanism: per
// coordinate 0 if unsampled, else 1 + its value's bin; joint id
// o0 * (B + 1) + o1, or the marginal o0 of coordinate 0.
int64_t CoordinateOutcome(const SparseReport& r, uint32_t j, const Binning& b) {
  for (size_t i = 0; i < r.size(); ++i) {
    if (r.index(i) == j) return 1 + b.Bin(r.values[i]);
  }
  return 0;
}
int64_t JointOutcome(const SparseReport& r, const Binning& b) {
  return CoordinateOutcome(r, 0, b) * (b.size() + 1) + CoordinateOutcome(r, 1, b);
}
std::string CoordinateLabel(int64_t o, const Binning& b) {
  return o == 0 ? "unsampled" : b.Label(static_cast<int>(o - 1));
}
std::string JointLabel(int64_t id, const Binning& b) {
  return absl::StrCat("(", CoordinateLabel(id / (b.size() + 1), b), "; ",
                      CoordinateLabel(id % (b.size() + 1), b), ")");
}

// Bit mechanisms (d = 2): per coordinate 0 unsampled, 1 + bit; id o0*3 + o1.
int64_t BitOutcome(const SparseReport& r) {
  int64_t o[2] = {0, 0};
  for (size_t i = 0; i < r.size(); ++i) o[r.index(i)] = 1 + (r.bits[i] ? 1 : 0);
  return o[0] * 3 + o[1];
}
std::string BitLabel(int64_t id) {
  auto one = [](int64_t o) { return o == 0 ? "-" : o == 1 ? "0" : "1"; };
  return absl::StrCat("(", one(id / 3), ",", one(id % 3), ")");
}

// Square-wave bins: width at most b/2 (a quarter of the window 2b) over the
// output range [-1-b, 1+b], from the claimed epsilon's b.
Binning SquareWaveBinning(double claimed_eps) {
  const double b = SquareWaveB(claimed_eps);
  return Binning::WithMaxWidth(-1 - b, 1 + b, b / 2);
}

// Piecewise bins: width at most (C-1)/4 (a quarter of the window) over
// [-C, C], from the claimed epsilon's C.
Binning PiecewiseBinning(double claimed_eps) {
  const double c = Piecewise(claimed_eps).c();
  return Binning::WithMaxWidth(-c, c, (c - 1) / 4);
}

// Laplace bins on [alpha, beta] = [-1, 1]: width lambda/4 from alpha - 4
// lambda to at least beta + 4 lambda (an edge falls on alpha), plus the two
// open-ended tails; lambda = Delta / claimed eps.
Binning LaplaceBinning(double claimed_eps) {
  const double lambda = 2.0 / claimed_eps;
  const double w = lambda / 4;
  const double lo = -1 - 4 * lambda;
  const int n = 32 + static_cast<int>(std::ceil(2.0 / w));
  return Binning(lo, lo + n * w, n);
}

std::unique_ptr<FeatureMechanism> MakeFeature(MechanismSpec spec) {
  auto m = CreateFeatureMechanism(spec);
  EXPECT_TRUE(m.ok()) << m.status();
  return std::move(m).value();
}

// --- one-dimensional continuous mechanisms ------------------------------------

struct ScalarPair {
  const char* name;
  double x;
  double x_prime;
  bool full_loss;  // the pair reaches the full eps in some bin: check power
};
// [-1, 1]: the ends, an interior pair and inputs outside the range (clipped
// to the ends first).
constexpr ScalarPair kScalarPairs[] = {
    {"ends", -1.0, 1.0, true},
    {"interior", -0.3, 0.4, false},
    {"clipped", -7.5, 3.0, true},
};

// One-dimensional continuous mechanisms: square wave (PrivGE Algorithm 1),
// Piecewise (Wang et al., ICDE'19) and Laplace (discrete Laplace on a fine
// grid), each with the binning of its own output range.
using ScalarParam = std::tuple<MechanismKind, double, int>;
std::string ScalarParamName(const testing::TestParamInfo<ScalarParam>& info) {
  std::string kind(MechanismName(std::get<0>(info.param)));
  kind.erase(std::remove(kind.begin(), kind.end(), '-'), kind.end());
  return absl::StrCat(kind, "_", EpsName(std::get<1>(info.param)), "_",
                      kScalarPairs[std::get<2>(info.param)].name);
}

Binning ScalarBinning(MechanismKind kind, double claimed_eps) {
  switch (kind) {
    case MechanismKind::kSquareWave:
      return SquareWaveBinning(claimed_eps);
    case MechanismKind::kPiecewise:
      return PiecewiseBinning(claimed_eps);
    default:
      return LaplaceBinning(claimed_eps);
  }
}

class ScalarPrivacyTest : public testing::TestWithParam<ScalarParam> {};

TEST_P(ScalarPrivacyTest, IsEpsLdp) {
  const MechanismKind kind = std::get<0>(GetParam());
  const double eps = std::get<1>(GetParam());
  const ScalarPair pair = kScalarPairs[std::get<2>(GetParam())];
  const std::string name =
      absl::StrCat(MechanismName(kind), " ", EpsName(eps), " ", pair.name);
  ExpectPrivateAndPowerful(name, eps, pair.full_loss, [&](double claimed, double spent) {
    MechanismSpec spec;
    spec.kind = kind;
    spec.epsilon = spent;
    auto m = MakeFeature(spec);
    auto sampler = [&m](double x) {
      return [&m, x](RandomSource& rng) { return m->Perturb({&x, 1}, rng)->values[0]; };
    };
    auto sx = sampler(pair.x);
    auto sxp = sampler(pair.x_prime);
    return TestPrivacy(Options(claimed, absl::StrCat(name, spent)),
                       ScalarBinning(kind, claimed), sx, sxp);
  });
}

INSTANTIATE_TEST_SUITE_P(
    All, ScalarPrivacyTest,
    testing::Combine(testing::Values(MechanismKind::kSquareWave,
                                     MechanismKind::kPiecewise,
                                     MechanismKind::kLaplace),
                     testing::Values(0.5, 1.0, 2.0, 5.0), testing::Values(0, 1, 2)),
    ScalarParamName);

// --- sparse feature mechanisms with d = 2: HDS, Piecewise k of d ---------------

struct VectorPair {
  const char* name;
  double x[2];
  double x_prime[2];
  bool full_loss;  // both coordinates at opposite ends
};
// On [alpha, beta] = [0, 4].
constexpr VectorPair kVectorPairs[] = {
    {"ends", {0, 0}, {4, 4}, true},
    {"crossed", {0, 4}, {4, 0}, true},
    {"interior", {1, 2.5}, {3, 0.5}, false},
};

// (eps, k, pair, joint)
using SparseParam = std::tuple<double, int, int, bool>;
std::string SparseParamName(const testing::TestParamInfo<SparseParam>& info) {
  return absl::StrCat(EpsName(std::get<0>(info.param)), "_k",
                      std::get<1>(info.param), "_",
                      kVectorPairs[std::get<2>(info.param)].name,
                      std::get<3>(info.param) ? "_joint" : "_marginal");
}

// Runs a d = 2 sparse continuous mechanism of kind `kind` with k sampled
// dimensions; the outcome is the joint report or coordinate 0's part of it
// (unsampled, or the bin of its value). Each sampled value spends eps/k, so
// bins come from the scalar mechanism at claimed eps/k.
void RunSparse(MechanismKind kind, const SparseParam& param) {
  const double eps = std::get<0>(param);
  const int k = std::get<1>(param);
  const VectorPair pair = kVectorPairs[std::get<2>(param)];
  const bool joint = std::get<3>(param);
  const std::string name =
      absl::StrCat(MechanismName(kind), " d=2 k=", k, " ", EpsName(eps), " ",
                   pair.name, joint ? " joint" : " marginal(coordinate 0)");
  // The marginal of one coordinate reaches eps only when that coordinate
  // gets all of it (k = 1); the joint report reaches eps on the full pairs.
  const bool check_power = pair.full_loss && (joint || k == 1);
  ExpectPrivateAndPowerful(name, eps, check_power, [&](double claimed, double spent) {
    MechanismSpec spec;
    spec.kind = kind;
    spec.epsilon = spent;
    spec.dimension = 2;
    spec.sampled = k;
    spec.alpha = 0;
    spec.beta = 4;
    auto m = MakeFeature(spec);
    const Binning binning = kind == MechanismKind::kHds
                                ? SquareWaveBinning(claimed / k)
                                : PiecewiseBinning(claimed / k);
    auto sampler = [&](const double* x) {
      return [&, x](RandomSource& rng) -> int64_t {
        const SparseReport r = m->Perturb({x, 2}, rng).value();
        return joint ? JointOutcome(r, binning) : CoordinateOutcome(r, 0, binning);
      };
    };
    auto sx = sampler(pair.x);
    auto sxp = sampler(pair.x_prime);
    PrivacyTestOptions o = Options(claimed, absl::StrCat(name, spent));
    if (joint) {
      o.outcome_label = [&binning](int64_t id) { return JointLabel(id, binning); };
    } else {
      o.outcome_label = [&binning](int64_t id) { return CoordinateLabel(id, binning); };
    }
    const int64_t outcomes =
        joint ? (binning.size() + 1) * (binning.size() + 1) : binning.size() + 1;
    return TestPrivacy(o, outcomes, sx, sxp);
  });
}

class HdsPrivacyTest : public testing::TestWithParam<SparseParam> {};
TEST_P(HdsPrivacyTest, IsEpsLdp) { RunSparse(MechanismKind::kHds, GetParam()); }
INSTANTIATE_TEST_SUITE_P(All, HdsPrivacyTest,
                         testing::Combine(testing::Values(0.5, 1.0, 2.0),
                                          testing::Values(1, 2),
                                          testing::Values(0, 1, 2),
                                          testing::Bool()),
                         SparseParamName);

class SampledPiecewisePrivacyTest : public testing::TestWithParam<SparseParam> {};
TEST_P(SampledPiecewisePrivacyTest, IsEpsLdp) {
  RunSparse(MechanismKind::kPiecewise, GetParam());
}
INSTANTIATE_TEST_SUITE_P(All, SampledPiecewisePrivacyTest,
                         testing::Combine(testing::Values(1.0, 2.0),
                                          testing::Values(1, 2),
                                          testing::Values(0, 1),
                                          testing::Values(true)),
                         SparseParamName);

// --- bit mechanisms: Multi-bit (LPGNN) and one-bit (PGC) ---------------------

// On [alpha, beta] = [0, 3].
constexpr VectorPair kBitPairs[] = {
    {"ends", {0, 0}, {3, 3}, true},
    {"crossed", {0, 3}, {3, 0}, true},
    {"interior", {1, 2}, {2, 0.5}, false},
};

// (eps, m or d, pair)
using BitParam = std::tuple<double, int, int>;

class MultiBitPrivacyTest : public testing::TestWithParam<BitParam> {};

TEST_P(MultiBitPrivacyTest, IsEpsLdp) {
  const auto [eps, m, pair_index] = GetParam();
  const VectorPair pair = kBitPairs[pair_index];
  const std::string name =
      absl::StrCat("multibit d=2 m=", m, " ", EpsName(eps), " ", pair.name);
  ExpectPrivateAndPowerful(name, eps, pair.full_loss, [&](double claimed, double spent) {
    MechanismSpec spec;
    spec.kind = MechanismKind::kMultiBit;
    spec.epsilon = spent;
    spec.dimension = 2;
    spec.sampled = m;
    spec.alpha = 0;
    spec.beta = 3;
    auto mech = MakeFeature(spec);
    auto sampler = [&](const double* x) {
      return [&, x](RandomSource& rng) -> int64_t {
        return BitOutcome(mech->Perturb({x, 2}, rng).value());
      };
    };
    auto sx = sampler(pair.x);
    auto sxp = sampler(pair.x_prime);
    PrivacyTestOptions o = Options(claimed, absl::StrCat(name, spent));
    o.outcome_label = BitLabel;
    return TestPrivacy(o, 9, sx, sxp);
  });
}

INSTANTIATE_TEST_SUITE_P(
    All, MultiBitPrivacyTest,
    testing::Combine(testing::Values(0.5, 1.0, 2.0, 5.0), testing::Values(1, 2),
                     testing::Values(0, 1, 2)),
    [](const testing::TestParamInfo<BitParam>& info) {
      return absl::StrCat(EpsName(std::get<0>(info.param)), "_m",
                          std::get<1>(info.param), "_",
                          kBitPairs[std::get<2>(info.param)].name);
    });

class OneBitPrivacyTest : public testing::TestWithParam<BitParam> {};

TEST_P(OneBitPrivacyTest, IsEpsLdp) {
  const auto [eps, d, pair_index] = GetParam();
  const VectorPair pair = kBitPairs[pair_index];
  const std::string name =
      absl::StrCat("onebit d=", d, " ", EpsName(eps), " ", pair.name);
  // With d = 1 the crossed pair is the ends pair: full loss either way.
  ExpectPrivateAndPowerful(name, eps, pair.full_loss, [&](double claimed, double spent) {
    MechanismSpec spec;
    spec.kind = MechanismKind::kOneBit;
    spec.epsilon = spent;
    spec.dimension = d;
    spec.alpha = 0;
    spec.beta = 3;
    auto mech = MakeFeature(spec);
    // Outcome: the bit pattern, y_0 + 2 y_1.
    auto sampler = [&](const double* x) {
      return [&, x](RandomSource& rng) -> int64_t {
        const SparseReport r = mech->Perturb({x, static_cast<size_t>(d)}, rng).value();
        int64_t id = 0;
        for (size_t i = 0; i < r.bits.size(); ++i) id |= (r.bits[i] ? int64_t{1} : 0) << i;
        return id;
      };
    };
    auto sx = sampler(pair.x);
    auto sxp = sampler(pair.x_prime);
    return TestPrivacy(Options(claimed, absl::StrCat(name, spent)), 1 << d, sx, sxp);
  });
}

INSTANTIATE_TEST_SUITE_P(
    All, OneBitPrivacyTest,
    testing::Combine(testing::Values(0.5, 1.0, 2.0, 5.0), testing::Values(1, 2),
                     testing::Values(0, 1, 2)),
    [](const testing::TestParamInfo<BitParam>& info) {
      return absl::StrCat(EpsName(std::get<0>(info.param)), "_d",
                          std::get<1>(info.param), "_",
                          kBitPairs[std::get<2>(info.param)].name);
    });

// --- label randomized response, c = 4 ----------------------------------------

constexpr int kClasses = 4;
constexpr int kLabelPairs[][2] = {{0, kClasses - 1}, {1, 2}};

using LabelParam = std::tuple<double, int>;

class LabelRrPrivacyTest : public testing::TestWithParam<LabelParam> {};

TEST_P(LabelRrPrivacyTest, IsEpsLdp) {
  const auto [eps, pair_index] = GetParam();
  const int label = kLabelPairs[pair_index][0];
  const int label_prime = kLabelPairs[pair_index][1];
  const std::string name = absl::StrCat("label-rr c=", kClasses, " ", EpsName(eps),
                                        " labels ", label, " vs ", label_prime);
  // Any two labels are at full loss: e^eps on the true label.
  ExpectPrivateAndPowerful(name, eps, true, [&](double claimed, double spent) {
    auto rr = LabelRandomizedResponse::Create(spent, kClasses).value();
    auto sampler = [&](int l) {
      return [&, l](RandomSource& rng) -> int64_t { return rr->Perturb(l, rng).value(); };
    };
    auto sx = sampler(label);
    auto sxp = sampler(label_prime);
    return TestPrivacy(Options(claimed, absl::StrCat(name, spent)), kClasses, sx, sxp);
  });
}

INSTANTIATE_TEST_SUITE_P(
    All, LabelRrPrivacyTest,
    testing::Combine(testing::Values(0.5, 1.0, 2.0, 5.0), testing::Values(0, 1)),
    [](const testing::TestParamInfo<LabelParam>& info) {
      return absl::StrCat(EpsName(std::get<0>(info.param)), "_labels",
                          kLabelPairs[std::get<1>(info.param)][0], "vs",
                          kLabelPairs[std::get<1>(info.param)][1]);
    });

// --- edge randomized response, n = 6 -----------------------------------------

constexpr uint32_t kNodes = 6;
struct EdgePair {
  const char* name;
  uint32_t v;
  std::vector<uint32_t> neighbours;
  std::vector<uint32_t> neighbours_prime;  // differs in one element
};
const EdgePair& GetEdgePair(int i) {
  static const EdgePair* pairs = new EdgePair[4]{
      {"empty_vs_one", 0, {}, {3}},
      {"three_vs_four", 0, {1, 2, 4}, {1, 2, 4, 5}},
      {"full_vs_minus_one", 0, {1, 2, 3, 4, 5}, {1, 2, 3, 4}},
      {"middle_node", 3, {0, 1}, {0, 1, 5}},
  };
  return pairs[i];
}

using EdgeParam = std::tuple<double, int>;

class EdgeRrPrivacyTest : public testing::TestWithParam<EdgeParam> {};

TEST_P(EdgeRrPrivacyTest, IsEpsEdgeLdp) {
  const auto [eps, pair_index] = GetParam();
  const EdgePair& pair = GetEdgePair(pair_index);
  const std::string name =
      absl::StrCat("edge-rr n=", kNodes, " ", EpsName(eps), " ", pair.name);
  // Outcome: the reported set as a bitmask over the n nodes.
  ExpectPrivateAndPowerful(name, eps, true, [&](double claimed, double spent) {
    auto rr = EdgeRandomizedResponse::Create(spent, kNodes).value();
    auto sampler = [&](const std::vector<uint32_t>& nb) {
      return [&](RandomSource& rng) -> int64_t {
        int64_t mask = 0;
        const std::vector<uint32_t> reported = rr->Perturb(pair.v, nb, rng).value();
        for (uint32_t u : reported) mask |= int64_t{1} << u;
        return mask;
      };
    };
    auto sx = sampler(pair.neighbours);
    auto sxp = sampler(pair.neighbours_prime);
    PrivacyTestOptions o = Options(claimed, absl::StrCat(name, spent));
    o.outcome_label = [](int64_t mask) {
      std::string s = "{";
      for (uint32_t u = 0; u < kNodes; ++u) {
        if (mask >> u & 1) absl::StrAppend(&s, s.size() > 1 ? "," : "", u);
      }
      return s + "}";
    };
    return TestPrivacy(o, int64_t{1} << kNodes, sx, sxp);
  });
}

INSTANTIATE_TEST_SUITE_P(
    All, EdgeRrPrivacyTest,
    testing::Combine(testing::Values(0.5, 1.0, 2.0, 5.0), testing::Values(0, 1, 2, 3)),
    [](const testing::TestParamInfo<EdgeParam>& info) {
      return absl::StrCat(EpsName(std::get<0>(info.param)), "_",
                          GetEdgePair(std::get<1>(info.param)).name);
    });

// --- broken mechanisms: the tester must fail each one at N = kSamples --------

class BrokenMechanismTest : public testing::TestWithParam<double> {};

std::string BrokenName(const testing::TestParamInfo<double>& info) {
  return EpsName(info.param);
}

// (a) A square wave with the right b (window [t-b, t+b] of SquareWaveB(eps))
// whose window density is e^{2 eps} times the outside density.
TEST_P(BrokenMechanismTest, SquareWaveRightWindowDoubleEpsilonFails) {
  const double eps = GetParam();
  const double b = SquareWaveB(eps);
  const internal::WindowedGrid grid(1 + b, 2 * b, 2 * eps);
  auto sampler = [&](double t) {
    return [&, t](RandomSource& rng) {
      return grid.Sample(grid.WindowStart(t - b), rng);
    };
  };
  auto sx = sampler(-1.0);
  auto sxp = sampler(1.0);
  const PrivacyTestResult r =
      TestPrivacy(Options(eps, absl::StrCat("broken-sw-window", eps)),
                  SquareWaveBinning(eps), sx, sxp);
  Log("square wave, right b, 2*eps inside", r);
  EXPECT_FALSE(r.passed) << r.ToString();
}

// (a') The square wave of 2 eps (its own, narrower b) claiming eps.
TEST_P(BrokenMechanismTest, SquareWaveOfDoubleEpsilonFails) {
  const double eps = GetParam();
  const SquareWave wave(2 * eps);
  auto sx = [&](RandomSource& rng) { return wave.Sample(-1.0, rng); };
  auto sxp = [&](RandomSource& rng) { return wave.Sample(1.0, rng); };
  const PrivacyTestResult r =
      TestPrivacy(Options(eps, absl::StrCat("broken-sw-2eps", eps)),
                  SquareWaveBinning(eps), sx, sxp);
  Log("SquareWave(2*eps)", r);
  EXPECT_FALSE(r.passed) << r.ToString();
}

// (b) Randomized response on a label that keeps the true label with
// probability e^{2 eps} / (e^{2 eps} + c - 1).
TEST_P(BrokenMechanismTest, LabelRrKeepingWithDoubleEpsilonFails) {
  const double eps = GetParam();
  const double keep = std::exp(2 * eps) / (std::exp(2 * eps) + kClasses - 1);
  auto sampler = [keep](int label) {
    return [keep, label](RandomSource& rng) -> int64_t {
      if (rng.Bernoulli(keep)) return label;
      int other = static_cast<int>(rng.UniformInt(kClasses - 1));
      return other >= label ? other + 1 : other;
    };
  };
  auto sx = sampler(0);
  auto sxp = sampler(kClasses - 1);
  const PrivacyTestResult r = TestPrivacy(
      Options(eps, absl::StrCat("broken-rr", eps)), kClasses, sx, sxp);
  Log("label RR keeping with e^{2eps}", r);
  EXPECT_FALSE(r.passed) << r.ToString();
}

// (c) The Laplace mechanism's exact construction (input snapped to the grid,
// discrete Laplace noise) with the geometric parameter doubled: noise of half
// the scale lambda = Delta / eps.
TEST_P(BrokenMechanismTest, LaplaceWithHalfTheScaleFails) {
  const double eps = GetParam();
  const double lambda = 2.0 / eps;  // Delta = 2 on [-1, 1]
  const double g = internal::PowerOfTwoAtLeast(lambda * 0x1.0p-30);
  auto sampler = [&](double x) {
    return [&, x](RandomSource& rng) {
      const double snapped =
          std::clamp(std::nearbyint(x / g), std::ceil(-1.0 / g), std::floor(1.0 / g));
      const double noise =
          static_cast<double>(internal::SampleTwoSidedGeometric(2 * g / lambda, rng));
      return (snapped + noise) * g;
    };
  };
  auto sx = sampler(-1.0);
  auto sxp = sampler(1.0);
  const PrivacyTestResult r = TestPrivacy(
      Options(eps, absl::StrCat("broken-laplace", eps)), LaplaceBinning(eps), sx, sxp);
  Log("Laplace with lambda/2", r);
  EXPECT_FALSE(r.passed) << r.ToString();
}

// (d) A leaky label RR: correct at eps, except that for the input beta (the
// last label) it outputs a special outcome (id c) with probability 0.01.
TEST_P(BrokenMechanismTest, LeakyLabelRrFails) {
  const double eps = GetParam();
  auto rr = LabelRandomizedResponse::Create(eps, kClasses).value();
  auto sampler = [&](int label) {
    return [&, label](RandomSource& rng) -> int64_t {
      if (label == kClasses - 1 && rng.Bernoulli(0.01)) return kClasses;
      return rr->Perturb(label, rng).value();
    };
  };
  auto sx = sampler(0);
  auto sxp = sampler(kClasses - 1);
  const PrivacyTestResult r = TestPrivacy(
      Options(eps, absl::StrCat("leaky-rr", eps)), kClasses + 1, sx, sxp);
  Log("leaky label RR (1% special outcome at beta)", r);
  EXPECT_FALSE(r.passed) << r.ToString();
  EXPECT_EQ(r.worst_outcome, kClasses);
}

// (d') A leaky Multi-bit encoder (d = 2, m = 1): correct at eps, except that
// for x = (beta, beta) it reports, with probability 0.01, both dimensions
// instead of one sampled dimension: an outcome (both coordinates present)
// that never occurs for other inputs.
TEST_P(BrokenMechanismTest, LeakyMultiBitFails) {
  const double eps = GetParam();
  MechanismSpec spec;
  spec.kind = MechanismKind::kMultiBit;
  spec.epsilon = eps;
  spec.dimension = 2;
  spec.sampled = 1;
  spec.alpha = 0;
  spec.beta = 3;
  auto m = MakeFeature(spec);
  const auto* multibit = static_cast<const MultiBitMechanism*>(m.get());
  auto sampler = [&](const double* x) {
    return [&, x](RandomSource& rng) -> int64_t {
      if (x[0] == 3 && x[1] == 3 && rng.Bernoulli(0.01)) {
        SparseReport r;
        r.dimension = 2;
        r.indices = {0, 1};
        for (int j = 0; j < 2; ++j) r.bits.push_back(rng.Bernoulli(multibit->ProbabilityOne(x[j])));
        return BitOutcome(r);
      }
      return BitOutcome(m->Perturb({x, 2}, rng).value());
    };
  };
  const double x[2] = {0, 0};
  const double x_prime[2] = {3, 3};
  auto sx = sampler(x);
  auto sxp = sampler(x_prime);
  PrivacyTestOptions o = Options(eps, absl::StrCat("leaky-multibit", eps));
  o.outcome_label = BitLabel;
  const PrivacyTestResult r = TestPrivacy(o, 9, sx, sxp);
  Log("leaky multibit (1% both dimensions at beta)", r);
  EXPECT_FALSE(r.passed) << r.ToString();
  // Outcome (1,1) or (1,0) etc.: both coordinates reported (ids 4, 5, 7, 8).
  EXPECT_GE(r.worst_outcome / 3, 1);
  EXPECT_GE(r.worst_outcome % 3, 1);
}

// (d'') A leaky square wave: correct at eps, except that for x = beta it
// releases, with probability 0.01, a value just past the public output range
// (the overflow tail bin catches it).
TEST_P(BrokenMechanismTest, LeakySquareWaveOutsideTheRangeFails) {
  const double eps = GetParam();
  const SquareWave wave(eps);
  auto sampler = [&](double t) {
    return [&, t](RandomSource& rng) {
      if (t == 1.0 && rng.Bernoulli(0.01)) return 1 + 1.5 * wave.b();
      return wave.Sample(t, rng);
    };
  };
  auto sx = sampler(-1.0);
  auto sxp = sampler(1.0);
  const Binning binning = SquareWaveBinning(eps);
  const PrivacyTestResult r = TestPrivacy(
      Options(eps, absl::StrCat("leaky-sw", eps)), binning, sx, sxp);
  Log("leaky square wave (1% outside the range at beta)", r);
  EXPECT_FALSE(r.passed) << r.ToString();
  EXPECT_EQ(r.worst_outcome, binning.overflow_bin());
}

INSTANTIATE_TEST_SUITE_P(All, BrokenMechanismTest,
                         testing::Values(0.5, 1.0, 2.0, 5.0), BrokenName);

}  // namespace
}  // namespace ldpgraph::testing_privacy
