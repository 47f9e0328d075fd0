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
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/mechanisms/edge_rr.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/mechanisms/label_rr.h"
#include "ldpgraph/v1/agent.pb.h"
#include "ldpgraph/v1/mechanism.pb.h"

namespace ldpgraph::wire {

// The attribute name used by budgets and the ledger: "features", "label",
// "edges". INVALID_ARGUMENT for ATTRIBUTE_UNSPECIFIED or an unknown value.
absl::StatusOr<std::string> AttributeName(v1::Attribute attribute);

// The attribute a mechanism kind answers about (FEATURES for the six
// feature mechanisms, LABEL for label RR, EDGES for edge RR).
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
// classes >= 2; for edge RR dimension = nodes >= 2. INVALID_ARGUMENT naming
// the field.
absl::Status ValidateWireSpec(const v1::MechanismSpec& w);

// A canonical string of a wire spec, epsilon excluded, for budget keys and
// for comparing a report's spec with its campaign's.
std::string WireParameterString(const v1::MechanismSpec& w);

// The budget key of answering a campaign with this spec about attribute.
QueryKey WireQueryKey(v1::Attribute attribute, const v1::MechanismSpec& w);

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

// Validates an edge report: neighbours strictly ascending, each < n and
// never the reporting node.
absl::Status ValidateEdgeReport(const v1::EdgeReport& w,
                                const v1::MechanismSpec& campaign_spec,
                                uint32_t node_id);

}  // namespace ldpgraph::wire
