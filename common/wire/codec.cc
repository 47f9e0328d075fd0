#include "common/wire/codec.h"

#include <cmath>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/wire/names.h"

namespace ldpgraph::wire {
namespace {

bool IsBitMechanism(MechanismKind k) {
  return k == MechanismKind::kMultiBit || k == MechanismKind::kOneBit;
}

bool IsFeatureKind(v1::MechanismKind k) {
  return FromWireFeatureKind(k).ok();
}

// Bounds on the public parameters of neighbour substitution: generous, but
// they keep one node's messages and work bounded.
constexpr uint32_t kMaxTopK = 1000;
constexpr uint32_t kMaxDummies = 1000;
constexpr uint32_t kMaxRoundTimeoutMs = 24 * 3600 * 1000;

// The substitution fields of w checked, and its feature question compiled.
absl::StatusOr<std::unique_ptr<CompiledSpec>> CompileSubstitutionFeatures(
    const v1::MechanismSpec& w) {
  if (!w.has_substitution()) {
    return absl::InvalidArgumentError(
        "spec.substitution is required for MECHANISM_KIND_EDGE_SUBSTITUTION");
  }
  const v1::SubstitutionSpec& s = w.substitution();
  if (s.approach() != 1 && s.approach() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.substitution.approach must be 1 or 2, got ", s.approach()));
  }
  if (s.similarity() != "cosine" && s.similarity() != "l2") {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.substitution.similarity must be cosine or l2, got '",
        s.similarity(), "'"));
  }
  if (s.top_k() < 1 || s.top_k() > kMaxTopK) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.substitution.top_k must be in [1, ", kMaxTopK, "], got ",
        s.top_k()));
  }
  if (s.max_dummies() > kMaxDummies) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.substitution.max_dummies must be at most ", kMaxDummies,
        ", got ", s.max_dummies()));
  }
  if (!std::isfinite(s.dummy_mean())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.substitution.dummy_mean must be finite, got ", s.dummy_mean()));
  }
  if (!std::isfinite(s.dummy_std()) || s.dummy_std() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.substitution.dummy_std must be finite and >= 0, got ",
        s.dummy_std()));
  }
  if (s.round_timeout_ms() < 1 || s.round_timeout_ms() > kMaxRoundTimeoutMs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.substitution.round_timeout_ms must be in [1, ",
        kMaxRoundTimeoutMs, "], got ", s.round_timeout_ms()));
  }
  // The vectors the agents exchange are a feature mechanism's reports:
  // raw features never leave an agent, so the mechanism must be a real one
  // with a finite epsilon.
  if (!s.has_features()) {
    return absl::InvalidArgumentError(
        "spec.substitution.features (the feature mechanism whose reports the "
        "agents exchange) is required");
  }
  const v1::MechanismSpec& f = s.features();
  if (!IsFeatureKind(f.kind())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.substitution.features.kind must be a feature mechanism, got ",
        v1::MechanismKind_Name(f.kind())));
  }
  if (f.has_substitution()) {
    return absl::InvalidArgumentError(
        "spec.substitution.features must not carry a substitution spec");
  }
  if (!std::isfinite(f.epsilon()) || !(f.epsilon() > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.substitution.features.epsilon must be finite and > 0 (raw "
        "features never leave an agent), got ", f.epsilon()));
  }
  absl::StatusOr<CompiledSpec> features = CompiledSpec::Compile(f);
  if (!features.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.substitution.features: ", features.status().message()));
  }
  return std::make_unique<CompiledSpec>(*std::move(features));
}

// The mechanism name of a budget key: the kind's name, and edge-rr for a
// kind the table does not list (never a valid campaign's).
std::string KeyMechanism(v1::MechanismKind kind) {
  if (!kMechanismKindNames.Contains(kind)) {
    return std::string(kMechanismKindNames.Name(v1::MECHANISM_KIND_EDGE_RR));
  }
  return std::string(kMechanismKindNames.Name(kind));
}

