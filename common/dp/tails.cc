#include "common/dp/tails.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ldpgraph {
namespace {

// log C(n, k).
double LogChoose(double n, double k) {
  return std::lgamma(n + 1) - std::lgamma(k + 1) - std::lgamma(n - k + 1);
}

// Terms of the binomial tail are summed until they fall this far (in log)
// below the level; the rest is bounded geometrically.
constexpr double kLogMargin = 40.0;

}  // namespace

uint64_t BinomialUpperQuantile(uint64_t n, double p, double level) {
  if (n == 0 || p <= 0) return 0;
  if (p >= 1) return n;
  const double mean = n * p, sd = std::sqrt(mean * (1 - p));
  // Below mean - 10 sd the lower tail is < e^-50: P(X >= start) is 1 for any
  // level this is asked about, so the quantile lies above start.
  const uint64_t start = static_cast<uint64_t>(std::max(0.0, mean - 10 * sd));
  const double lp = std::log(p), lq = std::log1p(-p);
  const double log_level = std::log(level);
  std::vector<double> pmf;  // pmf[i] = P(X = start + i)
  double rest = 0;          // bound on P(X > start + pmf.size() - 1)
  for (uint64_t i = start;; ++i) {
    const double lpmf = LogChoose(static_cast<double>(n), static_cast<double>(i)) +
                        i * lp + (n - i) * lq;
    pmf.push_back(std::exp(lpmf));
    if (i == n) break;
    // Past the mode the ratio pmf(i+1)/pmf(i) falls with i: the terms left
    // out are at most pmf(i) r / (1 - r), r the ratio at i.
    const double r = static_cast<double>(n - i) / (i + 1) * p / (1 - p);
    if (i > mean && r < 1 && lpmf < log_level - kLogMargin) {
      rest = pmf.back() * r / (1 - r);
      break;
    }
  }
  // Walk down from the top: tail = P(X > start + i).
  double tail = rest;
  uint64_t t = start + pmf.size() - 1;
  for (size_t i = pmf.size() - 1; i > 0; --i) {
    const double above = tail + pmf[i];  // P(X > start + i - 1)
    if (above > level) break;
    tail = above;
    t = start + i - 1;
  }
  return t;
}

double PoissonTailAbove(double lambda, uint64_t t) {
  double below = 0;
  for (uint64_t i = 0; i <= t; ++i) {
    below += std::exp(i * std::log(lambda) - lambda - std::lgamma(i + 1.0));
  }
  return std::max(0.0, 1.0 - below);
}

double HypergeometricTailAtLeast(int d, int m, int k, int h) {
  const int top = std::min(m, k);
  if (h <= std::max(0, k - (d - m))) return 1.0;
  double sum = 0;
  const double total = LogChoose(d, k);
  for (int j = h; j <= top; ++j) {
    sum += std::exp(LogChoose(m, j) + LogChoose(d - m, k - j) - total);
  }
  return std::min(1.0, sum);
}

}  // namespace ldpgraph
