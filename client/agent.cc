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
#include "common/edges/blink.h"
#include "common/mechanisms/edge_rr.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/mechanisms/label_rr.h"
#include "common/status_macros.h"
#include "common/wire/codec.h"
#include "common/wire/names.h"

namespace ldpgraph::agent {
namespace {

constexpr size_t kMaxRefusalMessage = 1024;

bool KnownAttribute(const std::string& name) {
  return wire::kAttributeNames.Parse(name).ok();
}

std::string Truncate(absl::string_view message) {
  if (message.size() <= kMaxRefusalMessage) return std::string(message);
  return absl::StrCat(message.substr(0, kMaxRefusalMessage - 3), "...");
}

// Whether a report body answers about attribute.
bool BodyMatches(const v1::Report& body, absl::string_view attribute) {
  switch (body.body_case()) {
    case v1::Report::kFeatures:
      return attribute == wire::kAttributeNames.Name(v1::ATTRIBUTE_FEATURES);
    case v1::Report::kLabel:
      return attribute == wire::kAttributeNames.Name(v1::ATTRIBUTE_LABEL);
    case v1::Report::kEdges:
      return attribute == wire::kAttributeNames.Name(v1::ATTRIBUTE_EDGES);
    default:
      return false;
  }
}

absl::Status ValidateRecord(const NodeRecord& r) {
  if (absl::Status s = r.features.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("node ", r.node, ": ", s.message()));
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

// The bit of each attribute (1 << v1::Attribute) that attributes names;
// an unknown name is left out (AgentPolicy::Validate rejects it).
uint8_t AttributeMask(const std::set<std::string>& attributes) {
  uint8_t mask = 0;
  for (const std::string& name : attributes) {
    if (auto a = wire::kAttributeNames.Parse(name); a.ok()) mask |= 1u << *a;
  }
  return mask;
}

// The names of mask's attributes, sorted as a std::set of them is.
std::string AttributeList(uint8_t mask) {
  std::set<std::string> names;
  for (v1::Attribute a :
       {v1::ATTRIBUTE_FEATURES, v1::ATTRIBUTE_LABEL, v1::ATTRIBUTE_EDGES}) {
    if (mask & (1u << a)) names.emplace(wire::kAttributeNames.Name(a));
  }
  return absl::StrJoin(names, ", ");
}

}  // namespace

absl::Status AgentPolicy::Validate() const {
  RETURN_IF_ERROR(PrivacyBudget::Create(caps).status());
  for (const auto& [attribute, cap] : caps.per_attribute) {
    if (!KnownAttribute(attribute)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "budget cap of '", attribute,
          "': not an attribute (", wire::kAttributeNames.Choices(), ")"));
    }
  }
  for (const std::string& attribute : attributes) {
    if (!KnownAttribute(attribute)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "allowed attribute '", attribute,
          "' is not one of ", wire::kAttributeNames.Choices()));
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
  // One buffer per thread, not per node: 4 KiB apiece would be 1 GiB for a
  // host of 250,000 nodes.
  ASSIGN_OR_RETURN(std::unique_ptr<ThreadSecureRandom> secure,
                   ThreadSecureRandom::Create());
  return std::unique_ptr<RandomSource>(std::move(secure));
}

std::unique_ptr<RandomSource> NodeEdgeRandomSource(
    std::optional<uint64_t> seed, uint32_t node) {
  if (!seed) return nullptr;
  return std::make_unique<SeededRandomForTesting>(
      NodeNoiseSeed(EdgeStreamSeed(*seed), node));
}

// --- NodeAgent ---------------------------------------------------------------

absl::StatusOr<std::unique_ptr<NodeAgent>> NodeAgent::Create(
    NodeRecord record, const AgentPolicy& policy,
    std::unique_ptr<RandomSource> rng,
    std::shared_ptr<const poisoning::Adversary> adversary,
    std::shared_ptr<const poisoning::EdgeAdversary> edge_adversary,
    std::unique_ptr<RandomSource> edge_rng) {
  return Create(std::move(record), std::make_shared<const AgentPolicy>(policy),
                std::move(rng), std::move(adversary),
                std::move(edge_adversary), std::move(edge_rng));
}

