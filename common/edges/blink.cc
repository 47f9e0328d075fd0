#include "common/edges/blink.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ldpgraph::edges {
namespace {

constexpr double kBetaLimit = 50.0;

double Sigmoid(double t) {
  return t >= 0 ? 1.0 / (1.0 + std::exp(-t)) : std::exp(t) / (1.0 + std::exp(t));
}

// 1 / (a + b) summed over a, four accumulators (independent additions).
double SumInverse(const double* m, const double* a, size_t count, double b) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t k = 0;
  for (; k + 4 <= count; k += 4) {
    s0 += m[k] / (a[k] + b);
    s1 += m[k + 1] / (a[k + 1] + b);
    s2 += m[k + 2] / (a[k + 2] + b);
    s3 += m[k + 3] / (a[k + 3] + b);
  }
  for (; k < count; ++k) s0 += m[k] / (a[k] + b);
  return (s0 + s1) + (s2 + s3);
}

PairSumResult ExactSums(absl::Span<const double> a,
                        absl::Span<const double> b) {
  const size_t n = a.size();
  PairSumResult out;
  out.sums.resize(n);
  const std::vector<double> ones(n, 1.0);
  for (size_t i = 0; i < n; ++i) {
    out.sums[i] = SumInverse(ones.data(), a.data(), i, b[i]) +
                  SumInverse(ones.data() + i + 1, a.data() + i + 1,
                             n - i - 1, b[i]);
  }
  return out;
}

PairSumResult HistogramSums(absl::Span<const double> beta,
                            absl::Span<const double> a,
                            absl::Span<const double> b, int bins) {
  const size_t n = beta.size();
  const auto [lo_it, hi_it] = std::minmax_element(beta.begin(), beta.end());
  const double lo = *lo_it, hi = *hi_it;
  const double width = (hi - lo) / bins;
  std::vector<double> count(bins, 0.0), sum_a(bins, 0.0);
  for (size_t j = 0; j < n; ++j) {
    int k = width > 0 ? static_cast<int>((beta[j] - lo) / width) : 0;
    k = std::clamp(k, 0, bins - 1);
    count[k] += 1;
    sum_a[k] += a[j];
  }
  // Non-empty bins only, each at the mean of its a_j.
  std::vector<double> m, mean;
  for (int k = 0; k < bins; ++k) {
    if (count[k] == 0) continue;
    m.push_back(count[k]);
    mean.push_back(sum_a[k] / count[k]);
  }
  PairSumResult out;
  out.exact = false;
  const double eh = std::exp(width);
  out.relative_bound = eh * (eh - 1) * (eh - 1) / 4;
  out.sums.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const double all = SumInverse(m.data(), mean.data(), m.size(), b[i]);
    out.sums[i] = std::max(0.0, all - 1.0 / (a[i] + b[i]));
  }
  return out;
}

absl::Status CheckReports(const BlinkParams& params, uint32_t n,
                          absl::Span<const BlinkReport> reports) {
  RETURN_IF_ERROR(params.Validate());
  if (n < 3 || n == std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Blink needs 3 <= n < 2^32 - 1 nodes, got ", n));
  }
  if (reports.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Blink needs one report per node: ", reports.size(), " reports for ",
        n, " nodes"));
  }
  ASSIGN_OR_RETURN(auto rr, EdgeRandomizedResponse::Create(
                                params.adjacency_epsilon(), n));
  for (uint32_t v = 0; v < n; ++v) {
    absl::Status s = rr->ValidateReport(v, reports[v].neighbours);
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Blink report of node ", v, ": ", s.message()));
    }
    if (!std::isfinite(reports[v].noisy_degree)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Blink report of node ", v, ": noisy degree is not finite"));
    }
  }
  return absl::OkStatus();
}

uint64_t PairKey(uint32_t u, uint32_t v) {
  if (u > v) std::swap(u, v);
  return (static_cast<uint64_t>(u) << 32) | v;
}
uint32_t KeyLow(uint64_t k) { return static_cast<uint32_t>(k >> 32); }
uint32_t KeyHigh(uint64_t k) { return static_cast<uint32_t>(k); }

