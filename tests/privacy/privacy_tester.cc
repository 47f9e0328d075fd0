#include "tests/privacy/privacy_tester.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ldpgraph::testing_privacy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A misuse of the tester by a test (not a mechanism failure): stop loudly.
void Require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "privacy_tester: requirement violated: %s\n", what);
    std::abort();
  }
}

// The continued fraction of I_x(a, b) (Numerical Recipes' betacf, modified
// Lentz): I_x(a, b) = x^a y^b / (a B(a, b)) * BetaContinuedFraction(a, b, x),
// y = 1 - x. Converges quickly for x < (a + 1) / (a + b + 2), in O(sqrt(max(a,
// b))) iterations in the worst case.
double BetaContinuedFraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300;
  constexpr double kTolerance = 1e-15;
  const double qab = a + b;
  const double qap = a + 1.0;
  const double qam = a - 1.0;
  double c = 1.0;
  double d = 1.0 - qab * x / qap;
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1.0 / d;
  double h = d;
  const int64_t max_iterations =
      100000 + 100 * static_cast<int64_t>(std::sqrt(std::max(a, b)));
  for (int64_t m = 1; m <= max_iterations; ++m) {
    const double md = static_cast<double>(m);
    const double m2 = 2.0 * md;
    double aa = md * (b - md) * x / ((qam + m2) * (a + m2));
    d = 1.0 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1.0 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    h *= d * c;
    aa = -(a + md) * (qab + md) * x / ((a + m2) * (qap + m2));
    d = 1.0 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1.0 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1.0) < kTolerance) return h;
  }
  Require(false, "incomplete beta continued fraction did not converge");
  return h;
}

// ln I_x(a, b) with y = 1 - x supplied exactly by the caller, so that a tail
// near p = 0 or p = 1 keeps its relative precision.
double LogIBeta(double a, double b, double x, double y) {
  if (x <= 0.0) return -kInf;
  if (y <= 0.0) return 0.0;
  const double log_front = std::lgamma(a + b) - std::lgamma(a) -
                           std::lgamma(b) + a * std::log(x) + b * std::log(y);
  if (x < (a + 1.0) / (a + b + 2.0)) {
    return log_front + std::log(BetaContinuedFraction(a, b, x) / a);
  }
  // I_x(a, b) = 1 - I_y(b, a).
  const double complement =
      std::exp(log_front + std::log(BetaContinuedFraction(b, a, y) / b));
  return std::log1p(-std::min(complement, 1.0));
}

// Bisection for the p in [lo, hi] where an increasing (increasing = true) or
// decreasing function of p crosses the level target. Returns the end of the
// final interval on the side where f(p) <= target.
template <typename F>
double Bisect(F f, double lo, double hi, double target, bool increasing) {
  for (int i = 0; i < 200; ++i) {
    if (hi - lo <= 1e-14 * hi) break;
    const double mid = 0.5 * (lo + hi);
    if (mid <= lo || mid >= hi) break;
    const bool below = f(mid) <= target;
    // Increasing f: below means the crossing is to the right.
    if (below == increasing) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return increasing ? lo : hi;
}

std::string DefaultLabel(int64_t outcome) { return absl::StrCat("#", outcome); }

}  // namespace

// --- Binning ---------------------------------------------------------------

Binning::Binning(double lo, double hi, int bins)
    : lo_(lo), hi_(hi), bins_(bins), width_((hi - lo) / bins) {
  Require(std::isfinite(lo) && std::isfinite(hi) && lo < hi,
          "Binning needs finite lo < hi");
  Require(bins >= 1, "Binning needs at least one bin");
}

Binning Binning::WithMaxWidth(double lo, double hi, double max_width,
                              int min_bins) {
  Require(max_width > 0, "Binning::WithMaxWidth needs max_width > 0");
  const double n = std::ceil((hi - lo) / max_width);
  Require(n < 1e7, "Binning::WithMaxWidth: too many bins");
  return Binning(lo, hi, std::max(min_bins, std::max(1, static_cast<int>(n))));
}

