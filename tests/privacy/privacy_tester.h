// A statistical tester that tries to falsify the claim "this mechanism is
// epsilon-LDP" from samples, in the spirit of Google's differential-privacy
// library (cc/testing/stochastic_tester.h), and the exact binomial confidence
// bounds it rests on.
//
// What it does. Given two samplers, one that runs the mechanism on an input x
// and one on a neighbouring input x', each mapping the output to an outcome
// id in [0, K) (a discrete outcome, or a bin of a Binning for a continuous
// output), the tester draws N outputs for each input from seeded generators
// (SeededRandomForTesting: reproducible, not private) and counts outcomes. If
// the mechanism is eps-LDP then for every outcome set S,
//   P[M(x) in S] <= e^eps P[M(x') in S]   and   P[M(x') in S] <= e^eps P[M(x) in S].
// The tester checks both inequalities for each single outcome id.
//
// Statistical method. For a bin with counts k (numerator input) and k'
// (denominator input), each out of N, it computes the one-sided
// Clopper-Pearson ("exact") lower confidence bound L(k) of the numerator's
// probability and the one-sided Clopper-Pearson upper confidence bound U(k')
// of the denominator's probability, each at level 1 - a, and declares a
// violation when
//   L(k) > e^eps U(k').
// If the mechanism satisfies the inequality for that bin (p <= e^eps p'),
// a violation can only be declared when L(k) > p or U(k') < p', which has
// probability at most 2a. With K bins and two directions, a = A / (4 K)
// (Bonferroni), so the probability of failing an eps-LDP mechanism is at most
// A = PrivacyTestOptions::false_alarm_probability (default 1e-6), whatever
// the mechanism and whatever N. The bounds are computed exactly from the
// regularized incomplete beta function (no normal approximation), so the
// guarantee also holds for tiny counts.
//
// Bins are neither merged nor chosen after looking at the samples: the
// binning is fixed in advance from public parameters. A bin whose numerator
// count is 0 has L = 0 and cannot fail: in effect it is skipped (it is still
// counted in K, so skipping never inflates the false-alarm probability).
//
// What it cannot detect.
//  * Violations confined to outcome sets of small probability: a bin of
//    probability p under the numerator input yields evidence only once
//    N p is large compared with ln(1/a) (about 20 for K ~ 100); with N = 2e6
//    a leak of mass below ~1e-5 per bin is invisible, and the ratio a bin can
//    certify is limited by the precision of the denominator's count (roughly
//    e^eps (1 + 6/sqrt(N p')) must be exceeded).
//  * Violations inside a bin: the tester sees bin probabilities, which are
//    averages of the density over the bin. A density ratio above e^eps on a
//    sub-interval narrower than a bin, or one compensated elsewhere in the same
//    bin, is washed out. Choose bins narrower than the features of the
//    mechanism (e.g. a quarter of the square wave's window).
//  * Violations only for input pairs or outcome sets (unions of bins) that
//    are not tested: the tester checks the pair it is given and single bins.
//  * Floating-point channels finer than the bins (Mironov 2012): a leak
//    through which doubles can occur needs an exact test on the support.
//  * Anything the seeded generator cannot show: the tester exercises the
//    mechanism's logic, not the quality of the production randomness.
//
// Thread safety: TestPrivacy may call the two samplers concurrently from two
// threads (options.parallel); each sampler must then be safe to call while
// the other runs. Each sampler receives its own generator.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "common/random/random.h"

namespace ldpgraph::testing_privacy {

// Equal-width bins over [lo, hi] for a continuous output, fixed in advance
// from public parameters (never from samples), plus three extra bins: values
// below lo (an open-ended tail), values above hi (an open-ended tail), and
// NaN. Bin i in [0, bins) is [lo + i w, lo + (i + 1) w), the last one closed
// at hi; w = (hi - lo) / bins. Immutable; thread-safe.
class Binning {
 public:
  // lo < hi, both finite; bins >= 1 (checked: a test bug, not a mechanism
  // failure).
  Binning(double lo, double hi, int bins);

  // Bins of width at most max_width covering [lo, hi]: ceil((hi - lo) /
  // max_width) of them, and at least min_bins.
  static Binning WithMaxWidth(double lo, double hi, double max_width,
                              int min_bins = 1);

  // Total number of outcome ids, bins + 3.
  int size() const { return bins_ + 3; }
  int inner_bins() const { return bins_; }
  double lo() const { return lo_; }
  double hi() const { return hi_; }
  double width() const { return width_; }
  int underflow_bin() const { return bins_; }
  int overflow_bin() const { return bins_ + 1; }
  int nan_bin() const { return bins_ + 2; }

  // The bin of a value.
  int Bin(double value) const;
  // "[-1.25, -1)", "(-inf, -3)", "(3, +inf)", "NaN".
  std::string Label(int bin) const;

