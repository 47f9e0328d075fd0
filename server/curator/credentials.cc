#include "server/curator/credentials.h"


#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status_macros.h"

namespace ldpgraph::curator {

absl::StatusOr<std::string> ReadHexSecretFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string raw, ReadFileToString(path));
  std::string text(absl::StripAsciiWhitespace(raw));
  auto bytes = FromHex(text);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", bytes.status().message()));
  }
  if (bytes->size() < 16) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": a secret needs at least 16 bytes (32 hex digits), got ",
        bytes->size()));
  }
  return *bytes;
}

std::string NodeCredential(absl::string_view node_key, uint32_t node) {
  const std::string message = absl::StrCat("ldpgraph-node-v1:", node);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), node_key.data(), static_cast<int>(node_key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(),
       mac, &len);
  return std::string(reinterpret_cast<const char*>(mac), len);
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string CredentialsFileText(absl::string_view node_key, uint32_t begin,
                                uint32_t end) {
  std::string text =
      "# ldpgraph node credentials: node<TAB>secret. Each line lets its\n"
      "# holder report as that node; give a host only its own shard's.\n";
  text.reserve(text.size() + size_t{end > begin ? end - begin : 0} * 76);
  for (uint32_t v = begin; v < end; ++v) {
    absl::StrAppend(&text, v, "\t", ToHex(NodeCredential(node_key, v)), "\n");
  }
  return text;
}

bool VerifyNodeCredential(absl::string_view node_key, uint32_t node,
                          absl::string_view secret) {
  return ConstantTimeEquals(NodeCredential(node_key, node), secret);
}

}  // namespace ldpgraph::curator
