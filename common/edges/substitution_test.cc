#include "common/edges/substitution.h"

#include <cmath>
#include <map>
#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::edges {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A research (raw) report of a dense vector.
v1::FeatureReport Raw(const std::vector<double>& x) {
  v1::FeatureReport r;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] != 0) {
      r.add_indices(static_cast<uint32_t>(i));
      r.add_values(x[i]);
    }
  }
  return r;
}

Graph MakeGraph(size_t n, std::vector<Edge> edges) {
  absl::StatusOr<Graph> g = Graph::FromEdges(n, edges);
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

// Per-node seeded sources owned by the test.
struct Rngs {
  explicit Rngs(size_t n, uint64_t seed) {
    for (size_t v = 0; v < n; ++v) {
      rngs.push_back(std::make_unique<SeededRandomForTesting>(seed * 1000003 + v));
    }
  }
  std::function<RandomSource*(uint32_t)> Fn() {
    return [this](uint32_t v) { return rngs[v].get(); };
  }
  std::vector<std::unique_ptr<SeededRandomForTesting>> rngs;
};

SubstitutionParams Params(Approach a, double eps) {
  SubstitutionParams p;
  p.approach = a;
  p.epsilon = eps;
  p.top_k = 3;
  p.max_dummies = 2;
  return p;
}

TEST(SubstitutionParamsTest, ValidatesAndRoundTripsThroughTheWire) {
  SubstitutionParams p = Params(Approach::kSimilarityQuery, 2);
  p.similarity = Similarity::kL2;
  v1::MechanismSpec w;
  ToWire(p, &w);
  absl::StatusOr<SubstitutionParams> back = FromWire(w);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->approach, Approach::kSimilarityQuery);
  EXPECT_EQ(back->similarity, Similarity::kL2);
  EXPECT_EQ(back->top_k, 3);
  EXPECT_EQ(back->rounds(), 5);
  EXPECT_NEAR(back->drop_probability(), 1 / (1 + std::exp(2.0)), 1e-15);

  w.mutable_substitution()->set_approach(3);
  EXPECT_THAT(FromWire(w).status().message(), HasSubstr("approach"));
  ToWire(p, &w);
  w.mutable_substitution()->set_similarity("dot");
  EXPECT_THAT(FromWire(w).status().message(), HasSubstr("cosine or l2"));
  ToWire(p, &w);
  w.set_epsilon(INFINITY);
  EXPECT_THAT(FromWire(w).status().message(), HasSubstr("finite"));
  ToWire(p, &w);
  w.mutable_substitution()->set_top_k(0);
  EXPECT_THAT(FromWire(w).status().message(), HasSubstr("top_k"));
  ToWire(p, &w);
  w.mutable_substitution()->set_dummy_std(-1);
  EXPECT_THAT(FromWire(w).status().message(), HasSubstr("dummy_std"));
}

TEST(CompactVectorTest, DotAndNormsMatchTheDenseVectors) {
  SeededRandomForTesting rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int d = 1 + static_cast<int>(rng.UniformInt(40));
    std::vector<double> a(d), b(d);
    const double oa = rng.UniformDouble(), ob = -rng.UniformDouble();
    for (int i = 0; i < d; ++i) {
      a[i] = rng.Bernoulli(0.3) ? rng.UniformDouble() * 4 - 2 : oa;
      b[i] = rng.Bernoulli(0.3) ? rng.UniformDouble() * 4 - 2 : ob;
    }
    CompactVector ca = CompactVector::FromDense(a);
    CompactVector cb = CompactVector::FromDense(b);
    double dot = 0, na = 0, nb = 0;
    for (int i = 0; i < d; ++i) {
      dot += static_cast<float>(a[i]) * static_cast<float>(b[i]);
      na += static_cast<float>(a[i]) * static_cast<float>(a[i]);
      nb += static_cast<float>(b[i]) * static_cast<float>(b[i]);
    }
    EXPECT_NEAR(ca.Dot(cb), dot, 1e-4 * (1 + std::abs(dot)));
    EXPECT_NEAR(ca.norm2, na, 1e-4 * (1 + na));
    EXPECT_NEAR(ca.Dot(ca), na, 1e-4 * (1 + na));
    EXPECT_NEAR(SimilarityScore(Similarity::kL2, ca, cb),
                -(na + nb - 2 * dot), 1e-3 * (1 + na + nb));
  }
}

