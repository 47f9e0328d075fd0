// Training speed of LPGNN's GraphSAGE on a dataset folder's raw features:
// wall time per epoch of training::TrainNodeClassifier, for a same-data
// comparison with the same model in PyTorch (tests/bench/torch_sage.py; both
// driven by tests/bench/sage_bench.sh).
//
// What it measures: exactly N full-batch epochs (no early stop): forward
// over every node with dropout, softmax cross-entropy on the training rows,
// backward, one Adam step, then the trainer's inference forward and the
// validation bookkeeping. Loading the data and scoring the test set are not
// timed.
//
// Model (LPGNN's): two GraphSAGE layers, H' = H W_self + (A_mean H) W_neigh
// + b, hidden 16, SELU, dropout 0.5 between the layers, Glorot-uniform
// weights, zero biases; Adam lr 0.01, weight decay 1e-3.
//
// Usage:
//   sage_epoch_bench --dataset DIR [--input auto|dense|sparse|deferred]
//                    [--steps 0] [--epochs 100] [--hidden 16] [--threads 1]
//                    [--seed 1]
//   --steps K: the model reads the features after K KProp steps (LPGNN's
//   symmetric step, no self loops) instead of the raw ones.
//   --input: the first layer reads the features dense (n x d products),
//   sparse (nnz x width), or as the trainer decides (auto: sparse at most
//   12.5 % non-zero); with K > 0 these read the propagated n x d matrix,
//   formed before training (not timed). deferred: the raw features sparse
//   with KProp deferred into the first layer (the node task's path on wide
//   features, server/training/propagated_input.h): nnz x width plus K
//   sparse steps at the layer's width, never n x d.
// Split (torch_sage.py uses the same): labelled nodes with even ids train;
// of the others, the first 500 (ascending id) validate and the rest test.
// Output: one JSON line
//   {"framework":"ldpgraph","input":"sparse","threads":T,
//    "seconds_per_epoch":S,"epochs":N,"seconds":TOTAL,"test_accuracy":A}

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/dataset/dataset.h"
#include "tests/bench/epoch_bench_flags.h"
#include "server/propagation/propagation.h"
#include "server/training/propagated_input.h"
#include "server/training/tasks.h"

