#include "server/training/models.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "server/training/gradient_check.h"
#include "server/training/trainer.h"

namespace ldpgraph::training {
namespace {

Mat<double> RandomMatrix(int rows, int cols, uint64_t seed) {
  PublicRandom rng(seed);
  Mat<double> m(rows, cols);
  FillUniform(m, 1.0, rng);
  return m;
}

// L = sum(output .* R): dL/doutput = R. Checks every parameter's gradient
// and the input gradient of `model` by finite differences. Dropout draws from
// a generator re-seeded before every forward pass, so all passes see the same
// mask.
template <typename Model>
void ExpectGradientsMatch(Model& model, Mat<double> x, bool training) {
  // Random biases too: with zero biases a layer behind dead ReLUs sits
  // exactly on the kink, where the derivative is undefined.
  PublicRandom init(42);
  for (Param<double>* p : model.Params()) FillUniform(p->value, 1.0, init);
  const Mat<double> r = RandomMatrix(
      x.rows(), static_cast<int>(model.Forward(x, false, nullptr).cols()), 99);
  auto loss = [&] {
    PublicRandom rng(7);
    return model.Forward(x, training, &rng).cwiseProduct(r).sum();
  };
  loss();
  Mat<double> d_x;
  model.Backward(r, &d_x);
  std::vector<Mat<double>> grads;
  for (Param<double>* p : model.Params()) grads.push_back(p->grad);
  int i = 0;
  for (Param<double>* p : model.Params()) {
    EXPECT_EQ(CheckGradient(&p->value, grads[i], loss), "") << "param " << i;
    ++i;
  }
  EXPECT_EQ(CheckGradient(&x, d_x, loss), "") << "input";
}

TEST(MlpTest, GradientsMatchFiniteDifferences) {
  for (Activation a : {Activation::kRelu, Activation::kSelu}) {
    for (int layers : {1, 2, 3}) {
      PublicRandom rng(1);
      Mlp<double> mlp({5, 4, 3, layers, 0.0, a}, rng);  // no dropout
      SCOPED_TRACE(::testing::Message() << "layers " << layers);
      ExpectGradientsMatch(mlp, RandomMatrix(6, 5, 2), /*training=*/true);
    }
  }
}

TEST(MlpTest, GradientsMatchWithDropout) {
  PublicRandom rng(1);
  Mlp<double> mlp({5, 8, 3, 2, 0.4, Activation::kRelu, 0.3}, rng);
  ExpectGradientsMatch(mlp, RandomMatrix(6, 5, 3), /*training=*/true);
}

TEST(MlpTest, DropoutOnlyInTrainingAndUnbiased) {
  PublicRandom rng(1);
  Mlp<double> mlp({200, 4, 2, 1, 0.0, Activation::kRelu, 0.5}, rng);
  const Mat<double> x = Mat<double>::Ones(50, 200);
  const Mat<double> eval1 = mlp.Forward(x, false, nullptr);
  const Mat<double> eval2 = mlp.Forward(x, false, nullptr);
  EXPECT_EQ(eval1, eval2);
  PublicRandom drop(5);
  const Mat<double> train = mlp.Forward(x, true, &drop);
  EXPECT_NE(train, eval1);
  // Inverted dropout keeps the expected pre-activation: averaged over many
  // draws, the training output is the inference output.
  Mat<double> mean = Mat<double>::Zero(x.rows(), 2);
  const int draws = 200;
  for (int i = 0; i < draws; ++i) mean += mlp.Forward(x, true, &drop);
  mean /= draws;
  EXPECT_NEAR(mean.mean(), eval1.mean(), 0.02 * std::abs(eval1.mean()) + 0.01);
}

TEST(MlpTest, ConfigValidation) {
  EXPECT_TRUE(ValidateMlpConfig({5, 4, 3, 2, 0.5}).ok());
  EXPECT_FALSE(ValidateMlpConfig({0, 4, 3, 2, 0.5}).ok());
  EXPECT_FALSE(ValidateMlpConfig({5, 4, 0, 2, 0.5}).ok());
  EXPECT_FALSE(ValidateMlpConfig({5, 0, 3, 2, 0.5}).ok());
  EXPECT_TRUE(ValidateMlpConfig({5, 0, 3, 1, 0.5}).ok());  // no hidden layer
  EXPECT_FALSE(ValidateMlpConfig({5, 4, 3, 0, 0.5}).ok());
  auto s = ValidateMlpConfig({5, 4, 3, 2, 1.0});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("dropout"), std::string::npos);
  s = ValidateMlpConfig({5, 4, 3, 2, 0.5, Activation::kRelu, -0.1});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("input dropout"), std::string::npos);
}

