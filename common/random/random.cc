#include "common/random/random.h"
#include "common/random/seed_mix.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/crypto/openssl.h"
#include "common/status_macros.h"

namespace ldpgraph {
namespace {

// Bumped in every child process after fork(); a SecureRandom refills its
// buffer when the generation it read from differs.
std::atomic<uint64_t> g_fork_generation{1};

void OnFork() { g_fork_generation.fetch_add(1, std::memory_order_relaxed); }

uint64_t CurrentForkGeneration() {
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, OnFork);
    return true;
  }();
  (void)registered;
  return g_fork_generation.load(std::memory_order_relaxed);
}

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

uint64_t NodeNoiseSeed(uint64_t seed, uint32_t node) {
  constexpr auto mix = SeedFinalise;
  const uint64_t s = mix(seed ^ 0x6e6f697365763031ULL);  // "noisev01"
  return mix(s + 0x9e3779b97f4a7c15ULL * (uint64_t{node} + 1));
}

uint64_t EdgeStreamSeed(uint64_t seed) {
  return SeedMix(seed ^ 0x6564676573763031ULL);  // "edgesv01"
}

uint64_t RandomSource::UniformInt(uint64_t n) {
  // Lemire's nearly-divisionless method: multiply, reject the biased sliver.
  unsigned __int128 m = static_cast<unsigned __int128>(Next64()) * n;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < n) {
    const uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(Next64()) * n;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

bool RandomSource::Bernoulli(double p) {
  if (!(p > 0.0)) return false;
  if (p >= 1.0) return true;
  // p * 2^64 as an integer threshold: exact for every p representable as a
  // double in (0, 1), since 2^64 * p loses no bits.
  const double scaled = std::ldexp(p, 64);
  const uint64_t threshold = static_cast<uint64_t>(scaled);
  return Next64() < threshold;
}

std::vector<uint32_t> RandomSource::SampleWithoutReplacement(uint32_t d,
                                                             uint32_t k) {
  std::vector<uint32_t> out;
  if (k == 0 || d == 0) return out;
  if (k >= d) {
    out.resize(d);
    std::iota(out.begin(), out.end(), 0u);
    return out;
  }
  out.reserve(k);
  if (static_cast<uint64_t>(k) * 16 <= d) {
    // Floyd's algorithm: k draws, each kept or replaced by the current top.
    for (uint32_t j = d - k; j < d; ++j) {
      const uint32_t t = static_cast<uint32_t>(UniformInt(uint64_t{j} + 1));
      if (std::find(out.begin(), out.end(), t) == out.end()) {
        out.push_back(t);
      } else {
        out.push_back(j);
      }
    }
  } else {
    // Partial Fisher-Yates over all indices.
    std::vector<uint32_t> all(d);
    std::iota(all.begin(), all.end(), 0u);
    for (uint32_t i = 0; i < k; ++i) {
      const uint32_t j = i + static_cast<uint32_t>(UniformInt(d - i));
      std::swap(all[i], all[j]);
    }
    out.assign(all.begin(), all.begin() + k);
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<std::unique_ptr<SecureRandom>> SecureRandom::Create() {
  auto rng = std::unique_ptr<SecureRandom>(new SecureRandom());
  if (RAND_status() != 1) {
    return absl::InternalError(
        "OpenSSL's random generator is not seeded (RAND_status() != 1)");
  }
  uint64_t probe;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&probe), sizeof(probe)) !=
      1) {
    return absl::InternalError(absl::StrCat(
        "OpenSSL RAND_bytes failed: error ", ERR_get_error()));
  }
  return rng;
}

void SecureRandom::Refill() {
  // RAND_bytes only fails when the operating system's entropy source is gone;
  // continuing with a stale or zero buffer would silently void every privacy
  // guarantee, so stopping is the lesser harm.
  if (RAND_bytes(reinterpret_cast<unsigned char*>(buffer_), sizeof(buffer_)) !=
      1) {
    std::abort();
  }
  next_ = 0;
  fork_generation_ = CurrentForkGeneration();
}

