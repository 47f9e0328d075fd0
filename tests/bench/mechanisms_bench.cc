// Throughput of ldpgraph's local randomizers, the curator-side estimators and
// the random sources they draw from (Google Benchmark).
//
// What it measures (items_per_second = perturbations, reports or draws per
// second; one item is one call):
//   BM_Perturb/<mechanism>/d:<d>/<k|m>:<n>/eps:<e>/<source>
//       FeatureMechanism::Perturb on one node's feature vector, for HDS,
//       Multi-bit, one-bit, Piecewise (sampled k), Laplace (sampled k and all
//       d) at d = 1433 (Cora-like sparse binary features mapped to [-1, 1])
//       and d = 500 (values uniform in [-1, 1]), and the square wave at d = 1.
//       One-bit and all-d Laplace report every dimension (k:all). Counters:
//       dims = reported dimensions, words = 64-bit random words drawn per
//       perturbation (counted outside the timed loop).
//   BM_LabelRR/c:7/eps:<e>/<source>          LabelRandomizedResponse::Perturb
//   BM_EdgeRR/n:<n>/deg:10/eps:<e>/<source>   EdgeRandomizedResponse::Perturb
//       of a node with 10 neighbours; the output has about q n entries,
//       reported as the out_nodes counter.
//   BM_Estimate/..., BM_ValidateReport/...    curator side, HDS and Multi-bit
//       reports at d = 1433, k = m = 10 (reports drawn beforehand).
//   BM_Screen/n:1000000/d:<d>/k:<k>/attacked:<pct>   the curator's report
//       screen (server/pipeline/report_screen.h) over 10^6 reports' sampled
//       dimensions (drawn beforehand as HDS draws them; pct % of them the
//       maximal-gain attack's, on 10 target dimensions). One item is one
//       report. Counter: flagged = nodes the screen flagged.
//   BM_RandomSource/<draw>/<source>           Next64, UniformDouble and
//       SampleWithoutReplacement(1433, 10) through a RandomSource&.
// <source> is "secure" (SecureRandom, OpenSSL's CSPRNG) or "seeded"
// (SeededRandomForTesting, xoshiro256**; not private, for comparison).
//
// How to run (optimised build in a build directory of your own):
//   cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release
//         -DLDPGRAPH_BUILD_TESTS=OFF
//   ninja -C build-bench mechanisms_bench
//   build-bench/bench/mechanisms_bench --benchmark_min_time=0.2
// Select rows with --benchmark_filter=<regex>, e.g. 'BM_Perturb/hds' or
// 'seeded'; add --benchmark_repetitions=3 for medians on a noisy machine.
// CTest runs it only as a smoke test (mechanisms_bench_smoke, label bench).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "benchmark/benchmark.h"
#include "common/crypto/sealed.h"
#include "common/mechanisms/edge_rr.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/mechanisms/label_rr.h"
#include "common/mechanisms/multibit.h"
#include "common/random/random.h"
#include "server/pipeline/report_screen.h"