// WireParameterString of a spec that is not a feature mechanism's; for
// neighbour substitution, features is the key of its feature question.
std::string OtherParameterString(const v1::MechanismSpec& w,
                                 const QueryKey* features) {
  if (w.kind() == v1::MECHANISM_KIND_LABEL_RR) {
    return absl::StrCat("classes=", w.dimension());
  }
  if (w.kind() == v1::MECHANISM_KIND_EDGE_SUBSTITUTION) {
    // Every public parameter, and the feature question in full (its kind,
    // epsilon and parameters): a change to any is another question.
    const v1::SubstitutionSpec& s = w.substitution();
    return absl::StrFormat(
        "n=%u,approach=%u,similarity=%s,top_k=%u,max_dummies=%u,"
        "dummy_mean=%.17g,dummy_std=%.17g,round_timeout_ms=%u,"
        "features=[%s,%s,epsilon=%.17g]",
        w.dimension(), s.approach(), absl::CEscape(s.similarity()), s.top_k(),
        s.max_dummies(), s.dummy_mean(), s.dummy_std(), s.round_timeout_ms(),
        features->mechanism, features->parameters, s.features().epsilon());
  }
  if (w.kind() == v1::MECHANISM_KIND_EDGE_BLINK) {
    return absl::StrFormat("n=%u,delta=%.17g", w.dimension(),
                           w.blink().degree_share());
  }
  return absl::StrCat("n=", w.dimension());
}

// A Blink report's noisy degree: finite and a multiple of the campaign's
// grid (what BlinkClient::Report can release; anything else is forged).
absl::Status ValidateBlinkDegree(double degree,
                                 const v1::MechanismSpec& campaign_spec) {
  if (!std::isfinite(degree)) {
    return absl::InvalidArgumentError(
        absl::StrCat("noisy_degree must be finite, got ", degree));
  }
  // campaign_spec is valid (the contract): its params need no check, and
  // the grid is computed without building a client per report.
  const double g =
      BlinkParams{.epsilon = campaign_spec.epsilon(),
                         .delta = campaign_spec.blink().degree_share()}
          .degree_granularity();
  // g is a power of two: degree / g is exact, and an integer on the grid.
  const double steps = degree / g;
  if (steps != std::floor(steps)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "noisy_degree %.17g is off the mechanism's grid (multiples of %g)",
        degree, g));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> AttributeName(v1::Attribute attribute) {
  if (!kAttributeNames.Contains(attribute)) {
    return absl::InvalidArgumentError(
        absl::StrCat("attribute must be ", kAttributeNames.ChoicesOr(),
                     ", got ", static_cast<int>(attribute)));
  }
  return std::string(kAttributeNames.Name(attribute));
}

v1::Attribute AttributeOf(v1::MechanismKind kind) {
  if (kind == v1::MECHANISM_KIND_LABEL_RR) return v1::ATTRIBUTE_LABEL;
  if (kind == v1::MECHANISM_KIND_EDGE_RR ||
      kind == v1::MECHANISM_KIND_EDGE_SUBSTITUTION ||
      kind == v1::MECHANISM_KIND_EDGE_BLINK) {
    return v1::ATTRIBUTE_EDGES;
  }
  if (IsFeatureKind(kind)) return v1::ATTRIBUTE_FEATURES;
  return v1::ATTRIBUTE_UNSPECIFIED;
}

v1::MechanismKind ToWireKind(MechanismKind kind) {
  switch (kind) {
    case MechanismKind::kSquareWave:
      return v1::MECHANISM_KIND_SQUARE_WAVE;
    case MechanismKind::kHds:
      return v1::MECHANISM_KIND_HDS;
    case MechanismKind::kMultiBit:
      return v1::MECHANISM_KIND_MULTIBIT;
    case MechanismKind::kOneBit:
      return v1::MECHANISM_KIND_ONEBIT;
    case MechanismKind::kPiecewise:
      return v1::MECHANISM_KIND_PIECEWISE;
    case MechanismKind::kLaplace:
      return v1::MECHANISM_KIND_LAPLACE;
  }
  return v1::MECHANISM_KIND_UNSPECIFIED;
}

