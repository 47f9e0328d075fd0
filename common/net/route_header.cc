#include "common/net/route_header.h"

#include <utility>

namespace ldpgraph::net {
namespace {

class RouteInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit RouteInterceptor(const std::string* key) : key_(key) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kRouteHeader, *key_);
    }
    methods->Proceed();
  }

 private:
  const std::string* const key_;  // the factory's, which outlives its calls
};

class RouteFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit RouteFactory(std::string key) : key_(std::move(key)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new RouteInterceptor(&key_);
  }

 private:
  const std::string key_;
};

}  // namespace

std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
RouteInterceptors(std::string key) {
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      out;
  if (!key.empty()) out.push_back(std::make_unique<RouteFactory>(std::move(key)));
  return out;
}

}  // namespace ldpgraph::net
