#include "server/training/tasks.h"

#include <cmath>

#include "gtest/gtest.h"

namespace ldpgraph::training {
namespace {

// n nodes in `classes` clusters: node v is in class v % classes; its feature
// row is the class's centre plus uniform noise of width `noise`. Nodes of the
// same class form a ring, plus a few links across classes.
struct Toy {
  Mat<float> x;
  Graph graph;
  std::vector<int32_t> labels;
};

Toy MakeToy(int n, int classes, int d, double noise, uint64_t seed) {
  PublicRandom rng(seed);
  Toy t;
  Mat<double> centres(classes, d);
  FillUniform(centres, 1.0, rng);
  t.x.resize(n, d);
  std::vector<Edge> edges;
  for (int v = 0; v < n; ++v) {
    t.labels.push_back(v % classes);
    for (int j = 0; j < d; ++j) {
      t.x(v, j) = static_cast<float>(centres(v % classes, j) +
                                     noise * (2 * rng.UniformDouble() - 1));
    }
    if (v + classes < n) edges.push_back({NodeId(v), NodeId(v + classes)});
    if (v % 10 == 0 && v + 1 < n) edges.push_back({NodeId(v), NodeId(v + 1)});
  }
  t.graph = *Graph::FromEdges(n, edges);
  return t;
}

NodeTaskData Split(const Toy& t, int classes) {
  NodeTaskData d;
  d.features = &t.x;
  d.graph = &t.graph;
  d.classes = classes;
  // Half for training, a quarter each for validation and test, every class
  // in every part.
  for (uint32_t v = 0; v < t.labels.size(); ++v) {
    const uint32_t part = (v / classes) % 4;
    auto& list = part < 2 ? d.train : (part == 2 ? d.validation : d.test);
    list.push_back(v);
    (part < 2 ? d.train_targets
              : (part == 2 ? d.validation_targets : d.test_truth))
        .push_back(t.labels[v]);
  }
  return d;
}

NodeModelConfig Config(NodeModelKind kind) {
  NodeModelConfig c;
  c.kind = kind;
  c.hidden_dim = 16;
  c.train.max_epochs = 200;
  c.train.patience = 30;
  return c;
}

TEST(TrainNodeClassifierTest, EveryModelLearnsSeparableClasses) {
  const Toy t = MakeToy(400, 4, 8, 0.6, 1);
  const NodeTaskData d = Split(t, 4);
  for (NodeModelKind k :
       {NodeModelKind::kMlp, NodeModelKind::kGcn, NodeModelKind::kSage}) {
    auto r = TrainNodeClassifier(d, Config(k), 7);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_GT(r->test_accuracy, 0.95) << "model " << int(k);
    EXPECT_DOUBLE_EQ(r->test_accuracy, r->test_micro_f1);
    EXPECT_GE(r->training.best_epoch, 1);
    EXPECT_LE(r->training.epochs, 200);
  }
}

TEST(TrainNodeClassifierTest, ReproducibleBySeed) {
  const Toy t = MakeToy(200, 3, 6, 1.5, 2);
  const NodeTaskData d = Split(t, 3);
  for (NodeModelKind k : {NodeModelKind::kMlp, NodeModelKind::kGcn}) {
    auto a = TrainNodeClassifier(d, Config(k), 11);
    auto b = TrainNodeClassifier(d, Config(k), 11);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->test_accuracy, b->test_accuracy);
    EXPECT_EQ(a->training.best_epoch, b->training.best_epoch);
    EXPECT_EQ(a->training.best_validation, b->training.best_validation);
  }
}

// The layers split their rows into parts fixed by the row count (1,200
// nodes: 4 parts), so the thread count changes who computes a part, not the
// result: every logit is the same bit for bit.
TEST(TrainNodeClassifierTest, ResultDoesNotDependOnThreads) {
  const Toy t = MakeToy(1200, 3, 6, 1.5, 2);
  NodeTaskData d = Split(t, 3);
  d.keep_outputs = true;
  for (NodeModelKind k :
       {NodeModelKind::kMlp, NodeModelKind::kGcn, NodeModelKind::kSage}) {
    NodeModelConfig c = Config(k);
    c.train.max_epochs = 30;
    c.threads = 1;
    auto one = TrainNodeClassifier(d, c, 11);
    c.threads = 3;
    auto three = TrainNodeClassifier(d, c, 11);
    ASSERT_TRUE(one.ok() && three.ok());
    ASSERT_TRUE(one->outputs && three->outputs);
    EXPECT_TRUE(*one->outputs == *three->outputs) << int(k);
    EXPECT_EQ(one->training.best_epoch, three->training.best_epoch);
  }
}

TEST(TrainNodeClassifierTest, ForwardCorrectionLearnsThroughLabelNoise) {
  // Labels kept with probability 0.5 and otherwise moved to the next class
  // (a channel plain cross-entropy cannot undo: half the "class 1" examples
  // are class 0). The corrected loss recovers the true classes.
  const int c = 3;
  const Toy t = MakeToy(900, c, 6, 0.5, 3);
  NodeTaskData d = Split(t, c);
  PublicRandom rng(4);
  auto flip = [&](std::vector<int32_t>& y) {
    for (auto& l : y) {
      if (rng.Bernoulli(0.5)) l = (l + 1) % c;
    }
  };
  flip(d.train_targets);
  flip(d.validation_targets);
  Mat<float> t_matrix = Mat<float>::Zero(c, c);
  for (int a = 0; a < c; ++a) {
    t_matrix(a, a) = 0.5f;
    t_matrix(a, (a + 1) % c) = 0.5f;
  }
  auto plain = TrainNodeClassifier(d, Config(NodeModelKind::kMlp), 5);
  d.transition = t_matrix;
  auto corrected = TrainNodeClassifier(d, Config(NodeModelKind::kMlp), 5);
  ASSERT_TRUE(plain.ok() && corrected.ok());
  EXPECT_GT(corrected->test_accuracy, 0.9);
  EXPECT_LT(plain->test_accuracy, corrected->test_accuracy);
}

// LPGNN's published training: the same noisy channel, each node's belief
// propagated over the graph into its neighbours' losses (the toy graph joins
// nodes of one class), selected by the capped rule. It learns the true
// classes, and its kept epoch agrees with the validation reports no more
// than the channel keeps.
TEST(TrainNodeClassifierTest, PropagatedCorrectionLearnsThroughLabelNoise) {
  const int c = 3;
  const Toy t = MakeToy(900, c, 6, 0.5, 3);
  NodeTaskData d = Split(t, c);
  PublicRandom rng(4);
  Mat<float> t_matrix = Mat<float>::Constant(c, c, 0.2f);
  t_matrix.diagonal().setConstant(0.6f);
  auto rr = [&](std::vector<int32_t>& y) {
    for (auto& l : y) {
      if (!rng.Bernoulli(0.6)) l = (l + 1 + (rng.Bernoulli(0.5) ? 1 : 0)) % c;
    }
  };
  rr(d.train_targets);
  rr(d.validation_targets);
  d.transition = t_matrix;
  d.propagate_predictions = true;
  d.train_reports = d.train_targets;
  for (NodeModelKind kind : {NodeModelKind::kMlp, NodeModelKind::kSage}) {
    NodeModelConfig config = Config(kind);
    config.train.selection = SelectionRule::kNoisyLabelsCapped;
    for (int steps : {0, 2}) {
      d.label_steps = steps;
      auto r = TrainNodeClassifier(d, config, 5);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_GT(r->test_accuracy, 0.85) << steps;
      EXPECT_LE(r->training.best_validation, 0.6 + 1e-6);
    }
  }
  // The rule needs the channel; so does the propagated loss.
  NodeModelConfig config = Config(NodeModelKind::kMlp);
  config.train.selection = SelectionRule::kNoisyLabelsCapped;
  d.transition.reset();
  EXPECT_FALSE(TrainNodeClassifier(d, config, 5).ok());
  EXPECT_FALSE(TrainNodeClassifier(d, Config(NodeModelKind::kMlp), 5).ok());
}

TEST(SelectionRuleTest, CappedRuleAsPublished) {
  TrainOptions o;
  o.selection = SelectionRule::kNoisyLabelsCapped;
  o.score_cap = 0.5;
  const Validation best{0.40, 1.0, 0.40};
  EXPECT_TRUE(Improves(o, {0.45, 0.9, 0.45}, best));
  EXPECT_FALSE(Improves(o, {0.45, 1.1, 0.45}, best));   // loss must fall
  EXPECT_FALSE(Improves(o, {0.40, 0.9, 0.45}, best));   // score must rise
  EXPECT_FALSE(Improves(o, {0.51, 0.9, 0.45}, best));   // over the cap
  EXPECT_FALSE(Improves(o, {0.45, 0.9, 0.40}, best));   // training must rise
  EXPECT_TRUE(Improves(o, {0.45, 0.9, 0.525}, best));   // up to 1.05 cap
  EXPECT_FALSE(Improves(o, {0.45, 0.9, 0.53}, best));
  o.selection = SelectionRule::kBestScore;
  EXPECT_TRUE(Improves(o, {0.51, 2.0, 0.0}, best));
  EXPECT_TRUE(Improves(o, {0.40, 0.9, 0.0}, best));     // tie, lower loss
  EXPECT_FALSE(Improves(o, {0.40, 1.1, 0.0}, best));
}

TEST(TrainNodeClassifierTest, RejectsBadInput) {
  const Toy t = MakeToy(40, 2, 3, 0.1, 5);
  auto expect_error = [&](NodeTaskData d, NodeModelConfig c,
                          absl::string_view needle) {
    auto r = TrainNodeClassifier(d, c, 1);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos)
        << r.status();
  };
  const NodeTaskData good = Split(t, 2);
  const NodeModelConfig mlp = Config(NodeModelKind::kMlp);
  NodeTaskData d = good;
  d.train.push_back(40);
  d.train_targets.push_back(0);
  expect_error(d, mlp, "training node 40");
  d = good;
  d.validation_targets[0] = 2;
  expect_error(d, mlp, "validation label 2");
  d = good;
  d.test_truth.pop_back();
  expect_error(d, mlp, "test has");
  d = good;
  d.graph = nullptr;
  expect_error(d, Config(NodeModelKind::kGcn), "graph");
  d = good;
  d.transition = Mat<float>::Identity(3, 3);
  expect_error(d, mlp, "transition");
  NodeModelConfig c = mlp;
  c.dropout = 1.5;
  expect_error(good, c, "dropout");
  c = mlp;
  c.train.adam.learning_rate = 0;
  expect_error(good, c, "learning rate");
  Mat<float> nan_x = t.x;
  nan_x(3, 1) = std::nanf("");
  d = good;
  d.features = &nan_x;
  expect_error(d, mlp, "NaN");
  const SparseInput<float> sparse(t.x.sparseView());
  d = good;
  d.sparse_features = &sparse;
  expect_error(d, Config(NodeModelKind::kGcn), "more than one way");
  d.features = nullptr;
  expect_error(d, mlp, "need a graph model");
  SparseInput<float> nan_sparse(nan_x.sparseView());
  d.sparse_features = &nan_sparse;
  expect_error(d, Config(NodeModelKind::kSage), "NaN");
}

