// The agent service (AgentServiceImpl, services.h): its streams (Subscribe's
// TaskStream in a TaskStreamHub, Report's ReportStream) and its unary calls.
#include "server/curator/services.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "google/protobuf/arena.h"
#include "server/curator/internal/services.h"

namespace ldpgraph::curator {

using services_internal::Metadata;
using services_internal::ParseRequest;
using services_internal::Refused;
using services_internal::RpcTimer;
using services_internal::SerializeResponse;
using services_internal::Unary;

// One Subscribe stream: sends each pending task of its session once, and
// again looks for new ones whenever the hub pokes it (a campaign opened or
// closed). At most one write is in flight; StartWrite and Finish are never
// called with mu_ held, so an inline completion cannot deadlock.
class TaskStream final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  TaskStream(AgentSide* curator, TaskStreamHub* hub, WorkPool* pool,
             std::shared_ptr<const Session> session)
      : curator_(curator), hub_(hub), pool_(pool), session_(std::move(session)) {}

  // Something may have changed: look for tasks not sent yet.
  void Poke() {
    {
      absl::MutexLock lock(&mu_);
      dirty_ = true;
      if (busy_ || finished_) return;
      busy_ = true;
    }
    Pump();
  }

  // Ends the stream with OK (server shutdown).
  void Close() {
    {
      absl::MutexLock lock(&mu_);
      closing_ = true;
      if (busy_ || finished_) return;  // the pump finishes it
      finished_ = true;
    }
    Finish(grpc::Status::OK);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {  // the client went away
      {
        absl::MutexLock lock(&mu_);
        busy_ = false;
        if (finished_) return;
        finished_ = true;
      }
      Finish(grpc::Status::OK);
      return;
    }
    // The next look for tasks takes the core's lock: not on gRPC's thread.
    pool_->Submit([this] { Pump(); });
  }

  void OnCancel() override { Close(); }
  void OnDone() override;

 private:
  // Runs while busy_ is held: writes the next task, or finishes, or drops
  // busy_ when there is nothing to do.
  void Pump() {
    for (;;) {
      bool look = false;
      {
        absl::MutexLock lock(&mu_);
        if (closing_) {
          busy_ = false;
          if (finished_) return;
          finished_ = true;
          break;  // finish below, outside the lock
        }
        if (!queue_.empty()) {
          v1::Task task = std::move(queue_.front());
          queue_.pop_front();
          if (!SerializeResponse(task, &out_).ok()) continue;
        } else if (dirty_) {
          dirty_ = false;
          look = true;
        } else {
          busy_ = false;
          return;
        }
      }
      if (look) {
        std::vector<v1::Task> tasks =
            curator_->campaigns().PendingTasks(*session_);
        absl::MutexLock lock(&mu_);
        for (v1::Task& t : tasks) {
          if (sent_.insert(t.campaign_id()).second) {
            queue_.push_back(std::move(t));
          }
        }
        continue;
      }
      StartWrite(&out_);
      return;
    }
    Finish(grpc::Status::OK);
  }

  AgentSide* const curator_;
  TaskStreamHub* const hub_;
  WorkPool* const pool_;
  const std::shared_ptr<const Session> session_;
  absl::Mutex mu_;
  // busy_: a pump runs or a write is in flight (whoever holds it writes).
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool dirty_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<v1::Task> queue_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> sent_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer out_;
};

// The open Subscribe streams, and one thread that pokes them all when the
// curator's generation moves (a campaign opened or closed).
class TaskStreamHub {
 public:
  explicit TaskStreamHub(AgentSide* curator) : curator_(curator) {
    watcher_ = std::thread([this] { Watch(); });
  }
  ~TaskStreamHub() { Stop(); }

  // False after Stop.
  bool Add(TaskStream* s) {
    absl::MutexLock lock(&mu_);
    if (stopped_) return false;
    streams_.insert(s);
    curator_->task_streams().fetch_add(1);
    return true;
  }
  void Remove(TaskStream* s) {
    absl::MutexLock lock(&mu_);
    if (streams_.erase(s) > 0) curator_->task_streams().fetch_sub(1);
  }
  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) return;
      stopped_ = true;
      // OnDone is never called inline from Finish, so Remove cannot re-enter.
      for (TaskStream* s : streams_) s->Close();
    }
    quit_.store(true);
    if (watcher_.joinable()) watcher_.join();
  }

 private:
  void Watch() {
    uint64_t seen = curator_->campaigns().generation();
    while (!quit_.load()) {
      const uint64_t now = curator_->campaigns().WaitForChange(
          seen, absl::Now() + absl::Milliseconds(200));
      if (now == seen) continue;
      seen = now;
      absl::MutexLock lock(&mu_);
      for (TaskStream* s : streams_) s->Poke();
    }
  }

  AgentSide* const curator_;
  absl::Mutex mu_;
  absl::flat_hash_set<TaskStream*> streams_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> quit_{false};
  std::thread watcher_;
};

