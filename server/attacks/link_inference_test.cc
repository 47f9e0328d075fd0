// Tests for the link-inference attacks: non-edges are distinct, true
// non-edges and reproducible from their seed; the similarity attack's AUC
// by hand; LinkTeller's sources are a public, reproducible sample, and a
// run that kept no model cannot be queried. (Their effect on trained
// models: server/ldpgraph/edges_command_test.cc.)
#include "server/attacks/link_inference.h"

#include <algorithm>
#include <set>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/dataset/generator.h"
#include "common/testing/generated_datasets.h"

namespace ldpgraph::link_inference {
namespace {

using ::testing::HasSubstr;

Dataset Generated(size_t nodes, double homophily, uint64_t seed) {
  return testing_datasets::SmallDataset(nodes, homophily, seed);
}

TEST(LinkInferenceTest, NonEdgesAreDistinctAndReproducible) {
  const Dataset d = Generated(100, 0.8, 6);
  auto a = SampleNonEdges(d.graph, d.graph.num_edges(), 11);
  auto b = SampleNonEdges(d.graph, d.graph.num_edges(), 11);
  ASSERT_EQ(a.size(), d.graph.num_edges());
  std::set<std::pair<uint32_t, uint32_t>> seen;
  for (const Edge& e : a) {
    EXPECT_LT(e.u, e.v);
    EXPECT_FALSE(d.graph.HasEdge(e.u, e.v));
    EXPECT_TRUE(seen.insert({e.u, e.v}).second);
  }
  EXPECT_TRUE(a == b);
  // A complete graph on 3 nodes has no non-edges; a path on 3 has one.
  auto path = Graph::FromEdges(3, std::vector<Edge>{{0, 1}, {1, 2}});
  ASSERT_TRUE(path.ok());
  auto one = SampleNonEdges(*path, 5, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0], (Edge{0, 2}));
}

TEST(LinkInferenceTest, SimilarityAttackAucByHand) {
  // 4 nodes, edges {0,1} and {2,3}; outputs equal along edges, orthogonal
  // across: every edge scores 1, every non-edge 0.
  auto g = Graph::FromEdges(4, std::vector<Edge>{{0, 1}, {2, 3}});
  ASSERT_TRUE(g.ok());
  DenseMatrix out(4, 2);
  out.at(0, 0) = out.at(1, 0) = 0.9f;
  out.at(2, 1) = out.at(3, 1) = 0.7f;
  auto auc = SimilarityAttackAuc(*g, out, {{0, 2}, {1, 3}});
  ASSERT_TRUE(auc.ok());
  EXPECT_DOUBLE_EQ(*auc, 1.0);
  // Identical outputs everywhere: all ties, 0.5.
  DenseMatrix same(4, 2);
  for (float& x : same.data) x = 0.5f;
  EXPECT_DOUBLE_EQ(*SimilarityAttackAuc(*g, same, {{0, 2}, {1, 3}}), 0.5);
  EXPECT_FALSE(SimilarityAttackAuc(*g, DenseMatrix(3, 2), {{0, 2}}).ok());
  EXPECT_FALSE(SimilarityAttackAuc(*g, out, {}).ok());
}

TEST(LinkInferenceTest, LinkTellerSourcesAndErrors) {
  const std::vector<bool> all = LinkTellerSources(50, 0, 1);
  EXPECT_EQ(std::count(all.begin(), all.end(), true), 50);
  EXPECT_EQ(LinkTellerSources(50, 80, 1), all);
  const std::vector<bool> ten = LinkTellerSources(50, 10, 1);
  EXPECT_EQ(std::count(ten.begin(), ten.end(), true), 10);
  EXPECT_EQ(LinkTellerSources(50, 10, 1), ten);  // public, reproducible
  EXPECT_NE(LinkTellerSources(50, 10, 2), ten);
  // A run that kept no model cannot be queried.
  const Dataset d = Generated(60, 0.8, 3);
  const std::vector<Edge> non_edges = SampleNonEdges(d.graph, 10, 1);
  pipeline::RunResult r;
  pipeline::PipelineConfig c = pipeline::DefaultConfig(
      v1::PIPELINE_METHOD_LPGNN, v1::PIPELINE_TASK_NODE);
  c.node_model.kind = training::NodeModelKind::kGcn;
  auto auc = LinkTellerAttackAuc(d.graph, non_edges, d.graph, c, r, nullptr, 1);
  ASSERT_FALSE(auc.ok());
  EXPECT_THAT(auc.status().message(), HasSubstr("keep_node_model"));
}

}  // namespace
}  // namespace ldpgraph::link_inference
