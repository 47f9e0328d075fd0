#include "common/crypto/openssl.h"

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/params.h>

#include "absl/strings/str_cat.h"

namespace ldpgraph::crypto {
namespace {

// OpenSSL's HKDF, fetched once per process (a fetch per call costs more
// than the derivation on small boxes). Never freed: it lives as long as the
// process. Null if unavailable.
EVP_KDF* FetchedHkdf() {
  static EVP_KDF* const kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  return kdf;
}

// OSSL_PARAM takes non-const buffers; OpenSSL only reads these.
void* Mutable(absl::string_view s) { return const_cast<char*>(s.data()); }

}  // namespace

std::string OpenSslErrorText() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  char buf[256] = "no OpenSSL error queued";
  if (e != 0) ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

absl::Status OpenSslError(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", OpenSslErrorText()));
}

absl::Status HkdfSha256(absl::string_view ikm, absl::string_view salt,
                        absl::string_view info, absl::Span<uint8_t> out) {
  EVP_KDF* kdf = FetchedHkdf();
  EvpKdfCtx ctx(kdf ? EVP_KDF_CTX_new(kdf) : nullptr);
  if (!ctx) return OpenSslError("fetching HKDF");
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, Mutable(ikm),
                                        ikm.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, Mutable(salt),
                                        salt.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, Mutable(info),
                                        info.size()),
      OSSL_PARAM_construct_end()};
  if (EVP_KDF_derive(ctx.get(), out.data(), out.size(), params) != 1) {
    return OpenSslError("HKDF");
  }
  return absl::OkStatus();
}

}  // namespace ldpgraph::crypto
