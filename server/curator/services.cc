#include "server/curator/services.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <deque>
#include <optional>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "common/stopwatch.h"
#include "google/protobuf/arena.h"
#include "google/protobuf/stubs/logging.h"
#include "server/curator/credentials.h"
#include "server/curator/log_limiter.h"

namespace ldpgraph::curator {
namespace {

// Times an RPC and reports it to the observer when it ends.
class RpcTimer {
 public:
  RpcTimer(const RpcObserver& observer, absl::string_view method)
      : observer_(observer), method_(method),
        start_(std::chrono::steady_clock::now()) {}
  grpc::Status Done(const absl::Status& s) {
    if (observer_) {
      observer_(method_, SecondsSince(start_), static_cast<int>(s.code()));
    }
    return ToGrpcStatus(s);
  }

 private:
  const RpcObserver& observer_;
  absl::string_view method_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

// --- agent service ----------------------------------------------------------

// A pool of threads for work that may block (store writes, waiting on the
// core's locks): gRPC runs every callback on a couple of threads (two on a
// two-core machine), so a callback that blocks stalls every stream and call
// of the server. Threads start when work arrives and none is idle,
// at most max_threads; work beyond that waits in order. Idle threads wait
// for more; all are joined on destruction, after the queue drains.
class WorkPool {
 public:
  // nice: added to each thread's scheduling niceness (Linux threads have
  // their own), so that a pool of bulk work yields the CPU to another.
  explicit WorkPool(int max_threads, int nice = 0)
      : max_threads_(std::max(1, max_threads)), nice_(nice) {}
  ~WorkPool() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    for (std::thread& t : threads_) t.join();
  }

  void Submit(std::function<void()> fn) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(fn));
    if (idle_ == 0 && static_cast<int>(threads_.size()) < max_threads_) {
      threads_.emplace_back([this] {
        if (nice_ != 0) {
          // Best effort: an unprivileged process can always raise it.
          errno = 0;
          const int now = ::getpriority(PRIO_PROCESS, ::gettid());
          if (errno == 0) ::setpriority(PRIO_PROCESS, ::gettid(), now + nice_);
        }
        Loop();
      });
    }
  }

 private:
  void Loop() {
    absl::MutexLock lock(&mu_);
    while (true) {
      ++idle_;
      mu_.Await(absl::Condition(
          +[](WorkPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
            return p->stop_ || !p->queue_.empty();
          },
          this));
      --idle_;
      if (queue_.empty()) return;  // stopping, and nothing left
      std::function<void()> fn = std::move(queue_.front());
      queue_.pop_front();
      mu_.Unlock();
      fn();
      mu_.Lock();
    }
  }

  const int max_threads_;
  const int nice_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

namespace {

// How often the log may say that a malformed request was refused.
constexpr absl::Duration kMalformedLogInterval = absl::Minutes(1);

// Writes s (a refusal of a malformed request) to the log, at most once per
// kMalformedLogInterval for the whole process, whichever service or caller:
// a caller can send such requests at will. The line names the method, the
// type and the size, never the caller's bytes.
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

// Parses a raw request; INVALID_ARGUMENT naming the method and the type when
// the bytes are not a message of that type (and LogMalformed).
template <typename Message>
absl::Status ParseRequest(const grpc::ByteBuffer& raw, absl::string_view method,
                          Message* out) {
  grpc::ByteBuffer copy(raw);  // shares the slices; parsing consumes them
  const size_t bytes = copy.Length();
  grpc::Status s;
  {
    // protobuf's parser writes a line of its own for every string field
    // that is not UTF-8, which any caller could repeat at will; the status
    // below tells the caller, LogMalformed the operator. (The silencer holds
    // back protobuf's non-fatal lines process-wide while one lives: for the
    // length of a parse.)
    google::protobuf::LogSilencer quiet;
    s = grpc::SerializationTraits<Message>::Deserialize(&copy, out);
  }
  if (!s.ok()) {
    absl::Status refused = absl::InvalidArgumentError(absl::StrCat(
        method, ": the request (", bytes, " bytes) is not a valid ",
        Message::descriptor()->full_name(), " message"));
    LogMalformed(refused);
    return refused;
  }
  return absl::OkStatus();
}

template <typename Message>
absl::Status SerializeResponse(const Message& message, grpc::ByteBuffer* out) {
  out->Clear();  // the serialiser writes into an empty buffer only
  bool own = false;
  grpc::Status s =
      grpc::SerializationTraits<Message>::Serialize(message, out, &own);
  if (!s.ok()) {
    return absl::InternalError(absl::StrCat(
        "cannot serialise ", Message::descriptor()->full_name()));
  }
  return absl::OkStatus();
}

std::string Metadata(grpc::CallbackServerContext* ctx, absl::string_view key) {
  const auto& md = ctx->client_metadata();
  auto it = md.find(grpc::string_ref(key.data(), key.size()));
  if (it == md.end()) return std::string();
  return std::string(it->second.data(), it->second.size());
}

// A unary call: parse, run fn, serialise, observe, finish, all on `pool`
// (fn may block).
template <typename Request, typename Response, typename Fn>
grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* ctx,
                                const grpc::ByteBuffer* raw_request,
                                grpc::ByteBuffer* raw_response,
                                const RpcObserver& observer,
                                absl::string_view method, WorkPool* pool,
                                Fn fn) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  pool->Submit([=, &observer, fn = std::move(fn)] {
    RpcTimer timer(observer, method);
    Request request;
    Response response;
    absl::Status s = ParseRequest(*raw_request, method, &request);
    if (s.ok()) s = fn(request, &response);
    if (s.ok()) s = SerializeResponse(response, raw_response);
    reactor->Finish(timer.Done(s));
  });
  return reactor;
}

// A call refused before it started (a stream without a valid session).
template <typename Reactor>
class Refused final : public Reactor {
 public:
  explicit Refused(const absl::Status& s) { this->Finish(ToGrpcStatus(s)); }
  void OnDone() override { delete this; }
};

}  // namespace

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

// --- admin service ----------------------------------------------------------

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
