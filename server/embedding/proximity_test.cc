#include "server/embedding/proximity.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace ldpgraph::embedding {
namespace {

Graph MakeGraph(size_t n, std::vector<Edge> edges) {
  auto g = Graph::FromEdges(n, edges);
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

// The dense (P + P^2) / 2 of a small graph, the reference.
std::vector<std::vector<double>> DenseWalk(const Graph& g) {
  const size_t n = g.num_nodes();
  std::vector<std::vector<double>> p(n, std::vector<double>(n, 0.0));
  for (size_t i = 0; i < n; ++i) {
    for (NodeId j : g.neighbors(i)) p[i][j] = 1.0 / g.degree(i);
  }
  std::vector<std::vector<double>> m(n, std::vector<double>(n, 0.0));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      double p2 = 0;
      for (size_t k = 0; k < n; ++k) p2 += p[i][k] * p[k][j];
      m[i][j] = 0.5 * (p[i][j] + p2);
    }
  }
  return m;
}

TEST(ProximityTest, WalkMatrixMatchesDenseReference) {
  // A path 0-1-2-3, a triangle 4-5-6 with a tail 6-7, an isolated node 8.
  Graph g = MakeGraph(9, {{0, 1}, {1, 2}, {2, 3}, {4, 5}, {5, 6}, {4, 6}, {6, 7}});
  SparseRows m = WalkProximityMatrix(g);
  auto dense = DenseWalk(g);
  ASSERT_EQ(m.rows, 9u);
  ASSERT_EQ(m.cols, 9u);
  size_t nonzero = 0;
  for (size_t i = 0; i < 9; ++i) {
    std::vector<double> row(9, 0.0);
    auto idx = m.row_indices(i);
    auto val = m.row_values(i);
    for (size_t t = 0; t < idx.size(); ++t) {
      if (t > 0) {
        EXPECT_LT(idx[t - 1], idx[t]);
      }
      row[idx[t]] = val[t];
      EXPECT_GT(val[t], 0.0f);
    }
    for (size_t j = 0; j < 9; ++j) {
      EXPECT_NEAR(row[j], dense[i][j], 1e-6) << i << "," << j;
      if (dense[i][j] > 0) ++nonzero;
    }
  }
  EXPECT_EQ(m.nnz(), nonzero);
  EXPECT_EQ(m.row_indices(8).size(), 0u);  // isolated: empty row
}

TEST(ProximityTest, RowsOfNonIsolatedNodesSumToOne) {
  Graph g = MakeGraph(6, {{0, 1}, {1, 2}, {2, 0}, {2, 3}, {3, 4}});
  SparseRows m = WalkProximityMatrix(g);
  for (size_t i = 0; i < 5; ++i) {
    double s = 0;
    for (float v : m.row_values(i)) s += v;
    EXPECT_NEAR(s, 1.0, 1e-6) << i;
  }
}

TEST(ProximityTest, MassIsColumnSumOfTheProximity) {
  Graph g = MakeGraph(9, {{0, 1}, {1, 2}, {2, 3}, {4, 5}, {5, 6}, {4, 6}, {6, 7}});
  auto dense = DenseWalk(g);
  auto walk = ProximityMass(g, Proximity::kDeepWalk);
  auto degree = ProximityMass(g, Proximity::kDegree);
  auto uniform = ProximityMass(g, Proximity::kUniform);
  for (size_t j = 0; j < 9; ++j) {
    double col = 0;
    for (size_t i = 0; i < 9; ++i) col += dense[i][j];
    EXPECT_NEAR(walk[j], col, 1e-12) << j;
    EXPECT_EQ(degree[j], g.degree(j));
    EXPECT_EQ(uniform[j], 1.0);
  }
}

TEST(ProximityTest, ParsesNamesAndRejectsOthers) {
  for (auto p : {Proximity::kDegree, Proximity::kDeepWalk, Proximity::kUniform}) {
    auto parsed = ParseProximity(ProximityName(p));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, p);
  }
  auto bad = ParseProximity("katz");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "proximity must be one of degree, deepwalk, uniform, got 'katz'");
}

}  // namespace
}  // namespace ldpgraph::embedding
