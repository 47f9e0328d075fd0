#include "server/training/linkteller.h"

#include <cmath>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "server/training/losses.h"
#include "server/training/metrics.h"

namespace ldpgraph::training {
namespace {

Graph MakeGraph(size_t n, const std::vector<Edge>& edges) {
  auto g = Graph::FromEdges(n, edges);
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

Graph Path(size_t n) {
  std::vector<Edge> edges;
  for (NodeId v = 0; v + 1 < n; ++v) edges.push_back({v, v + 1});
  return MakeGraph(n, edges);
}

Mat<double> RandomMatrix(int rows, int cols, uint64_t seed) {
  PublicRandom rng(seed);
  Mat<double> m(rows, cols);
  FillUniform(m, 1.0, rng);
  return m;
}

// A 2-layer graph network with every parameter (biases too) drawn at random.
Gnn<double> RandomGnn(GnnKind kind, Activation a, int in, int classes,
                      const GraphOperators<double>* ops, uint64_t seed) {
  PublicRandom rng(seed);
  Gnn<double> gnn({kind, in, 5, classes, 2, 0.0, a}, ops, rng);
  for (Param<double>* p : gnn.Params()) FillUniform(p->value, 1.0, rng);
  return gnn;
}

// The brute force: a full forward pass of X and of X with row u scaled by
// (1 + delta), over T^K; every node's ||posterior change|| / delta.
std::vector<double> BruteInfluence(Gnn<double>& gnn, const SpMat<double>& t,
                                   int steps, const Mat<double>& x,
                                   uint32_t u, double delta) {
  auto posteriors = [&](Mat<double> z) {
    for (int k = 0; k < steps; ++k) z = t * z;
    return Softmax(Mat<double>(gnn.Forward(z, false, nullptr)));
  };
  const Mat<double> base = posteriors(x);
  Mat<double> moved_x = x;
  moved_x.row(u) *= 1 + delta;
  const Mat<double> moved = posteriors(moved_x);
  std::vector<double> out(x.rows());
  for (Eigen::Index v = 0; v < x.rows(); ++v) {
    out[v] = (moved.row(v) - base.row(v)).norm() / delta;
  }
  return out;
}

TEST(LinkTellerTest, EqualsFullForwardFiniteDifference) {
  // A tree with a cycle and an isolated node, 10 nodes.
  const Graph g = MakeGraph(
      10, {{0, 1}, {1, 2}, {2, 3}, {3, 0}, {3, 4}, {4, 5}, {5, 6}, {6, 7},
           {2, 8}});
  const GraphOperators<double> ops = BuildGraphOperators<double>(g);
  const SpMat<double> t = BuildSymmetricOperator<double>(g);
  const Mat<double> x = RandomMatrix(10, 4, 3);
  for (GnnKind kind : {GnnKind::kGcn, GnnKind::kSage}) {
    for (Activation a : {Activation::kRelu, Activation::kSelu}) {
      for (int steps : {0, 2}) {
        SCOPED_TRACE(::testing::Message()
                     << "sage " << (kind == GnnKind::kSage) << " selu "
                     << (a == Activation::kSelu) << " steps " << steps);
        Gnn<double> gnn = RandomGnn(kind, a, 4, 3, &ops, 5);
        const ModelWeights w = gnn.Weights();
        auto lt = LinkTeller::Create({&w, &g, &x, &t, steps});
        ASSERT_TRUE(lt.ok()) << lt.status();
        for (uint32_t u = 0; u < 10; ++u) {
          const std::vector<double> brute =
              BruteInfluence(gnn, t, steps, x, u, kLinkTellerDelta);
          std::vector<bool> listed(10, false);
          for (const auto& [v, value] : lt->InfluenceOf(u)) {
            listed[v] = true;
            EXPECT_NEAR(value, brute[v], 1e-7 * std::max(1.0, brute[v]))
                << u << " -> " << v;
          }
          // Unlisted nodes are beyond the receptive field: the full pass
          // does not move them by a single bit.
          for (uint32_t v = 0; v < 10; ++v) {
            if (!listed[v]) {
              EXPECT_EQ(brute[v], 0.0) << u << " -> " << v;
            }
          }
        }
      }
    }
  }
}

TEST(LinkTellerTest, ZeroBeyondTheReceptiveField) {
  const Graph g = Path(12);
  const GraphOperators<double> ops = BuildGraphOperators<double>(g);
  const SpMat<double> t = BuildSymmetricOperator<double>(g);
  const Mat<double> x = RandomMatrix(12, 3, 9).cwiseAbs();
  Gnn<double> gnn = RandomGnn(GnnKind::kGcn, Activation::kSelu, 3, 2, &ops, 1);
  const ModelWeights w = gnn.Weights();
  // Two GCN layers reach 2 hops, and each KProp step one more.
  for (int steps : {0, 1, 3}) {
    auto lt = LinkTeller::Create({&w, &g, &x, &t, steps});
    ASSERT_TRUE(lt.ok()) << lt.status();
    std::set<uint32_t> reached;
    for (const auto& [v, value] : lt->InfluenceOf(5)) {
      reached.insert(v);
      EXPECT_GE(value, 0.0);
    }
    std::set<uint32_t> expected;
    for (int v = 5 - 2 - steps; v <= 5 + 2 + steps; ++v) expected.insert(v);
    EXPECT_EQ(reached, expected) << "steps " << steps;
    // The edge (5, 6) has influence; the pair (5, 11) none at all.
    auto scores = lt->Scores({{5, 6}, {5, 11}, {0, 11}}, 1);
    ASSERT_TRUE(scores.ok());
    EXPECT_GT((*scores)[0], 0.0);
    EXPECT_EQ((*scores)[1], 0.0);
    EXPECT_EQ((*scores)[2], 0.0);
  }
}

// A sparse random graph: most non-edges lie beyond two hops, where a GCN's
// influence is exactly 0, so the edges' scores rank above nearly all.
TEST(LinkTellerTest, SeparatesEdgesOnASparseGraph) {
  const uint32_t n = 300;
  PublicRandom rng(11);
  std::vector<Edge> edges;
  std::set<std::pair<uint32_t, uint32_t>> seen;
  while (edges.size() < 400) {
    uint32_t a = rng.UniformDouble() * n, b = rng.UniformDouble() * n;
    if (a == b || !seen.insert({std::min(a, b), std::max(a, b)}).second) {
      continue;
    }
    edges.push_back({std::min(a, b), std::max(a, b)});
  }
  const Graph g = MakeGraph(n, edges);
  std::vector<Edge> non_edges;
  while (non_edges.size() < edges.size()) {
    uint32_t a = rng.UniformDouble() * n, b = rng.UniformDouble() * n;
    if (a == b || g.HasEdge(a, b)) continue;
    non_edges.push_back({a, b});
  }
  const GraphOperators<double> ops = BuildGraphOperators<double>(g);
  // Informative features: one-hot blocks, as bag-of-words rows.
  Mat<double> x = Mat<double>::Zero(n, 8);
  for (uint32_t v = 0; v < n; ++v) x(v, v % 8) = 1.0;
  for (GnnKind kind : {GnnKind::kGcn, GnnKind::kSage}) {
    Gnn<double> gnn = RandomGnn(kind, Activation::kSelu, 8, 4, &ops, 2);
    const ModelWeights w = gnn.Weights();
    auto lt = LinkTeller::Create({&w, &g, &x, nullptr, 0});
    ASSERT_TRUE(lt.ok()) << lt.status();
    std::vector<Edge> pairs = edges;
    pairs.insert(pairs.end(), non_edges.begin(), non_edges.end());
    auto one = lt->Scores(pairs, 1);
    auto three = lt->Scores(pairs, 3);
    ASSERT_TRUE(one.ok() && three.ok());
    EXPECT_EQ(*one, *three);  // the thread count changes no bit
    // Directions apart, from a subset of sources: NaN where the source is
    // not queried, and the sum of both directions otherwise.
    std::vector<bool> even(n, false);
    for (uint32_t v = 0; v < n; v += 2) even[v] = true;
    auto directed = lt->DirectedScores(pairs, &even, 2);
    auto all = lt->DirectedScores(pairs, nullptr, 1);
    ASSERT_TRUE(directed.ok() && all.ok());
    for (size_t i = 0; i < pairs.size(); ++i) {
      EXPECT_EQ((*all)[2 * i] + (*all)[2 * i + 1], (*one)[i]);
      for (int side : {0, 1}) {
        const uint32_t source = side == 0 ? pairs[i].u : pairs[i].v;
        if (even[source]) {
          EXPECT_EQ((*directed)[2 * i + side], (*all)[2 * i + side]);
        } else {
          EXPECT_TRUE(std::isnan((*directed)[2 * i + side]));
        }
      }
    }
    std::vector<float> pos(one->begin(), one->begin() + edges.size());
    std::vector<float> neg(one->begin() + edges.size(), one->end());
    for (float s : pos) EXPECT_GT(s, 0.0f);
    auto auc = RocAuc(pos, neg);
    ASSERT_TRUE(auc.ok());
    EXPECT_GT(*auc, 0.95);
  }
}

TEST(LinkTellerTest, AnMlpInfluencesNoOtherNode) {
  const Graph g = Path(6);
  const Mat<double> x = RandomMatrix(6, 3, 4);
  PublicRandom rng(3);
  Mlp<double> mlp({3, 4, 2, 2, 0.0, Activation::kSelu}, rng);
  const ModelWeights w = mlp.Weights();
  auto lt = LinkTeller::Create({&w, &g, &x, nullptr, 0});
  ASSERT_TRUE(lt.ok()) << lt.status();
  for (uint32_t u = 0; u < 6; ++u) {
    auto reached = lt->InfluenceOf(u);
    ASSERT_EQ(reached.size(), 1u);
    EXPECT_EQ(reached[0].first, u);
  }
  auto scores = lt->Scores({{0, 1}, {1, 2}, {0, 5}, {2, 4}}, 2);
  ASSERT_TRUE(scores.ok());
  for (double s : *scores) EXPECT_EQ(s, 0.0);
  std::vector<float> pos{float((*scores)[0]), float((*scores)[1])};
  std::vector<float> neg{float((*scores)[2]), float((*scores)[3])};
  EXPECT_EQ(*RocAuc(pos, neg), 0.5);
}

TEST(LinkTellerTest, RejectsBadInputs) {
  const Graph g = Path(4);
  const GraphOperators<double> ops = BuildGraphOperators<double>(g);
  const Mat<double> x = RandomMatrix(4, 3, 4);
  Gnn<double> gnn = RandomGnn(GnnKind::kGcn, Activation::kRelu, 3, 2, &ops, 1);
  const ModelWeights w = gnn.Weights();
  EXPECT_FALSE(LinkTeller::Create({&w, &g, &x, nullptr, 0}, 0.0).ok());
  EXPECT_FALSE(
      LinkTeller::Create({&w, &g, &x, nullptr, 0}, std::nan("")).ok());
  EXPECT_FALSE(LinkTeller::Create({nullptr, &g, &x, nullptr, 0}).ok());
  // KProp steps without the operator.
  EXPECT_FALSE(LinkTeller::Create({&w, &g, &x, nullptr, 2}).ok());
  EXPECT_FALSE(LinkTeller::Create({&w, &g, &x, nullptr, -1}).ok());
  const Mat<double> wide = RandomMatrix(4, 5, 4);
  auto shape = LinkTeller::Create({&w, &g, &wide, nullptr, 0});
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find("layer 0"), std::string::npos);
  const Graph bigger = Path(5);
  EXPECT_FALSE(LinkTeller::Create({&w, &bigger, &x, nullptr, 0}).ok());
  auto lt = LinkTeller::Create({&w, &g, &x, nullptr, 0});
  ASSERT_TRUE(lt.ok());
  EXPECT_FALSE(lt->Scores({{0, 0}}, 1).ok());
  EXPECT_FALSE(lt->Scores({{0, 4}}, 1).ok());
  EXPECT_FALSE(lt->Scores({{0, 1}}, 0).ok());
  const std::vector<bool> short_flags(3, true);
  EXPECT_FALSE(lt->DirectedScores({{0, 1}}, &short_flags, 1).ok());
}

}  // namespace
}  // namespace ldpgraph::training