// 0-1, 1-2, 2-0, 2-3, 3-4; node 5 isolated; a self loop on 4.
Graph SmallGraph() {
  return *Graph::FromEdges(6, {{0, 1}, {1, 2}, {0, 2}, {2, 3}, {3, 4}, {4, 4}},
                           {.allow_self_loops = true});
}

TEST(GraphOperatorsTest, MatchDefinitions) {
  const Graph g = SmallGraph();
  GraphOperators<double> ops = BuildGraphOperators<double>(g);
  const Eigen::MatrixXd gcn = Eigen::MatrixXd(ops.gcn);
  // D~ = deg + 1 except node 4, whose stored self loop is its added one:
  // degrees 2,2,3,2,2(3 and itself),0 -> D~ 3,3,4,3,2,1.
  EXPECT_NEAR(gcn(0, 1), 1.0 / 3.0, 1e-12);
  EXPECT_NEAR(gcn(2, 3), 1.0 / std::sqrt(12.0), 1e-12);
  EXPECT_NEAR(gcn(4, 4), 0.5, 1e-12);
  EXPECT_NEAR(gcn(5, 5), 1.0, 1e-12);
  EXPECT_NEAR((gcn - gcn.transpose()).cwiseAbs().maxCoeff(), 0.0, 1e-15);
  const Eigen::MatrixXd mean = Eigen::MatrixXd(ops.mean);
  EXPECT_NEAR(mean(2, 3), 1.0 / 3.0, 1e-12);
  EXPECT_NEAR(mean.row(5).sum(), 0.0, 1e-15);  // isolated: nothing to average
  for (int v = 0; v < 5; ++v) EXPECT_NEAR(mean.row(v).sum(), 1.0, 1e-12);
  EXPECT_NEAR((Eigen::MatrixXd(ops.mean_transpose) - mean.transpose())
                  .cwiseAbs()
                  .maxCoeff(),
              0.0, 1e-15);
}

TEST(GraphOperatorsTest, ByKindBuildsOnlyWhatTheModelReads) {
  const Graph g = SmallGraph();
  const GraphOperators<double> all = BuildGraphOperators<double>(g);
  const GraphOperators<double> gcn =
      BuildGraphOperators<double>(g, GnnKind::kGcn);
  const GraphOperators<double> sage =
      BuildGraphOperators<double>(g, GnnKind::kSage);
  EXPECT_EQ(Eigen::MatrixXd(gcn.gcn), Eigen::MatrixXd(all.gcn));
  EXPECT_EQ(gcn.mean.nonZeros(), 0);
  EXPECT_EQ(gcn.mean_transpose.nonZeros(), 0);
  EXPECT_EQ(Eigen::MatrixXd(sage.mean), Eigen::MatrixXd(all.mean));
  EXPECT_EQ(Eigen::MatrixXd(sage.mean_transpose),
            Eigen::MatrixXd(all.mean_transpose));
  EXPECT_EQ(sage.gcn.nonZeros(), 0);
}

TEST(GraphOperatorsTest, AllOneWeightsGiveTheUnweightedOperatorsExactly) {
  const Graph g = SmallGraph();
  const std::vector<Edge> edges = g.Edges();
  const Graph w = *Graph::FromWeightedEdges(
      6, edges, std::vector<double>(edges.size(), 1.0),
      {.allow_self_loops = true});
  ASSERT_TRUE(w.weighted());
  const GraphOperators<float> a = BuildGraphOperators<float>(g);
  const GraphOperators<float> b = BuildGraphOperators<float>(w);
  EXPECT_TRUE(Eigen::MatrixXf(a.gcn) == Eigen::MatrixXf(b.gcn));
  EXPECT_TRUE(Eigen::MatrixXf(a.mean) == Eigen::MatrixXf(b.mean));
  EXPECT_TRUE(Eigen::MatrixXf(a.mean_transpose) ==
              Eigen::MatrixXf(b.mean_transpose));
  EXPECT_TRUE(Eigen::MatrixXf(BuildSymmetricOperator<float>(g)) ==
              Eigen::MatrixXf(BuildSymmetricOperator<float>(w)));
}

