// fleet_load's admin side (tests/bench/fleet_load_admin.h).
#include "tests/bench/fleet_load_admin.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"

namespace ldpgraph::bench::fleet {

std::shared_ptr<grpc::Channel> AdminChannel(const std::string& target, const char* role) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetString("ldpgraph.fleet_load.admin", role);
  args.SetMaxReceiveMessageSize(64 << 20);
  return MakeChannel(target, args);
}

void StatusProbe::Loop() {
  while (!stop_.load()) {
    const int phase = phase_.load();
    v1::CuratorStatus s;
    const auto t = Clock::now();
    grpc::Status g = admin_.Status(&s);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t).count();
    {
      std::lock_guard<std::mutex> l(mu_);
      if (g.ok()) {
        samples_.emplace_back(phase, ms);
      } else {
        failures_.fetch_add(1);
        if (messages_.size() < 3) {
          messages_.push_back(absl::StrCat("admin: GetStatus: ", GrpcError(g)));
        }
      }
    }
    ProcStats p = ReadProc(curator_);
    if (p.ok) {
      max_threads_.store(std::max(max_threads_.load(), p.threads));
      max_rss_.store(std::max(max_rss_.load(), p.rss_kib));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms_));
  }
}

}  // namespace ldpgraph::bench::fleet
