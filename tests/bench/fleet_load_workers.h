// fleet_load's simulated agent hosts: worker processes, each carrying a
// share of the hosts on gRPC's callback API, and the parent's view of them
// (Fleet). Benchmark code (tests/bench/fleet_load.cc).
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/bench/fleet_load_options.h"

namespace ldpgraph::bench::fleet {

// --- simulated agent hosts (worker processes) -----------------------------------
//
// A worker owns hosts [first_host, end_host). It reports to the parent over a
// pipe, one line per message:
//   C <counters...>   cumulative counters (every 100 ms and at exit)
//   E <text>          one error message (the first few only)
// and takes commands on another: 'g' (start enrolling), 'q' or end of file
// (cancel every stream and exit).

struct WorkerConfig {
  int index = 0;
  int first_host = 0, end_host = 0;
  int nodes_per_host = 1;
  int enrol_concurrency = 0;
  int batch = 512;
  double dropout = 0;  // --dropout: offline nodes are left out of Enrol
  std::string target;
  std::string node_key;  // raw bytes
  int up_fd = -1, down_fd = -1;
};

// The counters a worker sends, in this order.
struct WorkerCounters {
  int64_t enrolled = 0;          // Enrol OK
  int64_t enrol_failed = 0;      // Enrol failed
  int64_t subscribe_failed = 0;  // task stream ended or failed (not at stop)
  int64_t tasks = 0;             // tasks received
  int64_t reported = 0;          // reports acknowledged OK
  int64_t rejected = 0;          // reports acknowledged with an error code
  int64_t report_failed = 0;     // Report streams that failed
  int64_t lost_nodes = 0;        // nodes of hosts that can no longer answer
  int64_t errors = 0;            // every error counted above (and others)
  int64_t last_ack_us = 0;       // monotonic time of the latest ack

  static constexpr int64_t WorkerCounters::*kFields[] = {
      &WorkerCounters::enrolled,         &WorkerCounters::enrol_failed,
      &WorkerCounters::subscribe_failed, &WorkerCounters::tasks,
      &WorkerCounters::reported,         &WorkerCounters::rejected,
      &WorkerCounters::report_failed,    &WorkerCounters::lost_nodes,
      &WorkerCounters::errors,           &WorkerCounters::last_ack_us};
};

// The parent's view of its workers.
class Fleet {
 public:
  struct Proc {
    pid_t pid = -1;
    int up = -1, down = -1;
    std::string buffer;
    WorkerCounters counters;
    bool closed = false;
  };

  // Forks the workers; call before this process touches gRPC.
  bool Start(const Options& o, const std::string& target, const std::string& node_key);

  std::vector<pid_t> pids() const {
    std::vector<pid_t> out;
    for (const auto& w : workers_) out.push_back(w.pid);
    return out;
  }

  void Go() {
    for (auto& w : workers_) (void)!write(w.down, "g", 1);
  }

  // Stops every worker: 'q', then up to 10 s for them to exit.
  void Stop();
  ~Fleet() { Stop(); }

  WorkerCounters Totals() const;
  // The first three messages of each kind of error, "kind text".
  std::vector<std::string> Messages() const;
  // A worker that died (not asked to stop): its description.
  std::optional<std::string> Died();

 private:
  void Read();

  std::vector<Proc> workers_;
  std::map<std::string, std::vector<std::string>> messages_;  // by kind
  mutable std::mutex mu_;
  std::thread reader_;
  std::atomic<bool> stopped_{false};
};

}  // namespace ldpgraph::bench::fleet
