#include "server/embedding/se_privgemb.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>
#include <utility>
#include <vector>

#include "common/dataset/dataset.h"
#include "common/dataset/splits.h"
#include "common/testing/shared_datasets.h"
#include "gtest/gtest.h"
#include "server/embedding/internal/se_privgemb_step.h"

namespace ldpgraph::embedding {
namespace {

using internal::BatchGradient;
using internal::ComputeExampleGradient;
using internal::DrawSkipGramExamples;
using internal::ExampleGradient;
using internal::InitialCentre;
using internal::RowSparseAdam;
using internal::SkipGramExamples;

// Two blocks of `per_block` nodes (0..per_block-1 and per_block..2
// per_block-1), each pair inside a block linked with probability p_in, plus
// `cross` random links between the blocks.
Graph TwoBlocks(int per_block, double p_in, int cross, uint64_t seed) {
  PublicRandom rng(seed);
  std::vector<Edge> edges;
  for (int b = 0; b < 2; ++b) {
    for (int i = 0; i < per_block; ++i) {
      for (int j = i + 1; j < per_block; ++j) {
        if (rng.Bernoulli(p_in)) {
          edges.push_back(
              {NodeId(b * per_block + i), NodeId(b * per_block + j)});
        }
      }
    }
  }
  for (int e = 0; e < cross; ++e) {
    edges.push_back({NodeId(rng.UniformInt(per_block)),
                     NodeId(per_block + rng.UniformInt(per_block))});
  }
  return *Graph::FromEdges(2 * per_block, edges);
}

double Cosine(absl::Span<const float> a, absl::Span<const float> b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += double{a[i]} * b[i];
    aa += double{a[i]} * a[i];
    bb += double{b[i]} * b[i];
  }
  return (aa > 0 && bb > 0) ? ab / std::sqrt(aa * bb) : 0.0;
}

// Mean cosine of the centre vectors of linked pairs and of `samples` random
// non-linked pairs of distinct nodes.
std::pair<double, double> LinkedVersusRandom(const Graph& g,
                                             const DenseMatrix& w, int samples,
                                             uint64_t seed) {
  double linked = 0;
  const std::vector<Edge> edges = g.Edges();
  for (const Edge& e : edges) linked += Cosine(w.row(e.u), w.row(e.v));
  PublicRandom rng(seed);
  double other = 0;
  int found = 0;
  while (found < samples) {
    const NodeId u = static_cast<NodeId>(rng.UniformInt(g.num_nodes()));
    const NodeId v = static_cast<NodeId>(rng.UniformInt(g.num_nodes()));
    if (u == v || g.HasEdge(u, v)) continue;
    other += Cosine(w.row(u), w.row(v));
    ++found;
  }
  return {linked / edges.size(), other / samples};
}

// Area under the ROC curve of score(u, v) = w_u . w_v for positive edges
// against negative pairs (ties count one half).
double LinkAuc(const DenseMatrix& w, const std::vector<Edge>& pos,
               const std::vector<Edge>& neg) {
  std::vector<std::pair<double, int>> s;
  for (const Edge& e : pos) s.push_back({Cosine(w.row(e.u), w.row(e.v)), 1});
  for (const Edge& e : neg) s.push_back({Cosine(w.row(e.u), w.row(e.v)), 0});
  std::sort(s.begin(), s.end());
  double rank_sum = 0;
  for (size_t i = 0; i < s.size();) {
    size_t j = i;
    while (j < s.size() && s[j].first == s[i].first) ++j;
    const double mid = (i + 1 + j) / 2.0;  // mean 1-based rank of the tie
    for (size_t k = i; k < j; ++k) {
      if (s[k].second) rank_sum += mid;
    }
    i = j;
  }
  const double p = pos.size(), q = neg.size();
  return (rank_sum - p * (p + 1) / 2) / (p * q);
}

SePrivGEmbConfig SmallConfig() {
  SePrivGEmbConfig c;
  c.dim = 16;
  c.negatives = 3;
  c.batch_size = 8;
  c.learning_rate = 0.5;
  c.max_epochs = 5;
  c.noise_multiplier = 1.0;
  c.target_epsilon = 1000;  // effectively no budget limit
  c.target_delta = 1e-5;
  return c;
}

bool RowEquals(absl::Span<const float> a, absl::Span<const float> b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

bool RowIsZero(absl::Span<const float> a) {
  return std::all_of(a.begin(), a.end(), [](float x) { return x == 0.0f; });
}

TEST(SePrivGEmbConfig, DefaultIsValid) {
  EXPECT_TRUE(ValidateSePrivGEmbConfig(SePrivGEmbConfig()).ok());
}

TEST(SePrivGEmbConfig, RejectsEachBadField) {
  struct Case {
    const char* field;
    void (*mutate)(SePrivGEmbConfig&);
  };
  const Case cases[] = {
      {"dim", [](SePrivGEmbConfig& c) { c.dim = 0; }},
      {"negatives", [](SePrivGEmbConfig& c) { c.negatives = 0; }},
      {"batch_size", [](SePrivGEmbConfig& c) { c.batch_size = 0; }},
      {"learning_rate", [](SePrivGEmbConfig& c) { c.learning_rate = 0; }},
      {"learning_rate", [](SePrivGEmbConfig& c) { c.learning_rate = NAN; }},
      {"max_epochs", [](SePrivGEmbConfig& c) { c.max_epochs = 0; }},
      {"max_steps", [](SePrivGEmbConfig& c) { c.max_steps = 0; }},
      {"optimizer",
       [](SePrivGEmbConfig& c) { c.optimizer = static_cast<Optimizer>(7); }},
      {"clip", [](SePrivGEmbConfig& c) { c.clip = 0; }},
      {"clip", [](SePrivGEmbConfig& c) { c.clip = INFINITY; }},
      {"noise_multiplier", [](SePrivGEmbConfig& c) { c.noise_multiplier = 0; }},
      {"target_epsilon", [](SePrivGEmbConfig& c) { c.target_epsilon = 0; }},
      {"target_epsilon",
       [](SePrivGEmbConfig& c) { c.target_epsilon = INFINITY; }},
      {"target_delta", [](SePrivGEmbConfig& c) { c.target_delta = 0; }},
      {"target_delta", [](SePrivGEmbConfig& c) { c.target_delta = 1; }},
  };
  for (const Case& k : cases) {
    SePrivGEmbConfig c;
    k.mutate(c);
    const absl::Status s = ValidateSePrivGEmbConfig(c);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << k.field;
    EXPECT_NE(s.message().find(k.field), absl::string_view::npos)
        << k.field << ": " << s.message();
  }
}

TEST(SePrivGEmbConfig, NonPrivateIgnoresPrivacyFields) {
  SePrivGEmbConfig c;
  c.private_training = false;
  c.clip = 0;
  c.noise_multiplier = -1;
  c.target_epsilon = 0;
  c.target_delta = 2;
  EXPECT_TRUE(ValidateSePrivGEmbConfig(c).ok());
}

TEST(SePrivGEmb, GraphWithoutEdgesIsInvalid) {
  const Graph g = *Graph::FromEdges(5, {});
  SeededRandomForTesting noise(1);
  EXPECT_EQ(TrainSePrivGEmb(g, SmallConfig(), noise, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SkipGramExamples, OnePerEdgeAndNegativesAvoidTheCentreNeighbourhood) {
  const Graph g = TwoBlocks(15, 0.3, 4, 3);
  SeededRandomForTesting noise(7);
  const std::vector<double> mass = ProximityMass(g, Proximity::kDeepWalk);
  const SkipGramExamples ex = DrawSkipGramExamples(g, mass, 4, noise);
  ASSERT_EQ(ex.size(), g.num_edges());
  std::set<std::pair<NodeId, NodeId>> seen;
  int flipped = 0;
  for (size_t i = 0; i < ex.size(); ++i) {
    const uint32_t* e = ex.example(i);
    EXPECT_TRUE(g.HasEdge(e[0], e[1]));
    seen.insert({std::min(e[0], e[1]), std::max(e[0], e[1])});
    if (e[0] > e[1]) ++flipped;
    for (int k = 0; k < 4; ++k) {
      EXPECT_NE(e[2 + k], e[0]);
      EXPECT_FALSE(g.HasEdge(e[0], e[2 + k]));
    }
  }
  EXPECT_EQ(seen.size(), g.num_edges());  // every edge exactly once
  // The orientation is random: neither all kept nor all flipped.
  EXPECT_GT(flipped, 0);
  EXPECT_LT(flipped, static_cast<int>(ex.size()));
}

TEST(SkipGramExamples, ZeroMassNodesAreNeverNegatives) {
  // Degree proximity: isolated nodes 3..9 have mass 0. Every candidate of
  // positive mass is the centre or its neighbour on the triangle, so the
  // redraws run out and the last draw is kept (the cap, not a loop).
  const Graph g = *Graph::FromEdges(10, {{0, 1}, {1, 2}, {0, 2}});
  SeededRandomForTesting noise(2);
  const std::vector<double> mass = ProximityMass(g, Proximity::kDegree);
  const SkipGramExamples ex = DrawSkipGramExamples(g, mass, 5, noise);
  ASSERT_EQ(ex.size(), 3u);
  for (size_t i = 0; i < ex.size(); ++i) {
    for (int k = 0; k < 5; ++k) EXPECT_LT(ex.example(i)[2 + k], 3u);
  }
}

// An independent double-precision gradient of one example, merged by row.
struct Reference {
  std::vector<double> centre;
  std::vector<std::pair<uint32_t, std::vector<double>>> context;
  double loss = 0;
};

Reference ReferenceGradient(const DenseMatrix& w, const DenseMatrix& c,
                            const std::vector<uint32_t>& ex) {
  const size_t dim = w.cols;
  Reference r;
  r.centre.assign(dim, 0);
  const uint32_t u = ex[0];
  for (size_t i = 1; i < ex.size(); ++i) {
    double x = 0;
    for (size_t d = 0; d < dim; ++d) x += double{w.at(u, d)} * c.at(ex[i], d);
    const double sig = 1 / (1 + std::exp(-x));
    const double g = i == 1 ? sig - 1 : sig;
    r.loss += i == 1 ? -std::log(sig) : -std::log(1 - sig);
    for (size_t d = 0; d < dim; ++d) r.centre[d] += g * c.at(ex[i], d);
    auto it = std::find_if(r.context.begin(), r.context.end(),
                           [&](const auto& p) { return p.first == ex[i]; });
    if (it == r.context.end()) {
      r.context.push_back({ex[i], std::vector<double>(dim, 0)});
      it = r.context.end() - 1;
    }
    for (size_t d = 0; d < dim; ++d) it->second[d] += g * w.at(u, d);
  }
  return r;
}

double Norm(const ExampleGradient& g) {
  double s = 0;
  for (float x : g.centre_grad) s += double{x} * x;
  for (float x : g.context_grad) s += double{x} * x;
  return std::sqrt(s);
}

DenseMatrix RandomMatrix(size_t n, int dim, double scale, uint64_t seed) {
  PublicRandom rng(seed);
  DenseMatrix m(n, dim);
  for (float& x : m.data)
    x = static_cast<float>(scale * (2 * rng.UniformDouble() - 1));
  return m;
}

TEST(Optimizer, ParsesItsNamesAndRejectsOthers) {
  EXPECT_EQ(*ParseOptimizer("sgd"), Optimizer::kSgd);
  EXPECT_EQ(*ParseOptimizer("adam"), Optimizer::kAdam);
  EXPECT_EQ(OptimizerName(Optimizer::kAdam), "adam");
  EXPECT_EQ(OptimizerName(Optimizer::kSgd), "sgd");
  const auto bad = ParseOptimizer("lazy-adam");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "optimizer must be one of sgd, adam, got 'lazy-adam'");
}

// Dense Adam written out plainly (PyTorch's form, in double): every row
// every step, zero gradient for the rows not listed.
struct DenseAdamReference {
  DenseAdamReference(size_t n, int dim, double lr)
      : dim(dim), lr(lr), w(n * dim), m(n * dim, 0.0), v(n * dim, 0.0) {}
  void Step(const std::vector<double>& g) {  // n * dim, zeros included
    ++t;
    const double c1 = 1 - std::pow(RowSparseAdam::kBeta1, t);
    const double c2 = 1 - std::pow(RowSparseAdam::kBeta2, t);
    for (size_t i = 0; i < w.size(); ++i) {
      m[i] = RowSparseAdam::kBeta1 * m[i] + (1 - RowSparseAdam::kBeta1) * g[i];
      v[i] = RowSparseAdam::kBeta2 * v[i] +
             (1 - RowSparseAdam::kBeta2) * g[i] * g[i];
      w[i] -= lr / c1 * m[i] /
              (std::sqrt(v[i]) / std::sqrt(c2) + RowSparseAdam::kEpsilon);
    }
  }
  int dim;
  double lr;
  int t = 0;
  std::vector<double> w, m, v;
};

// The row-sparse Adam against dense Adam on a random sequence of sparse
// gradients, some rows left alone for long stretches (the zero-gradient
// steps applied in closed form at Sync), one never listed. A "lazy" Adam
// that moves only listed rows fails this: row 5 moves by more than 0.05 in
// its 200 zero-gradient steps.
TEST(RowSparseAdam, MatchesDenseAdamIncludingZeroGradientSteps) {
  const size_t n = 7;
  const int dim = 5;
  const double lr = 0.1;
  const float scale = 0.5f;
  PublicRandom rng(3);
  const DenseMatrix init = RandomMatrix(n, dim, 1.0, 8);
  DenseMatrix param = init;
  DenseAdamReference dense(n, dim, lr);
  for (size_t i = 0; i < param.data.size(); ++i) dense.w[i] = param.data[i];
  RowSparseAdam adam(n, dim, lr);
  DenseMatrix grad(n, dim);
  std::vector<double> row5_at_40;
  for (int step = 1; step <= 300; ++step) {
    std::vector<uint32_t> rows;
    for (uint32_t r = 0; r + 1 < n; ++r) {  // row n - 1 never listed
      // Row r is listed with probability 1 / (r + 1); row 5 also sits out
      // steps 40..239 (200 zero-gradient steps in one stretch).
      if (r == 5 && step >= 40 && step < 240) continue;
      if (rng.UniformDouble() * (r + 1) < 1) rows.push_back(r);
    }
    std::vector<double> g(n * dim, 0.0);
    for (uint32_t r : rows) {
      for (int i = 0; i < dim; ++i) {
        grad.data[r * dim + i] =
            static_cast<float>(4 * (2 * rng.UniformDouble() - 1));
        g[r * dim + i] = scale * double{grad.data[r * dim + i]};
      }
    }
    if (step == 40) {
      row5_at_40.assign(dense.w.begin() + 5 * dim,
                        dense.w.begin() + 6 * dim);
    }
    adam.Step(param, grad, rows, scale);
    dense.Step(g);
    for (uint32_t r : rows) {
      for (int i = 0; i < dim; ++i) grad.data[r * dim + i] = 0;
    }
    if (step % 50 == 0) {  // Sync one row and compare it mid-run
      const uint32_t r = static_cast<uint32_t>(step / 50) % n;
      adam.Sync(param, r);
      for (int i = 0; i < dim; ++i) {
        EXPECT_NEAR(param.data[r * dim + i], dense.w[r * dim + i], 2e-4)
            << "step " << step << " row " << r;
      }
    }
    if (step == 239) {
      double moved = 0;
      for (int i = 0; i < dim; ++i) {
        moved += std::abs(dense.w[5 * dim + i] - row5_at_40[i]);
      }
      EXPECT_GT(moved, 0.05);
    }
  }
  EXPECT_EQ(adam.steps(), 300);
  adam.Flush(param);
  for (size_t i = 0; i < param.data.size(); ++i) {
    EXPECT_NEAR(param.data[i], dense.w[i], 2e-4) << "entry " << i;
  }
  for (int i = 0; i < dim; ++i) {  // never listed: never moved
    EXPECT_EQ(param.data[6 * dim + i], init.data[6 * dim + i]);
  }
}

// Adam's first step moves every coordinate by the rate against the sign of
// its gradient (bias correction: m_hat = g, v_hat = g^2), whatever the
// gradient's scale.
TEST(RowSparseAdam, FirstStepIsTheRateAgainstTheGradientSign) {
  const int dim = 4;
  DenseMatrix param(3, dim);
  DenseMatrix grad(3, dim);
  const float g[dim] = {0.001f, -3.0f, 250.0f, -0.02f};
  for (int i = 0; i < dim; ++i) grad.data[1 * dim + i] = g[i];
  RowSparseAdam adam(3, dim, 0.1);
  const std::vector<uint32_t> rows = {1};
  adam.Step(param, grad, rows, 0.5f);
  for (int i = 0; i < dim; ++i) {
    EXPECT_NEAR(param.data[1 * dim + i], g[i] > 0 ? -0.1 : 0.1, 1e-5) << i;
    EXPECT_EQ(param.data[0 * dim + i], 0.0f);
    EXPECT_EQ(param.data[2 * dim + i], 0.0f);
  }
}

TEST(ExampleGradient, MatchesReferenceWithRepeatedRowsMerged) {
  const DenseMatrix w = RandomMatrix(6, 8, 0.5, 1);
  const DenseMatrix c = RandomMatrix(6, 8, 0.5, 2);
  // Centre 0, context 1, negatives 3, 1 (the context again), 3 (repeat).
  const std::vector<uint32_t> ex = {0, 1, 3, 1, 3};
  const ExampleGradient g = ComputeExampleGradient(w, c, ex.data(), 3, 0.0);
  const Reference r = ReferenceGradient(w, c, ex);
  EXPECT_NEAR(g.loss, r.loss, 1e-5);
  EXPECT_EQ(g.scale, 1.0);
  ASSERT_EQ(g.context_rows, (std::vector<uint32_t>{1, 3}));
  double norm2 = 0;
  for (int d = 0; d < 8; ++d) {
    EXPECT_NEAR(g.centre_grad[d], r.centre[d], 1e-5);
    norm2 += r.centre[d] * r.centre[d];
    for (int k = 0; k < 2; ++k) {
      EXPECT_NEAR(g.context_grad[k * 8 + d], r.context[k].second[d], 1e-5);
      norm2 += r.context[k].second[d] * r.context[k].second[d];
    }
  }
  EXPECT_NEAR(g.norm, std::sqrt(norm2), 1e-5);
}

TEST(ExampleGradient, ClippedToClipAndSmallGradientsUntouched) {
  const DenseMatrix w = RandomMatrix(6, 8, 2.0, 3);
  const DenseMatrix c = RandomMatrix(6, 8, 2.0, 4);
  const std::vector<uint32_t> ex = {2, 4, 0, 5, 1};
  const ExampleGradient raw = ComputeExampleGradient(w, c, ex.data(), 3, 0.0);
  ASSERT_GT(raw.norm, 1.0);
  // A clip above the norm leaves every coordinate exactly as it was.
  const ExampleGradient loose =
      ComputeExampleGradient(w, c, ex.data(), 3, 2 * raw.norm);
  EXPECT_EQ(loose.scale, 1.0);
  EXPECT_EQ(loose.centre_grad, raw.centre_grad);
  EXPECT_EQ(loose.context_grad, raw.context_grad);
  // A clip below it: norm <= clip (to float rounding), same direction.
  for (double clip : {0.01, 0.5, 1.0}) {
    const ExampleGradient g = ComputeExampleGradient(w, c, ex.data(), 3, clip);
    EXPECT_LE(Norm(g), clip * (1 + 1e-6)) << clip;
    EXPECT_NEAR(Norm(g), clip, clip * 1e-5) << clip;
    EXPECT_EQ(g.norm, raw.norm);
    for (size_t d = 0; d < raw.centre_grad.size(); ++d) {
      EXPECT_NEAR(g.centre_grad[d], raw.centre_grad[d] * clip / raw.norm, 1e-6);
    }
  }
}

double FrobeniusDistance(const DenseMatrix& a, const DenseMatrix& b) {
  double s = 0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    const double d = double{a.data[i]} - b.data[i];
    s += d * d;
  }
  return s;
}

// The batch sums (W part and C part together) with and without replacing
// the batch's first example by `other`.
double ReplaceOneDistance(const DenseMatrix& w, const DenseMatrix& c,
                          const SkipGramExamples& ex,
                          const std::vector<size_t>& batch, size_t other,
                          double clip) {
  BatchGradient a(w.rows, static_cast<int>(w.cols), ex.negatives);
  BatchGradient b(w.rows, static_cast<int>(w.cols), ex.negatives);
  for (size_t i = 0; i < batch.size(); ++i) {
    a.Add(w, c, ex.example(batch[i]), clip);
    b.Add(w, c, ex.example(i == 0 ? other : batch[i]), clip);
  }
  return std::sqrt(FrobeniusDistance(a.sum_centre(), b.sum_centre()) +
                   FrobeniusDistance(a.sum_context(), b.sum_context()));
}

TEST(BatchGradient, ReplacingOneExampleMovesTheSumByAtMostTwoClip) {
  const Graph g = TwoBlocks(12, 0.4, 3, 5);
  SeededRandomForTesting noise(3);
  const SkipGramExamples ex =
      DrawSkipGramExamples(g, ProximityMass(g, Proximity::kUniform), 4, noise);
  // Large parameters, so that every gradient is far above the clip.
  const DenseMatrix w = RandomMatrix(g.num_nodes(), 16, 3.0, 8);
  const DenseMatrix c = RandomMatrix(g.num_nodes(), 16, 3.0, 9);
  const std::vector<size_t> batch = {0, 5, 9, 13, 17, 21};
  const double clip = 0.5;
  double worst = 0;
  for (size_t other = 0; other < ex.size(); ++other) {
    worst = std::max(worst, ReplaceOneDistance(w, c, ex, batch, other, clip));
  }
  EXPECT_LE(worst, 2 * clip * (1 + 1e-5));
  EXPECT_GT(worst, clip);  // the bound is not vacuous here
  // Unclipped, the same replacement moves the sum far more than 2 clip.
  EXPECT_GT(ReplaceOneDistance(w, c, ex, batch, 1, 0.0), 4 * clip);
}

TEST(BatchGradient, TracksTouchedRowsAndClearsThem) {
  const DenseMatrix w = RandomMatrix(8, 4, 0.5, 1);
  const DenseMatrix c = RandomMatrix(8, 4, 0.5, 2);
  BatchGradient sums(8, 4, 2);
  const std::vector<uint32_t> e1 = {1, 2, 5, 2}, e2 = {1, 3, 6, 7};
  sums.Add(w, c, e1.data(), 1.0);
  sums.Add(w, c, e2.data(), 1.0);
  EXPECT_EQ(sums.touched_centre(), (std::vector<uint32_t>{1}));
  EXPECT_EQ(sums.touched_context(), (std::vector<uint32_t>{2, 5, 3, 6, 7}));
  EXPECT_TRUE(RowIsZero(sums.sum_context().row(0)));
  EXPECT_FALSE(RowIsZero(sums.sum_context().row(5)));
  sums.Clear();
  EXPECT_TRUE(sums.touched_centre().empty());
  EXPECT_TRUE(sums.touched_context().empty());
  for (size_t r = 0; r < 8; ++r) {
    EXPECT_TRUE(RowIsZero(sums.sum_centre().row(r)));
    EXPECT_TRUE(RowIsZero(sums.sum_context().row(r)));
  }
}

TEST(SePrivGEmb, NonPrivateSkipGramLearnsCommunities) {
  // A small dimension, so that the model cannot memorise every edge and
  // has to place each block in its own region.
  const Graph g = TwoBlocks(30, 0.3, 4, 11);
  SePrivGEmbConfig c = SmallConfig();
  c.private_training = false;
  c.dim = 4;
  c.negatives = 5;
  c.batch_size = 16;
  c.learning_rate = 1.0;
  c.max_epochs = 50;
  SeededRandomForTesting noise(5);
  const auto r = TrainSePrivGEmb(g, c, noise, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->accountant.has_value());
  EXPECT_FALSE(r->guarantee.has_value());
  EXPECT_FALSE(r->stopped_by_budget);
  ASSERT_EQ(r->epoch_loss.size(), 50u);
  EXPECT_LT(r->epoch_loss.back(), 0.5 * r->epoch_loss.front());
  for (size_t e = 10; e < r->epoch_loss.size(); e += 10) {
    EXPECT_LT(r->epoch_loss[e], r->epoch_loss[e - 10]) << e;
  }
  const auto [linked, other] = LinkedVersusRandom(g, r->centre, 2000, 1);
  std::cout << "non-private blocks: loss " << r->epoch_loss.front() << " -> "
            << r->epoch_loss.back() << ", cosine linked " << linked
            << ", random non-linked " << other << "\n";
  EXPECT_GT(linked, other + 0.15);
  // Before training the two are alike (the initialisation is random).
  const DenseMatrix init = InitialCentre(g.num_nodes(), c.dim, 1);
  const auto [linked0, other0] = LinkedVersusRandom(g, init, 2000, 1);
  EXPECT_LT(std::abs(linked0 - other0), 0.1);
}

// The published code's optimizer: Adam at rate 0.1 trains the skip-gram
// where SGD at the same rate (averaged over the batch, C starting at zero)
// hardly moves it.
TEST(SePrivGEmb, AdamLearnsWhereSgdAtTheSameRateStalls) {
  const Graph g = TwoBlocks(30, 0.3, 4, 11);
  SePrivGEmbConfig c = SmallConfig();
  c.private_training = false;
  c.dim = 4;
  c.negatives = 5;
  c.batch_size = 32;
  c.learning_rate = 0.1;
  c.max_epochs = 30;
  auto run = [&](Optimizer o) {
    c.optimizer = o;
    SeededRandomForTesting noise(5);
    auto r = TrainSePrivGEmb(g, c, noise, 1);
    EXPECT_TRUE(r.ok()) << r.status();
    return *std::move(r);
  };
  const SePrivGEmbResult sgd = run(Optimizer::kSgd);
  const SePrivGEmbResult adam = run(Optimizer::kAdam);
  const auto [sgd_linked, sgd_other] = LinkedVersusRandom(g, sgd.centre, 2000, 1);
  const auto [linked, other] = LinkedVersusRandom(g, adam.centre, 2000, 1);
  std::cout << "rate 0.1, batch 32: SGD loss " << sgd.epoch_loss.front()
            << " -> " << sgd.epoch_loss.back() << ", cosine linked "
            << sgd_linked << " / other " << sgd_other << "; Adam loss "
            << adam.epoch_loss.front() << " -> " << adam.epoch_loss.back()
            << ", cosine linked " << linked << " / other " << other << "\n";
  EXPECT_LT(adam.epoch_loss.back(), 0.6 * adam.epoch_loss.front());
  EXPECT_GT(sgd.epoch_loss.back(), 0.95 * sgd.epoch_loss.front());
  EXPECT_GT(linked, other + 0.15);
  EXPECT_NE(sgd.centre.data, adam.centre.data);
}

// Adam post-processes the noised gradient: the same settings take the same
// steps and report the same accountant as SGD. Seeded Adam runs repeat.
TEST(SePrivGEmb, AdamIsAccountedAsSgdAndSeededRunsRepeat) {
  const Graph g = TwoBlocks(20, 0.3, 5, 2);
  SePrivGEmbConfig c = SmallConfig();
  c.noise_multiplier = 5.0;
  c.target_epsilon = 1.5;
  c.max_epochs = 10000;
  auto run = [&](Optimizer o, uint64_t seed) {
    c.optimizer = o;
    SeededRandomForTesting noise(seed);
    auto r = TrainSePrivGEmb(g, c, noise, 1);
    EXPECT_TRUE(r.ok()) << r.status();
    return *std::move(r);
  };
  const SePrivGEmbResult sgd = run(Optimizer::kSgd, 9);
  const SePrivGEmbResult adam = run(Optimizer::kAdam, 9);
  const SePrivGEmbResult again = run(Optimizer::kAdam, 9);
  const SePrivGEmbResult other = run(Optimizer::kAdam, 10);
  EXPECT_TRUE(adam.stopped_by_budget);
  EXPECT_EQ(adam.steps, sgd.steps);
  EXPECT_EQ(adam.accountant->rdp(), sgd.accountant->rdp());
  EXPECT_EQ(adam.guarantee->epsilon, sgd.guarantee->epsilon);
  EXPECT_NE(adam.centre.data, sgd.centre.data);
  EXPECT_EQ(adam.centre.data, again.centre.data);
  EXPECT_EQ(adam.context.data, again.context.data);
  EXPECT_EQ(adam.epoch_loss, again.epoch_loss);
  EXPECT_NE(adam.centre.data, other.centre.data);
  for (float x : adam.centre.data) ASSERT_TRUE(std::isfinite(x));
}

// max_steps replaces the epoch cap, in either direction.
TEST(SePrivGEmb, MaxStepsCapsTheSteps) {
  const Graph g = TwoBlocks(10, 0.4, 2, 2);
  SePrivGEmbConfig c = SmallConfig();
  const int64_t per_epoch = (g.num_edges() + c.batch_size - 1) / c.batch_size;
  for (int64_t cap : {int64_t{3}, 7 * per_epoch + 2}) {
    c.max_steps = cap;
    SeededRandomForTesting noise(9);
    const auto r = TrainSePrivGEmb(g, c, noise, 1);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->steps, cap);
    EXPECT_EQ(r->step_cap, cap);
    EXPECT_FALSE(r->stopped_by_budget);
    EXPECT_DOUBLE_EQ(r->epochs, static_cast<double>(cap) / per_epoch);
    EXPECT_EQ(r->epoch_loss.size(), static_cast<size_t>(cap / per_epoch + 1));
  }
}

TEST(SePrivGEmb, BudgetStopsBeforeTheTarget) {
  const Graph g = TwoBlocks(20, 0.3, 5, 2);
  SePrivGEmbConfig c = SmallConfig();
  c.noise_multiplier = 5.0;
  c.target_epsilon = 1.5;
  c.max_epochs = 10000;
  SeededRandomForTesting noise(9);
  const auto r = TrainSePrivGEmb(g, c, noise, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->stopped_by_budget);
  ASSERT_TRUE(r->guarantee.has_value() && r->accountant.has_value());
  EXPECT_LE(r->guarantee->epsilon, c.target_epsilon);
  EXPECT_EQ(r->guarantee->delta, c.target_delta);
  const double gamma = static_cast<double>(c.batch_size) / g.num_edges();
  // The reported accountant is `steps` compositions...
  dp::RdpAccountant again;
  ASSERT_TRUE(again
                  .ComposeSampledWithoutReplacementGaussian(
                      gamma, c.noise_multiplier / 2, r->steps)
                  .ok());
  EXPECT_EQ(again.rdp(), r->accountant->rdp());
  // ... and one more step would pass the target.
  ASSERT_TRUE(again
                  .ComposeSampledWithoutReplacementGaussian(
                      gamma, c.noise_multiplier / 2, 1)
                  .ok());
  EXPECT_GT(again.Guarantee(c.target_delta)->epsilon, c.target_epsilon);
  const int64_t per_epoch = (g.num_edges() + c.batch_size - 1) / c.batch_size;
  EXPECT_DOUBLE_EQ(r->epochs, static_cast<double>(r->steps) / per_epoch);
  EXPECT_LT(r->steps, per_epoch * c.max_epochs);
}

TEST(SePrivGEmb, EpochLimitBindsWhenTheBudgetIsLarge) {
  const Graph g = TwoBlocks(10, 0.4, 2, 2);
  SePrivGEmbConfig c = SmallConfig();
  c.max_epochs = 3;
  SeededRandomForTesting noise(9);
  int64_t calls = 0, last_done = 0, planned = 0;
  const auto r =
      TrainSePrivGEmb(g, c, noise, 1, [&](int64_t done, int64_t all) {
        ++calls;
        last_done = done;
        planned = all;
      });
  ASSERT_TRUE(r.ok()) << r.status();
  const int64_t per_epoch = (g.num_edges() + c.batch_size - 1) / c.batch_size;
  EXPECT_FALSE(r->stopped_by_budget);
  EXPECT_EQ(r->steps, 3 * per_epoch);
  EXPECT_DOUBLE_EQ(r->epochs, 3.0);
  EXPECT_EQ(r->epoch_loss.size(), 3u);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(last_done, r->steps);
  EXPECT_EQ(planned, r->steps);
  EXPECT_LE(r->guarantee->epsilon, c.target_epsilon);
}

TEST(SePrivGEmb, OneUnaffordableStepIsAFailedPrecondition) {
  const Graph g = TwoBlocks(10, 0.4, 2, 2);
  SePrivGEmbConfig c = SmallConfig();
  c.noise_multiplier = 0.1;
  c.target_epsilon = 0.01;
  SeededRandomForTesting noise(9);
  const auto r = TrainSePrivGEmb(g, c, noise, 1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("cannot afford one step"),
            absl::string_view::npos)
      << r.status();
}

// One edge {0, 1} and isolated nodes 2..9, batch 1, one epoch: exactly one
// step. Degree proximity gives the isolated nodes no mass, so the step
// touches rows 0 and 1 only.
SePrivGEmbResult OneStep(NoisedRows rows) {
  const Graph g = *Graph::FromEdges(10, {{0, 1}});
  SePrivGEmbConfig c = SmallConfig();
  c.proximity = Proximity::kDegree;
  c.batch_size = 1;
  c.max_epochs = 1;
  c.noised_rows = rows;
  SeededRandomForTesting noise(4);
  auto r = TrainSePrivGEmb(g, c, noise, 17);
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 1);
  return *std::move(r);
}

