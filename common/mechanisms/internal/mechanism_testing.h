// Test-only helpers shared by the mechanism tests
// (common/mechanisms/*_test.cc). They record googletest failures, so include
// this header from tests only, never from library code. Header-only: no
// CMake target; a test links ldpgraph::common and gtest/gmock as before.
//
// What each helper checks:
//  * ExpectRelNear(actual, expected, rel): |actual - expected| <=
//    rel * |expected| (default rel = 1e-12), for values with a closed form.
//  * ExpectInvalidArgument(status, substring): the status code is
//    INVALID_ARGUMENT and the message contains substring.
//  * OkOrNull(created): a StatusOr<unique_ptr<T>> from a factory is OK (a
//    non-fatal failure otherwise); returns the pointer, or nullptr, so the
//    caller can ASSERT_NE(ptr, nullptr).
//  * ExpectMomentFormulas(m, x, mean, variance, mean_floor): the closed-form
//    moments of the mechanism at x, m.EstimateMean(x) within
//    1e-12 * max(mean_floor, |mean|) of mean and m.EstimateVariance(x) within
//    relative 1e-12 of variance.
//  * SampleEstimateMoments(m, x, seed, draws, dimension): no check of its own
//    beyond Perturb/Estimate succeeding; draws reports of x from a
//    SeededRandomForTesting(seed), Estimates each and returns the empirical
//    mean and the second and fourth central moments of one dimension's
//    estimate (nullopt, with a failure recorded, if a call fails).
//  * ExpectEstimateMoments(m, x, seed, draws, mean, variance, dimension): the
//    same sample, then the empirical mean within 5 standard errors
//    (5 sqrt(variance / draws)) of mean, and m2 within
//    5 sqrt((m4 - m2^2) / draws) of variance.
//  * SeededReport(m, x, seed) / SeededReportBits(m, x, seed, reports): no
//    check beyond Perturb succeeding; the report(s) of x from a fresh
//    SeededRandomForTesting(seed), for tests that compare the reports of two
//    inputs under the same seed (e.g. clipping).
//  * MomentCase: one row of a moment-test table of a k-of-d mechanism
//    (d, k, eps, [alpha, beta], x), with a PrintTo for readable failures.
//
// The helpers use EXPECT_* / ADD_FAILURE only, so they return normally after
// a failure; a test that must stop checks the returned value (or
// HasFailure()) itself.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/random/random.h"

namespace ldpgraph::testing_util {

// |actual - expected| <= rel * |expected|.
inline void ExpectRelNear(double actual, double expected, double rel = 1e-12) {
  EXPECT_NEAR(actual, expected, rel * std::abs(expected))
      << "actual " << actual << ", expected " << expected;
}

// The status is INVALID_ARGUMENT and its message contains substring.
inline void ExpectInvalidArgument(const absl::Status& status,
                                  absl::string_view substring) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), ::testing::HasSubstr(substring));
}

// The object a factory created, or nullptr (with a failure recorded) when
// the factory returned an error.
template <typename T>
std::unique_ptr<T> OkOrNull(absl::StatusOr<std::unique_ptr<T>> created) {
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? std::move(*created) : nullptr;
}

// The closed-form moments at x: EstimateMean(x) within
// 1e-12 * max(mean_floor, |mean|) of mean (the floor keeps a mean near 0
// from demanding an absolute error near 0), EstimateVariance(x) within
// relative 1e-12 of variance.
inline void ExpectMomentFormulas(const FeatureMechanism& m, double x,
                                 double mean, double variance,
                                 double mean_floor = 1.0) {
  EXPECT_NEAR(m.EstimateMean(x), mean,
              1e-12 * std::max(mean_floor, std::abs(mean)));
  ExpectRelNear(m.EstimateVariance(x), variance);
}

// Empirical moments of one dimension's estimate over `draws` reports.
struct EmpiricalMoments {
  double mean = NAN;
  double m2 = NAN;  // second central moment (biased, divided by draws)
  double m4 = NAN;  // fourth central moment (divided by draws)
};