 private:
  double lo_;
  double hi_;
  int bins_;
  double width_;
};

struct PrivacyTestOptions {
  // The epsilon the mechanism claims, > 0.
  double epsilon = 1.0;
  // N: draws for each of the two inputs.
  int64_t samples_per_input = 1'000'000;
  // Seed of the two SeededRandomForTesting generators (one per input,
  // derived from this seed).
  uint64_t seed = 1;
  // A: upper bound on the probability that an eps-LDP mechanism fails.
  double false_alarm_probability = 1e-6;
  // Sample the two inputs on two threads.
  bool parallel = true;
  // Optional names for outcome ids in the result (e.g. a Binning's Label).
  std::function<std::string(int64_t)> outcome_label;
};

// The verdict and the bin that came closest to (or went furthest past) the
// limit, so that a failure says where and by how much.
struct PrivacyTestResult {
  // True when no bin gave significant evidence of a ratio above e^eps and
  // every outcome id was in range.
  bool passed = true;

  double epsilon = 0;
  // e^eps.
  double threshold = 0;
  int64_t samples_per_input = 0;
  // K, the number of outcome ids (bins).
  int64_t outcomes = 0;
  // Bins with a non-zero count for at least one input.
  int64_t outcomes_seen = 0;
  // a: the level of each one-sided confidence bound, A / (4 K).
  double per_bound_level = 0;
  // Draws whose outcome id was outside [0, K): a bug in the sampler or an
  // output outside the domain the test declared; fails the test.
  int64_t invalid_outcomes = 0;

  // The (bin, direction) with the largest lower confidence bound on the
  // probability ratio P[numerator input in bin] / P[denominator input in bin].
  int64_t worst_outcome = -1;
  std::string worst_outcome_label;
  // True when the numerator is x (the first sampler), false when it is x'.
  bool worst_numerator_is_x = true;
  int64_t worst_count_numerator = 0;
  int64_t worst_count_denominator = 0;
  // k / k' (infinity when k' = 0).
  double worst_empirical_ratio = 0;
  // L(k) / U(k'): the ratio the data prove at confidence 1 - 2a. The test
  // fails when it exceeds threshold.
  double worst_ratio_lower_bound = 0;

  // Diagnostic only, not used for the verdict: the largest |ln(k / k')| over
  // bins where both counts are at least 1000.
  double empirical_epsilon = 0;

  // One line: verdict, parameters and the worst bin.
  std::string ToString() const;
};

// Draws one output of the mechanism on a fixed input and returns its outcome
// id (in [0, K)).
using OutcomeSampler = absl::FunctionRef<int64_t(RandomSource&)>;
// Draws one continuous output of the mechanism on a fixed input.
using ValueSampler = absl::FunctionRef<double(RandomSource&)>;

// Tests a mechanism with K = num_outcomes discrete outcome ids.
PrivacyTestResult TestPrivacy(const PrivacyTestOptions& options,
                              int64_t num_outcomes, OutcomeSampler sample_x,
                              OutcomeSampler sample_x_prime);

// Tests a mechanism with a continuous output, binned by binning. Fills in
// outcome labels from the binning unless options.outcome_label is set.
PrivacyTestResult TestPrivacy(const PrivacyTestOptions& options,
                              const Binning& binning, ValueSampler sample_x,
                              ValueSampler sample_x_prime);

// The decision on given counts (each vector of length K, counts out of
// samples_per_input): the statistics of TestPrivacy without the sampling.
PrivacyTestResult EvaluateCounts(const PrivacyTestOptions& options,
                                 absl::Span<const int64_t> counts_x,
                                 absl::Span<const int64_t> counts_x_prime,
                                 int64_t invalid_outcomes = 0);

// --- exact binomial statistics (exposed for their tests) ---

// ln I_x(a, b), the regularized incomplete beta function, for a, b > 0 and x
// in [0, 1]; by continued fraction (modified Lentz), accurate in the tails.
double LogRegularizedIncompleteBeta(double a, double b, double x);

// ln P[X >= k] for X ~ Binomial(n, p).
double LogBinomialUpperTail(int64_t k, int64_t n, double p);
// ln P[X <= k] for X ~ Binomial(n, p).
double LogBinomialLowerTail(int64_t k, int64_t n, double p);

// One-sided Clopper-Pearson bounds at level 1 - a, for k successes out of n
// (0 <= k <= n, n >= 1, 0 < a < 1). Lower: the p with P[X >= k | p] = a
// (0 when k = 0), so that P_p[ClopperPearsonLower(X) > p] <= a for every p.
// Upper: the p with P[X <= k | p] = a (1 when k = n). Found by bisection on
// the exact tail; the conservative end of the final interval is returned (the
// lower bound is never above, the upper never below, the exact value, up to
// the ~1e-12 relative accuracy of the incomplete beta function).
double ClopperPearsonLower(int64_t k, int64_t n, double a);
double ClopperPearsonUpper(int64_t k, int64_t n, double a);

}  // namespace ldpgraph::testing_privacy