// Features handed over as the sparse input train the model the dense ones
// do when the graph model reads those sparsely anyway: the same bits.
TEST(TrainNodeClassifierTest, SparseFeaturesTrainAsTheDenseOnes) {
  Toy t = MakeToy(200, 4, 24, 0.6, 3);
  PublicRandom rng(8);
  for (Eigen::Index i = 0; i < t.x.size(); ++i) {
    if (rng.Next64() % 10 != 0) t.x.data()[i] = 0;
  }
  const SparseInput<float> sparse(t.x.sparseView());
  for (NodeModelKind k : {NodeModelKind::kGcn, NodeModelKind::kSage}) {
    NodeTaskData dense = Split(t, 4), given = dense;
    given.features = nullptr;
    given.sparse_features = &sparse;
    dense.keep_outputs = given.keep_outputs = true;
    auto a = TrainNodeClassifier(dense, Config(k), 7);
    auto b = TrainNodeClassifier(given, Config(k), 7);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(a->test_predictions, b->test_predictions);
    EXPECT_EQ(a->training.epochs, b->training.epochs);
    ASSERT_TRUE(a->outputs && b->outputs);
    EXPECT_EQ(*a->outputs, *b->outputs);
  }
}

// PrivGE's MLP on Z handed over as compressed rows with its column
// standardisation (feature_rows, feature_mean, feature_scale) trains the
// model the dense standardised Z trains, up to float rounding in the folded
// first layer: full batch and mini-batches, validation read at once or in
// chunks. Without a standardisation, the rows are Z itself.
TEST(TrainNodeClassifierTest, FeatureRowsTrainTheMlpAsItsDenseFeatures) {
  Toy t = MakeToy(400, 4, 24, 0.3, 3);
  PublicRandom rng(8);
  for (Eigen::Index i = 0; i < t.x.size(); ++i) {
    if (rng.Next64() % 2 != 0) t.x.data()[i] = 0;
  }
  SparseRows z;
  z.cols = 24;
  for (Eigen::Index v = 0; v < t.x.rows(); ++v) {
    std::vector<double> row(t.x.row(v).begin(), t.x.row(v).end());
    z.AppendDenseRow(row);
  }
  std::vector<double> mean(24), scale(24);
  Mat<float> standardised = t.x;
  for (int j = 0; j < 24; ++j) {
    const double mu = t.x.col(j).cast<double>().mean();
    const double sd = std::sqrt(
        (t.x.col(j).cast<double>().array() - mu).square().mean());
    mean[j] = mu;
    scale[j] = 1.0 / sd;
    for (Eigen::Index v = 0; v < t.x.rows(); ++v) {
      standardised(v, j) = static_cast<float>((t.x(v, j) - mu) / sd);
    }
  }
  for (int batch : {0, 32}) {
    for (bool standardise : {true, false}) {
      SCOPED_TRACE(::testing::Message()
                   << "batch " << batch << ", standardised " << standardise);
      NodeTaskData dense = Split(t, 4), rows = dense;
      dense.features = standardise ? &standardised : &t.x;
      rows.features = nullptr;
      rows.feature_rows = &z;
      if (standardise) {
        rows.feature_mean = mean;
        rows.feature_scale = scale;
      }
      NodeModelConfig c = Config(NodeModelKind::kMlp);
      c.batch_rows = batch;
      auto a = TrainNodeClassifier(dense, c, 7);
      auto b = TrainNodeClassifier(rows, c, 7);
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_EQ(a->batch_rows, batch);
      EXPECT_GT(a->test_accuracy, 0.9);
      EXPECT_NEAR(a->test_accuracy, b->test_accuracy, 0.03);
      size_t same = 0;
      for (size_t i = 0; i < a->test_predictions.size(); ++i) {
        same += a->test_predictions[i] == b->test_predictions[i];
      }
      EXPECT_GE(same, a->test_predictions.size() * 95 / 100);
    }
  }
}

