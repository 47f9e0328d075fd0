#include "client/check_in.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ldpgraph::agent {
namespace {

void SetDeadline(grpc::ClientContext* ctx, absl::Duration d) {
  ctx->set_deadline(std::chrono::system_clock::now() +
                    absl::ToChronoMilliseconds(d));
}

// Errors no later visit can fix.
bool Permanent(const absl::Status& s) {
  return absl::IsUnauthenticated(s) || absl::IsInvalidArgument(s);
}

}  // namespace

absl::Status CheckInOptions::Validate() const {
  if (host.curator.empty()) {
    return absl::InvalidArgumentError("the curator's address is missing");
  }
  if (!host.insecure && host.ca_pem.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs the CA certificate that signed the curator's");
  }
  if (host.credentials.empty()) {
    return absl::InvalidArgumentError("check-in mode needs at least one node");
  }
  RETURN_IF_ERROR(CheckSecrets(host.credentials));
  if (interval <= absl::ZeroDuration() || backoff <= absl::ZeroDuration() ||
      call_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "check-in interval, backoff and call timeout must be > 0");
  }
  if (!(jitter >= 0 && jitter < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("check-in jitter must be in [0, 1), got ", jitter));
  }
  if (max_check_ins < 0) {
    return absl::InvalidArgumentError("max check-ins must be >= 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CheckInLoop>> CheckInLoop::Create(
    CheckInOptions options, std::unique_ptr<AgentShard> shard) {
  RETURN_IF_ERROR(options.Validate());
  if (shard == nullptr) return absl::InvalidArgumentError("no shard");
  return std::unique_ptr<CheckInLoop>(
      new CheckInLoop(std::move(options), std::move(shard)));
}

CheckInLoop::CheckInLoop(CheckInOptions options,
                         std::unique_ptr<AgentShard> shard)
    : options_(std::move(options)), shard_(std::move(shard)) {
  if (options_.resume_tls && !options_.host.insecure) {
    session_cache_ = grpc_ssl_session_cache_create_lru(4);
  }
  request_.set_device_name(options_.host.host_name);
  for (const NodeSecret& c : options_.host.credentials) {
    FillCredential(options_.host, *shard_, c, request_.add_nodes());
  }
}

CheckInLoop::~CheckInLoop() {
  if (session_cache_ != nullptr) grpc_ssl_session_cache_destroy(session_cache_);
}

void CheckInLoop::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
}

absl::Duration CheckInLoop::Jittered(absl::Duration d) {
  if (options_.jitter == 0) return d;
  thread_local absl::BitGen gen;  // scheduling, not privacy noise
  return d * absl::Uniform(gen, 1.0 - options_.jitter, 1.0 + options_.jitter);
}

absl::StatusOr<v1::CheckInResponse> CheckInLoop::Visit() {
  // A connection of its own, dropped when the visit ends: the device leaves.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (session_cache_ != nullptr) {
    grpc_arg cache = grpc_ssl_session_cache_create_channel_arg(session_cache_);
    args.SetPointerWithVtable(cache.key, cache.value.pointer.p,
                              cache.value.pointer.vtable);
  }
  auto stub = v1::AgentService::NewStub(MakeCuratorChannel(options_.host, args));
  counters_.check_ins.fetch_add(1);
  v1::CheckInResponse reply;
  {
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);
    SetDeadline(&ctx, options_.call_timeout);
    RETURN_IF_ERROR(FromGrpc(stub->CheckIn(&ctx, request_, &reply), "CheckIn"));
  }
  switch (reply.outcome()) {
    case v1::CHECK_IN_OUTCOME_PACED:
      counters_.paced.fetch_add(1);
      return reply;
    case v1::CHECK_IN_OUTCOME_IDLE:
      counters_.idle.fetch_add(1);
      return reply;
    case v1::CHECK_IN_OUTCOME_SERVED:
      counters_.served.fetch_add(1);
      break;
    default:
      return absl::InternalError(absl::StrCat(
          "CheckIn: the curator answered with outcome ", reply.outcome()));
  }
  for (const v1::Task& task : reply.tasks()) {
    counters_.tasks.fetch_add(1);
    if (task.spec().kind() == v1::MECHANISM_KIND_EDGE_SUBSTITUTION) {
      counters_.skipped_tasks.fetch_add(1);
      if (skipped_campaigns_.insert(task.campaign_id()).second && options_.log) {
        options_.log(absl::StrCat(
            "campaign ", task.campaign_id(),
            ": neighbour substitution needs a live exchange; not answered in "
            "check-in mode"));
      }
      continue;
    }
    // In parts: every fresh answer of a part is durable before it is
    // submitted.
    RETURN_IF_ERROR(
        shard_
            ->RespondAll(task,
                         static_cast<size_t>(std::max(1, options_.host.answer_part)),
                         [&](std::vector<v1::Report> part) {
                           return Submit(*stub, reply.session_token(),
                                         std::move(part));
                         })
            .status());
  }
  return reply;
}

