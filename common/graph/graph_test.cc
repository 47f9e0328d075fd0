#include "common/graph/graph.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<NodeId> Neighbors(const Graph& g, NodeId v) {
  auto s = g.neighbors(v);
  return std::vector<NodeId>(s.begin(), s.end());
}

TEST(GraphTest, EmptyGraph) {
  Graph g;
  EXPECT_EQ(g.num_nodes(), 0u);
  EXPECT_EQ(g.num_edges(), 0u);
  EXPECT_THAT(g.Edges(), IsEmpty());
}

TEST(GraphTest, BuildsSortedSymmetricLists) {
  // A path 0-1-2 plus 3-0, an isolated node 4, given in mixed orientation.
  auto g = Graph::FromEdges(5, {{1, 0}, {2, 1}, {0, 3}});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->num_nodes(), 5u);
  EXPECT_EQ(g->num_edges(), 3u);
  EXPECT_EQ(g->num_adjacency_entries(), 6u);
  EXPECT_THAT(Neighbors(*g, 0), ElementsAre(1, 3));
  EXPECT_THAT(Neighbors(*g, 1), ElementsAre(0, 2));
  EXPECT_THAT(Neighbors(*g, 2), ElementsAre(1));
  EXPECT_THAT(Neighbors(*g, 3), ElementsAre(0));
  EXPECT_THAT(Neighbors(*g, 4), IsEmpty());
  EXPECT_EQ(g->degree(0), 2u);
  EXPECT_EQ(g->degree(4), 0u);
  EXPECT_EQ(g->max_degree(), 2u);
  EXPECT_TRUE(g->HasEdge(3, 0));
  EXPECT_TRUE(g->HasEdge(0, 3));
  EXPECT_FALSE(g->HasEdge(2, 3));
  EXPECT_FALSE(g->HasEdge(0, 99));
  EXPECT_THAT(g->Edges(), ElementsAre(Edge{0, 1}, Edge{0, 3}, Edge{1, 2}));
}

TEST(GraphTest, MergesDuplicatesInEitherOrientation) {
  auto g = Graph::FromEdges(3, {{0, 1}, {1, 0}, {0, 1}, {1, 2}});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->num_edges(), 2u);
  EXPECT_THAT(Neighbors(*g, 1), ElementsAre(0, 2));
}

TEST(GraphTest, RejectsDuplicatesWhenAsked) {
  Graph::BuildOptions o;
  o.merge_duplicates = false;
  auto g = Graph::FromEdges(3, {{0, 1}, {1, 2}, {1, 0}}, o);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("edge 2 {0, 1}: duplicate"));
}

TEST(GraphTest, RejectsOutOfRangeIdNamingTheEdge) {
  auto g = Graph::FromEdges(3, {{0, 1}, {2, 3}});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("edge 1 {2, 3}"));
  EXPECT_THAT(g.status().message(), HasSubstr("node id 3 out of range"));
}

TEST(GraphTest, SelfLoopsRejectedByDefaultAndCountedOnceWhenAllowed) {
  auto bad = Graph::FromEdges(2, {{0, 1}, {1, 1}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("edge 1 {1, 1}: self loop"));

  Graph::BuildOptions o;
  o.allow_self_loops = true;
  auto g = Graph::FromEdges(2, {{0, 1}, {1, 1}, {1, 1}}, o);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->num_edges(), 2u);
  EXPECT_EQ(g->num_self_loops(), 1u);
  EXPECT_EQ(g->degree(1), 2u);
  EXPECT_THAT(Neighbors(*g, 1), ElementsAre(0, 1));
  EXPECT_TRUE(g->HasSelfLoop(1));
  EXPECT_FALSE(g->HasSelfLoop(0));
  EXPECT_THAT(g->Edges(), ElementsAre(Edge{0, 1}, Edge{1, 1}));
}