// Perturbs x `draws` times with one SeededRandomForTesting(seed), Estimates
// every report and collects the estimate of `dimension`. Records a failure
// and returns nullopt if Perturb or Estimate fails.
inline std::optional<EmpiricalMoments> SampleEstimateMoments(
    const FeatureMechanism& m, absl::Span<const double> x, uint64_t seed,
    int draws, int dimension = 0) {
  if (dimension < 0 || dimension >= m.dimension()) {
    ADD_FAILURE() << "dimension " << dimension << " is out of range [0, "
                  << m.dimension() << ")";
    return std::nullopt;
  }
  SeededRandomForTesting rng(seed);
  std::vector<double> out(m.dimension()), samples(draws);
  for (int i = 0; i < draws; ++i) {
    auto r = m.Perturb(x, rng);
    if (!r.ok()) {
      ADD_FAILURE() << "Perturb failed at draw " << i << ": " << r.status();
      return std::nullopt;
    }
    const absl::Status estimated = m.Estimate(*r, absl::MakeSpan(out));
    if (!estimated.ok()) {
      ADD_FAILURE() << "Estimate failed at draw " << i << ": " << estimated;
      return std::nullopt;
    }
    samples[i] = out[dimension];
  }
  EmpiricalMoments s;
  double sum = 0;
  for (double v : samples) sum += v;
  s.mean = sum / draws;
  double m2 = 0, m4 = 0;
  for (double v : samples) {
    const double d2 = (v - s.mean) * (v - s.mean);
    m2 += d2;
    m4 += d2 * d2;
  }
  s.m2 = m2 / draws;
  s.m4 = m4 / draws;
  return s;
}

// Samples as SampleEstimateMoments, then checks the empirical mean against
// mean within 5 sqrt(variance / draws) and m2 against variance within
// 5 sqrt((m4 - m2^2) / draws), m4 estimating the spread of m2.
inline void ExpectEstimateMoments(const FeatureMechanism& m,
                                  absl::Span<const double> x, uint64_t seed,
                                  int draws, double mean, double variance,
                                  int dimension = 0) {
  const std::optional<EmpiricalMoments> s =
      SampleEstimateMoments(m, x, seed, draws, dimension);
  if (!s.has_value()) return;
  EXPECT_NEAR(s->mean, mean, 5 * std::sqrt(variance / draws));
  EXPECT_NEAR(s->m2, variance, 5 * std::sqrt((s->m4 - s->m2 * s->m2) / draws));
}

// The report of x from a fresh SeededRandomForTesting(seed); an empty
// report, with a failure recorded, if Perturb fails.
inline SparseReport SeededReport(const FeatureMechanism& m,
                                 absl::Span<const double> x, uint64_t seed) {
  SeededRandomForTesting rng(seed);
  auto r = m.Perturb(x, rng);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : SparseReport{};
}

// The bits of `reports` successive reports of x from one
// SeededRandomForTesting(seed), concatenated; a failed Perturb records a
// failure and contributes no bits.
inline std::vector<bool> SeededReportBits(const FeatureMechanism& m,
                                          absl::Span<const double> x,
                                          uint64_t seed, int reports) {
  SeededRandomForTesting rng(seed);
  std::vector<bool> all;
  for (int i = 0; i < reports; ++i) {
    auto r = m.Perturb(x, rng);
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) all.insert(all.end(), r->bits.begin(), r->bits.end());
  }
  return all;
}

// A moment-test case of a mechanism reporting k of d dimensions with budget
// eps on the feature range [alpha, beta], at true value x.
struct MomentCase {
  int d, k;
  double eps, alpha, beta, x;
};

inline void PrintTo(const MomentCase& c, std::ostream* os) {
  *os << "d=" << c.d << " k=" << c.k << " eps=" << c.eps << " range=["
      << c.alpha << "," << c.beta << "] x=" << c.x;
}

}  // namespace ldpgraph::testing_util
