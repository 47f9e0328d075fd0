#include "common/dataset/splits.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/random/random.h"
#include "common/testing/shared_datasets.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

bool EdgeLess(const Edge& a, const Edge& b) {
  return a.u != b.u ? a.u < b.u : a.v < b.v;
}

std::vector<NodeId> Concat(const NodeSplit& s) {
  std::vector<NodeId> all = s.train;
  all.insert(all.end(), s.validation.begin(), s.validation.end());
  all.insert(all.end(), s.test.begin(), s.test.end());
  return all;
}

// Sizes, order, disjointness, coverage of the labelled nodes.
// A random split covers every labelled node; a fixed one (Planetoid) only
// some of them.
void CheckNodeSplit(const NodeSplit& s, const std::vector<int32_t>& labels,
                    size_t n_train, size_t n_val, size_t n_test,
                    bool covers_all = true) {
  EXPECT_EQ(s.train.size(), n_train);
  EXPECT_EQ(s.validation.size(), n_val);
  EXPECT_EQ(s.test.size(), n_test);
  for (const auto* list : {&s.train, &s.validation, &s.test}) {
    EXPECT_TRUE(std::adjacent_find(list->begin(), list->end(),
                                   std::greater_equal<NodeId>()) ==
                list->end())
        << "not strictly ascending";
  }
  std::vector<NodeId> all = Concat(s);
  std::sort(all.begin(), all.end());
  EXPECT_TRUE(std::adjacent_find(all.begin(), all.end()) == all.end())
      << "parts overlap";
  for (NodeId v : all) {
    ASSERT_LT(v, labels.size());
    EXPECT_GE(labels[v], 0) << "unlabelled node " << v;
  }
  if (covers_all) {
    std::vector<NodeId> labelled;
    for (size_t i = 0; i < labels.size(); ++i) {
      if (labels[i] >= 0) labelled.push_back(static_cast<NodeId>(i));
    }
    EXPECT_EQ(all, labelled);
  }
}

std::vector<int32_t> Labels(size_t n, std::vector<size_t> unlabelled = {}) {
  std::vector<int32_t> labels(n);
  for (size_t i = 0; i < n; ++i) labels[i] = static_cast<int32_t>(i % 3);
  for (size_t i : unlabelled) labels[i] = -1;
  return labels;
}

// ------------------------------------------------------------ node splits

TEST(RandomNodeSplitTest, SizesSkipUnlabelledNodes) {
  const auto labels = Labels(10, {3, 7});  // 8 labelled
  auto s = RandomNodeSplit(labels, 0.5, 0.25, 1);
  ASSERT_TRUE(s.ok()) << s.status();
  CheckNodeSplit(*s, labels, 4, 2, 2);
  for (NodeId v : Concat(*s)) EXPECT_NE(labels[v], -1) << v;
}

TEST(RandomNodeSplitTest, RoundsHalfAwayFromZero) {
  // 7 labelled: round(3.5) = 4, round(1.75) = 2, rest 1.
  auto s = RandomNodeSplit(Labels(7), 0.5, 0.25, 2);
  ASSERT_TRUE(s.ok()) << s.status();
  CheckNodeSplit(*s, Labels(7), 4, 2, 1);
  // 5 labelled: round(1.5) = 2, round(0.5) = 1, rest 2.
  s = RandomNodeSplit(Labels(5), 0.3, 0.1, 2);
  ASSERT_TRUE(s.ok()) << s.status();
  CheckNodeSplit(*s, Labels(5), 2, 1, 2);
}

TEST(RandomNodeSplitTest, FractionsSummingToOne) {
  // 0.7 + 0.3 exceeds 1 by one ulp in doubles; accepted.
  auto s = RandomNodeSplit(Labels(10), 0.7, 0.3, 3);
  ASSERT_TRUE(s.ok()) << s.status();
  CheckNodeSplit(*s, Labels(10), 7, 3, 0);
  // Both round up: validation takes what is left.
  s = RandomNodeSplit(Labels(3), 0.5, 0.5, 3);
  ASSERT_TRUE(s.ok()) << s.status();
  CheckNodeSplit(*s, Labels(3), 2, 1, 0);
  s = RandomNodeSplit(Labels(4), 1.0, 0.0, 3);
  ASSERT_TRUE(s.ok()) << s.status();
  CheckNodeSplit(*s, Labels(4), 4, 0, 0);
}

