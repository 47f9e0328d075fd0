// fleet_load's options (its flags: kUsage) and what every part of the tool
// reads besides them: the scenario's seed and the run's channel security.
// Benchmark code (tests/bench/fleet_load.cc), not a library of the system.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace ldpgraph::bench::fleet {

using json = nlohmann::json;

// The usage text (fleet_load --help).
extern const char kUsage[];

struct Options {
  int hosts = 1000;
  int nodes_per_host = 1;
  int processes = 1;
  // Niceness of the fleet's processes (workers, real agents): on a real
  // deployment the hosts are other machines, so here they must not take the
  // curator's CPU.
  int fleet_nice = 10;
  int enrol_concurrency = 0;
  int batch = 512;
  int real_agents = 0;
  double churn = 0;  // --real-agents: the fraction killed mid-campaign
  std::string attribute = "label";
  double epsilon = 1.0;
  int classes = 6;
  int features = 64;
  int status_interval_ms = 50;
  double enrol_timeout = 120;
  double timeout = 300;
  double hold = 0;
  std::string curator_bin, agent_bin;
  std::vector<std::string> curator_args;
  std::string dir;
  bool keep = false;
  bool tls = false;
  // --edge (with --tls): the hosts reach the curator through HAProxy.
  bool edge = false;
  // --frontends N (with --edge): PostgreSQL, an operator and N frontends on
  // it, the edge spreading the hosts over the frontends.
  int frontends = 0;
  // Scenarios: the network (no proxy when all three are 0) and dropout.
  double latency_ms = 0, jitter_ms = 0, loss = 0;
  double dropout = 0;
  double campaign_deadline = 0;  // seconds; 0: none
  bool network() const { return latency_ms > 0 || jitter_ms > 0 || loss > 0; }
};

// Seed of the dropout draw and of the proxy's delays: fixed, so runs are
// comparable. A simulation's design, never privacy noise.
constexpr uint64_t kScenarioSeed = 1;

// Whether node v is offline under --dropout (SimulatedOffline, seed
// kScenarioSeed).
bool NodeOffline(const Options& o, uint32_t v);

// The flags (without the program name) as Options; INVALID_ARGUMENT naming
// the flag otherwise. Finds the binaries the run needs (beside fleet_load
// unless given) and checks they are executable.
absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args);

// --tls: the run's development CA (PEM), which every channel trusts; empty:
// plaintext. Set before the workers fork, so they inherit it.
extern std::string g_tls_ca_pem;  // NOLINT: one per process, set once
// The name the curator's certificate is made for and checked against.
constexpr char kTlsName[] = "localhost";

// A channel to target with the run's security (TLS or plaintext).
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           grpc::ChannelArguments args);

}  // namespace ldpgraph::bench::fleet