// The MLP's epoch bounds: above the data's sizes they change nothing, bit
// for bit; below, an epoch steps through that many training rows, a fixed
// sample of that many validation rows is scored, and the model still
// learns.
TEST(TrainNodeClassifierTest, EpochBoundsBindOnlyAboveTheirSize) {
  const Toy t = MakeToy(2000, 4, 16, 1.5, 11);
  const NodeTaskData d = Split(t, 4);
  ASSERT_GT(d.train.size(), 512u);
  ASSERT_GT(d.validation.size(), 100u);
  NodeModelConfig c = Config(NodeModelKind::kMlp);
  c.batch_rows = 32;
  c.batched_epoch_rows = 0;
  c.validation_rows = 0;
  auto all = TrainNodeClassifier(d, c, 3);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->epoch_rows, d.train.size());
  EXPECT_EQ(all->validation_rows, d.validation.size());

  NodeModelConfig loose = c;
  loose.batched_epoch_rows = static_cast<int>(d.train.size());
  loose.validation_rows = static_cast<int>(d.validation.size());
  auto same = TrainNodeClassifier(d, loose, 3);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->test_predictions, all->test_predictions);
  EXPECT_EQ(same->training.epochs, all->training.epochs);
  EXPECT_EQ(same->training.best_validation, all->training.best_validation);

  NodeModelConfig tight = c;
  tight.batched_epoch_rows = 512;
  tight.validation_rows = 100;
  auto bound = TrainNodeClassifier(d, tight, 3);
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_EQ(bound->epoch_rows, 512u);
  EXPECT_EQ(bound->validation_rows, 100u);
  EXPECT_NE(bound->test_predictions, all->test_predictions);
  // Chance is 0.25; the whole epochs' accuracy is the reference.
  EXPECT_GT(bound->test_accuracy, all->test_accuracy - 0.05)
      << "all rows: " << all->test_accuracy;
  EXPECT_GT(bound->test_accuracy, 0.6);
  // The best validation score is an accuracy over the 100 sampled rows.
  const double hits = bound->training.best_validation * 100;
  EXPECT_NEAR(hits, std::round(hits), 1e-9);
  // The same seed draws the same sample and batches.
  auto again = TrainNodeClassifier(d, tight, 3);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->test_predictions, bound->test_predictions);

  NodeModelConfig negative = c;
  negative.validation_rows = -1;
  EXPECT_EQ(TrainNodeClassifier(d, negative, 3).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TrainNodeClassifierTest, FeatureRowsRejectWhatTheyCannotFold) {
  const Toy t = MakeToy(40, 2, 3, 0.1, 5);
  SparseRows z;
  z.cols = 3;
  for (Eigen::Index v = 0; v < t.x.rows(); ++v) {
    z.AppendDenseRow({t.x(v, 0), t.x(v, 1), t.x(v, 2)});
  }
  NodeTaskData d = Split(t, 2);
  d.features = nullptr;
  d.feature_rows = &z;
  const NodeModelConfig mlp = Config(NodeModelKind::kMlp);
  auto expect_error = [&](const NodeTaskData& data, const NodeModelConfig& c,
                          absl::string_view needle) {
    auto r = TrainNodeClassifier(data, c, 1);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos)
        << r.status();
  };
  ASSERT_TRUE(TrainNodeClassifier(d, mlp, 1).ok());
  NodeTaskData both = d;
  both.features = &t.x;
  expect_error(both, mlp, "set one");
  expect_error(d, Config(NodeModelKind::kGcn), "the MLP's input");
  NodeModelConfig dropout = mlp;
  dropout.input_dropout = 0.2;
  expect_error(d, dropout, "input dropout");
  NodeTaskData short_mean = d;
  short_mean.feature_mean = {0.0, 0.0};
  short_mean.feature_scale = {1.0, 1.0};
  expect_error(short_mean, mlp, "one entry per column");
  NodeTaskData nan_scale = d;
  nan_scale.feature_mean = {0.0, 0.0, 0.0};
  nan_scale.feature_scale = {1.0, std::nan(""), 1.0};
  expect_error(nan_scale, mlp, "NaN");
}

