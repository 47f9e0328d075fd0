// Node and admin credentials.
//
// The operator holds one secret, the node key (32 random bytes; see
// deploy/dev-certs.sh). The credential of node v is
//   HMAC-SHA256(node key, "ldpgraph-node-v1:" || decimal(v)),
// 32 bytes, issued to v's agent by `ldpctl credentials` and never stored by
// the curator, which recomputes and compares in constant time. A node's
// credential proves nothing about any other node, and the node key never
// leaves the operator and the curator.
//
// The admin credential is a bearer token (a line of hex), compared in
// constant time too.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/hex.h"

namespace ldpgraph::curator {

// A secret read from a file holding one line of hex (at least 16 bytes once
// decoded). INVALID_ARGUMENT naming the file for a malformed one, NOT_FOUND
// for a missing one.
absl::StatusOr<std::string> ReadHexSecretFile(const std::string& path);

// Hex of secrets: common/hex.h.
using ::ldpgraph::FromHex;
using ::ldpgraph::ToHex;

// HMAC-SHA256 of the node id under the node key: 32 raw bytes.
std::string NodeCredential(absl::string_view node_key, uint32_t node);

// The credentials of nodes [begin, end) as the agent host reads them
// (--credentials): a '#' header, then "node<TAB>hex" per line.
std::string CredentialsFileText(absl::string_view node_key, uint32_t begin,
                                uint32_t end);

// True iff secret is node's credential under node_key (constant time).
bool VerifyNodeCredential(absl::string_view node_key, uint32_t node,
                          absl::string_view secret);

// Constant-time equality of two strings (false for different lengths).
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace ldpgraph::curator
