// The curator's gRPC services' shared part (services.h): the status
// conversion, and the pieces of internal/services.h that are not templates.
// The agent service is in agent_service.cc, the admin service in
// admin_service.cc.
#include "server/curator/services.h"

#include <cstdio>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/curator/internal/services.h"
#include "server/curator/log_limiter.h"

namespace ldpgraph::curator {

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

namespace services_internal {

void LogMalformed(const absl::Status& s) {
  static LogLimiter* const limiter = new LogLimiter(kMalformedLogInterval);
  const std::optional<uint64_t> held = limiter->Admit(absl::Now());
  if (!held.has_value()) return;
  std::string line =
      absl::StrCat("ldpgraph-curator: refused a malformed request: ",
                   s.message());
  if (*held > 0) {
    absl::StrAppend(&line, " (and ", *held,
                    " more since the last line like this one)");
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);  // one write, one line
}

std::string Metadata(grpc::CallbackServerContext* ctx, absl::string_view key) {
  const auto& md = ctx->client_metadata();
  auto it = md.find(grpc::string_ref(key.data(), key.size()));
  if (it == md.end()) return std::string();
  return std::string(it->second.data(), it->second.size());
}

}  // namespace services_internal
}  // namespace ldpgraph::curator