TEST(GraphOperatorsTest, WeightedThreeNodePath) {
  // 0 -(2)- 1 -(0.5)- 2: weighted degrees 2, 2.5, 0.5; D~ 3, 3.5, 1.5.
  const Graph g = *Graph::FromWeightedEdges(3, {{0, 1}, {1, 2}}, {2.0, 0.5});
  const GraphOperators<double> ops = BuildGraphOperators<double>(g);
  const Eigen::MatrixXd gcn = Eigen::MatrixXd(ops.gcn);
  EXPECT_NEAR(gcn(0, 0), 1.0 / 3.0, 1e-15);
  EXPECT_NEAR(gcn(1, 1), 1.0 / 3.5, 1e-15);
  EXPECT_NEAR(gcn(2, 2), 1.0 / 1.5, 1e-15);
  EXPECT_NEAR(gcn(0, 1), 2.0 / std::sqrt(3.0 * 3.5), 1e-15);
  EXPECT_NEAR(gcn(1, 0), 2.0 / std::sqrt(3.0 * 3.5), 1e-15);
  EXPECT_NEAR(gcn(1, 2), 0.5 / std::sqrt(3.5 * 1.5), 1e-15);
  EXPECT_EQ(gcn(0, 2), 0.0);
  const Eigen::MatrixXd mean = Eigen::MatrixXd(ops.mean);
  EXPECT_NEAR(mean(0, 1), 1.0, 1e-15);
  EXPECT_NEAR(mean(1, 0), 0.8, 1e-15);
  EXPECT_NEAR(mean(1, 2), 0.2, 1e-15);
  EXPECT_NEAR(mean(2, 1), 1.0, 1e-15);
  EXPECT_EQ(mean(0, 0), 0.0);
  const Eigen::MatrixXd sym = Eigen::MatrixXd(BuildSymmetricOperator<double>(g));
  EXPECT_NEAR(sym(0, 1), 2.0 / std::sqrt(2.0 * 2.5), 1e-15);
  EXPECT_NEAR(sym(2, 1), 0.5 / std::sqrt(2.5 * 0.5), 1e-15);
  EXPECT_EQ(sym(0, 0), 0.0);
}

TEST(GnnTest, GradientsMatchFiniteDifferences) {
  const Graph g = SmallGraph();
  GraphOperators<double> ops = BuildGraphOperators<double>(g);
  for (GnnKind kind : {GnnKind::kGcn, GnnKind::kSage}) {
    for (Activation a : {Activation::kRelu, Activation::kSelu}) {
      for (double dropout : {0.0, 0.3}) {
        // Input 4 < hidden 5 > output 3, and input 7 > hidden 2 < output 3:
        // GraphSAGE aggregates before W_neigh in some layers, after in
        // others.
        for (int input : {4, 7}) {
          const int hidden = input == 4 ? 5 : 2;
          PublicRandom rng(3);
          Gnn<double> gnn({kind, input, hidden, 3, 2, dropout, a, dropout},
                          &ops, rng);
          SCOPED_TRACE(::testing::Message()
                       << "sage " << (kind == GnnKind::kSage) << " dropout "
                       << dropout << " input " << input);
          ExpectGradientsMatch(gnn, RandomMatrix(6, input, 4), dropout > 0);
        }
      }
    }
  }
}

// Features with most entries zero (about a third stored), as a dense
// matrix and as the sparse input holding the same values.
Mat<double> SparseFeatures(int rows, int cols, uint64_t seed) {
  Mat<double> x = RandomMatrix(rows, cols, seed);
  PublicRandom rng(seed + 1);
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    if (rng.Next64() % 3 != 0) x.data()[i] = 0.0;
  }
  return x;
}

// The standardisation of x's columns (population deviation, scale 0 for a
// constant column) and X' formed densely.
Mat<double> Standardised(const Mat<double>& x, std::vector<double>* mean,
                         std::vector<double>* scale) {
  mean->assign(x.cols(), 0.0);
  scale->assign(x.cols(), 0.0);
  Mat<double> out(x.rows(), x.cols());
  for (Eigen::Index j = 0; j < x.cols(); ++j) {
    const double mu = x.col(j).mean();
    const double sd =
        std::sqrt((x.col(j).array() - mu).square().sum() / x.rows());
    (*mean)[j] = mu;
    (*scale)[j] = sd > 0 ? 1.0 / sd : 0.0;
    out.col(j) = (x.col(j).array() - mu) * (*scale)[j];
  }
  return out;
}

