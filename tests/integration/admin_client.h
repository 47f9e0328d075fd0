// A thin client of the admin API for the integration tests: every call
// carries the bearer token and a deadline, and converts to absl::Status.
#pragma once

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/linalg/matrix.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "server/ldpctl/pages.h"
#include "tests/integration/test_util.h"

namespace ldpgraph::integration {

class Admin {
 public:
  Admin(std::shared_ptr<grpc::Channel> channel, std::string token)
      : stub_(v1::AdminService::NewStub(std::move(channel))),
        token_(std::move(token)) {}

  void Prepare(grpc::ClientContext* ctx) const {
    ctx->AddMetadata("authorization", "Bearer " + token_);
    ctx->set_deadline(std::chrono::system_clock::now() + call_timeout_);
  }
  v1::AdminService::Stub& stub() { return *stub_; }

  // Every page of a paged listing, on_page(page) for each
  // (server/ldpctl/pages.h).
  template <typename Request, typename Response, typename OnPage>
  absl::Status ForEachPage(
      grpc::Status (v1::AdminService::Stub::*method)(grpc::ClientContext*,
                                                     const Request&, Response*),
      Request request, OnPage on_page) {
    return ldpctl::ForEachPage(
        *stub_, method, std::move(request),
        [this](grpc::ClientContext* ctx) { Prepare(ctx); }, &ldpctl::GrpcToAbsl,
        std::move(on_page));
  }

  grpc::Status Create(const v1::CreateCampaignRequest& req, v1::Campaign* out) {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    return stub_->CreateCampaign(&ctx, req, out);
  }
  absl::StatusOr<v1::Campaign> Get(const std::string& id) {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    v1::GetCampaignRequest req;
    req.set_campaign_id(id);
    v1::Campaign out;
    grpc::Status s = stub_->GetCampaign(&ctx, req, &out);
    if (!s.ok()) return Convert(s);
    return out;
  }
  absl::StatusOr<v1::Campaign> Close(const std::string& id) {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    v1::CloseCampaignRequest req;
    req.set_campaign_id(id);
    v1::Campaign out;
    grpc::Status s = stub_->CloseCampaign(&ctx, req, &out);
    if (!s.ok()) return Convert(s);
    return out;
  }
  absl::StatusOr<v1::CuratorStatus> Status() {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    v1::CuratorStatus out;
    grpc::Status s = stub_->GetStatus(&ctx, v1::GetStatusRequest(), &out);
    if (!s.ok()) return Convert(s);
    return out;
  }
  absl::StatusOr<int> CountCampaigns() {
    int n = 0;
    absl::Status s = ForEachPage(&v1::AdminService::Stub::ListCampaigns,
                                 v1::ListCampaignsRequest(),
                                 [&](const v1::ListCampaignsResponse& page) {
                                   n += page.campaigns_size();
                                   return absl::OkStatus();
                                 });
    if (!s.ok()) return s;
    return n;
  }
  absl::StatusOr<std::vector<v1::RefusalRecord>> Refusals(const std::string& id) {
    v1::ListRefusalsRequest req;
    req.set_campaign_id(id);
    std::vector<v1::RefusalRecord> out;
    absl::Status s = ForEachPage(&v1::AdminService::Stub::ListRefusals, req,
                                 [&](const v1::ListRefusalsResponse& page) {
                                   out.insert(out.end(), page.refusals().begin(),
                                              page.refusals().end());
                                   return absl::OkStatus();
                                 });
    if (!s.ok()) return s;
    return out;
  }
  // Budgets of nodes [begin, end); every node the ledger knows if begin ==
  // end.
  absl::StatusOr<std::vector<v1::NodeBudget>> Budgets(uint32_t begin,
                                                      uint32_t end) {
    v1::GetBudgetsRequest req;
    if (begin != end) {
      req.set_range_begin(begin);
      req.set_range_end(end);
    }
    std::vector<v1::NodeBudget> out;
    absl::Status s = ForEachPage(&v1::AdminService::Stub::GetBudgets, req,
                                 [&](const v1::GetBudgetsResponse& page) {
                                   out.insert(out.end(), page.budgets().begin(),
                                              page.budgets().end());
                                   return absl::OkStatus();
                                 });
    if (!s.ok()) return s;
    return out;
  }
  absl::StatusOr<v1::StageResult> Estimate(const std::string& campaign) {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    v1::EstimateRequest req;
    req.set_campaign_id(campaign);
    v1::StageResult out;
    grpc::Status s = stub_->Estimate(&ctx, req, &out);
    if (!s.ok()) return Convert(s);
    return out;
  }
  absl::StatusOr<DenseMatrix> Export(const std::string& result) {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    v1::ExportEmbeddingsRequest req;
    req.set_result_id(result);
    auto reader = stub_->ExportEmbeddings(&ctx, req);
    v1::EmbeddingChunk chunk;
    DenseMatrix m;
    while (reader->Read(&chunk)) {
      if (m.data.empty()) m = DenseMatrix(chunk.rows(), chunk.cols());
      const size_t offset = size_t{chunk.first_row()} * chunk.cols();
      if (offset + chunk.values_size() > m.data.size()) {
        return absl::DataLossError("a chunk overruns the matrix");
      }
      std::copy(chunk.values().begin(), chunk.values().end(),
                m.data.begin() + offset);
    }
    grpc::Status s = reader->Finish();
    if (!s.ok()) return Convert(s);
    return m;
  }
  absl::StatusOr<int> CountAudit(const std::string& action) {
    v1::ListAuditRequest req;
    req.set_limit(10000);
    int n = 0;
    absl::Status s = ForEachPage(&v1::AdminService::Stub::ListAudit, req,
                                 [&](const v1::ListAuditResponse& page) {
                                   for (const auto& e : page.entries()) {
                                     n += e.action() == action ? 1 : 0;
                                   }
                                   return absl::OkStatus();
                                 });
    if (!s.ok()) return s;
    return n;
  }

  // Polls until the campaign is closed.
  absl::StatusOr<v1::Campaign> WaitClosed(const std::string& id,
                                          absl::Duration timeout) {
    absl::StatusOr<v1::Campaign> c;
    const bool closed = PollUntil(
        [&] {
          c = Get(id);
          return !c.ok() || c->state() == v1::CAMPAIGN_STATE_CLOSED;
        },
        timeout, absl::Milliseconds(100));
    if (!c.ok()) return c.status();
    if (!closed) {
      return absl::DeadlineExceededError(absl::StrCat(
          id, " still open after ", absl::FormatDuration(timeout), ": ",
          c->progress().ShortDebugString()));
    }
    return c;
  }

  static absl::Status Convert(const grpc::Status& s) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        s.error_message());
  }

  // Deadline of each call.
  void set_call_timeout(std::chrono::milliseconds t) { call_timeout_ = t; }

 private:
  std::unique_ptr<v1::AdminService::Stub> stub_;
  std::string token_;
  std::chrono::milliseconds call_timeout_{120000};
};

}  // namespace ldpgraph::integration