absl::StatusOr<std::unique_ptr<NodeAgent>> NodeAgent::Create(
    NodeRecord record, std::shared_ptr<const AgentPolicy> policy,
    std::unique_ptr<RandomSource> rng,
    std::shared_ptr<const poisoning::Adversary> adversary,
    std::shared_ptr<const poisoning::EdgeAdversary> edge_adversary,
    std::unique_ptr<RandomSource> edge_rng) {
  if (rng == nullptr) {
    return absl::InvalidArgumentError("NodeAgent needs a random source");
  }
  if (policy == nullptr) {
    return absl::InvalidArgumentError("NodeAgent needs a policy");
  }
  RETURN_IF_ERROR(policy->Validate());
  RETURN_IF_ERROR(ValidateRecord(record));
  // The caps are the shared policy's (an aliasing pointer), not a copy.
  ASSIGN_OR_RETURN(std::unique_ptr<PrivacyBudget> budget,
                   PrivacyBudget::Create(std::shared_ptr<const BudgetCaps>(
                       policy, &policy->caps)));
  std::unique_ptr<const Attackers> attackers;
  if (adversary != nullptr || edge_adversary != nullptr) {
    attackers = std::make_unique<const Attackers>(
        Attackers{std::move(adversary), std::move(edge_adversary)});
  }
  return std::unique_ptr<NodeAgent>(new NodeAgent(
      std::move(record), AttributeMask(policy->attributes), std::move(budget),
      std::move(rng), std::move(edge_rng), std::move(attackers)));
}

absl::StatusOr<v1::Report> NodeAgent::Perturb(const wire::CompiledSpec& spec) {
  v1::Report body;
  CountedRandom& edge_rng = StreamOf("edges");
  if (const FeatureMechanism* mech = spec.feature()) {
    // The scaled dense row, made for this answer only.
    const std::vector<double> features = record_.features.Dense();
    // Simulation only: a malicious node's crafted report.
    ASSIGN_OR_RETURN(
        SparseReport report,
        adversary() != nullptr
            ? adversary()->CraftFeatureReport(*mech, features, rng_)
            : mech->Perturb(features, rng_));
    *body.mutable_features() = wire::EncodeFeatureReport(report);
  } else if (const LabelRandomizedResponse* rr = spec.label()) {
    ASSIGN_OR_RETURN(int label, adversary() != nullptr
                                    ? adversary()->CraftLabel(*rr, rng_)
                                    : rr->Perturb(*record_.label, rng_));
    body.mutable_label()->set_label(static_cast<uint32_t>(label));
  } else if (const EdgeRandomizedResponse* rr = spec.edges();
             rr != nullptr && spec.kind() == v1::MECHANISM_KIND_EDGE_RR) {
    // Simulation only: the fake-edges attacker's crafted list.
    ASSIGN_OR_RETURN(
        std::vector<uint32_t> reported,
        edge_adversary() != nullptr
            ? edge_adversary()->CraftRrReport(*rr, record_.node, edge_rng)
            : rr->Perturb(record_.node, record_.neighbours, edge_rng));
    body.mutable_edges()->mutable_neighbours()->Assign(reported.begin(),
                                                       reported.end());
  } else if (const edges::BlinkClient* blink = spec.blink()) {
    // Blink: the bits at (1 - delta) eps and the degree at delta eps, both
    // from the node's own stream, one report (budgeted as one question).
    ASSIGN_OR_RETURN(
        edges::BlinkReport report,
        edge_adversary() != nullptr
            ? edge_adversary()->CraftBlinkReport(*blink, record_.node,
                                                 edge_rng)
            : blink->Report(record_.node, record_.neighbours, edge_rng));
    v1::EdgeReport* e = body.mutable_edges();
    e->mutable_neighbours()->Assign(report.neighbours.begin(),
                                    report.neighbours.end());
    e->set_noisy_degree(report.noisy_degree);
  } else {
    return absl::InternalError("Perturb on an unchecked attribute");
  }
  return body;
}

v1::Report NodeAgent::Refusal(const v1::Task& task, v1::RefusalReason reason,
                              absl::string_view message) const {
  v1::Report out;
  out.set_campaign_id(task.campaign_id());
  out.set_node_id(record_.node);
  v1::Refusal* r = out.mutable_refusal();
  r->set_reason(reason);
  r->set_message(Truncate(message));
  return out;
}