TEST(RandomNodeSplitTest, NoLabelledNodes) {
  const std::vector<int32_t> labels(5, -1);
  auto s = RandomNodeSplit(labels, 0.5, 0.25, 0);
  ASSERT_TRUE(s.ok()) << s.status();
  CheckNodeSplit(*s, labels, 0, 0, 0);
}

TEST(RandomNodeSplitTest, SeedDeterminesTheSplit) {
  const auto labels = Labels(200, {5, 50, 199});
  auto a = RandomNodeSplit(labels, 0.5, 0.25, 42);
  auto b = RandomNodeSplit(labels, 0.5, 0.25, 42);
  auto c = RandomNodeSplit(labels, 0.5, 0.25, 43);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->train, b->train);
  EXPECT_EQ(a->validation, b->validation);
  EXPECT_EQ(a->test, b->test);
  EXPECT_NE(a->train, c->train);
  CheckNodeSplit(*c, labels, 99, 49, 49);
  // Random, not a prefix: training nodes come from the whole id range.
  EXPECT_LT(a->train.front(), 20u);
  EXPECT_GT(a->train.back(), 180u);
  EXPECT_NE(a->train.back() - a->train.front() + 1, a->train.size());
}

TEST(RandomNodeSplitTest, RejectsBadFractions) {
  const auto labels = Labels(10);
  struct Case {
    double train, val;
    const char* message;
  };
  const Case cases[] = {
      {-0.1, 0.2, "train_fraction = -0.1 must be in [0, 1]"},
      {1.5, 0.0, "train_fraction = 1.5 must be in [0, 1]"},
      {0.5, -1.0, "validation_fraction = -1 must be in [0, 1]"},
      {std::nan(""), 0.2, "train_fraction = nan must be in [0, 1]"},
      {0.5, std::numeric_limits<double>::infinity(),
       "validation_fraction = inf must be in [0, 1]"},
      {0.8, 0.3,
       "train_fraction + validation_fraction = 1.1 must be at most 1"},
  };
  for (const Case& c : cases) {
    const absl::Status s = RandomNodeSplit(labels, c.train, c.val, 1).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message));
  }
}

// ------------------------------------------------------- Planetoid split

Dataset FakePlanetoid(const std::string& name, size_t nodes,
                      std::vector<size_t> unlabelled = {}) {
  Dataset d;
  d.meta.name = name;
  d.meta.nodes = nodes;
  d.labels = Labels(nodes, std::move(unlabelled));
  return d;
}

std::vector<NodeId> Range(NodeId begin, NodeId end) {
  std::vector<NodeId> out;
  for (NodeId v = begin; v < end; ++v) out.push_back(v);
  return out;
}

TEST(PlanetoidSplitTest, FixedRanges) {
  auto cora = PlanetoidSplit(FakePlanetoid("cora", 2708));
  ASSERT_TRUE(cora.ok()) << cora.status();
  EXPECT_EQ(cora->train, Range(0, 140));
  EXPECT_EQ(cora->validation, Range(140, 640));
  EXPECT_EQ(cora->test, Range(1708, 2708));
  auto pubmed = PlanetoidSplit(FakePlanetoid("pubmed", 19717));
  ASSERT_TRUE(pubmed.ok()) << pubmed.status();
  EXPECT_EQ(pubmed->train, Range(0, 60));
  EXPECT_EQ(pubmed->validation, Range(60, 560));
  EXPECT_EQ(pubmed->test, Range(18717, 19717));
}

TEST(PlanetoidSplitTest, OnlyLabelledNodes) {
  // Unlabelled nodes inside each range are left out.
  auto s = PlanetoidSplit(FakePlanetoid("citeseer", 3327, {5, 200, 2400, 3326}));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->train.size(), 119u);
  EXPECT_EQ(s->validation.size(), 499u);
  EXPECT_EQ(s->test.size(), 1015u - 2u);
  EXPECT_EQ(s->test.front(), 2312u);
  EXPECT_EQ(s->test.back(), 3325u);
  for (NodeId v : Concat(*s)) {
    EXPECT_TRUE(v != 5 && v != 200 && v != 2400 && v != 3326) << v;
  }
}

