#include "server/ldpctl/dev_tls.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>
#include <utility>

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/hex.h"
#include "common/random/random.h"
#include "common/status_macros.h"

namespace ldpgraph::ldpctl {
namespace {

constexpr int kMaxValidityDays = 825;  // the most common TLS clients accept
constexpr int kClockSkewSeconds = 60;
constexpr int kSerialBits = 128;
constexpr size_t kMaxCommonName = 64;  // ub-common-name, RFC 5280
constexpr char kOrganization[] = "ldpgraph development";
constexpr char kCaCommonName[] = "ldpgraph development CA";
constexpr char kFallbackServerCommonName[] = "ldpgraph curator";

template <auto Free>
struct Deleter {
  template <typename T>
  void operator()(T* p) const {
    Free(p);
  }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509_free>>;
using X509ExtPtr =
    std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO_free_all>>;
using BnPtr = std::unique_ptr<BIGNUM, Deleter<BN_free>>;
using GeneralNamesPtr =
    std::unique_ptr<GENERAL_NAMES, Deleter<GENERAL_NAMES_free>>;
using GeneralNamePtr = std::unique_ptr<GENERAL_NAME, Deleter<GENERAL_NAME_free>>;
using Asn1StringPtr = std::unique_ptr<ASN1_STRING, Deleter<ASN1_STRING_free>>;

// INTERNAL naming the step and the last OpenSSL error, which it clears.
absl::Status OpenSslError(absl::string_view step) {
  const unsigned long code = ERR_peek_last_error();
  char text[256] = "no OpenSSL error queued";
  if (code != 0) ERR_error_string_n(code, text, sizeof(text));
  ERR_clear_error();
  return absl::InternalError(absl::StrCat(step, ": ", text));
}

// One subjectAltName entry: an IP address (its 4 or 16 bytes) or a DNS name.
struct HostName {
  bool is_ip = false;
  std::string value;  // the address bytes for an IP, the name for DNS
};

// A DNS name as deploy/dev-certs.sh accepts it: dot-separated labels of
// letters, digits and inner hyphens, optionally behind a leading "*.".
bool IsDnsName(absl::string_view name) {
  if (absl::StartsWith(name, "*.")) name.remove_prefix(2);
  if (name.empty() || name.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t end = name.find('.', start);
    if (end == absl::string_view::npos) end = name.size();
    const absl::string_view label = name.substr(start, end - start);
    if (label.empty() || label.size() > 63) return false;
    if (label.front() == '-' || label.back() == '-') return false;
    for (char c : label) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-') {
        return false;
      }
    }
    if (end == name.size()) return true;
    start = end + 1;
  }
}

absl::StatusOr<HostName> ParseHost(const std::string& host) {
  if (host.empty()) {
    return absl::InvalidArgumentError("dev TLS: an empty host name");
  }
  unsigned char addr[16];
  if (inet_pton(AF_INET, host.c_str(), addr) == 1) {
    return HostName{true, std::string(reinterpret_cast<char*>(addr), 4)};
  }
  if (inet_pton(AF_INET6, host.c_str(), addr) == 1) {
    return HostName{true, std::string(reinterpret_cast<char*>(addr), 16)};
  }
  if (IsDnsName(host)) return HostName{false, host};
  return absl::InvalidArgumentError(absl::StrCat(
      "dev TLS: host '", host, "' is neither a DNS name nor an IP address"));
}

absl::StatusOr<PkeyPtr> NewP256Key(absl::string_view what) {
  PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (key == nullptr) {
    return OpenSslError(absl::StrCat("EVP_PKEY_Q_keygen (", what, ")"));
  }
  return key;
}

absl::Status SetRandomSerial(X509* cert) {
  BnPtr bn(BN_new());
  if (bn == nullptr) return OpenSslError("BN_new");
  // The top bit set: always positive and non-zero, 127 random bits.
  if (BN_rand(bn.get(), kSerialBits, BN_RAND_TOP_ONE, BN_RAND_BOTTOM_ANY) !=
      1) {
    return OpenSslError("BN_rand (serial)");
  }
  if (BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert)) == nullptr) {
    return OpenSslError("BN_to_ASN1_INTEGER (serial)");
  }
  return absl::OkStatus();
}

absl::Status SetName(X509_NAME* name, absl::string_view common_name) {
  if (X509_NAME_add_entry_by_NID(
          name, NID_organizationName, MBSTRING_UTF8,
          reinterpret_cast<const unsigned char*>(kOrganization), -1, -1,
          0) != 1) {
    return OpenSslError("X509_NAME_add_entry_by_NID (O)");
  }
  const std::string cn(common_name);
  if (X509_NAME_add_entry_by_NID(
          name, NID_commonName, MBSTRING_UTF8,
          reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0) !=
      1) {
    return OpenSslError("X509_NAME_add_entry_by_NID (CN)");
  }
  return absl::OkStatus();
}

