// Reading a paged admin listing to its end (AIP-158; admin.proto's file
// comment): the one loop every client of the admin API runs over
// ListCampaigns, ListRefusals, GetBudgets, ListResults, ListResultIds,
// GetReleaseLedger and ListAudit -- ldpctl's commands and simulate
// (through Connection::ForEachPage), the integration tests and the
// benchmarks. Header-only: gRPC and protobuf, nothing of ldpctl.
#pragma once

#include <string>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ldpgraph::ldpctl {

// Calls `method` on `stub` with `request` (its page_token as given: empty
// for the first page), then again for each next page, the page_token set
// to the previous page's next_page_token, and on_page(page) for each page,
// in order, until a page's next_page_token is empty. Each call gets a
// fresh grpc::ClientContext that prepare(&ctx) fills (the bearer token, a
// deadline). Returns the first error: convert(status) of a failed call,
// on_page's own, or INTERNAL if the curator answers a page with the token
// it was sent (the listing would never end).
template <typename Stub, typename Request, typename Response, typename Prepare,
          typename Convert, typename OnPage>
absl::Status ForEachPage(Stub& stub,
                         grpc::Status (Stub::*method)(grpc::ClientContext*,
                                                      const Request&,
                                                      Response*),
                         Request request, Prepare prepare, Convert convert,
                         OnPage on_page) {
  for (;;) {
    Response page;
    {
      grpc::ClientContext ctx;
      prepare(&ctx);
      const absl::Status s = convert((stub.*method)(&ctx, request, &page));
      if (!s.ok()) return s;
    }
    std::string next = page.next_page_token();
    if (absl::Status s = on_page(page); !s.ok()) return s;
    if (next.empty()) return absl::OkStatus();
    if (next == request.page_token()) {
      return absl::InternalError(absl::StrCat(
          "the curator answered page token '", next, "' with itself"));
    }
    request.set_page_token(std::move(next));
  }
}

// The plain conversion (gRPC's codes are absl's).
inline absl::Status GrpcToAbsl(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      s.error_message());
}

}  // namespace ldpgraph::ldpctl
