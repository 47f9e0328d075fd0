// Sealed messages between two agents, relayed by an untrusted curator.
//
// Each node holds an X25519 key pair. A message from A to B is sealed under
// a key only A and B can derive:
//   shared = X25519(A's private key, B's public key)      (= X25519(b, A))
//   key    = HKDF-SHA256(ikm = shared,
//                        salt = "ldpgraph-sealed-v1",
//                        info = A's public key || B's public key), 32 bytes
//   box    = 0x01 || nonce (12 random bytes from OpenSSL) ||
//            ChaCha20-Poly1305(key, nonce, plaintext,
//                              aad = "ldpgraph-sealed-v1" || context) || tag
// The direction is bound by the order of the public keys in info: a box
// from A to B does not open as a box from B to A. `context` is authenticated
// but not sent: both ends must agree on it (campaign, sender and recipient
// ids, the step of the protocol), so the relay cannot move a box from one
// exchange or step to another.
//
// What this gives, given authentic public keys: the relay reads no payload
// and any change to a box, its context or its direction is detected. It
// does not hide the metadata the relay sees (who writes to whom, when, the
// box's length), nor replays of a whole box: a protocol that must not act
// twice on one message puts a message id in the plaintext and drops repeats.
// No forward secrecy: both keys are long-term, so whoever later learns a
// node's private key opens every box to or from it.
//
// Cost: one X25519 agreement and one HKDF per Seal/Open; a protocol that
// sends many boxes to one peer derives the key once (SealingKey).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ldpgraph::crypto {

inline constexpr size_t kKeyBytes = 32;
inline constexpr size_t kNonceBytes = 12;
inline constexpr size_t kTagBytes = 16;
// Bytes a box adds to its plaintext: version, nonce, tag.
inline constexpr size_t kSealOverhead = 1 + kNonceBytes + kTagBytes;

// A node's X25519 key pair. Copyable value of 64 bytes, no heap (an agent
// host holds one per node); the private half never leaves the agent that
// made it.
class KeyPair {
 public:
  // A new key pair from OpenSSL's generator. INTERNAL if OpenSSL fails.
  static absl::StatusOr<KeyPair> Generate();
  // The key pair of a stored private key (32 bytes; INVALID_ARGUMENT
  // otherwise).
  static absl::StatusOr<KeyPair> FromPrivate(absl::string_view private_key);

  // Raw 32-byte keys (RFC 7748 encoding), valid while the pair lives.
  absl::string_view public_key() const {
    return absl::string_view(public_.data(), public_.size());
  }
  absl::string_view private_key() const {
    return absl::string_view(private_.data(), private_.size());
  }

 private:
  using Key = std::array<char, kKeyBytes>;
  KeyPair(const Key& priv, const Key& pub) : private_(priv), public_(pub) {}
  Key private_;
  Key public_;
};

// The symmetric key of one direction, sender -> recipient. Derive it once
// per peer and reuse it for many boxes.
class SealingKey {
 public:
  // For boxes from `self` to the node whose public key is `peer`
  // (outgoing) or from that node to `self` (incoming). INVALID_ARGUMENT
  // for a public key that is not 32 bytes or is a low-order point (the
  // agreement would be all zeros); INTERNAL if OpenSSL fails.
  static absl::StatusOr<SealingKey> Outgoing(const KeyPair& self,
                                             absl::string_view peer);
  static absl::StatusOr<SealingKey> Incoming(const KeyPair& self,
                                             absl::string_view peer);

  // A box of plaintext (at most 16 MiB: INVALID_ARGUMENT otherwise) under
  // context. Every call draws a fresh nonce.
  absl::StatusOr<std::string> Seal(absl::string_view context,
                                   absl::string_view plaintext) const;
  // The plaintext of a box sealed under the same key and context.
  // INVALID_ARGUMENT for a box too short or of an unknown version;
  // UNAUTHENTICATED if it does not verify (changed, another context,
  // another direction or pair of nodes).
  absl::StatusOr<std::string> Open(absl::string_view context,
                                   absl::string_view box) const;

 private:
  explicit SealingKey(std::array<uint8_t, kKeyBytes> key) : key_(key) {}
  std::array<uint8_t, kKeyBytes> key_;
};

// One-shot forms: derive the key, seal or open one box.
absl::StatusOr<std::string> Seal(const KeyPair& sender,
                                 absl::string_view recipient_public,
                                 absl::string_view context,
                                 absl::string_view plaintext);
absl::StatusOr<std::string> Open(const KeyPair& recipient,
                                 absl::string_view sender_public,
                                 absl::string_view context,
                                 absl::string_view box);

}  // namespace ldpgraph::crypto
