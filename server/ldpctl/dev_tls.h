// Development TLS material made in-process: what deploy/dev-certs.sh makes
// with the openssl command-line tool (same certificate profile and file
// names), for `ldpctl simulate`, which must not depend on that tool.
//
// A throwaway CA and a server certificate signed by it, both EC P-256,
// X.509 v3, SHA-256 signatures, a random 128-bit serial, valid from a minute
// ago (clock skew) for validity_days. The CA certificate has
// basicConstraints critical CA:TRUE, pathlen:0 and keyUsage critical
// keyCertSign, cRLSign; the server certificate has CA:FALSE, keyUsage
// critical digitalSignature, extendedKeyUsage serverAuth and a
// subjectAltName of the given hosts.
//
// Development and tests only: the CA key is handed out (and written) beside
// the certificates, so whoever can read it can mint certificates the clients
// trust. Production deployments bring their own PKI.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ldpgraph::ldpctl {

struct DevTlsMaterial {
  std::string ca_cert_pem;      // self-signed CA certificate (what clients trust)
  std::string ca_key_pem;       // its private key (PKCS#8 PEM)
  std::string server_cert_pem;  // server certificate signed by the CA
  std::string server_key_pem;   // its private key (PKCS#8 PEM)
};

// A new CA and a server certificate for hosts: DNS names (a leading "*." is
// allowed) and IPv4 or IPv6 literals, each one subjectAltName entry, at least
// one. The server certificate's subject CN is the first host (or
// "ldpgraph curator" if that is longer than the 64 characters a CN may hold).
// validity_days in [1, 825]. INVALID_ARGUMENT for an empty host list, a host
// that is neither a DNS name nor an IP address (an empty one included) or a
// validity out of range; INTERNAL naming the OpenSSL step and its error when
// OpenSSL fails.
absl::StatusOr<DevTlsMaterial> MakeDevTlsMaterial(
    const std::vector<std::string>& hosts, int validity_days = 825);

// Writes m into dir, which must exist, under deploy/dev-certs.sh's names:
// ca.pem and curator.pem (mode 0644), ca.key and curator.key (mode 0600 from
// creation on, never readable by others even for a moment), each less the
// umask. A file (or symlink) of one of these names is removed and made anew.
// INTERNAL naming the path on a failure, which may leave some files written.
absl::Status WriteDevTlsMaterial(const DevTlsMaterial& m,
                                 const std::string& dir);

// Writes contents to a new file at path, replacing whatever was there (a
// file or a symlink is unlinked first), created with mode (O_EXCL: never an
// old file's wider mode). INTERNAL naming the path and the errno text.
absl::Status WriteNewFile(const std::string& path, absl::string_view contents,
                          mode_t mode);

// A fresh 32-byte secret (an admin token, a node key) from the secure
// generator, as lower-case hex.
absl::StatusOr<std::string> NewSecretHex();

}  // namespace ldpgraph::ldpctl