// v = 0 with neighbours a = 1 and b = 2; a's other neighbours p = 3
// (features like a's) and r = 4 (unlike); b's other neighbour s = 5.
// Dropping a must bring in p, the most similar 2-hop node.
class SimilarityChoiceTest
    : public ::testing::TestWithParam<std::tuple<Approach, Similarity>> {};

TEST_P(SimilarityChoiceTest, ADroppedNeighbourIsReplacedByItsMostSimilarTwoHopNode) {
  const auto [approach, similarity] = GetParam();
  Graph g = MakeGraph(6, {{0, 1}, {0, 2}, {1, 3}, {1, 4}, {2, 5}, {3, 4}});
  auto features = ExchangeFeatures::RawForResearch(4, 0, 1);
  std::vector<v1::FeatureReport> own = {
      Raw({0, 0, 0, 1}),     Raw({1, 0.9, 0, 0}), Raw({0, 0, 1, 0}),
      Raw({1, 1, 0, 0}),     Raw({0, 0.2, 1, 0}), Raw({0, 0, 0.9, 0.1})};
  SubstitutionParams p = Params(approach, 1);
  p.similarity = similarity;
  p.max_dummies = 0;
  Rngs rngs(6, 1);
  // Drive the nodes by hand so node 0 drops exactly {1} and nobody else
  // drops anything.
  std::vector<std::unique_ptr<SubstitutionNode>> nodes;
  for (uint32_t v = 0; v < 6; ++v) {
    auto nb = g.neighbors(v);
    std::optional<std::vector<uint32_t>> dropped = std::vector<uint32_t>{};
    if (v == 0) dropped = std::vector<uint32_t>{1};
    auto n = SubstitutionNode::Create(p, features, v, {nb.begin(), nb.end()},
                                      own[v], rngs.rngs[v].get(), dropped);
    ASSERT_TRUE(n.ok()) << n.status();
    nodes.push_back(*std::move(n));
  }
  for (int step = 0; step < 8; ++step) {
    std::vector<std::pair<uint32_t, Outgoing>> all;
    for (uint32_t v = 0; v < 6; ++v) {
      auto out = nodes[v]->Advance();
      ASSERT_TRUE(out.ok()) << out.status();
      for (auto& o : *out) all.emplace_back(v, std::move(o));
    }
    for (auto& [from, o] : all) {
      ASSERT_TRUE(nodes[o.to]->Deliver(from, o.message).ok());
    }
  }
  for (uint32_t v = 0; v < 6; ++v) ASSERT_TRUE(nodes[v]->done()) << v;
  auto r0 = nodes[0]->result();
  ASSERT_TRUE(r0.ok());
  EXPECT_THAT(r0->neighbours, ElementsAre(2, 3));
  EXPECT_EQ(r0->stats.dropped, 1u);
  EXPECT_EQ(r0->stats.substituted, 1u);
  EXPECT_EQ(r0->stats.unresolved, 0u);
  // Nobody else changed.
  for (uint32_t v = 1; v < 6; ++v) {
    auto nb = g.neighbors(v);
    EXPECT_EQ(nodes[v]->result()->neighbours,
              std::vector<uint32_t>(nb.begin(), nb.end()));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Both, SimilarityChoiceTest,
    ::testing::Combine(::testing::Values(Approach::kCandidateRelay,
                                         Approach::kSimilarityQuery),
                       ::testing::Values(Similarity::kCosine, Similarity::kL2)));

// A random graph with planted communities, for the statistical tests.
Graph RandomGraph(uint32_t n, double avg_degree, uint64_t seed) {
  SeededRandomForTesting rng(seed);
  std::vector<Edge> edges;
  const uint64_t m = static_cast<uint64_t>(n * avg_degree / 2);
  while (edges.size() < m) {
    uint32_t u = static_cast<uint32_t>(rng.UniformInt(n));
    // Mostly within the same block of 50.
    uint32_t v = rng.Bernoulli(0.8)
                     ? (u / 50) * 50 + static_cast<uint32_t>(rng.UniformInt(50))
                     : static_cast<uint32_t>(rng.UniformInt(n));
    if (v >= n || u == v) continue;
    edges.push_back({u, v});
  }
  return MakeGraph(n, edges);
}

std::vector<v1::FeatureReport> BlockFeatures(uint32_t n, int d, uint64_t seed) {
  SeededRandomForTesting rng(seed);
  std::vector<v1::FeatureReport> own;
  for (uint32_t v = 0; v < n; ++v) {
    // The block's word, and one of 100 other words: distinct nodes rarely
    // share a vector.
    std::vector<double> x(d, 0);
    x[(v / 50) % 12] = 1;
    x[12 + rng.UniformInt(d - 12)] = 0.5;
    own.push_back(Raw(x));
  }
  return own;
}

class RunTest : public ::testing::TestWithParam<Approach> {};

TEST_P(RunTest, DropsAtTheRandomizedResponseRateAndKeepsDegrees) {
  const uint32_t n = 600;
  Graph g = RandomGraph(n, 8, 3);
  auto features = ExchangeFeatures::RawForResearch(112, 0, 1);
  std::vector<v1::FeatureReport> own = BlockFeatures(n, 112, 4);
  SubstitutionParams p = Params(GetParam(), 0.5);
  Rngs rngs(n, 5);
  absl::StatusOr<RunOutput> out =
      RunSubstitution(g, p, features, own, rngs.Fn());
  ASSERT_TRUE(out.ok()) << out.status();
  const RunStats& s = out->stats;
  EXPECT_EQ(s.degree, 2 * g.num_edges());
  // Drops are Binomial(sum of degrees, q): within 5 standard deviations.
  const double q = p.drop_probability();
  const double sd = std::sqrt(s.degree * q * (1 - q));
  EXPECT_NEAR(static_cast<double>(s.dropped), s.degree * q, 5 * sd);
  EXPECT_EQ(s.dropped, s.substituted + s.unresolved);
  // Most drops find a substitute on a graph this dense (approach 2 less
  // often: a neighbour's answers are often v's own neighbours, filtered).
  EXPECT_GT(s.substituted,
            (GetParam() == Approach::kCandidateRelay ? 0.85 : 0.6) * s.dropped);
  for (uint32_t v = 0; v < n; ++v) {
    const SubstitutionResult& r = out->results[v];
    EXPECT_EQ(r.neighbours.size() + r.stats.unresolved, g.degree(v)) << v;
    for (size_t i = 0; i < r.neighbours.size(); ++i) {
      const uint32_t u = r.neighbours[i];
      ASSERT_NE(u, v);
      if (i > 0) {
        ASSERT_LT(r.neighbours[i - 1], u);
      }
      if (g.HasEdge(u, v)) continue;
      // A substitute is a 2-hop node.
      bool two_hop = false;
      for (uint32_t w : g.neighbors(v)) two_hop |= g.HasEdge(w, u);
      EXPECT_TRUE(two_hop) << v << " -> " << u;
    }
  }
  EXPECT_GT(s.messages, 0u);
  EXPECT_EQ(s.messages % (2 * g.num_edges()), 0u);  // one per edge side per round
  EXPECT_EQ(s.messages, static_cast<uint64_t>(p.rounds()) * 2 * g.num_edges());
}

TEST_P(RunTest, SubstitutesAreMoreSimilarThanRandomTwoHopNodes) {
  // Blocks share a feature: a substitute of a same-block neighbour should
  // mostly be in the same block, far more than a uniform 2-hop pick.
  const uint32_t n = 600;
  Graph g = RandomGraph(n, 8, 6);
  auto features = ExchangeFeatures::RawForResearch(112, 0, 1);
  std::vector<v1::FeatureReport> own = BlockFeatures(n, 112, 7);
  SubstitutionParams p = Params(GetParam(), 0.1);
  Rngs rngs(n, 8);
  auto out = RunSubstitution(g, p, features, own, rngs.Fn());
  ASSERT_TRUE(out.ok()) << out.status();
  // For each substitute s of v: does its block match the block of one of
  // v's dropped neighbours? Against the same for a uniformly random 2-hop
  // non-neighbour of v.
  SeededRandomForTesting pick(19);
  auto block = [](uint32_t u) { return (u / 50) % 12; };
  int match = 0, random_match = 0, subs = 0;
  for (uint32_t v = 0; v < n; ++v) {
    const auto& got = out->results[v].neighbours;
    std::vector<uint32_t> dropped, two_hop;
    for (uint32_t u : g.neighbors(v)) {
      if (!std::binary_search(got.begin(), got.end(), u)) dropped.push_back(u);
      for (uint32_t w : g.neighbors(u)) {
        if (w != v && !g.HasEdge(v, w)) two_hop.push_back(w);
      }
    }
    auto matches = [&](uint32_t s) {
      for (uint32_t u : dropped) {
        if (block(u) == block(s)) return true;
      }
      return false;
    };
    for (uint32_t u : got) {
      if (g.HasEdge(u, v)) continue;
      ++subs;
      match += matches(u);
      random_match += matches(two_hop[pick.UniformInt(two_hop.size())]);
    }
  }
  ASSERT_GT(subs, 500);
  const double rate = static_cast<double>(match) / subs;
  const double random_rate = static_cast<double>(random_match) / subs;
  EXPECT_GT(rate, random_rate + 0.1) << rate << " vs random " << random_rate;
  EXPECT_GT(rate, 0.9) << rate << " vs random " << random_rate;
}

TEST_P(RunTest, NothingChangesAtAVeryLargeEpsilon) {
  Graph g = RandomGraph(200, 6, 9);
  auto features = ExchangeFeatures::RawForResearch(112, 0, 1);
  Rngs rngs(200, 10);
  auto out = RunSubstitution(g, Params(GetParam(), 40), features,
                             BlockFeatures(200, 112, 11), rngs.Fn());
  ASSERT_TRUE(out.ok()) << out.status();
  for (uint32_t v = 0; v < 200; ++v) {
    auto nb = g.neighbors(v);
    EXPECT_EQ(out->results[v].neighbours,
              std::vector<uint32_t>(nb.begin(), nb.end()));
  }
}

TEST_P(RunTest, ResultsDependOnTheSeedsOnlyNotOnThreads) {
  Graph g = RandomGraph(300, 6, 12);
  auto features = ExchangeFeatures::RawForResearch(112, 0, 1);
  auto own = BlockFeatures(300, 112, 13);
  Rngs a(300, 14), b(300, 14), c(300, 15);
  RunOptions two;
  two.threads = 2;
  auto ra = RunSubstitution(g, Params(GetParam(), 0.5), features, own, a.Fn());
  auto rb = RunSubstitution(g, Params(GetParam(), 0.5), features, own, b.Fn(), two);
  auto rc = RunSubstitution(g, Params(GetParam(), 0.5), features, own, c.Fn());
  ASSERT_TRUE(ra.ok() && rb.ok() && rc.ok());
  bool differs = false;
  for (uint32_t v = 0; v < 300; ++v) {
    EXPECT_EQ(ra->results[v].neighbours, rb->results[v].neighbours) << v;
    differs |= ra->results[v].neighbours != rc->results[v].neighbours;
  }
  EXPECT_TRUE(differs);
}

TEST_P(RunTest, AnAbstainingNodeDoesNotStallItsNeighbours) {
  Graph g = RandomGraph(200, 6, 16);
  auto features = ExchangeFeatures::RawForResearch(112, 0, 1);
  Rngs rngs(200, 17);
  RunOptions o;
  o.abstaining = {0, 1, 2, 50};
  auto out = RunSubstitution(g, Params(GetParam(), 0.5), features,
                             BlockFeatures(200, 112, 18), rngs.Fn(), o);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->results[0].neighbours.empty());
  for (uint32_t v = 3; v < 200; ++v) {
    if (v == 50) continue;
    EXPECT_LE(out->results[v].neighbours.size(), g.degree(v));
    for (uint32_t u : out->results[v].neighbours) {
      // An abstaining node is never chosen as a substitute (nobody knows
      // its features), though it may be kept as a true neighbour.
      if (o.abstaining.contains(u)) {
        EXPECT_TRUE(g.HasEdge(u, v));
      }
    }
  }
}

