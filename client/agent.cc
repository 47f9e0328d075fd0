#include "client/agent.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/mechanisms/edge_rr.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/mechanisms/label_rr.h"
#include "common/status_macros.h"
#include "common/wire/codec.h"

namespace ldpgraph::agent {
namespace {

constexpr size_t kMaxRefusalMessage = 1024;

bool KnownAttribute(const std::string& name) {
  return name == "features" || name == "label" || name == "edges";
}

std::string Truncate(absl::string_view message) {
  if (message.size() <= kMaxRefusalMessage) return std::string(message);
  return absl::StrCat(message.substr(0, kMaxRefusalMessage - 3), "...");
}

// Whether a report body answers about attribute.
bool BodyMatches(const v1::Report& body, const std::string& attribute) {
  switch (body.body_case()) {
    case v1::Report::kFeatures:
      return attribute == "features";
    case v1::Report::kLabel:
      return attribute == "label";
    case v1::Report::kEdges:
      return attribute == "edges";
    default:
      return false;
  }
}

absl::Status ValidateRecord(const NodeRecord& r) {
  for (size_t j = 0; j < r.features.size(); ++j) {
    if (!std::isfinite(r.features[j])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node ", r.node, ": features[", j, "] is not finite (",
          r.features[j], ")"));
    }
  }
  if (r.label && *r.label < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node ", r.node, ": label must be >= 0 when set, got ", *r.label));
  }
  for (size_t i = 0; i < r.neighbours.size(); ++i) {
    if (r.neighbours[i] == r.node) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node ", r.node, ": neighbours[", i, "] is the node itself"));
    }
    if (i > 0 && r.neighbours[i] <= r.neighbours[i - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node ", r.node, ": neighbours must be strictly ascending, but "
          "neighbours[", i, "] = ", r.neighbours[i], " follows ",
          r.neighbours[i - 1]));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AgentPolicy::Validate() const {
  RETURN_IF_ERROR(PrivacyBudget::Create(caps).status());
  for (const auto& [attribute, cap] : caps.per_attribute) {
    if (!KnownAttribute(attribute)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "budget cap of '", attribute,
          "': not an attribute (features, label, edges)"));
    }
  }
  for (const std::string& attribute : attributes) {
    if (!KnownAttribute(attribute)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "allowed attribute '", attribute,
          "' is not one of features, label, edges"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RandomSource>> NodeRandomSource(
    std::optional<uint64_t> seed, uint32_t node) {
  if (seed) {
    return std::unique_ptr<RandomSource>(
        std::make_unique<SeededRandomForTesting>(NodeNoiseSeed(*seed, node)));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<SecureRandom> secure, SecureRandom::Create());
  return std::unique_ptr<RandomSource>(std::move(secure));
}

// --- NodeAgent ---------------------------------------------------------------

absl::StatusOr<std::unique_ptr<NodeAgent>> NodeAgent::Create(
    NodeRecord record, const AgentPolicy& policy,
    std::unique_ptr<RandomSource> rng) {
  if (rng == nullptr) {
    return absl::InvalidArgumentError("NodeAgent needs a random source");
  }
  RETURN_IF_ERROR(policy.Validate());
  RETURN_IF_ERROR(ValidateRecord(record));
  ASSIGN_OR_RETURN(std::unique_ptr<PrivacyBudget> budget,
                   PrivacyBudget::Create(policy.caps));
  return std::unique_ptr<NodeAgent>(new NodeAgent(
      std::move(record), policy.attributes, std::move(budget), std::move(rng)));
}

absl::StatusOr<std::string> NodeAgent::Perturb(const v1::Task& task) {
  const v1::MechanismSpec& spec = task.spec();
  v1::Report body;
  switch (task.attribute()) {
    case v1::ATTRIBUTE_FEATURES: {
      ASSIGN_OR_RETURN(MechanismSpec s, wire::FromWireFeatureSpec(spec));
      ASSIGN_OR_RETURN(std::unique_ptr<FeatureMechanism> mech,
                       CreateFeatureMechanism(s));
      ASSIGN_OR_RETURN(SparseReport report,
                       mech->Perturb(record_.features, *rng_));
      *body.mutable_features() = wire::EncodeFeatureReport(report);
      break;
    }
    case v1::ATTRIBUTE_LABEL: {
      ASSIGN_OR_RETURN(std::unique_ptr<LabelRandomizedResponse> rr,
                       LabelRandomizedResponse::Create(
                           spec.epsilon(), static_cast<int>(spec.dimension())));
      ASSIGN_OR_RETURN(int label, rr->Perturb(*record_.label, *rng_));
      body.mutable_label()->set_label(static_cast<uint32_t>(label));
      break;
    }
    case v1::ATTRIBUTE_EDGES: {
      ASSIGN_OR_RETURN(
          std::unique_ptr<EdgeRandomizedResponse> rr,
          EdgeRandomizedResponse::Create(spec.epsilon(), spec.dimension()));
      ASSIGN_OR_RETURN(std::vector<uint32_t> reported,
                       rr->Perturb(record_.node, record_.neighbours, *rng_));
      body.mutable_edges()->mutable_neighbours()->Assign(reported.begin(),
                                                         reported.end());
      break;
    }
    default:
      return absl::InternalError("Perturb on an unchecked attribute");
  }
  std::string out;
  if (!body.SerializeToString(&out)) {
    return absl::InternalError(
        absl::StrCat("node ", record_.node, ": cannot serialise a report"));
  }
  return out;
}

absl::StatusOr<NodeAgent::Response> NodeAgent::Respond(const v1::Task& task) {
  Response out;
  out.report.set_campaign_id(task.campaign_id());
  out.report.set_node_id(record_.node);
  auto refuse = [&](v1::RefusalReason reason, absl::string_view message) {
    v1::Refusal* r = out.report.mutable_refusal();
    r->set_reason(reason);
    r->set_message(Truncate(message));
    return std::move(out);
  };

  // The task on its own.
  absl::StatusOr<std::string> attribute = wire::AttributeName(task.attribute());
  if (!attribute.ok()) {
    return refuse(v1::REFUSAL_REASON_INVALID_TASK, attribute.status().message());
  }
  if (absl::Status s = wire::ValidateWireSpec(task.spec()); !s.ok()) {
    return refuse(v1::REFUSAL_REASON_INVALID_TASK, s.message());
  }
  if (wire::AttributeOf(task.spec().kind()) != task.attribute()) {
    return refuse(
        v1::REFUSAL_REASON_INVALID_TASK,
        absl::StrCat("mechanism ", v1::MechanismKind_Name(task.spec().kind()),
                     " does not answer about the attribute '", *attribute,
                     "'"));
  }
  // The node's policy and data.
  if (!attributes_.contains(*attribute)) {
    return refuse(v1::REFUSAL_REASON_POLICY,
                  absl::StrCat("the policy of node ", record_.node,
                               " does not allow questions about '", *attribute,
                               "' (allowed: ", absl::StrJoin(attributes_, ", "),
                               ")"));
  }
  const uint32_t dimension = task.spec().dimension();
  switch (task.attribute()) {
    case v1::ATTRIBUTE_FEATURES:
      if (record_.features.empty()) {
        return refuse(v1::REFUSAL_REASON_NO_DATA,
                      absl::StrCat("node ", record_.node, " holds no features"));
      }
      if (dimension != record_.features.size()) {
        return refuse(v1::REFUSAL_REASON_INVALID_TASK,
                      absl::StrCat("spec.dimension is ", dimension, " but node ",
                                   record_.node, " holds ",
                                   record_.features.size(), " features"));
      }
      break;
    case v1::ATTRIBUTE_LABEL:
      if (!record_.label) {
        return refuse(v1::REFUSAL_REASON_NO_DATA,
                      absl::StrCat("node ", record_.node, " has no label"));
      }
      if (static_cast<uint32_t>(*record_.label) >= dimension) {
        return refuse(v1::REFUSAL_REASON_INVALID_TASK,
                      absl::StrCat("spec.dimension (the class count) is ",
                                   dimension, " but node ", record_.node,
                                   "'s label is not below it"));
      }
      break;
    case v1::ATTRIBUTE_EDGES: {
      const uint32_t highest =
          record_.neighbours.empty()
              ? record_.node
              : std::max(record_.node, record_.neighbours.back());
      if (highest >= dimension) {
        return refuse(v1::REFUSAL_REASON_INVALID_TASK,
                      absl::StrCat("spec.dimension (the node count) is ",
                                   dimension, " but node ", record_.node,
                                   " or one of its neighbours is not below it"));
      }
      break;
    }
    default:
      break;  // AttributeName accepted only the three above
  }

  const QueryKey key = wire::WireQueryKey(task.attribute(), task.spec());
  absl::StatusOr<Answered> answered =
      budget_->Answer(key, [&] { return Perturb(task); });
  if (!answered.ok()) {
    if (absl::IsResourceExhausted(answered.status())) {
      return refuse(v1::REFUSAL_REASON_BUDGET_EXHAUSTED,
                    answered.status().message());
    }
    return absl::InternalError(absl::StrCat("node ", record_.node,
                                            ": answering ", key.Canonical(),
                                            ": ", answered.status().message()));
  }
  v1::Report body;
  if (!body.ParseFromString(answered->answer) || !BodyMatches(body, *attribute)) {
    return absl::InternalError(absl::StrCat(
        "node ", record_.node, ": the stored answer to ", key.Canonical(),
        " is not a report body about '", *attribute, "'"));
  }
  body.set_campaign_id(task.campaign_id());
  body.set_node_id(record_.node);
  out.report = std::move(body);
  out.fresh = !answered->from_memo;
  if (out.fresh) {
    out.to_persist = MemoRow{record_.node, key, std::move(answered->answer)};
  }
  return out;
}

absl::Status NodeAgent::Restore(const QueryKey& key, const std::string& answer) {
  v1::Report body;
  if (!body.ParseFromString(answer) || !BodyMatches(body, key.attribute) ||
      !body.campaign_id().empty() || body.node_id() != 0) {
    return absl::DataLossError(absl::StrCat(
        "node ", record_.node, ": the stored answer to ", key.Canonical(),
        " is not a report body about '", key.attribute, "'"));
  }
  absl::Status s = budget_->Restore(key, MemoEntry{answer, key.epsilon});
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("node ", record_.node,
                                               ": restore: ", s.message()));
  }
  return absl::OkStatus();
}

// --- AgentShard --------------------------------------------------------------

absl::StatusOr<std::unique_ptr<AgentShard>> AgentShard::Create(
    std::vector<NodeRecord> records, AgentPolicy policy,
    std::optional<uint64_t> seed, const std::string& state_dir,
    AgentStateStore::Options store_options) {
  if (records.empty()) {
    return absl::InvalidArgumentError("an agent shard needs at least one node");
  }
  RETURN_IF_ERROR(policy.Validate());
  absl::flat_hash_map<uint32_t, std::unique_ptr<NodeAgent>> agents;
  agents.reserve(records.size());
  for (NodeRecord& record : records) {
    const uint32_t node = record.node;
    if (agents.contains(node)) {
      return absl::InvalidArgumentError(
          absl::StrCat("node ", node, " appears twice in the shard"));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<RandomSource> rng,
                     NodeRandomSource(seed, node));
    ASSIGN_OR_RETURN(std::unique_ptr<NodeAgent> agent,
                     NodeAgent::Create(std::move(record), policy, std::move(rng)));
    agents.emplace(node, std::move(agent));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<AgentStateStore> store,
                   AgentStateStore::Open(state_dir, store_options));
  ShardCounters counters;
  RETURN_IF_ERROR(store->ForEach([&](const MemoRow& row) -> absl::Status {
    auto it = agents.find(row.node);
    if (it == agents.end()) {
      ++counters.foreign_rows;
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(it->second->Restore(row.key, row.answer));
    ++counters.restored;
    return absl::OkStatus();
  }));
  std::unique_ptr<AgentShard> shard(
      new AgentShard(std::move(store), std::move(agents)));
  {
    absl::MutexLock lock(&shard->mu_);
    shard->counters_ = std::move(counters);
  }
  return shard;
}

absl::StatusOr<ShardResponse> AgentShard::RespondAll(const v1::Task& task) {
  absl::MutexLock lock(&mu_);
  ShardResponse out;
  std::map<v1::RefusalReason, uint64_t> refusals;
  absl::flat_hash_set<uint32_t> seen;
  for (const uint32_t node : task.node_ids()) {
    if (!seen.insert(node).second) continue;
    auto it = agents_.find(node);
    if (it == agents_.end()) {
      ++out.not_in_shard;
      continue;
    }
    // On an error here the rows already answered stay in pending_.
    ASSIGN_OR_RETURN(NodeAgent::Response r, it->second->Respond(task));
    if (r.report.has_refusal()) {
      ++out.refusals;
      ++refusals[r.report.refusal().reason()];
    } else if (r.fresh) {
      ++out.fresh;
    } else {
      ++out.memo_hits;
    }
    if (r.to_persist) pending_.push_back(std::move(*r.to_persist));
    out.reports.push_back(std::move(r.report));
  }
  // Durable before anything leaves: the rows of this task and any left over
  // from an earlier failed commit, in one transaction.
  RETURN_IF_ERROR(store_->Commit(pending_));
  pending_.clear();
  counters_.fresh += out.fresh;
  counters_.memo_hits += out.memo_hits;
  counters_.not_in_shard += out.not_in_shard;
  for (const auto& [reason, n] : refusals) counters_.refusals[reason] += n;
  return out;
}

std::vector<uint32_t> AgentShard::nodes() const {
  std::vector<uint32_t> out;
  out.reserve(agents_.size());
  for (const auto& [node, agent] : agents_) out.push_back(node);
  std::sort(out.begin(), out.end());
  return out;
}

const NodeAgent* AgentShard::agent(uint32_t node) const {
  auto it = agents_.find(node);
  return it == agents_.end() ? nullptr : it->second.get();
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

// --- LoadShard ---------------------------------------------------------------

absl::StatusOr<std::vector<NodeRecord>> LoadShard(
    const std::string& dataset_dir, FeatureScaling scaling, uint32_t begin,
    uint32_t end) {
  if (begin >= end) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the shard [", begin, ", ", end, ") of ", dataset_dir, " is empty"));
  }
  ASSIGN_OR_RETURN(Dataset d, LoadDataset(dataset_dir));
  const size_t n = d.graph.num_nodes();
  if (end > n) {
    return absl::InvalidArgumentError(
        absl::StrCat("the shard [", begin, ", ", end, ") of ", dataset_dir,
                     " goes beyond its ", n, " nodes"));
  }
  const SparseRows x = ScaleFeatures(d.features, scaling);
  std::vector<NodeRecord> records;
  records.reserve(end - begin);
  for (uint32_t v = begin; v < end; ++v) {
    NodeRecord r;
    r.node = v;
    r.features.assign(x.cols, 0.0);
    const auto idx = x.row_indices(v);
    const auto val = x.row_values(v);
    for (size_t p = 0; p < idx.size(); ++p) r.features[idx[p]] = val[p];
    if (d.labels[v] >= 0) r.label = d.labels[v];
    const auto nb = d.graph.neighbors(v);
    r.neighbours.assign(nb.begin(), nb.end());
    records.push_back(std::move(r));
  }
  return records;
}

}  // namespace ldpgraph::agent