// The pairs with x >= 1, sorted by key, and their x.
struct ReportedPairs {
  std::vector<uint64_t> keys;
  std::vector<uint8_t> x;
  bool Contains(uint64_t key) const {
    return std::binary_search(keys.begin(), keys.end(), key);
  }
};

ReportedPairs CollectPairs(absl::Span<const BlinkReport> reports) {
  std::vector<uint64_t> all;
  size_t total = 0;
  for (const BlinkReport& r : reports) total += r.neighbours.size();
  all.reserve(total);
  for (uint32_t v = 0; v < reports.size(); ++v) {
    for (uint32_t u : reports[v].neighbours) all.push_back(PairKey(u, v));
  }
  std::sort(all.begin(), all.end());
  ReportedPairs out;
  for (size_t i = 0; i < all.size();) {
    size_t j = i + 1;
    while (j < all.size() && all[j] == all[i]) ++j;
    out.keys.push_back(all[i]);
    out.x.push_back(static_cast<uint8_t>(j - i));  // 1 or 2: rows are sets
    i = j;
  }
  return out;
}

// Doubles in an order-preserving bijection with uint64 (finite values).
uint64_t OrderedKey(double d) {
  const uint64_t bits = std::bit_cast<uint64_t>(d);
  return (bits >> 63) ? ~bits : bits | (uint64_t{1} << 63);
}
double FromOrderedKey(uint64_t k) {
  return std::bit_cast<double>((k >> 63) ? k & ~(uint64_t{1} << 63) : ~k);
}

// The x = 0 side of the estimate: the nodes sorted by beta, and the
// thresholded pairs over them.
class ZeroPairs {
 public:
  ZeroPairs(const std::vector<double>& beta, double eps_a,
            const ReportedPairs& reported)
      : beta_(beta), eps_a_(eps_a), reported_(reported) {
    order_.resize(beta.size());
    std::iota(order_.begin(), order_.end(), 0u);
    std::stable_sort(order_.begin(), order_.end(),
                     [&](uint32_t u, uint32_t v) { return beta[u] < beta[v]; });
    sorted_.resize(beta.size());
    for (size_t k = 0; k < order_.size(); ++k) sorted_[k] = beta[order_[k]];
  }

  // The number of pairs of any x whose x = 0 logit exceeds t; the x = 0
  // logit grows with each beta, so for sorted position k the partners that
  // exceed t are a suffix [start_k, n), start_k non-increasing in k.
  uint64_t CountAll(double t) const {
    const size_t n = sorted_.size();
    size_t start = n;
    uint64_t count = 0;
    for (size_t k = 0; k < n; ++k) {
      while (start > 0 && Logit0(sorted_[k], sorted_[start - 1]) > t) --start;
      const size_t from = std::max(start, k + 1);
      count += n - from;
    }
    return count;
  }

  // Calls emit(u, v) for every x = 0 pair whose logit exceeds t.
  template <class Emit>
  void Enumerate(double t, Emit emit) const {
    const size_t n = sorted_.size();
    size_t start = n;
    for (size_t k = 0; k < n; ++k) {
      while (start > 0 && Logit0(sorted_[k], sorted_[start - 1]) > t) --start;
      for (size_t l = std::max(start, k + 1); l < n; ++l) {
        const uint32_t u = order_[k], v = order_[l];
        if (!reported_.Contains(PairKey(u, v))) emit(u, v);
      }
    }
  }

  double Logit0(double bu, double bv) const {
    return BlinkLogit(bu, bv, 0, eps_a_);
  }

 private:
  const std::vector<double>& beta_;
  double eps_a_;
  const ReportedPairs& reported_;
  std::vector<uint32_t> order_;
  std::vector<double> sorted_;
};

// The number of pairs whose logit exceeds t.
uint64_t CountAbove(double t, const std::vector<double>& beta, double eps_a,
                    const ReportedPairs& rp, const ZeroPairs& zero) {
  uint64_t count = zero.CountAll(t);
  for (size_t i = 0; i < rp.keys.size(); ++i) {
    const double bu = beta[KeyLow(rp.keys[i])], bv = beta[KeyHigh(rp.keys[i])];
    count -= zero.Logit0(bu, bv) > t;  // counted above as if x were 0
    count += BlinkLogit(bu, bv, rp.x[i], eps_a) > t;
  }
  return count;
}

