#include "server/propagation/propagation.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "Eigen/Dense"
#include "common/random/random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph {
namespace {

using ::testing::HasSubstr;

Graph MakeGraph(size_t n, std::vector<Edge> edges, bool loops = false) {
  Graph::BuildOptions o;
  o.allow_self_loops = loops;
  auto g = Graph::FromEdges(n, edges, o);
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

// A connected-ish random graph: a ring plus random chords, some isolated
// nodes at the end.
Graph RandomGraph(size_t n, size_t chords, size_t isolated, uint64_t seed) {
  PublicRandom rng(seed);
  std::vector<Edge> edges;
  const size_t core = n - isolated;
  for (NodeId v = 0; v + 1 < core; ++v) edges.push_back({v, v + 1});
  for (size_t i = 0; i < chords; ++i) {
    NodeId u = rng.UniformInt(core), v = rng.UniformInt(core);
    if (u != v) edges.push_back({u, v});
  }
  return MakeGraph(n, edges);
}

DenseMatrix RandomDense(size_t n, size_t d, uint64_t seed) {
  PublicRandom rng(seed);
  DenseMatrix x(n, d);
  for (float& f : x.data) f = static_cast<float>(2.0 * rng.UniformDouble() - 1.0);
  return x;
}

// k non-zeros per row, like an HDS report.
SparseRows RandomSparse(size_t n, size_t d, size_t k, uint64_t seed) {
  PublicRandom rng(seed);
  SparseRows x;
  x.cols = d;
  for (size_t v = 0; v < n; ++v) {
    std::vector<uint32_t> idx;
    while (idx.size() < k) {
      uint32_t j = rng.UniformInt(d);
      if (std::find(idx.begin(), idx.end(), j) == idx.end()) idx.push_back(j);
    }
    std::sort(idx.begin(), idx.end());
    std::vector<float> val;
    for (size_t i = 0; i < k; ++i) val.push_back(static_cast<float>(4.0 * rng.UniformDouble() - 2.0));
    x.AppendRow(idx, val);
  }
  return x;
}

// The exact series, Z = alpha (I - (1 - alpha) T)^-1 X with
// T = D^{r-1} A D^{-r}, by a dense LU solve: a reference independent of
// both push and power iteration.
Eigen::MatrixXd ExactPpr(const Graph& g, const DenseMatrix& x, double alpha,
                         double r) {
  const size_t n = g.num_nodes();
  Eigen::MatrixXd t = Eigen::MatrixXd::Zero(n, n);
  auto deg = [&](NodeId v) { return std::max<double>(1, g.degree(v)); };
  for (NodeId v = 0; v < n; ++v) {
    for (NodeId u : g.neighbors(v)) {
      t(v, u) = std::pow(deg(v), r - 1) * std::pow(deg(u), -r);
    }
  }
  Eigen::MatrixXd xm(n, x.cols);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < x.cols; ++j) xm(i, j) = x.at(i, j);
  Eigen::MatrixXd m = Eigen::MatrixXd::Identity(n, n) - (1 - alpha) * t;
  return alpha * m.partialPivLu().solve(xm);
}

// Max over entries of |a - b| / bound(v), bound(v) = deg(v)^r * rmax + slack.
void ExpectWithinPushBound(const Graph& g, const DenseMatrix& z,
                           const Eigen::MatrixXd& exact, double r, double rmax,
                           double slack) {
  for (NodeId v = 0; v < g.num_nodes(); ++v) {
    const double bound =
        std::pow(std::max<double>(1, g.degree(v)), r) * rmax + slack;
    for (size_t j = 0; j < z.cols; ++j) {
      ASSERT_LE(std::fabs(z.at(v, j) - exact(v, j)), bound)
          << "node " << v << " column " << j << " degree " << g.degree(v);
    }
  }
}

TEST(PprTest, TwoNodesByHand) {
  // One edge, x = (1, 0): T = A, Z(0) = alpha / (1 - (1-alpha)^2),
  // Z(1) = alpha (1 - alpha) / (1 - (1-alpha)^2). alpha = 0.5: 2/3, 1/3.
  Graph g = MakeGraph(2, {{0, 1}});
  DenseMatrix x(2, 1);
  x.at(0, 0) = 1.0f;
  PprOptions o;
  o.alpha = 0.5;
  o.rmax = 1e-9;
  o.tolerance = 1e-9;
  auto push = PprPush(g, x, o);
  auto power = PprPower(g, x, o);
  ASSERT_TRUE(push.ok() && power.ok());
  EXPECT_NEAR(push->at(0, 0), 2.0 / 3, 1e-6);
  EXPECT_NEAR(push->at(1, 0), 1.0 / 3, 1e-6);
  EXPECT_NEAR(power->at(0, 0), 2.0 / 3, 1e-6);
  EXPECT_NEAR(power->at(1, 0), 1.0 / 3, 1e-6);
}

TEST(PprTest, StarWithConvolutionCoefficientByHand) {
  // Star: centre 0 with leaves 1, 2, 3; x = e_1. With alpha = 1 only the
  // l = 0 term remains: Z = x whatever r is.
  Graph g = MakeGraph(4, {{0, 1}, {0, 2}, {0, 3}});
  DenseMatrix x(4, 1);
  x.at(1, 0) = 1.0f;
  PprOptions o;
  o.alpha = 1.0;
  o.r = 0.3;
  auto z = PprPush(g, x, o);
  ASSERT_TRUE(z.ok());
  EXPECT_FLOAT_EQ(z->at(1, 0), 1.0f);
  EXPECT_FLOAT_EQ(z->at(0, 0), 0.0f);
  // One hop with alpha = 0.5, r = 0: T = D^-1 A, so after one step the
  // centre holds the mean of its neighbours, 1/3, weighted alpha(1-alpha).
  // Check against the exact solve instead of expanding every term.
  o.alpha = 0.5;
  o.r = 0.0;
  o.rmax = 1e-10;
  auto z2 = PprPush(g, x, o);
  ASSERT_TRUE(z2.ok());
  Eigen::MatrixXd exact = ExactPpr(g, x, 0.5, 0.0);
  for (int v = 0; v < 4; ++v) EXPECT_NEAR(z2->at(v, 0), exact(v, 0), 1e-6);
  // The centre's value is a weighted mean of leaf values: between 0 and 1/3.
  EXPECT_GT(z2->at(0, 0), 0.0f);
  EXPECT_LT(z2->at(0, 0), 1.0f / 3);
}

TEST(PprTest, IsolatedNodeKeepsAlphaTimesItsFeatures) {
  Graph g = MakeGraph(3, {{0, 1}});
  DenseMatrix x(3, 2);
  x.at(2, 0) = 4.0f;
  x.at(2, 1) = -2.0f;
  PprOptions o;
  o.alpha = 0.2;
  o.r = 0.7;
  for (auto method : {0, 1}) {
    auto z = method == 0 ? PprPush(g, x, o) : PprPower(g, x, o);
    ASSERT_TRUE(z.ok());
    EXPECT_FLOAT_EQ(z->at(2, 0), 0.8f);
    EXPECT_FLOAT_EQ(z->at(2, 1), -0.4f);
    EXPECT_FLOAT_EQ(z->at(0, 0), 0.0f);
  }
}

struct BoundCase {
  double alpha, r, rmax;
  int block;
};

class PushBoundTest : public ::testing::TestWithParam<BoundCase> {};

TEST_P(PushBoundTest, PushAndPowerMatchTheExactSolve) {
  const BoundCase c = GetParam();
  Graph g = RandomGraph(120, 200, 3, 7);
  DenseMatrix x = RandomDense(120, 5, 11);
  PprOptions o;
  o.alpha = c.alpha;
  o.r = c.r;
  o.rmax = c.rmax;
  o.block_columns = c.block;
  o.tolerance = 1e-7;
  Eigen::MatrixXd exact = ExactPpr(g, x, c.alpha, c.r);
  PropagationStats stats;
  auto push = PprPush(g, x, o, &stats);
  ASSERT_TRUE(push.ok()) << push.status();
  EXPECT_EQ(stats.block_columns, c.block);
  EXPECT_GT(stats.pushes, 0u);
  // float32 output: allow its rounding on top of the bound.
  ExpectWithinPushBound(g, *push, exact, c.r, c.rmax, 1e-5);
  auto power = PprPower(g, x, o, &stats);
  ASSERT_TRUE(power.ok());
  EXPECT_LE(stats.tail_bound, 1e-7);
  for (NodeId v = 0; v < 120; ++v)
    for (size_t j = 0; j < 5; ++j)
      ASSERT_NEAR(power->at(v, j), exact(v, j), 1e-7 + 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Params, PushBoundTest,
    ::testing::Values(BoundCase{0.1, 0.5, 1e-4, 1}, BoundCase{0.1, 0.5, 1e-4, 5},
                      BoundCase{0.2, 0.0, 1e-3, 1}, BoundCase{0.2, 1.0, 1e-3, 2},
                      BoundCase{0.05, 0.3, 1e-2, 3}, BoundCase{0.5, 0.5, 1e-6, 1},
                      BoundCase{0.15, 0.8, 1e-5, 4}));

// Push on slices of x's columns, each a whole number of blocks and with
// rmax made absolute over all of x, gives the columns of one push on x,
// bit for bit (how PrivGE's wide Z is made a slice at a time).
TEST(PprTest, SlicesOfWholeBlocksWithAbsoluteRmaxPushAsOne) {
  const Graph g = RandomGraph(300, 400, 5, 21);
  const SparseRows x = RandomSparse(300, 40, 3, 22);
  PprOptions o;
  o.relative_rmax = true;
  o.rmax = 1e-3;
  const PprOptions absolute = AbsoluteRmax(o, x);
  float largest = 0;
  for (float v : x.values) largest = std::max(largest, std::abs(v));
  ASSERT_GT(largest, 1.0f);
  EXPECT_EQ(absolute.rmax, 1e-3 * largest);
  EXPECT_FALSE(absolute.relative_rmax);
  EXPECT_EQ(AbsoluteRmax(PprOptions(), x).rmax, PprOptions().rmax);
  EXPECT_EQ(PprPushBlockColumns(300, 40, o), 16);
  EXPECT_EQ(PprPushBlockColumns(300, 5, o), 5);
  EXPECT_EQ(PprPushBlockColumns(2'000'000, 40, o), 8);
  PprOptions five = o;
  five.block_columns = 5;
  EXPECT_EQ(PprPushBlockColumns(300, 40, five), 5);
  auto whole = PprPush(g, x, o);
  ASSERT_TRUE(whole.ok()) << whole.status();
  const size_t width = 16;
  for (size_t j0 = 0; j0 < x.cols; j0 += width) {
    const size_t w = std::min(width, x.cols - j0);
    SparseRows part;
    part.cols = w;
    for (size_t v = 0; v < x.rows; ++v) {
      std::vector<uint32_t> idx;
      std::vector<float> val;
      for (size_t p = x.offsets[v]; p < x.offsets[v + 1]; ++p) {
        if (x.indices[p] >= j0 && x.indices[p] < j0 + w) {
          idx.push_back(static_cast<uint32_t>(x.indices[p] - j0));
          val.push_back(x.values[p]);
        }
      }
      part.AppendRow(idx, val);
    }
    auto slice = PprPush(g, part, absolute);
    ASSERT_TRUE(slice.ok()) << slice.status();
    for (size_t v = 0; v < x.rows; ++v) {
      for (size_t k = 0; k < w; ++k) {
        ASSERT_EQ(slice->at(v, k), whole->at(v, j0 + k)) << v << ", " << j0 + k;
      }
    }
  }
}

TEST(PprTest, BoundIsTightEnoughToFailWithALargerThreshold) {
  // The bound must be informative: with rmax = 0.05 the push error is
  // visible (the test above would fail if it used a 100x smaller bound).
  Graph g = RandomGraph(120, 200, 0, 3);
  DenseMatrix x = RandomDense(120, 3, 5);
  PprOptions o;
  o.rmax = 0.05;
  auto push = PprPush(g, x, o);
  ASSERT_TRUE(push.ok());
  Eigen::MatrixXd exact = ExactPpr(g, x, o.alpha, o.r);
  double worst = 0;
  for (NodeId v = 0; v < 120; ++v)
    for (size_t j = 0; j < 3; ++j)
      worst = std::max(worst, std::fabs(push->at(v, j) - exact(v, j)));
  EXPECT_GT(worst, 0.05 / 100);
  ExpectWithinPushBound(g, *push, exact, o.r, o.rmax, 1e-5);
}

TEST(PprTest, SparseAndDenseInputsAgreeAndThreadsDoNotMatter) {
  Graph g = RandomGraph(3000, 9000, 20, 13);
  SparseRows xs = RandomSparse(3000, 40, 2, 17);
  DenseMatrix xd = xs.ToDense();
  PprOptions o;
  o.rmax = 1e-5;
  PropagationStats s1, s2;
  o.block_columns = 1;
  o.threads = 1;
  auto a = PprPush(g, xs, o, &s1);
  o.threads = 2;
  auto b = PprPush(g, xs, o, &s2);
  auto c = PprPush(g, xd, o);
  o.block_columns = 8;
  auto e = PprPush(g, xs, o);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && e.ok());
  EXPECT_EQ(a->data, b->data);  // bit-identical across thread counts
  EXPECT_EQ(a->data, c->data);  // sparse and dense forms of one input
  EXPECT_EQ(s1.pushes, s2.pushes);
  // A different block width pushes in a different order: same bound.
  auto power = PprPower(g, xd, o);
  ASSERT_TRUE(power.ok());
  for (NodeId v = 0; v < 3000; ++v) {
    const double bound = std::pow(std::max<double>(1, g.degree(v)), o.r) * o.rmax + 1e-5;
    for (size_t j = 0; j < 40; ++j) {
      ASSERT_NEAR(a->at(v, j), power->at(v, j), bound);
      ASSERT_NEAR(e->at(v, j), power->at(v, j), bound);
    }
  }
}

// Every block width (each has its own vector code, padded widths included)
// and thread count gives the same bits for the same block width; 0 threads
// means every core.
TEST(PprTest, ThreadCountsAgreeForEveryBlockWidth) {
  Graph g = RandomGraph(2000, 6000, 10, 23);
  SparseRows xs = RandomSparse(2000, 53, 5, 29);
  for (int w : {0, 1, 2, 3, 4, 5, 8, 11, 16}) {
    PprOptions o;
    o.rmax = 1e-5;
    o.block_columns = w;
    o.threads = 1;
    PropagationStats s1;
    auto one = PprPush(g, xs, o, &s1);
    ASSERT_TRUE(one.ok());
    for (int threads : {0, 2, 3, 7}) {
      o.threads = threads;
      PropagationStats s;
      auto z = PprPush(g, xs, o, &s);
      ASSERT_TRUE(z.ok());
      EXPECT_EQ(one->data, z->data) << "width " << w << ", threads " << threads;
      EXPECT_EQ(s1.pushes, s.pushes);
      EXPECT_EQ(s1.block_columns, s.block_columns);
    }
  }
}

// Past 65,536 nodes a 16-column block's residues pass 4 MiB and the sweep
// prefetches (internal/push_sweep.cc): the same bound holds.
TEST(PprTest, LargeGraphKeepsTheBound) {
  const size_t n = 70000;
  Graph g = RandomGraph(n, 3 * n, 100, 31);
  SparseRows xs = RandomSparse(n, 16, 2, 37);
  PprOptions o;
  o.rmax = 1e-3;
  o.tolerance = 1e-6;
  PropagationStats stats;
  auto push = PprPush(g, xs, o, &stats);
  auto power = PprPower(g, xs.ToDense(), o);
  ASSERT_TRUE(push.ok() && power.ok());
  EXPECT_EQ(stats.block_columns, 16);
  for (NodeId v = 0; v < n; ++v) {
    const double bound =
        std::pow(std::max<double>(1, g.degree(v)), o.r) * o.rmax + 2e-6;
    for (size_t j = 0; j < 16; ++j) {
      ASSERT_NEAR(push->at(v, j), power->at(v, j), bound) << v << " " << j;
    }
  }
}

TEST(PprTest, RelativeRmaxMakesPushScaleFree) {
  // Scaling the input by 2^10 is exact in float: with relative_rmax the
  // threshold scales with it, so push makes the same decisions and returns
  // exactly 2^10 times the result; with an absolute rmax it works harder.
  Graph g = RandomGraph(2000, 6000, 10, 23);
  SparseRows x = RandomSparse(2000, 20, 3, 29);
  SparseRows big = x;
  for (float& f : big.values) f *= 1024.0f;
  const DenseMatrix big_dense = big.ToDense();
  PprOptions o;
  o.relative_rmax = true;
  PropagationStats small_stats, big_stats, dense_stats, absolute_stats;
  auto a = PprPush(g, x, o, &small_stats);
  auto b = PprPush(g, big, o, &big_stats);
  auto c = PprPush(g, big_dense, o, &dense_stats);
  o.relative_rmax = false;
  auto d = PprPush(g, big, o, &absolute_stats);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && d.ok());
  EXPECT_EQ(small_stats.pushes, big_stats.pushes);
  EXPECT_EQ(big_stats.pushes, dense_stats.pushes);
  for (size_t i = 0; i < a->data.size(); ++i) {
    ASSERT_EQ(a->data[i] * 1024.0f, b->data[i]) << i;
  }
  EXPECT_EQ(b->data, c->data);
  EXPECT_GT(absolute_stats.pushes, big_stats.pushes);
}