int Binning::Bin(double value) const {
  if (std::isnan(value)) return nan_bin();
  if (value < lo_) return underflow_bin();
  if (value > hi_) return overflow_bin();
  const double i = std::floor((value - lo_) / width_);
  return static_cast<int>(std::clamp(i, 0.0, static_cast<double>(bins_ - 1)));
}

std::string Binning::Label(int bin) const {
  if (bin == underflow_bin()) return absl::StrFormat("(-inf, %.6g)", lo_);
  if (bin == overflow_bin()) return absl::StrFormat("(%.6g, +inf)", hi_);
  if (bin == nan_bin()) return "NaN";
  if (bin < 0 || bin > nan_bin()) return absl::StrCat("invalid bin ", bin);
  const double left = lo_ + bin * width_;
  const double right = bin == bins_ - 1 ? hi_ : lo_ + (bin + 1) * width_;
  return absl::StrFormat("[%.6g, %.6g%c", left, right,
                         bin == bins_ - 1 ? ']' : ')');
}

// --- exact binomial statistics ----------------------------------------------

double LogRegularizedIncompleteBeta(double a, double b, double x) {
  Require(a > 0 && b > 0, "incomplete beta needs a, b > 0");
  return LogIBeta(a, b, x, 1.0 - x);
}

double LogBinomialUpperTail(int64_t k, int64_t n, double p) {
  if (k <= 0) return 0.0;
  if (k > n) return -kInf;
  // P[X >= k] = I_p(k, n - k + 1).
  return LogIBeta(static_cast<double>(k), static_cast<double>(n - k + 1), p,
                  1.0 - p);
}

double LogBinomialLowerTail(int64_t k, int64_t n, double p) {
  if (k >= n) return 0.0;
  if (k < 0) return -kInf;
  // P[X <= k] = I_{1-p}(n - k, k + 1).
  return LogIBeta(static_cast<double>(n - k), static_cast<double>(k + 1),
                  1.0 - p, p);
}

double ClopperPearsonLower(int64_t k, int64_t n, double a) {
  Require(n >= 1 && k >= 0 && k <= n, "Clopper-Pearson needs 0 <= k <= n");
  Require(a > 0 && a < 1, "Clopper-Pearson needs 0 < a < 1");
  if (k == 0) return 0.0;
  const double log_a = std::log(a);
  if (k == n) return std::exp(log_a / static_cast<double>(n));  // p^n = a
  // P[X >= k | p] increases with p; at p = k/n it is about 1/2 > a.
  double hi = static_cast<double>(k) / static_cast<double>(n);
  if (LogBinomialUpperTail(k, n, hi) <= log_a) hi = 1.0;
  return Bisect([&](double p) { return LogBinomialUpperTail(k, n, p); }, 0.0,
                hi, log_a, /*increasing=*/true);
}

double ClopperPearsonUpper(int64_t k, int64_t n, double a) {
  Require(n >= 1 && k >= 0 && k <= n, "Clopper-Pearson needs 0 <= k <= n");
  Require(a > 0 && a < 1, "Clopper-Pearson needs 0 < a < 1");
  if (k == n) return 1.0;
  const double log_a = std::log(a);
  if (k == 0) return -std::expm1(log_a / static_cast<double>(n));  // (1-p)^n = a
  // P[X <= k | p] decreases with p.
  double lo = static_cast<double>(k) / static_cast<double>(n);
  if (LogBinomialLowerTail(k, n, lo) <= log_a) lo = 0.0;
  return Bisect([&](double p) { return LogBinomialLowerTail(k, n, p); }, lo,
                1.0, log_a, /*increasing=*/false);
}

// --- the test ---------------------------------------------------------------