TEST(PlanetoidSplitTest, UnknownDatasets) {
  EXPECT_TRUE(HasPlanetoidSplit(FakePlanetoid("cora", 2708)));
  EXPECT_TRUE(HasPlanetoidSplit(FakePlanetoid("citeseer", 3327)));
  EXPECT_TRUE(HasPlanetoidSplit(FakePlanetoid("pubmed", 19717)));
  EXPECT_FALSE(HasPlanetoidSplit(FakePlanetoid("cora", 2707)));
  EXPECT_FALSE(HasPlanetoidSplit(FakePlanetoid("Cora", 2708)));
  EXPECT_FALSE(HasPlanetoidSplit(FakePlanetoid("generated", 2708)));
  const absl::Status s = PlanetoidSplit(FakePlanetoid("cora", 100)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("\"cora\" with 100 nodes"),
                    HasSubstr("no Planetoid split")));
}

TEST(PlanetoidSplitTest, RealDatasets) {
  struct Expected {
    const char* name;
    size_t train, val, test;
  };
  // citeseer: the test range 2312..3326 holds 1015 ids; the 15 unlabelled
  // nodes (no feature row in the Planetoid files) all lie in it, so exactly
  // 1000 labelled test nodes remain, as the datasets README says (checked
  // against nodes.svm: the 15 label -1 lines are nodes 2407..3309).
  const Expected expected[] = {{"cora", 140, 500, 1000},
                               {"citeseer", 120, 500, 1000},
                               {"pubmed", 60, 500, 1000}};
  int found = 0;
  for (const Expected& e : expected) {
    const std::string dir =
        (std::filesystem::path(SharedDatasetsDir()) / e.name).string();
    if (!std::filesystem::is_directory(dir)) continue;
    ++found;
    auto d = LoadDataset(dir);
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_TRUE(HasPlanetoidSplit(*d)) << e.name;
    auto s = PlanetoidSplit(*d);
    ASSERT_TRUE(s.ok()) << s.status();
    CheckNodeSplit(*s, d->labels, e.train, e.val, e.test,
                   /*covers_all=*/false);
  }
  if (found == 0) {
    GTEST_SKIP() << "no datasets found under " << SharedDatasetsDir()
                 << " (set LDPGRAPH_DATASETS)";
  }
}

// ------------------------------------------------------------ edge splits

// A random graph on n nodes with about m edges, plus the given self loops.
Graph RandomGraph(size_t n, size_t m, uint64_t seed,
                  std::vector<NodeId> self_loops = {}) {
  PublicRandom rng(seed);
  std::vector<Edge> edges;
  for (size_t i = 0; i < m; ++i) {
    const NodeId u = static_cast<NodeId>(rng.UniformInt(n));
    const NodeId v = static_cast<NodeId>(rng.UniformInt(n));
    if (u != v) edges.push_back({u, v});
  }
  for (NodeId v : self_loops) edges.push_back({v, v});
  Graph::BuildOptions options;
  options.allow_self_loops = true;
  return *Graph::FromEdges(n, edges, options);
}

std::vector<Edge> NonLoopEdges(const Graph& g) {
  std::vector<Edge> out;
  for (const Edge& e : g.Edges()) {
    if (e.u != e.v) out.push_back(e);
  }
  return out;
}

// Every documented property of an edge split of g.
void CheckEdgeSplit(const Graph& g, const EdgeSplit& s, size_t n_val,
                    size_t n_test) {
  const std::vector<Edge> edges = NonLoopEdges(g);
  EXPECT_EQ(s.validation.size(), n_val);
  EXPECT_EQ(s.test.size(), n_test);
  EXPECT_EQ(s.train.size(), edges.size() - n_val - n_test);
  std::vector<Edge> positives;
  for (const auto* list : {&s.train, &s.validation, &s.test}) {
    EXPECT_TRUE(std::is_sorted(list->begin(), list->end(), EdgeLess));
    positives.insert(positives.end(), list->begin(), list->end());
  }
  std::sort(positives.begin(), positives.end(), EdgeLess);
  EXPECT_EQ(positives, edges);  // disjoint and covering, u < v
  EXPECT_EQ(s.train_negative.size(), s.train.size());
  EXPECT_EQ(s.validation_negative.size(), s.validation.size());
  EXPECT_EQ(s.test_negative.size(), s.test.size());
  std::set<std::pair<NodeId, NodeId>> negatives;
  for (const auto* list :
       {&s.train_negative, &s.validation_negative, &s.test_negative}) {
    for (const Edge& e : *list) {
      EXPECT_LT(e.u, e.v);  // no self loops, u < v
      EXPECT_LT(e.v, g.num_nodes());
      EXPECT_FALSE(g.HasEdge(e.u, e.v)) << e.u << " " << e.v;
      EXPECT_TRUE(negatives.insert({e.u, e.v}).second)
          << "repeated " << e.u << " " << e.v;
    }
  }
}

