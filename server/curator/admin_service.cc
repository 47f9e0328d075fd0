// The admin service (AdminServiceImpl, services.h): authentication, the
// unary calls' one path (Serve) and ExportEmbeddings' stream.
#include "server/curator/services.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/curator/credentials.h"
#include "server/curator/internal/services.h"

namespace ldpgraph::curator {

using services_internal::Metadata;
using services_internal::ParseRequest;
using services_internal::Refused;
using services_internal::RpcTimer;
using services_internal::SerializeResponse;
using services_internal::Unary;

AdminServiceImpl::AdminServiceImpl(OperatorSide* curator, Stages* stages,
                                   std::string admin_token,
                                   RpcObserver observer,
                                   v1::CuratorStatus base_status,
                                   int max_threads, Listings::Options pages)
    : curator_(curator),
      stages_(stages),
      listings_(curator, stages, pages),
      token_(std::move(admin_token)),
      observe_(std::move(observer)),
      base_status_(std::move(base_status)),
      pool_(std::make_unique<WorkPool>(max_threads)) {}

AdminServiceImpl::~AdminServiceImpl() = default;

absl::Status AdminServiceImpl::Authorize(grpc::CallbackServerContext* ctx) const {
  const std::string header = Metadata(ctx, "authorization");
  constexpr absl::string_view kBearer = "Bearer ";
  if (!absl::StartsWith(header, kBearer)) {
    return absl::UnauthenticatedError(
        "missing admin credential (authorization: Bearer <token>)");
  }
  if (!ConstantTimeEquals(absl::string_view(header).substr(kBearer.size()),
                          token_)) {
    return absl::UnauthenticatedError("wrong admin credential");
  }
  return absl::OkStatus();
}

template <typename Request, typename Response, typename Fn>
grpc::ServerUnaryReactor* AdminServiceImpl::Serve(
    absl::string_view method, grpc::CallbackServerContext* ctx,
    const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response,
    Fn fn) {
  absl::Status auth = Authorize(ctx);
  if (auth.ok() && status_only_ && method != "GetStatus") {
    auth = absl::FailedPreconditionError(absl::StrCat(
        "this curator is a frontend: it serves the agents and GetStatus; ",
        method, " is the operator's (--role operator)"));
  }
  if (!auth.ok()) {
    // Before the bytes are looked at; a refusal does not wait for a thread.
    RpcTimer timer(observe_, method);
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(timer.Done(auth));
    return reactor;
  }
  return Unary<Request, Response>(ctx, raw_request, raw_response, observe_,
                                  method, pool_.get(), std::move(fn));
}

grpc::ServerUnaryReactor* AdminServiceImpl::CreateCampaign(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Serve<v1::CreateCampaignRequest, v1::Campaign>(
      "CreateCampaign", ctx, req, resp,
      [this](const v1::CreateCampaignRequest& r,
             v1::Campaign* out) -> absl::Status {
        ASSIGN_OR_RETURN(*out, curator_->CreateCampaign(r));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* AdminServiceImpl::ListCampaigns(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Serve<v1::ListCampaignsRequest, v1::ListCampaignsResponse>(
      "ListCampaigns", ctx, req, resp,
      [this](const v1::ListCampaignsRequest& r,
             v1::ListCampaignsResponse* out) -> absl::Status {
        ASSIGN_OR_RETURN(*out, listings_.Campaigns(r));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* AdminServiceImpl::GetCampaign(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Serve<v1::GetCampaignRequest, v1::Campaign>(
      "GetCampaign", ctx, req, resp,
      [this](const v1::GetCampaignRequest& r,
             v1::Campaign* out) -> absl::Status {
        ASSIGN_OR_RETURN(*out, curator_->campaigns().Get(r.campaign_id()));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* AdminServiceImpl::CloseCampaign(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Serve<v1::CloseCampaignRequest, v1::Campaign>(
      "CloseCampaign", ctx, req, resp,
      [this](const v1::CloseCampaignRequest& r,
             v1::Campaign* out) -> absl::Status {
        ASSIGN_OR_RETURN(*out, curator_->campaigns().Close(r.campaign_id()));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* AdminServiceImpl::ListRefusals(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Serve<v1::ListRefusalsRequest, v1::ListRefusalsResponse>(
      "ListRefusals", ctx, req, resp,
      [this](const v1::ListRefusalsRequest& r,
             v1::ListRefusalsResponse* out) -> absl::Status {
        ASSIGN_OR_RETURN(*out, listings_.Refusals(r));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* AdminServiceImpl::GetBudgets(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Serve<v1::GetBudgetsRequest, v1::GetBudgetsResponse>(
      "GetBudgets", ctx, req, resp,
      [this](const v1::GetBudgetsRequest& r,
             v1::GetBudgetsResponse* out) -> absl::Status {
        ASSIGN_OR_RETURN(*out, listings_.Budgets(r));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* AdminServiceImpl::Estimate(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Serve<v1::EstimateRequest, v1::StageResult>(
      "Estimate", ctx, req, resp,
      [this](const v1::EstimateRequest& r,
             v1::StageResult* out) -> absl::Status {
        ASSIGN_OR_RETURN(*out, stages_->Estimate(r));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* AdminServiceImpl::Propagate(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Serve<v1::PropagateRequest, v1::StageResult>(
      "Propagate", ctx, req, resp,
      [this](const v1::PropagateRequest& r,
             v1::StageResult* out) -> absl::Status {
        ASSIGN_OR_RETURN(*out, stages_->Propagate(r));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* AdminServiceImpl::Evaluate(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Serve<v1::EvaluateRequest, v1::StageResult>(
      "Evaluate", ctx, req, resp,
      [this](const v1::EvaluateRequest& r,
             v1::StageResult* out) -> absl::Status {
        ASSIGN_OR_RETURN(*out, stages_->Evaluate(r));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* AdminServiceImpl::Release(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Serve<v1::ReleaseRequest, v1::StageResult>(
      "Release", ctx, req, resp,
      [this](const v1::ReleaseRequest& r,
             v1::StageResult* out) -> absl::Status {
        ASSIGN_OR_RETURN(*out, stages_->Release(r));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* AdminServiceImpl::GetReleaseLedger(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Serve<v1::GetReleaseLedgerRequest, v1::ReleaseLedger>(
      "GetReleaseLedger", ctx, req, resp,
      [this](const v1::GetReleaseLedgerRequest& r,
             v1::ReleaseLedger* out) -> absl::Status {
        ASSIGN_OR_RETURN(*out, listings_.ReleaseLedger(r));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* AdminServiceImpl::ListResults(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Serve<v1::ListResultsRequest, v1::ListResultsResponse>(
      "ListResults", ctx, req, resp,
      [this](const v1::ListResultsRequest& r,
             v1::ListResultsResponse* out) -> absl::Status {
        ASSIGN_OR_RETURN(*out, listings_.Results(r));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* AdminServiceImpl::ListResultIds(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Serve<v1::ListResultIdsRequest, v1::ListResultIdsResponse>(
      "ListResultIds", ctx, req, resp,
      [this](const v1::ListResultIdsRequest& r,
             v1::ListResultIdsResponse* out) -> absl::Status {
        ASSIGN_OR_RETURN(*out, listings_.ResultIds(r));
        return absl::OkStatus();
      });
}

// Streams a result matrix in chunks of about 1 MiB of floats, whole rows:
// the matrix is loaded on the admin pool, then each chunk is written when
// the previous one is done.
class EmbeddingExport final
    : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit EmbeddingExport(const RpcObserver& observer)
      : timer_(observer, "ExportEmbeddings") {}

  // Called once, from the pool, with the matrix or the error.
  void Start(absl::StatusOr<DenseMatrix> m) {
    if (!m.ok()) {
      Finish(timer_.Done(m.status()));
      return;
    }
    m_ = *std::move(m);
    rows_per_chunk_ =
        std::max<size_t>(1, (1u << 18) / std::max<size_t>(1, m_.cols));
    Next();
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(timer_.Done(
          absl::CancelledError("client went away during export")));
      return;
    }
    Next();
  }
  void OnDone() override { delete this; }

 private:
  void Next() {
    if (first_ > 0 && first_ >= m_.rows) {
      Finish(timer_.Done(absl::OkStatus()));
      return;
    }
    chunk_.Clear();
    chunk_.set_rows(static_cast<uint32_t>(m_.rows));
    chunk_.set_cols(static_cast<uint32_t>(m_.cols));
    chunk_.set_first_row(static_cast<uint32_t>(first_));
    const size_t last = std::min(m_.rows, first_ + rows_per_chunk_);
    chunk_.mutable_values()->Assign(m_.data.begin() + first_ * m_.cols,
                                    m_.data.begin() + last * m_.cols);
    // An empty matrix is one chunk with no values.
    first_ = std::max(last, first_ + 1);
    if (absl::Status s = SerializeResponse(chunk_, &out_); !s.ok()) {
      Finish(timer_.Done(s));
      return;
    }
    StartWrite(&out_);
  }

  RpcTimer timer_;
  DenseMatrix m_;
  size_t rows_per_chunk_ = 1;
  size_t first_ = 0;
  v1::EmbeddingChunk chunk_;
  grpc::ByteBuffer out_;
};

grpc::ServerWriteReactor<grpc::ByteBuffer>* AdminServiceImpl::ExportEmbeddings(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req) {
  auto* stream = new EmbeddingExport(observe_);
  // As Serve: authentication before the bytes are looked at, and a refusal
  // does not wait for a thread.
  absl::Status auth = Authorize(ctx);
  if (auth.ok() && status_only_) {
    auth = absl::FailedPreconditionError(
        "this curator is a frontend: ExportEmbeddings is the operator's "
        "(--role operator)");
  }
  if (!auth.ok()) {
    stream->Start(auth);
    return stream;
  }
  // The request lives until the stream's OnDone, which comes after Start.
  pool_->Submit([this, stream, req] {
    v1::ExportEmbeddingsRequest request;
    absl::Status s = ParseRequest(*req, "ExportEmbeddings", &request);
    if (!s.ok()) {
      stream->Start(s);
      return;
    }
    stream->Start(stages_->Matrix(request.result_id()));
  });
  return stream;
}

grpc::ServerUnaryReactor* AdminServiceImpl::ListAudit(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Serve<v1::ListAuditRequest, v1::ListAuditResponse>(
      "ListAudit", ctx, req, resp,
      [this](const v1::ListAuditRequest& r,
             v1::ListAuditResponse* out) -> absl::Status {
        ASSIGN_OR_RETURN(*out, listings_.Audit(r));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* AdminServiceImpl::GetStatus(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Serve<v1::GetStatusRequest, v1::CuratorStatus>(
      "GetStatus", ctx, req, resp,
      [this](const v1::GetStatusRequest&,
             v1::CuratorStatus* out) -> absl::Status {
        *out = base_status_;
        out->MergeFrom(curator_->Status());
        out->set_results(static_cast<uint32_t>(stages_->ResultCount()));
        return absl::OkStatus();
      });
}

}  // namespace ldpgraph::curator