TEST_P(RunTest, RunsOnMultiBitReports) {
  const uint32_t n = 300;
  Graph g = RandomGraph(n, 6, 20);
  MechanismSpec spec;
  spec.kind = MechanismKind::kMultiBit;
  spec.epsilon = 3;
  spec.dimension = 112;
  spec.alpha = 0;
  spec.beta = 1;
  auto mech = CreateFeatureMechanism(spec);
  ASSERT_TRUE(mech.ok());
  auto features = ExchangeFeatures::Private(
      std::shared_ptr<const FeatureMechanism>(std::move(*mech)));
  Rngs rngs(n, 21);
  std::vector<v1::FeatureReport> own;
  for (uint32_t v = 0; v < n; ++v) {
    std::vector<double> x(112, 0);
    x[(v / 50) % 12] = 1;
    auto r = features->Encode(x, *rngs.rngs[v]);
    ASSERT_TRUE(r.ok());
    own.push_back(*r);
  }
  auto out = RunSubstitution(g, Params(GetParam(), 1), features, own, rngs.Fn());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_GT(out->stats.dropped, 0u);
  EXPECT_GT(out->stats.substituted, 0u);
  for (uint32_t v = 0; v < n; ++v) {
    EXPECT_EQ(out->results[v].neighbours.size() + out->results[v].stats.unresolved,
              g.degree(v));
  }
}

