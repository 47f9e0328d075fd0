#include "common/crypto/sealed.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/crypto/openssl.h"
#include "common/status_macros.h"

namespace ldpgraph::crypto {
namespace {

constexpr char kLabel[] = "ldpgraph-sealed-v1";
constexpr uint8_t kVersion = 0x01;
constexpr size_t kMaxPlaintext = size_t{16} << 20;

// INTERNAL naming the step and OpenSSL's first queued error.
absl::Status SealedError(absl::string_view step) {
  return OpenSslError(absl::StrCat("sealed: ", step));
}

const unsigned char* Bytes(absl::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

absl::StatusOr<std::array<char, kKeyBytes>> RawKey(EVP_PKEY* key,
                                                   bool is_private) {
  std::array<char, kKeyBytes> out;
  size_t len = out.size();
  unsigned char* p = reinterpret_cast<unsigned char*>(out.data());
  const int ok = is_private ? EVP_PKEY_get_raw_private_key(key, p, &len)
                            : EVP_PKEY_get_raw_public_key(key, p, &len);
  if (ok != 1 || len != kKeyBytes) return SealedError("reading a raw key");
  return out;
}

// The cipher, fetched from OpenSSL's default provider once per process
// (a fetch per call costs more than the cipher itself on small boxes).
// Never freed: it lives as long as the process. Null if unavailable.
const EVP_CIPHER* ChaCha20Poly1305() {
  static EVP_CIPHER* const cipher =
      EVP_CIPHER_fetch(nullptr, "ChaCha20-Poly1305", nullptr);
  return cipher;
}

// X25519(self, peer), then HKDF-SHA256 with info = from || to.
absl::StatusOr<std::array<uint8_t, kKeyBytes>> DeriveKey(
    const KeyPair& self, absl::string_view peer, bool outgoing) {
  if (peer.size() != kKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sealed: a public key holds ", kKeyBytes, " bytes, got ", peer.size()));
  }
  EvpPkey mine(EVP_PKEY_new_raw_private_key(
      EVP_PKEY_X25519, nullptr, Bytes(self.private_key()), kKeyBytes));
  EvpPkey theirs(EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr,
                                             Bytes(peer), kKeyBytes));
  if (!mine || !theirs) return SealedError("loading X25519 keys");
  EvpPkeyCtx ctx(EVP_PKEY_CTX_new(mine.get(), nullptr));
  unsigned char shared[kKeyBytes];
  size_t shared_len = sizeof(shared);
  if (!ctx || EVP_PKEY_derive_init(ctx.get()) != 1) {
    return SealedError("starting the X25519 agreement");
  }
  if (EVP_PKEY_derive_set_peer(ctx.get(), theirs.get()) != 1 ||
      EVP_PKEY_derive(ctx.get(), shared, &shared_len) != 1 ||
      shared_len != kKeyBytes) {
    ERR_clear_error();
    // OpenSSL refuses an all-zero result, i.e. a low-order public key.
    return absl::InvalidArgumentError(
        "sealed: the peer's public key is not usable for X25519 (a low-order "
        "point)");
  }

  const std::string info = outgoing ? absl::StrCat(self.public_key(), peer)
                                    : absl::StrCat(peer, self.public_key());
  std::array<uint8_t, kKeyBytes> key;
  const absl::Status derived = HkdfSha256(
      absl::string_view(reinterpret_cast<const char*>(shared), kKeyBytes),
      kLabel, info, absl::MakeSpan(key));
  OPENSSL_cleanse(shared, sizeof(shared));
  if (!derived.ok()) {
    return absl::InternalError(absl::StrCat("sealed: ", derived.message()));
  }
  return key;
}

std::string Aad(absl::string_view context) { return absl::StrCat(kLabel, context); }

}  // namespace

absl::StatusOr<KeyPair> KeyPair::Generate() {
  EvpPkeyCtx ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_X25519, nullptr));
  EVP_PKEY* raw = nullptr;
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 ||
      EVP_PKEY_keygen(ctx.get(), &raw) != 1) {
    return SealedError("generating an X25519 key");
  }
  EvpPkey key(raw);
  ASSIGN_OR_RETURN(const auto priv, RawKey(key.get(), true));
  ASSIGN_OR_RETURN(const auto pub, RawKey(key.get(), false));
  return KeyPair(priv, pub);
}

