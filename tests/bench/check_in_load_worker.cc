// fleet_load --check-in's worker process (check_in_load_internal.h): its
// devices, each visiting the curator at its arrival time (and again when
// paced or returning), their check-ins, answers and figures.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <grpc/grpc_security.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ldpgraph/v1/agent.grpc.pb.h"
#include "server/curator/credentials.h"
#include "tests/bench/check_in_load_internal.h"
#include "tests/bench/load_util.h"

namespace ldpgraph::bench::check_in {
namespace {

using nlohmann::json;

// Device v's first check-in, as a fraction of the window: a fixed hash of
// its id (SplitMix64), so runs are comparable. A simulation's design.
double ArrivalFraction(uint32_t v) {
  uint64_t z = v + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) / static_cast<double>(uint64_t{1} << 53);
}

class Worker {
 public:
  explicit Worker(WorkerConfig c) : c_(std::move(c)) {}

  [[noreturn]] void Run() {
    // The parent's go: "<target> <monotonic start>".
    std::string line;
    char ch;
    while (read(c_.down_fd, &ch, 1) == 1 && ch != '\n') line += ch;
    std::vector<std::string> parts = absl::StrSplit(line, ' ');
    if (parts.size() != 2) _exit(2);
    target_ = parts[0];
    const double t0 = std::stod(parts[1]);
    for (uint32_t v = c_.first; v < c_.end; ++v) {
      queue_.push({t0 + c_.window * ArrivalFraction(v), v});
    }
    std::vector<std::thread> threads;
    for (int i = 0; i < c_.threads; ++i) threads.emplace_back([this] { Loop(); });
    for (auto& t : threads) t.join();
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    json j = counters_;
    j["cpu_seconds"] = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
                       ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    j["visit_ms"] = ToJson(Summarise(latencies_));
    j["first_errors"] = errors_;
    const std::string text = j.dump() + "\n";
    if (write(c_.up_fd, text.data(), text.size()) < 0) _exit(3);
    _exit(0);
  }

 private:
  using Due = std::pair<double, uint32_t>;  // (monotonic time, device)

  void Loop() {
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      if (queue_.empty()) {
        if (in_flight_ == 0) {
          cv_.notify_all();
          return;
        }
        cv_.wait(l);
        continue;
      }
      const Due due = queue_.top();
      const double wait = due.first - MonoSeconds();
      if (wait > 0) {
        cv_.wait_for(l, std::chrono::duration<double>(std::min(wait, 0.5)));
        continue;
      }
      queue_.pop();
      ++in_flight_;
      counters_["max_in_flight"] = std::max(counters_.value("max_in_flight", 0), in_flight_);
      l.unlock();
      const double start = MonoSeconds();
      std::optional<double> again = Visit(due.second);
      const double ms = (MonoSeconds() - start) * 1000;
      l.lock();
      latencies_.push_back(ms);
      --in_flight_;
      if (again) queue_.push({MonoSeconds() + *again, due.second});
      cv_.notify_all();
    }
  }

  void Count(const char* key, int64_t n = 1) {
    std::lock_guard<std::mutex> l(mu_);
    counters_[key] = counters_.value(key, int64_t{0}) + n;
  }
  void Error(const std::string& text) {
    std::lock_guard<std::mutex> l(mu_);
    counters_["errors"] = counters_.value("errors", int64_t{0}) + 1;
    if (errors_.size() < 3) errors_.push_back(OneLine(text));
  }

