// Randomness for ldpgraph: the one secure source every agent perturbs with,
// and the seeded generator that tests and simulations use instead.
//
// Every draw of noise in ldpgraph goes through a RandomSource. Production code
// builds a SecureRandom (OpenSSL's CSPRNG, buffered). A SeededRandomForTesting
// is reproducible and therefore NOT differentially private: it exists so that
// tests and simulations can be replayed, and says so in its name and in
// is_secure(); tools print a warning when they use it.
//
// The sources, and what each is for:
//   SecureRandom, ThreadSecureRandom  perturbation noise: OpenSSL's CSPRNG.
//   SecureRandomBytes                 secrets and bearer tokens.
//   KeyedChaCha20Random               a stream that is a deterministic
//                                     function of a secret key, for a party
//                                     that must replay its draws exactly
//                                     (a node's part in a neighbour
//                                     substitution exchange). Secure while
//                                     the key is secret; never a stand-in
//                                     for SecureRandom's noise.
//   SeededRandomForTesting            tests and simulations; NOT private.
//   PublicRandom                      public choices (generation, splits,
//                                     initialisation); never noise.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ldpgraph {

// A stream of independent uniform 64-bit words, with the derived draws the
// mechanisms need. Not thread-safe: give each thread (and, in an agent host,
// each logical agent) its own source.
//
// Also a UniformRandomBitGenerator, so it can drive <random> distributions
// where exactness does not matter (shuffles in simulations, say).
class RandomSource {
 public:
  using result_type = uint64_t;
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() {
    return std::numeric_limits<uint64_t>::max();
  }

  virtual ~RandomSource() = default;

  // The next uniformly distributed 64-bit word.
  virtual uint64_t Next64() = 0;
  // True only for a cryptographically secure source.
  virtual bool is_secure() const = 0;
  // A short name for logs and tool output ("secure", "seeded-not-private").
  virtual absl::string_view name() const = 0;

  result_type operator()() { return Next64(); }

  // Uniform on [0, 1): a multiple of 2^-53, from 53 random bits.
  double UniformDouble() { return (Next64() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n), n >= 1, without modulo bias (Lemire 2019).
  uint64_t UniformInt(uint64_t n);

  // True with probability p (clamped to [0, 1]), to within 2^-64.
  bool Bernoulli(double p);

  // k distinct indices chosen uniformly from [0, d), returned ascending.
  // Requires 0 <= k <= d. O(k log k) for small k, O(d) when k is a large
  // fraction of d.
  std::vector<uint32_t> SampleWithoutReplacement(uint32_t d, uint32_t k);
};

// Fisher-Yates with rng: every permutation equally likely, and the same one
// for the same generator state on every platform (std::shuffle's algorithm
// is not specified).
template <typename T>
void Shuffle(std::vector<T>& v, RandomSource& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    std::swap(v[i - 1], v[rng.UniformInt(i)]);
  }
}

// OpenSSL's CSPRNG (RAND_bytes, the DRBG seeded by the operating system),
// read in 4 KiB blocks so that a draw costs a few nanoseconds. The buffer is
// discarded in a child after fork(), so a parent and child never share
// random bytes.
class SecureRandom final : public RandomSource {
 public:
  // Fails with INTERNAL if OpenSSL cannot produce random bytes.
  static absl::StatusOr<std::unique_ptr<SecureRandom>> Create();

  uint64_t Next64() override;
  bool is_secure() const override { return true; }
  absl::string_view name() const override { return "secure"; }

 private:
  SecureRandom() = default;
  void Refill();

  static constexpr int kWords = 512;  // 4 KiB
  uint64_t buffer_[kWords];
  int next_ = kWords;
  uint64_t fork_generation_ = 0;
};

// OpenSSL's CSPRNG as SecureRandom, drawn through one SecureRandom per
// thread that every ThreadSecureRandom shares: a source per logical agent
// (an agent host holds hundreds of thousands) without a 4 KiB buffer, and a
// 4 KiB refill, apiece. An object holds no state; each may be used from any
// thread (not by two at once, as every RandomSource). A thread's buffer is
// made on its first draw; on a failure of OpenSSL there it aborts, as
// SecureRandom's refill does.
class ThreadSecureRandom final : public RandomSource {
 public:
  // Fails with INTERNAL if OpenSSL cannot produce random bytes.
  static absl::StatusOr<std::unique_ptr<ThreadSecureRandom>> Create();

  uint64_t Next64() override;
  bool is_secure() const override { return true; }
  absl::string_view name() const override { return "secure"; }

 private:
  ThreadSecureRandom() = default;
};

// n bytes straight from OpenSSL's CSPRNG, for secrets and bearer tokens.
// INTERNAL if OpenSSL cannot produce them.
absl::StatusOr<std::string> SecureRandomBytes(size_t n);