// PrivGE's classifier on sparse Z: the sparse Forward through the folded
// standardisation is the dense Forward on X' = (Z - 1 mu^T) D, outputs and
// gradients, in training (hidden dropout drawing the same masks) and
// inference, over all rows or a mini-batch of them; and without a
// propagation, the dense Forward on Z itself.
TEST(MlpTest, SparseInputGivesTheDenseOutputsAndGradients) {
  Mat<double> z = SparseFeatures(40, 7, 21);
  z.col(3).setZero();  // a constant column: scale 0
  z.col(5).array() += 0.25;  // an offset column, no zero
  std::vector<double> mean, scale;
  const Mat<double> standardised = Standardised(z, &mean, &scale);
  ASSERT_EQ(scale[3], 0.0);
  std::vector<uint32_t> batch = {3, 8, 9, 17, 30, 39};
  Mat<double> z_batch(batch.size(), 7), x_batch(batch.size(), 7);
  for (size_t i = 0; i < batch.size(); ++i) {
    z_batch.row(i) = z.row(batch[i]);
    x_batch.row(i) = standardised.row(batch[i]);
  }
  struct Case {
    const char* what;
    Mat<double> dense;
    SparseInput<double> sparse;
  };
  std::vector<Case> cases;
  cases.push_back({"all rows", standardised,
                   SparseInput<double>(z.sparseView(),
                                       ColumnStandardisation<double>(40, mean,
                                                               scale))});
  cases.push_back({"a batch", x_batch,
                   SparseInput<double>(
                       z_batch.sparseView(),
                       ColumnStandardisation<double>(z_batch.rows(), mean, scale))});
  cases.push_back({"no standardisation", z, SparseInput<double>(z.sparseView())});
  for (const Case& c : cases) {
    for (int layers : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << c.what << ", layers " << layers);
      const MlpConfig config{7, 5, 3, layers, 0.3, Activation::kRelu};
      PublicRandom r1(3), r2(3);
      Mlp<double> dense(config, r1), sparse(config, r2);
      PublicRandom d1(9), d2(9);
      const Mat<double> out_dense = dense.Forward(c.dense, true, &d1);
      const Mat<double> out_sparse = sparse.Forward(c.sparse, true, &d2);
      EXPECT_LT((out_dense - out_sparse).cwiseAbs().maxCoeff(), 1e-12);
      const Mat<double> r = RandomMatrix(c.dense.rows(), 3, 5);
      dense.Backward(r);
      sparse.Backward(r);
      const auto pd = dense.Params(), ps = sparse.Params();
      ASSERT_EQ(pd.size(), ps.size());
      for (size_t i = 0; i < pd.size(); ++i) {
        EXPECT_LT((pd[i]->grad - ps[i]->grad).cwiseAbs().maxCoeff(), 1e-12)
            << "param " << i;
      }
      EXPECT_LT((dense.Forward(c.dense, false, nullptr) -
                 sparse.Forward(c.sparse, false, nullptr))
                    .cwiseAbs()
                    .maxCoeff(),
                1e-12);
    }
  }
}

// The same in float, the precision the trainer runs in: the folded map
// rounds in another order, within float tolerance of the dense path.
TEST(MlpTest, SparseStandardisedInputAgreesInFloat) {
  Mat<double> z = SparseFeatures(300, 20, 23) * 1e-3;  // PPR's magnitudes
  std::vector<double> mean, scale;
  const Mat<float> x = Standardised(z, &mean, &scale).cast<float>();
  const SparseInput<float> sx(z.cast<float>().sparseView(),
                              ColumnStandardisation<float>(300, mean, scale));
  const MlpConfig config{20, 16, 4, 2, 0.5, Activation::kRelu};
  PublicRandom r1(3), r2(3);
  Mlp<float> dense(config, r1), sparse(config, r2);
  PublicRandom d1(9), d2(9);
  const Mat<float> out_dense = dense.Forward(x, true, &d1);
  const Mat<float> out_sparse = sparse.Forward(sx, true, &d2);
  EXPECT_LT((out_dense - out_sparse).cwiseAbs().maxCoeff(),
            1e-4f * out_dense.cwiseAbs().maxCoeff());
  const Mat<float> r = RandomMatrix(300, 4, 5).cast<float>();
  dense.Backward(r);
  sparse.Backward(r);
  const auto pd = dense.Params(), ps = sparse.Params();
  for (size_t i = 0; i < pd.size(); ++i) {
    EXPECT_LT((pd[i]->grad - ps[i]->grad).cwiseAbs().maxCoeff(),
              1e-4f * (1.0f + pd[i]->grad.cwiseAbs().maxCoeff()))
        << "param " << i;
  }
}

