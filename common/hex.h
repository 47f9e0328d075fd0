// Lower-case hexadecimal encoding of bytes, for secrets in files (tokens,
// keys, node credentials) and logs.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ldpgraph {

// Two lower-case hex digits per byte.
std::string ToHex(absl::string_view bytes);

// The bytes of a hex string (either case). INVALID_ARGUMENT for an odd
// length or a character that is not a hex digit, naming its position.
absl::StatusOr<std::string> FromHex(absl::string_view hex);

}  // namespace ldpgraph