TEST(SePrivGEmb, TouchedNoiseLeavesUntouchedRowsAtTheirInitialValues) {
  const SePrivGEmbResult r = OneStep(NoisedRows::kTouched);
  const DenseMatrix init = InitialCentre(10, 16, 17);
  int changed_w = 0, changed_c = 0;
  for (size_t v = 0; v < 10; ++v) {
    const bool w_same = RowEquals(r.centre.row(v), init.row(v));
    const bool c_same = RowIsZero(r.context.row(v));
    if (v >= 2) {
      EXPECT_TRUE(w_same) << v;
      EXPECT_TRUE(c_same) << v;
    }
    changed_w += !w_same;
    changed_c += !c_same;
  }
  EXPECT_EQ(changed_w, 1);  // the centre of the one example
  EXPECT_GE(changed_c, 1);  // its context (and negatives among 0, 1)
}

TEST(SePrivGEmb, AllNoiseChangesEveryRow) {
  const SePrivGEmbResult r = OneStep(NoisedRows::kAll);
  const DenseMatrix init = InitialCentre(10, 16, 17);
  for (size_t v = 0; v < 10; ++v) {
    EXPECT_FALSE(RowEquals(r.centre.row(v), init.row(v))) << v;
    EXPECT_FALSE(RowIsZero(r.context.row(v))) << v;
  }
}