std::string PrivacyTestResult::ToString() const {
  std::string s = absl::StrFormat(
      "%s: eps=%g (e^eps=%.6g), N=%d per input, %d outcomes (%d seen), "
      "per-bound level %.3g",
      passed ? "PASS" : "FAIL", epsilon, threshold, samples_per_input,
      outcomes, outcomes_seen, per_bound_level);
  if (invalid_outcomes > 0) {
    absl::StrAppendFormat(&s, "; %d draws had an outcome id outside [0, %d)",
                          invalid_outcomes, outcomes);
  }
  if (worst_outcome >= 0) {
    absl::StrAppendFormat(
        &s,
        "; worst outcome %d %s, P[%s]/P[%s]: counts %d / %d, empirical ratio "
        "%.6g (ln %.4g), lower confidence bound on the ratio %.6g (ln %.4g) "
        "vs limit %.6g",
        worst_outcome, worst_outcome_label, worst_numerator_is_x ? "x" : "x'",
        worst_numerator_is_x ? "x'" : "x", worst_count_numerator,
        worst_count_denominator, worst_empirical_ratio,
        std::log(worst_empirical_ratio), worst_ratio_lower_bound,
        std::log(worst_ratio_lower_bound), threshold);
  }
  absl::StrAppendFormat(&s, "; empirical eps (bins with counts >= 1000) %.4g",
                        empirical_epsilon);
  return s;
}

PrivacyTestResult EvaluateCounts(const PrivacyTestOptions& options,
                                 absl::Span<const int64_t> counts_x,
                                 absl::Span<const int64_t> counts_x_prime,
                                 int64_t invalid_outcomes) {
  Require(counts_x.size() == counts_x_prime.size(),
          "EvaluateCounts needs count vectors of equal length");
  Require(!counts_x.empty(), "EvaluateCounts needs at least one outcome");
  Require(options.epsilon > 0 && std::isfinite(options.epsilon),
          "epsilon must be finite and > 0");
  Require(options.samples_per_input >= 1, "samples_per_input must be >= 1");
  Require(options.false_alarm_probability > 0 &&
              options.false_alarm_probability < 1,
          "false_alarm_probability must be in (0, 1)");
  const int64_t n = options.samples_per_input;
  const int64_t k_outcomes = static_cast<int64_t>(counts_x.size());

  PrivacyTestResult r;
  r.epsilon = options.epsilon;
  r.threshold = std::exp(options.epsilon);
  r.samples_per_input = n;
  r.outcomes = k_outcomes;
  r.per_bound_level =
      options.false_alarm_probability / (4.0 * static_cast<double>(k_outcomes));
  r.invalid_outcomes = invalid_outcomes;

  struct Candidate {
    int64_t outcome;
    bool numerator_is_x;
    int64_t k;        // numerator count
    int64_t k_prime;  // denominator count
    double empirical;
  };
  std::vector<Candidate> candidates;
  for (int64_t i = 0; i < k_outcomes; ++i) {
    const int64_t cx = counts_x[i];
    const int64_t cxp = counts_x_prime[i];
    Require(cx >= 0 && cx <= n && cxp >= 0 && cxp <= n,
            "counts must lie in [0, samples_per_input]");
    if (cx > 0 || cxp > 0) ++r.outcomes_seen;
    if (cx >= 1000 && cxp >= 1000) {
      r.empirical_epsilon =
          std::max(r.empirical_epsilon,
                   std::fabs(std::log(static_cast<double>(cx) / cxp)));
    }
    // A zero numerator has lower bound 0: nothing to test.
    if (cx > 0) {
      candidates.push_back(
          {i, true, cx, cxp, cxp > 0 ? static_cast<double>(cx) / cxp : kInf});
    }
    if (cxp > 0) {
      candidates.push_back(
          {i, false, cxp, cx, cx > 0 ? static_cast<double>(cxp) / cx : kInf});
    }
  }
  // L(k) <= k/n and U(k') >= k'/n, so a candidate's bound never exceeds its
  // empirical ratio: visiting candidates by decreasing empirical ratio, stop
  // once no remaining one can beat the worst bound found.
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) {
              if (a.empirical != b.empirical) return a.empirical > b.empirical;
              return a.k > b.k;
            });
  double worst = -1.0;
  for (const Candidate& c : candidates) {
    if (c.empirical <= worst) break;
    const double lower = ClopperPearsonLower(c.k, n, r.per_bound_level);
    const double upper = ClopperPearsonUpper(c.k_prime, n, r.per_bound_level);
    const double bound = lower / upper;
    if (bound > worst) {
      worst = bound;
      r.worst_outcome = c.outcome;
      r.worst_numerator_is_x = c.numerator_is_x;
      r.worst_count_numerator = c.k;
      r.worst_count_denominator = c.k_prime;
      r.worst_empirical_ratio = c.empirical;
      r.worst_ratio_lower_bound = bound;
    }
  }
  if (r.worst_outcome >= 0) {
    r.worst_outcome_label = options.outcome_label
                                ? options.outcome_label(r.worst_outcome)
                                : DefaultLabel(r.worst_outcome);
  }
  r.passed = invalid_outcomes == 0 && r.worst_ratio_lower_bound <= r.threshold;
  return r;
}