INSTANTIATE_TEST_SUITE_P(Both, RunTest,
                         ::testing::Values(Approach::kCandidateRelay,
                                           Approach::kSimilarityQuery));

TEST(SubstitutionNodeTest, ApproachOneRelaysEveryHeardVectorPlusDummies) {
  // A star: node 0 with 5 leaves. Node 0's relay to each leaf holds the 5
  // leaves' vectors and min(floor(5/2) + {0,1}, f_max) dummies.
  auto features = ExchangeFeatures::RawForResearch(3, 0, 1);
  SubstitutionParams p = Params(Approach::kCandidateRelay, 1);
  p.max_dummies = 10;
  SeededRandomForTesting rng(1);
  auto center = SubstitutionNode::Create(p, features, 0, {1, 2, 3, 4, 5},
                                         Raw({1, 0, 0}), &rng);
  ASSERT_TRUE(center.ok());
  auto r1 = (*center)->Advance();
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(r1->size(), 5u);
  EXPECT_TRUE((*center)->Advance()->empty());  // waits for the leaves
  EXPECT_EQ((*center)->Waiting().size(), 5u);
  for (uint32_t u = 1; u <= 5; ++u) {
    v1::EdgeExchange m;
    m.set_round(1);
    *m.mutable_feature() = Raw({0, 0.1 * u, 0});
    ASSERT_TRUE((*center)->Deliver(u, m).ok());
  }
  auto r2 = (*center)->Advance();
  ASSERT_TRUE(r2.ok());
  ASSERT_EQ(r2->size(), 5u);
  for (const Outgoing& o : *r2) {
    ASSERT_TRUE(o.message.has_relay());
    const int size = o.message.relay().vectors_size();
    EXPECT_TRUE(size == 5 + 2 || size == 5 + 3) << size;
  }
}