TEST(PprTest, WorkFollowsTheInputsMass) {
  // Non-negative inputs (as TF-IDF features are), so that residues do not
  // cancel: the work then grows with the mass a column carries.
  Graph g = RandomGraph(5000, 15000, 0, 19);

  PprOptions o;
  o.block_columns = 1;
  PropagationStats zero_stats, sparse_stats, dense_stats;
  SparseRows zero;
  zero.cols = 50;
  for (size_t v = 0; v < 5000; ++v) zero.AppendRow({}, {});
  ASSERT_TRUE(PprPush(g, zero, o, &zero_stats).ok());
  EXPECT_EQ(zero_stats.pushes, 0u);
  SparseRows sparse = RandomSparse(5000, 50, 1, 3);
  for (float& f : sparse.values) f = std::fabs(f);
  DenseMatrix dense = RandomDense(5000, 50, 3);
  for (float& f : dense.data) f = std::fabs(f);
  ASSERT_TRUE(PprPush(g, sparse, o, &sparse_stats).ok());
  ASSERT_TRUE(PprPush(g, dense, o, &dense_stats).ok());
  EXPECT_GT(sparse_stats.pushes, 0u);
  // k = 1 of 50 non-zeros per row: fewer pushes than a dense input. (Only
  // logarithmically fewer here: on a small expander every column's mass
  // still reaches every node above rmax.)
  EXPECT_LT(sparse_stats.pushes, dense_stats.pushes);
}

