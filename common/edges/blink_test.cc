// Tests for Blink: the beta model's fixed point reproduces the degrees; the
// histogram sums stay within their stated bound of the exact ones; the
// posterior matches hand-computed values; the estimate recovers the graph at
// a large budget and falls back on the prior at a small one; the sparse
// construction equals a dense brute force on 300 nodes; bad inputs are
// refused with messages naming what was wrong; the hybrid variant is topk
// weighted by the posteriors. The client's own tests (its degree noise):
// common/mechanisms/edge_blink_test.cc.
#include "common/edges/blink.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/dataset/generator.h"

namespace ldpgraph::edges {
namespace {

using ::testing::HasSubstr;

Graph Generated(size_t nodes, double avg_degree, uint64_t seed) {
  GeneratorOptions o = DefaultGeneratorOptions();
  o.nodes = nodes;
  o.classes = 3;
  o.features = 4;
  o.avg_degree = avg_degree;
  o.homophily = 0.8;
  o.seed = seed;
  return GenerateDataset(o)->graph;
}

std::vector<BlinkReport> Reports(const Graph& g, const BlinkParams& params,
                                 uint64_t seed) {
  auto client = BlinkClient::Create(params, g.num_nodes());
  EXPECT_TRUE(client.ok()) << client.status();
  std::vector<BlinkReport> out;
  for (uint32_t v = 0; v < g.num_nodes(); ++v) {
    SeededRandomForTesting rng(NodeNoiseSeed(seed, v));
    auto r = (*client)->Report(v, g.neighbors(v), rng);
    EXPECT_TRUE(r.ok()) << r.status();
    out.push_back(std::move(*r));
  }
  return out;
}

std::set<std::pair<uint32_t, uint32_t>> EdgeSet(const Graph& g) {
  std::set<std::pair<uint32_t, uint32_t>> out;
  for (const Edge& e : g.Edges()) {
    out.emplace(std::min(e.u, e.v), std::max(e.u, e.v));
  }
  return out;
}

double Sigmoid(double t) { return 1.0 / (1.0 + std::exp(-t)); }

TEST(BlinkTest, BetaFixedPointReproducesTheDegrees) {
  const Graph g = Generated(200, 6, 3);
  const size_t n = g.num_nodes();
  std::vector<double> d(n);
  for (uint32_t v = 0; v < n; ++v) {
    d[v] = std::clamp<double>(g.degree(v), 1, n - 2);
  }
  BetaFitOptions o;
  o.max_iterations = 20000;
  o.tolerance = 1e-13;
  auto fit = FitBetaModel(d, o);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_TRUE(fit->converged) << fit->iterations << " iterations";
  EXPECT_TRUE(fit->exact_sums);
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    double s = 0;
    for (size_t j = 0; j < n; ++j) {
      if (j != i) s += Sigmoid(fit->beta[i] + fit->beta[j]);
    }
    worst = std::max(worst, std::abs(s - d[i]));
  }
  EXPECT_LT(worst, 1e-6);
  EXPECT_LT(fit->max_degree_residual, 1e-6);
  // Higher degree, higher beta.
  const auto hi = std::max_element(d.begin(), d.end()) - d.begin();
  const auto lo = std::min_element(d.begin(), d.end()) - d.begin();
  EXPECT_GT(fit->beta[hi], fit->beta[lo]);
}

TEST(BlinkTest, AndersonReachesThePlainFixedPointInFewerSteps) {
  // Noisy degrees as Blink's curator sees them at eps_d = 0.1: skewed true
  // degrees (a few hubs) plus Laplace noise of scale 10, clipped to
  // [1, n - 2]. The plain iteration crawls on these.
  const size_t n = 1500;
  PublicRandom rng(11);
  std::vector<double> d(n);
  for (size_t i = 0; i < n; ++i) {
    const double pareto = 2.0 / std::pow(1.0 - rng.UniformDouble(), 0.8);
    const double u = rng.UniformDouble() - 0.5;
    const double noise = -10.0 * std::copysign(1.0, u) *
                         std::log(1.0 - 2.0 * std::abs(u));
    d[i] = std::clamp(std::floor(pareto) + noise, 1.0, n - 2.0);
  }
  BetaFitOptions plain;
  plain.max_iterations = 50000;
  plain.tolerance = 1e-10;
  plain.anderson_memory = 0;
  BetaFitOptions accelerated = plain;
  accelerated.anderson_memory = 5;
  auto slow = FitBetaModel(d, plain);
  auto fast = FitBetaModel(d, accelerated);
  ASSERT_TRUE(slow.ok()) << slow.status();
  ASSERT_TRUE(fast.ok()) << fast.status();
  ASSERT_TRUE(slow->converged) << slow->iterations;
  ASSERT_TRUE(fast->converged) << fast->iterations;
  EXPECT_LT(fast->iterations * 5, slow->iterations)
      << fast->iterations << " vs " << slow->iterations;
  for (size_t i = 0; i < n; ++i) {
    ASSERT_NEAR(fast->beta[i], slow->beta[i], 1e-7) << "node " << i;
  }
  EXPECT_LT(fast->max_degree_residual, 1e-6);
  EXPECT_LT(slow->max_degree_residual, 1e-6);
}

TEST(BlinkTest, HistogramSumsStayWithinTheirBound) {
  const size_t n = 3000;
  PublicRandom rng(7);
  std::vector<double> beta(n), b(n);
  for (size_t i = 0; i < n; ++i) {
    beta[i] = -6 + 8 * rng.UniformDouble();
    b[i] = std::exp(beta[i] - (i % 3));  // also shifted, as for x = 0 sums
  }
  PairSumOptions exact_opts;
  exact_opts.exact_max_nodes = n;
  const PairSumResult exact = PairSums(beta, b, exact_opts);
  ASSERT_TRUE(exact.exact);
  for (int bins : {2048, 64, 8}) {
    PairSumOptions o;
    o.exact_max_nodes = 100;
    o.bins = bins;
    const PairSumResult approx = PairSums(beta, b, o);
    ASSERT_FALSE(approx.exact);
    ASSERT_GT(approx.relative_bound, 0);
    double worst_ratio = 0;
    for (size_t i = 0; i < n; ++i) {
      const double own = 1.0 / (std::exp(-beta[i]) + b[i]);
      const double err = std::abs(approx.sums[i] - exact.sums[i]);
      worst_ratio =
          std::max(worst_ratio, err / (approx.relative_bound * (exact.sums[i] + own)));
      EXPECT_LE(approx.sums[i], exact.sums[i] * (1 + 1e-12)) << bins << " " << i;
    }
    EXPECT_LE(worst_ratio, 1.0) << bins << " bins";
    if (bins == 2048) {
      EXPECT_LT(approx.relative_bound, 1e-5);
    }
  }
}

TEST(BlinkTest, PosteriorByHand) {
  // eps_a = log 3: p = 1/4. Prior 0.2.
  const double eps_a = std::log(3.0);
  // x = 0: (0.2/16) / (0.2/16 + 0.8 * 9/16) = 0.2 / 7.4.
  EXPECT_NEAR(BlinkPosterior(0, 0.2, eps_a), 0.2 / 7.4, 1e-12);
  // x = 1: the likelihoods cancel.
  EXPECT_NEAR(BlinkPosterior(1, 0.2, eps_a), 0.2, 1e-12);
  // x = 2: (0.2 * 9/16) / (0.2 * 9/16 + 0.8/16) = 1.8 / 2.6.
  EXPECT_NEAR(BlinkPosterior(2, 0.2, eps_a), 1.8 / 2.6, 1e-12);
  // The logit form agrees: logit q = logit prior + 2 eps_a (x - 1).
  const double half = std::log(0.2 / 0.8) / 2;
  for (int x = 0; x <= 2; ++x) {
    EXPECT_NEAR(Sigmoid(BlinkLogit(half, half, x, eps_a)),
                BlinkPosterior(x, 0.2, eps_a), 1e-12);
  }
}

struct Quality {
  double precision, recall;
};
Quality Compare(const Graph& truth, const Graph& estimate) {
  size_t hits = 0;
  for (const Edge& e : estimate.Edges()) hits += truth.HasEdge(e.u, e.v);
  return {estimate.num_edges() == 0
              ? 0.0
              : static_cast<double>(hits) / estimate.num_edges(),
          static_cast<double>(hits) / truth.num_edges()};
}

TEST(BlinkTest, LargeBudgetRecoversTheGraphSmallBudgetFallsBackOnThePrior) {
  const Graph g = Generated(400, 8, 5);
  BlinkEstimateOptions o;
  o.variant = BlinkVariant::kHard;
  BlinkParams large{.epsilon = 12, .delta = 0.1};
  auto est = EstimateBlinkGraph(large, 400, Reports(g, large, 1), o);
  ASSERT_TRUE(est.ok()) << est.status();
  const Quality q = Compare(g, est->graph);
  EXPECT_GT(q.precision, 0.9);
  EXPECT_GT(q.recall, 0.9);
  // topk at the same budget: about as many edges as the truth.
  o.variant = BlinkVariant::kTopK;
  auto topk = EstimateBlinkGraph(large, 400, Reports(g, large, 1), o);
  ASSERT_TRUE(topk.ok()) << topk.status();
  EXPECT_NEAR(static_cast<double>(topk->graph.num_edges()), g.num_edges(),
              0.1 * g.num_edges());
  EXPECT_GT(Compare(g, topk->graph).recall, 0.9);

  // At eps = 0.2 the bits say almost nothing: the hard graph is what the
  // prior alone gives (pairs of high-degree nodes), and misses the truth.
  o.variant = BlinkVariant::kHard;
  BlinkParams small{.epsilon = 0.2, .delta = 0.5};
  auto weak = EstimateBlinkGraph(small, 400, Reports(g, small, 1), o);
  ASSERT_TRUE(weak.ok()) << weak.status();
  const Quality w = Compare(g, weak->graph);
  EXPECT_LT(w.recall, 0.3);
  EXPECT_LT(w.precision, 0.5);
  size_t prior_agrees = 0;
  for (const Edge& e : weak->graph.Edges()) {
    prior_agrees += weak->prior.beta[e.u] + weak->prior.beta[e.v] > -0.4;
  }
  EXPECT_EQ(prior_agrees, weak->graph.num_edges());
}

// Every pair's logit from a dense x matrix; the graph by the definitions.
std::set<std::pair<uint32_t, uint32_t>> DenseBlink(
    const std::vector<BlinkReport>& reports, const std::vector<double>& beta,
    double eps_a, BlinkVariant variant, uint64_t* k) {
  const uint32_t n = reports.size();
  std::vector<std::vector<int>> x(n, std::vector<int>(n, 0));
  for (uint32_t v = 0; v < n; ++v) {
    for (uint32_t u : reports[v].neighbours) {
      ++x[std::min(u, v)][std::max(u, v)];
    }
  }
  std::vector<std::pair<double, std::pair<uint32_t, uint32_t>>> all;
  double expected = 0;
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t j = i + 1; j < n; ++j) {
      const double t = BlinkLogit(beta[i], beta[j], x[i][j], eps_a);
      all.push_back({t, {i, j}});
      expected += Sigmoid(t);
    }
  }
  double threshold = 0;
  *k = 0;
  if (variant == BlinkVariant::kTopK) {
    *k = std::llround(expected);
    std::vector<double> logits;
    for (const auto& a : all) logits.push_back(a.first);
    std::sort(logits.begin(), logits.end(), std::greater<double>());
    threshold = *k < logits.size() ? logits[*k] : -1e300;
  }
  std::set<std::pair<uint32_t, uint32_t>> out;
  for (const auto& a : all) {
    if (a.first > threshold) out.insert(a.second);
  }
  return out;
}