TEST(GraphTest, WithSelfLoopsAddsOnlyMissingLoops) {
  Graph::BuildOptions o;
  o.allow_self_loops = true;
  auto g = Graph::FromEdges(4, {{0, 2}, {2, 2}, {1, 3}}, o);
  ASSERT_TRUE(g.ok());
  Graph s = g->WithSelfLoops();
  EXPECT_EQ(s.num_self_loops(), 4u);
  EXPECT_EQ(s.num_edges(), 2u + 4u);
  EXPECT_THAT(Neighbors(s, 0), ElementsAre(0, 2));
  EXPECT_THAT(Neighbors(s, 2), ElementsAre(0, 2));
  EXPECT_THAT(Neighbors(s, 3), ElementsAre(1, 3));
  EXPECT_EQ(s.degree(2), 2u);
}

TEST(GraphTest, WithoutEdgesRemovesBothDirections) {
  auto g = Graph::FromEdges(4, {{0, 1}, {1, 2}, {2, 3}, {0, 3}});
  ASSERT_TRUE(g.ok());
  auto h = g->WithoutEdges({{2, 1}, {0, 3}});
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->num_nodes(), 4u);
  EXPECT_THAT(h->Edges(), ElementsAre(Edge{0, 1}, Edge{2, 3}));
  EXPECT_FALSE(h->HasEdge(1, 2));
  EXPECT_FALSE(h->HasEdge(3, 0));
  // The original is untouched.
  EXPECT_EQ(g->num_edges(), 4u);
}

TEST(GraphTest, WithoutEdgesRejectsNonEdgesAndRepeats) {
  auto g = Graph::FromEdges(4, {{0, 1}, {1, 2}});
  ASSERT_TRUE(g.ok());
  auto missing = g->WithoutEdges({{0, 1}, {0, 2}});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("removed edge 1 {0, 2}"));
  auto twice = g->WithoutEdges({{0, 1}, {1, 0}});
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(twice.status().message(), HasSubstr("more than once"));
}

TEST(GraphTest, MatchesAdjacencySetOnRandomGraph) {
  // A deterministic pseudo-random multigraph; the CSR must equal the set of
  // distinct undirected pairs.
  const NodeId n = 200;
  std::vector<Edge> edges;
  uint64_t x = 12345;
  std::vector<std::vector<bool>> adj(n, std::vector<bool>(n, false));
  for (int i = 0; i < 3000; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    NodeId u = (x >> 33) % n;
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    NodeId v = (x >> 33) % n;
    if (u == v) continue;
    edges.push_back({u, v});
    adj[u][v] = adj[v][u] = true;
  }
  auto g = Graph::FromEdges(n, edges);
  ASSERT_TRUE(g.ok());
  size_t m = 0;
  for (NodeId u = 0; u < n; ++u) {
    size_t deg = 0;
    for (NodeId v = 0; v < n; ++v) {
      EXPECT_EQ(g->HasEdge(u, v), adj[u][v]) << u << "," << v;
      deg += adj[u][v];
      if (u < v && adj[u][v]) ++m;
    }
    EXPECT_EQ(g->degree(u), deg);
  }
  EXPECT_EQ(g->num_edges(), m);
  EXPECT_EQ(g->Edges().size(), m);
}

std::vector<double> Weights(const Graph& g, NodeId v) {
  auto s = g.weights(v);
  return std::vector<double>(s.begin(), s.end());
}

TEST(WeightedGraphTest, StoresWeightsAlignedAndSymmetric) {
  auto g = Graph::FromWeightedEdges(4, {{2, 0}, {0, 1}, {1, 2}},
                                    {0.5, 2.0, 0.25});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->weighted());
  EXPECT_EQ(g->num_edges(), 3u);
  EXPECT_THAT(Neighbors(*g, 0), ElementsAre(1, 2));
  EXPECT_THAT(Weights(*g, 0), ElementsAre(2.0, 0.5));
  EXPECT_THAT(Weights(*g, 1), ElementsAre(2.0, 0.25));
  EXPECT_THAT(Weights(*g, 2), ElementsAre(0.5, 0.25));
  EXPECT_THAT(Weights(*g, 3), IsEmpty());
  EXPECT_EQ(g->weight(0, 1), 0.5);
  EXPECT_EQ(g->weighted_degree(0), 2.5);
  EXPECT_EQ(g->weighted_degree(3), 0.0);
  EXPECT_THAT(g->Edges(), ElementsAre(Edge{0, 1}, Edge{0, 2}, Edge{1, 2}));
  EXPECT_THAT(g->EdgeWeights(), ElementsAre(2.0, 0.5, 0.25));
}

