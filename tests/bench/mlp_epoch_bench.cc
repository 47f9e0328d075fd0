// Training speed of the curator's node-classification MLP (PrivGE's
// classifier) on a given embedding: wall time per epoch of
// training::TrainNodeClassifier, for a same-data comparison with the same
// MLP in PyTorch (tests/bench/torch_mlp.py; both driven by
// tests/bench/training_bench.sh).
//
// What it measures: exactly N epochs (no early stop) of full-batch training
// on the training rows (forward with dropout, softmax cross-entropy,
// backward, one Adam step) plus, as the trainer does every epoch, an
// inference forward on the validation rows and the checkpoint bookkeeping.
// Reading the inputs and scoring the test set are not timed.
//
// Model: Linear(d, H) - ReLU - Dropout(0.5) - Linear(H, c), Glorot-uniform
// weights, zero biases; Adam lr 0.01, weight decay 5e-4 (added to the
// gradient, as PyTorch's Adam does).
//
// Usage:
//   mlp_epoch_bench --z Z.npy --labels LABELS.txt --train TRAIN.txt
//                   [--epochs 200] [--hidden 64] [--threads 1] [--seed 1]
//                   [--layout dense|sparse]
//   Z.npy       n x d float32 (e.g. `ldpgraph propagate ... --out Z.npy`)
//   --layout    dense (default): Z as an n x d matrix; sparse: Z's non-zeros
//               as compressed rows (NodeTaskData::feature_rows), the first
//               layer's products sparse (PrivGE's layout for a Z that is
//               mostly zeros). The same model either way.
//   LABELS.txt  n lines, one integer per node: class in [0, c) or -1
//   TRAIN.txt   training node ids, one per line
// Validation: the first 500 labelled nodes (ascending id) not in TRAIN;
// test: the remaining labelled nodes not in TRAIN (torch_mlp.py uses the
// same rule). --threads is the trainer's thread count (its layers split
// their rows across that many threads; the products are OpenBLAS's, one
// thread each); "blas" in the output names the kernels OpenBLAS picked for
// this CPU.
// Training rows past 2^24 entries go in mini-batches of 4,096 rows
// (NodeModelConfig's automatic rule), also for exactly N epochs.
// Output: one JSON line
//   {"framework":"ldpgraph","threads":T,"threads_used":T,"blas":"...",
//    "layout":"dense","density":D,"seconds_per_epoch":S,"epochs":N,
//    "seconds":TOTAL,"test_accuracy":A}
// (density: the share of Z's entries that are not 0.)

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <unordered_set>
#include <vector>

#include <Eigen/Core>

#include "common/linalg/blas.h"
#include "common/linalg/npy.h"
#include "server/training/tasks.h"
#include "tests/bench/epoch_bench_flags.h"

