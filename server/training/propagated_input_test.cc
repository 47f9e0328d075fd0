#include "server/training/propagated_input.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "server/training/gradient_check.h"
#include "server/training/models.h"

namespace ldpgraph::training {
namespace {

constexpr int kNodes = 6;

Mat<double> RandomMatrix(int rows, int cols, uint64_t seed) {
  PublicRandom rng(seed);
  Mat<double> m(rows, cols);
  FillUniform(m, 1.0, rng);
  return m;
}

// 0-1, 1-2, 2-0, 2-3, 3-4; node 5 isolated; a self loop on 4.
Graph SmallGraph() {
  return *Graph::FromEdges(kNodes,
                           {{0, 1}, {1, 2}, {0, 2}, {2, 3}, {3, 4}, {4, 4}},
                           {.allow_self_loops = true});
}

// A propagation step that is not symmetric and whose rows do not sum to 1
// (so u - 1 and P^T both matter): the graph's mean step with the weights
// of row v scaled by 1 + v / 10, and the isolated node keeping its value.
SpMat<double> Step() {
  const Graph g = SmallGraph();
  std::vector<Eigen::Triplet<double, int64_t>> e;
  for (NodeId v = 0; v < kNodes; ++v) {
    auto nb = g.neighbors(v);
    if (nb.empty()) e.emplace_back(v, v, 1.0);
    for (NodeId u : nb) {
      e.emplace_back(v, u, (1.0 + v / 10.0) / static_cast<double>(nb.size()));
    }
  }
  SpMat<double> p(kNodes, kNodes);
  p.setFromTriplets(e.begin(), e.end());
  return p;
}

// Delta with about a third of its entries stored.
Mat<double> SparseDelta(int cols, uint64_t seed) {
  Mat<double> x = RandomMatrix(kNodes, cols, seed);
  PublicRandom rng(seed + 1);
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    if (rng.Next64() % 3 != 0) x.data()[i] = 0.0;
  }
  return x;
}

// The input formed densely, as the pipeline's dense path does: X = fill +
// delta, K products by P, then each column standardised (population
// deviation; a constant column to 0). mean and scale get the statistics.
Mat<double> DenseInput(const Mat<double>& delta, double fill, int steps,
                       bool standardize, std::vector<double>* mean,
                       std::vector<double>* scale) {
  const SpMat<double> p = Step();
  Mat<double> x = delta.array() + fill;
  for (int k = 0; k < steps; ++k) x = p * x;
  mean->clear();
  scale->clear();
  if (!standardize) return x;
  for (Eigen::Index j = 0; j < x.cols(); ++j) {
    const double mu = x.col(j).mean();
    const double sd =
        std::sqrt((x.col(j).array() - mu).square().sum() / x.rows());
    mean->push_back(mu);
    scale->push_back(sd > 0 ? 1.0 / sd : 0.0);
    x.col(j) = (x.col(j).array() - mu) * scale->back();
  }
  return x;
}

struct Case {
  double fill;
  int steps;
  bool standardize;
};

const Case kCases[] = {{0.0, 0, false}, {0.0, 2, false}, {0.5, 2, false},
                       {0.5, 3, true},  {-2.0, 1, true}, {0.0, 0, true}};

TEST(InputProductTest, EqualsTheProductsOfTheFormedInput) {
  for (const Case& k : kCases) {
    SCOPED_TRACE(::testing::Message() << "fill " << k.fill << " steps "
                                      << k.steps << " std " << k.standardize);
    const int d = 5;
    const Mat<double> delta = SparseDelta(d, 11);
    std::vector<double> mean, scale;
    const Mat<double> dense =
        DenseInput(delta, k.fill, k.steps, k.standardize, &mean, &scale);
    const InputPropagation<double> p =
        MakeInputPropagation<double>(Step(), k.steps, k.fill, d, mean, scale);
    const SpMat<double> x = delta.sparseView();
    const SpMat<double> xt = x.transpose();
    const Mat<double> w = RandomMatrix(d, 3, 4), g = RandomMatrix(kNodes, 3, 5);
    Mat<double> fwd, back;
    InputProduct(x, &p, w, &fwd, 1);
    InputTransposeProduct(xt, &p, g, &back, 1);
    EXPECT_LT((fwd - dense * w).cwiseAbs().maxCoeff(), 1e-12);
    EXPECT_LT((back - dense.transpose() * g).cwiseAbs().maxCoeff(), 1e-12);
    // The same bits on more threads.
    Mat<double> fwd3, back3;
    InputProduct(x, &p, w, &fwd3, 3);
    InputTransposeProduct(xt, &p, g, &back3, 3);
    EXPECT_EQ(fwd, fwd3);
    EXPECT_EQ(back, back3);
  }
}

TEST(InputProductTest, WithoutAPropagationIsThePlainSparseProduct) {
  const Mat<double> delta = SparseDelta(5, 12);
  const SpMat<double> x = delta.sparseView();
  const SpMat<double> xt = x.transpose();
  const Mat<double> w = RandomMatrix(5, 3, 4), g = RandomMatrix(kNodes, 3, 5);
  Mat<double> fwd, back;
  InputProduct<double>(x, nullptr, w, &fwd, 1);
  InputTransposeProduct<double>(xt, nullptr, g, &back, 1);
  EXPECT_EQ(fwd, Mat<double>(x * w));
  EXPECT_EQ(back, Mat<double>(xt * g));
}

TEST(InputPropagationTest, KeepsOneCopyOfASymmetricStep) {
  EXPECT_GT(MakeInputPropagation<double>(Step(), 1, 0, 4, {}, {}).op_t.size(),
            0);
  const SpMat<double> p = Step();
  SpMat<double> sym = SpMat<double>(p.transpose()) + p;
  const InputPropagation<double> s =
      MakeInputPropagation<double>(SpMat<double>(sym), 1, 0, 4, {}, {});
  EXPECT_EQ(s.op_t.size(), 0);
  EXPECT_EQ(&s.transposed(), &s.op);
  const Mat<double> g = RandomMatrix(kNodes, 2, 3);
  const SpMat<double> xt = SparseDelta(4, 5).transpose().sparseView();
  Mat<double> out;
  InputTransposeProduct(xt, &s, g, &out, 1);
  EXPECT_LT((out - Mat<double>(xt * (sym.transpose() * g))).cwiseAbs().maxCoeff(),
            1e-12);
}

TEST(InputPropagationTest, UIsPOneToTheK) {
  const InputPropagation<double> p =
      MakeInputPropagation<double>(Step(), 2, 0.5, 4, {}, {});
  const Eigen::VectorXd ones = Eigen::VectorXd::Ones(kNodes);
  const Eigen::VectorXd u = Step() * (Step() * ones);
  EXPECT_LT((p.u_minus_one - (u.array() - 1).matrix()).cwiseAbs().maxCoeff(),
            1e-15);
  EXPECT_EQ(p.scale.size(), 0);
  EXPECT_EQ(p.offset, Eigen::VectorXd::Constant(4, 0.5));
}

// The deferred first layer against the dense path (the input formed, then
// the dense Forward and Backward), both graph networks, one and two layers.
TEST(GnnPropagatedInputTest, GivesTheDensePathsOutputsAndGradients) {
  const Graph g = SmallGraph();
  const GraphOperators<double> ops = BuildGraphOperators<double>(g);
  const int d = 7;
  for (GnnKind kind : {GnnKind::kGcn, GnnKind::kSage}) {
    for (int layers : {1, 2}) {
      for (const Case& k : kCases) {
        SCOPED_TRACE(::testing::Message()
                     << "sage " << (kind == GnnKind::kSage) << " layers "
                     << layers << " fill " << k.fill << " steps " << k.steps
                     << " std " << k.standardize);
        const Mat<double> delta = SparseDelta(d, 21);
        std::vector<double> mean, scale;
        const Mat<double> dense_x =
            DenseInput(delta, k.fill, k.steps, k.standardize, &mean, &scale);
        const SparseInput<double> sx(
            delta.sparseView(),
            MakeInputPropagation<double>(Step(), k.steps, k.fill, d, mean,
                                         scale));
        const GnnConfig c{kind, d, 4, 3, layers, 0.3, Activation::kSelu};
        PublicRandom r1(3), r2(3);
        Gnn<double> dense(c, &ops, r1), deferred(c, &ops, r2);
        PublicRandom d1(9), d2(9);
        const Mat<double> out_dense = dense.Forward(dense_x, true, &d1);
        const Mat<double> out_deferred = deferred.Forward(sx, true, &d2);
        EXPECT_LT((out_dense - out_deferred).cwiseAbs().maxCoeff(), 1e-12);
        const Mat<double> r = RandomMatrix(kNodes, 3, 5);
        dense.Backward(r);
        deferred.Backward(r);
        const auto pd = dense.Params(), pp = deferred.Params();
        ASSERT_EQ(pd.size(), pp.size());
        for (size_t i = 0; i < pd.size(); ++i) {
          EXPECT_LT((pd[i]->grad - pp[i]->grad).cwiseAbs().maxCoeff(), 1e-12)
              << "param " << i;
        }
        EXPECT_LT((dense.Forward(dense_x, false, nullptr) -
                   deferred.Forward(sx, false, nullptr))
                      .cwiseAbs()
                      .maxCoeff(),
                  1e-12);
      }
    }
  }
}

// In float, as training runs: the same within float rounding.
TEST(GnnPropagatedInputTest, FloatMatchesTheDensePathWithinRounding) {
  const Graph g = SmallGraph();
  const GraphOperators<float> ops = BuildGraphOperators<float>(g);
  const int d = 7;
  for (GnnKind kind : {GnnKind::kGcn, GnnKind::kSage}) {
    const Mat<double> delta = SparseDelta(d, 31);
    std::vector<double> mean, scale;
    const Mat<float> dense_x =
        DenseInput(delta, 0.5, 3, true, &mean, &scale).cast<float>();
    const SparseInput<float> sx(
        SpMat<float>(delta.cast<float>().sparseView()),
        MakeInputPropagation<float>(Step().cast<float>(), 3, 0.5, d, mean,
                                    scale));
    const GnnConfig c{kind, d, 4, 3, 2, 0.0, Activation::kSelu};
    PublicRandom r1(3), r2(3);
    Gnn<float> dense(c, &ops, r1), deferred(c, &ops, r2);
    const Mat<float> a = dense.Forward(dense_x, true, nullptr);
    const Mat<float> b = deferred.Forward(sx, true, nullptr);
    EXPECT_LT((a - b).cwiseAbs().maxCoeff(), 1e-5 * (1 + a.cwiseAbs().maxCoeff()));
    const Mat<float> r = RandomMatrix(kNodes, 3, 5).cast<float>();
    dense.Backward(r);
    deferred.Backward(r);
    const auto pd = dense.Params(), pp = deferred.Params();
    for (size_t i = 0; i < pd.size(); ++i) {
      EXPECT_LT((pd[i]->grad - pp[i]->grad).cwiseAbs().maxCoeff(),
                1e-5 * (1 + pd[i]->grad.cwiseAbs().maxCoeff()))
          << "param " << i;
    }
  }
}

// Finite differences through the deferred layer, with input dropout (which
// masks Delta's stored values before P^K).
TEST(GnnPropagatedInputTest, GradientsMatchFiniteDifferences) {
  const Graph g = SmallGraph();
  const GraphOperators<double> ops = BuildGraphOperators<double>(g);
  const int d = 7;
  for (GnnKind kind : {GnnKind::kGcn, GnnKind::kSage}) {
    for (double input_dropout : {0.0, 0.5}) {
      SCOPED_TRACE(::testing::Message() << "sage " << (kind == GnnKind::kSage)
                                        << " input dropout " << input_dropout);
      const Mat<double> delta = SparseDelta(d, 41);
      std::vector<double> mean, scale;
      DenseInput(delta, 0.5, 2, true, &mean, &scale);
      const SparseInput<double> sx(
          delta.sparseView(),
          MakeInputPropagation<double>(Step(), 2, 0.5, d, mean, scale));
      PublicRandom init(3);
      Gnn<double> gnn(
          {kind, d, 4, 3, 2, 0.3, Activation::kSelu, input_dropout}, &ops,
          init);
      PublicRandom fill(42);
      for (Param<double>* p : gnn.Params()) FillUniform(p->value, 1.0, fill);
      const Mat<double> r = RandomMatrix(kNodes, 3, 99);
      auto loss = [&] {
        PublicRandom rng(7);
        return gnn.Forward(sx, true, &rng).cwiseProduct(r).sum();
      };
      loss();
      gnn.Backward(r);
      std::vector<Mat<double>> grads;
      for (Param<double>* p : gnn.Params()) grads.push_back(p->grad);
      int i = 0;
      for (Param<double>* p : gnn.Params()) {
        EXPECT_EQ(CheckGradient(&p->value, grads[i], loss), "")
            << "param " << i;
        ++i;
      }
    }
  }
}

}  // namespace
}  // namespace ldpgraph::training