// The smallest t with CountAbove(t) <= k, by bisection over the ordered
// doubles of [lo, hi] (CountAbove(hi) = 0).
double TopKThreshold(uint64_t k, double lo, double hi,
                     const std::vector<double>& beta, double eps_a,
                     const ReportedPairs& rp, const ZeroPairs& zero) {
  uint64_t bad = OrderedKey(lo), good = OrderedKey(hi);
  if (CountAbove(lo, beta, eps_a, rp, zero) <= k) return lo;
  while (good - bad > 1) {
    const uint64_t mid = bad + (good - bad) / 2;
    if (CountAbove(FromOrderedKey(mid), beta, eps_a, rp, zero) <= k) {
      good = mid;
    } else {
      bad = mid;
    }
  }
  return FromOrderedKey(good);
}

// sum over all pairs of q_ij: reported pairs directly, x = 0 pairs as the
// all-pairs sum of sigmoid(beta_i + beta_j - 2 eps_a) minus the reported.
double ExpectedEdges(const std::vector<double>& beta, double eps_a,
                     const ReportedPairs& rp, const PairSumOptions& sums) {
  const size_t n = beta.size();
  std::vector<double> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = std::exp(beta[i] - 2.0 * eps_a);
  const PairSumResult s = PairSums(beta, b, sums);
  double all_zero = 0;
  for (size_t i = 0; i < n; ++i) all_zero += b[i] * s.sums[i];
  double total = all_zero / 2;
  for (size_t i = 0; i < rp.keys.size(); ++i) {
    const double bu = beta[KeyLow(rp.keys[i])], bv = beta[KeyHigh(rp.keys[i])];
    total += Sigmoid(BlinkLogit(bu, bv, rp.x[i], eps_a)) -
             Sigmoid(BlinkLogit(bu, bv, 0, eps_a));
  }
  return std::max(0.0, total);
}

// Anderson acceleration (type II) of a fixed point x = phi(x), as
// FitBetaModel's header comment states: Next(g = phi(x), f = g - x, |f|_inf)
// writes the next iterate. Keeps the last `memory` differences of f and g;
// gamma solves the normal equations of min ||f - dF gamma||_2 with a
// relative ridge of 1e-12 (dF's columns can be nearly dependent), by
// Gaussian elimination with partial pivoting on the m x m system.
class AndersonMixer {
 public:
  AndersonMixer(size_t n, int memory) : n_(n), memory_(memory) {}

  void Next(const std::vector<double>& g, const std::vector<double>& f,
            double residual, absl::Span<double> x) {
    if (memory_ == 0 || residual > 2 * best_) {
      Forget();  // also the plain fixed point's step
    } else if (!last_g_.empty()) {
      Push(g, f);
    }
    best_ = std::min(best_, residual);
    last_g_ = g;
    last_f_ = f;
    std::copy(g.begin(), g.end(), x.begin());
    if (df_.empty()) return;
    const std::vector<double> gamma = Solve(f);
    for (size_t k = 0; k < df_.size(); ++k) {
      for (size_t i = 0; i < n_; ++i) x[i] -= gamma[k] * dg_[k][i];
    }
    for (size_t i = 0; i < n_; ++i) {
      if (!std::isfinite(x[i])) {  // never expected; the plain step then
        std::copy(g.begin(), g.end(), x.begin());
        Forget();
        return;
      }
    }
  }

 private:
  void Forget() {
    df_.clear();
    dg_.clear();
  }

  void Push(const std::vector<double>& g, const std::vector<double>& f) {
    if (df_.size() == static_cast<size_t>(memory_)) {
      df_.erase(df_.begin());
      dg_.erase(dg_.begin());
    }
    std::vector<double> a(n_), c(n_);
    for (size_t i = 0; i < n_; ++i) {
      a[i] = f[i] - last_f_[i];
      c[i] = g[i] - last_g_[i];
    }
    df_.push_back(std::move(a));
    dg_.push_back(std::move(c));
  }