// A file of rows trains the MLP as the same rows in memory (full batch and
// mini-batches, with input dropout), and takes only what it can read.
TEST(TrainNodeClassifierTest, FeatureFileTrainsTheMlpAsItsDenseFeatures) {
  const Toy t = MakeToy(300, 3, 5, 0.3, 8);
  auto file = RowFile::Create("", t.x.rows(), t.x.cols());
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->WriteColumns(0, t.x.cols(), t.x.data()).ok());
  NodeTaskData dense = Split(t, 3);
  NodeTaskData from_file = dense;
  from_file.features = nullptr;
  from_file.feature_file = file->get();
  for (int batch : {0, 32}) {
    NodeModelConfig c = Config(NodeModelKind::kMlp);
    c.batch_rows = batch;
    c.input_dropout = 0.1;
    auto a = TrainNodeClassifier(dense, c, 5);
    auto b = TrainNodeClassifier(from_file, c, 5);
    ASSERT_TRUE(a.ok() && b.ok()) << b.status();
    EXPECT_GT(a->test_accuracy, 0.6);
    EXPECT_EQ(a->test_predictions, b->test_predictions);
    EXPECT_EQ(a->training.best_validation, b->training.best_validation);
    EXPECT_EQ(a->training.epochs, b->training.epochs);
  }
  auto expect_error = [&](const NodeTaskData& data, const NodeModelConfig& c,
                          absl::string_view needle) {
    auto r = TrainNodeClassifier(data, c, 1);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos)
        << r.status();
  };
  expect_error(from_file, Config(NodeModelKind::kGcn), "the MLP's input");
  NodeTaskData both = from_file;
  both.features = &t.x;
  expect_error(both, Config(NodeModelKind::kMlp), "more than one way");
  NodeTaskData clip = from_file;
  clip.feature_clip = 3;
  expect_error(clip, Config(NodeModelKind::kMlp), "needs the rows' mean");
}

