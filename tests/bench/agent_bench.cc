// Throughput of an agent host's answer path without the network: one
// AgentShard answering whole tasks (AgentShard::RespondAll), as the agent
// host does for every task it gets (Google Benchmark).
//
// What it measures (items_per_second = node answers per second; one
// iteration answers one task for every node of the shard):
//   BM_RespondAll/fresh/<mechanism>/nodes:<n>
//       a new question every iteration (the epsilon changes by a hair), so
//       each node checks the task, perturbs with fresh randomness, charges
//       its budget, and the shard commits the n memo rows in one SQLite
//       transaction (synchronous=FULL: one fsync per task).
//   BM_RespondAll/memo/<mechanism>/nodes:<n>
//       the same question every iteration: each node checks the task and
//       answers from its memo (no randomness, no spend, nothing to commit).
// <mechanism>: hds and multibit on Cora-like features (d = 1433, sparse
// binary mapped to [-1, 1], k = 1 and m = 10), label-rr (7 classes) and
// edge-rr (n = number of nodes, 5 neighbours each). Seeded randomness
// (SeededRandomForTesting): the figures are the agent's work, not OpenSSL's.
//
// How to run (optimised build):
//   ninja -C build agent_bench
//   build/bench/agent_bench --benchmark_min_time=0.5
// Select rows with --benchmark_filter=<regex>, e.g. 'memo' or 'hds'; add
// --benchmark_repetitions=3 for medians on a noisy machine. CTest runs it
// only as a smoke test (agent_bench_smoke, label bench).

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "client/agent.h"
#include "common/random/random.h"
#include "ldpgraph/v1/agent.pb.h"

namespace ldpgraph::agent {
namespace {

constexpr int kFeatures = 1433;
constexpr int kClasses = 7;

enum class Question { kHds, kMultiBit, kLabel, kEdges };

const char* QuestionName(Question q) {
  switch (q) {
    case Question::kHds:
      return "hds";
    case Question::kMultiBit:
      return "multibit";
    case Question::kLabel:
      return "label-rr";
    case Question::kEdges:
      return "edge-rr";
  }
  return "?";
}

// n nodes with Cora-like records: about 18 of 1433 features at 1 (else -1
// after symmetric scaling), a label, 5 neighbours.
std::vector<NodeRecord> Records(uint32_t n) {
  SeededRandomForTesting rng(7);
  FeatureSchema schema;
  schema.ranges.assign(kFeatures, {0.0, 1.0});
  const std::shared_ptr<const FeatureScale> scale =
      *FeatureScale::Create(std::move(schema), FeatureScaling::kSymmetric);
  std::vector<NodeRecord> out(n);
  for (uint32_t v = 0; v < n; ++v) {
    NodeRecord& r = out[v];
    r.node = v;
    std::set<uint32_t> ones;
    for (int j = 0; j < 18; ++j) ones.insert(rng.UniformInt(kFeatures));
    const std::vector<uint32_t> indices(ones.begin(), ones.end());
    r.features = NodeFeatures(indices, std::vector<float>(indices.size(), 1.0f),
                              scale);
    r.label = static_cast<int>(rng.UniformInt(kClasses));
    for (uint32_t u = 1; u <= 5; ++u) {
      const uint32_t w = (v + u * 37) % n;
      if (w != v) r.neighbours.push_back(w);
    }
    std::sort(r.neighbours.begin(), r.neighbours.end());
    r.neighbours.erase(std::unique(r.neighbours.begin(), r.neighbours.end()),
                       r.neighbours.end());
  }
  return out;
}

v1::Task MakeTask(Question q, uint32_t n, double epsilon) {
  v1::Task task;
  task.set_campaign_id("bench");
  v1::MechanismSpec* s = task.mutable_spec();
  s->set_epsilon(epsilon);
  switch (q) {
    case Question::kHds:
    case Question::kMultiBit:
      task.set_attribute(v1::ATTRIBUTE_FEATURES);
      s->set_kind(q == Question::kHds ? v1::MECHANISM_KIND_HDS
                                      : v1::MECHANISM_KIND_MULTIBIT);
      s->set_dimension(kFeatures);
      s->set_sampled(q == Question::kHds ? 1 : 10);
      s->set_range_low(-1);
      s->set_range_high(1);
      break;
    case Question::kLabel:
      task.set_attribute(v1::ATTRIBUTE_LABEL);
      s->set_kind(v1::MECHANISM_KIND_LABEL_RR);
      s->set_dimension(kClasses);
      break;
    case Question::kEdges:
      task.set_attribute(v1::ATTRIBUTE_EDGES);
      s->set_kind(v1::MECHANISM_KIND_EDGE_RR);
      s->set_dimension(n);
      break;
  }
  for (uint32_t v = 0; v < n; ++v) task.add_node_ids(v);
  return task;
}

void BM_RespondAll(benchmark::State& state, Question q, bool fresh) {
  const uint32_t n = static_cast<uint32_t>(state.range(0));
  const std::string dir = absl::StrCat(
      std::filesystem::temp_directory_path().string(), "/ldpgraph-agent-bench-",
      QuestionName(q), fresh ? "-fresh-" : "-memo-", n);
  std::filesystem::remove_all(dir);
  AgentPolicy policy;
  policy.caps.total = 1e9;
  auto shard = AgentShard::Create(Records(n), policy, /*seed=*/1, dir);
  if (!shard.ok()) {
    state.SkipWithError(std::string(shard.status().message()).c_str());
    return;
  }
  v1::Task task = MakeTask(q, n, 1.0);
  // The memo rows: answered once before timing.
  if (!fresh && !(*shard)->RespondAll(task).ok()) {
    state.SkipWithError("the first answer failed");
    return;
  }
  uint64_t i = 0;
  for (auto _ : state) {
    if (fresh) {
      task.mutable_spec()->set_epsilon(1.0 + 1e-9 * static_cast<double>(++i));
    }
    absl::StatusOr<ShardResponse> r = (*shard)->RespondAll(task);
    if (!r.ok() || r->reports.size() != n || r->refusals != 0) {
      state.SkipWithError("RespondAll failed or refused");
      break;
    }
    benchmark::DoNotOptimize(r->reports.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * n);
  shard->reset();
  std::filesystem::remove_all(dir);
}

void Register() {
  for (bool fresh : {true, false}) {
    for (Question q : {Question::kHds, Question::kMultiBit, Question::kLabel,
                       Question::kEdges}) {
      benchmark::RegisterBenchmark(
          absl::StrCat("BM_RespondAll/", fresh ? "fresh/" : "memo/",
                       QuestionName(q))
              .c_str(),
          [q, fresh](benchmark::State& s) { BM_RespondAll(s, q, fresh); })
          ->ArgName("nodes")
          ->Arg(1000)
          ->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace
}  // namespace ldpgraph::agent

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  ldpgraph::agent::Register();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