TEST(SubstitutionNodeTest, RefusesBadMessagesAndKeepsNothingOfThem) {
  auto features = ExchangeFeatures::RawForResearch(3, 0, 1);
  SubstitutionParams p = Params(Approach::kCandidateRelay, 1);
  SeededRandomForTesting rng(1);
  auto node = SubstitutionNode::Create(p, features, 5, {2, 7},
                                       Raw({1, 0, 0}), &rng);
  ASSERT_TRUE(node.ok());
  v1::EdgeExchange good;
  good.set_round(1);
  *good.mutable_feature() = Raw({0, 1, 0});
  EXPECT_THAT((*node)->Deliver(3, good).message(), HasSubstr("not its neighbour"));
  v1::EdgeExchange bad_round = good;
  bad_round.set_round(9);
  EXPECT_THAT((*node)->Deliver(2, bad_round).message(), HasSubstr("round 9"));
  v1::EdgeExchange wrong_body;
  wrong_body.set_round(1);
  wrong_body.mutable_relay();
  EXPECT_THAT((*node)->Deliver(2, wrong_body).message(), HasSubstr("feature"));
  v1::EdgeExchange bad_vector;
  bad_vector.set_round(1);
  *bad_vector.mutable_feature() = Raw({0, 7, 0});  // outside [0, 1]
  EXPECT_THAT((*node)->Deliver(2, bad_vector).message(), HasSubstr("bad vector"));
  ASSERT_TRUE((*node)->Deliver(2, good).ok());
  ASSERT_TRUE((*node)->Deliver(2, good).ok());  // an exact repeat
  v1::EdgeExchange other = good;
  *other.mutable_feature() = Raw({0, 0.5, 0});
  EXPECT_THAT((*node)->Deliver(2, other).message(), HasSubstr("already held"));
  EXPECT_THAT(SubstitutionNode::Create(p, features, 5, {7, 2}, Raw({1, 0, 0}),
                                       &rng)
                  .status()
                  .message(),
              HasSubstr("ascending"));
  EXPECT_FALSE((*node)->result().ok());
}

