// ldpgraph-agent: an agent host. Runs one logical agent per node of its
// shard (own credential, budget, memo and randomness), connects out to the
// curator, answers its tasks, and keeps spent budgets and memos under
// --state-dir. Exposes /metrics, /healthz and /readyz over HTTP.
#include <atomic>
#include <csignal>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/agent_host.h"
#include "common/cli_args.h"
#include "common/hex.h"
#include "common/observability/http_endpoint.h"
#include "common/observability/metrics.h"
#include "common/status_macros.h"

namespace {

using ldpgraph::agent::AgentHost;
using ldpgraph::agent::AgentHostOptions;

constexpr char kUsage[] = R"(ldpgraph-agent: an agent host of an ldpgraph deployment.

Usage: ldpgraph-agent --curator HOST:PORT (--ca FILE | --insecure)
                      --credentials FILE --dataset DIR --nodes A-B
                      --state-dir DIR [flags]

Each node of the shard is one logical agent: it holds its private record,
perturbs locally, and is the authority on its own budget. It refuses a task
that would exceed its caps, and answers a repeated identical question from
its memo (no fresh randomness, no extra epsilon). Raw data never leaves it.

Flags:
  --curator ADDR       the curator's gRPC address
  --ca FILE            CA certificate (PEM) that signed the curator's
  --server-name NAME   name to check the curator's certificate against
                       (default: the host part of --curator)
  --insecure           plaintext gRPC: development only
  --credentials FILE   lines "node<TAB>hex secret" (ldpctl credentials)
  --dataset DIR        dataset folder holding the shard's private records
                       (a simulation's stand-in for each node's own data)
  --nodes A-B          the shard: nodes A..B-1
  --scaling S          public feature scaling: symmetric (default, [-1, 1]),
                       unit ([0, 1]) or none
  --state-dir DIR      durable memo and spent budgets (agent.db)
  --cap-total EPS      each node's total budget cap (default 8)
  --cap LIST           per-attribute caps, e.g. features=4,label=2
  --attributes LIST    attributes the nodes answer about
                       (default features,label,edges)
  --seed S             seeded noise: reproducible, NOT private (tests and
                       simulations only)
  --batch N            reports per batch (default 512)
  --max-rate R         at most R reports per second (default: no limit)
  --http ADDR          /metrics, /healthz, /readyz (default 0.0.0.0:9091;
                       "off" disables)
  --name NAME          host name for the curator's audit log
  -h, --help           this text

Stops gracefully on SIGINT or SIGTERM.
)";

volatile std::sig_atomic_t g_signal = 0;
void OnSignal(int sig) { g_signal = sig; }

// "node<TAB>hex" lines; '#' comments and blank lines ignored.
absl::StatusOr<std::vector<std::pair<uint32_t, std::string>>> ReadCredentials(
    const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ldpgraph::ReadFileToString(path));
  std::vector<std::pair<uint32_t, std::string>> out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> parts =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    uint32_t node = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &node) ||
        parts[1].size() != 64) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", line_no, ": expected \"node<TAB>64 hex digits\""));
    }
    auto secret = ldpgraph::FromHex(parts[1]);
    if (!secret.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", line_no, ": ", secret.status().message()));
    }
    out.emplace_back(node, *std::move(secret));
  }
  return out;
}

struct Config {
  AgentHostOptions host;
  std::string dataset, state_dir, http = "0.0.0.0:9091";
  uint32_t begin = 0, end = 0;
  ldpgraph::FeatureScaling scaling = ldpgraph::FeatureScaling::kSymmetric;
  ldpgraph::agent::AgentPolicy policy;
  std::optional<uint64_t> seed;
};