TEST(RandomEdgeSplitTest, PropertiesAndRounding) {
  const Graph g = RandomGraph(60, 200, 7, {3, 10});
  const size_t m = NonLoopEdges(g).size();
  ASSERT_GT(m, 150u);
  auto s = RandomEdgeSplit(g, 0.05, 0.10, 11);
  ASSERT_TRUE(s.ok()) << s.status();
  CheckEdgeSplit(g, *s, static_cast<size_t>(std::round(0.05 * m)),
                 static_cast<size_t>(std::round(0.10 * m)));
}

TEST(RandomEdgeSplitTest, RoundsHalfAwayFromZero) {
  // 10 edges: round(0.25 * 10) = 3 validation, round(0.15 * 10) = 2 test.
  const Graph g = *Graph::FromEdges(
      8, {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}, {4, 5}, {4, 6},
          {5, 6}, {6, 7}});
  auto s = RandomEdgeSplit(g, 0.25, 0.15, 5);
  ASSERT_TRUE(s.ok()) << s.status();
  CheckEdgeSplit(g, *s, 3, 2);
  // Both parts round up past m: test takes what is left.
  s = RandomEdgeSplit(g, 0.55, 0.45, 5);
  ASSERT_TRUE(s.ok()) << s.status();
  CheckEdgeSplit(g, *s, 6, 4);
}

TEST(RandomEdgeSplitTest, TrainingGraphIsWithoutEdges) {
  const Graph g = RandomGraph(100, 400, 8);
  auto s = RandomEdgeSplit(g, 0.1, 0.2, 9);
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<Edge> hidden = s->validation;
  hidden.insert(hidden.end(), s->test.begin(), s->test.end());
  auto train_graph = g.WithoutEdges(hidden);
  ASSERT_TRUE(train_graph.ok()) << train_graph.status();
  EXPECT_EQ(train_graph->Edges(), s->train);
  EXPECT_EQ(train_graph->num_nodes(), g.num_nodes());
}

TEST(RandomEdgeSplitTest, SeedDeterminesTheSplit) {
  const Graph g = RandomGraph(200, 800, 10);
  auto a = RandomEdgeSplit(g, 0.05, 0.1, 1);
  auto b = RandomEdgeSplit(g, 0.05, 0.1, 1);
  auto c = RandomEdgeSplit(g, 0.05, 0.1, 2);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->train, b->train);
  EXPECT_EQ(a->validation, b->validation);
  EXPECT_EQ(a->test, b->test);
  EXPECT_EQ(a->train_negative, b->train_negative);
  EXPECT_EQ(a->validation_negative, b->validation_negative);
  EXPECT_EQ(a->test_negative, b->test_negative);
  EXPECT_NE(a->test, c->test);
  EXPECT_NE(a->test_negative, c->test_negative);
}

TEST(RandomEdgeSplitTest, NegativesSpreadOverAllNodes) {
  const Graph g = RandomGraph(1000, 3000, 12);
  auto s = RandomEdgeSplit(g, 0.05, 0.1, 3);
  ASSERT_TRUE(s.ok()) << s.status();
  // ~2900 negatives among ~500,000 pairs: uniform draws would repeat ~8
  // times, so this also checks that repeats are rejected.
  const size_t m = NonLoopEdges(g).size();
  CheckEdgeSplit(g, *s, static_cast<size_t>(std::round(0.05 * m)),
                 static_cast<size_t>(std::round(0.10 * m)));
  // With ~2900 uniform non-edges, every tenth of the id range gets some
  // endpoints (the expected count per tenth is ~580).
  std::vector<int> per_tenth(10, 0);
  for (const Edge& e : s->train_negative) {
    ++per_tenth[e.u / 100];
    ++per_tenth[e.v / 100];
  }
  for (int count : per_tenth) EXPECT_GT(count, 300);
}