uint64_t SecureRandom::Next64() {
  if (next_ >= kWords || fork_generation_ != CurrentForkGeneration()) {
    Refill();
  }
  const uint64_t word = buffer_[next_];
  buffer_[next_++] = 0;  // a used word is never kept in memory
  return word;
}

absl::StatusOr<std::unique_ptr<ThreadSecureRandom>> ThreadSecureRandom::Create() {
  // The same checks as SecureRandom's, made here rather than on a thread's
  // first draw, and only until they pass once: a host makes one source per
  // node.
  static std::atomic<bool> checked{false};
  if (!checked.load(std::memory_order_acquire)) {
    RETURN_IF_ERROR(SecureRandom::Create().status());
    checked.store(true, std::memory_order_release);
  }
  return std::unique_ptr<ThreadSecureRandom>(new ThreadSecureRandom());
}

uint64_t ThreadSecureRandom::Next64() {
  thread_local std::unique_ptr<SecureRandom> source = [] {
    absl::StatusOr<std::unique_ptr<SecureRandom>> s = SecureRandom::Create();
    if (!s.ok()) std::abort();  // see SecureRandom::Refill
    return *std::move(s);
  }();
  return source->Next64();
}

SeededRandomForTesting::SeededRandomForTesting(uint64_t seed) {
  uint64_t state = seed;
  for (uint64_t& word : s_) word = SplitMix64(state);
}

absl::StatusOr<std::string> SecureRandomBytes(size_t n) {
  std::string out(n, '\0');
  if (n > 0 && RAND_bytes(reinterpret_cast<unsigned char*>(out.data()),
                          static_cast<int>(n)) != 1) {
    return absl::InternalError(absl::StrCat(
        "OpenSSL RAND_bytes failed: error ", ERR_get_error()));
  }
  return out;
}

struct KeyedChaCha20Random::Cipher {
  crypto::EvpCipherCtx ctx;
};

absl::StatusOr<std::unique_ptr<KeyedChaCha20Random>>
KeyedChaCha20Random::Create(absl::Span<const uint8_t> key) {
  if (key.size() != kKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a ChaCha20 key holds ", kKeyBytes, " bytes, got ", key.size()));
  }
  auto cipher = std::make_unique<Cipher>();
  cipher->ctx.reset(EVP_CIPHER_CTX_new());
  const uint8_t iv[16] = {};  // block counter and nonce, all zero
  if (!cipher->ctx || EVP_EncryptInit_ex(cipher->ctx.get(), EVP_chacha20(),
                                         nullptr, key.data(), iv) != 1) {
    return crypto::OpenSslError("ChaCha20 init");
  }
  return std::unique_ptr<KeyedChaCha20Random>(
      new KeyedChaCha20Random(std::move(cipher)));
}

KeyedChaCha20Random::KeyedChaCha20Random(std::unique_ptr<Cipher> cipher)
    : cipher_(std::move(cipher)) {}

KeyedChaCha20Random::~KeyedChaCha20Random() = default;

void KeyedChaCha20Random::Refill() {
  // ChaCha20 encrypts by XOR with its keystream: encrypting zeros yields it.
  static const uint8_t kZeros[kWords * 8] = {};
  int len = 0;
  if (EVP_EncryptUpdate(cipher_->ctx.get(), reinterpret_cast<uint8_t*>(buffer_),
                        &len, kZeros, sizeof(kZeros)) != 1 ||
      len != static_cast<int>(sizeof(kZeros))) {
    // Continuing would draw non-random "noise": stop instead.
    std::cerr << "ldpgraph: FATAL: ChaCha20 keystream failed\n";
    std::abort();
  }
  next_ = 0;
}

uint64_t KeyedChaCha20Random::Next64() {
  if (next_ == kWords) Refill();
  const uint64_t w = buffer_[next_];
  buffer_[next_++] = 0;  // a used word is never kept in memory
  return w;
}

uint64_t SeededRandomForTesting::Next64() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

}  // namespace ldpgraph
