// Fast tests of the privacy tester itself: its binning, its exact binomial
// bounds (against closed forms and direct sums), their coverage, and its
// verdicts on distributions whose privacy loss is known.
#include "tests/privacy/privacy_tester.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace ldpgraph::testing_privacy {
namespace {

// ln P[Binomial(n, p) = i], by lgamma.
double LogBinomialPmf(int64_t i, int64_t n, double p) {
  return std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) +
         i * std::log(p) + (n - i) * std::log1p(-p);
}

// P[X >= k] by direct summation, for small n.
double UpperTailBySum(int64_t k, int64_t n, double p) {
  double s = 0;
  for (int64_t i = k; i <= n; ++i) s += std::exp(LogBinomialPmf(i, n, p));
  return s;
}
double LowerTailBySum(int64_t k, int64_t n, double p) {
  double s = 0;
  for (int64_t i = 0; i <= k; ++i) s += std::exp(LogBinomialPmf(i, n, p));
  return s;
}

// Kullback-Leibler divergence between Bernoulli(q) and Bernoulli(p).
double BernoulliKl(double q, double p) {
  double s = 0;
  if (q > 0) s += q * std::log(q / p);
  if (q < 1) s += (1 - q) * std::log((1 - q) / (1 - p));
  return s;
}

TEST(BinningTest, EqualWidthBinsAndTails) {
  const Binning b(-1.0, 1.0, 4);
  EXPECT_EQ(b.size(), 7);
  EXPECT_DOUBLE_EQ(b.width(), 0.5);
  EXPECT_EQ(b.Bin(-1.0), 0);
  EXPECT_EQ(b.Bin(-0.75), 0);
  EXPECT_EQ(b.Bin(-0.5), 1);
  EXPECT_EQ(b.Bin(0.99), 3);
  EXPECT_EQ(b.Bin(1.0), 3);  // the last bin is closed at hi
  EXPECT_EQ(b.Bin(-1.0000001), b.underflow_bin());
  EXPECT_EQ(b.Bin(-INFINITY), b.underflow_bin());
  EXPECT_EQ(b.Bin(1.0000001), b.overflow_bin());
  EXPECT_EQ(b.Bin(NAN), b.nan_bin());
  EXPECT_EQ(b.Label(0), "[-1, -0.5)");
  EXPECT_EQ(b.Label(3), "[0.5, 1]");
  EXPECT_EQ(b.Label(b.underflow_bin()), "(-inf, -1)");
  EXPECT_EQ(b.Label(b.overflow_bin()), "(1, +inf)");
  EXPECT_EQ(b.Label(b.nan_bin()), "NaN");
}

TEST(BinningTest, WithMaxWidth) {
  const Binning b = Binning::WithMaxWidth(0.0, 1.0, 0.3);
  EXPECT_EQ(b.inner_bins(), 4);
  EXPECT_LE(b.width(), 0.3);
  EXPECT_EQ(Binning::WithMaxWidth(0.0, 1.0, 0.3, 10).inner_bins(), 10);
}

TEST(IncompleteBetaTest, ClosedForms) {
  // I_x(1, 1) = x; I_x(a, 1) = x^a; I_x(1, b) = 1 - (1 - x)^b.
  EXPECT_NEAR(std::exp(LogRegularizedIncompleteBeta(1, 1, 0.3)), 0.3, 1e-14);
  EXPECT_NEAR(LogRegularizedIncompleteBeta(7, 1, 0.2), 7 * std::log(0.2), 1e-12);
  EXPECT_NEAR(std::exp(LogRegularizedIncompleteBeta(1, 9, 0.85)),
              1 - std::pow(0.15, 9), 1e-14);
  EXPECT_EQ(LogRegularizedIncompleteBeta(2, 3, 0.0), -INFINITY);
  EXPECT_EQ(LogRegularizedIncompleteBeta(2, 3, 1.0), 0.0);
}

TEST(IncompleteBetaTest, BinomialTailsMatchDirectSums) {
  for (int64_t n : {1, 7, 30, 120}) {
    for (double p : {1e-4, 0.03, 0.3, 0.5, 0.77, 0.999}) {
      for (int64_t k = 0; k <= n; ++k) {
        const double up = UpperTailBySum(k, n, p);
        const double down = LowerTailBySum(k, n, p);
        if (up > 1e-280) {
          EXPECT_NEAR(LogBinomialUpperTail(k, n, p), std::log(up), 1e-9)
              << "n=" << n << " k=" << k << " p=" << p;
        }
        if (down > 1e-280) {
          EXPECT_NEAR(LogBinomialLowerTail(k, n, p), std::log(down), 1e-9)
              << "n=" << n << " k=" << k << " p=" << p;
        }
      }
    }
  }
}

