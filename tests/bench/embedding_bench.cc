// Cost of the curator's structure embeddings (Google Benchmark), on
// generated graphs of growing size (common/dataset/generator.h: average
// degree 10, degree exponent 2.5, seed 1) and, when present, on pubmed.
//
// DPNE (server/embedding/dpne.h):
//   BM_WalkProximityMatrix/nodes:<n>
//       M = (P + P^2) / 2, sparse. items = nodes. Counters: nnz (|Omega|),
//       MiB (bytes of the CSR M), maxrss_MiB (peak resident set of the
//       process so far: read it on the largest row).
//   BM_Dpne/nodes:<n>/dim:<k>
//       TrainDpne, 3 ALS sweeps, private release at epsilon 1 (seeded
//       noise). Counters as above, MiB being the sparse M; the transposed
//       copy and W, H (n x k doubles each) come on top.
//   BM_DpnePubmed
//       the paper's setting on pubmed ($LDPGRAPH_DATASETS or the build's
//       LDPGRAPH_DATASETS_DIR, default ../shared/datasets) (dim 100, 10
//       sweeps, epsilon 1), one run; skipped with an error when the dataset
//       is absent.
//
// SE-PrivGEmb (server/embedding/se_privgemb.h):
//   BM_SePrivGEmbEpoch/nodes:<n>/mode:<m>
//       TrainSePrivGEmb for one epoch (ceil(|E| / 16) steps of batch 16,
//       dim 128, 5 negatives, deepwalk proximity, seeded noise), mode 0
//       non-private, 1 private with noise on the touched rows, 2 private
//       with noise on every row (O(n dim) draws per step: small n only).
//       items = examples processed (steps * batch), so items_per_second is
//       examples per second; the time includes drawing the examples.
//   BM_SePrivGEmbPubmed
//       one private run on pubmed (found as above) (dim 128, epsilon
//       1, delta 1e-5, the other settings at their defaults), to the budget
//       or max_epochs; counters steps, epochs, epsilon. Skipped with an
//       error when the dataset is absent.
//
// Run (optimised build of your own):
//   cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release
//   ninja -C build-bench embedding_bench && build-bench/bench/embedding_bench
// CTest runs it only as a smoke test (embedding_bench_smoke, label bench).

#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "benchmark/benchmark.h"
#include "common/dataset/dataset.h"
#include "common/dataset/generator.h"
#include "common/random/random.h"
#include "common/testing/shared_datasets.h"
#include "server/embedding/dpne.h"
#include "server/embedding/proximity.h"
#include "server/embedding/se_privgemb.h"