TEST(PprTest, PushStaysLocalAroundASpike) {
  // A path of 100000 nodes with one non-zero in the middle: push touches a
  // neighbourhood whose size depends on rmax, not on n.
  const NodeId n = 100000;
  std::vector<Edge> edges;
  for (NodeId v = 0; v + 1 < n; ++v) edges.push_back({v, v + 1});
  Graph g = MakeGraph(n, edges);
  SparseRows x;
  x.cols = 1;
  for (NodeId v = 0; v < n; ++v) {
    if (v == n / 2) {
      x.AppendRow({0}, {1.0f});
    } else {
      x.AppendRow({}, {});
    }
  }
  PprOptions o;
  o.rmax = 1e-4;
  PropagationStats stats;
  auto z = PprPush(g, x, o, &stats);
  ASSERT_TRUE(z.ok());
  EXPECT_LT(stats.pushes, 1000u);
  EXPECT_GT(z->at(n / 2, 0), 0.1f);
  EXPECT_EQ(z->at(0, 0), 0.0f);
  EXPECT_EQ(z->at(n / 2 + 1000, 0), 0.0f);
}

// A ring with short chords (each node to the one 5 ahead): push with a
// large alpha stays within a few dozen hops of each non-zero, so Z is
// mostly zeros, as each input column holds only a few non-zeros.
struct LocalCase {
  Graph g;
  SparseRows x;
};
LocalCase MakeLocalCase() {
  const NodeId n = 4000;
  std::vector<Edge> edges;
  for (NodeId v = 0; v < n; ++v) {
    edges.push_back({v, (v + 1) % n});
    edges.push_back({v, (v + 5) % n});
  }
  // One non-zero in every 97th row: a few per column.
  const SparseRows dense_rows = RandomSparse(n + 10, 37, 1, 41);
  SparseRows x;
  x.cols = 37;
  for (NodeId v = 0; v < n + 10; ++v) {
    if (v % 97 == 0) {
      x.AppendRow(dense_rows.row_indices(v), dense_rows.row_values(v));
    } else {
      x.AppendRow({}, {});
    }
  }
  return {MakeGraph(n + 10, edges), std::move(x)};
}