std::optional<v1::Report> NodeAgent::CheckTask(
    const v1::Task& task,
    const absl::StatusOr<wire::CompiledSpec>& spec) const {
  auto refuse = [&](v1::RefusalReason reason, absl::string_view message) {
    return std::optional<v1::Report>(Refusal(task, reason, message));
  };
  // The task on its own.
  absl::StatusOr<std::string> attribute = wire::AttributeName(task.attribute());
  if (!attribute.ok()) {
    return refuse(v1::REFUSAL_REASON_INVALID_TASK, attribute.status().message());
  }
  if (!spec.ok()) {
    return refuse(v1::REFUSAL_REASON_INVALID_TASK, spec.status().message());
  }
  if (wire::AttributeOf(task.spec().kind()) != task.attribute()) {
    return refuse(
        v1::REFUSAL_REASON_INVALID_TASK,
        absl::StrCat("mechanism ", v1::MechanismKind_Name(task.spec().kind()),
                     " does not answer about the attribute '", *attribute,
                     "'"));
  }
  const bool substitution =
      task.spec().kind() == v1::MECHANISM_KIND_EDGE_SUBSTITUTION;
  // The node's policy and data. Substitution shares the node's privatized
  // features with its neighbours: the policy must allow both.
  std::vector<v1::Attribute> needed = {task.attribute()};
  if (substitution) needed.push_back(v1::ATTRIBUTE_FEATURES);
  for (const v1::Attribute a : needed) {
    if (!(allowed_ & (1u << a))) {
      return refuse(v1::REFUSAL_REASON_POLICY,
                    absl::StrCat("the policy of node ", record_.node,
                                 " does not allow questions about '",
                                 wire::kAttributeNames.Name(a),
                                 "' (allowed: ", AttributeList(allowed_), ")"));
    }
  }
  const uint32_t dimension = task.spec().dimension();
  if (task.attribute() == v1::ATTRIBUTE_FEATURES || substitution) {
    const uint32_t d = substitution
                           ? task.spec().substitution().features().dimension()
                           : dimension;
    if (record_.features.empty()) {
      return refuse(v1::REFUSAL_REASON_NO_DATA,
                    absl::StrCat("node ", record_.node, " holds no features"));
    }
    if (d != record_.features.dimension()) {
      return refuse(v1::REFUSAL_REASON_INVALID_TASK,
                    absl::StrCat(substitution ? "spec.substitution.features."
                                              : "spec.",
                                 "dimension is ", d, " but node ", record_.node,
                                 " holds ", record_.features.dimension(),
                                 " features"));
    }
  }
  if (task.attribute() == v1::ATTRIBUTE_LABEL) {
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
  }
  if (task.attribute() == v1::ATTRIBUTE_EDGES) {
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
  }
  return std::nullopt;
}

absl::StatusOr<NodeAgent::Response> NodeAgent::Respond(const v1::Task& task) {
  return Respond(task, wire::CompiledSpec::Compile(task.spec()));
}

absl::StatusOr<NodeAgent::Response> NodeAgent::Respond(
    const v1::Task& task, const absl::StatusOr<wire::CompiledSpec>& spec) {
  if (task.spec().kind() == v1::MECHANISM_KIND_EDGE_SUBSTITUTION) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node ", record_.node, ": campaign ", task.campaign_id(),
        " asks for neighbour substitution, which runs as an exchange "
        "(BeginSubstitution), not as a one-shot answer"));
  }
  Response out;
  if (std::optional<v1::Report> refusal = CheckTask(task, spec)) {
    out.report = *std::move(refusal);
    return out;
  }
  return AnswerThroughBudget(task, spec->Key(task.attribute()),
                             [&] { return Perturb(*spec); });
}

absl::StatusOr<NodeAgent::Response> NodeAgent::AnswerThroughBudget(
    const v1::Task& task, const QueryKey& key,
    absl::FunctionRef<absl::StatusOr<v1::Report>()> perturb) {
  Response out;
  const std::string& attribute = key.attribute;
  // A fresh answer is kept as built; only a memo hit is parsed back.
  std::optional<v1::Report> built;
  uint64_t draws = 0;  // the stream's position after a fresh answer
  absl::StatusOr<Answered> answered = budget_->Answer(key, [&] {
    absl::StatusOr<std::string> a = Serialise(perturb(), built);
    draws = StreamOf(attribute).draws();
    return a;
  });
  if (!answered.ok()) {
    if (absl::IsResourceExhausted(answered.status())) {
      out.report = Refusal(task, v1::REFUSAL_REASON_BUDGET_EXHAUSTED,
                           answered.status().message());
      return out;
    }
    return absl::InternalError(absl::StrCat("node ", record_.node,
                                            ": answering ", key.Canonical(),
                                            ": ", answered.status().message()));
  }
  v1::Report body;
  if (answered->from_memo) {
    if (!body.ParseFromString(answered->answer) ||
        !BodyMatches(body, attribute)) {
      return absl::InternalError(absl::StrCat(
          "node ", record_.node, ": the stored answer to ", key.Canonical(),
          " is not a report body about '", attribute, "'"));
    }
  } else {
    body = *std::move(built);
  }
  body.set_campaign_id(task.campaign_id());
  body.set_node_id(record_.node);
  out.report = std::move(body);
  out.fresh = !answered->from_memo;
  if (out.fresh) {
    out.to_persist =
        MemoRow{record_.node, key, std::move(answered->answer), draws};
  }
  return out;
}

