#include "common/mechanisms/feature_mechanism.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/mechanisms/hds.h"
#include "common/mechanisms/laplace.h"
#include "common/mechanisms/multibit.h"
#include "common/mechanisms/onebit.h"
#include "common/mechanisms/piecewise.h"
#include "common/mechanisms/square_wave.h"
#include "common/status_macros.h"

namespace ldpgraph {

absl::string_view MechanismName(MechanismKind kind) {
  return kFeatureMechanismNames.Name(kind);
}

absl::StatusOr<MechanismKind> ParseMechanismName(absl::string_view name) {
  absl::StatusOr<MechanismKind> kind = kFeatureMechanismNames.Parse(name);
  if (kind.ok()) return kind;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mechanism '", name,
                   "'; choose one of: ", kFeatureMechanismNames.Choices()));
}

size_t SparseReport::CompactBytes() const {
  return (dense ? 0 : 4 * indices.size()) + 8 * values.size() +
         (bits.size() + 7) / 8;
}

absl::Status ValidateEpsilon(double epsilon) {
  if (!std::isfinite(epsilon) || !(epsilon > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon must be finite and > 0, got ", epsilon));
  }
  return absl::OkStatus();
}

absl::StatusOr<MechanismSpec> ValidateSpec(MechanismSpec spec,
                                           int default_sampled) {
  RETURN_IF_ERROR(ValidateEpsilon(spec.epsilon));
  if (spec.dimension < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dimension d must be >= 1, got ", spec.dimension));
  }
  if (!std::isfinite(spec.alpha) || !std::isfinite(spec.beta)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "feature range must be finite, got [", spec.alpha, ", ", spec.beta,
        "]"));
  }
  if (!(spec.alpha < spec.beta)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "feature range needs alpha < beta, got alpha = ", spec.alpha,
        ", beta = ", spec.beta));
  }
  if (!spec.sampled.has_value()) spec.sampled = default_sampled;
  if (*spec.sampled < 1 || *spec.sampled > spec.dimension) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampled dimensions (k or m) must be in 1..d = 1..",
                     spec.dimension, ", got ", *spec.sampled));
  }
  return spec;
}

absl::StatusOr<SparseReport> FeatureMechanism::Perturb(
    absl::Span<const double> x, RandomSource& rng) const {
  if (x.size() != static_cast<size_t>(spec_.dimension)) {
    return absl::InvalidArgumentError(
        absl::StrCat("input has ", x.size(), " values, expected d = ",
                     spec_.dimension));
  }
  // Every position is checked, sampled or not, so that whether an input is
  // accepted never depends on the randomness.
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("input[", i, "] is NaN"));
    }
  }
  return PerturbValid(x, rng);
}

absl::Status FeatureMechanism::ValidateReport(const SparseReport& r) const {
  const uint32_t d = static_cast<uint32_t>(spec_.dimension);
  if (r.dimension != d) {
    return absl::InvalidArgumentError(absl::StrCat(
        "report has dimension ", r.dimension, ", mechanism has d = ", d));
  }
  if (dense_reports()) {
    if (!r.dense || !r.indices.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          MechanismName(kind()), " reports every dimension: expected a dense "
          "report with no indices"));
    }
  } else {
    if (r.dense) {
      return absl::InvalidArgumentError(absl::StrCat(
          MechanismName(kind()), " reports are sparse, got a dense report"));
    }
    if (r.indices.size() != static_cast<size_t>(sampled())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "report has ", r.indices.size(), " indices, expected ", sampled()));
    }
    for (size_t i = 0; i < r.indices.size(); ++i) {
      if (r.indices[i] >= d) {
        return absl::InvalidArgumentError(absl::StrCat(
            "index ", r.indices[i], " at position ", i, " is out of range [0, ",
            d, ")"));
      }
      if (i > 0 && r.indices[i] <= r.indices[i - 1]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "indices must be strictly ascending: position ", i, " has ",
            r.indices[i], " after ", r.indices[i - 1]));
      }
    }
  }
  const size_t n = r.size();
  if (bit_reports()) {
    if (r.bits.size() != n || !r.values.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          MechanismName(kind()), " reports carry ", n, " bits and no values; got ",
          r.bits.size(), " bits and ", r.values.size(), " values"));
    }
  } else {
    if (r.values.size() != n || !r.bits.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          MechanismName(kind()), " reports carry ", n,
          " values and no bits; got ", r.values.size(), " values and ",
          r.bits.size(), " bits"));
    }
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite(r.values[i])) {
        return absl::InvalidArgumentError(
            absl::StrCat("value at position ", i, " is not finite"));
      }
    }
  }
  return ValidateValues(r);
}

absl::Status FeatureMechanism::Estimate(const SparseReport& report,
                                        absl::Span<double> out) const {
  if (out.size() != static_cast<size_t>(spec_.dimension)) {
    return absl::InvalidArgumentError(
        absl::StrCat("estimate buffer has ", out.size(), " entries, expected d = ",
                     spec_.dimension));
  }
  RETURN_IF_ERROR(ValidateReport(report));
  std::fill(out.begin(), out.end(), 0.0);
  EstimateValid(report, out);
  return absl::OkStatus();
}

std::string FeatureMechanism::ParameterString() const {
  return absl::StrFormat("d=%d,sampled=%d,alpha=%.17g,beta=%.17g",
                         spec_.dimension, *spec_.sampled, spec_.alpha,
                         spec_.beta);
}

QueryKey MakeQueryKey(std::string attribute, const FeatureMechanism& m) {
  return QueryKey{std::move(attribute), std::string(MechanismName(m.kind())),
                  m.ParameterString(), m.epsilon()};
}

absl::StatusOr<std::unique_ptr<FeatureMechanism>> CreateFeatureMechanism(
    MechanismSpec spec) {
  switch (spec.kind) {
    case MechanismKind::kSquareWave: {
      ASSIGN_OR_RETURN(auto m, SquareWaveMechanism::Create(spec));
      return std::unique_ptr<FeatureMechanism>(std::move(m));
    }
    case MechanismKind::kHds: {
      ASSIGN_OR_RETURN(auto m, HdsMechanism::Create(spec));
      return std::unique_ptr<FeatureMechanism>(std::move(m));
    }
    case MechanismKind::kMultiBit: {
      ASSIGN_OR_RETURN(auto m, MultiBitMechanism::Create(spec));
      return std::unique_ptr<FeatureMechanism>(std::move(m));
    }
    case MechanismKind::kOneBit: {
      ASSIGN_OR_RETURN(auto m, OneBitMechanism::Create(spec));
      return std::unique_ptr<FeatureMechanism>(std::move(m));
    }
    case MechanismKind::kPiecewise: {
      ASSIGN_OR_RETURN(auto m, PiecewiseMechanism::Create(spec));
      return std::unique_ptr<FeatureMechanism>(std::move(m));
    }
    case MechanismKind::kLaplace: {
      ASSIGN_OR_RETURN(auto m, LaplaceMechanism::Create(spec));
      return std::unique_ptr<FeatureMechanism>(std::move(m));
    }
  }
  return absl::InvalidArgumentError("unknown mechanism kind");
}

}  // namespace ldpgraph