// Counts Z's non-zeros, and compares a CSR with the dense result entry by
// entry (absent entries must be 0 there); indices must ascend.
uint64_t Nonzeros(const DenseMatrix& z) {
  return std::count_if(z.data.begin(), z.data.end(),
                       [](float f) { return f != 0.0f; });
}
void ExpectSameEntries(const SparseRows& s, const DenseMatrix& z) {
  ASSERT_EQ(s.rows, z.rows);
  ASSERT_EQ(s.cols, z.cols);
  ASSERT_EQ(s.offsets.size(), s.rows + 1);
  for (size_t v = 0; v < s.rows; ++v) {
    auto idx = s.row_indices(v);
    ASSERT_TRUE(std::is_sorted(idx.begin(), idx.end())) << "row " << v;
    ASSERT_TRUE(std::adjacent_find(idx.begin(), idx.end()) == idx.end());
  }
  EXPECT_EQ(s.ToDense().data, z.data);
  EXPECT_EQ(s.nnz(), Nonzeros(z));  // no stored zeros
}

TEST(PprByDensityTest, SparseLayoutHoldsPushsEntries) {
  const LocalCase c = MakeLocalCase();
  for (int w : {0, 1, 3, 16}) {
    for (int threads : {1, 3}) {
      PprOptions o;
      o.alpha = 0.3;
      o.rmax = 1e-4;
      o.block_columns = w;
      o.threads = threads;
      auto dense = PprPush(c.g, c.x, o);
      ASSERT_TRUE(dense.ok());
      const uint64_t nnz = Nonzeros(*dense);
      ASSERT_GT(nnz, 0u);
      ASSERT_LT(nnz, dense->data.size() / 4);  // the case is sparse
      int calls = 0;
      PropagationStats stats;
      // Exactly as many non-zeros as allowed: still sparse.
      auto z = PprPushByDensity(c.g, c.x, o, nnz,
                                [&] {
                                  ++calls;
                                  return absl::Span<float>();
                                },
                                &stats);
      ASSERT_TRUE(z.ok()) << z.status();
      ASSERT_TRUE(z->has_value()) << "width " << w;
      EXPECT_EQ(calls, 0);
      EXPECT_EQ(stats.nonzeros, nnz);
      ExpectSameEntries(**z, *dense);
    }
  }
}