// Embeddings where an edge joins nodes of the same cluster: z_u * z_v is
// large on the cluster's dimension for edges, small for non-edges.
LinkTaskData ClusteredLinks(Mat<float>* z, int n, int k, uint64_t seed) {
  *z = Mat<float>::Zero(n, k);
  PublicRandom rng(seed);
  for (int v = 0; v < n; ++v) {
    (*z)(v, v % k) = 1.0f;
    for (int j = 0; j < k; ++j) (*z)(v, j) += 0.3f * float(rng.UniformDouble());
  }
  LinkTaskData d;
  d.embeddings = z;
  auto pick = [&](bool same, std::vector<Edge>* out, int count) {
    while (static_cast<int>(out->size()) < count) {
      NodeId u = rng.UniformInt(n), v = rng.UniformInt(n);
      if (u != v && ((u % k) == (v % k)) == same) out->push_back({u, v});
    }
  };
  pick(true, &d.train_positive, 400);
  pick(false, &d.train_negative, 400);
  pick(true, &d.validation_positive, 50);
  pick(false, &d.validation_negative, 50);
  pick(true, &d.test_positive, 100);
  pick(false, &d.test_negative, 100);
  return d;
}

TEST(TrainLinkPredictorTest, SeparatesEdgesFromNonEdges) {
  Mat<float> z;
  LinkTaskData d = ClusteredLinks(&z, 300, 5, 9);
  for (LinkLossKind loss : {LinkLossKind::kPairwise, LinkLossKind::kLogistic}) {
    for (int layers : {1, 2}) {
      LinkModelConfig c;
      c.loss = loss;
      c.layers = layers;
      c.hidden_dim = 8;
      c.train.max_epochs = 300;
      auto r = TrainLinkPredictor(d, c, 3);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_GT(r->test_auc, 0.95) << int(loss) << " " << layers;
    }
  }
  LinkModelConfig c;
  d.train_negative.pop_back();
  auto r = TrainLinkPredictor(d, c, 3);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pairs each training edge"),
            std::string::npos);
  d.train_negative.push_back({0, 300});
  r = TrainLinkPredictor(d, c, 3);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("names a node >= 300"), std::string::npos)
      << r.status();
}