TEST(GnnTest, SparseInputGivesTheDenseOutputsAndGradients) {
  const Graph g = SmallGraph();
  GraphOperators<double> ops = BuildGraphOperators<double>(g);
  for (GnnKind kind : {GnnKind::kGcn, GnnKind::kSage}) {
    // Input 4 < hidden 5 and input 7 > hidden 2: both GraphSAGE orders on
    // the dense path; one and two layers.
    for (int input : {4, 7}) {
      for (int layers : {1, 2}) {
        SCOPED_TRACE(::testing::Message()
                     << "sage " << (kind == GnnKind::kSage) << " input "
                     << input << " layers " << layers);
        const int hidden = input == 4 ? 5 : 2;
        const Mat<double> x = SparseFeatures(6, input, 11);
        const SparseInput<double> sx(x.sparseView());
        ASSERT_LT(sx.x.nonZeros(), x.size() / 2);
        PublicRandom r1(3), r2(3);
        const GnnConfig c{kind, input, hidden, 3, layers, 0.3,
                          Activation::kSelu};
        Gnn<double> dense(c, &ops, r1), sparse(c, &ops, r2);
        PublicRandom d1(9), d2(9);
        const Mat<double> out_dense = dense.Forward(x, true, &d1);
        const Mat<double> out_sparse = sparse.Forward(sx, true, &d2);
        EXPECT_LT((out_dense - out_sparse).cwiseAbs().maxCoeff(), 1e-12);
        const Mat<double> r = RandomMatrix(6, 3, 5);
        dense.Backward(r);
        sparse.Backward(r);
        const auto pd = dense.Params(), ps = sparse.Params();
        ASSERT_EQ(pd.size(), ps.size());
        for (size_t i = 0; i < pd.size(); ++i) {
          EXPECT_LT((pd[i]->grad - ps[i]->grad).cwiseAbs().maxCoeff(), 1e-12)
              << "param " << i;
        }
        EXPECT_LT((dense.Forward(x, false, nullptr) -
                   sparse.Forward(sx, false, nullptr))
                      .cwiseAbs()
                      .maxCoeff(),
                  1e-12);
      }
    }
  }
}

TEST(GnnTest, SparseInputGradientsMatchFiniteDifferencesWithInputDropout) {
  // Input dropout masks the stored values: the parameter gradients still
  // follow the loss of the same masked forward pass.
  const Graph g = SmallGraph();
  GraphOperators<double> ops = BuildGraphOperators<double>(g);
  for (GnnKind kind : {GnnKind::kGcn, GnnKind::kSage}) {
    PublicRandom init(3);
    Gnn<double> gnn({kind, 7, 4, 3, 2, 0.3, Activation::kSelu, 0.5}, &ops,
                    init);
    PublicRandom fill(42);
    for (Param<double>* p : gnn.Params()) FillUniform(p->value, 1.0, fill);
    const SparseInput<double> sx(SparseFeatures(6, 7, 12).sparseView());
    const Mat<double> r = RandomMatrix(6, 3, 99);
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
      EXPECT_EQ(CheckGradient(&p->value, grads[i], loss), "") << "param " << i;
      ++i;
    }
    if (kind == GnnKind::kGcn) continue;
    // One GraphSAGE layer with W_self = I, W_neigh = 0, no bias shows the
    // masked input: zeros stay zero, some stored values are dropped, the
    // others doubled (p = 0.5).
    Gnn<double> probe({kind, 7, 7, 7, 1, 0.0, Activation::kSelu, 0.5}, &ops,
                      init);
    probe.Params()[0]->value = Mat<double>::Identity(7, 7);
    probe.Params()[1]->value.setZero();
    probe.Params()[2]->value.setZero();
    PublicRandom rng(7);
    const Mat<double> seen = probe.Forward(sx, true, &rng);
    const Mat<double> x = sx.x;
    int dropped = 0, kept = 0;
    for (Eigen::Index k = 0; k < x.size(); ++k) {
      if (x.data()[k] == 0) {
        EXPECT_EQ(seen.data()[k], 0.0);
      } else if (seen.data()[k] == 0) {
        ++dropped;
      } else {
        EXPECT_NEAR(seen.data()[k], 2 * x.data()[k], 1e-12);
        ++kept;
      }
    }
    EXPECT_GT(dropped, 0);
    EXPECT_GT(kept, 0);
  }
}