PrivacyTestResult TestPrivacy(const PrivacyTestOptions& options,
                              int64_t num_outcomes, OutcomeSampler sample_x,
                              OutcomeSampler sample_x_prime) {
  Require(num_outcomes >= 1, "TestPrivacy needs at least one outcome");
  Require(options.samples_per_input >= 1, "samples_per_input must be >= 1");
  const int64_t n = options.samples_per_input;
  std::vector<int64_t> counts_x(num_outcomes, 0);
  std::vector<int64_t> counts_x_prime(num_outcomes, 0);
  int64_t invalid_x = 0;
  int64_t invalid_x_prime = 0;

  auto run = [n, num_outcomes](OutcomeSampler sampler, uint64_t seed,
                               std::vector<int64_t>& counts,
                               int64_t& invalid) {
    SeededRandomForTesting rng(seed);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = sampler(rng);
      if (id >= 0 && id < num_outcomes) {
        ++counts[id];
      } else {
        ++invalid;
      }
    }
  };
  // Two generators from the one seed; splitmix64 inside the generator
  // decorrelates the neighbouring seeds.
  const uint64_t seed_x = options.seed;
  const uint64_t seed_x_prime = options.seed ^ 0x9e3779b97f4a7c15ULL;
  if (options.parallel) {
    std::thread other(
        [&] { run(sample_x_prime, seed_x_prime, counts_x_prime, invalid_x_prime); });
    run(sample_x, seed_x, counts_x, invalid_x);
    other.join();
  } else {
    run(sample_x, seed_x, counts_x, invalid_x);
    run(sample_x_prime, seed_x_prime, counts_x_prime, invalid_x_prime);
  }
  return EvaluateCounts(options, counts_x, counts_x_prime,
                        invalid_x + invalid_x_prime);
}

PrivacyTestResult TestPrivacy(const PrivacyTestOptions& options,
                              const Binning& binning, ValueSampler sample_x,
                              ValueSampler sample_x_prime) {
  PrivacyTestOptions o = options;
  if (!o.outcome_label) {
    o.outcome_label = [binning](int64_t bin) {
      return binning.Label(static_cast<int>(bin));
    };
  }
  auto binned_x = [&](RandomSource& rng) -> int64_t {
    return binning.Bin(sample_x(rng));
  };
  auto binned_x_prime = [&](RandomSource& rng) -> int64_t {
    return binning.Bin(sample_x_prime(rng));
  };
  return TestPrivacy(o, binning.size(), binned_x, binned_x_prime);
}

}  // namespace ldpgraph::testing_privacy
