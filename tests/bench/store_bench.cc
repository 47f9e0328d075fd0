// Ingest throughput of the curator's durable store (Google Benchmark):
// CuratorStore::AppendAnswers, one transaction per batch, into a fresh
// SQLite database (WAL).
//
// What it measures (items_per_second = answers stored per second,
// bytes_per_second = their payload bytes; one iteration is one batch):
//   BM_AppendAnswers/batch:<n>/payload:<b>/sync:<full|normal>
//       batches of n new answers (n = 256, 1024; 1 shows the fixed cost of
//       a commit) with b-byte random payloads:
//       b = 130 is about an HDS report (k = 10 indices and signs), b = 40 a
//       Multi-bit one. sync:full fsyncs the WAL at every commit (the
//       curator's default: an acknowledged answer survives a power cut);
//       sync:normal only writes it (survives a crash of the process).
//   BM_AppendAnswers/resend/batch:256/payload:130/sync:full
//       the same batch sent again and again: every answer is a duplicate,
//       found in the store's in-memory index and compared byte for byte
//       with the stored payload (all in one log row, read incrementally).
//
// Where: a fresh directory per run under $LDPGRAPH_BENCH_DIR, or the system
// temporary directory ($TMPDIR, /tmp). The figures for sync:full are those
// of that file system's fsync: put it where the curator's data will be (a
// tmpfs makes fsync free).
//
// How to run (optimised build in a build directory of your own):
//   cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release
//         -DLDPGRAPH_BUILD_TESTS=OFF
//   ninja -C build-bench store_bench
//   build-bench/bench/store_bench --benchmark_min_time=2
// CTest runs it only as a smoke test (store_bench_smoke, label bench).

#include <stdlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "server/store/store.h"

namespace ldpgraph::store {
namespace {

// A fresh directory, removed at the end of the run.
class ScratchDir {
 public:
  ScratchDir() {
    const char* base = std::getenv("LDPGRAPH_BENCH_DIR");
    std::string pattern = (base != nullptr && *base != '\0'
                               ? std::filesystem::path(base)
                               : std::filesystem::temp_directory_path()) /
                          "store_bench_XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string RandomBytes(std::mt19937_64& rng, int size) {
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
  return bytes;
}

// Opens a store in dir, or reports the error and returns null.
std::unique_ptr<CuratorStore> OpenForBench(benchmark::State& state,
                                           const ScratchDir& dir,
                                           bool synchronous_full) {
  if (!dir.ok()) {
    state.SkipWithError("cannot create a scratch directory");
    return nullptr;
  }
  CuratorStore::Options options;
  options.synchronous_full = synchronous_full;
  auto store = CuratorStore::Open(dir.path(), options);
  if (!store.ok()) {
    state.SkipWithError(store.status().ToString().c_str());
    return nullptr;
  }
  return std::move(*store);
}

void BM_AppendAnswers(benchmark::State& state, int batch_size,
                      int payload_bytes, bool synchronous_full) {
  ScratchDir dir;
  auto store = OpenForBench(state, dir, synchronous_full);
  if (store == nullptr) return;
  std::mt19937_64 rng(42);
  std::vector<AnswerRow> batch(batch_size);
  for (AnswerRow& a : batch) {
    a.campaign = 1;
    a.payload = RandomBytes(rng, payload_bytes);
    a.unix_ms = 1700000000000;
  }
  uint32_t next_node = 0;
  for (auto _ : state) {
    for (AnswerRow& a : batch) a.node = next_node++;
    auto outcomes = store->AppendAnswers(batch);
    if (!outcomes.ok()) {
      state.SkipWithError(outcomes.status().ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(outcomes->data());
  }
  state.SetItemsProcessed(state.iterations() * batch_size);
  state.SetBytesProcessed(state.iterations() * batch_size * payload_bytes);
}

void BM_AppendResend(benchmark::State& state, int batch_size, int payload_bytes,
                     bool synchronous_full) {
  ScratchDir dir;
  auto store = OpenForBench(state, dir, synchronous_full);
  if (store == nullptr) return;
  std::mt19937_64 rng(42);
  std::vector<AnswerRow> batch(batch_size);
  for (int i = 0; i < batch_size; ++i) {
    batch[i].campaign = 1;
    batch[i].node = static_cast<uint32_t>(i);
    batch[i].payload = RandomBytes(rng, payload_bytes);
    batch[i].unix_ms = 1700000000000;
  }
  if (!store->AppendAnswers(batch).ok()) {
    state.SkipWithError("cannot store the first batch");
    return;
  }
  for (auto _ : state) {
    auto outcomes = store->AppendAnswers(batch);
    if (!outcomes.ok() || outcomes->back() != AppendOutcome::kDuplicate) {
      state.SkipWithError("a resend was not a duplicate");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * batch_size);
  state.SetBytesProcessed(state.iterations() * batch_size * payload_bytes);
}

const char* SyncName(bool full) { return full ? "full" : "normal"; }

// Registration at static-initialisation time; benchmark_main runs them.
const bool kRegistered = [] {
  for (bool full : {true, false}) {
    for (int payload : {130, 40}) {
      for (int batch : {1, 256, 1024}) {
        benchmark::RegisterBenchmark(
            absl::StrCat("BM_AppendAnswers/batch:", batch, "/payload:", payload,
                         "/sync:", SyncName(full))
                .c_str(),
            BM_AppendAnswers, batch, payload, full)
            ->UseRealTime();
      }
    }
  }
  benchmark::RegisterBenchmark(
      "BM_AppendAnswers/resend/batch:256/payload:130/sync:full",
      BM_AppendResend, 256, 130, true)
      ->UseRealTime();
  return true;
}();

}  // namespace
}  // namespace ldpgraph::store