TEST(ClopperPearsonTest, ClosedFormsAtTheEnds) {
  const double a = 1e-8;
  const int64_t n = 2'000'000;
  EXPECT_EQ(ClopperPearsonLower(0, n, a), 0.0);
  EXPECT_EQ(ClopperPearsonUpper(n, n, a), 1.0);
  // (1 - U)^n = a for k = 0 and L^n = a for k = n.
  EXPECT_NEAR(ClopperPearsonUpper(0, n, a), -std::expm1(std::log(a) / n), 1e-18);
  EXPECT_NEAR(ClopperPearsonLower(n, n, a), std::exp(std::log(a) / n), 1e-15);
}

TEST(ClopperPearsonTest, TailAtTheBoundEqualsTheLevel) {
  for (int64_t n : {10, 1000, 2'000'000, 10'000'000}) {
    for (double frac : {0.0001, 0.01, 0.37, 0.9}) {
      const int64_t k = std::max<int64_t>(1, static_cast<int64_t>(frac * n));
      for (double a : {0.05, 1e-9}) {
        const double lower = ClopperPearsonLower(k, n, a);
        const double upper = ClopperPearsonUpper(k, n, a);
        EXPECT_LT(lower, static_cast<double>(k) / n);
        EXPECT_GT(upper, static_cast<double>(k) / n);
        // The tail at the bound is a (to 1e-6 relative; 1e-4 when the bound
        // is within 1e-9 of 1, where a double cannot resolve 1 - p finely).
        const double tol = upper > 1 - 1e-9 ? 1e-4 : 1e-6;
        EXPECT_NEAR(LogBinomialUpperTail(k, n, lower), std::log(a), 1e-6)
            << "n=" << n << " k=" << k;
        if (k < n) {
          EXPECT_NEAR(LogBinomialLowerTail(k, n, upper), std::log(a), tol)
              << "n=" << n << " k=" << k;
        }
        // Conservative side: the tail at the returned bound is <= a.
        EXPECT_LE(LogBinomialUpperTail(k, n, lower), std::log(a) + 1e-12);
        EXPECT_LE(LogBinomialLowerTail(k, n, upper), std::log(a) + 1e-12);
      }
    }
  }
}

TEST(ClopperPearsonTest, AtLeastAsTightAsTheChernoffBound) {
  // The Chernoff bound P[X >= k] <= exp(-n KL(k/n || p)) makes the KL
  // interval valid but wider: L_kl <= L_cp and U_cp <= U_kl.
  const int64_t n = 2'000'000;
  const double a = 1e-9;
  for (int64_t k : {20, 5000, 400000, 1500000}) {
    const double q = static_cast<double>(k) / n;
    double lo = 0, hi = q;
    for (int i = 0; i < 200; ++i) {
      const double mid = 0.5 * (lo + hi);
      (n * BernoulliKl(q, mid) > -std::log(a) ? lo : hi) = mid;
    }
    const double lower_kl = hi;
    lo = q, hi = 1;
    for (int i = 0; i < 200; ++i) {
      const double mid = 0.5 * (lo + hi);
      (n * BernoulliKl(q, mid) > -std::log(a) ? hi : lo) = mid;
    }
    const double upper_kl = lo;
    EXPECT_GE(ClopperPearsonLower(k, n, a), lower_kl) << k;
    EXPECT_LE(ClopperPearsonUpper(k, n, a), upper_kl) << k;
    // And not absurdly tighter: within a normal-approximation margin.
    const double sd = std::sqrt(q * (1 - q) / n);
    EXPECT_GT(ClopperPearsonLower(k, n, a), q - 8 * sd - 20.0 / n) << k;
  }
}

TEST(ClopperPearsonTest, ExactCoverage) {
  // P_p[L(X) > p] <= a and P_p[U(X) < p] <= a, summed exactly over X.
  const int64_t n = 60;
  const double a = 0.05;
  std::vector<double> lower(n + 1), upper(n + 1);
  for (int64_t k = 0; k <= n; ++k) {
    lower[k] = ClopperPearsonLower(k, n, a);
    upper[k] = ClopperPearsonUpper(k, n, a);
  }
  for (double p = 0.001; p < 1; p += 0.00731) {
    double miss_low = 0, miss_high = 0;
    for (int64_t k = 0; k <= n; ++k) {
      const double pmf = std::exp(LogBinomialPmf(k, n, p));
      if (lower[k] > p) miss_low += pmf;
      if (upper[k] < p) miss_high += pmf;
    }
    EXPECT_LE(miss_low, a + 1e-12) << "p=" << p;
    EXPECT_LE(miss_high, a + 1e-12) << "p=" << p;
  }
}