TEST(BlinkTest, SparseConstructionEqualsDenseBruteForce) {
  const Graph g = Generated(300, 6, 9);
  for (double eps : {1.0, 4.0}) {
    for (BlinkVariant variant : {BlinkVariant::kHard, BlinkVariant::kTopK}) {
      SCOPED_TRACE(testing::Message() << "eps " << eps << " "
                                      << kBlinkVariantNames.Name(variant));
      BlinkParams params{.epsilon = eps, .delta = 0.2};
      const std::vector<BlinkReport> reports = Reports(g, params, 11);
      BlinkEstimateOptions o;
      o.variant = variant;
      auto est = EstimateBlinkGraph(params, 300, reports, o);
      ASSERT_TRUE(est.ok()) << est.status();
      uint64_t k = 0;
      const auto dense = DenseBlink(reports, est->prior.beta,
                                    params.adjacency_epsilon(), variant, &k);
      EXPECT_EQ(est->target_edges, k);
      EXPECT_EQ(EdgeSet(est->graph), dense);
      EXPECT_GT(dense.size(), 10u);
      if (variant == BlinkVariant::kTopK) {
        EXPECT_LE(est->graph.num_edges(), k);
        EXPECT_GE(est->graph.num_edges(), k * 0.95);
      }
    }
  }
}

