// The routing key an edge proxy keeps a client's calls together by.
//
// A curator frontend keeps sessions in its own memory (an agent host's
// enrolment and task stream, a device's check-in and its Submit), so every
// call of one client must reach the same frontend. A TLS-terminating edge
// in front of several frontends (deploy/edge/haproxy.cfg, ldpctl simulate
// --edge) balances per call, not per connection; it hashes this header
// instead, which the client sends on every call: the host's name (unique in
// a fleet, the name the shard plan keys by). A client that moves (its
// frontend died) is re-hashed to a live one and enrols again, as it does
// when a direct connection breaks.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_interceptor.h>

namespace ldpgraph::net {

// The header's name (gRPC metadata keys are lower case).
inline constexpr char kRouteHeader[] = "ldpgraph-route";

// Interceptors that add `kRouteHeader: key` to every call of a channel
// (grpc::experimental::CreateCustomChannelWithInterceptors). An empty key
// adds nothing.
std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
RouteInterceptors(std::string key);

}  // namespace ldpgraph::net