TEST(EvaluateCountsTest, FindsTheWorstBinInEitherDirection) {
  PrivacyTestOptions o;
  o.epsilon = std::log(2.0);
  o.samples_per_input = 100000;
  o.outcome_label = [](int64_t i) { return i == 2 ? "two" : "other"; };
  // Bin 2: x' has 4x the mass of x -> fails in the x'/x direction.
  const std::vector<int64_t> x = {50000, 40000, 10000};
  const std::vector<int64_t> xp = {30000, 30000, 40000};
  PrivacyTestResult r = EvaluateCounts(o, x, xp);
  EXPECT_FALSE(r.passed) << r.ToString();
  EXPECT_EQ(r.worst_outcome, 2);
  EXPECT_EQ(r.worst_outcome_label, "two");
  EXPECT_FALSE(r.worst_numerator_is_x);
  EXPECT_EQ(r.worst_count_numerator, 40000);
  EXPECT_EQ(r.worst_count_denominator, 10000);
  EXPECT_DOUBLE_EQ(r.worst_empirical_ratio, 4.0);
  EXPECT_GT(r.worst_ratio_lower_bound, 3.5);
  EXPECT_LT(r.worst_ratio_lower_bound, 4.0);
  EXPECT_EQ(r.outcomes, 3);
  EXPECT_DOUBLE_EQ(r.per_bound_level, 1e-6 / 12);
  EXPECT_NEAR(r.empirical_epsilon, std::log(4.0), 1e-12);
}

TEST(EvaluateCountsTest, ZeroDenominatorWithLargeNumeratorFails) {
  PrivacyTestOptions o;
  o.epsilon = 1.0;
  o.samples_per_input = 1000000;
  const std::vector<int64_t> x = {999000, 1000};
  const std::vector<int64_t> xp = {1000000, 0};
  PrivacyTestResult r = EvaluateCounts(o, x, xp);
  EXPECT_FALSE(r.passed) << r.ToString();
  EXPECT_EQ(r.worst_outcome, 1);
  EXPECT_TRUE(std::isinf(r.worst_empirical_ratio));
}

TEST(EvaluateCountsTest, FewCountsCannotFail) {
  // 3 draws against 0: far too little evidence at level 1e-6.
  PrivacyTestOptions o;
  o.epsilon = 0.1;
  o.samples_per_input = 1000000;
  const std::vector<int64_t> x = {999997, 3};
  const std::vector<int64_t> xp = {1000000, 0};
  EXPECT_TRUE(EvaluateCounts(o, x, xp).passed);
}

TEST(EvaluateCountsTest, InvalidOutcomesFail) {
  PrivacyTestOptions o;
  o.samples_per_input = 10;
  const std::vector<int64_t> x = {5, 5};
  PrivacyTestResult r = EvaluateCounts(o, x, x, /*invalid_outcomes=*/1);
  EXPECT_FALSE(r.passed);
  EXPECT_NE(r.ToString().find("outside [0, 2)"), std::string::npos);
}

// Two Bernoulli samplers: outcome 1 with probability p (input x) or q
// (input x'). The privacy loss is max(ln(p/q), ln((1-q)/(1-p))).
PrivacyTestResult RunBernoulli(double p, double q, double eps, int64_t n,
                               uint64_t seed, double false_alarm = 1e-6) {
  PrivacyTestOptions o;
  o.epsilon = eps;
  o.samples_per_input = n;
  o.seed = seed;
  o.false_alarm_probability = false_alarm;
  auto sx = [p](RandomSource& rng) -> int64_t { return rng.Bernoulli(p); };
  auto sxp = [q](RandomSource& rng) -> int64_t { return rng.Bernoulli(q); };
  return TestPrivacy(o, 2, sx, sxp);
}

TEST(TestPrivacyTest, BernoulliJustBelowTheLimitPasses) {
  // p/q = 0.97 e, (1-q)/(1-p) < e.
  const double q = 0.2;
  const double p = 0.97 * std::exp(1.0) * q;
  const PrivacyTestResult r = RunBernoulli(p, q, 1.0, 400000, 7);
  EXPECT_TRUE(r.passed) << r.ToString();
  EXPECT_EQ(r.worst_outcome, 1);
  EXPECT_TRUE(r.worst_numerator_is_x);
  EXPECT_NEAR(r.worst_empirical_ratio, p / q, 0.05);
}

