// Tests for the synthetic dataset generator: one test per rejected option,
// determinism by seed, the exact edge count and homophily it promises, the
// degree and feature structure of the model, and small and dense corners.
#include "common/dataset/generator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace ldpgraph {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

GeneratorOptions Small() {
  GeneratorOptions o = DefaultGeneratorOptions();
  o.nodes = 2000;
  o.classes = 5;
  o.features = 40;
  o.avg_degree = 8;
  o.homophily = 0.8;
  o.seed = 7;
  return o;
}

void ExpectRejected(const GeneratorOptions& o, const std::string& name,
                    const std::string& rule) {
  absl::Status s = ValidateGeneratorOptions(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), StartsWith(name));
  EXPECT_THAT(std::string(s.message()), HasSubstr(rule));
  // GenerateDataset validates too.
  EXPECT_EQ(GenerateDataset(o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GeneratorOptionsTest, DefaultsAreValid) {
  EXPECT_TRUE(ValidateGeneratorOptions(DefaultGeneratorOptions()).ok());
  EXPECT_TRUE(ValidateGeneratorOptions(Small()).ok());
  EXPECT_EQ(ResolvedFeaturesPerNode(DefaultGeneratorOptions()), 16);
}

TEST(GeneratorOptionsTest, RejectsFewerThanTwoClasses) {
  GeneratorOptions o = Small();
  o.classes = 1;
  ExpectRejected(o, "classes", ">= 2");
  o.classes = -3;
  ExpectRejected(o, "classes", ">= 2");
}

TEST(GeneratorOptionsTest, RejectsTooFewNodesForTheClasses) {
  GeneratorOptions o = Small();
  o.nodes = 9;
  ExpectRejected(o, "nodes", ">= 2 * classes (10)");
}

TEST(GeneratorOptionsTest, RejectsTooManyNodes) {
  GeneratorOptions o = Small();
  o.nodes = size_t{1} << 31;
  ExpectRejected(o, "nodes", "< 2^31");
}

TEST(GeneratorOptionsTest, RejectsZeroFeatures) {
  GeneratorOptions o = Small();
  o.features = 0;
  ExpectRejected(o, "features", ">= 1");
}

TEST(GeneratorOptionsTest, RejectsNonPositiveAvgDegree) {
  GeneratorOptions o = Small();
  o.avg_degree = 0;
  ExpectRejected(o, "avg_degree", "> 0");
  o.avg_degree = -1;
  ExpectRejected(o, "avg_degree", "> 0");
  o.avg_degree = std::nan("");
  ExpectRejected(o, "avg_degree", "> 0");
}

TEST(GeneratorOptionsTest, RejectsAvgDegreeOfACompleteGraph) {
  GeneratorOptions o = Small();
  o.nodes = 100;
  o.avg_degree = 99;
  ExpectRejected(o, "avg_degree", "< nodes - 1");
  o.avg_degree = 150;
  ExpectRejected(o, "avg_degree", "< nodes - 1");
}

TEST(GeneratorOptionsTest, RejectsAvgDegreeTooSmallForAnyEdge) {
  GeneratorOptions o = Small();
  o.nodes = 100;
  o.avg_degree = 0.001;  // round(0.05) = 0 edges
  ExpectRejected(o, "avg_degree", "gives no edge");
}

TEST(GeneratorOptionsTest, RejectsHomophilyOutsideUnitInterval) {
  GeneratorOptions o = Small();
  o.homophily = -0.1;
  ExpectRejected(o, "homophily", "in [0, 1]");
  o.homophily = 1.01;
  ExpectRejected(o, "homophily", "in [0, 1]");
  o.homophily = std::nan("");
  ExpectRejected(o, "homophily", "in [0, 1]");
}

TEST(GeneratorOptionsTest, RejectsDegreeExponentWithoutFiniteMean) {
  GeneratorOptions o = Small();
  for (double g : {2.0, 1.5, -1.0, 101.0, std::nan("")}) {
    o.degree_exponent = g;
    ExpectRejected(o, "degree_exponent", "0 (off) or in (2, 100]");
  }
  o.degree_exponent = 0;
  EXPECT_TRUE(ValidateGeneratorOptions(o).ok());
  o.degree_exponent = 2.01;
  EXPECT_TRUE(ValidateGeneratorOptions(o).ok());
}

TEST(GeneratorOptionsTest, RejectsFeaturesPerNodeOutsideRange) {
  GeneratorOptions o = Small();
  o.features_per_node = 0;
  ExpectRejected(o, "features_per_node", "in [1, features] = [1, 40]");
  o.features_per_node = 41;
  ExpectRejected(o, "features_per_node", "in [1, features] = [1, 40]");
  o.features_per_node = 40;
  EXPECT_TRUE(ValidateGeneratorOptions(o).ok());
}

TEST(GeneratorOptionsTest, RejectsTopicWeightOutsideUnitInterval) {
  GeneratorOptions o = Small();
  o.topic_weight = -0.5;
  ExpectRejected(o, "topic_weight", "in [0, 1]");
  o.topic_weight = 1.5;
  ExpectRejected(o, "topic_weight", "in [0, 1]");
}

TEST(GeneratorOptionsTest, RejectsTooDenseClassBlock) {
  // 100 nodes in 10 classes of 10 (45 pairs each); 400 edges at homophily
  // 0.9 put 36 in each class, more than half of 45.
  GeneratorOptions o = Small();
  o.nodes = 100;
  o.classes = 10;
  o.avg_degree = 8;
  o.homophily = 0.9;
  ExpectRejected(o, "avg_degree", "edges inside class");
  o.homophily = 0.5;  // 20 per class: fine
  EXPECT_TRUE(ValidateGeneratorOptions(o).ok());
}

TEST(GeneratorOptionsTest, RejectsTooDenseBetweenClasses) {
  // 20 nodes in 2 classes: 100 pairs across; 60 edges all across.
  GeneratorOptions o = Small();
  o.nodes = 20;
  o.classes = 2;
  o.avg_degree = 6;
  o.homophily = 0;
  ExpectRejected(o, "avg_degree", "edges between classes");
}

// --- generated data -----------------------------------------------------------

TEST(GeneratorTest, SameSeedSameDatasetOtherSeedDifferent) {
  GeneratorOptions o = Small();
  auto a = GenerateDataset(o);
  auto b = GenerateDataset(o);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->graph.Edges(), b->graph.Edges());
  EXPECT_EQ(a->labels, b->labels);
  EXPECT_EQ(a->features.offsets, b->features.offsets);
  EXPECT_EQ(a->features.indices, b->features.indices);
  EXPECT_EQ(a->features.values, b->features.values);
  EXPECT_EQ(a->meta.generator_json, b->meta.generator_json);
  EXPECT_EQ(a->meta.notes, b->meta.notes);

  o.seed = 8;
  auto c = GenerateDataset(o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NE(a->graph.Edges(), c->graph.Edges());
  EXPECT_NE(a->labels, c->labels);
  EXPECT_NE(a->features.indices, c->features.indices);
}

TEST(GeneratorTest, FeatureOptionsLeaveTheGraphUnchanged) {
  GeneratorOptions o = Small();
  auto a = GenerateDataset(o);
  o.features_per_node = 3;
  o.topic_weight = 0.9;
  o.features = 17;
  auto b = GenerateDataset(o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->graph.Edges(), b->graph.Edges());
  EXPECT_EQ(a->labels, b->labels);
}

TEST(GeneratorTest, ExactEdgeCountNoSelfLoopsAndMeanDegree) {
  struct Case {
    size_t nodes;
    double k;
  };
  for (Case c : {Case{1001, 7.3}, Case{5000, 10}, Case{300, 2.5}}) {
    GeneratorOptions o = Small();
    o.nodes = c.nodes;
    o.avg_degree = c.k;
    auto d = GenerateDataset(o);
    ASSERT_TRUE(d.ok()) << d.status();
    const size_t m = static_cast<size_t>(std::llround(c.nodes * c.k / 2));
    EXPECT_EQ(d->graph.num_edges(), m);
    EXPECT_EQ(d->meta.edges, m);
    EXPECT_EQ(d->graph.num_self_loops(), 0u);
    // Distinct edges: each counted twice in the adjacency, no merging.
    EXPECT_EQ(d->graph.num_adjacency_entries(), 2 * m);
    const double mean_degree = 2.0 * d->graph.num_edges() / c.nodes;
    EXPECT_NEAR(mean_degree, c.k, 1.0 / c.nodes);
  }
}

TEST(GeneratorTest, RealisedHomophilyMatchesOption) {
  for (double h : {0.2, 0.5, 0.9}) {
    GeneratorOptions o = Small();
    o.nodes = 20000;
    o.avg_degree = 10;
    o.homophily = h;
    auto d = GenerateDataset(o);
    ASSERT_TRUE(d.ok()) << d.status();
    // The quota is exact: round(m * h) of m = 100000 edges.
    EXPECT_NEAR(EdgeHomophily(d->graph, d->labels), h, 1e-5) << h;
  }
}

TEST(GeneratorTest, ExtremeHomophilies) {
  GeneratorOptions o = Small();
  o.homophily = 1;
  auto all_in = GenerateDataset(o);
  ASSERT_TRUE(all_in.ok()) << all_in.status();
  EXPECT_EQ(EdgeHomophily(all_in->graph, all_in->labels), 1.0);
  o.homophily = 0;
  auto all_out = GenerateDataset(o);
  ASSERT_TRUE(all_out.ok()) << all_out.status();
  EXPECT_EQ(EdgeHomophily(all_out->graph, all_out->labels), 0.0);
}

TEST(GeneratorTest, ClassSizesBalanced) {
  GeneratorOptions o = Small();
  o.nodes = 2003;
  o.classes = 7;
  auto d = GenerateDataset(o);
  ASSERT_TRUE(d.ok()) << d.status();
  std::vector<size_t> sizes(o.classes, 0);
  for (int32_t l : d->labels) {
    ASSERT_GE(l, 0);
    ASSERT_LT(l, o.classes);
    ++sizes[l];
  }
  const auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
  EXPECT_LE(*hi - *lo, 1u);
  // Not simply 0, 1, 2, ... in node order.
  bool cyclic = true;
  for (size_t v = 0; v < 50; ++v) cyclic &= d->labels[v] == int32_t(v % 7);
  EXPECT_FALSE(cyclic);
}

TEST(GeneratorTest, HeavyTailedDegreesAndPlainSbmWithoutCorrection) {
  GeneratorOptions o = Small();
  o.nodes = 20000;
  o.avg_degree = 10;
  auto heavy = GenerateDataset(o);
  o.degree_exponent = 0;
  auto plain = GenerateDataset(o);
  ASSERT_TRUE(heavy.ok() && plain.ok());
  // Capped Pareto (2.5): the largest propensity is sqrt(20000) = 141 times
  // the smallest, the mean about 2.6, so the top degree is in the hundreds.
  EXPECT_GT(heavy->graph.max_degree(), 10 * 10u);
  // Poisson(10) over 20000 nodes: the maximum is about 27.
  EXPECT_LT(plain->graph.max_degree(), 40u);
  auto variance = [](const Graph& g) {
    double s = 0, s2 = 0;
    for (NodeId v = 0; v < g.num_nodes(); ++v) {
      s += g.degree(v);
      s2 += double(g.degree(v)) * g.degree(v);
    }
    const double mean = s / g.num_nodes();
    return s2 / g.num_nodes() - mean * mean;
  };
  EXPECT_GT(variance(heavy->graph), 5 * variance(plain->graph));
  EXPECT_NEAR(variance(plain->graph), 10, 1.5);
}

TEST(GeneratorTest, FeatureRowsAreWellFormed) {
  GeneratorOptions o = Small();
  auto d = GenerateDataset(o);
  ASSERT_TRUE(d.ok()) << d.status();
  const SparseRows& x = d->features;
  ASSERT_EQ(x.rows, o.nodes);
  ASSERT_EQ(x.cols, size_t(o.features));
  ASSERT_EQ(x.offsets.size(), o.nodes + 1);
  const int r = ResolvedFeaturesPerNode(o);  // 10
  EXPECT_EQ(r, 10);
  for (size_t i = 0; i < x.rows; ++i) {
    auto idx = x.row_indices(i);
    auto val = x.row_values(i);
    ASSERT_GE(idx.size(), size_t(r + 1) / 2) << i;
    ASSERT_LE(idx.size(), size_t(3 * r) / 2) << i;
    for (size_t p = 0; p < idx.size(); ++p) {
      ASSERT_LT(idx[p], x.cols);
      if (p > 0) {
        ASSERT_LT(idx[p - 1], idx[p]) << "row " << i;
      }
      ASSERT_GT(val[p], 0.0f);
      ASSERT_LE(val[p], 1.0f);
      // k / 1000
      ASSERT_NEAR(std::round(val[p] * 1000), val[p] * 1000, 1e-3);
    }
  }
  EXPECT_NEAR(double(x.nnz()) / x.rows, r, 0.3);
  ASSERT_TRUE(d->meta.feature_range.has_value());
  EXPECT_EQ(d->meta.feature_range->first, 0.0);
  EXPECT_EQ(d->meta.feature_range->second, 1.0);
}

TEST(GeneratorTest, FeaturesPerNodeEqualToDimensionGivesDenseRows) {
  GeneratorOptions o = Small();
  o.features = 6;
  o.features_per_node = 6;
  auto d = GenerateDataset(o);
  ASSERT_TRUE(d.ok()) << d.status();
  for (size_t i = 0; i < d->features.rows; ++i) {
    ASSERT_GE(d->features.row_indices(i).size(), 3u);
    ASSERT_LE(d->features.row_indices(i).size(), 6u);
  }
}

// Per class and dimension: the frequency of the dimension among the class's
// nodes, and among the other nodes.
struct Frequencies {
  std::vector<std::vector<double>> in, out;
};
Frequencies CountFrequencies(const Dataset& d) {
  const int c_count = d.meta.classes;
  const size_t dim = d.meta.features;
  std::vector<std::vector<double>> count(c_count, std::vector<double>(dim, 0));
  std::vector<double> total(dim, 0), size(c_count, 0);
  for (size_t v = 0; v < d.features.rows; ++v) {
    ++size[d.labels[v]];
    for (uint32_t j : d.features.row_indices(v)) {
      ++count[d.labels[v]][j];
      ++total[j];
    }
  }
  Frequencies f;
  for (int c = 0; c < c_count; ++c) {
    f.in.emplace_back(dim);
    f.out.emplace_back(dim);
    for (size_t j = 0; j < dim; ++j) {
      f.in[c][j] = count[c][j] / size[c];
      f.out[c][j] = (total[j] - count[c][j]) / (d.features.rows - size[c]);
    }
  }
  return f;
}

TEST(GeneratorTest, EachClassHasItsOwnTopicDimensions) {
  // 5 classes, 40 dims: topics of 8, disjoint. About 10 draws per node, 4
  // of them from the topic: a topic dimension is held by about half of its
  // class's nodes (0.52 observed) and by about a fifth of the others (a
  // plain dimension by about 0.15 anywhere; 0.19 with the one class that
  // owns it among the others).
  GeneratorOptions o = Small();
  o.nodes = 5000;
  auto d = GenerateDataset(o);
  ASSERT_TRUE(d.ok()) << d.status();
  Frequencies f = CountFrequencies(*d);
  std::set<size_t> owned;
  for (int c = 0; c < o.classes; ++c) {
    std::vector<size_t> topic;
    for (size_t j = 0; j < size_t(o.features); ++j) {
      if (f.in[c][j] > 1.5 * f.out[c][j]) topic.push_back(j);
    }
    EXPECT_EQ(topic.size(), 8u) << "class " << c;
    for (size_t j : topic) {
      EXPECT_TRUE(owned.insert(j).second) << "dimension " << j << " twice";
      EXPECT_GT(f.in[c][j], 2.2 * f.out[c][j]);
    }
  }
}

TEST(GeneratorTest, ZeroTopicWeightGivesNoClassSignal) {
  GeneratorOptions o = Small();
  o.nodes = 5000;
  o.topic_weight = 0;
  auto d = GenerateDataset(o);
  ASSERT_TRUE(d.ok()) << d.status();
  Frequencies f = CountFrequencies(*d);
  for (int c = 0; c < o.classes; ++c) {
    for (size_t j = 0; j < size_t(o.features); ++j) {
      EXPECT_LT(f.in[c][j], 1.5 * f.out[c][j]) << c << " " << j;
    }
  }
}

TEST(GeneratorTest, HundredNodesFourClasses) {
  GeneratorOptions o = DefaultGeneratorOptions();
  o.nodes = 100;
  o.classes = 4;
  o.avg_degree = 6;
  auto d = GenerateDataset(o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->graph.num_nodes(), 100u);
  EXPECT_EQ(d->graph.num_edges(), 300u);
  std::map<int, int> sizes;
  for (int32_t l : d->labels) ++sizes[l];
  EXPECT_EQ(sizes, (std::map<int, int>{{0, 25}, {1, 25}, {2, 25}, {3, 25}}));
  EXPECT_NEAR(EdgeHomophily(d->graph, d->labels), 0.8, 0.002);
}

TEST(GeneratorTest, TenClassesOfTenNodes) {
  GeneratorOptions o = DefaultGeneratorOptions();
  o.nodes = 100;
  o.classes = 10;
  o.features = 8;  // fewer dimensions than classes: topics overlap
  o.avg_degree = 5;
  auto d = GenerateDataset(o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->graph.num_edges(), 250u);
  EXPECT_EQ(d->graph.num_self_loops(), 0u);
}

TEST(GeneratorTest, BlocksExactlyHalfFullStillConverge) {
  // 40 nodes, 2 classes of 20 (190 pairs each): 190 edges all inside
  // classes put 95 in each, exactly half.
  GeneratorOptions o = Small();
  o.nodes = 40;
  o.classes = 2;
  o.avg_degree = 9.5;
  o.homophily = 1;
  ASSERT_TRUE(ValidateGeneratorOptions(o).ok());
  auto d = GenerateDataset(o);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->graph.num_edges(), 190u);
  EXPECT_EQ(EdgeHomophily(d->graph, d->labels), 1.0);
}

