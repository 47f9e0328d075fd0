// fleet_load: the curator under a fleet of agent hosts, measured.
//
// Starts a real ldpgraph-curator (on 127.0.0.1, plaintext or with --tls real
// TLS, its state in a temporary folder) and puts a fleet in front of it, in
// one of two modes:
//
//  * simulated hosts (default): --hosts H agent hosts, each with its own
//    gRPC channel and TCP connection, owning --nodes-per-host nodes with
//    valid credentials. Every host enrols, holds a Subscribe stream open and
//    answers each task it gets on a Report stream, as ldpgraph-agent does
//    (one stream per task, batches of --batch reports): k-ary randomized
//    response for a label campaign, HDS for a features campaign. The hosts
//    are spread over --processes worker processes driven by gRPC's callback
//    API, so a handful of threads carry thousands of streams.
//  * real agents (--real-agents K): K ldpgraph-agent processes, each with a
//    contiguous shard of a generated dataset (the generator's defaults,
//    --nodes-per-host nodes per agent) and its own credentials file.
//
// Once every host has enrolled and subscribed, one campaign over all nodes
// is created through the admin API and waited for until every node has
// reported (or --timeout), and with --hold the fleet stays connected a while
// longer. Meanwhile a separate thread calls admin GetStatus every
// --status-interval-ms and records its latency, by phase. At the end: a
// table on stderr and one JSON object on stdout with enrolment and campaign
// times, errors (failed enrols and streams, rejected reports, failed admin
// calls; the first three messages of each kind are printed), the curator's
// CPU seconds (in all and per phase), RSS, peak RSS and threads (from
// /proc/<pid>/stat and status, read while the fleet is still connected),
// GetStatus latency percentiles, the worker processes' CPU seconds, and,
// with real agents, their CPU and RSS. Exit status 0 only when the campaign
// completed without a single error.
//
// Scenarios (off by default): --latency, --jitter and --loss put every
// host's connection through one fault-injecting TCP proxy in this process
// (common/net/fault_proxy.h: delays per chunk, so each connection gets its
// own; the admin and GetStatus channels stay direct), and --dropout F leaves
// each node offline with probability F (SimulatedOffline, seed 1): it never
// enrols nor answers (a simulated host whose nodes are all offline never
// connects), the campaign closes on its --campaign-deadline (default 30 s
// under dropout), and it counts as complete when every online node reported.
//
// A simulated host does not reconnect: unlike ldpgraph-agent, which backs
// off, enrols again and is re-sent its pending tasks, a host whose call
// fails counts an error and stays down, so that a curator that refuses load
// (RESOURCE_EXHAUSTED, say) shows as errors rather than as slow progress.
//
//   build/bench/fleet_load --hosts 200
//   build/bench/fleet_load --hosts 2000 --processes 4 --nodes-per-host 10
//   build/bench/fleet_load --real-agents 20 --nodes-per-host 100
//   build/bench/fleet_load --hosts 1000 --curator-args "--sync normal"
//
// The binaries are looked for beside fleet_load and one or two folders up
// (the build tree puts benchmarks in build/bench and the programs in build/);
// --curator and --agent override. Progress goes to stderr. The soft limit on
// open files is raised to the hard limit (the curator inherits it): each
// simulated host holds one socket in its worker and one in the curator.
// Not a CTest test: run it by hand.
#include <sys/resource.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "common/cli_args.h"
#include "tests/bench/check_in_load.h"
#include "tests/bench/fleet_load_options.h"
#include "tests/bench/fleet_load_run.h"
#include "tests/bench/load_util.h"

// The parts: fleet_load_options (flags), fleet_load_workers (simulated
// hosts), fleet_load_admin (admin calls, GetStatus sampling, progress),
// fleet_load_run (driving) and fleet_load_report (the table and the JSON).
namespace {

using ldpgraph::bench::OnInterrupt;
using ldpgraph::bench::fleet::kUsage;
using ldpgraph::bench::fleet::ParseOptions;
using ldpgraph::bench::fleet::Run;

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (auto it = std::find(args.begin(), args.end(), "--check-in"); it != args.end()) {
    args.erase(it);
    if (ldpgraph::WantsHelp(args)) {
      std::cout << ldpgraph::bench::CheckInLoadUsage();
      return 0;
    }
    rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
      nofile.rlim_cur = nofile.rlim_max;
      setrlimit(RLIMIT_NOFILE, &nofile);
    }
    std::signal(SIGINT, OnInterrupt);
    std::signal(SIGTERM, OnInterrupt);
    std::signal(SIGPIPE, SIG_IGN);
    return ldpgraph::bench::RunCheckInLoad(args);
  }
  if (ldpgraph::WantsHelp(args)) {
    std::cout << kUsage;
    return 0;
  }
  auto options = ParseOptions(args);
  if (!options.ok()) {
    std::cerr << "fleet_load: " << options.status().message()
              << "\nRun fleet_load --help for the flags.\n";
    return 2;
  }
  // Every simulated host holds a socket here and one in the curator, which
  // inherits this limit.
  rlimit nofile;
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  getrlimit(RLIMIT_NOFILE, &nofile);
  const uint64_t per_worker =
      options->real_agents > 0 ? 0 : (options->hosts + options->processes - 1) / options->processes;
  if (options->real_agents == 0 && (options->hosts + 200 > static_cast<int64_t>(nofile.rlim_cur) ||
                                    per_worker + 200 > nofile.rlim_cur)) {
    std::cerr << "fleet_load: warning: open-file limit " << nofile.rlim_cur << " is tight for "
              << options->hosts << " hosts (the curator needs one per host)\n";
  }
  std::signal(SIGINT, OnInterrupt);
  std::signal(SIGTERM, OnInterrupt);
  std::signal(SIGPIPE, SIG_IGN);
  Run run(*std::move(options));
  return run.Main();
}