absl::Status CheckInLoop::Submit(v1::AgentService::Stub& stub,
                                 const std::string& token,
                                 std::vector<v1::Report> reports) {
  const size_t batch = static_cast<size_t>(std::max(1, options_.host.batch_size));
  for (size_t first = 0; first < reports.size(); first += batch) {
    v1::ReportBatch b;
    b.set_batch_id(first / batch);
    const size_t last = std::min(reports.size(), first + batch);
    for (size_t i = first; i < last; ++i) *b.add_reports() = std::move(reports[i]);
    v1::ReportAck ack;
    grpc::ClientContext ctx;
    ctx.AddMetadata("ldpgraph-session", token);
    SetDeadline(&ctx, options_.call_timeout);
    RETURN_IF_ERROR(FromGrpc(stub.Submit(&ctx, b, &ack), "Submit"));
    for (int i = 0; i < ack.results_size(); ++i) {
      const v1::ReportResult& r = ack.results(i);
      if (r.code() == 0) {
        counters_.reports_acked.fetch_add(1);
        if (r.duplicate()) counters_.duplicates.fetch_add(1);
      } else {
        counters_.rejected.fetch_add(1);
        if (options_.log) {
          options_.log(absl::StrCat("report of node ", b.reports(i).node_id(),
                                    " to campaign ", b.reports(i).campaign_id(),
                                    " rejected: ", r.message()));
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckInLoop::Run() {
  absl::Duration backoff = options_.backoff;
  int visits = 0;
  while (!stop_.HasBeenNotified()) {
    auto reply = Visit();
    ++visits;
    absl::Duration wait;
    if (reply.ok()) {
      ready_.store(true);
      backoff = options_.backoff;
      wait = absl::Milliseconds(reply->retry_after_ms());
      if (wait <= absl::ZeroDuration()) wait = Jittered(options_.interval);
      if (options_.log) {
        options_.log(absl::StrCat(
            "check-in ", visits, ": ",
            v1::CheckInOutcome_Name(reply->outcome()), ", ",
            reply->tasks_size(), " tasks; back in ",
            absl::FormatDuration(absl::Trunc(wait, absl::Milliseconds(1)))));
      }
      if (options_.exit_when_idle &&
          reply->outcome() == v1::CHECK_IN_OUTCOME_IDLE) {
        return absl::OkStatus();
      }
    } else {
      counters_.failed.fetch_add(1);
      if (Permanent(reply.status())) return reply.status();
      wait = Jittered(backoff);
      backoff = std::min(backoff * 2, options_.interval);
      if (options_.log) {
        options_.log(absl::StrCat("check-in ", visits, " failed: ",
                                  reply.status().message(), "; again in ",
                                  absl::FormatDuration(
                                      absl::Trunc(wait, absl::Milliseconds(1)))));
      }
    }
    if (options_.max_check_ins > 0 && visits >= options_.max_check_ins) break;
    stop_.WaitForNotificationWithTimeout(wait);
  }
  return absl::OkStatus();
}

}  // namespace ldpgraph::agent
