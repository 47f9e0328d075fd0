// AgentShard (client/agent.h): the nodes one agent host speaks for, their
// memo and budgets, answering a task for all of them and committing the new
// answers in one transaction.
#include "client/agent.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/dataset/device_index.h"
#include "common/dataset/feature_schema.h"
#include "common/status_macros.h"
#include "common/wire/codec.h"
#include "common/wire/names.h"

namespace ldpgraph::agent {

namespace {

// The index of node in nodes (ascending), or nullopt.
std::optional<size_t> IndexOf(const std::vector<uint32_t>& nodes,
                              uint32_t node) {
  auto it = std::lower_bound(nodes.begin(), nodes.end(), node);
  if (it == nodes.end() || *it != node) return std::nullopt;
  return static_cast<size_t>(it - nodes.begin());
}

// A shard's nodes, ascending, and each one's agent at its index.
struct ShardAgents {
  std::vector<uint32_t> nodes;
  std::vector<std::unique_ptr<NodeAgent>> agents;
};

// One NodeAgent per record, all under one shared policy (see
// AgentShard::Create); the records are moved into the agents and their
// vector is handed back when this returns. INVALID_ARGUMENT for a repeated
// node; NodeAgent::Create's and NodeRandomSource's errors.
absl::StatusOr<ShardAgents> MakeAgents(
    std::vector<NodeRecord> records,
    const std::shared_ptr<const AgentPolicy>& shared,
    std::optional<uint64_t> seed, const SimulatedAttack* attack) {
  std::sort(records.begin(), records.end(),
            [](const NodeRecord& a, const NodeRecord& b) { return a.node < b.node; });
  ShardAgents out;
  out.nodes.reserve(records.size());
  out.agents.reserve(records.size());
  for (NodeRecord& record : records) {
    const uint32_t node = record.node;
    if (!out.nodes.empty() && out.nodes.back() == node) {
      return absl::InvalidArgumentError(
          absl::StrCat("node ", node, " appears twice in the shard"));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<RandomSource> rng,
                     NodeRandomSource(seed, node));
    std::shared_ptr<const poisoning::Adversary> adversary;
    std::shared_ptr<const poisoning::EdgeAdversary> edge_adversary;
    if (attack != nullptr && attack->nodes.contains(node)) {
      adversary = attack->adversary;
      edge_adversary = attack->edge_adversary;
    }
    ASSIGN_OR_RETURN(std::unique_ptr<NodeAgent> agent,
                     NodeAgent::Create(std::move(record), shared, std::move(rng),
                                       std::move(adversary),
                                       std::move(edge_adversary),
                                       NodeEdgeRandomSource(seed, node)));
    out.nodes.push_back(node);
    out.agents.push_back(std::move(agent));
  }
  return out;
}

// Restores every stored answer of the shard's nodes into their budgets,
// counting them (counters.restored) and the rows of nodes the shard does
// not hold (counters.foreign_rows). The store's and NodeAgent::Restore's
// errors.
absl::Status RestoreMemo(const AgentStateStore& store, const ShardAgents& shard,
                         ShardCounters& counters) {
  return store.ForEach([&](const MemoRow& row) -> absl::Status {
    const std::optional<size_t> i = IndexOf(shard.nodes, row.node);
    if (!i) {
      ++counters.foreign_rows;
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(shard.agents[*i]->Restore(row.key, row.answer, row.draws));
    ++counters.restored;
    return absl::OkStatus();
  });
}

// Each node's key pair, at its index in nodes (ascending): loaded, or made
// now and stored before anything can send its public half (in transactions
// of at most kKeysPerCommit keys, so that the new ones are never all held
// twice); `generated` counts the ones made. DATA_LOSS for a stored key that
// is not one; the store's and KeyPair::Generate's errors.
absl::StatusOr<std::vector<crypto::KeyPair>> LoadOrMakeKeys(
    AgentStateStore& store, const std::vector<uint32_t>& nodes,
    uint64_t& generated) {
  constexpr size_t kKeysPerCommit = 8192;
  std::vector<crypto::KeyPair> keys;
  keys.reserve(nodes.size());
  ASSIGN_OR_RETURN(auto stored_keys, store.LoadKeys());
  std::sort(stored_keys.begin(), stored_keys.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  auto stored = stored_keys.begin();
  std::vector<std::pair<uint32_t, std::string>> new_keys;
  for (const uint32_t node : nodes) {
    while (stored != stored_keys.end() && stored->first < node) ++stored;
    if (stored != stored_keys.end() && stored->first == node) {
      absl::StatusOr<crypto::KeyPair> pair =
          crypto::KeyPair::FromPrivate(stored->second);
      if (!pair.ok()) {
        return absl::DataLossError(absl::StrCat(
            store.path(), ": the key of node ", node, ": ",
            pair.status().message()));
      }
      keys.push_back(*pair);
      continue;
    }
    ASSIGN_OR_RETURN(crypto::KeyPair pair, crypto::KeyPair::Generate());
    new_keys.emplace_back(node, std::string(pair.private_key()));
    keys.push_back(pair);
    if (new_keys.size() == kKeysPerCommit) {
      RETURN_IF_ERROR(store.StoreKeys(new_keys));
      generated += new_keys.size();
      new_keys.clear();
    }
  }
  RETURN_IF_ERROR(store.StoreKeys(new_keys));
  generated += new_keys.size();
  return keys;
}

}  // namespace

absl::StatusOr<std::unique_ptr<AgentShard>> AgentShard::Create(
    std::vector<NodeRecord> records, AgentPolicy policy,
    std::optional<uint64_t> seed, const std::string& state_dir,
    AgentStateStore::Options store_options, const SimulatedAttack* attack,
    bool sealing_keys) {
  if (records.empty()) {
    return absl::InvalidArgumentError("an agent shard needs at least one node");
  }
  RETURN_IF_ERROR(policy.Validate());
  // One policy for every node: its caps are shared, not copied.
  const auto shared = std::make_shared<const AgentPolicy>(std::move(policy));
  ASSIGN_OR_RETURN(ShardAgents built,
                   MakeAgents(std::move(records), shared, seed, attack));
  ASSIGN_OR_RETURN(std::unique_ptr<AgentStateStore> store,
                   AgentStateStore::Open(state_dir, store_options));
  ShardCounters counters;
  RETURN_IF_ERROR(RestoreMemo(*store, built, counters));
  std::vector<crypto::KeyPair> keys;
  if (sealing_keys) {
    ASSIGN_OR_RETURN(keys, LoadOrMakeKeys(*store, built.nodes,
                                          counters.keys_generated));
  }
  std::unique_ptr<AgentShard> shard(
      new AgentShard(std::move(store), std::move(built.nodes),
                     std::move(built.agents), std::move(keys)));
  {
    absl::MutexLock lock(&shard->mu_);
    shard->counters_ = std::move(counters);
  }
  return shard;
}

std::optional<size_t> AgentShard::Find(uint32_t node) const {
  return IndexOf(nodes_, node);
}

absl::StatusOr<ShardResponse> AgentShard::RespondAll(const v1::Task& task) {
  // One part of every node: one transaction, as documented.
  std::vector<v1::Report> reports;
  ASSIGN_OR_RETURN(
      ShardResponse out,
      RespondAll(task, std::numeric_limits<size_t>::max(),
                 [&](std::vector<v1::Report> part) {
                   reports = std::move(part);
                   return absl::OkStatus();
                 }));
  out.reports = std::move(reports);
  return out;
}

absl::StatusOr<ShardResponse> AgentShard::RespondAll(
    const v1::Task& task, size_t part,
    absl::FunctionRef<absl::Status(std::vector<v1::Report>)> send) {
  if (part == 0) {
    return absl::InvalidArgumentError("RespondAll: a part holds >= 1 node");
  }
  // The task's mechanism, checked and built once for every node.
  const absl::StatusOr<wire::CompiledSpec> spec =
      wire::CompiledSpec::Compile(task.spec());
  ShardResponse out;
  absl::flat_hash_set<uint32_t> seen;
  const auto& ids = task.node_ids();
  int next = 0;  // the first id of task.node_ids not looked at yet
  while (next < ids.size()) {
    std::vector<v1::Report> reports;
    {
      absl::MutexLock lock(&mu_);
      ShardResponse counts;
      std::map<v1::RefusalReason, uint64_t> refusals;
      for (; next < ids.size() && reports.size() < part; ++next) {
        const uint32_t node = ids[next];
        if (!seen.insert(node).second) continue;
        const std::optional<size_t> i = Find(node);
        if (!i) {
          ++counts.not_in_shard;
          continue;
        }
        // On an error here the rows already answered stay in pending_.
        ASSIGN_OR_RETURN(NodeAgent::Response r,
                         agents_[*i]->Respond(task, spec));
        if (r.report.has_refusal()) {
          ++counts.refusals;
          ++refusals[r.report.refusal().reason()];
        } else if (r.fresh) {
          ++counts.fresh;
        } else {
          ++counts.memo_hits;
        }
        if (r.to_persist) pending_.push_back(std::move(*r.to_persist));
        reports.push_back(std::move(r.report));
      }
      // Durable before anything leaves: the rows of this part and any left
      // over from an earlier failed commit, in one transaction.
      RETURN_IF_ERROR(CommitLocked());
      counters_.fresh += counts.fresh;
      counters_.memo_hits += counts.memo_hits;
      counters_.not_in_shard += counts.not_in_shard;
      for (const auto& [reason, n] : refusals) counters_.refusals[reason] += n;
      out.fresh += counts.fresh;
      out.memo_hits += counts.memo_hits;
      out.refusals += counts.refusals;
      out.not_in_shard += counts.not_in_shard;
    }
    if (!reports.empty()) RETURN_IF_ERROR(send(std::move(reports)));
  }
  return out;
}

absl::Status AgentShard::CommitLocked() {
  RETURN_IF_ERROR(store_->Commit(pending_));
  pending_.clear();
  // A large task's rows are gone: hand their buffer back.
  if (pending_.capacity() > 1024) pending_.shrink_to_fit();
  return absl::OkStatus();
}

absl::StatusOr<ShardSubstitution> AgentShard::BeginSubstitution(
    const v1::Task& task) {
  absl::MutexLock lock(&mu_);
  ShardSubstitution out;
  uint64_t memo_hits = 0;
  std::map<v1::RefusalReason, uint64_t> refusals;
  absl::flat_hash_set<uint32_t> seen;
  for (const uint32_t node : task.node_ids()) {
    if (!seen.insert(node).second) continue;
    const std::optional<size_t> i = Find(node);
    if (!i) {
      ++out.not_in_shard;
      continue;
    }
    // On an error here the rows already answered stay in pending_.
    ASSIGN_OR_RETURN(NodeAgent::SubstitutionStart start,
                     agents_[*i]->BeginSubstitution(task));
    using Role = NodeAgent::SubstitutionStart::Role;
    if (start.role == Role::kRefuse) {
      ++refusals[start.report.refusal().reason()];
    } else if (start.role == Role::kMemo) {
      ++memo_hits;
    }
    if (start.to_persist) pending_.push_back(std::move(*start.to_persist));
    start.to_persist.reset();
    out.nodes.emplace_back(node, std::move(start));
  }
  // The features drawn here leave the agent once the exchange starts.
  RETURN_IF_ERROR(CommitLocked());
  counters_.memo_hits += memo_hits;
  counters_.not_in_shard += out.not_in_shard;
  for (const auto& [reason, n] : refusals) counters_.refusals[reason] += n;
  return out;
}

absl::StatusOr<v1::Report> AgentShard::FinishSubstitution(
    const v1::Task& task, uint32_t node,
    const std::vector<uint32_t>& neighbours) {
  absl::MutexLock lock(&mu_);
  const std::optional<size_t> i = Find(node);
  if (!i) {
    return absl::NotFoundError(absl::StrCat("node ", node, " is not in the shard"));
  }
  ASSIGN_OR_RETURN(NodeAgent::Response r,
                   agents_[*i]->FinishSubstitution(task, neighbours));
  if (r.to_persist) pending_.push_back(std::move(*r.to_persist));
  RETURN_IF_ERROR(CommitLocked());
  if (r.report.has_refusal()) {
    ++counters_.refusals[r.report.refusal().reason()];
  } else if (r.fresh) {
    ++counters_.fresh;
  } else {
    ++counters_.memo_hits;
  }
  return std::move(r.report);
}

const crypto::KeyPair* AgentShard::key_pair(uint32_t node) const {
  const std::optional<size_t> i = Find(node);
  return i && !keys_.empty() ? &keys_[*i] : nullptr;
}

std::vector<uint32_t> AgentShard::nodes() const { return nodes_; }

const NodeAgent* AgentShard::agent(uint32_t node) const {
  const std::optional<size_t> i = Find(node);
  return i ? agents_[*i].get() : nullptr;
}

absl::StatusOr<double> AgentShard::spent(uint32_t node,
                                         const std::string& attribute) const {
  const NodeAgent* a = agent(node);
  if (a == nullptr) {
    return absl::NotFoundError(absl::StrCat("node ", node, " is not in the shard"));
  }
  return a->budget().spent(attribute);
}

absl::StatusOr<double> AgentShard::spent(uint32_t node) const {
  const NodeAgent* a = agent(node);
  if (a == nullptr) {
    return absl::NotFoundError(absl::StrCat("node ", node, " is not in the shard"));
  }
  return a->budget().spent();
}

ShardCounters AgentShard::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

size_t AgentShard::pending_rows() const {
  absl::MutexLock lock(&mu_);
  return pending_.size();
}

}  // namespace ldpgraph::agent
