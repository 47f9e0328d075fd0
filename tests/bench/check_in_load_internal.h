// Internal to fleet_load --check-in (check_in_load.cc, which drives the run,
// and check_in_load_worker.cc, a worker process's devices): what the two
// share. Benchmark code, not a library of the system.
#pragma once

#include <cstdint>
#include <string>

namespace ldpgraph::bench::check_in {

// The name the curator's certificate is made for and checked against.
constexpr char kTlsName[] = "localhost";

// A worker process: devices [first, end), their visits, and its two pipe
// ends (up: its figures to the parent; down: the parent's go).
struct WorkerConfig {
  uint32_t first = 0, end = 0;
  int threads = 32;
  int visits = 1;
  bool resume = true;
  double window = 300;
  std::string node_key, ca_pem;
  int up_fd = -1, down_fd = -1;
};

// A forked worker process's life: waits for the parent's go,
// "<target> <monotonic start>\n" on down_fd, lets its devices visit the
// target with c.threads at a time, writes its figures (counters,
// "cpu_seconds", "visit_ms", "first_errors") to up_fd as one JSON line and
// exits (2: no go line; 3: the figures could not be written).
[[noreturn]] void RunWorker(WorkerConfig c);

}  // namespace ldpgraph::bench::check_in