absl::StatusOr<std::string> NodeAgent::Serialise(
    absl::StatusOr<v1::Report> body, std::optional<v1::Report>& built) const {
  if (!body.ok()) return body.status();
  std::string out;
  if (!body->SerializeToString(&out)) {
    return absl::InternalError(
        absl::StrCat("node ", record_.node, ": cannot serialise a report"));
  }
  built = *std::move(body);
  return out;
}

absl::StatusOr<NodeAgent::SubstitutionStart> NodeAgent::BeginSubstitution(
    const v1::Task& task) {
  if (task.spec().kind() != v1::MECHANISM_KIND_EDGE_SUBSTITUTION) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node ", record_.node, ": campaign ", task.campaign_id(),
        " does not ask for neighbour substitution"));
  }
  SubstitutionStart out;
  const absl::StatusOr<wire::CompiledSpec> spec =
      wire::CompiledSpec::Compile(task.spec());
  if (std::optional<v1::Report> refusal = CheckTask(task, spec)) {
    out.role = SubstitutionStart::Role::kRefuse;
    out.report = *std::move(refusal);
    return out;
  }
  const wire::CompiledSpec& feature_spec = *spec->substitution_features();
  const QueryKey features_key = feature_spec.Key(v1::ATTRIBUTE_FEATURES);
  const QueryKey edges_key = spec->Key(task.attribute());
  // The features question, answered (memo or fresh) through the budget; a
  // fresh answer is kept as built.
  std::optional<v1::Report> built;
  uint64_t draws = 0;  // the stream's position after a fresh answer
  auto answer_features = [&]() -> absl::StatusOr<std::optional<Answered>> {
    absl::StatusOr<Answered> a = budget_->Answer(features_key, [&] {
      absl::StatusOr<std::string> s = Serialise(Perturb(feature_spec), built);
      draws = rng_.draws();
      return s;
    });
    if (absl::IsResourceExhausted(a.status())) {
      return std::optional<Answered>();
    }
    if (!a.ok()) {
      return absl::InternalError(absl::StrCat(
          "node ", record_.node, ": answering ", features_key.Canonical(),
          ": ", a.status().message()));
    }
    return std::optional<Answered>(*std::move(a));
  };
  auto take_features = [&](const Answered& a) -> absl::Status {
    v1::Report body;
    if (!a.from_memo) {
      body = *std::move(built);
    } else if (!body.ParseFromString(a.answer) ||
               !BodyMatches(body,
                            wire::kAttributeNames.Name(v1::ATTRIBUTE_FEATURES))) {
      return absl::InternalError(absl::StrCat(
          "node ", record_.node, ": the stored answer to ",
          features_key.Canonical(), " is not a report body about 'features'"));
    }
    out.own_feature = std::move(*body.mutable_features());
    if (!a.from_memo) {
      out.fresh = true;
      out.to_persist = MemoRow{record_.node, features_key, a.answer, draws};
    }
    return absl::OkStatus();
  };

  // Asked before: the stored answer, and the dropped set it implies.
  if (std::optional<MemoEntry> memo = budget_->Lookup(edges_key)) {
    v1::Report body;
    if (!body.ParseFromString(memo->answer) ||
        !BodyMatches(body, wire::kAttributeNames.Name(v1::ATTRIBUTE_EDGES))) {
      return absl::InternalError(absl::StrCat(
          "node ", record_.node, ": the stored answer to ",
          edges_key.Canonical(), " is not a report body about 'edges'"));
    }
    const auto& listed = body.edges().neighbours();
    absl::flat_hash_set<uint32_t> kept(listed.begin(), listed.end());
    std::vector<uint32_t> dropped;
    for (uint32_t u : record_.neighbours) {
      if (!kept.contains(u)) dropped.push_back(u);
    }
    out.role = SubstitutionStart::Role::kMemo;
    out.dropped = std::move(dropped);
    body.set_campaign_id(task.campaign_id());
    body.set_node_id(record_.node);
    out.report = std::move(body);
    // Its features, to take part (normally a memo hit too: both answers
    // were given together).
    ASSIGN_OR_RETURN(std::optional<Answered> f, answer_features());
    if (f) RETURN_IF_ERROR(take_features(*f));
    return out;
  }
  // Both questions must fit together, before anything is drawn.
  if (absl::Status s = budget_->CanAnswerAll({features_key, edges_key});
      !s.ok()) {
    if (!absl::IsResourceExhausted(s)) {
      return absl::InternalError(
          absl::StrCat("node ", record_.node, ": ", s.message()));
    }
    out.role = SubstitutionStart::Role::kRefuse;
    out.report = Refusal(task, v1::REFUSAL_REASON_BUDGET_EXHAUSTED, s.message());
    return out;
  }
  ASSIGN_OR_RETURN(std::optional<Answered> f, answer_features());
  if (!f) {
    out.role = SubstitutionStart::Role::kRefuse;
    out.report = Refusal(task, v1::REFUSAL_REASON_BUDGET_EXHAUSTED,
                         "budget exhausted: the features question");
    return out;
  }
  RETURN_IF_ERROR(take_features(*f));
  out.role = SubstitutionStart::Role::kTakePart;
  return out;
}

