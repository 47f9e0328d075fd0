// Conversions between the wire messages of proto/ldpgraph/v1 and the plain
// types of common/: mechanism specs and reports. Both the agent (encoding)
// and the curator (decoding and validating) use these, so the two sides can
// never disagree about an encoding. Protobuf only, no gRPC.
//
// Decoding is strict: every structural rule of FeatureReport (dense vs
// indices, values vs bits, bit_count, padding) is checked here, and the
// mechanism's own ValidateReport checks the rest (dimension, index range and
// order, value domain, number of sampled dimensions). Errors are
// INVALID_ARGUMENT and say what is wrong and where.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/mechanisms/edge_blink.h"
#include "common/mechanisms/edge_rr.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/mechanisms/label_rr.h"
#include "ldpgraph/v1/agent.pb.h"
#include "ldpgraph/v1/mechanism.pb.h"

namespace ldpgraph::wire {

// The attribute name used by budgets and the ledger: "features", "label",
// "edges" (kAttributeNames, common/wire/names.h). INVALID_ARGUMENT
// "attribute must be features, label or edges, got <number>" for
// ATTRIBUTE_UNSPECIFIED or an unknown value.
absl::StatusOr<std::string> AttributeName(v1::Attribute attribute);

// The attribute a mechanism kind answers about (FEATURES for the six
// feature mechanisms, LABEL for label RR, EDGES for edge RR, neighbour
// substitution and Blink).
v1::Attribute AttributeOf(v1::MechanismKind kind);

// The wire kind of a feature mechanism, and back. FromWireFeatureKind fails
// with INVALID_ARGUMENT for a label, edge or unspecified kind.
v1::MechanismKind ToWireKind(MechanismKind kind);
absl::StatusOr<MechanismKind> FromWireFeatureKind(v1::MechanismKind kind);

// A feature MechanismSpec as it goes on the wire, and back. sampled = 0 on
// the wire means the mechanism's default. The decoded spec is not yet
// validated: pass it to CreateFeatureMechanism.
v1::MechanismSpec ToWire(const MechanismSpec& spec);
absl::StatusOr<MechanismSpec> FromWireFeatureSpec(const v1::MechanismSpec& w);

// Checks a whole wire spec: kind known; epsilon finite and > 0; for feature
// kinds everything CreateFeatureMechanism checks; for label RR dimension =
// classes >= 2; for edge RR dimension = nodes >= 2. For neighbour
// substitution (MECHANISM_KIND_EDGE_SUBSTITUTION) epsilon (eps_e) and
// dimension (n) as for edge RR, and spec.substitution: approach 1 or 2,
// similarity "cosine" or "l2", top_k in [1, 1000], max_dummies <= 1000,
// dummy_mean finite, dummy_std finite and >= 0, round_timeout_ms in
// [1, 86400000], and `features` a valid feature mechanism spec with a finite
// epsilon (the agents exchange its reports: raw features never leave an
// agent) and no substitution of its own. (The same rules as
// edges::FromWire, checked here because ldpgraph_edges links this library.)
// For Blink (MECHANISM_KIND_EDGE_BLINK) epsilon is the node's total eps,
// dimension n >= 3 and spec.blink.degree_share (delta) in (0, 1):
// BlinkParams::Validate and BlinkClient::Create's rules
// (common/mechanisms/edge_blink.h).
// INVALID_ARGUMENT naming the field. CompiledSpec::Compile checks the same
// and keeps the mechanism it builds.
absl::Status ValidateWireSpec(const v1::MechanismSpec& w);

// A wire spec checked once, with its mechanism built: what an agent needs
// to answer a task (the mechanism to perturb with, the budget key) and a
// curator to compare specs, without building the mechanism again for each
// use. Immutable and thread-safe once compiled; movable, not copyable.
class CompiledSpec {
 public:
  // Checks w by ValidateWireSpec's rules, with the same errors
  // (INVALID_ARGUMENT naming the field), and builds its mechanism: the
  // feature mechanism of a feature kind, the label or edge randomized
  // response, and for neighbour substitution the edge randomized response
  // of eps_e and n with the feature question compiled in turn, for Blink
  // its client (eps, delta, n).
  static absl::StatusOr<CompiledSpec> Compile(const v1::MechanismSpec& w);

  CompiledSpec(CompiledSpec&&) = default;
  CompiledSpec& operator=(CompiledSpec&&) = default;

