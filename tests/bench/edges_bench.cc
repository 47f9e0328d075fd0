// Cost of private edges (Google Benchmark): the whole neighbour-substitution
// exchange in memory (common/edges/substitution.h, RunSubstitution: every
// message serialised and parsed as the relay would carry it, no sealing, no
// network), the curator's graph assembly, and edge randomized response over
// a whole graph, on generated graphs of growing size.
//
//   BM_Substitution/approach:<a>/nodes:<n>/threads:<t>
//       one exchange over a generated graph (average degree 10, degree
//       exponent 2.5, d = 64, Multi-bit eps_x = 2, eps_e = 1, top_k 10,
//       f_max 5). items = nodes. Counters: msgs_per_node, KiB_per_node
//       (plaintext bytes sent per node), subst_rate (substituted / dropped),
//       maxrss_MiB (peak resident set of the process so far: read it on the
//       largest row).
//   BM_AssembleGraph/nodes:<n>    union of the substitution reports.
//   BM_EdgeRRGraph/nodes:<n>/eps:<e>   every node's randomized response,
//       then the lower-id assembly; counter edges = assembled edges.
//   BM_BlinkEstimate/graph:<g>/eps:<e>/variant:<v>   the Blink curator
//       (common/edges/blink.h, delta 0.1) on every node's report (drawn
//       beforehand): beta-model prior, posteriors, the hard (v = 0) or topk
//       (v = 1) graph. g = 0: pubmed ($LDPGRAPH_DATASETS or the shared
//       datasets; skipped when absent), g > 0: a generated graph of g
//       nodes. Counters: iterations (of the prior's fit), residual (its
//       largest degree residual), reported_pairs, edges, maxrss_MiB.
//
// Run (optimised build of your own):
//   cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release
//   ninja -C build-bench edges_bench && build-bench/bench/edges_bench
// CTest runs it only as a smoke test (edges_bench_smoke, label bench).

#include <sys/resource.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/dataset/generator.h"
#include "common/edges/blink.h"
#include "common/edges/substitution.h"
#include "common/testing/shared_datasets.h"
#include "common/mechanisms/edge_rr.h"

