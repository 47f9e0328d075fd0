// A list of servers as one gRPC target, for clients that move to the next
// server when the one in use goes: agent hosts over several curator
// frontends (--curator), ldpctl over an operator and its standby.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ldpgraph::net {

// One address (HOST:PORT, or anything gRPC takes as a target: a host name
// or a Kubernetes Service name is resolved by gRPC) is returned as given,
// *tls_name set to "". A list HOST:PORT,HOST:PORT,... becomes one "ipv4:"
// (or "ipv6:") target of every address the hosts resolve to now, which
// gRPC's pick_first policy walks in order, moving to the next live one
// when the one in use fails; *tls_name is the first host, the name a TLS
// certificate is checked against unless the caller overrides it.
// INVALID_ARGUMENT, prefixed with `flag`, for an entry without a port or a
// host that does not resolve (naming it).
absl::StatusOr<std::string> AddressListTarget(const std::string& addresses,
                                              absl::string_view flag,
                                              std::string* tls_name);

}  // namespace ldpgraph::net
