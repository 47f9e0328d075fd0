// ldpctl: the curator's admin CLI and the one-command simulated deployment
// (server/ldpctl/commands.h, simulate.h).
#include <unistd.h>

#include <climits>
#include <iostream>
#include <string>
#include <vector>

#include "server/ldpctl/commands.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // ldpctl's own path, for simulate to find the curator and agent beside it.
  std::string self = argv[0];
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) self.assign(buf, static_cast<size_t>(n));
  return ldpgraph::ldpctl::RunLdpctl(args, self, std::cout, std::cerr);
}
