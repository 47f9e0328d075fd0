// Tests for the square wave (PrivGE Algorithm 1): b, p, q and moments against mechanisms.md.
#include "common/mechanisms/square_wave.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/mechanisms/hds.h"
#include "common/mechanisms/internal/mechanism_testing.h"
#include "common/random/random.h"

namespace ldpgraph {
namespace {

using ::ldpgraph::testing_util::ExpectEstimateMoments;
using ::ldpgraph::testing_util::ExpectInvalidArgument;
using ::ldpgraph::testing_util::ExpectMomentFormulas;
using ::ldpgraph::testing_util::ExpectRelNear;
using ::ldpgraph::testing_util::OkOrNull;
using ::testing::HasSubstr;

// --- Hand formulas from mechanisms.md, in long double --------------------
// Only used at eps >= 0.5, where the closed form keeps ~16 digits in long
// double; smaller eps are checked against literals computed offline.

// b = (eps e^eps - e^eps + 1) / (e^eps (e^eps - eps - 1))
long double HandB(long double eps) {
  const long double e = std::exp(eps);
  return (eps * e - e + 1) / (e * (e - eps - 1));
}
// E[out] = scale * t, scale = b (e^eps - 1) / (b e^eps + 1)
long double HandScale(long double eps) {
  const long double e = std::exp(eps), b = HandB(eps);
  return b * (e - 1) / (b * e + 1);
}
// E[out^2] at t = 0: (b^3 e^eps + 3b^2 + 3b + 1) / (3 (b e^eps + 1))
long double HandSecondAtZero(long double eps) {
  const long double e = std::exp(eps), b = HandB(eps);
  return (b * b * b * e + 3 * b * b + 3 * b + 1) / (3 * (b * e + 1));
}
// Var[out] = E[out^2] - E[out]^2 with E[out^2] = A + scale t^2.
long double HandVariance(long double eps, long double t) {
  const long double s = HandScale(eps);
  return HandSecondAtZero(eps) + s * t * t - s * s * t * t;
}

// --- b ---------------------------------------------------------------------

// Reference values: the closed form evaluated with mpmath at 50 digits.
struct BCase {
  double eps;
  double b;
};
constexpr BCase kBCases[] = {
    {1e-8, 0.99999999333333335556},   {1e-4, 0.99993333555550370469},
    {0.01, 0.99335550380230769324},   {0.5, 0.71631084922233407616},
    {0.999, 0.51251115131070219175},  {1.0, 0.51216587500294524639},
    {1.0000001, 0.51216584048658419832}, {4.0, 0.060855407648707219926},
    {50.0, 9.4508742550231971369e-21}, {100.0, 3.6828752162606276033e-42},
};

TEST(SquareWaveBTest, MatchesHighPrecisionReference) {
  for (const BCase& c : kBCases) {
    SCOPED_TRACE(testing::Message() << "eps = " << c.eps);
    ExpectRelNear(SquareWaveB(c.eps), c.b);
  }
}

TEST(SquareWaveBTest, EpsilonOneIsOneOverETimesEMinusTwo) {
  // At eps = 1: b = (e - e + 1) / (e (e - 2)) = 1 / (e (e - 2)).
  const long double e = std::exp(1.0L);
  ExpectRelNear(SquareWaveB(1.0), static_cast<double>(1 / (e * (e - 2))));
}

TEST(SquareWaveBTest, SmallEpsilonFollowsTaylorSeries) {
  // Expanding numerator and denominator: b = 1 - 2 eps / 3 + 2 eps^2 / 9 +
  // O(eps^3). The closed form in double would lose every digit here.
  for (double eps : {1e-12, 1e-9, 1e-7, 1e-6}) {
    SCOPED_TRACE(testing::Message() << "eps = " << eps);
    const double series = 1.0 - 2.0 * eps / 3.0 + 2.0 * eps * eps / 9.0;
    EXPECT_NEAR(SquareWaveB(eps), series, 1e-15);
  }
}

TEST(SquareWaveBTest, LargeEpsilonApproachesEpsMinusOneTimesExpMinusEps) {
  // For large eps, b = (eps - 1 + e^-eps) / (e^eps - eps - 1) ~ (eps - 1) e^-eps.
  for (double eps : {30.0, 60.0, 200.0, 600.0}) {
    SCOPED_TRACE(testing::Message() << "eps = " << eps);
    ExpectRelNear(SquareWaveB(eps), (eps - 1) * std::exp(-eps), 1e-9);
  }
}

TEST(SquareWaveBTest, DecreasesFromOneToZero) {
  double previous = 1.0;
  for (double eps = 1e-6; eps < 700; eps *= 1.05) {
    const double b = SquareWaveB(eps);
    ASSERT_TRUE(std::isfinite(b)) << "eps = " << eps;
    ASSERT_GT(b, 0.0) << "eps = " << eps;
    ASSERT_LE(b, previous) << "eps = " << eps;
    previous = b;
  }
}

TEST(SquareWaveBTest, ContinuousAcrossTheSeriesSwitch) {
  // The implementation switches method at eps = 1; the two sides must agree
  // with each other (db/deps ~ -0.35 there).
  const double below = SquareWaveB(std::nextafter(1.0, 0.0));
  const double above = SquareWaveB(1.0);
  EXPECT_NEAR(below, above, 1e-14);
}

// --- p, q, scale, variance ---------------------------------------------------

TEST(SquareWaveTest, EpsilonOneClosedForms) {
  // At eps = 1: b e = 1/(e-2), so 2 b e + 2 = 2 (e-1)/(e-2):
  // p = e (e-2) / (2 (e-1)), q = (e-2) / (2 (e-1)), scale = 1/e.
  const SquareWave w(1.0);
  const double e = std::exp(1.0);
  ExpectRelNear(w.p(), e * (e - 2) / (2 * (e - 1)));
  ExpectRelNear(w.q(), (e - 2) / (2 * (e - 1)));
  ExpectRelNear(w.scale(), 1 / e);
  EXPECT_EQ(w.epsilon(), 1.0);
  ExpectRelNear(w.b(), 1 / (e * (e - 2)));
}

// p, q, scale and A = E[out^2 | t = 0], mpmath at 50 digits.
struct WaveCase {
  double eps, p, q, scale, second_at_zero;
};
constexpr WaveCase kWaveCases[] = {
    {1e-4, 0.25002083416668819486, 0.24999583333333402778,
     0.000049998333374999166681, 1.3331944527774200739},
    {0.01, 0.25209168823617900145, 0.24958333402777612434,
     0.0049833749168053573906, 1.319527421273302875},
    {0.5, 0.37797422943172900478, 0.22925295873160085793,
     0.21306131942526684721, 0.80914178080837832329},
    {4.0, 6.3154400739611428608, 0.11567131981811297603,
     0.75457890972218354507, 0.092998290635600060458},
    {50.0, 51847055285870724640.0, 0.01, 0.98, 0.0066666666666666666668},
};

TEST(SquareWaveTest, ParametersMatchHighPrecisionReference) {
  for (const WaveCase& c : kWaveCases) {
    SCOPED_TRACE(testing::Message() << "eps = " << c.eps);
    const SquareWave w(c.eps);
    ExpectRelNear(w.p(), c.p, 1e-11);
    ExpectRelNear(w.q(), c.q, 1e-11);
    ExpectRelNear(w.scale(), c.scale, 1e-11);
    ExpectRelNear(w.Variance(0.0), c.second_at_zero, 1e-11);
    ExpectRelNear(w.Mean(0.7), c.scale * 0.7, 1e-11);
  }
}

TEST(SquareWaveTest, ScaleIsOneMinusOneMinusExpMinusEpsOverEps) {
  // Substituting b into b (e-1)/(b e + 1) gives 1 - (1 - e^-eps) / eps, an
  // independent closed form (checked at eps = 1: 1/e).
  for (double eps : {0.5, 1.0, 2.0, 4.0, 10.0, 50.0}) {
    SCOPED_TRACE(testing::Message() << "eps = " << eps);
    ExpectRelNear(SquareWave(eps).scale(), 1 + std::expm1(-eps) / eps);
  }
}

TEST(SquareWaveTest, DensitiesIntegrateToOneAndRatioIsExpEps) {
  for (double eps : {1e-4, 0.01, 0.5, 1.0, 4.0, 20.0}) {
    SCOPED_TRACE(testing::Message() << "eps = " << eps);
    const SquareWave w(eps);
    // Window of width 2b at density p, the rest of the range (width 2) at q.
    EXPECT_NEAR(2 * w.b() * w.p() + 2 * w.q(), 1.0, 1e-12);
    ExpectRelNear(w.p() / w.q(), std::exp(eps));
  }
}

TEST(SquareWaveTest, VarianceMatchesFormula) {
  for (double eps : {0.5, 1.0, 4.0}) {
    for (double t : {-1.0, 0.0, 0.3, 1.0}) {
      SCOPED_TRACE(testing::Message() << "eps = " << eps << ", t = " << t);
      ExpectRelNear(SquareWave(eps).Variance(t),
                    static_cast<double>(HandVariance(eps, t)));
    }
  }
}

TEST(SquareWaveTest, HighDensityWindowHasProbabilityTwoBP) {
  // The fraction of draws in [t-b, t+b] is 2 b p; all draws lie in
  // [-1-b, 1+b].
  constexpr int kDraws = 200000;
  for (double eps : {0.5, 1.0, 4.0}) {
    for (double t : {-1.0, 0.3, 1.0}) {
      SCOPED_TRACE(testing::Message() << "eps = " << eps << ", t = " << t);
      const SquareWave w(eps);
      const double b = w.b();
      SeededRandomForTesting rng(77);
      int inside = 0, out_of_range = 0;
      for (int i = 0; i < kDraws; ++i) {
        const double y = w.Sample(t, rng);
        if (y >= t - b && y <= t + b) ++inside;
        if (std::abs(y) > 1 + b) ++out_of_range;
      }
      const double p_window = 2 * b * w.p();
      const double se = std::sqrt(p_window * (1 - p_window) / kDraws);
      EXPECT_NEAR(static_cast<double>(inside) / kDraws, p_window, 5 * se);
      EXPECT_EQ(out_of_range, 0);
    }
  }
}

// --- SquareWaveMechanism -------------------------------------------------------

std::unique_ptr<FeatureMechanism> MakeWave(double eps, double alpha = -1,
                                           double beta = 1) {
  MechanismSpec spec;
  spec.kind = MechanismKind::kSquareWave;
  spec.epsilon = eps;
  spec.dimension = 1;
  spec.alpha = alpha;
  spec.beta = beta;
  return OkOrNull(CreateFeatureMechanism(spec));
}

TEST(SquareWaveMechanismTest, RejectsDimensionOtherThanOne) {
  for (int d : {2, 10}) {
    MechanismSpec spec;
    spec.kind = MechanismKind::kSquareWave;
    spec.dimension = d;
    auto m = CreateFeatureMechanism(spec);
    ASSERT_FALSE(m.ok());
    ExpectInvalidArgument(m.status(), "d must be 1");
    EXPECT_THAT(m.status().message(),
                HasSubstr(absl::StrCat("got ", d)));
  }
}

TEST(SquareWaveMechanismTest, RejectsSampledOtherThanOne) {
  MechanismSpec spec;
  spec.kind = MechanismKind::kSquareWave;
  spec.sampled = 2;
  auto m = CreateFeatureMechanism(spec);
  ASSERT_FALSE(m.ok());
  ExpectInvalidArgument(m.status(), "got 2");
}

TEST(SquareWaveMechanismTest, RejectsWrongKind) {
  MechanismSpec spec;
  spec.kind = MechanismKind::kHds;
  auto m = SquareWaveMechanism::Create(spec);
  ASSERT_FALSE(m.ok());
  ExpectInvalidArgument(m.status(), "square-wave");
}

TEST(SquareWaveMechanismTest, ReportIsOneValueAtIndexZero) {
  auto m = MakeWave(1.0);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->kind(), MechanismKind::kSquareWave);
  EXPECT_EQ(m->sampled(), 1);
  SeededRandomForTesting rng(5);
  const std::vector<double> x = {0.25};
  auto r = m->Perturb(x, rng);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->dimension, 1u);
  EXPECT_FALSE(r->dense);
  EXPECT_EQ(r->indices, std::vector<uint32_t>{0});
  ASSERT_EQ(r->values.size(), 1u);
  EXPECT_TRUE(r->bits.empty());
  EXPECT_TRUE(m->ValidateReport(*r).ok());
  // The estimate is the raw output.
  double out = -99;
  ASSERT_TRUE(m->Estimate(*r, absl::MakeSpan(&out, 1)).ok());
  EXPECT_EQ(out, r->values[0]);
}