  // gamma = (dF' dF + ridge I)^-1 dF' f.
  std::vector<double> Solve(const std::vector<double>& f) const {
    const size_t m = df_.size();
    std::vector<std::vector<double>> a(m, std::vector<double>(m + 1, 0.0));
    double trace = 0;
    for (size_t p = 0; p < m; ++p) {
      for (size_t q = p; q < m; ++q) {
        double s = 0;
        for (size_t i = 0; i < n_; ++i) s += df_[p][i] * df_[q][i];
        a[p][q] = a[q][p] = s;
      }
      double r = 0;
      for (size_t i = 0; i < n_; ++i) r += df_[p][i] * f[i];
      a[p][m] = r;
      trace += a[p][p];
    }
    for (size_t p = 0; p < m; ++p) a[p][p] += 1e-12 * trace + 1e-300;
    for (size_t col = 0; col < m; ++col) {
      size_t pivot = col;
      for (size_t r = col + 1; r < m; ++r) {
        if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
      }
      std::swap(a[col], a[pivot]);
      for (size_t r = col + 1; r < m; ++r) {
        const double factor = a[r][col] / a[col][col];
        for (size_t c = col; c <= m; ++c) a[r][c] -= factor * a[col][c];
      }
    }
    std::vector<double> gamma(m);
    for (size_t p = m; p-- > 0;) {
      double s = a[p][m];
      for (size_t c = p + 1; c < m; ++c) s -= a[p][c] * gamma[c];
      gamma[p] = s / a[p][p];
    }
    return gamma;
  }

  size_t n_;
  int memory_;
  double best_ = std::numeric_limits<double>::infinity();
  std::vector<double> last_g_, last_f_;
  std::vector<std::vector<double>> df_, dg_;
};

}  // namespace

absl::Status BetaFitOptions::Validate() const {
  if (max_iterations < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "beta model max_iterations must be >= 1, got ", max_iterations));
  }
  if (!(tolerance >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("beta model tolerance must be >= 0, got ", tolerance));
  }
  if (sums.bins < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("beta model histogram bins must be >= 1, got ", sums.bins));
  }
  if (anderson_memory < 0 || anderson_memory > 20) {
    return absl::InvalidArgumentError(
        absl::StrCat("beta model anderson_memory must be in [0, 20], got ",
                     anderson_memory));
  }
  return absl::OkStatus();
}

PairSumResult PairSums(absl::Span<const double> beta,
                       absl::Span<const double> b,
                       const PairSumOptions& options) {
  std::vector<double> a(beta.size());
  for (size_t j = 0; j < beta.size(); ++j) a[j] = std::exp(-beta[j]);
  if (beta.size() <= options.exact_max_nodes) return ExactSums(a, b);
  return HistogramSums(beta, a, b, std::max(1, options.bins));
}

absl::StatusOr<BetaFit> FitBetaModel(absl::Span<const double> degrees,
                                     const BetaFitOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  const size_t n = degrees.size();
  if (n < 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("the beta model needs n >= 3 degrees, got ", n));
  }
  for (size_t i = 0; i < n; ++i) {
    if (!(degrees[i] >= 1 && degrees[i] <= static_cast<double>(n) - 2)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "degree ", i, " is ", degrees[i], ", outside [1, n - 2] = [1, ",
          n - 2, "]"));
    }
  }
  BetaFit fit;
  std::vector<double> x(n, 0.0), g(n), f(n), b(n), log_d(n);
  for (size_t i = 0; i < n; ++i) log_d[i] = std::log(degrees[i]);
  AndersonMixer mixer(n, options.anderson_memory);
  while (fit.iterations < options.max_iterations) {
    for (size_t i = 0; i < n; ++i) b[i] = std::exp(x[i]);
    const PairSumResult s = PairSums(x, b, options.sums);
    fit.exact_sums = s.exact;
    fit.sum_relative_bound = s.relative_bound;
    double moved = 0;
    for (size_t i = 0; i < n; ++i) {
      g[i] = std::clamp(log_d[i] - std::log(s.sums[i]), -kBetaLimit,
                        kBetaLimit);
      f[i] = g[i] - x[i];
      moved = std::max(moved, std::abs(f[i]));
    }
    ++fit.iterations;
    if (moved <= options.tolerance) {
      fit.converged = true;
      break;
    }
    mixer.Next(g, f, moved, absl::MakeSpan(x));
    for (double& v : x) v = std::clamp(v, -kBetaLimit, kBetaLimit);
  }
  fit.beta = std::move(g);
  for (size_t i = 0; i < n; ++i) b[i] = std::exp(fit.beta[i]);
  const PairSumResult s = PairSums(fit.beta, b, options.sums);
  for (size_t i = 0; i < n; ++i) {
    fit.max_degree_residual = std::max(
        fit.max_degree_residual, std::abs(degrees[i] - b[i] * s.sums[i]));
  }
  return fit;
}