namespace ldpgraph::embedding {
namespace {

// Pubmed's graph, or nothing after marking state skipped (absent or
// unreadable dataset).
std::optional<Graph> PubmedGraph(benchmark::State& state) {
  const std::string dir = SharedDatasetsDir() + "/pubmed";
  if (!std::filesystem::exists(dir)) {
    state.SkipWithError("pubmed is absent");
    return std::nullopt;
  }
  auto d = LoadDataset(dir);
  if (!d.ok()) {
    state.SkipWithError(std::string(d.status().message()).c_str());
    return std::nullopt;
  }
  return std::move(d->graph);
}


double MaxRssMiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;
}

// Generated graphs, one per size, built once.
const Graph& Generated(size_t nodes) {
  static auto* cache = new std::map<size_t, std::unique_ptr<Graph>>();
  auto& slot = (*cache)[nodes];
  if (slot) return *slot;
  GeneratorOptions o = DefaultGeneratorOptions();
  o.nodes = nodes;
  o.classes = 6;
  o.features = 8;
  o.avg_degree = 10;
  o.homophily = 0.8;
  o.seed = 1;
  slot = std::make_unique<Graph>(GenerateDataset(o)->graph);
  return *slot;
}

size_t SparseBytes(const SparseRows& m) {
  return m.offsets.capacity() * sizeof(uint64_t) +
         m.indices.capacity() * sizeof(uint32_t) +
         m.values.capacity() * sizeof(float);
}

// ---------------------------------------------------------------------------
// DPNE

void BM_WalkProximityMatrix(benchmark::State& state) {
  const Graph& g = Generated(static_cast<size_t>(state.range(0)));
  size_t nnz = 0, bytes = 0;
  for (auto _ : state) {
    SparseRows m = WalkProximityMatrix(g);
    nnz = m.nnz();
    bytes = SparseBytes(m);
    benchmark::DoNotOptimize(m.values.data());
  }
  state.SetItemsProcessed(state.iterations() * g.num_nodes());
  state.counters["nnz"] = static_cast<double>(nnz);
  state.counters["MiB"] = bytes / 1048576.0;
  state.counters["maxrss_MiB"] = MaxRssMiB();
}
BENCHMARK(BM_WalkProximityMatrix)
    ->ArgName("nodes")
    ->Arg(1000)
    ->Arg(4000)
    ->Arg(16000)
    ->Arg(64000)
    ->Arg(256000)
    ->Unit(benchmark::kMillisecond);

void RunDpne(benchmark::State& state, const Graph& g, const DpneConfig& c) {
  DpneResult last;
  for (auto _ : state) {
    SeededRandomForTesting noise(7);
    auto r = TrainDpne(g, c, noise, 1);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    last = *std::move(r);
    benchmark::DoNotOptimize(last.embedding.data.data());
  }
  state.SetItemsProcessed(state.iterations() * g.num_nodes());
  state.counters["nnz"] = static_cast<double>(last.omega);
  state.counters["MiB"] = last.matrix_bytes / 1048576.0;
  state.counters["maxrss_MiB"] = MaxRssMiB();
}

void BM_Dpne(benchmark::State& state) {
  const Graph& g = Generated(static_cast<size_t>(state.range(0)));
  DpneConfig c;
  c.dim = static_cast<int>(state.range(1));
  c.sweeps = 3;
  c.epsilon = 1;
  RunDpne(state, g, c);
}
BENCHMARK(BM_Dpne)
    ->ArgNames({"nodes", "dim"})
    ->ArgsProduct({{1000, 4000, 16000}, {32}})
    ->Args({16000, 100})
    ->Unit(benchmark::kMillisecond);

void BM_DpnePubmed(benchmark::State& state) {
  const std::optional<Graph> g = PubmedGraph(state);
  if (!g) return;
  DpneConfig c;  // dim 100, 10 sweeps
  c.epsilon = 1;
  RunDpne(state, *g, c);
}
BENCHMARK(BM_DpnePubmed)->Iterations(1)->Unit(benchmark::kSecond);

// ---------------------------------------------------------------------------
// SE-PrivGEmb

void RunSePrivGEmb(benchmark::State& state, const Graph& g,
                   const SePrivGEmbConfig& c) {
  SePrivGEmbResult last;
  for (auto _ : state) {
    SeededRandomForTesting noise(7);
    auto r = TrainSePrivGEmb(g, c, noise, 1);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    last = *std::move(r);
    benchmark::DoNotOptimize(last.centre.data.data());
  }
  const int64_t batch =
      std::min<int64_t>(c.batch_size, static_cast<int64_t>(g.num_edges()));
  state.SetItemsProcessed(state.iterations() * last.steps * batch);
  state.counters["steps"] = static_cast<double>(last.steps);
  state.counters["epochs"] = last.epochs;
  if (last.guarantee) state.counters["epsilon"] = last.guarantee->epsilon;
  state.counters["maxrss_MiB"] = MaxRssMiB();
}

void BM_SePrivGEmbEpoch(benchmark::State& state) {
  const Graph& g = Generated(static_cast<size_t>(state.range(0)));
  SePrivGEmbConfig c;  // dim 128, batch 16, 5 negatives, deepwalk
  c.max_epochs = 1;
  c.private_training = state.range(1) != 0;
  c.noised_rows = state.range(1) == 2 ? NoisedRows::kAll : NoisedRows::kTouched;
  c.target_epsilon = 1e6;  // one epoch, whatever it costs
  RunSePrivGEmb(state, g, c);
}
BENCHMARK(BM_SePrivGEmbEpoch)
    ->ArgNames({"nodes", "mode"})
    ->ArgsProduct({{1000, 4000, 16000, 64000}, {0, 1}})
    ->ArgsProduct({{1000, 4000}, {2}})
    ->Unit(benchmark::kMillisecond);

void BM_SePrivGEmbPubmed(benchmark::State& state) {
  const std::optional<Graph> g = PubmedGraph(state);
  if (!g) return;
  SePrivGEmbConfig c;
  c.dim = 128;
  c.target_epsilon = 1;
  c.target_delta = 1e-5;
  RunSePrivGEmb(state, *g, c);
}
BENCHMARK(BM_SePrivGEmbPubmed)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace
}  // namespace ldpgraph::embedding