  const v1::MechanismSpec& wire() const { return wire_; }
  v1::MechanismKind kind() const { return wire_.kind(); }
  // WireParameterString(wire()), computed at Compile.
  const std::string& parameter_string() const { return parameters_; }
  // WireQueryKey(attribute, wire()), without building anything.
  QueryKey Key(v1::Attribute attribute) const;
  // CampaignQuestions(attribute, wire()), without building anything: for
  // neighbour substitution its features question first, then Key(attribute).
  std::vector<QueryKey> Questions(v1::Attribute attribute) const;

  // The built mechanism: feature() for the six feature kinds, label() for
  // label RR, edges() for edge RR and neighbour substitution (eps_e, n);
  // blink() for Blink; nullptr for the other kinds.
  const FeatureMechanism* feature() const { return feature_.get(); }
  const LabelRandomizedResponse* label() const { return label_.get(); }
  const EdgeRandomizedResponse* edges() const { return edges_.get(); }
  const BlinkClient* blink() const { return blink_.get(); }
  // Neighbour substitution: spec.substitution.features, compiled (the
  // feature question its agents answer); nullptr for the other kinds.
  const CompiledSpec* substitution_features() const {
    return substitution_features_.get();
  }

 private:
  CompiledSpec() = default;

  v1::MechanismSpec wire_;
  std::string parameters_;
  std::unique_ptr<FeatureMechanism> feature_;
  std::unique_ptr<LabelRandomizedResponse> label_;
  std::unique_ptr<EdgeRandomizedResponse> edges_;
  std::unique_ptr<BlinkClient> blink_;
  std::unique_ptr<CompiledSpec> substitution_features_;
};

// A canonical string of a wire spec, epsilon excluded, for budget keys and
// for comparing a report's spec with its campaign's. For neighbour
// substitution it holds every substitution parameter and the feature
// question (mechanism, parameters, epsilon), so two specs that differ in
// any of them are different questions. For Blink it holds n and delta.
std::string WireParameterString(const v1::MechanismSpec& w);

// The budget key of answering a campaign with this spec about attribute.
// Mechanism names: kMechanismKindNames' (common/wire/names.h): the feature
// mechanisms' (hds, multibit, ...), label-rr, edge-rr, edge-substitution,
// edge-blink; edge-rr for a kind the table does not list. An unknown
// attribute is named "unknown". A substitution campaign asks two questions:
// WireQueryKey(ATTRIBUTE_EDGES, spec), charged eps_e, and the features
// question WireQueryKey(ATTRIBUTE_FEATURES, spec.substitution().features()),
// the same key as a features campaign with that spec (SubstitutionQuestions).
QueryKey WireQueryKey(v1::Attribute attribute, const v1::MechanismSpec& w);

// Every question a campaign of this spec asks a node that reports, in the
// order an agent answers them: the features question first for neighbour
// substitution (its privatized features, shared with its neighbours), then
// the campaign's own. One entry for every other kind. attribute is the
// campaign's.
std::vector<QueryKey> CampaignQuestions(v1::Attribute attribute,
                                        const v1::MechanismSpec& w);

// Encodes a feature report: indices (omitted when dense), and values or
// packed bits as the mechanism's report carries. The spec is left unset;
// callers that want it on the wire set it.
v1::FeatureReport EncodeFeatureReport(const SparseReport& report);

// Decodes and validates a feature report against the mechanism that must
// have produced it. A spec inside the report, if set, must equal the
// mechanism's (compared with WireParameterString and epsilon).
absl::StatusOr<SparseReport> DecodeFeatureReport(const v1::FeatureReport& w,
                                                 const FeatureMechanism& mech);

// Validates a label report against a label RR of the campaign's classes.
absl::Status ValidateLabelReport(const v1::LabelReport& w,
                                 const v1::MechanismSpec& campaign_spec);

// Validates an edge report (randomized response, neighbour substitution or
// Blink): neighbours strictly ascending, each < n and never the reporting
// node; a spec inside the report, if set, must equal the campaign's (kind,
// epsilon, WireParameterString). noisy_degree: for Blink finite and on the
// mechanism's grid (a multiple of BlinkClient::degree_granularity), for
// every other kind zero. INVALID_ARGUMENT naming the field.
// campaign_spec must be valid (ValidateWireSpec).
absl::Status ValidateEdgeReport(const v1::EdgeReport& w,
                                const v1::MechanismSpec& campaign_spec,
                                uint32_t node_id);

}  // namespace ldpgraph::wire
