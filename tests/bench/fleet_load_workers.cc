// fleet_load's simulated agent hosts (tests/bench/fleet_load_workers.h):
// a worker process's hosts, their streams, and the parent's side of the
// pipes.
#include "tests/bench/fleet_load_workers.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <memory>
#include <string>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/net/route_header.h"
#include "common/random/random.h"
#include "common/random/seed_mix.h"
#include "ldpgraph/v1/agent.grpc.pb.h"
#include "server/curator/credentials.h"
#include "tests/bench/load_util.h"

namespace ldpgraph::bench::fleet {

namespace {

class Worker;

// One simulated agent host: its channel, session and task stream.
struct Host {
  Worker* worker = nullptr;
  int index = 0;
  uint32_t first_node = 0, count = 0;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::AgentService::Stub> stub;
  grpc::ClientContext enrol_ctx;
  v1::EnrolRequest enrol_req;
  v1::EnrolResponse enrol_resp;
  std::string token;
  std::mutex mu;                      // answered, subscribe
  std::vector<std::string> answered;  // campaigns answered
  class SubscribeReactor* subscribe = nullptr;
  std::atomic<bool> dead{false};
  std::atomic<int64_t> pending_nodes{0};  // nodes asked but not yet acked
};

// Every call of a host carries its name in the route header, as a real
// agent's do, so that an edge in front of several frontends keeps its
// session's calls on one of them.
void Route(const Host& h, grpc::ClientContext* ctx) {
  ctx->AddMetadata(ldpgraph::net::kRouteHeader,
                   absl::StrCat("fleet-load-host-", h.index));
}

class Worker {
 public:
  explicit Worker(WorkerConfig c) : c_(std::move(c)) {}
  [[noreturn]] void Run();

  bool stopping() const { return stopping_.load(); }
  void Count(int64_t WorkerCounters::*field, int64_t n = 1) {
    std::lock_guard<std::mutex> l(mu_);
    counters_.*field += n;
  }
  // One error: counted in field (if any) and in errors; its message is
  // passed on if it is among the worker's first three of its kind (a word:
  // enrol, task-stream, report-stream, rejected, other).
  void Error(int64_t WorkerCounters::*field, const char* kind, const std::string& message) {
    std::lock_guard<std::mutex> l(mu_);
    if (field != nullptr) counters_.*field += 1;
    counters_.errors += 1;
    KeepLocked(kind, message);
  }
  // A message about errors counted elsewhere.
  void Note(const char* kind, const std::string& message) {
    std::lock_guard<std::mutex> l(mu_);
    KeepLocked(kind, message);
  }
  // A host that will answer nothing more: its pending nodes are lost.
  void Dead(Host& h) {
    if (h.dead.exchange(true)) return;
    const int64_t pending = h.pending_nodes.exchange(0);
    bool answered_any;
    {
      std::lock_guard<std::mutex> l(h.mu);
      answered_any = !h.answered.empty();
    }
    Count(&WorkerCounters::lost_nodes, answered_any ? pending : h.count);
  }
  void Acked(int64_t ok, int64_t rejected) {
    std::lock_guard<std::mutex> l(mu_);
    counters_.reported += ok;
    counters_.rejected += rejected;
    counters_.errors += rejected;
    counters_.last_ack_us = static_cast<int64_t>(MonoSeconds() * 1e6);
  }
  void CallStarted() { outstanding_.fetch_add(1); }
  void CallDone() {
    if (outstanding_.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> l(mu_);
      cv_.notify_all();
    }
  }
  void EnrolDone() {
    std::lock_guard<std::mutex> l(mu_);
    --enrols_in_flight_;
    cv_.notify_all();
  }
  void Answer(Host& h, const v1::Task& task);
  void StartSubscribe(Host& h);

 private:
  // The hosts [first_host, end_host): their channels and Enrol requests.
  void MakeHosts();
  // Cancels every call, then waits up to 5 s for them to end.
  void CancelCalls();
  void SendStatus();
  void Enrol(Host& h);
  void KeepLocked(const char* kind, const std::string& message) {
    if (kept_[kind]++ < 3) messages_.push_back(absl::StrCat(kind, " ", OneLine(message)));
  }