absl::StatusOr<Config> ParseFlags(const std::vector<std::string>& args) {
  using ldpgraph::CliArgs;
  ASSIGN_OR_RETURN(
      CliArgs a,
      CliArgs::Parse(args,
                     {"curator", "ca", "server-name", "credentials",
                      "dataset", "nodes", "scaling", "state-dir",
                      "cap-total", "cap", "attributes", "seed",
                      "batch", "http", "name", "max-rate"},
                     {"insecure"}));
  Config c;
  for (const char* flag :
       {"curator", "credentials", "dataset", "nodes", "state-dir"}) {
    if (!a.Has(flag)) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " is required"));
    }
  }
  c.host.curator = *a.Get("curator");
  c.host.insecure = a.Flag("insecure");
  if (c.host.insecure == a.Has("ca")) {
    return absl::InvalidArgumentError(
        "give --ca (TLS) or --insecure (development only), not both");
  }
  if (a.Has("ca")) {
    ASSIGN_OR_RETURN(c.host.ca_pem, ldpgraph::ReadFileToString(*a.Get("ca")));
  }
  c.host.server_name = a.Get("server-name").value_or("");
  ASSIGN_OR_RETURN(c.host.credentials, ReadCredentials(*a.Get("credentials")));
  c.dataset = *a.Get("dataset");
  ASSIGN_OR_RETURN(auto range, ldpgraph::ParseNodeRange(*a.Get("nodes"), "nodes"));
  c.begin = range.first;
  c.end = range.second;
  // Keep only the shard's credentials: a file may hold a whole deployment's.
  std::erase_if(c.host.credentials, [&](const auto& e) {
    return e.first < c.begin || e.first >= c.end;
  });
  if (a.Has("scaling")) {
    ASSIGN_OR_RETURN(c.scaling,
                     ldpgraph::ParseFeatureScaling(*a.Get("scaling")));
  }
  c.state_dir = *a.Get("state-dir");
  ASSIGN_OR_RETURN(auto total, a.GetDouble("cap-total"));
  c.policy.caps.total = total.value_or(8.0);
  if (a.Has("cap")) {
    for (absl::string_view item : absl::StrSplit(*a.Get("cap"), ',')) {
      std::vector<absl::string_view> kv = absl::StrSplit(item, '=');
      double v = 0;
      if (kv.size() != 2 || !absl::SimpleAtod(kv[1], &v)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--cap must be attribute=epsilon[,...], got '", item, "'"));
      }
      c.policy.caps.per_attribute[std::string(kv[0])] = v;
    }
  }
  if (a.Has("attributes")) {
    c.policy.attributes.clear();
    for (absl::string_view item : absl::StrSplit(*a.Get("attributes"), ',')) {
      c.policy.attributes.insert(std::string(item));
    }
  }
  RETURN_IF_ERROR(c.policy.Validate());
  c.host.caps = c.policy.caps;
  ASSIGN_OR_RETURN(c.seed, a.GetUint("seed"));
  ASSIGN_OR_RETURN(auto batch, a.GetInt("batch"));
  if (batch) {
    if (*batch < 1 || *batch > 65536) {
      return absl::InvalidArgumentError("--batch must be in [1, 65536]");
    }
    c.host.batch_size = static_cast<int>(*batch);
  }
  ASSIGN_OR_RETURN(auto rate, a.GetDouble("max-rate"));
  if (rate) {
    if (*rate <= 0) return absl::InvalidArgumentError("--max-rate must be > 0");
    c.host.max_reports_per_second = *rate;
  }
  c.http = a.Get("http").value_or(c.http);
  if (c.http == "off") c.http.clear();
  c.host.host_name = a.Get("name").value_or(
      absl::StrCat("agent-host-", c.begin, "-", c.end));
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (ldpgraph::WantsHelp(args)) {
    std::cout << kUsage;
    return 0;
  }
  auto config = ParseFlags(args);
  if (!config.ok()) {
    std::cerr << "ldpgraph-agent: " << config.status().message()
              << "\nRun ldpgraph-agent --help for the flags.\n";
    return 2;
  }
  if (config->seed) std::cerr << ldpgraph::kSeededWarning << "\n";
  if (config->host.insecure) {
    std::cerr << "ldpgraph-agent: WARNING: --insecure: plaintext gRPC, for "
                 "development only\n";
  }
  auto records = ldpgraph::agent::LoadShard(config->dataset, config->scaling,
                                            config->begin, config->end);
  if (!records.ok()) {
    std::cerr << "ldpgraph-agent: " << records.status().message() << "\n";
    return 1;
  }
  auto shard = ldpgraph::agent::AgentShard::Create(
      std::move(*records), config->policy, config->seed, config->state_dir);
  if (!shard.ok()) {
    std::cerr << "ldpgraph-agent: " << shard.status().message() << "\n";
    return 1;
  }
  const uint64_t restored = (*shard)->counters().restored;
  auto host = AgentHost::Create(config->host, std::move(*shard));
  if (!host.ok()) {
    std::cerr << "ldpgraph-agent: " << host.status().message() << "\n";
    return 1;
  }
  AgentHost* h = host->get();

  ldpgraph::observability::MetricsRegistry metrics;
  auto counter = [&](const char* name, const char* help,
                     const std::atomic<uint64_t>* value) {
    metrics
        .AddGaugeCallback(name, help,
                          [value] { return static_cast<double>(value->load()); })
        .IgnoreError();
  };
  const auto& c = h->counters();
  counter("ldpgraph_agent_tasks", "Tasks received.", &c.tasks);
  counter("ldpgraph_agent_reports_sent", "Reports and refusals sent.",
          &c.reports_sent);
  counter("ldpgraph_agent_reports_acked", "Reports acknowledged by the curator.",
          &c.reports_acked);
  counter("ldpgraph_agent_reports_rejected", "Reports the curator rejected.",
          &c.rejected);
  counter("ldpgraph_agent_refusals", "Tasks refused by a node's policy.",
          &c.refusals_sent);
  counter("ldpgraph_agent_reconnects", "Sessions lost and retried.",
          &c.reconnects);
  metrics
      .AddGaugeCallback("ldpgraph_agent_fresh_answers",
                        "Answers drawn with fresh randomness (charged).",
                        [h] { return double(h->shard().counters().fresh); })
      .IgnoreError();
  metrics
      .AddGaugeCallback("ldpgraph_agent_memo_hits",
                        "Repeated questions answered from the memo (free).",
                        [h] { return double(h->shard().counters().memo_hits); })
      .IgnoreError();
  metrics
      .AddGaugeCallback("ldpgraph_agent_epsilon_spent_max",
                        "Largest total epsilon spent by a node of the shard.",
                        [h] {
                          double m = 0;
                          for (uint32_t v : h->shard().nodes()) {
                            m = std::max(m, h->shard().spent(v).value_or(0));
                          }
                          return m;
                        })
      .IgnoreError();
  std::unique_ptr<ldpgraph::observability::HttpEndpoint> http;
  if (!config->http.empty()) {
    auto hp = ldpgraph::SplitHostPort(config->http);
    if (!hp.ok()) {
      std::cerr << "ldpgraph-agent: --http: " << hp.status().message() << "\n";
      return 2;
    }
    auto endpoint = ldpgraph::observability::HttpEndpoint::Start(
        hp->first, hp->second, &metrics, [h]() -> absl::Status {
          if (h->ready()) return absl::OkStatus();
          const std::string e = h->last_error();
          return absl::UnavailableError(
              e.empty() ? "not connected to the curator yet" : e);
        });
    if (!endpoint.ok()) {
      std::cerr << "ldpgraph-agent: " << endpoint.status().message() << "\n";
      return 1;
    }
    http = std::move(*endpoint);
  }
  std::cerr << "ldpgraph-agent: " << config->host.host_name << ": nodes "
            << config->begin << ".." << config->end - 1 << ", " << restored
            << " memo entries restored";
  if (http) std::cerr << ", HTTP on port " << http->port();
  std::cerr << std::endl;

  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  absl::Status result;
  std::atomic<bool> done{false};
  std::thread runner([&] {
    result = h->Run();
    done.store(true);
  });
  while (g_signal == 0 && !done.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  h->Stop();
  runner.join();
  if (http) http->Stop();
  if (!result.ok()) {
    std::cerr << "ldpgraph-agent: " << result.message() << "\n";
    return 1;
  }
  std::cerr << "ldpgraph-agent: stopped (" << c.reports_acked.load()
            << " reports acknowledged)" << std::endl;
  return 0;
}