absl::StatusOr<NodeAgent::Response> NodeAgent::FinishSubstitution(
    const v1::Task& task, const std::vector<uint32_t>& neighbours) {
  if (task.spec().kind() != v1::MECHANISM_KIND_EDGE_SUBSTITUTION) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node ", record_.node, ": campaign ", task.campaign_id(),
        " does not ask for neighbour substitution"));
  }
  const uint32_t n = task.spec().dimension();
  for (size_t i = 0; i < neighbours.size(); ++i) {
    if (neighbours[i] >= n || neighbours[i] == record_.node ||
        (i > 0 && neighbours[i] <= neighbours[i - 1])) {
      return absl::InternalError(absl::StrCat(
          "node ", record_.node, ": the substitution produced an invalid "
          "neighbour list (entry ", i, " = ", neighbours[i], ")"));
    }
  }
  return AnswerThroughBudget(
      task, wire::WireQueryKey(task.attribute(), task.spec()), [&] {
        v1::Report body;
        body.mutable_edges()->mutable_neighbours()->Assign(neighbours.begin(),
                                                           neighbours.end());
        return absl::StatusOr<v1::Report>(std::move(body));
      });
}

absl::Status NodeAgent::Restore(const QueryKey& key, const std::string& answer,
                                uint64_t draws) {
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
  StreamOf(key.attribute).AdvanceTo(draws);
  return absl::OkStatus();
}

// --- AgentShard --------------------------------------------------------------

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
  std::sort(records.begin(), records.end(),
            [](const NodeRecord& a, const NodeRecord& b) { return a.node < b.node; });
  std::vector<uint32_t> nodes;
  std::vector<std::unique_ptr<NodeAgent>> agents;
  nodes.reserve(records.size());
  agents.reserve(records.size());
  for (NodeRecord& record : records) {
    const uint32_t node = record.node;
    if (!nodes.empty() && nodes.back() == node) {
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
    nodes.push_back(node);
    agents.push_back(std::move(agent));
  }
  records = {};  // moved from: hand their vector back
  auto index = [&](uint32_t node) -> std::optional<size_t> {
    auto it = std::lower_bound(nodes.begin(), nodes.end(), node);
    if (it == nodes.end() || *it != node) return std::nullopt;
    return static_cast<size_t>(it - nodes.begin());
  };
  ASSIGN_OR_RETURN(std::unique_ptr<AgentStateStore> store,
                   AgentStateStore::Open(state_dir, store_options));
  ShardCounters counters;
  RETURN_IF_ERROR(store->ForEach([&](const MemoRow& row) -> absl::Status {
    const std::optional<size_t> i = index(row.node);
    if (!i) {
      ++counters.foreign_rows;
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(agents[*i]->Restore(row.key, row.answer, row.draws));
    ++counters.restored;
    return absl::OkStatus();
  }));
  // Each node's key pair: loaded, or made now and stored before anything
  // can send its public half (in transactions of at most kKeysPerCommit
  // keys, so that the new ones are never all held twice).
  constexpr size_t kKeysPerCommit = 8192;
  std::vector<crypto::KeyPair> keys;
  uint64_t generated = 0;
  if (sealing_keys) {
    keys.reserve(nodes.size());
    ASSIGN_OR_RETURN(auto stored_keys, store->LoadKeys());
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
              store->path(), ": the key of node ", node, ": ",
              pair.status().message()));
        }
        keys.push_back(*pair);
        continue;
      }
      ASSIGN_OR_RETURN(crypto::KeyPair pair, crypto::KeyPair::Generate());
      new_keys.emplace_back(node, std::string(pair.private_key()));
      keys.push_back(pair);
      if (new_keys.size() == kKeysPerCommit) {
        RETURN_IF_ERROR(store->StoreKeys(new_keys));
        generated += new_keys.size();
        new_keys.clear();
      }
    }
    RETURN_IF_ERROR(store->StoreKeys(new_keys));
    generated += new_keys.size();
  }
  counters.keys_generated = generated;
  std::unique_ptr<AgentShard> shard(new AgentShard(
      std::move(store), std::move(nodes), std::move(agents), std::move(keys)));
  {
    absl::MutexLock lock(&shard->mu_);
    shard->counters_ = std::move(counters);
  }
  return shard;
}