TEST(PprByDensityTest, OneNonZeroTooManyGoesDense) {
  const LocalCase c = MakeLocalCase();
  for (int threads : {1, 2}) {
    PprOptions o;
    o.alpha = 0.3;
    o.rmax = 1e-4;
    o.block_columns = 4;
    o.threads = threads;
    auto want = PprPush(c.g, c.x, o);
    ASSERT_TRUE(want.ok());
    const uint64_t nnz = Nonzeros(*want);
    for (uint64_t limit : {nnz - 1, nnz / 3, uint64_t{0}}) {
      // A buffer of garbage: every entry must be written.
      std::vector<float> out(want->data.size(), 7.0f);
      int calls = 0;
      PropagationStats stats;
      auto z = PprPushByDensity(c.g, c.x, o, limit,
                                [&] {
                                  ++calls;
                                  return absl::MakeSpan(out);
                                },
                                &stats);
      ASSERT_TRUE(z.ok()) << z.status();
      EXPECT_FALSE(z->has_value()) << "limit " << limit;
      EXPECT_EQ(calls, 1);
      EXPECT_EQ(out, want->data) << "limit " << limit << ", threads "
                                 << threads;
      EXPECT_EQ(stats.nonzeros, nnz);
    }
  }
}

TEST(PprByDensityTest, ZeroLimitIsDenseEvenForAZeroInput) {
  const LocalCase c = MakeLocalCase();
  SparseRows zero;
  zero.cols = 5;
  for (size_t v = 0; v < c.x.rows; ++v) zero.AppendRow({}, {});
  std::vector<float> out(zero.rows * 5, 1.0f);
  int calls = 0;
  auto z = PprPushByDensity(c.g, zero, PprOptions(), 0, [&] {
    ++calls;
    return absl::MakeSpan(out);
  });
  ASSERT_TRUE(z.ok());
  EXPECT_FALSE(z->has_value());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(std::count(out.begin(), out.end(), 0.0f),
            static_cast<long>(out.size()));
  // With room for none, an all-zero Z stays sparse: empty rows.
  auto sparse = PprPushByDensity(c.g, zero, PprOptions(), 1, [&] {
    ++calls;
    return absl::MakeSpan(out);
  });
  ASSERT_TRUE(sparse.ok() && sparse->has_value());
  EXPECT_EQ((*sparse)->nnz(), 0u);
  EXPECT_EQ((*sparse)->rows, zero.rows);
  EXPECT_EQ(calls, 1);
}