// A v3 certificate for key's public half with a random serial, the given
// subject CN, valid from now - kClockSkewSeconds to now + validity_days.
// The issuer name and the extensions are the caller's.
absl::StatusOr<X509Ptr> NewCertificate(EVP_PKEY* key,
                                       absl::string_view common_name,
                                       int validity_days) {
  X509Ptr cert(X509_new());
  if (cert == nullptr) return OpenSslError("X509_new");
  if (X509_set_version(cert.get(), X509_VERSION_3) != 1) {
    return OpenSslError("X509_set_version");
  }
  if (absl::Status s = SetRandomSerial(cert.get()); !s.ok()) return s;
  if (absl::Status s =
          SetName(X509_get_subject_name(cert.get()), common_name);
      !s.ok()) {
    return s;
  }
  time_t now = time(nullptr);
  if (X509_time_adj_ex(X509_getm_notBefore(cert.get()), 0, -kClockSkewSeconds,
                       &now) == nullptr) {
    return OpenSslError("X509_time_adj_ex (notBefore)");
  }
  if (X509_time_adj_ex(X509_getm_notAfter(cert.get()), validity_days, 0,
                       &now) == nullptr) {
    return OpenSslError("X509_time_adj_ex (notAfter)");
  }
  if (X509_set_pubkey(cert.get(), key) != 1) {
    return OpenSslError("X509_set_pubkey");
  }
  return cert;
}

// Adds the extension nid = value (openssl.cnf syntax), computed in ctx.
absl::Status AddExtension(X509* cert, X509V3_CTX* ctx, int nid,
                          const char* value) {
  X509ExtPtr ext(X509V3_EXT_nconf_nid(nullptr, ctx, nid, value));
  if (ext == nullptr) {
    return OpenSslError(
        absl::StrCat("X509V3_EXT_nconf_nid (", OBJ_nid2sn(nid), ")"));
  }
  if (X509_add_ext(cert, ext.get(), -1) != 1) {
    return OpenSslError(absl::StrCat("X509_add_ext (", OBJ_nid2sn(nid), ")"));
  }
  return absl::OkStatus();
}

// subjectAltName, built from the parsed hosts rather than a config string so
// that no host can smuggle in entries of its own.
absl::Status AddSubjectAltName(X509* cert, const std::vector<HostName>& hosts) {
  GeneralNamesPtr names(GENERAL_NAMES_new());
  if (names == nullptr) return OpenSslError("GENERAL_NAMES_new");
  for (const HostName& host : hosts) {
    Asn1StringPtr value(host.is_ip ? ASN1_OCTET_STRING_new()
                                   : ASN1_IA5STRING_new());
    if (value == nullptr) return OpenSslError("ASN1_STRING new (SAN)");
    if (ASN1_STRING_set(value.get(), host.value.data(),
                        static_cast<int>(host.value.size())) != 1) {
      return OpenSslError("ASN1_STRING_set (SAN)");
    }
    GeneralNamePtr name(GENERAL_NAME_new());
    if (name == nullptr) return OpenSslError("GENERAL_NAME_new");
    // GENERAL_NAME_set0_value takes value; sk_GENERAL_NAME_push takes name.
    GENERAL_NAME_set0_value(name.get(), host.is_ip ? GEN_IPADD : GEN_DNS,
                            value.release());
    if (sk_GENERAL_NAME_push(names.get(), name.get()) == 0) {
      return OpenSslError("sk_GENERAL_NAME_push (SAN)");
    }
    name.release();
  }
  if (X509_add1_ext_i2d(cert, NID_subject_alt_name, names.get(), /*crit=*/0,
                        X509V3_ADD_DEFAULT) != 1) {
    return OpenSslError("X509_add1_ext_i2d (subjectAltName)");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> CertificatePem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr) return OpenSslError("BIO_new");
  if (PEM_write_bio_X509(bio.get(), cert) != 1) {
    return OpenSslError("PEM_write_bio_X509");
  }
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, len);
}

// PKCS#8, unencrypted ("BEGIN PRIVATE KEY").
absl::StatusOr<std::string> PrivateKeyPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr) return OpenSslError("BIO_new");
  if (PEM_write_bio_PKCS8PrivateKey(bio.get(), key, nullptr, nullptr, 0,
                                    nullptr, nullptr) != 1) {
    return OpenSslError("PEM_write_bio_PKCS8PrivateKey");
  }
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, len);
}