class SquareWaveMomentsTest
    : public testing::TestWithParam<std::tuple<double, double>> {};

TEST_P(SquareWaveMomentsTest, MeanAndVarianceMatchFormulas) {
  const auto [eps, x] = GetParam();
  auto m = MakeWave(eps);
  ASSERT_NE(m, nullptr);
  const double mean = static_cast<double>(HandScale(eps)) * x;
  const double var = static_cast<double>(HandVariance(eps, x));
  ExpectMomentFormulas(*m, x, mean, var);
  ExpectEstimateMoments(*m, {x}, /*seed=*/1234, /*draws=*/200000, mean, var);
}

INSTANTIATE_TEST_SUITE_P(EpsAndX, SquareWaveMomentsTest,
                         testing::Combine(testing::Values(0.5, 1.0, 4.0),
                                          testing::Values(-1.0, 0.0, 0.3, 1.0)));

TEST(SquareWaveMechanismTest, MomentsOnNonCanonicalRange) {
  // On [0, 5], x = 4 maps to t = 0.6; moments are in canonical coordinates.
  constexpr double kEps = 1.0;
  auto m = MakeWave(kEps, 0.0, 5.0);
  ASSERT_NE(m, nullptr);
  const double t = 0.6;
  const double mean = static_cast<double>(HandScale(kEps)) * t;
  const double var = static_cast<double>(HandVariance(kEps, t));
  ExpectRelNear(m->EstimateMean(4.0), mean);
  ExpectRelNear(m->EstimateVariance(4.0), var);
  ExpectEstimateMoments(*m, {4.0}, /*seed=*/99, /*draws=*/200000, mean, var);
}

