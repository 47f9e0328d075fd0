#include "client/agent_host_metrics.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

#include "common/status_macros.h"

namespace ldpgraph::agent {

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
  auto host_counter = [&](const char* name, const char* help,
                          std::atomic<uint64_t> AgentHostCounters::*field) {
    return counter(name, help, [field](AgentHost& h) {
      return static_cast<double>((h.counters().*field).load());
    });
  };
  auto exchange_counter = [&](const char* name, const char* help,
                              std::atomic<uint64_t> ExchangeCounters::*field) {
    return counter(name, help, [field](AgentHost& h) {
      return static_cast<double>((h.exchanges().counters().*field).load());
    });
  };
  using C = AgentHostCounters;
  RETURN_IF_ERROR(host_counter("ldpgraph_agent_tasks_total", "Tasks received.",
                               &C::tasks));
  RETURN_IF_ERROR(host_counter("ldpgraph_agent_reports_sent_total",
                               "Reports and refusals sent.", &C::reports_sent));
  RETURN_IF_ERROR(host_counter("ldpgraph_agent_reports_acked_total",
                               "Reports acknowledged by the curator.",
                               &C::reports_acked));
  RETURN_IF_ERROR(host_counter("ldpgraph_agent_reports_rejected_total",
                               "Reports the curator rejected.", &C::rejected));
  RETURN_IF_ERROR(host_counter("ldpgraph_agent_refusals_total",
                               "Tasks refused by a node's policy.",
                               &C::refusals_sent));
  RETURN_IF_ERROR(host_counter("ldpgraph_agent_reconnects_total",
                               "Sessions lost and retried.", &C::reconnects));
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
  using E = ExchangeCounters;
  RETURN_IF_ERROR(exchange_counter("ldpgraph_agent_exchange_messages_sent_total",
                                   "Sealed agent-to-agent messages relayed.",
                                   &E::messages_sent));
  RETURN_IF_ERROR(
      exchange_counter("ldpgraph_agent_exchange_messages_received_total",
                       "Sealed messages opened and delivered to a node.",
                       &E::messages_received));
  RETURN_IF_ERROR(exchange_counter(
      "ldpgraph_agent_exchange_messages_rejected_total",
      "Sealed messages that did not open, parse or deliver "
      "(tampered, forged, misaddressed).",
      &E::messages_rejected));
  RETURN_IF_ERROR(
      exchange_counter("ldpgraph_agent_exchange_neighbours_timed_out_total",
                       "Neighbours marked absent after a silent round.",
                       &E::neighbours_timed_out));
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