TEST(TestPrivacyTest, BernoulliAboveTheLimitFails) {
  // p/q = 1.3 e: 30% over budget in the ratio.
  const double q = 0.2;
  const double p = 1.3 * std::exp(1.0) * q;
  const PrivacyTestResult r = RunBernoulli(p, q, 1.0, 400000, 7);
  EXPECT_FALSE(r.passed) << r.ToString();
  EXPECT_EQ(r.worst_outcome, 1);
  EXPECT_GT(r.worst_ratio_lower_bound, std::exp(1.0));
  EXPECT_LT(r.worst_ratio_lower_bound, p / q);
}

TEST(TestPrivacyTest, ViolationOnTheZeroOutcomeIsFoundToo) {
  // (1-q)/(1-p) = e^2 > e^1.5 while p/q is small.
  const double q = 0.5;
  const double p = 1 - std::exp(-2.0) * (1 - q);
  const PrivacyTestResult r = RunBernoulli(p, q, 1.5, 100000, 3);
  EXPECT_FALSE(r.passed) << r.ToString();
  EXPECT_EQ(r.worst_outcome, 0);
  EXPECT_FALSE(r.worst_numerator_is_x);
}

TEST(TestPrivacyTest, SequentialAndParallelAgree) {
  PrivacyTestOptions o;
  o.epsilon = 1.0;
  o.samples_per_input = 10000;
  o.seed = 99;
  auto sx = [](RandomSource& rng) -> int64_t { return rng.UniformInt(5); };
  auto sxp = [](RandomSource& rng) -> int64_t { return rng.UniformInt(4); };
  o.parallel = true;
  const PrivacyTestResult a = TestPrivacy(o, 5, sx, sxp);
  o.parallel = false;
  const PrivacyTestResult b = TestPrivacy(o, 5, sx, sxp);
  EXPECT_EQ(a.ToString(), b.ToString());
  // Outcome 4 never occurs for x': 2000 draws against 0 is a violation.
  EXPECT_FALSE(a.passed);
  EXPECT_EQ(a.worst_outcome, 4);
}

TEST(TestPrivacyTest, OutOfRangeIdsFail) {
  PrivacyTestOptions o;
  o.samples_per_input = 100;
  auto s = [](RandomSource& rng) -> int64_t { return 3; };
  const PrivacyTestResult r = TestPrivacy(o, 3, s, s);
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.invalid_outcomes, 200);
}

TEST(TestPrivacyTest, ContinuousOutputsAreBinnedWithLabels) {
  // Uniform on [0, 1) against uniform on [0, 2): bins in [1, 2) have mass
  // only under x', so the tester fails and names such a bin.
  PrivacyTestOptions o;
  o.epsilon = 2.0;
  o.samples_per_input = 20000;
  const Binning binning(0.0, 2.0, 4);
  auto sx = [](RandomSource& rng) { return rng.UniformDouble(); };
  auto sxp = [](RandomSource& rng) { return 2 * rng.UniformDouble(); };
  const PrivacyTestResult r = TestPrivacy(o, binning, sx, sxp);
  EXPECT_FALSE(r.passed) << r.ToString();
  EXPECT_FALSE(r.worst_numerator_is_x);
  EXPECT_TRUE(r.worst_outcome_label == "[1, 1.5)" ||
              r.worst_outcome_label == "[1.5, 2]")
      << r.worst_outcome_label;
}

TEST(TestPrivacyTest, FalseAlarmRateAtTheLimitIsBelowTheBudget) {
  // A mechanism exactly at the limit (p/q = e^eps) is eps-DP. With a loose
  // false-alarm budget A = 0.2 over 200 seeds, the observed failure rate must
  // stay below A (the Bonferroni bound is conservative, so it is far below).
  const double eps = 1.0;
  const double q = 0.15;
  const double p = std::exp(eps) * q;
  int failures = 0;
  const int runs = 200;
  for (int seed = 0; seed < runs; ++seed) {
    if (!RunBernoulli(p, q, eps, 20000, 1000 + seed, 0.2).passed) ++failures;
  }
  EXPECT_LE(failures, 0.2 * runs);
}

}  // namespace
}  // namespace ldpgraph::testing_privacy
