// Internal to the curator's gRPC services (services.cc, agent_service.cc,
// admin_service.cc): what both services' calls go through -- the pool their
// blocking work runs on, parsing a request and serialising a response, the
// timing of a call for the RpcObserver, the unary call's one path. Not for
// use outside server/curator/.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/stopwatch.h"
#include "google/protobuf/stubs/logging.h"
#include "server/curator/services.h"

namespace ldpgraph::curator {

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

namespace services_internal {

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

// How often the log may say that a malformed request was refused.
inline constexpr absl::Duration kMalformedLogInterval = absl::Minutes(1);

// Writes s (a refusal of a malformed request) to the log, at most once per
// kMalformedLogInterval for the whole process, whichever service or caller:
// a caller can send such requests at will. The line names the method, the
// type and the size, never the caller's bytes. (services.cc)
void LogMalformed(const absl::Status& s);

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

// The value of a request's metadata `key`, or "" when it has none.
std::string Metadata(grpc::CallbackServerContext* ctx, absl::string_view key);

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

}  // namespace services_internal
}  // namespace ldpgraph::curator