absl::StatusOr<MechanismKind> FromWireFeatureKind(v1::MechanismKind kind) {
  switch (kind) {
    case v1::MECHANISM_KIND_SQUARE_WAVE:
      return MechanismKind::kSquareWave;
    case v1::MECHANISM_KIND_HDS:
      return MechanismKind::kHds;
    case v1::MECHANISM_KIND_MULTIBIT:
      return MechanismKind::kMultiBit;
    case v1::MECHANISM_KIND_ONEBIT:
      return MechanismKind::kOneBit;
    case v1::MECHANISM_KIND_PIECEWISE:
      return MechanismKind::kPiecewise;
    case v1::MECHANISM_KIND_LAPLACE:
      return MechanismKind::kLaplace;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "mechanism kind ", v1::MechanismKind_Name(kind),
          " is not a feature mechanism"));
  }
}

v1::MechanismSpec ToWire(const MechanismSpec& spec) {
  v1::MechanismSpec w;
  w.set_kind(ToWireKind(spec.kind));
  w.set_epsilon(spec.epsilon);
  w.set_dimension(static_cast<uint32_t>(spec.dimension));
  w.set_sampled(spec.sampled ? static_cast<uint32_t>(*spec.sampled) : 0);
  w.set_range_low(spec.alpha);
  w.set_range_high(spec.beta);
  return w;
}

absl::StatusOr<MechanismSpec> FromWireFeatureSpec(const v1::MechanismSpec& w) {
  ASSIGN_OR_RETURN(MechanismKind kind, FromWireFeatureKind(w.kind()));
  if (w.dimension() > (1u << 24)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.dimension must be at most 16777216, got ", w.dimension()));
  }
  MechanismSpec s;
  s.kind = kind;
  s.epsilon = w.epsilon();
  s.dimension = static_cast<int>(w.dimension());
  if (w.sampled() != 0) s.sampled = static_cast<int>(w.sampled());
  s.alpha = w.range_low();
  s.beta = w.range_high();
  return s;
}

absl::StatusOr<CompiledSpec> CompiledSpec::Compile(const v1::MechanismSpec& w) {
  CompiledSpec c;
  if (IsFeatureKind(w.kind())) {
    ASSIGN_OR_RETURN(MechanismSpec s, FromWireFeatureSpec(w));
    ASSIGN_OR_RETURN(c.feature_, CreateFeatureMechanism(s));
    c.parameters_ = c.feature_->ParameterString();
  } else if (w.kind() == v1::MECHANISM_KIND_LABEL_RR) {
    ASSIGN_OR_RETURN(c.label_,
                     LabelRandomizedResponse::Create(
                         w.epsilon(), static_cast<int>(w.dimension())));
    c.parameters_ = OtherParameterString(w, nullptr);
  } else if (w.kind() == v1::MECHANISM_KIND_EDGE_RR) {
    ASSIGN_OR_RETURN(c.edges_, EdgeRandomizedResponse::Create(
                                   w.epsilon(), w.dimension()));
    c.parameters_ = OtherParameterString(w, nullptr);
  } else if (w.kind() == v1::MECHANISM_KIND_EDGE_SUBSTITUTION) {
    // eps_e and n as edge randomized response checks them (the drop
    // probability is 1/(1 + e^eps_e)), then the substitution's own fields.
    ASSIGN_OR_RETURN(c.edges_, EdgeRandomizedResponse::Create(
                                   w.epsilon(), w.dimension()));
    ASSIGN_OR_RETURN(c.substitution_features_, CompileSubstitutionFeatures(w));
    const QueryKey features =
        c.substitution_features_->Key(v1::ATTRIBUTE_FEATURES);
    c.parameters_ = OtherParameterString(w, &features);
  } else if (w.kind() == v1::MECHANISM_KIND_EDGE_BLINK) {
    if (!w.has_blink()) {
      return absl::InvalidArgumentError(
          "spec.blink (its degree_share) is required for "
          "MECHANISM_KIND_EDGE_BLINK");
    }
    const BlinkParams params{.epsilon = w.epsilon(),
                                    .delta = w.blink().degree_share()};
    absl::StatusOr<std::unique_ptr<BlinkClient>> blink =
        BlinkClient::Create(params, w.dimension());
    if (!blink.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "spec (Blink: epsilon, blink.degree_share as delta, dimension as "
          "n): ", blink.status().message()));
    }
    c.blink_ = *std::move(blink);
    c.parameters_ = OtherParameterString(w, nullptr);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.kind must name a mechanism, got ", static_cast<int>(w.kind())));
  }
  c.wire_ = w;
  return c;
}