TEST(RandomEdgeSplitTest, DenseGraphUsesEveryNonEdge) {
  // 20 nodes: 190 pairs. 95 edges leave exactly 95 non-edges, all needed.
  PublicRandom rng(4);
  std::vector<uint32_t> chosen = rng.SampleWithoutReplacement(190, 95);
  std::vector<Edge> all_pairs;
  for (NodeId u = 0; u < 20; ++u) {
    for (NodeId v = u + 1; v < 20; ++v) all_pairs.push_back({u, v});
  }
  std::vector<Edge> edges;
  for (uint32_t i : chosen) edges.push_back(all_pairs[i]);
  const Graph g = *Graph::FromEdges(20, edges);
  auto s = RandomEdgeSplit(g, 0.1, 0.1, 6);
  ASSERT_TRUE(s.ok()) << s.status();
  CheckEdgeSplit(g, *s, 10, 10);
  std::vector<Edge> negatives = s->train_negative;
  negatives.insert(negatives.end(), s->validation_negative.begin(),
                   s->validation_negative.end());
  negatives.insert(negatives.end(), s->test_negative.begin(),
                   s->test_negative.end());
  std::sort(negatives.begin(), negatives.end(), EdgeLess);
  std::vector<Edge> complement;
  for (const Edge& e : all_pairs) {
    if (!g.HasEdge(e.u, e.v)) complement.push_back(e);
  }
  EXPECT_EQ(negatives, complement);
}

TEST(RandomEdgeSplitTest, DenseButNotExhaustive) {
  // 30 nodes: 435 pairs, 160 edges, 275 non-edges: more than half of them
  // are needed, so the split enumerates pairs instead of rejecting.
  PublicRandom rng(5);
  std::vector<Edge> edges;
  for (uint32_t i : rng.SampleWithoutReplacement(435, 160)) {
    NodeId u = 0, k = i;
    while (k >= 29 - u) k -= 29 - u++;
    edges.push_back({u, u + 1 + k});
  }
  const Graph g = *Graph::FromEdges(30, edges);
  ASSERT_EQ(g.num_edges(), 160u);
  auto a = RandomEdgeSplit(g, 0.1, 0.2, 1);
  auto b = RandomEdgeSplit(g, 0.1, 0.2, 2);
  ASSERT_TRUE(a.ok() && b.ok());
  CheckEdgeSplit(g, *a, 16, 32);
  EXPECT_NE(a->train_negative, b->train_negative);
}

TEST(RandomEdgeSplitTest, TooFewNonEdges) {
  // K_10 without 5 edges: 40 edges, 5 non-edges.
  std::vector<Edge> edges;
  for (NodeId u = 0; u < 10; ++u) {
    for (NodeId v = u + 1; v < 10; ++v) {
      if (!(u == 0 && v < 6)) edges.push_back({u, v});
    }
  }
  const Graph g = *Graph::FromEdges(10, edges);
  ASSERT_EQ(g.num_edges(), 40u);
  const absl::Status s = RandomEdgeSplit(g, 0.05, 0.1, 1).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("has 5 non-edges"), HasSubstr("the 40 negative")));
}

TEST(RandomEdgeSplitTest, EmptyAndTinyGraphs) {
  auto s = RandomEdgeSplit(Graph(), 0.05, 0.1, 1);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->train.empty() && s->train_negative.empty());
  const Graph loops = RandomGraph(3, 0, 1, {0, 1, 2});
  s = RandomEdgeSplit(loops, 0.05, 0.1, 1);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->train.empty() && s->test.empty());
}

TEST(RandomEdgeSplitTest, RejectsBadFractions) {
  const Graph g = RandomGraph(20, 30, 1);
  absl::Status s = RandomEdgeSplit(g, -0.05, 0.1, 1).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("validation_fraction = -0.05 must be in [0, 1]"));
  s = RandomEdgeSplit(g, 0.05, std::nan(""), 1).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("test_fraction = nan"));
  s = RandomEdgeSplit(g, 0.6, 0.5, 1).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("validation_fraction + test_fraction = 1.1"));
}

}  // namespace
}  // namespace ldpgraph
