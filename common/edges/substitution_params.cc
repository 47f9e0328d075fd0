// The substitution's parameters (SubstitutionParams, Similarity) and their
// wire form (FromWire, ToWire, DefaultSubstitutionSpec).
#include "common/edges/substitution.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ldpgraph::edges {

absl::StatusOr<Similarity> ParseSimilarity(absl::string_view name) {
  if (name == "cosine") return Similarity::kCosine;
  if (name == "l2") return Similarity::kL2;
  return absl::InvalidArgumentError(
      absl::StrCat("similarity must be cosine or l2, got '", name, "'"));
}

absl::string_view SimilarityName(Similarity s) {
  return s == Similarity::kCosine ? "cosine" : "l2";
}

absl::Status SubstitutionParams::Validate() const {
  if (approach != Approach::kCandidateRelay &&
      approach != Approach::kSimilarityQuery) {
    return absl::InvalidArgumentError("approach must be 1 or 2");
  }
  if (!std::isfinite(epsilon) || epsilon <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "edge epsilon must be finite and > 0, got ", epsilon));
  }
  if (top_k < 1 || top_k > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_k must be in [1, 1000], got ", top_k));
  }
  if (max_dummies < 0 || max_dummies > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_dummies must be in [0, 1000], got ", max_dummies));
  }
  if (!std::isfinite(dummy_mean)) {
    return absl::InvalidArgumentError("dummy_mean must be finite");
  }
  if (!std::isfinite(dummy_std) || dummy_std < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("dummy_std must be finite and >= 0, got ", dummy_std));
  }
  return absl::OkStatus();
}

int SubstitutionParams::rounds() const {
  return approach == Approach::kCandidateRelay ? 4 : 5;
}

double SubstitutionParams::drop_probability() const {
  return 1.0 / (1.0 + std::exp(epsilon));
}

absl::StatusOr<SubstitutionParams> FromWire(const v1::MechanismSpec& spec) {
  if (spec.kind() != v1::MECHANISM_KIND_EDGE_SUBSTITUTION) {
    return absl::InvalidArgumentError(
        "spec.kind must be MECHANISM_KIND_EDGE_SUBSTITUTION");
  }
  const v1::SubstitutionSpec& w = spec.substitution();
  SubstitutionParams p;
  if (w.approach() != 1 && w.approach() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "substitution.approach must be 1 or 2, got ", w.approach()));
  }
  p.approach = static_cast<Approach>(w.approach());
  ASSIGN_OR_RETURN(p.similarity, ParseSimilarity(w.similarity()));
  p.epsilon = spec.epsilon();
  p.top_k = static_cast<int>(std::min<uint32_t>(w.top_k(), 1u << 30));
  p.max_dummies = static_cast<int>(std::min<uint32_t>(w.max_dummies(), 1u << 30));
  p.dummy_mean = w.dummy_mean();
  p.dummy_std = w.dummy_std();
  if (absl::Status s = p.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("substitution spec: ", s.message()));
  }
  return p;
}

void ToWire(const SubstitutionParams& p, v1::MechanismSpec* spec) {
  spec->set_kind(v1::MECHANISM_KIND_EDGE_SUBSTITUTION);
  spec->set_epsilon(p.epsilon);
  v1::SubstitutionSpec* w = spec->mutable_substitution();
  w->set_approach(static_cast<uint32_t>(p.approach));
  w->set_similarity(std::string(SimilarityName(p.similarity)));
  w->set_top_k(static_cast<uint32_t>(p.top_k));
  w->set_max_dummies(static_cast<uint32_t>(p.max_dummies));
  w->set_dummy_mean(p.dummy_mean);
  w->set_dummy_std(p.dummy_std);
}

v1::SubstitutionSpec DefaultSubstitutionSpec() {
  v1::MechanismSpec spec;
  ToWire(SubstitutionParams(), &spec);
  v1::SubstitutionSpec s = spec.substitution();
  s.set_round_timeout_ms(kDefaultRoundTimeoutMs);
  return s;
}

}  // namespace ldpgraph::edges
