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

}  // namespace

int main(int argc, char** argv) {
  using namespace ldpgraph;
  const bench::EpochBenchFlags f = bench::ParseEpochBenchFlags(
      argc, argv, "sage_epoch_bench", kUsage, {"dataset", "input", "steps"},
      /*default_epochs=*/100, /*default_hidden=*/16);
  const std::string dir = f.args.Get("dataset").value_or("");
  const std::string input = f.args.Get("input").value_or("auto");
  const int epochs = f.epochs, hidden = f.hidden, threads = f.threads;
  const uint64_t seed = f.seed;
  if (dir.empty()) Die(kUsage);
  if (input != "auto" && input != "dense" && input != "sparse" &&
      input != "deferred") {
    Die("--input must be auto, dense, sparse or deferred, got " + input);
  }
  absl::StatusOr<std::optional<int64_t>> steps_flag = f.args.GetInt("steps");
  if (!steps_flag.ok() || steps_flag->value_or(0) < 0) {
    Die("--steps must be an integer >= 0");
  }
  const int steps = static_cast<int>(steps_flag->value_or(0));

  absl::StatusOr<Dataset> ds = LoadDataset(dir);
  if (!ds.ok()) Die(std::string(ds.status().message()));
  const size_t n = ds->features.rows;
  training::Mat<float> features;
  std::optional<training::SparseInput<float>> deferred;
  if (input == "deferred") {
    training::SpMat<float> x(n, ds->features.cols), op(n, n);
    std::vector<Eigen::Triplet<float, int64_t>> entries;
    for (size_t v = 0; v < n; ++v) {
      auto idx = ds->features.row_indices(v);
      auto val = ds->features.row_values(v);
      for (size_t k = 0; k < idx.size(); ++k) {
        entries.emplace_back(v, idx[k], val[k]);
      }
    }
    x.setFromTriplets(entries.begin(), entries.end());
    entries.clear();
    for (const KPropEntry& e :
         KPropOperator(ds->graph, false, KPropNorm::kSymmetric)) {
      entries.emplace_back(e.row, e.col, static_cast<float>(e.weight));
    }
    op.setFromTriplets(entries.begin(), entries.end());
    deferred.emplace(std::move(x),
                     training::MakeInputPropagation<float>(
                         std::move(op), steps, 0.0,
                         static_cast<int>(ds->features.cols), {}, {}));
  } else {
    absl::StatusOr<DenseMatrix> z =
        KProp(ds->graph, ds->features.ToDense(), steps, false, threads,
              KPropNorm::kSymmetric);
    if (!z.ok()) Die(std::string(z.status().message()));
    features = Eigen::Map<const training::Mat<float>>(z->data.data(), z->rows,
                                                      z->cols);
  }

  training::NodeTaskData data;
  if (deferred) {
    data.sparse_features = &*deferred;
  } else {
    data.features = &features;
  }
  data.graph = &ds->graph;
  data.classes = static_cast<int>(ds->meta.classes);
  for (size_t v = 0; v < n; ++v) {
    const int32_t label = ds->labels[v];
    if (label < 0) continue;
    if (v % 2 == 0) {
      data.train.push_back(static_cast<uint32_t>(v));
      data.train_targets.push_back(label);
    } else if (data.validation.size() < kValidationSize) {
      data.validation.push_back(static_cast<uint32_t>(v));
      data.validation_targets.push_back(label);
    } else {
      data.test.push_back(static_cast<uint32_t>(v));
      data.test_truth.push_back(label);
    }
  }

  training::NodeModelConfig c;
  c.kind = training::NodeModelKind::kSage;
  c.hidden_dim = hidden;
  c.layers = 2;
  c.dropout = 0.5;
  c.activation = training::Activation::kSelu;
  c.train.max_epochs = epochs;
  c.train.patience = epochs + 1;  // never stop early: exactly `epochs` epochs
  c.train.adam.learning_rate = 0.01;
  c.train.adam.weight_decay = 1e-3;
  c.threads = threads;
  c.sparse_input_density = input == "dense"    ? 0.0
                           : input == "sparse" ? 1.0
                                               : training::kSparseInputDensity;

  auto r = training::TrainNodeClassifier(data, c, seed);
  if (!r.ok()) Die(std::string(r.status().message()));
  std::printf(
      "{\"framework\":\"ldpgraph\",\"input\":\"%s\",\"threads\":%d,"
      "\"seconds_per_epoch\":%.6g,\"epochs\":%d,\"seconds\":%.6g,"
      "\"test_accuracy\":%.4f}\n",
      input.c_str(), threads, r->training.seconds_per_epoch,
      r->training.epochs, r->training.seconds, r->test_accuracy);
  return 0;
}