  // The device's TLS session cache: made at its first visit, so that a
  // paced device's next visit resumes; dropped when it is done.
  grpc_ssl_session_cache* Cache(uint32_t v, bool done) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = caches_.find(v);
    if (done) {
      if (it != caches_.end()) {
        grpc_ssl_session_cache_destroy(it->second);
        caches_.erase(it);
      }
      return nullptr;
    }
    if (it != caches_.end()) return it->second;
    return caches_[v] = grpc_ssl_session_cache_create_lru(1);
  }

  // One visit of device v: connect, check in, answer, submit, leave. The
  // seconds until its next visit (paced, or visits left); nullopt when it
  // is done.
  std::optional<double> Visit(uint32_t v) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    if (!c_.ca_pem.empty() && c_.resume) {
      grpc_arg cache = grpc_ssl_session_cache_create_channel_arg(Cache(v, false));
      args.SetPointerWithVtable(cache.key, cache.value.pointer.p, cache.value.pointer.vtable);
    }
    auto stub = v1::AgentService::NewStub(MakeChannel(target_, c_.ca_pem, kTlsName, args));
    v1::CheckInRequest req;
    req.set_device_name(absl::StrCat("device-", v));
    v1::NodeCredential* n = req.add_nodes();
    n->set_node_id(v);
    n->set_secret(curator::NodeCredential(c_.node_key, v));
    n->mutable_caps()->set_total(8);
    v1::CheckInResponse reply;
    Count("check_ins");
    {
      grpc::ClientContext ctx;
      ctx.set_wait_for_ready(true);
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      grpc::Status s = stub->CheckIn(&ctx, req, &reply);
      if (!s.ok()) {
        Error(absl::StrCat("device ", v, ": CheckIn: ", GrpcError(s)));
        Cache(v, true);
        return std::nullopt;
      }
    }
    if (reply.outcome() == v1::CHECK_IN_OUTCOME_PACED) {
      Count("paced");
      return reply.retry_after_ms() / 1000.0;
    }
    // Visits that were not paced, this one included.
    int done;
    {
      std::lock_guard<std::mutex> l(mu_);
      done = ++visits_[v];
    }
    std::optional<double> next;
    if (done < c_.visits) {
      next = reply.retry_after_ms() / 1000.0;
    } else {
      Cache(v, true);
    }
    if (reply.outcome() != v1::CHECK_IN_OUTCOME_SERVED) {
      Count("idle");
      if (done == 1) {
        Error(absl::StrCat("device ", v, ": nothing to answer (",
                           v1::CheckInOutcome_Name(reply.outcome()), ")"));
      }
      return next;
    }
    Count("served");
    if (done > 1) Error(absl::StrCat("device ", v, ": served again at visit ", done));
    Submit(*stub, v, reply);
    return next;
  }

  // Device v's reports for each task of reply, perturbed as an agent's
  // (SimulatedReports), each task's in one Submit call.
  void Submit(v1::AgentService::Stub& stub, uint32_t v, const v1::CheckInResponse& reply) {
    thread_local std::unique_ptr<SecureRandom> rng;
    if (!rng) rng = *SecureRandom::Create();
    for (const v1::Task& task : reply.tasks()) {
      auto reports = SimulatedReports(task, *rng);
      if (!reports.ok()) {
        Error(absl::StrCat("device ", v, ": ", reports.status().ToString()));
        continue;
      }
      v1::ReportBatch batch;
      for (auto& r : *reports) *batch.add_reports() = std::move(r);
      v1::ReportAck ack;
      grpc::ClientContext ctx;
      ctx.AddMetadata("ldpgraph-session", reply.session_token());
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      grpc::Status s = stub.Submit(&ctx, batch, &ack);
      if (!s.ok()) {
        Error(absl::StrCat("device ", v, ": Submit: ", GrpcError(s)));
        continue;
      }
      for (const auto& r : ack.results()) {
        if (r.code() != 0) {
          Error(absl::StrCat("device ", v, ": report rejected: ", r.message()));
        } else {
          Count("reports_acked");
          if (r.duplicate()) Count("duplicates");
        }
      }
    }
  }

  const WorkerConfig c_;
  std::string target_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> queue_;
  int in_flight_ = 0;
  json counters_ = json::object();
  std::vector<std::string> errors_;
  std::vector<double> latencies_;
  std::map<uint32_t, grpc_ssl_session_cache*> caches_;
  std::map<uint32_t, int> visits_;
};

}  // namespace

void RunWorker(WorkerConfig c) { Worker(std::move(c)).Run(); }

}  // namespace ldpgraph::bench::check_in