absl::StatusOr<KeyPair> KeyPair::FromPrivate(absl::string_view private_key) {
  if (private_key.size() != kKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sealed: a private key holds ", kKeyBytes, " bytes, got ",
        private_key.size()));
  }
  EvpPkey key(EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr,
                                           Bytes(private_key), kKeyBytes));
  if (!key) return SealedError("loading an X25519 private key");
  ASSIGN_OR_RETURN(const auto pub, RawKey(key.get(), false));
  Key priv;
  std::copy(private_key.begin(), private_key.end(), priv.begin());
  return KeyPair(priv, pub);
}

absl::StatusOr<SealingKey> SealingKey::Outgoing(const KeyPair& self,
                                                absl::string_view peer) {
  ASSIGN_OR_RETURN(auto key, DeriveKey(self, peer, /*outgoing=*/true));
  return SealingKey(key);
}

absl::StatusOr<SealingKey> SealingKey::Incoming(const KeyPair& self,
                                                absl::string_view peer) {
  ASSIGN_OR_RETURN(auto key, DeriveKey(self, peer, /*outgoing=*/false));
  return SealingKey(key);
}

absl::StatusOr<std::string> SealingKey::Seal(absl::string_view context,
                                             absl::string_view plaintext) const {
  if (plaintext.size() > kMaxPlaintext) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sealed: a plaintext of ", plaintext.size(), " bytes exceeds ", kMaxPlaintext));
  }
  std::string box(kSealOverhead + plaintext.size(), '\0');
  unsigned char* out = reinterpret_cast<unsigned char*>(box.data());
  out[0] = kVersion;
  unsigned char* nonce = out + 1;
  if (RAND_bytes(nonce, kNonceBytes) != 1) return SealedError("drawing a nonce");
  EvpCipherCtx ctx(EVP_CIPHER_CTX_new());
  const std::string aad = Aad(context);
  int len = 0;
  if (!ctx ||
      EVP_EncryptInit_ex(ctx.get(), ChaCha20Poly1305(), nullptr, key_.data(),
                         nonce) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &len, Bytes(aad),
                        static_cast<int>(aad.size())) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nonce + kNonceBytes, &len, Bytes(plaintext),
                        static_cast<int>(plaintext.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), nonce + kNonceBytes + len, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_GET_TAG, kTagBytes,
                          out + 1 + kNonceBytes + plaintext.size()) != 1) {
    return SealedError("ChaCha20-Poly1305 sealing");
  }
  return box;
}

absl::StatusOr<std::string> SealingKey::Open(absl::string_view context,
                                             absl::string_view box) const {
  if (box.size() < kSealOverhead) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sealed: a box of ", box.size(), " bytes is shorter than the ",
        kSealOverhead, " every box carries"));
  }
  if (static_cast<uint8_t>(box[0]) != kVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sealed: unknown box version ", static_cast<int>(static_cast<uint8_t>(box[0]))));
  }
  const unsigned char* nonce = Bytes(box) + 1;
  const size_t n = box.size() - kSealOverhead;
  const unsigned char* cipher = nonce + kNonceBytes;
  std::string tag(box.substr(1 + kNonceBytes + n));
  std::string plain(n, '\0');
  EvpCipherCtx ctx(EVP_CIPHER_CTX_new());
  const std::string aad = Aad(context);
  int len = 0;
  if (!ctx ||
      EVP_DecryptInit_ex(ctx.get(), ChaCha20Poly1305(), nullptr, key_.data(),
                         nonce) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &len, Bytes(aad),
                        static_cast<int>(aad.size())) != 1 ||
      EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()),
                        &len, cipher, static_cast<int>(n)) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_SET_TAG, kTagBytes,
                          tag.data()) != 1) {
    return SealedError("ChaCha20-Poly1305 opening");
  }
  if (EVP_DecryptFinal_ex(ctx.get(),
                          reinterpret_cast<unsigned char*>(plain.data()) + len,
                          &len) != 1) {
    ERR_clear_error();
    OPENSSL_cleanse(plain.data(), plain.size());
    return absl::UnauthenticatedError(
        "sealed: the box does not verify (changed, or sealed for another "
        "context, direction or pair of nodes)");
  }
  return plain;
}

absl::StatusOr<std::string> Seal(const KeyPair& sender,
                                 absl::string_view recipient_public,
                                 absl::string_view context,
                                 absl::string_view plaintext) {
  ASSIGN_OR_RETURN(SealingKey key, SealingKey::Outgoing(sender, recipient_public));
  return key.Seal(context, plaintext);
}

absl::StatusOr<std::string> Open(const KeyPair& recipient,
                                 absl::string_view sender_public,
                                 absl::string_view context,
                                 absl::string_view box) {
  ASSIGN_OR_RETURN(SealingKey key, SealingKey::Incoming(recipient, sender_public));
  return key.Open(context, box);
}

}  // namespace ldpgraph::crypto