TEST(GnnTest, TorchInitDrawsWeightsAndBiasWithinOneOverRootFanIn) {
  const Graph g = SmallGraph();
  GraphOperators<double> ops = BuildGraphOperators<double>(g);
  PublicRandom rng(5);
  GnnConfig c{GnnKind::kSage, 400, 16, 3, 2, 0.5, Activation::kSelu};
  c.init = WeightInit::kTorch;
  Gnn<double> torch_init(c, &ops, rng);
  const auto p = torch_init.Params();  // W_self, b, W_neigh per layer
  for (int l = 0; l < 2; ++l) {
    const double bound = 1.0 / std::sqrt(l == 0 ? 400.0 : 16.0);
    for (int k : {0, 1, 2}) {
      const Mat<double>& v = p[3 * l + k]->value;
      EXPECT_LE(v.cwiseAbs().maxCoeff(), bound) << l << " " << k;
      // Spread over the interval, not a narrower law (the weights: dozens
      // of draws; a bias has 3 or 16).
      if (k != 1) {
        EXPECT_GT(v.cwiseAbs().maxCoeff(), 0.8 * bound) << l << " " << k;
      }
    }
  }
  c.init = WeightInit::kGlorot;
  Gnn<double> glorot(c, &ops, rng);
  EXPECT_EQ(glorot.Params()[1]->value.cwiseAbs().maxCoeff(), 0.0);
  EXPECT_GT(glorot.Params()[0]->value.cwiseAbs().maxCoeff(),
            1.0 / std::sqrt(400.0));  // sqrt(6 / 416) is wider
}

TEST(GnnTest, GcnLayerIsTheNormalisedAggregation) {
  // One linear layer with identity weights and zero bias is exactly
  // A_gcn x; a GraphSAGE layer with W_self = 0, W_neigh = I is the mean.
  const Graph g = SmallGraph();
  GraphOperators<double> ops = BuildGraphOperators<double>(g);
  PublicRandom rng(1);
  Gnn<double> gcn({GnnKind::kGcn, 3, 0, 3, 1, 0.0}, &ops, rng);
  gcn.Params()[0]->value = Mat<double>::Identity(3, 3);
  const Mat<double> x = RandomMatrix(6, 3, 8);
  const Mat<double> expected = ops.gcn * x;
  EXPECT_LT((gcn.Forward(x, false, nullptr) - expected).cwiseAbs().maxCoeff(),
            1e-12);
  Gnn<double> sage({GnnKind::kSage, 3, 0, 3, 1, 0.0}, &ops, rng);
  sage.Params()[0]->value.setZero();
  sage.Params()[2]->value = Mat<double>::Identity(3, 3);
  const Mat<double> mean = ops.mean * x;
  EXPECT_LT((sage.Forward(x, false, nullptr) - mean).cwiseAbs().maxCoeff(),
            1e-12);
}

TEST(AdamTest, FirstStepMovesEachWeightByTheLearningRate) {
  Param<double> p;
  p.Resize(1, 3);
  p.value << 1, 2, 3;
  p.grad << 0.5, -2, 1e-3;
  Adam<double> adam({&p}, {.learning_rate = 0.1});
  adam.Step();
  // m^ = g, v^ = g^2: the step is lr * g / (|g| + eps) = lr * sign(g).
  EXPECT_NEAR(p.value(0, 0), 0.9, 1e-6);
  EXPECT_NEAR(p.value(0, 1), 2.1, 1e-6);
  EXPECT_NEAR(p.value(0, 2), 2.9, 1e-4);
}