  WorkerConfig c_;
  std::vector<std::unique_ptr<Host>> hosts_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> outstanding_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  WorkerCounters counters_;
  std::vector<std::string> messages_;  // "kind text", not sent yet
  std::map<std::string, int> kept_;
  int enrols_in_flight_ = 0;
  std::mutex write_mu_;
};

thread_local std::unique_ptr<ldpgraph::SecureRandom> t_rng;
ldpgraph::RandomSource& Rng() {
  if (!t_rng) {
    auto r = ldpgraph::SecureRandom::Create();
    if (!r.ok()) {
      std::cerr << "fleet_load: " << r.status() << "\n";
      _exit(3);
    }
    t_rng = *std::move(r);
  }
  return *t_rng;
}

// The task stream of one host; lives as long as its host (never deleted
// before the worker exits, so TryCancel is always safe).
class SubscribeReactor : public grpc::ClientReadReactor<v1::Task> {
 public:
  explicit SubscribeReactor(Host* h) : h_(h) {
    ctx_.AddMetadata("ldpgraph-session", h->token);
    Route(*h, &ctx_);
  }
  void Start() {
    h_->worker->CallStarted();
    h_->stub->async()->Subscribe(&ctx_, &req_, this);
    StartRead(&task_);
    StartCall();
  }
  void Cancel() { ctx_.TryCancel(); }
  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    h_->worker->Count(&WorkerCounters::tasks);
    h_->worker->Answer(*h_, task_);
    StartRead(&task_);
  }
  void OnDone(const grpc::Status& s) override {
    Worker& w = *h_->worker;
    if (!w.stopping()) {
      w.Error(&WorkerCounters::subscribe_failed, "task-stream",
              absl::StrCat("host ", h_->index, ": task stream ended: ", GrpcError(s)));
      w.Dead(*h_);
    }
    w.CallDone();
  }

 private:
  Host* h_;
  grpc::ClientContext ctx_;
  v1::SubscribeRequest req_;
  v1::Task task_;
};

// One Report stream: the host's answers to one task, in batches; deletes
// itself when done.
class ReportReactor : public grpc::ClientBidiReactor<v1::ReportBatch, v1::ReportAck> {
 public:
  ReportReactor(Host* h, std::vector<v1::ReportBatch> batches)
      : h_(h), batches_(std::move(batches)) {
    ctx_.AddMetadata("ldpgraph-session", h->token);
    Route(*h, &ctx_);
  }
  void Start() {
    h_->worker->CallStarted();
    h_->stub->async()->Report(&ctx_, this);
    WriteNext();
    StartRead(&ack_);
    StartCall();
  }
  void OnWriteDone(bool ok) override {
    if (ok) WriteNext();  // else OnDone says why
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    int64_t good = 0, bad = 0;
    const v1::ReportBatch& batch = batches_[std::min(acks_, batches_.size() - 1)];
    for (int i = 0; i < ack_.results_size(); ++i) {
      const v1::ReportResult& r = ack_.results(i);
      if (r.code() == 0) {
        ++good;
      } else if (++bad == 1) {
        h_->worker->Note(
            "rejected",
            absl::StrCat(
                "host ", h_->index, ": report of node ",
                i < batch.reports_size() ? absl::StrCat(batch.reports(i).node_id()) : "?",
                " rejected: ",
                GrpcError(grpc::Status(static_cast<grpc::StatusCode>(r.code()), r.message()))));
      }
    }
    h_->worker->Acked(good, bad);  // rejections count as errors
    h_->pending_nodes.fetch_sub(good + bad);
    if (++acks_ < batches_.size()) StartRead(&ack_);
  }
  void OnDone(const grpc::Status& s) override {
    Worker& w = *h_->worker;
    if ((!s.ok() || acks_ < batches_.size()) && !w.stopping()) {
      w.Error(&WorkerCounters::report_failed, "report-stream",
              absl::StrCat("host ", h_->index, ": report stream: ", GrpcError(s), ", ", acks_,
                           " of ", batches_.size(), " batches acked"));
      w.Dead(*h_);
    }
    w.CallDone();
    delete this;
  }