// The privacy caveat of NoisedRows::kTouched (server/embedding/README.md,
// "What the guarantee covers", point 3). Two neighbouring graphs under
// replace-one: both have 4 edges; in `a` node 4 is isolated, in `b` the
// edge {2, 3} is replaced by {3, 4}. Under kTouched, node 4's rows are
// exactly their initial values with probability 1 on `a` (it is never a
// centre, context or, having degree mass 0, a negative) and with
// probability 0 on `b` once its example is sampled: an event no (epsilon,
// delta) with delta < 1 allows. kAll noises every row and removes it.
TEST(SePrivGEmb, TouchedRowsRevealWhichNodesNeverAppeared) {
  const Graph a = *Graph::FromEdges(5, {{0, 1}, {1, 2}, {2, 3}, {0, 3}});
  const Graph b = *Graph::FromEdges(5, {{0, 1}, {1, 2}, {3, 4}, {0, 3}});
  SePrivGEmbConfig c = SmallConfig();
  c.proximity = Proximity::kDegree;
  c.batch_size = 2;
  c.max_epochs = 10;  // 20 steps: node 4's example is sampled on b
  const DenseMatrix init = InitialCentre(5, c.dim, 3);
  auto node4_untouched = [&](const Graph& g, NoisedRows rows, uint64_t seed) {
    c.noised_rows = rows;
    SeededRandomForTesting noise(seed);
    const auto r = TrainSePrivGEmb(g, c, noise, 3);
    EXPECT_TRUE(r.ok()) << r.status();
    return RowEquals(r->centre.row(4), init.row(4)) &&
           RowIsZero(r->context.row(4));
  };
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    EXPECT_TRUE(node4_untouched(a, NoisedRows::kTouched, seed)) << seed;
    EXPECT_FALSE(node4_untouched(b, NoisedRows::kTouched, seed)) << seed;
    EXPECT_FALSE(node4_untouched(a, NoisedRows::kAll, seed)) << seed;
    EXPECT_FALSE(node4_untouched(b, NoisedRows::kAll, seed)) << seed;
  }
}