double BlinkPosterior(int x, double prior, double adjacency_epsilon) {
  const double p = 1.0 / (1.0 + std::exp(adjacency_epsilon));
  const double keep = 1.0 - p;
  const double given_edge[3] = {p * p, p * keep, keep * keep};
  const double given_none[3] = {keep * keep, p * keep, p * p};
  const double e = given_edge[x] * prior;
  return e / (e + given_none[x] * (1.0 - prior));
}

absl::StatusOr<BlinkEstimate> EstimateBlinkGraph(
    const BlinkParams& params, uint32_t nodes,
    absl::Span<const BlinkReport> reports,
    const BlinkEstimateOptions& options) {
  RETURN_IF_ERROR(CheckReports(params, nodes, reports));
  RETURN_IF_ERROR(options.beta.Validate());
  const uint32_t n = nodes;
  const double eps_a = params.adjacency_epsilon();
  BlinkEstimate out;
  out.degrees.resize(n);
  const double high = static_cast<double>(n) - 2;
  for (uint32_t v = 0; v < n; ++v) {
    const double d = reports[v].noisy_degree;
    out.clipped_low += d < 1;
    out.clipped_high += d > high;
    out.degrees[v] = std::clamp(d, 1.0, high);
  }
  ASSIGN_OR_RETURN(out.prior, FitBetaModel(out.degrees, options.beta));
  const std::vector<double>& beta = out.prior.beta;

  const ReportedPairs rp = CollectPairs(reports);
  out.reported_pairs = rp.keys.size();
  for (uint8_t x : rp.x) out.both_reported_pairs += x == 2;
  out.expected_edges = ExpectedEdges(beta, eps_a, rp, options.beta.sums);
  const ZeroPairs zero(beta, eps_a, rp);

  const bool weighted = options.variant == BlinkVariant::kHybrid;
  if (options.variant == BlinkVariant::kTopK || weighted) {
    const uint64_t pairs = uint64_t{n} * (n - 1) / 2;
    out.target_edges = std::min<uint64_t>(
        pairs, static_cast<uint64_t>(std::llround(out.expected_edges)));
    const auto [lo, hi] = std::minmax_element(beta.begin(), beta.end());
    // Every logit lies strictly inside (2 lo - 2 eps_a, 2 hi + 2 eps_a).
    const double t_lo = 2 * *lo - 2 * eps_a - 1, t_hi = 2 * *hi + 2 * eps_a + 1;
    out.threshold = TopKThreshold(out.target_edges, t_lo, t_hi, beta, eps_a,
                                  rp, zero);
  }
  std::vector<Edge> edges;
  std::vector<double> weights;  // hybrid: q_ij of each edge
  for (size_t i = 0; i < rp.keys.size(); ++i) {
    const uint32_t u = KeyLow(rp.keys[i]), v = KeyHigh(rp.keys[i]);
    const double logit = BlinkLogit(beta[u], beta[v], rp.x[i], eps_a);
    if (logit > out.threshold) {
      edges.push_back(Edge{u, v});
      if (weighted) weights.push_back(Sigmoid(logit));
    }
  }
  out.graph_reported_edges = edges.size();
  zero.Enumerate(out.threshold, [&](uint32_t u, uint32_t v) {
    edges.push_back(Edge{std::min(u, v), std::max(u, v)});
    if (weighted) weights.push_back(Sigmoid(zero.Logit0(beta[u], beta[v])));
  });
  Graph::BuildOptions build;
  build.merge_duplicates = false;  // each pair is emitted once
  if (weighted) {
    ASSIGN_OR_RETURN(out.graph,
                     Graph::FromWeightedEdges(n, edges, weights, build));
  } else {
    ASSIGN_OR_RETURN(out.graph, Graph::FromEdges(n, edges, build));
  }
  return out;
}

}  // namespace ldpgraph::edges