 private:
  void WriteNext() {
    if (next_ >= batches_.size()) return;
    const size_t i = next_++;
    if (next_ == batches_.size()) {
      StartWriteLast(&batches_[i], grpc::WriteOptions());
    } else {
      StartWrite(&batches_[i]);
    }
  }
  Host* h_;
  grpc::ClientContext ctx_;
  std::vector<v1::ReportBatch> batches_;
  size_t next_ = 0;
  size_t acks_ = 0;
  v1::ReportAck ack_;
};

void Worker::Answer(Host& h, const v1::Task& task) {
  {
    std::lock_guard<std::mutex> l(h.mu);
    if (std::find(h.answered.begin(), h.answered.end(), task.campaign_id()) != h.answered.end()) {
      return;  // a resend: answered already
    }
    h.answered.push_back(task.campaign_id());
  }
  // The reports, perturbed as an agent would (load_util.h).
  auto simulated = SimulatedReports(task, Rng());
  if (!simulated.ok()) {
    Error(nullptr, "other",
          absl::StrCat("host ", h.index, ": campaign ", task.campaign_id(),
                       ": cannot answer: ", simulated.status().ToString()));
    Dead(h);
    return;
  }
  std::vector<v1::Report> reports = *std::move(simulated);
  if (reports.empty()) return;
  h.pending_nodes.fetch_add(static_cast<int64_t>(reports.size()));
  std::vector<v1::ReportBatch> batches;
  for (size_t first = 0; first < reports.size(); first += c_.batch) {
    v1::ReportBatch b;
    b.set_batch_id(batches.size() + 1);
    const size_t last = std::min(reports.size(), first + c_.batch);
    for (size_t i = first; i < last; ++i) *b.add_reports() = std::move(reports[i]);
    batches.push_back(std::move(b));
  }
  (new ReportReactor(&h, std::move(batches)))->Start();
}

void Worker::StartSubscribe(Host& h) {
  auto* r = new SubscribeReactor(&h);
  {
    std::lock_guard<std::mutex> l(h.mu);
    if (stopping()) {
      delete r;
      return;
    }
    h.subscribe = r;
  }
  // Outside the lock: a reaction may run on this thread (OnDone of a call
  // that fails at once), and it takes h.mu.
  r->Start();
}

void Worker::Enrol(Host& h) {
  Route(h, &h.enrol_ctx);
  h.enrol_ctx.set_wait_for_ready(true);
  h.enrol_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  CallStarted();
  h.stub->async()->Enrol(&h.enrol_ctx, &h.enrol_req, &h.enrol_resp, [this, &h](grpc::Status s) {
    if (s.ok()) {
      h.token = h.enrol_resp.session_token();
      Count(&WorkerCounters::enrolled);
      StartSubscribe(h);
    } else if (!stopping()) {
      Error(&WorkerCounters::enrol_failed, "enrol",
            absl::StrCat("host ", h.index, ": Enrol: ", GrpcError(s)));
      Dead(h);
    }
    EnrolDone();
    CallDone();
  });
}

void Worker::SendStatus() {
  std::string out;
  {
    std::lock_guard<std::mutex> l(mu_);
    out.push_back('C');
    for (auto f : WorkerCounters::kFields) absl::StrAppend(&out, " ", counters_.*f);
    out += "\n";
    for (auto& m : messages_) absl::StrAppend(&out, "E ", m, "\n");
    messages_.clear();
  }
  std::lock_guard<std::mutex> l(write_mu_);
  for (size_t done = 0; done < out.size();) {
    const ssize_t n = write(c_.up_fd, out.data() + done, out.size() - done);
    if (n <= 0) _exit(4);  // the parent is gone
    done += static_cast<size_t>(n);
  }
}

void Worker::MakeHosts() {
  for (int i = c_.first_host; i < c_.end_host; ++i) {
    auto h = std::make_unique<Host>();
    h->worker = this;
    h->index = i;
    h->first_node = static_cast<uint32_t>(i) * c_.nodes_per_host;
    h->count = static_cast<uint32_t>(c_.nodes_per_host);
    grpc::ChannelArguments args;
    // A connection of its own per host, as separate machines would have.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("ldpgraph.fleet_load.host", i);
    args.SetMaxReceiveMessageSize(64 << 20);
    h->channel = MakeChannel(c_.target, args);
    h->stub = v1::AgentService::NewStub(h->channel);
    h->enrol_req.set_host_name(absl::StrCat("fleet-load-", i));
    for (uint32_t v = h->first_node; v < h->first_node + h->count; ++v) {
      if (ldpgraph::SimulatedOffline(kScenarioSeed, v, c_.dropout)) continue;
      v1::NodeCredential* n = h->enrol_req.add_nodes();
      n->set_node_id(v);
      n->set_secret(ldpgraph::curator::NodeCredential(c_.node_key, v));
      n->mutable_caps()->set_total(8);  // ldpgraph-agent's default cap
    }
    hosts_.push_back(std::move(h));
  }
}

void Worker::CancelCalls() {
  for (auto& h : hosts_) {
    h->enrol_ctx.TryCancel();
    SubscribeReactor* r;
    {
      std::lock_guard<std::mutex> l(h->mu);
      r = h->subscribe;
    }
    if (r != nullptr) r->Cancel();
  }
  {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, std::chrono::seconds(5), [&] { return outstanding_.load() == 0; });
  }
}

