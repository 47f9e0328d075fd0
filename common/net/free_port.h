// A TCP port on 127.0.0.1 that was free a moment ago, for whatever starts a
// server on a port of its choosing (LocalPostgres, the integration tests).
// Header-only: libraries of any layer use it without a dependency.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ldpgraph::net {

// Binds a socket to 127.0.0.1 port 0, reads the port the kernel chose and
// closes the socket. Another process may take the port before the caller
// binds it: a caller that cannot bind it should pick again. Errors (the
// errno's code): "socket for a free port: <strerror>", "binding 127.0.0.1:0
// for a port: <strerror>".
inline absl::StatusOr<int> FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "socket for a free port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::ErrnoToStatus(err, "binding 127.0.0.1:0 for a port");
  }
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

}  // namespace ldpgraph::net