// Forming the features chunk by chunk computes the same full-batch gradient
// as forming them all at once (up to the order of a float sum).
TEST(TrainLinkPredictorTest, ChunkedFullBatchMatchesOneChunk) {
  Mat<float> z;
  const LinkTaskData d = ClusteredLinks(&z, 300, 5, 9);
  for (LinkLossKind loss : {LinkLossKind::kPairwise, LinkLossKind::kLogistic}) {
    for (int layers : {1, 2}) {
      LinkModelConfig c;
      c.loss = loss;
      c.layers = layers;
      c.hidden_dim = 8;
      c.train.max_epochs = 40;
      c.batch_pairs = 0;
      auto whole = TrainLinkPredictor(d, c, 3);
      c.feature_entries = 5 * 70;  // 70 rows at a time: 12 chunks of 800
      auto chunked = TrainLinkPredictor(d, c, 3);
      ASSERT_TRUE(whole.ok() && chunked.ok());
      EXPECT_EQ(whole->batch_pairs, 0);
      EXPECT_EQ(chunked->batch_pairs, 0);
      EXPECT_NEAR(whole->test_auc, chunked->test_auc, 2e-3)
          << int(loss) << " " << layers;
      EXPECT_NEAR(whole->training.best_validation,
                  chunked->training.best_validation, 2e-3);
    }
  }
}

