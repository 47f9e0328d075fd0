// Pieces every `ldpgraph` subcommand shares: the randomness source chosen
// from --seed, exit codes, and resource figures for --json reports.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>

#include "absl/status/statusor.h"
#include "common/random.h"

namespace ldpgraph::tool {

inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntimeError = 1;
inline constexpr int kExitUsageError = 2;

// The secure generator, or with a seed the reproducible one, after printing
// kSeededWarning to err (a seeded run is never private and must say so).
absl::StatusOr<std::unique_ptr<RandomSource>> MakeRandomSource(
    std::optional<uint64_t> seed, std::ostream& err);

// Peak resident set size of this process so far, in bytes (getrusage).
uint64_t PeakRssBytes();

}  // namespace ldpgraph::tool