TEST(SubstitutionNodeTest, ATimedOutNeighbourIsTreatedAsAbsent) {
  auto features = ExchangeFeatures::RawForResearch(3, 0, 1);
  SubstitutionParams p = Params(Approach::kSimilarityQuery, 1);
  SeededRandomForTesting rng(1);
  auto node = SubstitutionNode::Create(p, features, 0, {1, 2},
                                       Raw({1, 0, 0}), &rng);
  ASSERT_TRUE(node.ok());
  ASSERT_TRUE((*node)->Advance().ok());
  v1::EdgeExchange m;
  m.set_round(1);
  *m.mutable_feature() = Raw({0, 1, 0});
  ASSERT_TRUE((*node)->Deliver(1, m).ok());
  EXPECT_THAT((*node)->Waiting(), ElementsAre(2));
  (*node)->MarkAbsent(2);
  auto r2 = (*node)->Advance();
  ASSERT_TRUE(r2.ok());
  ASSERT_EQ(r2->size(), 1u);  // only node 1 hears from it now
  EXPECT_EQ((*r2)[0].to, 1u);
}

TEST(ExchangeFeaturesTest, MultiBitReportsAndDummiesHaveTheSameForm) {
  MechanismSpec spec;
  spec.kind = MechanismKind::kMultiBit;
  spec.epsilon = 4;
  spec.dimension = 20;
  spec.alpha = 0;
  spec.beta = 1;
  auto mech = CreateFeatureMechanism(spec);
  ASSERT_TRUE(mech.ok());
  auto f = ExchangeFeatures::Private(std::shared_ptr<const FeatureMechanism>(
      std::move(*mech)));
  SeededRandomForTesting rng(3);
  std::vector<double> x(20, 0.3);
  auto real = f->Encode(x, rng);
  auto dummy = f->Dummy(0.5, 0.5, rng);
  ASSERT_TRUE(real.ok() && dummy.ok());
  EXPECT_EQ(real->indices_size(), dummy->indices_size());
  EXPECT_EQ(real->bit_count(), dummy->bit_count());
  EXPECT_TRUE(f->Decode(*real).ok());
  EXPECT_TRUE(f->Decode(*dummy).ok());
  // A raw vector is not a Multi-bit report.
  EXPECT_FALSE(f->Decode(Raw(x)).ok());
}

TEST(AssembleGraphTest, UnionAndLowerIdRules) {
  std::vector<std::vector<uint32_t>> reports = {{1, 2}, {}, {0, 3}, {1}};
  auto u = AssembleGraph(4, reports, Symmetrisation::kUnion);
  ASSERT_TRUE(u.ok());
  // Either side's word makes an edge: {0,1} {0,2} {2,3} {1,3}.
  EXPECT_EQ(u->num_edges(), 4u);
  EXPECT_TRUE(u->HasEdge(0, 1));
  EXPECT_TRUE(u->HasEdge(2, 3));
  EXPECT_TRUE(u->HasEdge(1, 3));
  auto l = AssembleGraph(4, reports, Symmetrisation::kLowerId);
  ASSERT_TRUE(l.ok());
  // Lower id decides: 0 lists 1 and 2; 2 lists 3; 3's {1} is the higher
  // endpoint's word and is ignored; 2's {0} likewise.
  EXPECT_TRUE(l->HasEdge(0, 1));
  EXPECT_TRUE(l->HasEdge(0, 2));
  EXPECT_TRUE(l->HasEdge(2, 3));
  EXPECT_FALSE(l->HasEdge(1, 3));
  EXPECT_EQ(l->num_edges(), 3u);
  EXPECT_THAT(AssembleGraph(4, {{1}, {1}, {}, {}}, Symmetrisation::kUnion)
                  .status()
                  .message(),
              HasSubstr("node 1"));
  EXPECT_THAT(AssembleGraph(4, {{5}, {}, {}, {}}, Symmetrisation::kUnion)
                  .status()
                  .message(),
              HasSubstr("node 0"));
  EXPECT_FALSE(AssembleGraph(3, reports, Symmetrisation::kUnion).ok());
}

}  // namespace
}  // namespace ldpgraph::edges