void Worker::Run() {
  // Channels (lazy: nothing connects before the first call) and credentials.
  MakeHosts();
  // The parent's commands.
  std::atomic<bool> go{false};
  std::thread commands([&] {
    char cmd;
    while (read(c_.down_fd, &cmd, 1) == 1) {
      if (cmd == 'g') {
        go.store(true);
        std::lock_guard<std::mutex> l(mu_);
        cv_.notify_all();
      }
      if (cmd == 'q') break;
    }
    stopping_.store(true);
    std::lock_guard<std::mutex> l(mu_);
    cv_.notify_all();
  });
  std::thread status([&] {
    while (!stopping()) {
      SendStatus();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return go.load() || stopping(); });
  }
  for (auto& h : hosts_) {
    if (c_.enrol_concurrency > 0) {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return enrols_in_flight_ < c_.enrol_concurrency || stopping(); });
    }
    if (stopping()) break;
    if (h->enrol_req.nodes_size() == 0) continue;  // every node offline
    {
      std::lock_guard<std::mutex> l(mu_);
      ++enrols_in_flight_;
    }
    Enrol(*h);
  }
  {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return stopping(); });
  }
  // Stop: cancel every call, wait (a little) for them to end, report, exit
  // without tearing gRPC down (the process ends anyway).
  CancelCalls();
  status.join();
  SendStatus();
  commands.detach();
  _exit(0);
}

}  // namespace

bool Fleet::Start(const Options& o, const std::string& target, const std::string& node_key) {
  const int p = o.processes;
  std::vector<std::array<int, 2>> ups(p), downs(p);
  for (int i = 0; i < p; ++i) {
    if (pipe(ups[i].data()) != 0 || pipe(downs[i].data()) != 0) return false;
  }
  workers_.resize(p);
  for (int i = 0; i < p; ++i) {
    WorkerConfig c;
    c.index = i;
    c.first_host = static_cast<int>(int64_t{o.hosts} * i / p);
    c.end_host = static_cast<int>(int64_t{o.hosts} * (i + 1) / p);
    c.nodes_per_host = o.nodes_per_host;
    c.enrol_concurrency = o.enrol_concurrency;
    c.batch = o.batch;
    c.dropout = o.dropout;
    c.target = target;
    c.node_key = node_key;
    c.up_fd = ups[i][1];
    c.down_fd = downs[i][0];
    const pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (o.fleet_nice > 0) setpriority(PRIO_PROCESS, 0, o.fleet_nice);
      signal(SIGINT, SIG_IGN);  // the parent stops the workers
      signal(SIGTERM, SIG_DFL);
      signal(SIGPIPE, SIG_IGN);
      // Only this worker's two ends stay open, so that each pipe reads EOF
      // once its other process is gone.
      for (int j = 0; j < p; ++j) {
        if (j != i) {
          close(ups[j][1]);
          close(downs[j][0]);
        }
        close(ups[j][0]);
        close(downs[j][1]);
      }
      Worker(std::move(c)).Run();
    }
    workers_[i].pid = pid;
  }
  for (int i = 0; i < p; ++i) {
    close(ups[i][1]);
    close(downs[i][0]);
    workers_[i].up = ups[i][0];
    workers_[i].down = downs[i][1];
    fcntl(workers_[i].up, F_SETFD, FD_CLOEXEC);
    fcntl(workers_[i].down, F_SETFD, FD_CLOEXEC);
  }
  reader_ = std::thread([this] { Read(); });
  return true;
}