// Threads only decide who forms which rows: the result is identical.
TEST(TrainLinkPredictorTest, ResultDoesNotDependOnThreads) {
  Mat<float> z;
  const LinkTaskData d = ClusteredLinks(&z, 300, 5, 4);
  for (auto [batch, layers] : {std::pair{0, 2}, {64, 2}, {64, 1}}) {
    LinkModelConfig c;
    c.layers = layers;
    c.hidden_dim = 8;
    c.dropout = 0.2;
    c.train.max_epochs = 30;
    c.batch_pairs = batch;
    c.feature_entries = 5 * 100;
    c.threads = 1;
    auto one = TrainLinkPredictor(d, c, 5);
    c.threads = 3;
    auto three = TrainLinkPredictor(d, c, 5);
    ASSERT_TRUE(one.ok() && three.ok());
    EXPECT_EQ(one->test_auc, three->test_auc) << batch << " " << layers;
    EXPECT_EQ(one->training.best_epoch, three->training.best_epoch);
    EXPECT_EQ(one->training.epochs, three->training.epochs);
  }
}

// Mini-batches learn the same separation, in a few passes.
TEST(TrainLinkPredictorTest, MiniBatchesLearn) {
  Mat<float> z;
  const LinkTaskData d = ClusteredLinks(&z, 300, 5, 9);
  for (LinkLossKind loss : {LinkLossKind::kPairwise, LinkLossKind::kLogistic}) {
    LinkModelConfig c;
    c.loss = loss;
    c.batch_pairs = 16;
    c.batched_learning_rate = 0.01;  // a toy problem: few steps per epoch
    auto r = TrainLinkPredictor(d, c, 3);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->batch_pairs, 16);
    EXPECT_GT(r->test_auc, 0.95) << int(loss);
    EXPECT_LE(r->training.epochs, c.batched_max_epochs);
  }
  // The automatic rule: full batch while the training features fit.
  LinkModelConfig c;
  EXPECT_EQ(LinkBatchPairs(c, 400, 5), 0);
  c.feature_entries = 2 * 400 * 5 - 1;
  EXPECT_EQ(LinkBatchPairs(c, 400, 5), kLinkAutoBatchPairs);
  c.batch_pairs = -2;
  auto r = TrainLinkPredictor(d, c, 3);
  EXPECT_FALSE(r.ok());
}

TEST(HadamardFeaturesTest, RowsAreElementwiseProducts) {
  Mat<float> z(3, 2);
  z << 1, 2, 3, 4, 5, 6;
  Mat<float> h = HadamardFeatures(z, {{0, 1}}, {{1, 2}});
  ASSERT_EQ(h.rows(), 2);
  EXPECT_EQ(h(0, 0), 3);
  EXPECT_EQ(h(0, 1), 8);
  EXPECT_EQ(h(1, 0), 15);
  EXPECT_EQ(h(1, 1), 24);
}

}  // namespace
}  // namespace ldpgraph::training