void TaskStream::OnDone() {
  hub_->Remove(this);
  delete this;
}

// One Report stream: read a batch, ingest it, acknowledge it, read the next.
// One operation is in flight at a time, so no lock is needed.
class ReportStream final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  ReportStream(AgentSide* curator, WorkPool* pool,
               std::shared_ptr<const Session> session,
               const RpcObserver& observer)
      : curator_(curator),
        pool_(pool),
        session_(std::move(session)),
        observe_(observer) {
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client half-closed (or went away)
      Finish(grpc::Status::OK);
      return;
    }
    // Ingesting writes to the store: not on gRPC's thread.
    pool_->Submit([this] { Ingest(); });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    StartRead(&in_);
  }

  void OnDone() override { delete this; }

 private:
  void Ingest() {
    ++batches_;
    RpcTimer timer(observe_, "Report.batch");
    // The batch lives on an arena, freed in one go below: a batch is
    // hundreds of small messages, whose one-by-one frees were a fifth of
    // the curator's ingest CPU.
    google::protobuf::Arena arena(ArenaOptions());
    v1::ReportBatch& batch =
        *google::protobuf::Arena::CreateMessage<v1::ReportBatch>(&arena);
    absl::Status s = ParseRequest(in_, "Report", &batch);
    if (!s.ok()) {
      s = absl::InvalidArgumentError(absl::StrCat(
          "Report: message ", batches_, " of the stream (", in_.Length(),
          " bytes) is not a valid ldpgraph.v1.ReportBatch; nothing of it was "
          "stored"));
    }
    in_.Clear();
    v1::ReportAck& ack =
        *google::protobuf::Arena::CreateMessage<v1::ReportAck>(&arena);
    if (s.ok()) s = curator_->campaigns().Ingest(*session_, batch, &ack);
    if (s.ok()) s = SerializeResponse(ack, &out_);
    if (!s.ok()) {
      Finish(timer.Done(s));
      return;
    }
    timer.Done(s);
    StartWrite(&out_);
  }

  // Blocks from 4 KiB up to 32 KiB: below glibc's 64 KiB threshold at which
  // a free consolidates the whole heap.
  static google::protobuf::ArenaOptions ArenaOptions() {
    google::protobuf::ArenaOptions o;
    o.start_block_size = 4096;
    o.max_block_size = 32768;
    return o;
  }

  AgentSide* const curator_;
  WorkPool* const pool_;
  const std::shared_ptr<const Session> session_;
  const RpcObserver& observe_;
  grpc::ByteBuffer in_, out_;
  uint64_t batches_ = 0;
};

AgentServiceImpl::AgentServiceImpl(AgentSide* curator, RpcObserver observer)
    : curator_(curator),
      observe_(std::move(observer)),
      hub_(std::make_unique<TaskStreamHub>(curator)),
      pool_(std::make_unique<WorkPool>(kAgentThreads, kAgentNice)) {}

AgentServiceImpl::~AgentServiceImpl() { Stop(); }

void AgentServiceImpl::Stop() { hub_->Stop(); }

absl::StatusOr<std::shared_ptr<const Session>> AgentServiceImpl::Authenticate(
    grpc::CallbackServerContext* ctx) const {
  const std::string token = Metadata(ctx, "ldpgraph-session");
  if (token.empty()) {
    return absl::UnauthenticatedError(
        "missing ldpgraph-session metadata: call Enrol first");
  }
  return curator_->sessions().Find(token);
}

