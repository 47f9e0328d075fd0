#include "server/ldpctl/churn.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/agent_state.h"
#include "common/random/random.h"
#include "common/random/seed_mix.h"
#include "common/status_macros.h"
#include "common/wire/codec.h"

namespace ldpgraph::ldpctl {
namespace {

// Separates the churn plan's stream from every other use of the seed.
constexpr uint64_t kChurnTag = 0x636875726e763031ULL;  // "churnv01"

}  // namespace

absl::StatusOr<std::vector<ChurnKill>> PlanChurn(uint64_t seed, int campaign,
                                                 int hosts, double fraction,
                                                 bool exchange) {
  if (!(fraction >= 0 && fraction <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("churn fraction must be in [0, 1], got ", fraction));
  }
  if (hosts < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("churn needs >= 1 host, got ", hosts));
  }
  const auto k = static_cast<uint32_t>(
      std::min<double>(hosts, std::ceil(fraction * hosts - 1e-9)));
  PublicRandom rng(SeedMix(SeedMix(seed ^ kChurnTag) + uint64_t(campaign)));
  std::vector<ChurnKill> plan;
  for (uint32_t h : rng.SampleWithoutReplacement(hosts, k)) {
    ChurnKill kill;
    kill.host = static_cast<int>(h);
    kill.by_time = exchange;
    kill.at_fraction = 0.1 + 0.5 * rng.UniformDouble();
    kill.at_time = absl::Milliseconds(50 + 450 * rng.UniformDouble());
    plan.push_back(kill);
  }
  return plan;
}

ChurnDriver::ChurnDriver(std::vector<ChurnKill> plan, absl::Duration down,
                         Hooks hooks)
    : plan_(std::move(plan)),
      down_(std::max(down, absl::ZeroDuration())),
      hooks_(std::move(hooks)),
      opened_(absl::Now()) {}

bool ChurnDriver::down(int host) const {
  for (const ChurnKill& k : plan_) {
    if (k.host == host && k.killed && !k.restarted) return true;
  }
  return false;
}

bool ChurnDriver::pending() const {
  for (const ChurnKill& k : plan_) {
    if (!k.killed) return true;
  }
  return false;
}

absl::Status ChurnDriver::Poll(uint32_t answered, uint32_t targeted,
                               absl::Duration since_open) {
  const absl::Time now = absl::Now();
  for (ChurnKill& k : plan_) {
    if (k.killed && !k.restarted && now - k.killed_at >= down_) {
      RETURN_IF_ERROR(hooks_.restart(k.host));
      k.restarted = true;
      k.down_s = absl::ToDoubleSeconds(absl::Now() - k.killed_at);
    }
  }
  for (ChurnKill& k : plan_) {
    if (k.killed || down(k.host)) continue;
    const bool due = k.by_time ? since_open >= k.at_time
                               : answered >= k.at_fraction * targeted;
    if (!due) continue;
    if (hooks_.before_kill) RETURN_IF_ERROR(hooks_.before_kill(k.host));
    RETURN_IF_ERROR(hooks_.kill(k.host));
    k.killed = true;
    k.killed_at = absl::Now();
    k.answered_at_kill = answered;
    k.killed_after_s = absl::ToDoubleSeconds(since_open);
  }
  return absl::OkStatus();
}

absl::Status ChurnDriver::Finish() {
  for (ChurnKill& k : plan_) {
    if (!k.killed || k.restarted) continue;
    const absl::Duration left = down_ - (absl::Now() - k.killed_at);
    if (left > absl::ZeroDuration()) absl::SleepFor(left);
    RETURN_IF_ERROR(hooks_.restart(k.host));
    k.restarted = true;
    k.down_s = absl::ToDoubleSeconds(absl::Now() - k.killed_at);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint32_t>> StoredReporters(
    store::CuratorStore& store, absl::string_view campaign_id) {
  ASSIGN_OR_RETURN(const int64_t id, store::ParseCampaignName(campaign_id));
  std::vector<uint32_t> nodes;
  RETURN_IF_ERROR(store.ForEachAnswer(id, [&](const store::AnswerRow& a) {
    if (!a.refusal) nodes.push_back(a.node);
    return true;
  }));
  return nodes;  // ascending: ForEachAnswer orders a campaign's by node
}

absl::StatusOr<std::vector<uint32_t>> StoredReporters(
    const std::string& curator_data_dir, absl::string_view campaign_id) {
  RETURN_IF_ERROR(store::ParseCampaignName(campaign_id).status());
  store::CuratorStore::Options options;
  options.read_only = true;
  ASSIGN_OR_RETURN(std::unique_ptr<store::CuratorStore> store,
                   store::CuratorStore::Open(curator_data_dir, options));
  return StoredReporters(*store, campaign_id);
}

absl::Status AddMemoSpending(const std::string& state_dir, uint32_t nodes,
                             std::vector<double>* spent, uint64_t* rows) {
  spent->resize(std::max<size_t>(spent->size(), nodes), 0.0);
  agent::AgentStateStore::Options options;
  options.read_only = true;
  ASSIGN_OR_RETURN(std::unique_ptr<agent::AgentStateStore> state,
                   agent::AgentStateStore::Open(state_dir, options));
  return state->ForEach([&](const agent::MemoRow& row) -> absl::Status {
    if (row.node >= nodes) {
      return absl::InvalidArgumentError(
          absl::StrCat(state->path(), ": memo row of node ", row.node,
                       " outside [0, ", nodes, ")"));
    }
    (*spent)[row.node] += row.key.epsilon;
    ++*rows;
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<double>> ExpectedSpending(
    const std::vector<CampaignAnswers>& campaigns, uint32_t nodes) {
  // Per node, its distinct questions (canonical key -> epsilon).
  std::vector<std::set<std::pair<std::string, double>>> asked(nodes);
  for (const CampaignAnswers& c : campaigns) {
    const std::vector<QueryKey> keys =
        wire::CampaignQuestions(c.attribute, c.spec);
    for (uint32_t v : c.reporters) {
      if (v >= nodes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "reporter ", v, " outside the graph's ", nodes, " nodes"));
      }
      for (const QueryKey& k : keys) asked[v].emplace(k.Canonical(), k.epsilon);
    }
  }
  std::vector<double> expected(nodes, 0.0);
  for (uint32_t v = 0; v < nodes; ++v) {
    for (const auto& [key, eps] : asked[v]) expected[v] += eps;
  }
  return expected;
}

double MaxExtraEpsilon(const std::vector<double>& spent,
                       const std::vector<double>& expected) {
  double extra = 0;
  const size_t n = std::min(spent.size(), expected.size());
  for (size_t v = 0; v < n; ++v) extra = std::max(extra, spent[v] - expected[v]);
  return extra < 1e-9 ? 0.0 : extra;
}

}  // namespace ldpgraph::ldpctl
