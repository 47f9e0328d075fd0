// fleet_load's admin side: admin calls with the run's token, GetStatus
// sampled in a loop with its latencies, and progress lines. Benchmark code
// (tests/bench/fleet_load.cc).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_format.h"
#include "ldpgraph/v1/admin.grpc.pb.h"
#include "tests/bench/fleet_load_options.h"
#include "tests/bench/load_util.h"

namespace ldpgraph::bench::fleet {

// An admin channel of its own (role names it in the channel arguments).
std::shared_ptr<grpc::Channel> AdminChannel(const std::string& target, const char* role);

class Admin {
 public:
  Admin(const std::string& target, const std::string& token, const char* role)
      : stub_(v1::AdminService::NewStub(AdminChannel(target, role))), token_(token) {}
  void Prepare(grpc::ClientContext* ctx, double deadline_s = 10) const {
    ctx->AddMetadata("authorization", "Bearer " + token_);
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(static_cast<int64_t>(deadline_s * 1000)));
  }
  grpc::Status Status(v1::CuratorStatus* out) const {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    return stub_->GetStatus(&ctx, v1::GetStatusRequest(), out);
  }
  v1::AdminService::Stub& stub() { return *stub_; }

 private:
  std::unique_ptr<v1::AdminService::Stub> stub_;
  std::string token_;
};

// GetStatus in a loop on its own channel: latencies by phase, failures, and
// the curator's thread count and RSS sampled alongside.
class StatusProbe {
 public:
  StatusProbe(const std::string& target, const std::string& token, pid_t curator, int interval_ms)
      : admin_(target, token, "status-probe"), curator_(curator), interval_ms_(interval_ms) {}
  ~StatusProbe() { Stop(); }

  void Start() {
    thread_ = std::thread([this] { Loop(); });
  }
  void SetPhase(int phase) { phase_.store(phase); }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  // Latencies (ms) of successful calls in a phase; -1: all phases.
  std::vector<double> Latencies(int phase) const {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<double> out;
    for (const auto& [p, ms] : samples_) {
      if (phase < 0 || p == phase) out.push_back(ms);
    }
    return out;
  }
  int64_t failures() const { return failures_.load(); }
  std::vector<std::string> Messages() const {
    std::lock_guard<std::mutex> l(mu_);
    return messages_;
  }
  int max_threads() const { return max_threads_.load(); }
  long max_rss_kib() const { return max_rss_.load(); }

 private:
  void Loop();

  Admin admin_;
  pid_t curator_;
  int interval_ms_;
  std::atomic<bool> stop_{false};
  std::atomic<int> phase_{0};
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<std::pair<int, double>> samples_;
  std::vector<std::string> messages_;
  std::atomic<int64_t> failures_{0};
  std::atomic<int> max_threads_{0};
  std::atomic<long> max_rss_{0};
};

enum Phase { kEnrolPhase = 0, kCampaignPhase = 1, kHoldPhase = 2 };

// Progress lines on stderr, at most one a second per stage.
class Progress {
 public:
  explicit Progress(double t0) : t0_(t0) {}
  void Maybe(const std::string& text) {
    const double now = MonoSeconds();
    if (now - last_ < 1.0) return;
    last_ = now;
    Line(text);
  }
  void Line(const std::string& text) {
    std::cerr << absl::StrFormat("[%7.2fs] %s\n", MonoSeconds() - t0_, text) << std::flush;
  }
  void Reset() { last_ = 0; }

 private:
  double t0_;
  double last_ = 0;
};

}  // namespace ldpgraph::bench::fleet