namespace ldpgraph {
namespace {

enum class Source { kSecure, kSeeded };

constexpr Source kSources[] = {Source::kSecure, Source::kSeeded};

absl::string_view SourceName(Source s) {
  return s == Source::kSecure ? "secure" : "seeded";
}

// A fresh source for one benchmark run, or nullptr after SkipWithError.
std::unique_ptr<RandomSource> MakeSource(Source s, benchmark::State& state) {
  if (s == Source::kSeeded) {
    return std::make_unique<SeededRandomForTesting>(20240601);
  }
  auto secure = SecureRandom::Create();
  if (!secure.ok()) {
    state.SkipWithError(std::string(secure.status().message()).c_str());
    return nullptr;
  }
  return std::move(*secure);
}

// Input vectors, drawn once from a fixed seed so every run sees the same data.
// d = 1433: Cora-like bag of words, about 18 of 1433 words present (Cora's
// mean), 1 -> +1 and 0 -> -1. Otherwise values uniform in [-1, 1]. For d = 1
// a pool of many values, so the scalar mechanism sees varied inputs.
std::vector<std::vector<double>> MakeInputs(int d) {
  SeededRandomForTesting rng(static_cast<uint64_t>(d) * 7919 + 1);
  const int count = d == 1 ? 1024 : 16;
  std::vector<std::vector<double>> inputs(count, std::vector<double>(d));
  for (auto& x : inputs) {
    for (double& v : x) {
      if (d == 1433) {
        v = rng.Bernoulli(18.0 / 1433.0) ? 1.0 : -1.0;
      } else {
        v = 2.0 * rng.UniformDouble() - 1.0;
      }
    }
  }
  return inputs;
}

// Counts the 64-bit words drawn through it; used outside the timed loops to
// report how much randomness one perturbation consumes.
class CountingSource final : public RandomSource {
 public:
  explicit CountingSource(RandomSource& inner) : inner_(inner) {}
  uint64_t Next64() override {
    ++words_;
    return inner_.Next64();
  }
  bool is_secure() const override { return inner_.is_secure(); }
  absl::string_view name() const override { return inner_.name(); }
  uint64_t words() const { return words_; }