grpc::ServerUnaryReactor* AgentServiceImpl::Enrol(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Unary<v1::EnrolRequest, v1::EnrolResponse>(
      ctx, req, resp, observe_, "Enrol", pool_.get(),
      [this](const v1::EnrolRequest& r, v1::EnrolResponse* out) -> absl::Status {
        ASSIGN_OR_RETURN(auto session, curator_->Enrol(r));
        out->set_session_token(session->token);
        out->set_node_count(static_cast<uint32_t>(session->nodes.size()));
        return absl::OkStatus();
      });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* AgentServiceImpl::Subscribe(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req) {
  v1::SubscribeRequest request;
  absl::Status parsed = ParseRequest(*req, "Subscribe", &request);
  auto session = Authenticate(ctx);
  if (!parsed.ok() || !session.ok()) {
    return new Refused<grpc::ServerWriteReactor<grpc::ByteBuffer>>(
        parsed.ok() ? session.status() : parsed);
  }
  auto* stream =
      new TaskStream(curator_, hub_.get(), pool_.get(), *std::move(session));
  if (!hub_->Add(stream)) {
    // Shutting down: the stream was never registered, so it must not be
    // removed either; finish it through the ordinary path.
    stream->Close();
    return stream;
  }
  pool_->Submit([stream] { stream->Poke(); });  // what is pending already
  return stream;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
AgentServiceImpl::Report(grpc::CallbackServerContext* ctx) {
  auto session = Authenticate(ctx);
  if (!session.ok()) {
    return new Refused<
        grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>>(
        session.status());
  }
  return new ReportStream(curator_, pool_.get(), *std::move(session), observe_);
}

grpc::ServerUnaryReactor* AgentServiceImpl::Relay(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Unary<v1::RelayRequest, v1::RelayResponse>(
      ctx, req, resp, observe_, "Relay", pool_.get(),
      [this, ctx](const v1::RelayRequest& r, v1::RelayResponse* out) -> absl::Status {
        ASSIGN_OR_RETURN(auto session, Authenticate(ctx));
        ASSIGN_OR_RETURN(int n, curator_->relay().Relay(*session, r));
        out->set_accepted(static_cast<uint32_t>(n));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* AgentServiceImpl::ClaimShard(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Unary<v1::ClaimShardRequest, v1::ClaimShardResponse>(
      ctx, req, resp, observe_, "ClaimShard", pool_.get(),
      [this](const v1::ClaimShardRequest& r,
          v1::ClaimShardResponse* out) -> absl::Status {
        ASSIGN_OR_RETURN(FleetPlanner::Grant grant,
                         curator_->ClaimShard(r, absl::Now()));
        using State = FleetPlanner::Grant::State;
        switch (grant.state) {
          case State::kWaiting:
            out->set_state(v1::SHARD_STATE_WAITING);
            break;
          case State::kAssigned:
            out->set_state(v1::SHARD_STATE_ASSIGNED);
            break;
          case State::kSpare:
            out->set_state(v1::SHARD_STATE_SPARE);
            break;
        }
        out->set_shard(grant.shard);
        out->set_shards(grant.shards);
        out->set_first_node(grant.begin);
        out->set_end_node(grant.end);
        out->set_retry_after_ms(absl::ToInt64Milliseconds(grant.retry_after));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* AgentServiceImpl::CheckIn(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Unary<v1::CheckInRequest, v1::CheckInResponse>(
      ctx, req, resp, observe_, "CheckIn", pool_.get(),
      [this](const v1::CheckInRequest& r, v1::CheckInResponse* out) -> absl::Status {
        ASSIGN_OR_RETURN(AgentSide::CheckInResult result,
                         curator_->CheckIn(r, absl::Now()));
        using Outcome = CheckInDesk::Outcome;
        switch (result.outcome) {
          case Outcome::kServed:
            out->set_outcome(v1::CHECK_IN_OUTCOME_SERVED);
            out->set_session_token(result.session->token);
            out->set_session_ttl_ms(
                absl::ToInt64Milliseconds(result.session_ttl));
            for (v1::Task& t : result.tasks) *out->add_tasks() = std::move(t);
            break;
          case Outcome::kIdle:
            out->set_outcome(v1::CHECK_IN_OUTCOME_IDLE);
            break;
          case Outcome::kPaced:
            out->set_outcome(v1::CHECK_IN_OUTCOME_PACED);
            break;
        }
        out->set_retry_after_ms(
            std::max<int64_t>(1, absl::ToInt64Milliseconds(result.retry_after)));
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* AgentServiceImpl::Submit(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Unary<v1::ReportBatch, v1::ReportAck>(
      ctx, req, resp, observe_, "Submit", pool_.get(),
      [this, ctx](const v1::ReportBatch& r, v1::ReportAck* out) -> absl::Status {
        ASSIGN_OR_RETURN(auto session, Authenticate(ctx));
        return curator_->campaigns().Ingest(*session, r, out);
      });
}

grpc::ServerUnaryReactor* AgentServiceImpl::FetchSealed(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Unary<v1::FetchSealedRequest, v1::FetchSealedResponse>(
      ctx, req, resp, observe_, "FetchSealed", pool_.get(),
      [this, ctx](const v1::FetchSealedRequest& r,
          v1::FetchSealedResponse* out) -> absl::Status {
        ASSIGN_OR_RETURN(auto session, Authenticate(ctx));
        ASSIGN_OR_RETURN(
            auto messages,
            curator_->relay().Fetch(*session, r.after_sequence(),
                                    static_cast<int>(r.max_messages()),
                                    r.campaign_id()));
        for (auto& m : messages) *out->add_messages() = std::move(m);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* AgentServiceImpl::PublicKeys(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Unary<v1::PublicKeysRequest, v1::PublicKeysResponse>(
      ctx, req, resp, observe_, "PublicKeys", pool_.get(),
      [this, ctx](const v1::PublicKeysRequest& r,
          v1::PublicKeysResponse* out) -> absl::Status {
        // Any session may ask: the keys are public.
        RETURN_IF_ERROR(Authenticate(ctx).status());
        ASSIGN_OR_RETURN(
            auto keys,
            curator_->keys().Get(std::vector<uint32_t>(r.node_ids().begin(),
                                                       r.node_ids().end())));
        for (auto& k : keys) *out->add_keys() = std::move(k);
        return absl::OkStatus();
      });
}

}  // namespace ldpgraph::curator