// ChaCha20's keystream under a 32-byte secret key (RFC 8439's block
// function through OpenSSL, zero nonce, block counter from 0), read 4 KiB at
// a time: word i is keystream bytes 8i..8i+7 read as a little-endian
// integer. Deterministic given its key: the same key gives the same stream,
// on every run and every (little-endian) platform. For a party that must
// replay its draws exactly: a node's part in a neighbour substitution
// exchange, which an agent host restarted mid-exchange repeats word for
// word (client/edge_exchange.h keys it by HKDF of the node's private key
// and the campaign; the exchange's drops, dummies and shuffles come from
// it). Secure only while its key is secret and keys this one stream. It is
// not the secure generator: a node's answers to the curator's questions
// are perturbed with SecureRandom (or ThreadSecureRandom), never with a
// stream someone holding the key could recompute. Like SecureRandom, it
// aborts if OpenSSL fails mid-stream, and zeroes each word once drawn.
class KeyedChaCha20Random final : public RandomSource {
 public:
  static constexpr size_t kKeyBytes = 32;

  // The stream of key. INVALID_ARGUMENT unless key holds kKeyBytes bytes;
  // INTERNAL if OpenSSL cannot set up ChaCha20. Keeps no copy of the key
  // beyond OpenSSL's cipher state; the caller may wipe its own.
  static absl::StatusOr<std::unique_ptr<KeyedChaCha20Random>> Create(
      absl::Span<const uint8_t> key);
  ~KeyedChaCha20Random() override;

  uint64_t Next64() override;
  bool is_secure() const override { return true; }
  absl::string_view name() const override { return "keyed-chacha20"; }

 private:
  struct Cipher;  // OpenSSL's cipher context, owned
  explicit KeyedChaCha20Random(std::unique_ptr<Cipher> cipher);
  void Refill();

  static constexpr int kWords = 512;  // 4 KiB
  std::unique_ptr<Cipher> cipher_;
  uint64_t buffer_[kWords] = {};
  int next_ = kWords;
};

// xoshiro256** seeded through splitmix64: fast and reproducible.
// Use only for testing and simulations. Not differentially private: anyone who
// knows the seed can undo the noise.
class SeededRandomForTesting final : public RandomSource {
 public:
  explicit SeededRandomForTesting(uint64_t seed);

  uint64_t Next64() override;
  bool is_secure() const override { return false; }
  absl::string_view name() const override { return "seeded-not-private"; }

 private:
  uint64_t s_[4];
};

// Reproducible randomness for public choices that need no secrecy: dataset
// generation, train/test splits, model initialisation. The same generator as
// SeededRandomForTesting, named for what it is allowed to do; never a source
// of privacy noise (that is SecureRandom's job).
using PublicRandom = SeededRandomForTesting;

// The seed of node's noise stream in a seeded simulation:
//   s = mix(seed ^ 0x6e6f697365763031)            ("noisev01")
//   NodeNoiseSeed = mix(s + 0x9e3779b97f4a7c15 * (node + 1))
// where mix is the splitmix64 finaliser
//   z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
//   z = (z ^ (z >> 27)) * 0x94d049bb133111eb;  return z ^ (z >> 31).
// Distinct nodes get distinct seeds (mix is a bijection), and the constant
// separates these streams from the dataset generator's, which use the same
// construction without it. An agent given --seed S draws node's noise
// from SeededRandomForTesting(NodeNoiseSeed(S, node)), every answer in
// turn; the pipeline's seeded simulation (server/pipeline) draws from the
// same streams, so a simulated deployment and `ldpgraph eval` agree.
uint64_t NodeNoiseSeed(uint64_t seed, uint32_t node);

// The seed of the edge answers' streams beside the streams of seed:
//   EdgeStreamSeed = mix'(seed ^ 0x6564676573763031)   ("edgesv01")
// with mix' one splitmix64 step (common/random/seed_mix.h SeedMix). A seeded agent
// draws node's edge answers (randomized response, Blink, the fake-edges
// attacker's) from SeededRandomForTesting(NodeNoiseSeed(EdgeStreamSeed(S),
// node)), its features and label from NodeNoiseSeed(S, node): asking for
// the graph first leaves the features' noise as it was, and the pipeline's
// seeded edges campaign (server/pipeline/private_edges.h) draws from the
// same edge streams.
uint64_t EdgeStreamSeed(uint64_t seed);

// The warning tools print when a seeded generator replaces the secure one.
inline constexpr absl::string_view kSeededWarning =
    "WARNING: seeded random generator in use: reproducible, for tests and "
    "simulations only, NOT differentially private.";

}  // namespace ldpgraph