TEST(BlinkTest, HybridIsTopKWeightedByThePosteriors) {
  const Graph g = Generated(300, 6, 9);
  BlinkParams params{.epsilon = 4.0, .delta = 0.2};
  const std::vector<BlinkReport> reports = Reports(g, params, 11);
  BlinkEstimateOptions o;
  o.variant = BlinkVariant::kTopK;
  auto topk = EstimateBlinkGraph(params, 300, reports, o);
  o.variant = BlinkVariant::kHybrid;
  auto hybrid = EstimateBlinkGraph(params, 300, reports, o);
  ASSERT_TRUE(topk.ok() && hybrid.ok());
  EXPECT_EQ(*kBlinkVariantNames.Parse("hybrid"), BlinkVariant::kHybrid);
  EXPECT_FALSE(topk->graph.weighted());
  ASSERT_TRUE(hybrid->graph.weighted());
  EXPECT_EQ(hybrid->target_edges, topk->target_edges);
  EXPECT_EQ(hybrid->threshold, topk->threshold);
  EXPECT_EQ(EdgeSet(hybrid->graph), EdgeSet(topk->graph));
  // Each weight is the pair's posterior given both reported bits.
  const std::vector<Edge> edges = hybrid->graph.Edges();
  const std::vector<double> weights = hybrid->graph.EdgeWeights();
  ASSERT_EQ(edges.size(), weights.size());
  const std::vector<double>& beta = hybrid->prior.beta;
  std::set<int> seen_x;
  for (size_t i = 0; i < edges.size(); ++i) {
    const uint32_t u = edges[i].u, v = edges[i].v;
    const auto& ru = reports[u].neighbours;
    const auto& rv = reports[v].neighbours;
    const int x = std::binary_search(ru.begin(), ru.end(), v) +
                  std::binary_search(rv.begin(), rv.end(), u);
    seen_x.insert(x);
    const double q = BlinkPosterior(x, Sigmoid(beta[u] + beta[v]),
                                    params.adjacency_epsilon());
    EXPECT_NEAR(weights[i], q, 1e-9 * q) << u << " " << v << " x " << x;
    EXPECT_GT(weights[i], 0.0);
    EXPECT_LE(weights[i], 1.0);
  }
  EXPECT_TRUE(seen_x.count(2)) << "no pair reported by both ends";
  EXPECT_TRUE(seen_x.count(1)) << "no pair reported by one end";
  EXPECT_NE(*std::min_element(weights.begin(), weights.end()),
            *std::max_element(weights.begin(), weights.end()));
}

