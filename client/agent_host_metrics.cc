#include "client/agent_host_metrics.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

#include "common/status_macros.h"

namespace ldpgraph::agent {
namespace {

// A counter family read from one field of a host's counters.
template <class Counters>
struct CounterField {
  const char* name;
  const char* help;
  std::atomic<uint64_t> Counters::*field;
};

// AgentHost::counters()' families, in the order they are registered.
constexpr CounterField<AgentHostCounters> kHostCounters[] = {
    {"ldpgraph_agent_tasks_total", "Tasks received.", &AgentHostCounters::tasks},
    {"ldpgraph_agent_reports_sent_total", "Reports and refusals sent.",
     &AgentHostCounters::reports_sent},
    {"ldpgraph_agent_reports_acked_total",
     "Reports acknowledged by the curator.", &AgentHostCounters::reports_acked},
    {"ldpgraph_agent_reports_rejected_total", "Reports the curator rejected.",
     &AgentHostCounters::rejected},
    {"ldpgraph_agent_refusals_total", "Tasks refused by a node's policy.",
     &AgentHostCounters::refusals_sent},
    {"ldpgraph_agent_reconnects_total", "Sessions lost and retried.",
     &AgentHostCounters::reconnects},
};

// The exchanges' families (AgentHost::exchanges().counters()), in order.
constexpr CounterField<ExchangeCounters> kExchangeCounters[] = {
    {"ldpgraph_agent_exchange_messages_sent_total",
     "Sealed agent-to-agent messages relayed.", &ExchangeCounters::messages_sent},
    {"ldpgraph_agent_exchange_messages_received_total",
     "Sealed messages opened and delivered to a node.",
     &ExchangeCounters::messages_received},
    {"ldpgraph_agent_exchange_messages_rejected_total",
     "Sealed messages that did not open, parse or deliver "
     "(tampered, forged, misaddressed).",
     &ExchangeCounters::messages_rejected},
    {"ldpgraph_agent_exchange_neighbours_timed_out_total",
     "Neighbours marked absent after a silent round.",
     &ExchangeCounters::neighbours_timed_out},
};

}  // namespace

absl::Status RegisterAgentHostMetrics(observability::MetricsRegistry& registry,
                                      std::function<AgentHost*()> host) {
  // Shared by every callback; the registry keeps them for its lifetime.
  auto running = std::make_shared<std::function<AgentHost*()>>(std::move(host));
  // A value of the running host; 0 before it runs.
  auto of_host = [running](std::function<double(AgentHost&)> f) {
    return [running, f = std::move(f)] {
      AgentHost* h = (*running)();
      return h != nullptr ? f(*h) : 0.0;
    };
  };
  auto counter = [&](const char* name, const char* help,
                     std::function<double(AgentHost&)> f) {
    return registry.AddCounterCallback(name, help, of_host(std::move(f)));
  };
  auto gauge = [&](const char* name, const char* help,
                   std::function<double(AgentHost&)> f) {
    return registry.AddGaugeCallback(name, help, of_host(std::move(f)));
  };
  for (const CounterField<AgentHostCounters>& c : kHostCounters) {
    RETURN_IF_ERROR(counter(c.name, c.help, [field = c.field](AgentHost& h) {
      return static_cast<double>((h.counters().*field).load());
    }));
  }
  RETURN_IF_ERROR(counter(
      "ldpgraph_agent_fresh_answers_total",
      "Answers drawn with fresh randomness (charged).",
      [](AgentHost& h) { return double(h.shard().counters().fresh); }));
  RETURN_IF_ERROR(counter(
      "ldpgraph_agent_memo_hits_total",
      "Repeated questions answered from the memo (free).",
      [](AgentHost& h) { return double(h.shard().counters().memo_hits); }));
  RETURN_IF_ERROR(gauge(
      "ldpgraph_agent_exchanges_running",
      "Neighbour substitution exchanges in progress.",
      [](AgentHost& h) { return double(h.exchanges().running()); }));
  for (const CounterField<ExchangeCounters>& c : kExchangeCounters) {
    RETURN_IF_ERROR(counter(c.name, c.help, [field = c.field](AgentHost& h) {
      return static_cast<double>((h.exchanges().counters().*field).load());
    }));
  }
  return gauge("ldpgraph_agent_epsilon_spent_max",
               "Largest total epsilon spent by a node of the shard.",
               [](AgentHost& h) {
                 double m = 0;
                 for (uint32_t v : h.shard().nodes()) {
                   m = std::max(m, h.shard().spent(v).value_or(0));
                 }
                 return m;
               });
}

}  // namespace ldpgraph::agent