std::optional<size_t> AgentShard::Find(uint32_t node) const {
  auto it = std::lower_bound(nodes_.begin(), nodes_.end(), node);
  if (it == nodes_.end() || *it != node) return std::nullopt;
  return static_cast<size_t>(it - nodes_.begin());
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

// --- LoadShard ---------------------------------------------------------------

absl::StatusOr<std::vector<NodeRecord>> LoadShard(
    const std::string& dataset_dir, FeatureScaling scaling, uint32_t begin,
    uint32_t end, uint64_t checksum_bytes) {
  ASSIGN_OR_RETURN(const DatasetMeta meta, LoadDatasetMeta(dataset_dir));
  ASSIGN_OR_RETURN(
      std::vector<DeviceRecord> stored,
      ReadDeviceRecords(dataset_dir, meta, begin, end, checksum_bytes));
  // One scale for the shard, shared by its records.
  std::shared_ptr<const FeatureScale> scale;
  if (scaling != FeatureScaling::kNone) {
    ASSIGN_OR_RETURN(FeatureSchema schema,
                     DeclaredFeatureSchema(meta, dataset_dir));
    ASSIGN_OR_RETURN(scale, FeatureScale::Create(std::move(schema), scaling));
  } else {
    scale = FeatureScale::AsStored(meta.features);
  }
  std::vector<NodeRecord> records;
  records.reserve(stored.size());
  for (DeviceRecord& s : stored) {
    NodeRecord r;
    r.node = s.node;
    r.features = NodeFeatures(s.indices, s.values, scale);
    if (s.label >= 0) r.label = s.label;
    r.neighbours = std::move(s.neighbours);
    r.neighbours.shrink_to_fit();
    records.push_back(std::move(r));
    s = DeviceRecord();  // its buffers, copied or moved, go now
  }
  return records;
}

absl::StatusOr<SimulatedAttack> LoadSimulatedAttack(
    const std::string& dataset_dir, FeatureScaling scaling,
    const poisoning::AttackSettings& s, uint64_t seed,
    absl::FunctionRef<bool(uint32_t)> offline, double screen_alpha,
    int attack_edges) {
  RETURN_IF_ERROR(s.Validate());
  ASSIGN_OR_RETURN(Dataset d, LoadDataset(dataset_dir));
  if (s.target_class >= d.meta.classes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the attack class ", s.target_class, " is not one of the ",
        d.meta.classes, " classes of ", dataset_dir));
  }
  // As pipeline::PreparePoisoning, step for step: a seeded deployment must
  // derive the attacker `ldpgraph eval` derives.
  const uint32_t n = static_cast<uint32_t>(d.graph.num_nodes());
  const std::vector<uint32_t> nodes =
      poisoning::MaliciousNodes(n, seed, s.fraction, offline);
  const SparseRows x = ScaleDatasetFeatures(d, scaling);
  ASSIGN_OR_RETURN(std::vector<uint32_t> ranking,
                   poisoning::RankDims(x, d.labels, nodes, s.target_class));
  std::vector<uint32_t> dims(
      ranking.begin(),
      ranking.begin() + std::min<size_t>(ranking.size(), s.target_dims));
  std::sort(dims.begin(), dims.end());
  std::optional<poisoning::AdaptivePlan> plan;
  if (s.kind == poisoning::AttackKind::kAdaptive) {
    // The attacker knows the screen's public settings: n and alpha.
    plan = poisoning::AdaptivePlan{n, nodes.size(), screen_alpha,
                                   std::move(ranking)};
  }
  ASSIGN_OR_RETURN(std::unique_ptr<poisoning::Adversary> adversary,
                   poisoning::Adversary::Create(s.target_class, std::move(dims),
                                                s.kind, std::move(plan)));
  SimulatedAttack out;
  out.adversary = std::move(adversary);
  if (s.kind == poisoning::AttackKind::kFakeEdges) {
    ASSIGN_OR_RETURN(out.edge_adversary,
                     poisoning::EdgeAdversary::Create(n, nodes, attack_edges));
  }
  out.nodes.insert(nodes.begin(), nodes.end());
  return out;
}