QueryKey CompiledSpec::Key(v1::Attribute attribute) const {
  auto name = AttributeName(attribute);
  return QueryKey{name.ok() ? *name : "unknown", KeyMechanism(wire_.kind()),
                  parameters_, wire_.epsilon()};
}

std::vector<QueryKey> CompiledSpec::Questions(v1::Attribute attribute) const {
  std::vector<QueryKey> out;
  if (substitution_features_ != nullptr) {
    out.push_back(substitution_features_->Key(v1::ATTRIBUTE_FEATURES));
  }
  out.push_back(Key(attribute));
  return out;
}

absl::Status ValidateWireSpec(const v1::MechanismSpec& w) {
  return CompiledSpec::Compile(w).status();
}

std::string WireParameterString(const v1::MechanismSpec& w) {
  if (IsFeatureKind(w.kind())) {
    auto s = FromWireFeatureSpec(w);
    if (s.ok()) {
      auto m = CreateFeatureMechanism(*s);
      if (m.ok()) return (*m)->ParameterString();
    }
    // Invalid specs never reach a budget; still give a distinct string.
    return absl::StrFormat("d=%u,sampled=%u,alpha=%.17g,beta=%.17g",
                           w.dimension(), w.sampled(), w.range_low(),
                           w.range_high());
  }
  if (w.kind() == v1::MECHANISM_KIND_EDGE_SUBSTITUTION) {
    const QueryKey features =
        WireQueryKey(v1::ATTRIBUTE_FEATURES, w.substitution().features());
    return OtherParameterString(w, &features);
  }
  return OtherParameterString(w, nullptr);
}

QueryKey WireQueryKey(v1::Attribute attribute, const v1::MechanismSpec& w) {
  auto name = AttributeName(attribute);
  return QueryKey{name.ok() ? *name : "unknown", KeyMechanism(w.kind()),
                  WireParameterString(w), w.epsilon()};
}

std::vector<QueryKey> CampaignQuestions(v1::Attribute attribute,
                                        const v1::MechanismSpec& w) {
  std::vector<QueryKey> out;
  if (w.kind() == v1::MECHANISM_KIND_EDGE_SUBSTITUTION) {
    out.push_back(
        WireQueryKey(v1::ATTRIBUTE_FEATURES, w.substitution().features()));
  }
  out.push_back(WireQueryKey(attribute, w));
  return out;
}

v1::FeatureReport EncodeFeatureReport(const SparseReport& report) {
  v1::FeatureReport w;
  w.set_dense(report.dense);
  if (!report.dense) {
    w.mutable_indices()->Assign(report.indices.begin(), report.indices.end());
  }
  if (!report.values.empty()) {
    w.mutable_values()->Assign(report.values.begin(), report.values.end());
  }
  if (!report.bits.empty()) {
    std::string packed((report.bits.size() + 7) / 8, '\0');
    for (size_t i = 0; i < report.bits.size(); ++i) {
      if (report.bits[i]) packed[i / 8] |= static_cast<char>(1u << (i % 8));
    }
    w.set_bits(std::move(packed));
    w.set_bit_count(static_cast<uint32_t>(report.bits.size()));
  }
  return w;
}

