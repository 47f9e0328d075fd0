#include "client/agent_host_metrics.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::agent {
namespace {

using ::testing::HasSubstr;

// Before a host runs, every metric is rendered, at 0, with its type; the
// monotonic ones are counters named _total. (A running host's values: the
// curator_metrics_test integration test.)
TEST(AgentHostMetricsTest, RenderTypedAtZeroBeforeTheHostRuns) {
  observability::MetricsRegistry registry;
  ASSERT_TRUE(RegisterAgentHostMetrics(registry, [] { return nullptr; }).ok());
  const std::string text = registry.Render();
  const std::vector<std::string> counters = {
      "ldpgraph_agent_tasks_total",
      "ldpgraph_agent_reports_sent_total",
      "ldpgraph_agent_reports_acked_total",
      "ldpgraph_agent_reports_rejected_total",
      "ldpgraph_agent_refusals_total",
      "ldpgraph_agent_reconnects_total",
      "ldpgraph_agent_fresh_answers_total",
      "ldpgraph_agent_memo_hits_total",
      "ldpgraph_agent_exchange_messages_sent_total",
      "ldpgraph_agent_exchange_messages_received_total",
      "ldpgraph_agent_exchange_messages_rejected_total",
      "ldpgraph_agent_exchange_neighbours_timed_out_total"};
  for (const std::string& name : counters) {
    EXPECT_THAT(text, HasSubstr("# TYPE " + name + " counter\n" + name + " 0\n"));
  }
  for (const std::string name :
       {"ldpgraph_agent_exchanges_running", "ldpgraph_agent_epsilon_spent_max"}) {
    EXPECT_THAT(text, HasSubstr("# TYPE " + name + " gauge\n" + name + " 0\n"));
  }
  // Nothing else.
  auto count = [&text](const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos;
         at = text.find(what, at + 1)) {
      ++n;
    }
    return n;
  };
  EXPECT_EQ(count("# TYPE "), counters.size() + 2);
  // Registered once per registry.
  EXPECT_EQ(RegisterAgentHostMetrics(registry, [] { return nullptr; }).code(),
            absl::StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace ldpgraph::agent