// --- ldpgraph-agent's attack flags -------------------------------------------

const std::vector<std::string>& SimulatedAttackFlagNames() {
  static const auto* names = new std::vector<std::string>{
      "malicious", "malicious-seed", "attack", "attack-class", "attack-dims",
      "attack-alpha", "attack-edges"};
  return *names;
}

absl::StatusOr<SimulatedAttackFlags> ParseSimulatedAttackFlags(
    const CliArgs& a) {
  SimulatedAttackFlags f;
  poisoning::AttackSettings& s = f.settings;
  ASSIGN_OR_RETURN(auto fraction, a.GetDouble("malicious"));
  if (fraction) {
    if (!(*fraction >= 0 && *fraction < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--malicious must be in [0, 1), got ", *fraction));
    }
    s.fraction = *fraction;
  }
  ASSIGN_OR_RETURN(auto seed, a.GetUint("malicious-seed"));
  if (seed) f.seed = *seed;
  if (auto kind = a.Get("attack")) {
    ASSIGN_OR_RETURN(s.kind, poisoning::kAttackNames.Parse(*kind, "--attack"));
  }
  ASSIGN_OR_RETURN(auto cls, a.GetInt("attack-class"));
  if (cls) {
    if (*cls < 0 || *cls > 1 << 30) {
      return absl::InvalidArgumentError(
          absl::StrCat("--attack-class must be a class >= 0, got ", *cls));
    }
    s.target_class = static_cast<int>(*cls);
  }
  ASSIGN_OR_RETURN(auto dims, a.GetInt("attack-dims"));
  if (dims) {
    if (*dims < 1 || *dims > 1 << 30) {
      return absl::InvalidArgumentError(
          absl::StrCat("--attack-dims must be >= 1, got ", *dims));
    }
    s.target_dims = static_cast<int>(*dims);
  }
  ASSIGN_OR_RETURN(auto alpha, a.GetDouble("attack-alpha"));
  if (alpha) {
    if (!(*alpha > 0 && *alpha < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--attack-alpha must be in (0, 1), got ", *alpha));
    }
    f.screen_alpha = *alpha;
  }
  ASSIGN_OR_RETURN(auto victims, a.GetInt("attack-edges"));
  if (victims) {
    if (*victims < 1 || *victims > 1 << 30) {
      return absl::InvalidArgumentError(
          absl::StrCat("--attack-edges must be >= 1, got ", *victims));
    }
    f.attack_edges = static_cast<int>(*victims);
  }
  if (s.fraction == 0) {
    for (const std::string& flag : SimulatedAttackFlagNames()) {
      if (flag != "malicious" && a.Has(flag)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", flag, " applies to --malicious F with F > 0"));
      }
    }
  }
  if (alpha && s.kind != poisoning::AttackKind::kAdaptive) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--attack-alpha applies to --attack adaptive (the attacker that "
        "knows the screen), not ", poisoning::kAttackNames.Name(s.kind)));
  }
  if (victims && s.kind != poisoning::AttackKind::kFakeEdges) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--attack-edges applies to --attack fake-edges, not ",
        poisoning::kAttackNames.Name(s.kind)));
  }
  if (absl::Status v = s.Validate(); !v.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--malicious: ", v.message()));
  }
  return f;
}

}  // namespace ldpgraph::agent
