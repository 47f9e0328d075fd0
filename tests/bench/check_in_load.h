// fleet_load --check-in: the curator under a population of devices that
// check in, answer and leave (agent.proto CheckIn), measured. See
// CheckInLoadUsage().
#pragma once

#include <string>
#include <vector>

namespace ldpgraph::bench {

// Runs the check-in load with args (fleet_load's, "--check-in" removed).
// Exit code 0 only if every device answered once with no error and no
// node spent more than the campaign's epsilon.
int RunCheckInLoad(const std::vector<std::string>& args);

std::string CheckInLoadUsage();

}  // namespace ldpgraph::bench