TEST(WeightedGraphTest, UnweightedGraphStoresNoWeights) {
  auto g = Graph::FromEdges(3, {{0, 1}, {1, 2}});
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(g->weighted());
  EXPECT_THAT(Weights(*g, 1), IsEmpty());
  EXPECT_THAT(g->all_weights(), IsEmpty());
  EXPECT_THAT(g->EdgeWeights(), IsEmpty());
  EXPECT_EQ(g->weight(1, 0), 1.0);
  EXPECT_EQ(g->weighted_degree(1), 2.0);
  auto w = Graph::FromWeightedEdges(3, {{0, 1}, {1, 2}}, {1.0, 1.0});
  ASSERT_TRUE(w.ok());
  EXPECT_GT(w->MemoryBytes(), g->MemoryBytes());
  EXPECT_EQ(w->offsets(), g->offsets());
  EXPECT_EQ(w->targets(), g->targets());
}

TEST(WeightedGraphTest, RejectsBadWeightsNamingTheEdge) {
  const std::vector<Edge> edges = {{0, 1}, {1, 2}};
  for (double bad : {0.0, -1.0, std::nan(""), HUGE_VAL}) {
    auto g = Graph::FromWeightedEdges(3, edges, {1.0, bad});
    ASSERT_FALSE(g.ok()) << bad;
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(g.status().message(), HasSubstr("edge 1 {1, 2}"));
  }
  auto count = Graph::FromWeightedEdges(3, edges, {1.0});
  EXPECT_THAT(count.status().message(), HasSubstr("1 weights for 2 edges"));
}

TEST(WeightedGraphTest, MergesEqualRepeatsRejectsDifferentOnes) {
  auto same = Graph::FromWeightedEdges(3, {{0, 1}, {1, 0}}, {0.5, 0.5});
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->num_edges(), 1u);
  EXPECT_THAT(same->EdgeWeights(), ElementsAre(0.5));
  auto differ = Graph::FromWeightedEdges(3, {{0, 1}, {1, 2}, {1, 0}},
                                         {0.5, 1.0, 0.75});
  ASSERT_FALSE(differ.ok());
  EXPECT_THAT(differ.status().message(), HasSubstr("edge 2 {"));
  EXPECT_THAT(differ.status().message(), HasSubstr("differs"));
}

TEST(WeightedGraphTest, SelfLoopsAndRemovalKeepWeights) {
  Graph::BuildOptions loops;
  loops.allow_self_loops = true;
  auto g = Graph::FromWeightedEdges(3, {{1, 1}, {0, 1}, {1, 2}},
                                    {3.0, 0.5, 0.25}, loops);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(Weights(*g, 1), ElementsAre(0.5, 3.0, 0.25));
  const Graph with = g->WithSelfLoops();
  EXPECT_TRUE(with.weighted());
  EXPECT_THAT(Neighbors(with, 0), ElementsAre(0, 1));
  EXPECT_THAT(Weights(with, 0), ElementsAre(1.0, 0.5));
  EXPECT_THAT(Weights(with, 1), ElementsAre(0.5, 3.0, 0.25));
  EXPECT_THAT(Weights(with, 2), ElementsAre(0.25, 1.0));
  auto without = g->WithoutEdges({{1, 0}});
  ASSERT_TRUE(without.ok());
  EXPECT_TRUE(without->weighted());
  EXPECT_THAT(without->Edges(), ElementsAre(Edge{1, 1}, Edge{1, 2}));
  EXPECT_THAT(without->EdgeWeights(), ElementsAre(3.0, 0.25));
  EXPECT_THAT(Weights(*without, 2), ElementsAre(0.25));
}

}  // namespace
}  // namespace ldpgraph