namespace {

constexpr size_t kValidationSize = 500;
constexpr char kUsage[] =
    "usage: sage_epoch_bench --dataset DIR "
    "[--input auto|dense|sparse|deferred] [--steps K] [--epochs N] "
    "[--hidden H] [--threads T] [--seed S]";

[[noreturn]] void Die(const std::string& message) {
  ldpgraph::bench::Die("sage_epoch_bench", message);
}

// The command line, checked (dies on a bad one).
struct Flags {
  std::string dir;
  std::string input;  // auto, dense, sparse or deferred
  int steps = 0;
  int epochs = 0, hidden = 0, threads = 1;
  uint64_t seed = 1;
};

Flags ParseFlags(int argc, char** argv) {
  const ldpgraph::bench::EpochBenchFlags f = ldpgraph::bench::ParseEpochBenchFlags(
      argc, argv, "sage_epoch_bench", kUsage, {"dataset", "input", "steps"},
      /*default_epochs=*/100, /*default_hidden=*/16);
  Flags out;
  out.dir = f.args.Get("dataset").value_or("");
  out.input = f.args.Get("input").value_or("auto");
  out.epochs = f.epochs;
  out.hidden = f.hidden;
  out.threads = f.threads;
  out.seed = f.seed;
  if (out.dir.empty()) Die(kUsage);
  if (out.input != "auto" && out.input != "dense" && out.input != "sparse" &&
      out.input != "deferred") {
    Die("--input must be auto, dense, sparse or deferred, got " + out.input);
  }
  absl::StatusOr<std::optional<int64_t>> steps_flag = f.args.GetInt("steps");
  if (!steps_flag.ok() || steps_flag->value_or(0) < 0) {
    Die("--steps must be an integer >= 0");
  }
  out.steps = static_cast<int>(steps_flag->value_or(0));
  return out;
}

// --input deferred: the raw features sparse, with `steps` KProp steps
// deferred into the first layer, into *out.
void MakeDeferredInput(const ldpgraph::Dataset& ds, int steps,
                       std::optional<ldpgraph::training::SparseInput<float>>* out) {
  using namespace ldpgraph;
  const size_t n = ds.features.rows;
  training::SpMat<float> x(n, ds.features.cols), op(n, n);
  std::vector<Eigen::Triplet<float, int64_t>> entries;
  for (size_t v = 0; v < n; ++v) {
    auto idx = ds.features.row_indices(v);
    auto val = ds.features.row_values(v);
    for (size_t k = 0; k < idx.size(); ++k) {
      entries.emplace_back(v, idx[k], val[k]);
    }
  }
  x.setFromTriplets(entries.begin(), entries.end());
  entries.clear();
  for (const KPropEntry& e :
       KPropOperator(ds.graph, false, KPropNorm::kSymmetric)) {
    entries.emplace_back(e.row, e.col, static_cast<float>(e.weight));
  }
  op.setFromTriplets(entries.begin(), entries.end());
  out->emplace(std::move(x),
               training::MakeInputPropagation<float>(
                   std::move(op), steps, 0.0,
                   static_cast<int>(ds.features.cols), {}, {}));
}

// The features after `steps` KProp steps (the raw ones for 0), dense, into
// *features.
void MakePropagatedFeatures(const ldpgraph::Dataset& ds, int steps, int threads,
                            ldpgraph::training::Mat<float>* features) {
  using namespace ldpgraph;
  absl::StatusOr<DenseMatrix> z =
      KProp(ds.graph, ds.features.ToDense(), steps, false, threads,
            KPropNorm::kSymmetric);
  if (!z.ok()) Die(std::string(z.status().message()));
  *features = Eigen::Map<const training::Mat<float>>(z->data.data(), z->rows,
                                                     z->cols);
}

// The split (torch_sage.py's): labelled nodes with even ids train; of the
// others, the first kValidationSize validate and the rest test.
void SplitNodes(const ldpgraph::Dataset& ds, ldpgraph::training::NodeTaskData* data) {
  for (size_t v = 0; v < ds.features.rows; ++v) {
    const int32_t label = ds.labels[v];
    if (label < 0) continue;
    if (v % 2 == 0) {
      data->train.push_back(static_cast<uint32_t>(v));
      data->train_targets.push_back(label);
    } else if (data->validation.size() < kValidationSize) {
      data->validation.push_back(static_cast<uint32_t>(v));
      data->validation_targets.push_back(label);
    } else {
      data->test.push_back(static_cast<uint32_t>(v));
      data->test_truth.push_back(label);
    }
  }
}

// LPGNN's model and training, for exactly f.epochs epochs.
ldpgraph::training::NodeModelConfig SageConfig(const Flags& f) {
  using namespace ldpgraph;
  training::NodeModelConfig c;
  c.kind = training::NodeModelKind::kSage;
  c.hidden_dim = f.hidden;
  c.layers = 2;
  c.dropout = 0.5;
  c.activation = training::Activation::kSelu;
  c.train.max_epochs = f.epochs;
  c.train.patience = f.epochs + 1;  // never stop early: exactly `epochs` epochs
  c.train.adam.learning_rate = 0.01;
  c.train.adam.weight_decay = 1e-3;
  c.threads = f.threads;
  c.sparse_input_density = f.input == "dense"    ? 0.0
                           : f.input == "sparse" ? 1.0
                                                 : training::kSparseInputDensity;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ldpgraph;
  const Flags f = ParseFlags(argc, argv);
  absl::StatusOr<Dataset> ds = LoadDataset(f.dir);
  if (!ds.ok()) Die(std::string(ds.status().message()));
  training::Mat<float> features;
  std::optional<training::SparseInput<float>> deferred;
  if (f.input == "deferred") {
    MakeDeferredInput(*ds, f.steps, &deferred);
  } else {
    MakePropagatedFeatures(*ds, f.steps, f.threads, &features);
  }

  training::NodeTaskData data;
  if (deferred) {
    data.sparse_features = &*deferred;
  } else {
    data.features = &features;
  }
  data.graph = &ds->graph;
  data.classes = static_cast<int>(ds->meta.classes);
  SplitNodes(*ds, &data);

  auto r = training::TrainNodeClassifier(data, SageConfig(f), f.seed);
  if (!r.ok()) Die(std::string(r.status().message()));
  std::printf(
      "{\"framework\":\"ldpgraph\",\"input\":\"%s\",\"threads\":%d,"
      "\"seconds_per_epoch\":%.6g,\"epochs\":%d,\"seconds\":%.6g,"
      "\"test_accuracy\":%.4f}\n",
      f.input.c_str(), f.threads, r->training.seconds_per_epoch,
      r->training.epochs, r->training.seconds, r->test_accuracy);
  return 0;
}