void Fleet::Stop() {
  if (stopped_.exchange(true)) return;
  for (auto& w : workers_) {
    (void)!write(w.down, "q", 1);
    close(w.down);
  }
  const double until = MonoSeconds() + 10;
  for (auto& w : workers_) {
    while (MonoSeconds() < until && waitpid(w.pid, nullptr, WNOHANG) != w.pid) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (waitpid(w.pid, nullptr, WNOHANG) == 0) {
      kill(w.pid, SIGKILL);
      waitpid(w.pid, nullptr, 0);
    }
  }
  if (reader_.joinable()) reader_.join();
}

WorkerCounters Fleet::Totals() const {
  std::lock_guard<std::mutex> l(mu_);
  WorkerCounters t;
  for (const auto& w : workers_) {
    for (auto f : WorkerCounters::kFields) {
      if (f == &WorkerCounters::last_ack_us) {
        t.*f = std::max(t.*f, w.counters.*f);
      } else {
        t.*f += w.counters.*f;
      }
    }
  }
  return t;
}

std::vector<std::string> Fleet::Messages() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::string> out;
  for (const char* kind : {"enrol", "task-stream", "report-stream", "rejected", "other"}) {
    auto it = messages_.find(kind);
    if (it == messages_.end()) continue;
    for (const auto& m : it->second) out.push_back(absl::StrCat(kind, ": ", m));
  }
  return out;
}

std::optional<std::string> Fleet::Died() {
  std::lock_guard<std::mutex> l(mu_);
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (workers_[i].closed && !stopped_) {
      return absl::StrCat("worker process ", i, " (pid ", workers_[i].pid, ") ended early");
    }
  }
  return std::nullopt;
}

void Fleet::Read() {
  while (true) {
    std::vector<pollfd> fds;
    std::vector<size_t> which;
    {
      std::lock_guard<std::mutex> l(mu_);
      for (size_t i = 0; i < workers_.size(); ++i) {
        if (workers_[i].closed) continue;
        fds.push_back({workers_[i].up, POLLIN, 0});
        which.push_back(i);
      }
    }
    if (fds.empty()) return;
    if (poll(fds.data(), fds.size(), 200) <= 0) continue;
    for (size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      char buf[65536];
      const ssize_t n = read(fds[k].fd, buf, sizeof buf);
      std::lock_guard<std::mutex> l(mu_);
      Proc& w = workers_[which[k]];
      if (n <= 0) {
        w.closed = true;
        close(w.up);
        continue;
      }
      w.buffer.append(buf, static_cast<size_t>(n));
      size_t nl;
      while ((nl = w.buffer.find('\n')) != std::string::npos) {
        const std::string line = w.buffer.substr(0, nl);
        w.buffer.erase(0, nl + 1);
        if (line.rfind("C ", 0) == 0) {
          std::vector<std::string> f = absl::StrSplit(line.substr(2), ' ');
          for (size_t i = 0; i < std::size(WorkerCounters::kFields) && i < f.size(); ++i) {
            w.counters.*WorkerCounters::kFields[i] = std::stoll(f[i]);
          }
        } else if (line.rfind("E ", 0) == 0) {
          const std::string rest = line.substr(2);
          const size_t space = rest.find(' ');
          auto& kept = messages_[rest.substr(0, space)];
          if (kept.size() < 3 && space != std::string::npos) {
            kept.push_back(rest.substr(space + 1));
          }
        }
      }
    }
  }
}

}  // namespace ldpgraph::bench::fleet