TEST(AdamTest, WeightDecayAddsToTheGradient) {
  Param<double> p;
  p.Resize(1, 1);
  p.value << 2;
  p.grad << 0;
  Adam<double> adam({&p}, {.learning_rate = 0.1, .weight_decay = 0.5});
  adam.Step();
  EXPECT_NEAR(p.value(0, 0), 1.9, 1e-6);  // the decay gradient 1 is positive
}

TEST(AdamTest, MinimisesAQuadratic) {
  Param<double> p;
  p.Resize(1, 2);
  p.value << 5, -3;
  Adam<double> adam({&p}, {.learning_rate = 0.05});
  for (int i = 0; i < 2000; ++i) {
    p.grad = 2 * (p.value.array() - 1.0).matrix();  // (w - 1)^2
    adam.Step();
  }
  EXPECT_NEAR(p.value(0, 0), 1.0, 1e-3);
  EXPECT_NEAR(p.value(0, 1), 1.0, 1e-3);
}

// Decay on a plateau: after decay_patience epochs without a better score
// the loop goes back to the best parameters and the step size halves; the
// patience that stops it counts from the last decay.
TEST(TrainWithEarlyStoppingTest, DecaysReturnToTheBestAndHalveTheStep) {
  Param<double> p;
  p.Resize(1, 1);
  // Epoch 2 is the best until epoch 6; then nothing better.
  const std::vector<double> scores = {0.1, 0.9, 0.5, 0.5, 0.5, 0.95, 0.5,
                                      0.5, 0.5, 0.5, 0.5, 0.5};
  int epoch = 0;
  std::vector<double> before;  // the value each epoch's step started from
  auto step = [&] {
    before.push_back(p.value(0, 0));
    p.grad << -1;  // Adam moves the value up by the step size
    return 0.0;
  };
  auto validate = [&] { return Validation{scores[epoch++], 1.0}; };
  TrainOptions o;
  o.max_epochs = 12;
  o.patience = 2;
  o.adam.learning_rate = 1;
  o.decay_patience = 1;
  o.decay_factor = 0.5;
  o.max_decays = 2;
  TrainReport r = TrainWithEarlyStopping<double>({&p}, o, step, validate);
  // Epoch 3 is stale: decay 1, back to epoch 2's value (2), step 0.5.
  // Epoch 4 is stale: decay 2, back to 2 again, step 0.25. Epochs 5 and 6
  // then step 0.25 each; 6 is the best; 7 and 8 stale: stop (no decays left).
  ASSERT_EQ(before.size(), 8u);
  EXPECT_NEAR(before[3], 2.0, 1e-6);
  EXPECT_NEAR(before[4], 2.0, 1e-6);
  EXPECT_NEAR(before[4] - before[3], 0.0, 1e-6);
  EXPECT_NEAR(before[5] - before[4], 0.25, 1e-6);
  EXPECT_EQ(r.decays, 2);
  EXPECT_EQ(r.best_epoch, 6);
  EXPECT_EQ(r.epochs, 8);
  EXPECT_NEAR(p.value(0, 0), 2.5, 1e-6);
}

TEST(TrainWithEarlyStoppingTest, StopsAfterPatienceAndRestoresTheBest) {
  Param<double> p;
  p.Resize(1, 1);
  const std::vector<double> scores = {0.1, 0.5, 0.9, 0.4, 0.9, 0.3, 0.2, 0.8};
  int epoch = 0;
  std::vector<double> values;
  auto step = [&] {
    p.grad << -1;  // every step moves the value up
    return 0.0;
  };
  auto validate = [&] {
    values.push_back(p.value(0, 0));
    // Equal scores are broken by the loss: epoch 5 ties epoch 3 with a
    // higher loss, so epoch 3 stays the best.
    const double s = scores[epoch];
    const double loss = epoch == 4 ? 2.0 : 1.0;
    ++epoch;
    return Validation{s, loss};
  };
  TrainOptions o;
  o.max_epochs = 8;
  o.patience = 3;
  o.adam.learning_rate = 1;
  TrainReport r = TrainWithEarlyStopping<double>({&p}, o, step, validate);
  EXPECT_EQ(r.best_epoch, 3);
  EXPECT_EQ(r.epochs, 6);  // epochs 4, 5, 6 brought nothing better
  EXPECT_DOUBLE_EQ(r.best_validation, 0.9);
  EXPECT_DOUBLE_EQ(p.value(0, 0), values[2]);
}

}  // namespace
}  // namespace ldpgraph::training