TEST(PprByDensityTest, RefusesWhatPprPushRefuses) {
  const LocalCase c = MakeLocalCase();
  SparseRows short_x = RandomSparse(10, 3, 1, 5);
  auto z = PprPushByDensity(c.g, short_x, PprOptions(), 100,
                            [] { return absl::Span<float>(); });
  EXPECT_EQ(z.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PprTest, SelfLoopsAreOrdinaryNeighbours) {
  Graph g = MakeGraph(4, {{0, 1}, {1, 2}, {2, 2}, {2, 3}, {0, 0}}, true);
  DenseMatrix x = RandomDense(4, 3, 23);
  PprOptions o;
  o.rmax = 1e-8;
  o.tolerance = 1e-9;
  Eigen::MatrixXd exact = ExactPpr(g, x, o.alpha, o.r);
  auto push = PprPush(g, x, o);
  auto power = PprPower(g, x, o);
  ASSERT_TRUE(push.ok() && power.ok());
  for (NodeId v = 0; v < 4; ++v)
    for (size_t j = 0; j < 3; ++j) {
      EXPECT_NEAR(push->at(v, j), exact(v, j), 1e-5);
      EXPECT_NEAR(power->at(v, j), exact(v, j), 1e-5);
    }
}

TEST(PprTest, PowerStopsAtMaxIterationsAndReportsTheTail) {
  Graph g = RandomGraph(50, 60, 0, 29);
  DenseMatrix x = RandomDense(50, 2, 31);
  PprOptions o;
  o.max_iterations = 5;
  o.tolerance = 1e-12;
  PropagationStats stats;
  ASSERT_TRUE(PprPower(g, x, o, &stats).ok());
  EXPECT_EQ(stats.iterations, 5);
  EXPECT_GT(stats.tail_bound, 1e-12);
}

TEST(PprTest, RejectsBadOptionsNamingThem) {
  Graph g = MakeGraph(2, {{0, 1}});
  DenseMatrix x(2, 1);
  struct Bad {
    PprOptions o;
    const char* text;
  };
  std::vector<Bad> cases;
  PprOptions o;
  o.alpha = 0;
  cases.push_back({o, "alpha must be in (0, 1]"});
  o = PprOptions();
  o.r = 1.5;
  cases.push_back({o, "r must be in [0, 1]"});
  o = PprOptions();
  o.rmax = 0;
  cases.push_back({o, "rmax must be finite and > 0"});
  o = PprOptions();
  o.threads = -1;
  cases.push_back({o, "threads must be >= 0 (0 = every core)"});
  o = PprOptions();
  o.tolerance = -1;
  cases.push_back({o, "tolerance must be finite and > 0"});
  o = PprOptions();
  o.block_columns = -2;
  cases.push_back({o, "block_columns must be >= 0"});
  for (const Bad& b : cases) {
    auto z = PprPush(g, x, b.o);
    ASSERT_FALSE(z.ok());
    EXPECT_EQ(z.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(z.status().message(), HasSubstr(b.text));
  }
  auto shape = PprPower(g, DenseMatrix(3, 1), PprOptions());
  ASSERT_FALSE(shape.ok());
  EXPECT_THAT(shape.status().message(),
              HasSubstr("feature matrix has 3 rows but the graph has 2 nodes"));
}

TEST(GcnTest, PathByHand) {
  // Path 0-1-2: d~ = 2, 3, 2.
  Graph g = MakeGraph(3, {{0, 1}, {1, 2}});
  DenseMatrix x(3, 1);
  x.data = {1.0f, 2.0f, 4.0f};
  auto out = GcnAggregate(g, x);
  ASSERT_TRUE(out.ok());
  EXPECT_NEAR(out->at(0, 0), 1.0 / 2 + 2.0 / std::sqrt(6.0), 1e-6);
  EXPECT_NEAR(out->at(1, 0), 1.0 / std::sqrt(6.0) + 2.0 / 3 + 4.0 / std::sqrt(6.0), 1e-6);
  EXPECT_NEAR(out->at(2, 0), 2.0 / std::sqrt(6.0) + 4.0 / 2, 1e-6);
}

TEST(GcnTest, ExistingSelfLoopIsNotDoubled) {
  Graph g = MakeGraph(2, {{0, 1}, {1, 1}}, true);
  DenseMatrix x(2, 1);
  x.data = {1.0f, 3.0f};
  auto out = GcnAggregate(g, x);
  ASSERT_TRUE(out.ok());
  // d~ = 2 for both (node 1 already has its loop).
  EXPECT_NEAR(out->at(0, 0), 0.5 + 1.5, 1e-6);
  EXPECT_NEAR(out->at(1, 0), 0.5 + 1.5, 1e-6);
}

TEST(KPropTest, MeanAggregationByHand) {
  // Path 0-1-2 and isolated 3.
  Graph g = MakeGraph(4, {{0, 1}, {1, 2}});
  DenseMatrix x(4, 1);
  x.data = {1.0f, 2.0f, 4.0f, 8.0f};
  auto one = KProp(g, x, 1, false);
  ASSERT_TRUE(one.ok());
  EXPECT_FLOAT_EQ(one->at(0, 0), 2.0f);
  EXPECT_FLOAT_EQ(one->at(1, 0), 2.5f);
  EXPECT_FLOAT_EQ(one->at(2, 0), 2.0f);
  EXPECT_FLOAT_EQ(one->at(3, 0), 8.0f);  // no neighbours: keeps its value
  auto two = KProp(g, x, 2, false);
  ASSERT_TRUE(two.ok());
  EXPECT_FLOAT_EQ(two->at(0, 0), 2.5f);
  EXPECT_FLOAT_EQ(two->at(1, 0), 2.0f);
  auto loops = KProp(g, x, 1, true);
  ASSERT_TRUE(loops.ok());
  EXPECT_FLOAT_EQ(loops->at(0, 0), 1.5f);
  EXPECT_FLOAT_EQ(loops->at(1, 0), 7.0f / 3);
  EXPECT_FLOAT_EQ(loops->at(3, 0), 8.0f);
  auto zero = KProp(g, x, 0, false);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->data, x.data);
  EXPECT_FALSE(KProp(g, x, -1, false).ok());
  EXPECT_FALSE(KProp(g, x, 1, false, -1).ok());
}

TEST(KPropTest, SymmetricNormalisationByHand) {
  // Path 0-1-2 and isolated 3; degrees 1, 2, 1, 0.
  Graph g = MakeGraph(4, {{0, 1}, {1, 2}});
  DenseMatrix x(4, 1);
  x.data = {1.0f, 2.0f, 4.0f, 8.0f};
  auto one = KProp(g, x, 1, false, 0, KPropNorm::kSymmetric);
  ASSERT_TRUE(one.ok());
  const float r2 = std::sqrt(2.0f);
  EXPECT_FLOAT_EQ(one->at(0, 0), 2.0f / r2);
  EXPECT_FLOAT_EQ(one->at(1, 0), (1.0f + 4.0f) / r2);
  EXPECT_FLOAT_EQ(one->at(2, 0), 2.0f / r2);
  EXPECT_FLOAT_EQ(one->at(3, 0), 8.0f);  // no neighbours: keeps its value
  // Two steps are the operator applied twice: node 0 gets
  // (1/sqrt 2) * (5/sqrt 2) = 2.5.
  auto two = KProp(g, x, 2, false, 0, KPropNorm::kSymmetric);
  ASSERT_TRUE(two.ok());
  EXPECT_FLOAT_EQ(two->at(0, 0), 2.5f);
  EXPECT_FLOAT_EQ(two->at(1, 0), 2.0f);
  // With self loops the degrees count the loop: 2, 3, 2.
  auto loops = KProp(g, x, 1, true, 0, KPropNorm::kSymmetric);
  ASSERT_TRUE(loops.ok());
  EXPECT_FLOAT_EQ(loops->at(0, 0), 1.0f / 2 + 2.0f / std::sqrt(6.0f));
  EXPECT_FLOAT_EQ(loops->at(3, 0), 8.0f);
  EXPECT_EQ(*ParseKPropNorm("symmetric"), KPropNorm::kSymmetric);
  EXPECT_EQ(*ParseKPropNorm("mean"), KPropNorm::kMean);
  EXPECT_FALSE(ParseKPropNorm("sum").ok());
}

TEST(KPropTest, OperatorIsOneStep) {
  // A random graph with isolated nodes and a stored self loop: T x matches
  // one KProp step for both normalisations, with and without self loops.
  Graph g = MakeGraph(7, {{0, 1}, {1, 2}, {2, 0}, {2, 3}, {3, 3}, {4, 5}},
                      true);
  DenseMatrix x = RandomDense(7, 3, 7);
  for (KPropNorm norm : {KPropNorm::kMean, KPropNorm::kSymmetric}) {
    for (bool loops : {false, true}) {
      auto one = KProp(g, x, 1, loops, 1, norm);
      ASSERT_TRUE(one.ok());
      std::vector<double> tx(7 * 3, 0.0);
      for (const KPropEntry& e : KPropOperator(g, loops, norm)) {
        for (size_t j = 0; j < 3; ++j) {
          tx[e.row * 3 + j] += e.weight * x.at(e.col, j);
        }
      }
      for (size_t i = 0; i < tx.size(); ++i) {
        EXPECT_NEAR(one->data[i], tx[i], 1e-6)
            << KPropNormName(norm) << " loops " << loops << " at " << i;
      }
    }
  }
  // Node 6 is isolated: T_66 = 1 and nothing else in its row.
  int row6 = 0;
  for (const KPropEntry& e : KPropOperator(g, false, KPropNorm::kMean)) {
    if (e.row == 6) {
      ++row6;
      EXPECT_EQ(e.col, 6u);
      EXPECT_EQ(e.weight, 1.0);
    }
  }
  EXPECT_EQ(row6, 1);
}

TEST(HighOrderAggregateTest, MatchesADenseReference) {
  // Two components, an isolated node, a stored self loop. The reference
  // builds D^-1/2 A D^-1/2 densely in double from the edge list (an
  // isolated node's row: 1 on the diagonal, as KProp keeps its value) and
  // sums its powers: H = (1/K) sum_{k=1..K} T^k x.
  const size_t n = 9;
  const std::vector<Edge> edges = {{0, 1}, {1, 2}, {2, 0}, {2, 3}, {3, 3},
                                   {4, 5}, {5, 6}, {6, 7}};
  Graph g = MakeGraph(n, edges, true);
  DenseMatrix x = RandomDense(n, 4, 11);
  Eigen::MatrixXd a = Eigen::MatrixXd::Zero(n, n);
  for (const Edge& e : edges) {
    a(e.u, e.v) = 1;
    a(e.v, e.u) = 1;
  }
  Eigen::VectorXd deg = a.rowwise().sum();
  Eigen::MatrixXd t = Eigen::MatrixXd::Zero(n, n);
  for (size_t u = 0; u < n; ++u) {
    if (deg(u) == 0) {
      t(u, u) = 1;
      continue;
    }
    for (size_t v = 0; v < n; ++v) {
      if (a(u, v) != 0) t(u, v) = 1 / std::sqrt(deg(u) * deg(v));
    }
  }
  Eigen::MatrixXd x0(n, 4);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < 4; ++j) x0(i, j) = x.at(i, j);
  }
  for (int steps : {1, 3, 8}) {
    Eigen::MatrixXd power = x0, sum = Eigen::MatrixXd::Zero(n, 4);
    for (int k = 0; k < steps; ++k) {
      power = t * power;
      sum += power;
    }
    sum /= steps;
    auto h = HighOrderAggregate(g, x, steps, false, 1);
    ASSERT_TRUE(h.ok()) << h.status();
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < 4; ++j) {
        EXPECT_NEAR(h->at(i, j), sum(i, j), 1e-5)
            << "K " << steps << " at (" << i << ", " << j << ")";
      }
    }
  }
  // K = 0 returns x; HOA with K = 1 is one KProp step; the isolated node 8
  // keeps its row.
  auto zero = HighOrderAggregate(g, x, 0, false);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->data, x.data);
  auto h1 = HighOrderAggregate(g, x, 1, false, 0);
  auto k1 = KProp(g, x, 1, false, 0, KPropNorm::kSymmetric);
  ASSERT_TRUE(h1.ok() && k1.ok());
  EXPECT_EQ(h1->data, k1->data);
  auto h8 = HighOrderAggregate(g, x, 8, false, 2);
  ASSERT_TRUE(h8.ok());
  for (size_t j = 0; j < 4; ++j) EXPECT_FLOAT_EQ(h8->at(8, j), x.at(8, j));
  EXPECT_FALSE(HighOrderAggregate(g, x, -1, false).ok());
  DenseMatrix wrong(n + 1, 4);
  EXPECT_FALSE(HighOrderAggregate(g, wrong, 2, false).ok());
}

