#include "server/training/losses.h"

#include <cmath>
#include <numeric>

#include "gtest/gtest.h"
#include "server/training/gradient_check.h"

namespace ldpgraph::training {
namespace {

Mat<double> RandomMatrix(int rows, int cols, uint64_t seed, double scale = 2) {
  PublicRandom rng(seed);
  Mat<double> m(rows, cols);
  FillUniform(m, scale, rng);
  return m;
}

template <typename LossT>
std::string CheckLoss(const LossT& loss, Mat<double> input) {
  Mat<double> grad;
  loss(input, &grad);
  return CheckGradient(&input, grad, [&] { return loss(input, nullptr); });
}

TEST(SoftmaxCrossEntropyTest, GradientMatchesFiniteDifferences) {
  SoftmaxCrossEntropy<double> loss({0, 2, 1, 2, 3});
  EXPECT_EQ(CheckLoss(loss, RandomMatrix(5, 4, 1)), "");
}

TEST(SoftmaxCrossEntropyTest, KnownValues) {
  // Uniform logits over c classes: loss log(c) whatever the label.
  SoftmaxCrossEntropy<double> loss({1, 0});
  Mat<double> z = Mat<double>::Zero(2, 4);
  EXPECT_NEAR(loss(z, nullptr), std::log(4.0), 1e-12);
  // A confident right answer costs almost nothing; a confident wrong one
  // costs about the margin.
  z << 0, 50, 0, 0, 0, 50, 0, 0;
  Mat<double> g;
  EXPECT_NEAR(loss(z, &g), 50.0 / 2, 1e-9);
  EXPECT_NEAR(g(0, 1), 0.0, 1e-12);
  EXPECT_NEAR(g(1, 0), -0.5, 1e-12);
}

TEST(SoftmaxCrossEntropyTest, StableForHugeLogits) {
  SoftmaxCrossEntropy<double> loss({0});
  Mat<double> z(1, 2);
  z << 1e4, -1e4;
  Mat<double> g;
  EXPECT_NEAR(loss(z, &g), 0.0, 1e-12);
  EXPECT_TRUE(g.allFinite());
}

Mat<double> RrTransition(int c, double eps) {
  const double keep = std::exp(eps) / (std::exp(eps) + c - 1);
  Mat<double> t = Mat<double>::Constant(c, c, (1 - keep) / (c - 1));
  t.diagonal().setConstant(keep);
  return t;
}

TEST(ForwardCorrectedCrossEntropyTest, GradientMatchesFiniteDifferences) {
  ForwardCorrectedCrossEntropy<double> loss({0, 2, 1, 2, 3, 3},
                                            RrTransition(4, 1.0));
  EXPECT_EQ(CheckLoss(loss, RandomMatrix(6, 4, 2)), "");
  // An asymmetric channel too.
  Mat<double> t(3, 3);
  t << 0.7, 0.2, 0.1, 0.1, 0.6, 0.3, 0.25, 0.25, 0.5;
  ForwardCorrectedCrossEntropy<double> loss2({2, 0, 1}, t);
  EXPECT_EQ(CheckLoss(loss2, RandomMatrix(3, 3, 3)), "");
}

TEST(ForwardCorrectedCrossEntropyTest, IdentityChannelIsCrossEntropy) {
  const Mat<double> z = RandomMatrix(4, 3, 4);
  const std::vector<int32_t> y = {0, 1, 2, 1};
  Mat<double> g1, g2;
  const double a = ForwardCorrectedCrossEntropy<double>(
      y, Mat<double>::Identity(3, 3))(z, &g1);
  const double b = SoftmaxCrossEntropy<double>(y)(z, &g2);
  EXPECT_NEAR(a, b, 1e-12);
  EXPECT_LT((g1 - g2).cwiseAbs().maxCoeff(), 1e-12);
}

TEST(ForwardCorrectedCrossEntropyTest, UninformativeChannelHasNoGradient) {
  // If every true label is reported uniformly, the observation says nothing.
  ForwardCorrectedCrossEntropy<double> loss(
      {0, 1}, Mat<double>::Constant(2, 2, 0.5));
  Mat<double> g;
  EXPECT_NEAR(loss(RandomMatrix(2, 2, 5), &g), std::log(2.0), 1e-12);
  EXPECT_LT(g.cwiseAbs().maxCoeff(), 1e-12);
}

// D^-1/2 A D^-1/2 of the path 0-1-2-3 plus the edge 1-3, by hand.
SpMat<double> SmallSymmetricOperator() {
  const int edges[][2] = {{0, 1}, {1, 2}, {2, 3}, {1, 3}};
  const double degree[] = {1, 3, 2, 2};
  std::vector<Eigen::Triplet<double, int64_t>> t;
  for (const auto& e : edges) {
    const double w = 1.0 / std::sqrt(degree[e[0]] * degree[e[1]]);
    t.emplace_back(e[0], e[1], w);
    t.emplace_back(e[1], e[0], w);
  }
  SpMat<double> a(4, 4);
  a.setFromTriplets(t.begin(), t.end());
  return a;
}

TEST(PropagatedForwardCorrectedCrossEntropyTest,
     GradientMatchesFiniteDifferences) {
  const SpMat<double> a = SmallSymmetricOperator();
  Mat<double> t(3, 3);
  t << 0.7, 0.2, 0.1, 0.1, 0.6, 0.3, 0.25, 0.25, 0.5;
  for (int steps : {0, 1, 2, 5}) {
    PropagatedForwardCorrectedCrossEntropy<double> loss(&a, steps, {0, 2, 3},
                                                        {1, 0, 2}, t);
    EXPECT_EQ(CheckLoss(loss, RandomMatrix(4, 3, 7 + steps)), "") << steps;
  }
}

TEST(PropagatedForwardCorrectedCrossEntropyTest, ZeroStepsIsForwardCorrection) {
  const SpMat<double> a = SmallSymmetricOperator();
  const Mat<double> t = RrTransition(3, 1.0);
  const Mat<double> z = RandomMatrix(4, 3, 11);
  PropagatedForwardCorrectedCrossEntropy<double> propagated(&a, 0, {1, 3},
                                                            {2, 0}, t);
  Mat<double> z_rows(2, 3);
  z_rows.row(0) = z.row(1);
  z_rows.row(1) = z.row(3);
  Mat<double> g1, g2;
  EXPECT_NEAR(propagated(z, &g1),
              ForwardCorrectedCrossEntropy<double>({2, 0}, t)(z_rows, &g2),
              1e-12);
  // Rows outside the training set get no gradient without propagation.
  EXPECT_LT(g1.row(0).cwiseAbs().maxCoeff(), 1e-15);
  EXPECT_LT((g1.row(1) - g2.row(0)).cwiseAbs().maxCoeff(), 1e-12);
}

TEST(PropagatedForwardCorrectedCrossEntropyTest, KnownValueOneStep) {
  // Two nodes joined by an edge (A = [[0, 1], [1, 0]]), identity channel,
  // equal logits: q = (1/2, 1/2) everywhere, s = q, r = softmax(q) =
  // (1/2, 1/2), so the loss is log 2 whatever the target, and node 1's
  // belief moves node 0's loss: the gradient reaches row 1 only.
  SpMat<double> a(2, 2);
  std::vector<Eigen::Triplet<double, int64_t>> t = {{0, 1, 1.0}, {1, 0, 1.0}};
  a.setFromTriplets(t.begin(), t.end());
  PropagatedForwardCorrectedCrossEntropy<double> loss(
      &a, 1, {0}, {0}, Mat<double>::Identity(2, 2));
  Mat<double> g;
  EXPECT_NEAR(loss(Mat<double>::Zero(2, 2), &g), std::log(2.0), 1e-12);
  EXPECT_LT(g.row(0).cwiseAbs().maxCoeff(), 1e-15);
  EXPECT_GT(g.row(1).cwiseAbs().maxCoeff(), 1e-3);
  // Raising node 1's logit for class 0 lowers node 0's loss.
  EXPECT_LT(g(1, 0), 0);
}

TEST(LogisticLossTest, GradientAndKnownValues) {
  LogisticLoss<double> loss({1, 0, 1, 0});
  EXPECT_EQ(CheckLoss(loss, RandomMatrix(4, 1, 6, 5)), "");
  Mat<double> s = Mat<double>::Zero(4, 1);
  EXPECT_NEAR(loss(s, nullptr), std::log(2.0), 1e-12);
  s << 800, -800, 800, -800;  // overflow-safe and exactly right
  EXPECT_NEAR(loss(s, nullptr), 0.0, 1e-12);
}

TEST(PairwiseAucLossTest, GradientMatchesFiniteDifferences) {
  PairwiseAucLoss<double> loss({2, 0, 1});
  EXPECT_EQ(CheckLoss(loss, RandomMatrix(6, 1, 7)), "");
}

TEST(PairwiseAucLossTest, KnownValuesFollowThePairing) {
  // Positives 3, 1; negatives 0, 1. Pairing identity: (1-(3-0))^2 = 4,
  // (1-(1-1))^2 = 1, mean 2.5. Swapped: (1-(3-1))^2 = 1, (1-(1-0))^2 = 0.
  Mat<double> s(4, 1);
  s << 3, 1, 0, 1;
  EXPECT_NEAR(PairwiseAucLoss<double>({0, 1})(s, nullptr), 2.5, 1e-12);
  EXPECT_NEAR(PairwiseAucLoss<double>({1, 0})(s, nullptr), 0.5, 1e-12);
}

}  // namespace
}  // namespace ldpgraph::training
