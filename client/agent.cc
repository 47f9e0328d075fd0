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

// Moves an answer to a substitution's features question into out: its
// features (own_feature) and, for a fresh one, the row to persist.
void TakeFeatures(NodeAgent::Response features,
                  NodeAgent::SubstitutionStart& out) {
  out.own_feature = std::move(*features.report.mutable_features());
  out.fresh = features.fresh;
  out.to_persist = std::move(features.to_persist);
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
  // Asked before: the stored answer, and the dropped set it implies.
  if (std::optional<MemoEntry> memo = budget_->Lookup(edges_key)) {
    return StartFromMemo(task, edges_key, memo->answer, features_key,
                         feature_spec);
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
  ASSIGN_OR_RETURN(Response features,
                   AnswerFeatures(task, features_key, feature_spec));
  if (features.report.has_refusal()) {
    out.role = SubstitutionStart::Role::kRefuse;
    out.report = Refusal(task, v1::REFUSAL_REASON_BUDGET_EXHAUSTED,
                         "budget exhausted: the features question");
    return out;
  }
  TakeFeatures(std::move(features), out);
  out.role = SubstitutionStart::Role::kTakePart;
  return out;
}

absl::StatusOr<NodeAgent::SubstitutionStart> NodeAgent::StartFromMemo(
    const v1::Task& task, const QueryKey& edges_key,
    const std::string& stored, const QueryKey& features_key,
    const wire::CompiledSpec& feature_spec) {
  v1::Report body;
  if (!body.ParseFromString(stored) ||
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
  SubstitutionStart out;
  out.role = SubstitutionStart::Role::kMemo;
  out.dropped = std::move(dropped);
  body.set_campaign_id(task.campaign_id());
  body.set_node_id(record_.node);
  out.report = std::move(body);
  // Its features, to take part (normally a memo hit too: both answers
  // were given together); none, and it abstains, when they do not fit the
  // caps.
  ASSIGN_OR_RETURN(Response features,
                   AnswerFeatures(task, features_key, feature_spec));
  if (!features.report.has_refusal()) TakeFeatures(std::move(features), out);
  return out;
}

absl::StatusOr<NodeAgent::Response> NodeAgent::AnswerFeatures(
    const v1::Task& task, const QueryKey& features_key,
    const wire::CompiledSpec& feature_spec) {
  return AnswerThroughBudget(task, features_key,
                             [&] { return Perturb(feature_spec); });
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

}  // namespace ldpgraph::agent
