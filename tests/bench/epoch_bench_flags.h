// The command line both epoch benchmarks (mlp_epoch_bench, sage_epoch_bench)
// share: their own flags plus --epochs, --hidden, --threads and --seed,
// parsed by common/cli_args.h (an unknown flag, a missing or malformed
// value is an error naming the flag).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "common/cli_args.h"

namespace ldpgraph::bench {

struct EpochBenchFlags {
  CliArgs args;  // the program's own flags: args.Get("...")
  int epochs = 0;
  int hidden = 0;
  int threads = 1;
  uint64_t seed = 1;
};

// "<program>: <message>" on stderr, exit 1.
[[noreturn]] inline void Die(const std::string& program,
                             const std::string& message) {
  std::cerr << program << ": " << message << "\n";
  std::exit(1);
}

// Prints `usage` and exits 0 for --help; dies on a bad command line or
// --threads < 1.
inline EpochBenchFlags ParseEpochBenchFlags(int argc, char** argv,
                                            const std::string& program,
                                            const char* usage,
                                            std::set<std::string> own,
                                            int default_epochs,
                                            int default_hidden) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (WantsHelp(args)) {
    std::puts(usage);
    std::exit(0);
  }
  own.insert({"epochs", "hidden", "threads", "seed"});
  absl::StatusOr<CliArgs> a = CliArgs::Parse(args, own, {});
  if (!a.ok()) Die(program, std::string(a.status().message()));
  EpochBenchFlags f{*std::move(a), default_epochs, default_hidden};
  auto get_int = [&](const char* name, int* out) {
    absl::StatusOr<std::optional<int64_t>> v = f.args.GetInt(name);
    if (!v.ok()) Die(program, std::string(v.status().message()));
    if (*v) *out = static_cast<int>(**v);
  };
  get_int("epochs", &f.epochs);
  get_int("hidden", &f.hidden);
  get_int("threads", &f.threads);
  absl::StatusOr<std::optional<uint64_t>> seed = f.args.GetUint("seed");
  if (!seed.ok()) Die(program, std::string(seed.status().message()));
  if (*seed) f.seed = **seed;
  if (f.threads < 1) Die(program, "--threads must be >= 1");
  return f;
}

}  // namespace ldpgraph::bench