absl::StatusOr<SparseReport> DecodeFeatureReport(const v1::FeatureReport& w,
                                                 const FeatureMechanism& mech) {
  if (w.has_spec()) {
    // The campaign's parameter string is its mechanism's own (what
    // WireParameterString of its spec builds again).
    const v1::MechanismKind expected_kind = ToWireKind(mech.kind());
    const std::string expected = mech.ParameterString();
    const std::string got = WireParameterString(w.spec());
    if (w.spec().kind() != expected_kind ||
        w.spec().epsilon() != mech.epsilon() || got != expected) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "report spec (%s, epsilon %g, %s) differs from the campaign's "
          "(%s, epsilon %g, %s)",
          v1::MechanismKind_Name(w.spec().kind()), w.spec().epsilon(), got,
          v1::MechanismKind_Name(expected_kind), mech.epsilon(), expected));
    }
  }
  SparseReport r;
  r.dimension = static_cast<uint32_t>(mech.dimension());
  r.dense = w.dense();
  if (w.dense() && w.indices_size() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a dense report carries no indices, got ", w.indices_size()));
  }
  r.indices.assign(w.indices().begin(), w.indices().end());
  const size_t count = r.size();
  if (IsBitMechanism(mech.kind())) {
    if (w.values_size() != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          MechanismName(mech.kind()), " reports bits, got ", w.values_size(),
          " values"));
    }
    if (w.bit_count() != count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bit_count ", w.bit_count(), " differs from the ", count,
          " reported dimensions"));
    }
    if (w.bits().size() != (count + 7) / 8) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bits holds ", w.bits().size(), " bytes, ", count, " bits need ",
          (count + 7) / 8));
    }
    r.bits.resize(count);
    const auto* bytes = reinterpret_cast<const uint8_t*>(w.bits().data());
    for (size_t i = 0; i < count; ++i) r.bits[i] = (bytes[i / 8] >> (i % 8)) & 1;
    if (count % 8 != 0 && (bytes[count / 8] >> (count % 8)) != 0) {
      return absl::InvalidArgumentError(
          "padding bits after bit_count must be zero");
    }
  } else {
    if (!w.bits().empty() || w.bit_count() != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          MechanismName(mech.kind()), " reports values, got bits"));
    }
    if (static_cast<size_t>(w.values_size()) != count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "values holds ", w.values_size(), " entries for ", count,
          " reported dimensions"));
    }
    r.values.assign(w.values().begin(), w.values().end());
  }
  RETURN_IF_ERROR(mech.ValidateReport(r));
  return r;
}

absl::Status ValidateLabelReport(const v1::LabelReport& w,
                                 const v1::MechanismSpec& campaign_spec) {
  if (w.has_spec() &&
      (w.spec().kind() != campaign_spec.kind() ||
       w.spec().epsilon() != campaign_spec.epsilon() ||
       w.spec().dimension() != campaign_spec.dimension())) {
    return absl::InvalidArgumentError(
        "label report spec differs from the campaign's");
  }
  if (w.label() >= campaign_spec.dimension()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "label ", w.label(), " out of range [0, ", campaign_spec.dimension(),
        ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateEdgeReport(const v1::EdgeReport& w,
                                const v1::MechanismSpec& campaign_spec,
                                uint32_t node_id) {
  if (w.has_spec() &&
      (w.spec().kind() != campaign_spec.kind() ||
       w.spec().epsilon() != campaign_spec.epsilon() ||
       w.spec().dimension() != campaign_spec.dimension() ||
       WireParameterString(w.spec()) != WireParameterString(campaign_spec))) {
    return absl::InvalidArgumentError(
        "edge report spec differs from the campaign's");
  }
  if (campaign_spec.kind() == v1::MECHANISM_KIND_EDGE_BLINK) {
    RETURN_IF_ERROR(ValidateBlinkDegree(w.noisy_degree(), campaign_spec));
  } else if (w.noisy_degree() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "noisy_degree is reported by Blink only, got ", w.noisy_degree(),
        " for ", v1::MechanismKind_Name(campaign_spec.kind())));
  }
  const uint32_t n = campaign_spec.dimension();
  for (int i = 0; i < w.neighbours_size(); ++i) {
    const uint32_t u = w.neighbours(i);
    if (u >= n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "neighbours[", i, "] = ", u, " out of range [0, ", n, ")"));
    }
    if (u == node_id) {
      return absl::InvalidArgumentError(absl::StrCat(
          "neighbours[", i, "] is the reporting node ", node_id));
    }
    if (i > 0 && u <= w.neighbours(i - 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "neighbours must be strictly ascending: neighbours[", i, "] = ", u,
          " after ", w.neighbours(i - 1)));
    }
  }
  return absl::OkStatus();
}

}  // namespace ldpgraph::wire
