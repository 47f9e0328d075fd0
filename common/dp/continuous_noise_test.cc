// Tests for the continuous samplers: moments of the normal, Gamma,
// direction and objective-perturbation draws from a fixed seed (each within
// 5 standard errors of its closed form), AddGaussian's add semantics and
// rejected inputs.
#include "common/dp/continuous_noise.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/mechanisms/internal/mechanism_testing.h"
#include "common/random/random.h"

namespace ldpgraph::dp {
namespace {

using ::ldpgraph::testing_util::ExpectInvalidArgument;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int kDraws = 100000;

struct Moments {
  double mean = 0;
  double m2 = 0;  // second central moment
  double m4 = 0;  // fourth central moment
};

Moments MomentsOf(const std::vector<double>& x) {
  Moments m;
  for (double v : x) m.mean += v;
  m.mean /= x.size();
  for (double v : x) {
    const double d = (v - m.mean) * (v - m.mean);
    m.m2 += d;
    m.m4 += d * d;
  }
  m.m2 /= x.size();
  m.m4 /= x.size();
  return m;
}

// The sample mean within 5 standard errors of mean, and the sample variance
// within 5 standard errors (sqrt((m4 - m2^2) / n)) of variance.
void ExpectMoments(const std::vector<double>& x, double mean, double variance) {
  const Moments m = MomentsOf(x);
  const double n = static_cast<double>(x.size());
  EXPECT_NEAR(m.mean, mean, 5 * std::sqrt(variance / n));
  EXPECT_NEAR(m.m2, variance, 5 * std::sqrt((m.m4 - m.m2 * m.m2) / n));
}

TEST(StandardNormalTest, MomentsAndTail) {
  SeededRandomForTesting rng(20240601);
  std::vector<double> x(kDraws);
  for (double& v : x) v = StandardNormal(rng);
  ExpectMoments(x, 0.0, 1.0);
  // Kurtosis 3: the fourth moment of N(0, 1) (its sample standard error is
  // sqrt((105 - 9) / n) ~ 0.031).
  EXPECT_NEAR(MomentsOf(x).m4, 3.0, 5 * std::sqrt(96.0 / kDraws));
  // P(|Z| > 2) = erfc(sqrt 2) = 0.0455.
  const double p = std::erfc(std::sqrt(2.0));
  int tail = 0;
  for (double v : x) tail += std::abs(v) > 2;
  EXPECT_NEAR(static_cast<double>(tail) / kDraws, p,
              5 * std::sqrt(p * (1 - p) / kDraws));
}

TEST(StandardNormalTest, ReproducibleFromTheSeed) {
  SeededRandomForTesting a(7), b(7);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(StandardNormal(a), StandardNormal(b));
}

TEST(AddGaussianTest, AddsToTheOutputWithVarianceSigmaSquared) {
  SeededRandomForTesting rng(99);
  const double sigma = 2.5;
  std::vector<float> out(kDraws + 1, 10.0f);  // odd length: the last alone
  AddGaussian(sigma, rng, absl::MakeSpan(out));
  std::vector<double> x(out.begin(), out.end());
  ExpectMoments(x, 10.0, sigma * sigma);
  // Adjacent entries (the two draws of one polar pair) are uncorrelated.
  double cov = 0;
  for (size_t i = 0; i + 1 < x.size(); i += 2) {
    cov += (x[i] - 10) * (x[i + 1] - 10);
  }
  cov /= x.size() / 2;
  EXPECT_NEAR(cov, 0, 5 * sigma * sigma / std::sqrt(x.size() / 2.0));
}

TEST(AddGaussianTest, SigmaZeroLeavesTheOutputUnchanged) {
  SeededRandomForTesting rng(1);
  std::vector<float> out = {1.5f, -2.0f, 3.25f};
  AddGaussian(0.0, rng, absl::MakeSpan(out));
  EXPECT_THAT(out, testing::ElementsAre(1.5f, -2.0f, 3.25f));
}

TEST(AddGaussianTest, EmptyAndSingleEntry) {
  SeededRandomForTesting rng(3);
  std::vector<float> empty;
  AddGaussian(1.0, rng, absl::MakeSpan(empty));
  std::vector<float> one = {4.0f};
  AddGaussian(1.0, rng, absl::MakeSpan(one));
  EXPECT_NE(one[0], 4.0f);
  EXPECT_TRUE(std::isfinite(one[0]));
}

struct GammaCase {
  double shape, scale;
};

void PrintTo(const GammaCase& c, std::ostream* os) {
  *os << "shape " << c.shape << ", scale " << c.scale;
}

class SampleGammaTest : public testing::TestWithParam<GammaCase> {};

TEST_P(SampleGammaTest, MeanShapeScaleVarianceShapeScaleSquared) {
  const GammaCase c = GetParam();
  SeededRandomForTesting rng(static_cast<uint64_t>(c.shape * 1000 + c.scale));
  std::vector<double> x(kDraws);
  for (double& v : x) {
    auto g = SampleGamma(c.shape, c.scale, rng);
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_GT(*g, 0);
    v = *g;
  }
  ExpectMoments(x, c.shape * c.scale, c.shape * c.scale * c.scale);
}

INSTANTIATE_TEST_SUITE_P(Cases, SampleGammaTest,
                         testing::Values(GammaCase{1, 1},      // exponential
                                         GammaCase{1, 0.25},
                                         GammaCase{2.5, 3},
                                         GammaCase{16, 0.1},
                                         GammaCase{300, 0.02}));

TEST(SampleGammaTest, ShapeOneIsExponential) {
  // P(X > scale) = e^-1 for Gamma(1, scale).
  SeededRandomForTesting rng(11);
  int above = 0;
  for (int i = 0; i < kDraws; ++i) {
    auto g = SampleGamma(1, 2, rng);
    ASSERT_TRUE(g.ok());
    above += *g > 2;
  }
  const double p = std::exp(-1.0);
  EXPECT_NEAR(static_cast<double>(above) / kDraws, p,
              5 * std::sqrt(p * (1 - p) / kDraws));
}

TEST(SampleGammaTest, RejectsShapeBelowOne) {
  SeededRandomForTesting rng(1);
  for (double bad : {0.5, 0.0, -1.0, kInf, kNaN}) {
    SCOPED_TRACE(bad);
    ExpectInvalidArgument(SampleGamma(bad, 1, rng).status(),
                          "gamma shape must be finite and >= 1");
  }
}

TEST(SampleGammaTest, RejectsNonPositiveScale) {
  SeededRandomForTesting rng(1);
  for (double bad : {0.0, -2.0, kInf, kNaN}) {
    SCOPED_TRACE(bad);
    ExpectInvalidArgument(SampleGamma(2, bad, rng).status(),
                          "gamma scale must be finite and > 0");
  }
}

TEST(UniformDirectionTest, UnitNormZeroMeanIsotropic) {
  SeededRandomForTesting rng(5);
  const int dim = 5;
  const int draws = 20000;
  std::vector<double> sum(dim, 0), sum_sq(dim, 0);
  for (int i = 0; i < draws; ++i) {
    const std::vector<double> u = UniformDirection(dim, rng);
    ASSERT_EQ(u.size(), static_cast<size_t>(dim));
    double norm2 = 0;
    for (int k = 0; k < dim; ++k) {
      norm2 += u[k] * u[k];
      sum[k] += u[k];
      sum_sq[k] += u[k] * u[k];
    }
    ASSERT_NEAR(norm2, 1.0, 1e-12);
  }
  // Each coordinate has mean 0 and second moment 1 / dim; u_k^2 is
  // Beta(1/2, (dim-1)/2) with variance 2 (dim - 1) / (dim^2 (dim + 2)).
  const double var_sq = 2.0 * (dim - 1) / (dim * dim * (dim + 2.0));
  for (int k = 0; k < dim; ++k) {
    EXPECT_NEAR(sum[k] / draws, 0, 5 * std::sqrt(1.0 / dim / draws)) << k;
    EXPECT_NEAR(sum_sq[k] / draws, 1.0 / dim, 5 * std::sqrt(var_sq / draws)) << k;
  }
}

TEST(UniformDirectionTest, DimensionOneIsASign) {
  SeededRandomForTesting rng(8);
  int plus = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::vector<double> u = UniformDirection(1, rng);
    ASSERT_EQ(u.size(), 1u);
    ASSERT_EQ(std::abs(u[0]), 1.0);
    plus += u[0] > 0;
  }
  EXPECT_NEAR(plus, 500, 5 * std::sqrt(250.0));
}

TEST(ObjectivePerturbationNoiseTest, NormIsGammaDimOverBeta) {
  SeededRandomForTesting rng(13);
  const int dim = 8;
  const double beta = 4.0;
  const int draws = 20000;
  std::vector<double> norms(draws);
  std::vector<double> first(draws);
  for (int i = 0; i < draws; ++i) {
    auto eta = ObjectivePerturbationNoise(dim, beta, rng);
    ASSERT_TRUE(eta.ok()) << eta.status();
    ASSERT_EQ(eta->size(), static_cast<size_t>(dim));
    double norm2 = 0;
    for (double v : *eta) norm2 += v * v;
    norms[i] = std::sqrt(norm2);
    first[i] = (*eta)[0];
  }
  // ||eta|| ~ Gamma(dim, 1 / beta): mean dim / beta, variance dim / beta^2.
  ExpectMoments(norms, dim / beta, dim / (beta * beta));
  // A coordinate has mean 0 and variance E||eta||^2 / dim =
  // (dim + 1) / beta^2.
  ExpectMoments(first, 0.0, (dim + 1) / (beta * beta));
}

TEST(ObjectivePerturbationNoiseTest, RejectsDimension) {
  SeededRandomForTesting rng(1);
  for (int bad : {0, -3}) {
    ExpectInvalidArgument(ObjectivePerturbationNoise(bad, 1, rng).status(),
                          "noise dimension must be >= 1");
  }
}

TEST(ObjectivePerturbationNoiseTest, RejectsBeta) {
  SeededRandomForTesting rng(1);
  for (double bad : {0.0, -1.0, kInf, kNaN}) {
    SCOPED_TRACE(bad);
    ExpectInvalidArgument(ObjectivePerturbationNoise(3, bad, rng).status(),
                          "beta must be finite and > 0");
  }
}

}  // namespace
}  // namespace ldpgraph::dp