absl::StatusOr<DevTlsMaterial> Make(const std::vector<HostName>& hosts,
                                    const std::string& server_cn,
                                    int validity_days) {
  // --- the CA: self-signed -------------------------------------------------
  auto ca_key = NewP256Key("CA");
  if (!ca_key.ok()) return ca_key.status();
  auto ca = NewCertificate(ca_key->get(), kCaCommonName, validity_days);
  if (!ca.ok()) return ca.status();
  X509* ca_cert = ca->get();
  if (X509_set_issuer_name(ca_cert, X509_get_subject_name(ca_cert)) != 1) {
    return OpenSslError("X509_set_issuer_name (CA)");
  }
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, ca_cert, ca_cert, nullptr, nullptr, 0);
  // subjectKeyIdentifier first: authorityKeyIdentifier copies it.
  for (const auto& [nid, value] :
       {std::pair{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
        std::pair{NID_key_usage, "critical,keyCertSign,cRLSign"},
        std::pair{NID_subject_key_identifier, "hash"},
        std::pair{NID_authority_key_identifier, "keyid:always"}}) {
    if (absl::Status s = AddExtension(ca_cert, &ctx, nid, value); !s.ok()) {
      return s;
    }
  }
  if (X509_sign(ca_cert, ca_key->get(), EVP_sha256()) <= 0) {
    return OpenSslError("X509_sign (CA)");
  }

  // --- the server certificate, signed by the CA ----------------------------
  auto server_key = NewP256Key("server");
  if (!server_key.ok()) return server_key.status();
  auto server =
      NewCertificate(server_key->get(), server_cn, validity_days);
  if (!server.ok()) return server.status();
  X509* server_cert = server->get();
  if (X509_set_issuer_name(server_cert, X509_get_subject_name(ca_cert)) != 1) {
    return OpenSslError("X509_set_issuer_name (server)");
  }
  X509V3_set_ctx(&ctx, ca_cert, server_cert, nullptr, nullptr, 0);
  for (const auto& [nid, value] :
       {std::pair{NID_basic_constraints, "critical,CA:FALSE"},
        std::pair{NID_key_usage, "critical,digitalSignature"},
        std::pair{NID_ext_key_usage, "serverAuth"},
        std::pair{NID_subject_key_identifier, "hash"},
        std::pair{NID_authority_key_identifier, "keyid:always"}}) {
    if (absl::Status s = AddExtension(server_cert, &ctx, nid, value);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = AddSubjectAltName(server_cert, hosts); !s.ok()) {
    return s;
  }
  if (X509_sign(server_cert, ca_key->get(), EVP_sha256()) <= 0) {
    return OpenSslError("X509_sign (server)");
  }

  DevTlsMaterial m;
  for (auto [out, pem] :
       {std::pair{&m.ca_cert_pem, CertificatePem(ca_cert)},
        std::pair{&m.ca_key_pem, PrivateKeyPem(ca_key->get())},
        std::pair{&m.server_cert_pem, CertificatePem(server_cert)},
        std::pair{&m.server_key_pem, PrivateKeyPem(server_key->get())}}) {
    if (!pem.ok()) return pem.status();
    *out = *std::move(pem);
  }
  return m;
}

}  // namespace

absl::StatusOr<DevTlsMaterial> MakeDevTlsMaterial(
    const std::vector<std::string>& hosts, int validity_days) {
  if (hosts.empty()) {
    return absl::InvalidArgumentError("dev TLS: no host names given");
  }
  if (validity_days < 1 || validity_days > kMaxValidityDays) {
    return absl::InvalidArgumentError(
        absl::StrCat("dev TLS: validity of ", validity_days,
                     " days is outside [1, ", kMaxValidityDays, "]"));
  }
  std::vector<HostName> parsed;
  parsed.reserve(hosts.size());
  for (const std::string& host : hosts) {
    auto h = ParseHost(host);
    if (!h.ok()) return h.status();
    parsed.push_back(*std::move(h));
  }
  const std::string& first = hosts.front();
  const std::string server_cn =
      first.size() <= kMaxCommonName ? first : kFallbackServerCommonName;
  // Start from an empty error queue, and leave none behind on success.
  ERR_clear_error();
  auto m = Make(parsed, server_cn, validity_days);
  ERR_clear_error();
  return m;
}

absl::Status WriteNewFile(const std::string& path, absl::string_view contents,
                          mode_t mode) {
  auto error = [&path](absl::string_view what) {
    return absl::InternalError(
        absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(errno)));
  };
  if (unlink(path.c_str()) != 0 && errno != ENOENT) return error("replace");
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return error("create");
  while (!contents.empty()) {
    const ssize_t n = write(fd, contents.data(), contents.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status status = error("write");
      close(fd);
      return status;
    }
    contents.remove_prefix(static_cast<size_t>(n));
  }
  if (close(fd) != 0) return error("write");
  return absl::OkStatus();
}

absl::Status WriteDevTlsMaterial(const DevTlsMaterial& m,
                                 const std::string& dir) {
  const struct {
    const char* name;
    const std::string& contents;
    mode_t mode;
  } files[] = {
      {"ca.pem", m.ca_cert_pem, 0644},
      {"ca.key", m.ca_key_pem, 0600},
      {"curator.pem", m.server_cert_pem, 0644},
      {"curator.key", m.server_key_pem, 0600},
  };
  for (const auto& f : files) {
    const std::string path = absl::StrCat(dir, "/", f.name);
    if (absl::Status s = WriteNewFile(path, f.contents, f.mode); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> NewSecretHex() {
  ASSIGN_OR_RETURN(std::string raw, SecureRandomBytes(32));
  return ToHex(raw);
}

}  // namespace ldpgraph::ldpctl
