#include "server/pipeline/internal/deferred_kprop.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "server/pipeline/internal/stages.h"
#include "server/propagation/propagation.h"

namespace ldpgraph::pipeline::internal {
namespace {

using training::Mat;

// A random graph of n nodes (about 3 edges a node, the last 3 isolated, a
// few self loops), and n x d rows: each entry stored with probability 1/4,
// a tenth of those holding 0 (held against a fill, an explicit 0).
struct Case {
  Graph graph;
  SparseRows x;
};

Case MakeCase(size_t n, size_t d, uint64_t seed) {
  PublicRandom rng(seed);
  std::vector<Edge> edges;
  for (size_t e = 0; e < 3 * n; ++e) {
    const NodeId u = rng.Next64() % (n - 3), v = rng.Next64() % (n - 3);
    if (u != v || e % 7 == 0) edges.push_back({std::min(u, v), std::max(u, v)});
  }
  Case c;
  c.graph = *Graph::FromEdges(n, edges, {.allow_self_loops = true});
  c.x.cols = d;
  std::vector<double> row(d);
  for (size_t i = 0; i < n; ++i) {
    std::vector<uint32_t> idx;
    std::vector<float> val;
    for (size_t j = 0; j < d; ++j) {
      if (rng.Next64() % 4 != 0) continue;
      idx.push_back(static_cast<uint32_t>(j));
      val.push_back(rng.Next64() % 10 == 0
                        ? 0.0f
                        : static_cast<float>(4 * rng.UniformDouble() - 2));
    }
    c.x.AppendRow(idx, val);
  }
  return c;
}

PipelineConfig Config(bool standardize, KPropNorm norm, bool self_loops,
                      training::NodeModelKind kind) {
  PipelineConfig c = DefaultConfig(v1::PIPELINE_METHOD_LPGNN,
                                   v1::PIPELINE_TASK_NODE);
  c.standardize = standardize;
  c.kprop_norm = norm;
  c.feature_self_loops = self_loops;
  c.node_model.kind = kind;
  c.threads = 2;
  return c;
}

TEST(DenseWithFillTest, AbsentEntriesHoldTheFill) {
  SparseRows x;
  x.cols = 3;
  x.AppendRow({{0, 2}}, {{1.5f, 0.0f}});
  x.AppendRow({}, {});
  const DenseMatrix m = DenseWithFill(x, 0.5f);
  EXPECT_EQ(m.data, (std::vector<float>{1.5f, 0.5f, 0.0f, 0.5f, 0.5f, 0.5f}));
  EXPECT_EQ(DenseWithFill(x, 0.0f).data, x.ToDense().data);
  const SparseRows plain = WithoutFill(x, 0.5f);
  EXPECT_EQ(plain.ToDense().data, m.data);
  EXPECT_EQ(plain.nnz(), 5u);  // the stored 0 dropped, the fills stored
}

// The blocked statistics are the floats Standardize takes of the whole
// KProp output, for any block width.
TEST(PropagatedColumnStatsTest, EqualTheDenseStatistics) {
  for (float fill : {0.0f, 0.5f}) {
    for (KPropNorm norm : {KPropNorm::kMean, KPropNorm::kSymmetric}) {
      for (bool loops : {false, true}) {
        const Case k = MakeCase(60, 11, 5);
        const int steps = 3;
        auto z = KProp(k.graph, DenseWithFill(k.x, fill), steps, loops, 2,
                       norm);
        ASSERT_TRUE(z.ok()) << z.status();
        const Mat<float> dense = ToEigen(*z);
        for (size_t block : {size_t{1}, size_t{3}, size_t{11}, size_t{0}}) {
          SCOPED_TRACE(::testing::Message()
                       << "fill " << fill << " symmetric "
                       << (norm == KPropNorm::kSymmetric) << " loops "
                       << loops << " block " << block);
          auto s = PropagatedColumnStats(k.graph, k.x, fill, steps, loops, 1,
                                         norm, block);
          ASSERT_TRUE(s.ok()) << s.status();
          for (Eigen::Index j = 0; j < dense.cols(); ++j) {
            const ColumnMoments m =
                StandardizeMoments(dense.data() + j, dense.rows(),
                                   dense.cols());
            EXPECT_EQ(s->mean[j], m.mean) << "column " << j;
            EXPECT_EQ(s->scale[j], double(m.scale)) << "column " << j;
          }
          // And they are the column statistics: standardised, a column
          // has mean 0 and deviation 1.
          Mat<float> standardised = dense;
          Standardize(&standardised);
          EXPECT_NEAR(standardised.col(0).mean(), 0.0, 1e-5);
        }
      }
    }
  }
}

// The deferred first layer against the dense path as PropagateNode runs it:
// KProp on the dense estimates, ToEigen, Standardize, the dense Forward
// and Backward. Within float rounding (the dense path adds up in double
// inside KProp, the deferred one in float).
TEST(DeferKPropTest, FirstLayerMatchesTheDensePath) {
  for (training::NodeModelKind kind :
       {training::NodeModelKind::kGcn, training::NodeModelKind::kSage}) {
    for (bool standardize : {false, true}) {
      for (KPropNorm norm : {KPropNorm::kSymmetric, KPropNorm::kMean}) {
        SCOPED_TRACE(::testing::Message()
                     << "sage " << (kind == training::NodeModelKind::kSage)
                     << " standardize " << standardize << " symmetric "
                     << (norm == KPropNorm::kSymmetric));
        const float fill = 0.5f;
        const Case k = MakeCase(80, 13, 7);
        const PipelineConfig c = Config(standardize, norm, false, kind);
        const int steps = 4;
        auto z = KProp(k.graph, DenseWithFill(k.x, fill), steps,
                       c.feature_self_loops, c.threads, c.kprop_norm);
        ASSERT_TRUE(z.ok()) << z.status();
        Mat<float> dense_x = ToEigen(*z);
        if (standardize) Standardize(&dense_x);
        auto deferred = DeferKProp(k.graph, k.x, fill, c, steps);
        ASSERT_TRUE(deferred.ok()) << deferred.status();
        EXPECT_EQ(deferred->x.nonZeros(), static_cast<int64_t>(k.x.nnz()));
        // The symmetric step (unweighted) is kept once, the mean's twice.
        ASSERT_TRUE(deferred->propagation);
        EXPECT_EQ(deferred->propagation->op_t.size() == 0,
                  norm == KPropNorm::kSymmetric);

        const training::GraphOperators<float> ops =
            training::BuildGraphOperators<float>(k.graph);
        const training::GnnConfig gc{
            kind == training::NodeModelKind::kGcn ? training::GnnKind::kGcn
                                                  : training::GnnKind::kSage,
            13, 8, 3, 2, 0.0, training::Activation::kSelu};
        PublicRandom r1(3), r2(3);
        training::Gnn<float> dense(gc, &ops, r1), lazy(gc, &ops, r2);
        const Mat<float> a = dense.Forward(dense_x, true, nullptr);
        const Mat<float> b = lazy.Forward(*deferred, true, nullptr);
        const float scale = 1 + a.cwiseAbs().maxCoeff();
        EXPECT_LT((a - b).cwiseAbs().maxCoeff(), 2e-5 * scale);
        PublicRandom rr(5);
        Mat<float> r(80, 3);
        for (Eigen::Index i = 0; i < r.size(); ++i) {
          r.data()[i] = static_cast<float>(2 * rr.UniformDouble() - 1);
        }
        dense.Backward(r);
        lazy.Backward(r);
        const auto pd = dense.Params(), pl = lazy.Params();
        for (size_t i = 0; i < pd.size(); ++i) {
          EXPECT_LT((pd[i]->grad - pl[i]->grad).cwiseAbs().maxCoeff(),
                    2e-5 * (1 + pd[i]->grad.cwiseAbs().maxCoeff()))
              << "param " << i;
        }
      }
    }
  }
}

TEST(DeferKPropTest, RejectsBadShapes) {
  const Case k = MakeCase(20, 4, 3);
  const PipelineConfig c =
      Config(false, KPropNorm::kMean, false, training::NodeModelKind::kSage);
  EXPECT_EQ(DeferKProp(k.graph, k.x, 0, c, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  const Case other = MakeCase(21, 4, 3);
  EXPECT_EQ(DeferKProp(k.graph, other.x, 0, c, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A clamp of the standardised features cannot be folded into the layer.
  PipelineConfig clipped =
      Config(true, KPropNorm::kMean, false, training::NodeModelKind::kSage);
  ASSERT_TRUE(DeferKProp(k.graph, k.x, 0, clipped, 2).ok());
  clipped.standardize_clip = 5;
  const absl::Status s = DeferKProp(k.graph, k.x, 0, clipped, 2).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("cannot clamp"), std::string::npos) << s;
}

// Standardize's clip clamps every standardised entry, and nothing else.
TEST(StandardizeTest, ClipClampsTheStandardisedEntries) {
  Mat<float> m(6, 2);
  m << 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 100, 1;  // one far entry; a constant
  Mat<float> plain = m, clipped = m;
  Standardize(&plain);
  Standardize(&clipped, 1.5);
  EXPECT_GT(plain(5, 0), 2.0f);   // sqrt(5): past the clip
  EXPECT_FLOAT_EQ(clipped(5, 0), 1.5f);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(clipped(i, 0), plain(i, 0)) << i;  // -1/sqrt(5): inside
    EXPECT_EQ(clipped(i, 1), 0.0f);  // a constant column standardises to 0
  }
}

TEST(DefersKPropTest, WideFeaturesAndGraphModelsOnly) {
  PipelineConfig c =
      Config(false, KPropNorm::kMean, false, training::NodeModelKind::kSage);
  EXPECT_FALSE(DefersKProp(c, 2708, 1433));    // cora
  EXPECT_FALSE(DefersKProp(c, 3327, 3703));    // citeseer
  EXPECT_FALSE(DefersKProp(c, 19717, 500));    // pubmed
  EXPECT_TRUE(DefersKProp(c, 34493, 8415));
  c.node_model.kind = training::NodeModelKind::kMlp;
  EXPECT_FALSE(DefersKProp(c, 34493, 8415));
}

}  // namespace
}  // namespace ldpgraph::pipeline::internal
