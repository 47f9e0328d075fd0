// The flags of ldpgraph-agent (client/agent_host_main.cc): its usage text,
// and the command line read into an AgentHostConfig one group of flags at
// a time (the curator and TLS, the shard, the policy, the simulations, the
// sending, check-in mode, the host's name). Internal to that binary.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/agent.h"
#include "client/agent_host.h"
#include "client/check_in.h"
#include "common/dataset/dataset.h"

namespace ldpgraph::agent {

// What ldpgraph-agent's flags say.
struct AgentHostConfig {
  AgentHostOptions host;
  std::string dataset, state_dir, http = "0.0.0.0:9091";
  uint32_t begin = 0, end = 0;
  bool from_curator = false;
  bool sealing_keys = true;  // --no-sealing-keys
  ldpgraph::FeatureScaling scaling = ldpgraph::FeatureScaling::kSymmetric;
  ldpgraph::agent::AgentPolicy policy;
  std::optional<uint64_t> seed;
  // Simulated dropout: nodes drawn offline are left out of the shard.
  double offline = 0;
  uint64_t offline_seed = 1;
  // Simulated poisoning (--malicious and the attack flags): off while
  // attack.settings.fraction is 0.
  ldpgraph::agent::SimulatedAttackFlags attack;
  // --check-in: a device that visits instead of a host with a stream.
  bool check_in = false;
  ldpgraph::agent::CheckInOptions visits;
};

// ldpgraph-agent's --help text.
std::string AgentHostUsage();

// The flags of args (the command line without the program's name), read
// and checked; reads the --credentials file (and --ca's). INVALID_ARGUMENT
// naming the first flag that is wrong, missing or does not apply;
// ReadFileToString's errors for a file that cannot be read.
absl::StatusOr<AgentHostConfig> ParseAgentHostFlags(
    const std::vector<std::string>& args);

}  // namespace ldpgraph::agent
