#include "common/net/address_list.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ldpgraph::net {

absl::StatusOr<std::string> AddressListTarget(const std::string& addresses,
                                              absl::string_view flag,
                                              std::string* tls_name) {
  const std::vector<std::string> entries =
      absl::StrSplit(addresses, ',', absl::SkipWhitespace());
  if (entries.size() <= 1) {
    *tls_name = "";
    return addresses;
  }
  std::vector<std::string> v4, v6;
  for (const std::string& entry : entries) {
    const size_t colon = entry.rfind(':');
    if (colon == std::string::npos || colon + 1 == entry.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, ": '", entry, "' has no port (want HOST:PORT,HOST:PORT,...)"));
    }
    std::string host = entry.substr(0, colon);
    const std::string port = entry.substr(colon + 1);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    if (tls_name->empty()) *tls_name = host;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
    if (rc != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, ": cannot resolve '", host, "': ", gai_strerror(rc)));
    }
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      char text[INET6_ADDRSTRLEN] = {};
      if (a->ai_family == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr,
                  text, sizeof(text));
        v4.push_back(absl::StrCat(text, ":", port));
      } else if (a->ai_family == AF_INET6) {
        inet_ntop(AF_INET6,
                  &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, text,
                  sizeof(text));
        v6.push_back(absl::StrCat("[", text, "]:", port));
      }
    }
    freeaddrinfo(found);
  }
  // One scheme per target: IPv4 when any host has an IPv4 address.
  std::vector<std::string>& list = v4.empty() ? v6 : v4;
  list.erase(std::unique(list.begin(), list.end()), list.end());
  return absl::StrCat(v4.empty() ? "ipv6:" : "ipv4:", absl::StrJoin(list, ","));
}
}  // namespace ldpgraph::net