TEST(SePrivGEmb, SeededRunsAreReproducible) {
  const Graph g = TwoBlocks(15, 0.3, 3, 4);
  const SePrivGEmbConfig c = SmallConfig();
  SeededRandomForTesting n1(21), n2(21), n3(22);
  const auto r1 = TrainSePrivGEmb(g, c, n1, 5);
  const auto r2 = TrainSePrivGEmb(g, c, n2, 5);
  const auto r3 = TrainSePrivGEmb(g, c, n3, 5);
  ASSERT_TRUE(r1.ok() && r2.ok() && r3.ok());
  EXPECT_EQ(r1->centre.data, r2->centre.data);
  EXPECT_EQ(r1->context.data, r2->context.data);
  EXPECT_EQ(r1->epoch_loss, r2->epoch_loss);
  EXPECT_NE(r1->centre.data, r3->centre.data);
  EXPECT_EQ(r1->noise_source, "seeded-not-private");
}

TEST(SePrivGEmb, CoraPrivateSmoke) {
  const std::string dir = SharedDatasetsDir() + "/cora";
  if (!std::filesystem::exists(dir + "/edges.txt")) {
    GTEST_SKIP() << dir << " is absent";
  }
  const auto d = LoadDataset(dir);
  ASSERT_TRUE(d.ok()) << d.status();
  const auto split = RandomEdgeSplit(d->graph, 0, 0.1, 1);
  ASSERT_TRUE(split.ok()) << split.status();
  const auto train = d->graph.WithoutEdges(split->test);
  ASSERT_TRUE(train.ok());
  SePrivGEmbConfig c;
  c.dim = 64;
  c.max_epochs = 10;
  c.target_epsilon = 2;
  c.target_delta = 1e-5;
  SeededRandomForTesting noise(1);
  const auto r = TrainSePrivGEmb(*train, c, noise, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->guarantee.has_value());
  EXPECT_LE(r->guarantee->epsilon, 2.0);
  EXPECT_GT(r->steps, 0);
  for (float x : r->centre.data) ASSERT_TRUE(std::isfinite(x));
  const double auc = LinkAuc(r->centre, split->test, split->test_negative);
  std::cout << "cora private eps " << r->guarantee->epsilon << " (order "
            << r->guarantee->order << "): " << r->steps << " steps ("
            << r->epochs << " epochs, stopped by budget "
            << r->stopped_by_budget << ") in " << r->seconds
            << " s; held-out link AUC (cosine of W) " << auc << "\n";
  EXPECT_TRUE(std::isfinite(auc));
}

}  // namespace
}  // namespace ldpgraph::embedding