TEST(SquareWaveMechanismTest, ValidateReportRejectsValueBeyondOnePlusB) {
  auto m = MakeWave(1.0);
  ASSERT_NE(m, nullptr);
  const double b = SquareWaveB(1.0);
  SparseReport r;
  r.dimension = 1;
  r.indices = {0};
  r.values = {1 + b};
  EXPECT_TRUE(m->ValidateReport(r).ok());
  r.values = {-(1 + b)};
  EXPECT_TRUE(m->ValidateReport(r).ok());
  r.values = {std::nextafter(1 + b, 10.0)};
  ExpectInvalidArgument(m->ValidateReport(r),
                        "outside the square wave's output range");
}

// Floating-point safety (Mironov 2012): whatever the input, every released
// value is a multiple of the grid's power-of-two granularity inside the
// output range, so the set of possible outputs cannot reveal the input.
TEST(SquareWaveTest, ReleasedValuesAreOnOneGridWhateverTheInput) {
  SeededRandomForTesting rng(77);
  for (double eps : {0.1, 1.0, 5.0}) {
    SquareWave wave(eps);
    const double g = wave.grid().granularity();
    EXPECT_EQ(g, std::ldexp(1.0, std::ilogb(g))) << "not a power of two";
    for (int i = 0; i <= 200; ++i) {
      const double t = -1.0 + i / 100.0 + (i % 3) / 3e3;  // off-grid inputs
      const double clipped = std::min(1.0, t);
      for (int j = 0; j < 50; ++j) {
        const double v = wave.Sample(clipped, rng);
        ASSERT_EQ(v, std::nearbyint(v / g) * g) << "eps " << eps << " t " << t;
        ASSERT_LE(std::abs(v), 1 + wave.b()) << "eps " << eps << " t " << t;
      }
    }
  }
}

}  // namespace
}  // namespace ldpgraph
