// Deriving seeds from seeds: one splitmix64 step (Steele, Lea and Flood,
// 2014). A bijection on 64-bit values whose outputs for nearby inputs look
// independent, used to give every (seed, run, stage) and (seed, node) its
// own stream. Only for seeded simulations and public randomness; privacy
// noise comes from SecureRandom.
#pragma once

#include <cstdint>

namespace ldpgraph {

// The splitmix64 finaliser.
inline uint64_t SeedFinalise(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// One splitmix64 step from x: the finaliser of x + the golden gamma.
inline uint64_t SeedMix(uint64_t x) {
  return SeedFinalise(x + 0x9e3779b97f4a7c15ULL);
}

// Whether node `node` is offline in a simulation of dropout: each node on
// its own with probability `fraction`, the same answer for the same (seed,
// node) in every process, so the agent hosts that hold the nodes and the
// simulation that waits for them agree without talking. A simulation's
// design, public; never a privacy draw.
inline bool SimulatedOffline(uint64_t seed, uint32_t node, double fraction) {
  if (!(fraction > 0)) return false;
  const uint64_t z = SeedFinalise(SeedMix(seed ^ 0x6f66666c696e6521ULL) ^ node);
  return static_cast<double>(z >> 11) * 0x1.0p-53 < fraction;
}

// Whether node `node` is controlled by the attacker in a simulation of data
// poisoning (common/attacks/poisoning.h): each node on its own with
// probability `fraction`, a fixed answer per (seed, node) in every process.
// Its own stream, independent of SimulatedOffline's under the same seed, so
// that dropout and malice are independent draws (a node drawn both is
// offline: it sends nothing). A simulation's design, public; never a
// privacy draw.
inline bool SimulatedMalicious(uint64_t seed, uint32_t node, double fraction) {
  if (!(fraction > 0)) return false;
  const uint64_t z = SeedFinalise(SeedMix(seed ^ 0x6d616c6963652121ULL) ^ node);
  return static_cast<double>(z >> 11) * 0x1.0p-53 < fraction;
}

}  // namespace ldpgraph
