// The OpenSSL plumbing ldpgraph's cryptography shares: owners of OpenSSL
// handles, the text of OpenSSL's queued error as a Status, and HKDF-SHA256
// (RFC 5869). Used by the sealed messages (sealed.h), the keyed ChaCha20
// stream (common/random/random.h) and the agent's exchange randomness
// (client/edge_exchange.h), so that each states its construction and none
// repeats the calls.
#pragma once

#include <openssl/evp.h>
#include <openssl/kdf.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ldpgraph::crypto {

// unique_ptr owners of OpenSSL handles, freed with their OpenSSL function.
struct EvpPkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct EvpPkeyCtxFree {
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
};
struct EvpCipherCtxFree {
  void operator()(EVP_CIPHER_CTX* p) const { EVP_CIPHER_CTX_free(p); }
};
struct EvpKdfCtxFree {
  void operator()(EVP_KDF_CTX* p) const { EVP_KDF_CTX_free(p); }
};
using EvpPkey = std::unique_ptr<EVP_PKEY, EvpPkeyFree>;
using EvpPkeyCtx = std::unique_ptr<EVP_PKEY_CTX, EvpPkeyCtxFree>;
using EvpCipherCtx = std::unique_ptr<EVP_CIPHER_CTX, EvpCipherCtxFree>;
using EvpKdfCtx = std::unique_ptr<EVP_KDF_CTX, EvpKdfCtxFree>;

// The text of the first error in this thread's OpenSSL error queue
// ("no OpenSSL error queued" when it is empty), and clears the queue, so
// a later failure does not report this one. Never empty.
std::string OpenSslErrorText();

// INTERNAL "<what>: <OpenSslErrorText()>", for a failed OpenSSL call
// (what names the step, e.g. "sealed: loading X25519 keys"). Clears the
// queue as OpenSslErrorText does.
absl::Status OpenSslError(absl::string_view what);

// HKDF-SHA256 (RFC 5869, extract then expand) of ikm under salt and info,
// filling out (1 to 255 * 32 bytes). The HKDF implementation is fetched
// from OpenSSL's default provider once per process. INTERNAL
// ("fetching HKDF: ..." or "HKDF: ...", with OpenSSL's error) if OpenSSL
// has no HKDF or the derivation fails (e.g. out is empty or too long);
// out is then unspecified.
absl::Status HkdfSha256(absl::string_view ikm, absl::string_view salt,
                        absl::string_view info, absl::Span<uint8_t> out);

}  // namespace ldpgraph::crypto
