// The agent host's Prometheus metrics (docs/operators.md, "Metrics and
// health"), read from the running AgentHost at every scrape of /metrics. The
// agent host binary registers them; tests register them beside an
// in-process host.
#pragma once

#include <functional>

#include "absl/status/status.h"
#include "client/agent_host.h"
#include "common/observability/metrics.h"

namespace ldpgraph::agent {

// Registers on registry, as callback families:
//  counters  ldpgraph_agent_tasks_total, _reports_sent_total,
//            _reports_acked_total, _reports_rejected_total, _refusals_total,
//            _reconnects_total, _fresh_answers_total, _memo_hits_total,
//            _exchange_messages_sent_total, _exchange_messages_received_total,
//            _exchange_messages_rejected_total,
//            _exchange_neighbours_timed_out_total;
//  gauges    ldpgraph_agent_exchanges_running, ldpgraph_agent_epsilon_spent_max.
// host is called at every render, on the rendering thread, so it must be
// thread-safe; it returns the running host, or null before one runs (every
// metric then reads 0). A host it returns must outlive the renders that
// read it. Errors as MetricsRegistry's (ALREADY_EXISTS when the metrics are
// registered twice on one registry); nothing is rolled back on an error.
absl::Status RegisterAgentHostMetrics(observability::MetricsRegistry& registry,
                                      std::function<AgentHost*()> host);

}  // namespace ldpgraph::agent