 private:
  RandomSource& inner_;
  uint64_t words_ = 0;
};

std::unique_ptr<FeatureMechanism> MakeMechanism(const MechanismSpec& spec,
                                                benchmark::State& state) {
  auto m = CreateFeatureMechanism(spec);
  if (!m.ok()) {
    state.SkipWithError(std::string(m.status().message()).c_str());
    return nullptr;
  }
  return std::move(*m);
}

// --- feature mechanisms -------------------------------------------------------

void BM_Perturb(benchmark::State& state, MechanismSpec spec, Source source) {
  auto mech = MakeMechanism(spec, state);
  if (mech == nullptr) return;
  auto rng = MakeSource(source, state);
  if (rng == nullptr) return;
  const auto inputs = MakeInputs(spec.dimension);
  size_t next = 0;
  size_t reported = 0;
  for (auto _ : state) {
    auto report = mech->Perturb(inputs[next], *rng);
    if (!report.ok()) {
      state.SkipWithError(std::string(report.status().message()).c_str());
      break;
    }
    reported += report->size();
    benchmark::DoNotOptimize(report);
    if (++next == inputs.size()) next = 0;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["dims"] = benchmark::Counter(
      static_cast<double>(reported), benchmark::Counter::kAvgIterations);
  // Untimed: random words one perturbation draws (mean of a few calls).
  constexpr int kCounted = 8;
  CountingSource counting(*rng);
  for (int i = 0; i < kCounted; ++i) {
    benchmark::DoNotOptimize(mech->Perturb(inputs[i % inputs.size()], counting));
  }
  state.counters["words"] =
      static_cast<double>(counting.words()) / kCounted;
}

// One feature-mechanism row: sampled unset means the mechanism's default,
// shown as "<k|m>:<resolved>_default" (or "k:all" for dense reports). Only
// Multi-bit and all-d Laplace rows leave it unset.
struct FeatureRow {
  MechanismKind kind;
  int dimension;
  std::optional<int> sampled;
  double epsilon;
};

std::string FeatureRowName(const FeatureRow& row) {
  std::string name =
      absl::StrCat("BM_Perturb/", MechanismName(row.kind), "/d:", row.dimension);
  const absl::string_view letter = row.kind == MechanismKind::kMultiBit ? "m" : "k";
  if (row.kind == MechanismKind::kOneBit ||
      (row.kind == MechanismKind::kLaplace && !row.sampled.has_value())) {
    absl::StrAppend(&name, "/k:all");
  } else if (row.kind == MechanismKind::kSquareWave) {
    // d = 1: nothing is sampled.
  } else if (row.sampled.has_value()) {
    absl::StrAppend(&name, "/", letter, ":", *row.sampled);
  } else {
    absl::StrAppend(&name, "/", letter, ":",
                    MultiBitMechanism::DefaultM(row.epsilon, row.dimension),
                    "_default");
  }
  absl::StrAppend(&name, "/eps:", row.epsilon);
  return name;
}

void RegisterFeatureMechanisms() {
  std::vector<FeatureRow> rows;
  for (int d : {1433, 500}) {
    rows.push_back({MechanismKind::kHds, d, 10, 1.0});
    rows.push_back({MechanismKind::kMultiBit, d, 10, 1.0});
    rows.push_back({MechanismKind::kMultiBit, d, 10, 4.0});
    rows.push_back({MechanismKind::kMultiBit, d, std::nullopt, 4.0});
    rows.push_back({MechanismKind::kOneBit, d, std::nullopt, 1.0});
    rows.push_back({MechanismKind::kPiecewise, d, 10, 1.0});
    rows.push_back({MechanismKind::kLaplace, d, 10, 1.0});
    rows.push_back({MechanismKind::kLaplace, d, std::nullopt, 1.0});
  }
  rows.push_back({MechanismKind::kSquareWave, 1, std::nullopt, 1.0});

  for (const FeatureRow& row : rows) {
    MechanismSpec spec;
    spec.kind = row.kind;
    spec.dimension = row.dimension;
    spec.sampled = row.sampled;
    spec.epsilon = row.epsilon;
    for (Source s : kSources) {
      const std::string name =
          absl::StrCat(FeatureRowName(row), "/", SourceName(s));
      benchmark::RegisterBenchmark(name.c_str(), BM_Perturb, spec, s);
    }
  }
}

// --- label and edge randomized response ----------------------------------------

void BM_LabelRR(benchmark::State& state, int classes, double epsilon,
                Source source) {
  auto rr = LabelRandomizedResponse::Create(epsilon, classes);
  if (!rr.ok()) {
    state.SkipWithError(std::string(rr.status().message()).c_str());
    return;
  }
  auto rng = MakeSource(source, state);
  if (rng == nullptr) return;
  int label = 0;
  for (auto _ : state) {
    auto reported = (*rr)->Perturb(label, *rng);
    benchmark::DoNotOptimize(reported);
    if (++label == classes) label = 0;
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_EdgeRR(benchmark::State& state, uint32_t nodes, double epsilon,
               Source source) {
  auto rr = EdgeRandomizedResponse::Create(epsilon, nodes);
  if (!rr.ok()) {
    state.SkipWithError(std::string(rr.status().message()).c_str());
    return;
  }
  auto rng = MakeSource(source, state);
  if (rng == nullptr) return;
  // Node v with 10 neighbours chosen once, ascending, never v.
  const uint32_t v = 1234;
  SeededRandomForTesting setup(nodes);
  std::vector<uint32_t> neighbours;
  for (uint32_t u : setup.SampleWithoutReplacement(nodes, 11)) {
    if (u != v && neighbours.size() < 10) neighbours.push_back(u);
  }
  size_t out_nodes = 0;
  for (auto _ : state) {
    auto reported = (*rr)->Perturb(v, neighbours, *rng);
    if (!reported.ok()) {
      state.SkipWithError(std::string(reported.status().message()).c_str());
      break;
    }
    out_nodes += reported->size();
    benchmark::DoNotOptimize(reported);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["out_nodes"] = benchmark::Counter(
      static_cast<double>(out_nodes), benchmark::Counter::kAvgIterations);
}

void RegisterRandomizedResponse() {
  for (Source s : kSources) {
    benchmark::RegisterBenchmark(
        absl::StrCat("BM_LabelRR/c:7/eps:1/", SourceName(s)).c_str(),
        BM_LabelRR, 7, 1.0, s);
  }
  for (uint32_t n : {2708u, 100000u}) {
    for (double eps : {1.0, 4.0}) {
      for (Source s : kSources) {
        benchmark::RegisterBenchmark(
            absl::StrCat("BM_EdgeRR/n:", n, "/deg:10/eps:", eps, "/",
                         SourceName(s))
                .c_str(),
            BM_EdgeRR, n, eps, s);
      }
    }
  }
}

// --- curator side -----------------------------------------------------------------

// Reports drawn beforehand (seeded), cycled through so the branch predictor
// does not learn one report.
std::vector<SparseReport> MakeReports(const FeatureMechanism& mech,
                                      benchmark::State& state) {
  SeededRandomForTesting rng(99);
  const auto inputs = MakeInputs(mech.dimension());
  std::vector<SparseReport> reports;
  for (int i = 0; i < 64; ++i) {
    auto r = mech.Perturb(inputs[i % inputs.size()], rng);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return {};
    }
    reports.push_back(*std::move(r));
  }
  return reports;
}

void BM_Estimate(benchmark::State& state, MechanismSpec spec) {
  auto mech = MakeMechanism(spec, state);
  if (mech == nullptr) return;
  const auto reports = MakeReports(*mech, state);
  if (reports.empty()) return;
  std::vector<double> out(spec.dimension);
  size_t next = 0;
  for (auto _ : state) {
    absl::Status st = mech->Estimate(reports[next], absl::MakeSpan(out));
    if (!st.ok()) {
      state.SkipWithError(std::string(st.message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
    if (++next == reports.size()) next = 0;
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_ValidateReport(benchmark::State& state, MechanismSpec spec) {
  auto mech = MakeMechanism(spec, state);
  if (mech == nullptr) return;
  const auto reports = MakeReports(*mech, state);
  if (reports.empty()) return;
  size_t next = 0;
  for (auto _ : state) {
    absl::Status st = mech->ValidateReport(reports[next]);
    benchmark::DoNotOptimize(st);
    if (++next == reports.size()) next = 0;
  }
  state.SetItemsProcessed(state.iterations());
}

void RegisterCurator() {
  const std::pair<MechanismKind, absl::string_view> kinds[] = {
      {MechanismKind::kHds, "hds/d:1433/k:10"},
      {MechanismKind::kMultiBit, "multibit/d:1433/m:10"}};
  for (const auto& [kind, label] : kinds) {
    MechanismSpec spec;
    spec.kind = kind;
    spec.dimension = 1433;
    spec.sampled = 10;
    spec.epsilon = 1.0;
    benchmark::RegisterBenchmark(
        absl::StrCat("BM_Estimate/", label, "/eps:1").c_str(), BM_Estimate,
        spec);
    benchmark::RegisterBenchmark(
        absl::StrCat("BM_ValidateReport/", label, "/eps:1").c_str(),
        BM_ValidateReport, spec);
  }
}

// The screen over n reports' sampled dimensions: k of d uniformly (seeded,
// as HDS samples them), the first attacked_pct % of the nodes on k of the
// target dimensions 0..9 instead.
void BM_Screen(benchmark::State& state, uint32_t n, int d, int k,
               int attacked_pct) {
  pipeline::ReportedDims reports;
  SeededRandomForTesting rng(7);
  std::vector<uint32_t> target(k);
  for (uint32_t v = 0; v < n; ++v) {
    if (v < uint64_t{n} * attacked_pct / 100) {
      for (int j = 0; j < k; ++j) target[j] = (v + j) % 10;
      std::sort(target.begin(), target.end());
      reports.Add(v, target);
    } else {
      reports.Add(v, rng.SampleWithoutReplacement(d, k));
    }
  }
  size_t flagged = 0;
  for (auto _ : state) {
    auto s = pipeline::ScreenReports(reports, d, k, 1e-3);
    if (!s.ok()) {
      state.SkipWithError(std::string(s.status().message()).c_str());
      return;
    }
    flagged = s->flagged.size();
    benchmark::DoNotOptimize(s->flagged.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["flagged"] = static_cast<double>(flagged);
}

void RegisterScreen() {
  constexpr uint32_t kReports = 1000000;
  for (int k : {1, 10}) {
    for (int pct : {0, 5}) {
      benchmark::RegisterBenchmark(
          absl::StrCat("BM_Screen/n:", kReports, "/d:1433/k:", k,
                       "/attacked:", pct)
              .c_str(),
          BM_Screen, kReports, 1433, k, pct)
          ->Unit(benchmark::kMillisecond);
    }
  }
}

// --- raw random sources -------------------------------------------------------------

void BM_Next64(benchmark::State& state, Source source) {
  auto rng = MakeSource(source, state);
  if (rng == nullptr) return;
  RandomSource& r = *rng;
  for (auto _ : state) benchmark::DoNotOptimize(r.Next64());
  state.SetItemsProcessed(state.iterations());
}

void BM_UniformDouble(benchmark::State& state, Source source) {
  auto rng = MakeSource(source, state);
  if (rng == nullptr) return;
  RandomSource& r = *rng;
  for (auto _ : state) benchmark::DoNotOptimize(r.UniformDouble());
  state.SetItemsProcessed(state.iterations());
}

void BM_SampleWithoutReplacement(benchmark::State& state, Source source) {
  auto rng = MakeSource(source, state);
  if (rng == nullptr) return;
  RandomSource& r = *rng;
  for (auto _ : state) {
    auto idx = r.SampleWithoutReplacement(1433, 10);
    benchmark::DoNotOptimize(idx);
  }
  state.SetItemsProcessed(state.iterations());
}

void RegisterRandomSources() {
  for (Source s : kSources) {
    benchmark::RegisterBenchmark(
        absl::StrCat("BM_RandomSource/Next64/", SourceName(s)).c_str(),
        BM_Next64, s);
    benchmark::RegisterBenchmark(
        absl::StrCat("BM_RandomSource/UniformDouble/", SourceName(s)).c_str(),
        BM_UniformDouble, s);
    benchmark::RegisterBenchmark(
        absl::StrCat("BM_RandomSource/SampleWithoutReplacement/d:1433/k:10/",
                     SourceName(s))
            .c_str(),
        BM_SampleWithoutReplacement, s);
  }
}

// Sealed relay messages (common/crypto/sealed.h): deriving a pair's key
// (X25519 + HKDF) and sealing / opening a box of `bytes`.
void BM_SealedDeriveKey(benchmark::State& state) {
  auto a = crypto::KeyPair::Generate();
  auto b = crypto::KeyPair::Generate();
  for (auto _ : state) {
    auto key = crypto::SealingKey::Outgoing(*a, b->public_key());
    benchmark::DoNotOptimize(key);
  }
}

void BM_SealedSealOpen(benchmark::State& state) {
  auto a = crypto::KeyPair::Generate();
  auto b = crypto::KeyPair::Generate();
  auto out = crypto::SealingKey::Outgoing(*a, b->public_key());
  auto in = crypto::SealingKey::Incoming(*b, a->public_key());
  const std::string plain(static_cast<size_t>(state.range(0)), 'x');
  for (auto _ : state) {
    auto box = out->Seal("ctx", plain);
    auto opened = in->Open("ctx", *box);
    benchmark::DoNotOptimize(opened);
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

void RegisterSealed() {
  benchmark::RegisterBenchmark("BM_Sealed/DeriveKey", BM_SealedDeriveKey);
  for (int bytes : {64, 1024, 65536}) {
    benchmark::RegisterBenchmark(absl::StrCat("BM_Sealed/SealOpen/bytes:", bytes).c_str(),
                                 BM_SealedSealOpen)
        ->Arg(bytes);
  }
}

// Registration at static-initialisation time; benchmark_main runs them.
const bool kRegistered = [] {
  RegisterFeatureMechanisms();
  RegisterRandomizedResponse();
  RegisterCurator();
  RegisterScreen();
  RegisterRandomSources();
  RegisterSealed();
  return true;
}();

}  // namespace
}  // namespace ldpgraph
