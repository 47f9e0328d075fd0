#include "server/curator/fleet.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ldpgraph::curator {

absl::StatusOr<std::unique_ptr<FleetPlanner>> FleetPlanner::Create(
    Options options, store::CuratorStore* store) {
  if (options.num_nodes == 0) {
    return absl::InvalidArgumentError("a fleet plan needs a graph with nodes");
  }
  if (options.settle <= absl::ZeroDuration() ||
      options.lease <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "fleet settle and lease times must be > 0");
  }
  if (options.min_hosts == 0 || options.max_hosts < options.min_hosts) {
    return absl::InvalidArgumentError(
        "fleet host bounds must satisfy 1 <= min_hosts <= max_hosts");
  }
  if (options.shared && store == nullptr) {
    return absl::InvalidArgumentError("a shared fleet plan needs its store");
  }
  std::unique_ptr<FleetPlanner> p(new FleetPlanner(options, store));
  if (store != nullptr && !options.shared) {
    ASSIGN_OR_RETURN(std::vector<std::string> holders, store->GetFleetPlan());
    if (holders.size() > options.num_nodes) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the stored fleet plan has ", holders.size(), " shards but the graph ",
          options.num_nodes, " nodes"));
    }
    const absl::Time now = absl::Now();
    absl::MutexLock lock(&p->mu_);
    for (uint32_t i = 0; i < holders.size(); ++i) {
      p->shard_of_[holders[i]] = i;
    }
    p->holders_ = std::move(holders);
    p->renewed_.assign(p->holders_.size(), now);
  }
  return p;
}

FleetPlanner::Grant FleetPlanner::Assigned(uint32_t shard) const {
  const uint64_t n = options_.num_nodes;
  const uint64_t k = holders_.size();
  Grant g;
  g.state = Grant::State::kAssigned;
  g.shard = shard;
  g.shards = static_cast<uint32_t>(k);
  g.begin = static_cast<uint32_t>(n * shard / k);
  g.end = static_cast<uint32_t>(n * (shard + 1) / k);
  g.retry_after = options_.lease / 3;
  return g;
}

FleetPlanner::Grant FleetPlanner::Spare() const {
  Grant g;
  g.state = Grant::State::kSpare;
  g.retry_after = options_.lease / 3;
  return g;
}

absl::StatusOr<FleetPlanner::Grant> FleetPlanner::Claim(absl::string_view host,
                                                        absl::Time now) {
  if (host.empty() || host.size() > 256) {
    return absl::InvalidArgumentError(
        "a shard claim needs a host name of 1 to 256 bytes");
  }
  if (options_.shared) return ClaimShared(host, now);
  absl::MutexLock lock(&mu_);
  if (!holders_.empty()) {
    if (auto it = shard_of_.find(host); it != shard_of_.end()) {
      renewed_[it->second] = now;
      return Assigned(it->second);
    }
    // A stranger: the first shard whose holder's lease has lapsed.
    for (uint32_t i = 0; i < holders_.size(); ++i) {
      if (now - renewed_[i] < options_.lease) continue;
      std::vector<std::string> next = holders_;
      next[i] = std::string(host);
      if (store_ != nullptr) RETURN_IF_ERROR(store_->PutFleetPlan(next));
      shard_of_.erase(holders_[i]);
      holders_ = std::move(next);
      shard_of_[holders_[i]] = i;
      renewed_[i] = now;
      return Assigned(i);
    }
    return Spare();
  }

  // Gathering.
  auto [it, joined] = gathered_.try_emplace(host, Seen{now, now});
  if (joined) {
    if (gathered_.size() > options_.max_hosts) {
      gathered_.erase(it);
    } else {
      last_join_ = now;
    }
  } else {
    it->second.last = now;
  }
  const absl::Duration quiet = now - last_join_;
  if (gathered_.size() < options_.min_hosts || quiet < options_.settle) {
    Grant wait;
    wait.retry_after = std::clamp(options_.settle - quiet, absl::Milliseconds(100),
                                  absl::Seconds(1));
    return wait;
  }
  // Fix the plan: live hosts, by first claim, at most one per node.
  std::vector<std::pair<const std::string*, const Seen*>> live;
  for (const auto& [name, seen] : gathered_) {
    if (now - seen.last < options_.lease) live.emplace_back(&name, &seen);
  }
  std::sort(live.begin(), live.end(), [](const auto& a, const auto& b) {
    return std::tie(a.second->first, *a.first) < std::tie(b.second->first, *b.first);
  });
  if (live.size() > options_.num_nodes) live.resize(options_.num_nodes);
  std::vector<std::string> holders;
  holders.reserve(live.size());
  for (const auto& [name, seen] : live) holders.push_back(*name);
  if (store_ != nullptr) RETURN_IF_ERROR(store_->PutFleetPlan(holders));
  holders_ = std::move(holders);
  renewed_.assign(holders_.size(), now);
  for (uint32_t i = 0; i < holders_.size(); ++i) shard_of_[holders_[i]] = i;
  gathered_.clear();
  // The claimant was live, but may have been cut by the one-per-node rule.
  if (auto mine = shard_of_.find(host); mine != shard_of_.end()) {
    return Assigned(mine->second);
  }
  return Spare();
}

absl::StatusOr<FleetPlanner::Grant> FleetPlanner::ClaimShared(
    absl::string_view host, absl::Time now) {
  store::FleetClaim q;
  q.host = std::string(host);
  q.now_ms = absl::ToUnixMillis(now);
  q.settle_ms = absl::ToInt64Milliseconds(options_.settle);
  q.lease_ms = absl::ToInt64Milliseconds(options_.lease);
  q.min_hosts = static_cast<uint32_t>(options_.min_hosts);
  q.max_hosts = static_cast<uint32_t>(std::min<size_t>(options_.max_hosts, UINT32_MAX));
  q.num_nodes = options_.num_nodes;
  ASSIGN_OR_RETURN(store::FleetGrant g, store_->ClaimFleetShard(q));
  absl::MutexLock lock(&mu_);
  shared_shards_ = g.shards;
  Grant out;
  switch (g.state) {
    case store::FleetGrant::State::kWaiting:
      out.retry_after = absl::Milliseconds(g.retry_after_ms);
      return out;
    case store::FleetGrant::State::kSpare:
      return Spare();
    case store::FleetGrant::State::kAssigned:
      break;
  }
  const uint64_t n = options_.num_nodes;
  const uint64_t k = g.shards;
  out.state = Grant::State::kAssigned;
  out.shard = g.shard;
  out.shards = g.shards;
  out.begin = static_cast<uint32_t>(n * g.shard / k);
  out.end = static_cast<uint32_t>(n * (g.shard + 1) / k);
  out.retry_after = options_.lease / 3;
  return out;
}

uint32_t FleetPlanner::shards() const {
  absl::MutexLock lock(&mu_);
  if (options_.shared) return shared_shards_;
  return static_cast<uint32_t>(holders_.size());
}

uint32_t FleetPlanner::gathering() const {
  absl::MutexLock lock(&mu_);
  return static_cast<uint32_t>(gathered_.size());
}

}  // namespace ldpgraph::curator