TEST(GeneratorTest, MetaDescribesTheDataset) {
  GeneratorOptions o = Small();
  auto d = GenerateDataset(o);
  ASSERT_TRUE(d.ok()) << d.status();
  const DatasetMeta& m = d->meta;
  EXPECT_EQ(m.name, "generated");
  EXPECT_EQ(m.source, "ldpgraph generate");
  EXPECT_EQ(m.nodes, o.nodes);
  EXPECT_EQ(m.features, size_t(o.features));
  EXPECT_EQ(m.classes, o.classes);
  EXPECT_FALSE(m.license.empty());
  EXPECT_THAT(m.notes, HasSubstr("stochastic block model"));
  EXPECT_EQ(d->labels.size(), o.nodes);
  auto j = nlohmann::json::parse(m.generator_json);
  EXPECT_EQ(j["generator_version"], kGeneratorVersion);
  EXPECT_EQ(j["nodes"], o.nodes);
  EXPECT_EQ(j["classes"], o.classes);
  EXPECT_EQ(j["features"], o.features);
  EXPECT_EQ(j["avg_degree"], o.avg_degree);
  EXPECT_EQ(j["homophily"], o.homophily);
  EXPECT_EQ(j["seed"], o.seed);
  EXPECT_EQ(j["degree_exponent"], o.degree_exponent);
  EXPECT_EQ(j["features_per_node"], 10);
  EXPECT_EQ(j["topic_weight"], o.topic_weight);
}

TEST(GeneratorTest, ReportsEachPhase) {
  std::vector<std::string> phases;
  auto d = GenerateDataset(Small(), [&](absl::string_view phase, double s) {
    phases.emplace_back(phase);
    EXPECT_GE(s, 0.0);
  });
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(phases, (std::vector<std::string>{"classes", "edges", "graph",
                                              "features"}));
}

TEST(EdgeHomophilyTest, CountsSameLabelEdges) {
  auto g = Graph::FromEdges(4, {{0, 1}, {1, 2}, {2, 3}, {0, 3}});
  ASSERT_TRUE(g.ok());
  std::vector<int32_t> labels = {0, 0, 1, -1};
  // {0,1} same; {1,2} different; {2,3} and {0,3} touch the unlabelled node.
  EXPECT_DOUBLE_EQ(EdgeHomophily(*g, labels), 0.25);
  EXPECT_EQ(EdgeHomophily(Graph(), {}), 0.0);
}

}  // namespace
}  // namespace ldpgraph