TEST(HighOrderAggregateTest, ThreadsDoNotChangeTheBits) {
  Graph g = RandomGraph(3000, 9000, 20, 45);
  DenseMatrix x = RandomDense(3000, 8, 47);
  auto one = HighOrderAggregate(g, x, 6, false, 1);
  auto many = HighOrderAggregate(g, x, 6, false, 3);
  ASSERT_TRUE(one.ok() && many.ok());
  EXPECT_EQ(one->data, many->data);
}

TEST(KPropTest, ThreadsDoNotChangeTheBits) {
  Graph g = RandomGraph(3000, 9000, 20, 41);
  DenseMatrix x = RandomDense(3000, 24, 43);
  auto one = KProp(g, x, 4, true, 1);
  ASSERT_TRUE(one.ok());
  for (int threads : {0, 2, 5}) {
    auto z = KProp(g, x, 4, true, threads);
    ASSERT_TRUE(z.ok());
    EXPECT_EQ(one->data, z->data) << threads;
  }
}

// Past 4 MiB of features KProp prefetches the rows of neighbours further
// down the adjacency (aggregation.cc): the same arithmetic, so the same bits
// as KProp on each column alone, whose 160 KB stay under the threshold.
TEST(KPropTest, PrefetchingGraphGivesTheColumnByColumnBits) {
  const size_t n = 40000, d = 64;
  const Graph g = RandomGraph(n, 4 * n, 50, 47);
  const DenseMatrix x = RandomDense(n, d, 49);
  for (KPropNorm norm : {KPropNorm::kMean, KPropNorm::kSymmetric}) {
    auto all = KProp(g, x, 2, /*self_loops=*/norm == KPropNorm::kMean, 2,
                     norm);
    ASSERT_TRUE(all.ok()) << all.status();
    size_t mismatches = 0;
    for (size_t j = 0; j < d; j += 9) {
      DenseMatrix column(n, 1);
      for (size_t v = 0; v < n; ++v) column.at(v, 0) = x.at(v, j);
      auto one = KProp(g, column, 2, norm == KPropNorm::kMean, 2, norm);
      ASSERT_TRUE(one.ok());
      for (size_t v = 0; v < n; ++v) {
        mismatches += all->at(v, j) != one->at(v, 0);
      }
    }
    EXPECT_EQ(mismatches, 0u) << KPropNormName(norm);
  }
}

