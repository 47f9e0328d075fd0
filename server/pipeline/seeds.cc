#include "server/pipeline/seeds.h"

#include "common/random/seed_mix.h"

namespace ldpgraph::pipeline {

uint64_t StageSeed(uint64_t seed, int run, Stage stage) {
  return SeedMix(SeedMix(SeedMix(seed) ^ static_cast<uint64_t>(run)) ^
                 static_cast<uint64_t>(stage));
}

uint64_t NoiseSeed(uint64_t seed, int run) {
  return StageSeed(seed, run, Stage::kNoise);
}

}  // namespace ldpgraph::pipeline