namespace ldpgraph::edges {
namespace {

double MaxRssMiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;
}

struct Fixture {
  Dataset data;
  std::shared_ptr<const ExchangeFeatures> features;
  std::vector<v1::FeatureReport> own;
};

const Fixture& Get(size_t nodes) {
  static auto* cache = new std::map<size_t, std::unique_ptr<Fixture>>();
  auto& slot = (*cache)[nodes];
  if (slot) return *slot;
  slot = std::make_unique<Fixture>();
  GeneratorOptions o = DefaultGeneratorOptions();
  o.nodes = nodes;
  o.classes = 6;
  o.features = 64;
  o.avg_degree = 10;
  o.homophily = 0.8;
  o.seed = 1;
  slot->data = *GenerateDataset(o);
  MechanismSpec spec;
  spec.kind = MechanismKind::kMultiBit;
  spec.epsilon = 2;
  spec.dimension = 64;
  spec.alpha = 0;
  spec.beta = 1;
  slot->features = ExchangeFeatures::Private(
      std::shared_ptr<const FeatureMechanism>(*CreateFeatureMechanism(spec)));
  SeededRandomForTesting rng(2);
  const SparseRows& x = slot->data.features;
  for (size_t v = 0; v < nodes; ++v) {
    std::vector<double> dense(64, 0.0);
    auto idx = x.row_indices(v);
    auto val = x.row_values(v);
    for (size_t i = 0; i < idx.size(); ++i) dense[idx[i]] = val[i];
    slot->own.push_back(*slot->features->Encode(dense, rng));
  }
  return *slot;
}

void BM_Substitution(benchmark::State& state) {
  const Fixture& f = Get(static_cast<size_t>(state.range(1)));
  SubstitutionParams p;
  p.approach = static_cast<Approach>(state.range(0));
  p.epsilon = 1;
  RunOptions o;
  o.threads = static_cast<int>(state.range(2));
  const size_t n = f.data.graph.num_nodes();
  RunStats last;
  for (auto _ : state) {
    std::vector<std::unique_ptr<SeededRandomForTesting>> rngs;
    for (size_t v = 0; v < n; ++v) {
      rngs.push_back(std::make_unique<SeededRandomForTesting>(v + 17));
    }
    auto out = RunSubstitution(f.data.graph, p, f.features, f.own,
                               [&](uint32_t v) { return rngs[v].get(); }, o);
    if (!out.ok()) {
      state.SkipWithError(std::string(out.status().message()).c_str());
      return;
    }
    last = out->stats;
    benchmark::DoNotOptimize(out->results.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["msgs_per_node"] = static_cast<double>(last.messages) / n;
  state.counters["KiB_per_node"] = last.message_bytes / 1024.0 / n;
  state.counters["subst_rate"] =
      last.dropped ? static_cast<double>(last.substituted) / last.dropped : 0;
  state.counters["maxrss_MiB"] = MaxRssMiB();
}
BENCHMARK(BM_Substitution)
    ->ArgNames({"approach", "nodes", "threads"})
    ->ArgsProduct({{1, 2}, {1000, 4000, 16000}, {1}})
    ->Args({1, 16000, 2})
    ->Args({2, 16000, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_AssembleGraph(benchmark::State& state) {
  const Fixture& f = Get(static_cast<size_t>(state.range(0)));
  const Graph& g = f.data.graph;
  std::vector<std::vector<uint32_t>> reports(g.num_nodes());
  for (size_t v = 0; v < g.num_nodes(); ++v) {
    auto nb = g.neighbors(v);
    reports[v].assign(nb.begin(), nb.end());
  }
  for (auto _ : state) {
    auto out = AssembleGraph(static_cast<uint32_t>(g.num_nodes()), reports,
                             Symmetrisation::kUnion);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations() * g.num_nodes());
}
BENCHMARK(BM_AssembleGraph)->ArgName("nodes")->Arg(1000)->Arg(16000)
    ->Unit(benchmark::kMillisecond);

void BM_EdgeRRGraph(benchmark::State& state) {
  const Fixture& f = Get(static_cast<size_t>(state.range(0)));
  const Graph& g = f.data.graph;
  const uint32_t n = static_cast<uint32_t>(g.num_nodes());
  auto rr = *EdgeRandomizedResponse::Create(static_cast<double>(state.range(1)), n);
  SeededRandomForTesting rng(3);
  size_t edges = 0;
  for (auto _ : state) {
    std::vector<std::vector<uint32_t>> reports(n);
    for (uint32_t v = 0; v < n; ++v) {
      reports[v] = *rr->Perturb(v, g.neighbors(v), rng);
    }
    auto out = AssembleGraph(n, reports, Symmetrisation::kLowerId);
    edges = out->num_edges();
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["edges"] = static_cast<double>(edges);
}
BENCHMARK(BM_EdgeRRGraph)->ArgNames({"nodes", "eps"})
    ->ArgsProduct({{1000, 16000}, {2, 8}})
    ->Unit(benchmark::kMillisecond);

void BM_BlinkEstimate(benchmark::State& state) {
  Graph g;
  if (state.range(0) == 0) {
    const std::string dir = SharedDatasetsDir() + "/pubmed";
    auto d = std::filesystem::exists(dir)
                 ? LoadDataset(dir)
                 : absl::StatusOr<Dataset>(absl::NotFoundError("pubmed is absent"));
    if (!d.ok()) {
      state.SkipWithError(std::string(d.status().message()).c_str());
      return;
    }
    g = std::move(d->graph);
  } else {
    g = Get(static_cast<size_t>(state.range(0))).data.graph;
  }
  const uint32_t n = static_cast<uint32_t>(g.num_nodes());
  const BlinkParams params{.epsilon = static_cast<double>(state.range(1)),
                           .delta = 0.1};
  auto client = *BlinkClient::Create(params, n);
  std::vector<BlinkReport> reports(n);
  for (uint32_t v = 0; v < n; ++v) {
    SeededRandomForTesting rng(NodeNoiseSeed(5, v));
    reports[v] = *client->Report(v, g.neighbors(v), rng);
  }
  BlinkEstimateOptions o;
  o.variant = state.range(2) == 0 ? BlinkVariant::kHard : BlinkVariant::kTopK;
  BlinkEstimate last;
  for (auto _ : state) {
    auto est = EstimateBlinkGraph(params, n, reports, o);
    if (!est.ok()) {
      state.SkipWithError(std::string(est.status().message()).c_str());
      return;
    }
    last = std::move(*est);
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["iterations"] = last.prior.iterations;
  state.counters["residual"] = last.prior.max_degree_residual;
  state.counters["reported_pairs"] = static_cast<double>(last.reported_pairs);
  state.counters["edges"] = static_cast<double>(last.graph.num_edges());
  state.counters["maxrss_MiB"] = MaxRssMiB();
}
BENCHMARK(BM_BlinkEstimate)->ArgNames({"graph", "eps", "variant"})
    ->ArgsProduct({{0, 1000, 16000}, {4}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace ldpgraph::edges