// The same graph with every edge weighing 1.
Graph AllOnes(const Graph& g) {
  const std::vector<Edge> edges = g.Edges();
  Graph::BuildOptions o;
  o.allow_self_loops = true;
  return *Graph::FromWeightedEdges(g.num_nodes(), edges,
                                   std::vector<double>(edges.size(), 1.0), o);
}

TEST(WeightedPropagationTest, AllOneWeightsGiveTheUnweightedBits) {
  const Graph g = RandomGraph(2000, 6000, 10, 51);
  const Graph w = AllOnes(g);
  ASSERT_TRUE(w.weighted());
  const DenseMatrix x = RandomDense(2000, 8, 53);
  for (KPropNorm norm : {KPropNorm::kMean, KPropNorm::kSymmetric}) {
    for (bool loops : {false, true}) {
      auto a = KProp(g, x, 3, loops, 2, norm);
      auto b = KProp(w, x, 3, loops, 2, norm);
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_EQ(a->data, b->data) << KPropNormName(norm) << " " << loops;
    }
  }
  auto a = GcnAggregate(g, x);
  auto b = GcnAggregate(w, x);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->data, b->data);
}

TEST(WeightedPropagationTest, WeightedPathByHand) {
  // 0 -(2)- 1 -(0.5)- 2: weighted degrees 2, 2.5, 0.5.
  const Graph g = *Graph::FromWeightedEdges(3, {{0, 1}, {1, 2}}, {2.0, 0.5});
  DenseMatrix x(3, 1);
  x.data = {1.0f, 2.0f, 4.0f};
  auto mean = KProp(g, x, 1, false);
  ASSERT_TRUE(mean.ok());
  EXPECT_FLOAT_EQ(mean->at(0, 0), 2.0f);
  EXPECT_FLOAT_EQ(mean->at(1, 0), (2.0f * 1 + 0.5f * 4) / 2.5f);
  EXPECT_FLOAT_EQ(mean->at(2, 0), 2.0f);
  auto loops = KProp(g, x, 1, true);
  ASSERT_TRUE(loops.ok());
  EXPECT_FLOAT_EQ(loops->at(0, 0), (1.0f + 2.0f * 2) / 3);
  EXPECT_FLOAT_EQ(loops->at(1, 0), (2.0f * 1 + 2 + 0.5f * 4) / 3.5f);
  auto sym = KProp(g, x, 1, false, 0, KPropNorm::kSymmetric);
  ASSERT_TRUE(sym.ok());
  EXPECT_FLOAT_EQ(sym->at(0, 0), 2.0 * 2 / std::sqrt(2.0 * 2.5));
  EXPECT_FLOAT_EQ(sym->at(1, 0), 2.0 * 1 / std::sqrt(2.5 * 2) +
                                     0.5 * 4 / std::sqrt(2.5 * 0.5));
  auto gcn = GcnAggregate(g, x);  // d~ = 3, 3.5, 1.5
  ASSERT_TRUE(gcn.ok());
  EXPECT_FLOAT_EQ(gcn->at(0, 0), 1.0 / 3 + 2.0 * 2 / std::sqrt(3 * 3.5));
  EXPECT_FLOAT_EQ(gcn->at(2, 0),
                  0.5 * 2 / std::sqrt(1.5 * 3.5) + 4 / 1.5);
}

TEST(WeightedPropagationTest, PageRankRefusesWeightedGraphs) {
  const Graph w = AllOnes(MakeGraph(3, {{0, 1}, {1, 2}}));
  DenseMatrix x(3, 1);
  x.data = {1.0f, 2.0f, 4.0f};
  auto push = PprPush(w, x, PprOptions());
  EXPECT_EQ(push.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(push.status().message(), HasSubstr("weighted"));
  auto power = PprPower(w, x, PprOptions());
  EXPECT_EQ(power.status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace ldpgraph
