// The seeds of a pipeline run's randomness (pipeline.h, "Randomness"): each
// run r of a seed s draws every stream from (s, r, stage), by splitmix64
// steps (common/random/seed_mix.h), so runs are independent and any single run can
// be replayed. Part of the configuration library (config.h): a simulated
// deployment gives its agents NoiseSeed(s, 0) to reproduce run 0.
#pragma once

#include <cstdint>

namespace ldpgraph::pipeline {

// The streams of a run: the split, the privacy noise, the model's
// initialisation (and training randomness).
// kBaseline: the baselines' own public draws (baselines.h).
enum class Stage : uint64_t { kSplit = 1, kNoise = 2, kModel = 4, kBaseline = 8 };

// An independent 64-bit seed per (seed, run, stage).
uint64_t StageSeed(uint64_t seed, int run, Stage stage);

// The seed of run's privacy noise, StageSeed(seed, run, kNoise): what a
// simulated deployment gives its agents to reproduce run `run` of seed.
// Node v draws from SeededRandomForTesting(NodeNoiseSeed(NoiseSeed(seed,
// run), v)).
uint64_t NoiseSeed(uint64_t seed, int run);

}  // namespace ldpgraph::pipeline