namespace {

constexpr size_t kValidationSize = 500;
constexpr char kUsage[] =
    "usage: mlp_epoch_bench --z Z.npy --labels LABELS.txt --train TRAIN.txt "
    "[--epochs N] [--hidden H] [--threads T] [--seed S] "
    "[--layout dense|sparse]";

[[noreturn]] void Die(const std::string& message) {
  ldpgraph::bench::Die("mlp_epoch_bench", message);
}

std::vector<int64_t> ReadIntegers(const std::string& path) {
  std::ifstream in(path);
  if (!in) Die("cannot open " + path);
  std::vector<int64_t> out;
  int64_t v;
  while (in >> v) out.push_back(v);
  if (!in.eof()) Die(path + ": not one integer per line");
  return out;
}

// The command line, checked (dies on a bad one).
struct Flags {
  std::string z_path, labels_path, train_path;
  std::string layout;  // dense or sparse
  int epochs = 0, hidden = 0, threads = 1;
  uint64_t seed = 1;
};

Flags ParseFlags(int argc, char** argv) {
  const ldpgraph::bench::EpochBenchFlags f = ldpgraph::bench::ParseEpochBenchFlags(
      argc, argv, "mlp_epoch_bench", kUsage,
      {"z", "labels", "train", "layout"},
      /*default_epochs=*/200, /*default_hidden=*/64);
  Flags out;
  out.z_path = f.args.Get("z").value_or("");
  out.labels_path = f.args.Get("labels").value_or("");
  out.train_path = f.args.Get("train").value_or("");
  out.epochs = f.epochs;
  out.hidden = f.hidden;
  out.threads = f.threads;
  out.seed = f.seed;
  out.layout = f.args.Get("layout").value_or("dense");
  if (out.z_path.empty() || out.labels_path.empty() || out.train_path.empty()) {
    Die(kUsage);
  }
  if (out.layout != "dense" && out.layout != "sparse") {
    Die("--layout must be dense or sparse, got '" + out.layout + "'");
  }
  return out;
}

// Z's non-zeros as compressed rows into *rows; returns the share of Z's
// entries that are not 0.
double SparseRowsOf(const ldpgraph::DenseMatrix& z, ldpgraph::SparseRows* rows) {
  rows->cols = z.cols;
  for (size_t v = 0; v < z.rows; ++v) {
    for (size_t j = 0; j < z.cols; ++j) {
      const float value = z.at(v, j);
      if (value == 0.0f) continue;
      rows->indices.push_back(static_cast<uint32_t>(j));
      rows->values.push_back(value);
    }
    rows->offsets.push_back(rows->indices.size());
    ++rows->rows;
  }
  return static_cast<double>(rows->nnz()) / std::max<size_t>(1, z.data.size());
}

// The classes, and the split: the nodes of train_path train (each must be
// labelled); of the other labelled nodes, the first kValidationSize
// validate and the rest test.
void SplitNodes(const std::vector<int64_t>& labels, const std::string& train_path,
                ldpgraph::training::NodeTaskData* data) {
  for (int64_t l : labels) data->classes = std::max<int>(data->classes, l + 1);
  std::unordered_set<int64_t> in_train;
  for (int64_t v : ReadIntegers(train_path)) {
    if (v < 0 || v >= static_cast<int64_t>(labels.size()) || labels[v] < 0) {
      Die("training id " + std::to_string(v) + " is not a labelled node");
    }
    in_train.insert(v);
    data->train.push_back(static_cast<uint32_t>(v));
    data->train_targets.push_back(static_cast<int32_t>(labels[v]));
  }
  for (size_t v = 0; v < labels.size(); ++v) {
    if (labels[v] < 0 || in_train.count(v)) continue;
    if (data->validation.size() < kValidationSize) {
      data->validation.push_back(static_cast<uint32_t>(v));
      data->validation_targets.push_back(static_cast<int32_t>(labels[v]));
    } else {
      data->test.push_back(static_cast<uint32_t>(v));
      data->test_truth.push_back(static_cast<int32_t>(labels[v]));
    }
  }
}

// PrivGE's classifier and its training, for exactly f.epochs epochs.
ldpgraph::training::NodeModelConfig MlpConfig(const Flags& f) {
  using namespace ldpgraph;
  training::NodeModelConfig c;
  c.kind = training::NodeModelKind::kMlp;
  c.hidden_dim = f.hidden;
  c.layers = 2;
  c.dropout = 0.5;
  c.input_dropout = 0.0;
  c.activation = training::Activation::kRelu;
  c.train.max_epochs = f.epochs;
  c.train.patience = f.epochs + 1;  // never stop early: exactly `epochs` epochs
  c.batched_max_epochs = f.epochs;
  c.batched_patience = f.epochs + 1;
  c.train.adam.learning_rate = 0.01;
  c.train.adam.weight_decay = 5e-4;
  c.threads = f.threads;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ldpgraph;
  const Flags f = ParseFlags(argc, argv);
  auto z = ReadNpy(f.z_path);
  if (!z.ok()) Die(std::string(z.status().message()));
  const std::vector<int64_t> labels = ReadIntegers(f.labels_path);
  if (labels.size() != z->rows) Die("labels and Z disagree on the node count");
  training::Mat<float> features;
  SparseRows rows;
  const double density = SparseRowsOf(*z, &rows);
  training::NodeTaskData data;
  if (f.layout == "dense") {
    features = Eigen::Map<const training::Mat<float>>(z->data.data(), z->rows,
                                                      z->cols);
    rows = SparseRows();
    data.features = &features;
  } else {
    data.feature_rows = &rows;
  }
  *z = DenseMatrix();
  SplitNodes(labels, f.train_path, &data);

  auto r = training::TrainNodeClassifier(data, MlpConfig(f), f.seed);
  if (!r.ok()) Die(std::string(r.status().message()));
  std::printf(
      "{\"framework\":\"ldpgraph\",\"threads\":%d,\"threads_used\":%d,"
      "\"blas\":\"OpenBLAS %s\",\"layout\":\"%s\",\"density\":%.4g,"
      "\"seconds_per_epoch\":%.6g,\"epochs\":%d,\"seconds\":%.6g,"
      "\"test_accuracy\":%.4f}\n",
      f.threads, f.threads, BlasCoreName().c_str(), f.layout.c_str(), density,
      r->training.seconds_per_epoch, r->training.epochs, r->training.seconds,
      r->test_accuracy);
  return 0;
}