TEST(BlinkTest, BadInputsAreRefused) {
  const std::vector<std::pair<BlinkParams, std::string>> params = {
      {{.epsilon = 0, .delta = 0.1}, "epsilon must be finite and > 0, got 0"},
      {{.epsilon = -1, .delta = 0.1}, "epsilon must be finite and > 0"},
      {{.epsilon = INFINITY, .delta = 0.1}, "epsilon must be finite"},
      {{.epsilon = 1, .delta = 0}, "delta (the degree's share of epsilon) must be in (0, 1), got 0"},
      {{.epsilon = 1, .delta = 1}, "must be in (0, 1), got 1"},
      {{.epsilon = 1, .delta = NAN}, "must be in (0, 1)"},
  };
  std::vector<BlinkReport> reports(4);
  for (const auto& [p, message] : params) {
    auto c = BlinkClient::Create(p, 10);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(c.status().message(), HasSubstr(message));
    auto e = EstimateBlinkGraph(p, 4, reports, {});
    EXPECT_THAT(e.status().message(), HasSubstr(message));
  }
  const BlinkParams ok{.epsilon = 1, .delta = 0.1};
  EXPECT_THAT(BlinkClient::Create(ok, 2).status().message(),
              HasSubstr("n >= 3 nodes, got 2"));
  EXPECT_THAT(EstimateBlinkGraph(ok, 5, reports, {}).status().message(),
              HasSubstr("one report per node: 4 reports for 5 nodes"));
  auto bad = reports;
  bad[2].neighbours = {3, 1};
  auto s = EstimateBlinkGraph(ok, 4, bad, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("report of node 2"));
  EXPECT_THAT(s.message(), HasSubstr("strictly ascending"));
  bad = reports;
  bad[1].neighbours = {1};
  EXPECT_THAT(EstimateBlinkGraph(ok, 4, bad, {}).status().message(),
              HasSubstr("is the node itself"));
  bad = reports;
  bad[0].neighbours = {7};
  EXPECT_THAT(EstimateBlinkGraph(ok, 4, bad, {}).status().message(),
              HasSubstr("report of node 0"));
  bad = reports;
  bad[3].noisy_degree = NAN;
  EXPECT_THAT(EstimateBlinkGraph(ok, 4, bad, {}).status().message(),
              HasSubstr("node 3: noisy degree is not finite"));
  BlinkEstimateOptions o;
  o.beta.sums.bins = 0;
  EXPECT_THAT(EstimateBlinkGraph(ok, 4, reports, o).status().message(),
              HasSubstr("bins must be >= 1, got 0"));
  o = {};
  o.beta.anderson_memory = 21;
  EXPECT_THAT(EstimateBlinkGraph(ok, 4, reports, o).status().message(),
              HasSubstr("anderson_memory must be in [0, 20], got 21"));
  o.beta.anderson_memory = 5;
  o.beta.max_iterations = 0;
  EXPECT_THAT(EstimateBlinkGraph(ok, 4, reports, o).status().message(),
              HasSubstr("max_iterations must be >= 1"));
  EXPECT_THAT(FitBetaModel({1, 0.5, 1, 1}, {}).status().message(),
              HasSubstr("degree 1 is 0.5, outside [1, n - 2] = [1, 2]"));
  auto client = BlinkClient::Create(ok, 10);
  SeededRandomForTesting rng(1);
  const std::vector<uint32_t> unsorted = {4, 2};
  EXPECT_EQ((*client)->Report(0, unsorted, rng).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ldpgraph::edges
