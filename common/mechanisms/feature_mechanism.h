// The interface every feature mechanism implements, the sparse report it
// emits, and the factory that builds one from its public parameters.
//
// Flow: an agent builds a mechanism from a MechanismSpec (validated once, at
// construction), calls Perturb on its private vector, and sends the
// SparseReport. The curator builds the same mechanism from the same spec,
// checks the report with ValidateReport and turns it into a dense estimate
// with Estimate. Formulas: ../shared/docs/mechanisms.md, cited per class.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/dp/accounting.h"
#include "common/names.h"
#include "common/random/random.h"

namespace ldpgraph {

enum class MechanismKind {
  kSquareWave,  // 1-D square wave on [-1, 1] (PrivGE Algorithm 1)
  kHds,         // high-dimensional square wave (PrivGE Algorithm 2)
  kMultiBit,    // Multi-bit encoder + rectifier (LPGNN)
  kOneBit,      // one-bit / PGC (Sajadmanesh & Gatica-Perez, after Duchi)
  kPiecewise,   // Piecewise mechanism, sampled k of d (Wang et al. ICDE'19)
  kLaplace,     // Laplace, all d or sampled k of d
};

// The one table of the feature mechanisms' names: "square-wave", "hds",
// "multibit", "onebit", "piecewise", "laplace", in this order. The wire's
// table of every mechanism kind (common/wire/names.h) takes the feature
// kinds' names from here.
inline constexpr auto kFeatureMechanismNames = MakeNameTable<MechanismKind>(
    "mechanism", {{MechanismKind::kSquareWave, "square-wave"},
                  {MechanismKind::kHds, "hds"},
                  {MechanismKind::kMultiBit, "multibit"},
                  {MechanismKind::kOneBit, "onebit"},
                  {MechanismKind::kPiecewise, "piecewise"},
                  {MechanismKind::kLaplace, "laplace"}});

// kFeatureMechanismNames.Name(kind): "hds", ...; "unknown" for a number no
// kind has.
absl::string_view MechanismName(MechanismKind kind);
// Inverse of MechanismName; INVALID_ARGUMENT "unknown mechanism '<name>';
// choose one of: <kFeatureMechanismNames.Choices()>".
absl::StatusOr<MechanismKind> ParseMechanismName(absl::string_view name);

// Public parameters of a feature mechanism. Configuration, never derived from
// private data.
struct MechanismSpec {
  MechanismKind kind = MechanismKind::kHds;
  // Budget one report spends (pure epsilon-LDP), finite and > 0.
  double epsilon = 1.0;
  // Input dimension d >= 1. The square wave requires d = 1.
  int dimension = 1;
  // Sampled dimensions: k (HDS, Piecewise, Laplace) or m (Multi-bit), in
  // 1..d. Unset means the mechanism's default: HDS 1, Piecewise 1,
  // Laplace d, Multi-bit max(1, min(d, floor(eps / 2.18))) (LPGNN). One-bit
  // and square wave report every dimension and reject any other value.
  std::optional<int> sampled;
  // Public range [alpha, beta] of every feature, alpha < beta, both finite.
  double alpha = -1.0;
  double beta = 1.0;
};

// A perturbed feature vector as it goes on the wire.
struct SparseReport {
  // d, the input dimension.
  uint32_t dimension = 0;
  // Reported dimensions, strictly ascending. Empty when dense.
  std::vector<uint32_t> indices;
  // True when every dimension 0..d-1 is reported, in order.
  bool dense = false;
  // Continuous mechanisms: one value per reported dimension.
  std::vector<double> values;
  // Bit mechanisms: one bit per reported dimension (Multi-bit: true = +1;
  // one-bit: y).
  std::vector<bool> bits;

  // Number of reported dimensions.
  size_t size() const { return dense ? dimension : indices.size(); }
  // The dimension of the i-th reported entry.
  uint32_t index(size_t i) const {
    return dense ? static_cast<uint32_t>(i) : indices[i];
  }
  // Bytes this report needs on the wire in its compact form: 4 per index,
  // 8 per value, one bit per bit (rounded up to bytes).
  size_t CompactBytes() const;
};

// A local randomizer for a node's feature vector. Immutable after
// construction and thread-safe; the randomness is supplied per call.
class FeatureMechanism {
 public:
  virtual ~FeatureMechanism() = default;

  const MechanismSpec& spec() const { return spec_; }
  MechanismKind kind() const { return spec_.kind; }
  // The epsilon one call of Perturb spends.
  double epsilon() const { return spec_.epsilon; }
  int dimension() const { return spec_.dimension; }
  // The resolved number of reported dimensions (k or m; d when dense).
  int sampled() const { return *spec_.sampled; }

  // Perturbs x (length d). Values outside [alpha, beta] are clipped to the
  // range first (infinities too); INVALID_ARGUMENT for a wrong length or a
  // NaN, naming the offending position.
  absl::StatusOr<SparseReport> Perturb(absl::Span<const double> x,
                                       RandomSource& rng) const;

  // Checks a report against this mechanism: dimension, number and range of
  // indices, order, encoding and value domain. INVALID_ARGUMENT saying what
  // is wrong and where.
  absl::Status ValidateReport(const SparseReport& report) const;

  // The curator-side estimate of the input, dense, written to out (length
  // d). Validates the report first. Each subclass documents its estimator.
  absl::Status Estimate(const SparseReport& report,
                        absl::Span<double> out) const;

  // The shape of this mechanism's reports: dense (every dimension, in
  // order, no indices) or sparse, and bits (one-bit, Multi-bit) or values.
  // Fixed at construction; ValidateReport enforces both.
  virtual bool dense_reports() const { return false; }
  virtual bool bit_reports() const { return false; }

  // x clipped to the public range [alpha, beta] (infinities included), as
  // Perturb clips every value it uses.
  double Clip(double x) const {
    return x < spec_.alpha ? spec_.alpha : (x > spec_.beta ? spec_.beta : x);
  }

  // A canonical string of the parameters other than epsilon
  // ("d=1433,sampled=10,alpha=-1,beta=1"), used in memo keys.
  std::string ParameterString() const;

  // Moments of the estimate of one dimension whose true value is x (in
  // [alpha, beta]), over the mechanism's randomness and its sampling of
  // dimensions: the formulas of mechanisms.md, used by moment tests and for
  // error bars. For HDS and the square wave (no unbiasing, by design) these
  // are moments of the raw output in canonical coordinates.
  // The largest |value| Estimate can write in any dimension, reported or
  // not: a public constant of the spec. UPGNET's node feature
  // regularisation thresholds at a fraction of it (server/pipeline/nfr.h).
  // Infinity for an unbounded estimator (Laplace) and for the mechanisms
  // whose output the pipeline uses as it is (HDS, the square wave).
  virtual double EstimateBound() const { return INFINITY; }

  virtual double EstimateMean(double x) const = 0;
  virtual double EstimateVariance(double x) const = 0;

 protected:
  explicit FeatureMechanism(MechanismSpec spec) : spec_(std::move(spec)) {}

  // x has length d and no NaN; it is NOT clipped: implementations pass each
  // value they use through Clip (so a k-of-d mechanism touches only k).
  virtual SparseReport PerturbValid(absl::Span<const double> x,
                                    RandomSource& rng) const = 0;
  // The report passed the structural checks of ValidateReport (lengths,
  // finite values); check what else its values must satisfy. OK by default:
  // a mechanism whose every finite value is a possible report (Laplace, the
  // bit mechanisms) keeps it.
  virtual absl::Status ValidateValues(const SparseReport&) const {
    return absl::OkStatus();
  }
  // The report is valid; out is zero-filled, length d.
  virtual void EstimateValid(const SparseReport& report,
                             absl::Span<double> out) const = 0;

  // Maps x in [alpha, beta] to [-1, 1].
  double ToCanonical(double x) const {
    return 2.0 * (x - spec_.alpha) / (spec_.beta - spec_.alpha) - 1.0;
  }
  // Maps t in canonical coordinates back to the feature range.
  double FromCanonical(double t) const {
    return spec_.alpha + (t + 1.0) * 0.5 * (spec_.beta - spec_.alpha);
  }

 private:
  MechanismSpec spec_;
};

// Validates spec (epsilon finite and > 0; d >= 1; sampled in 1..d or
// mechanism-specific; alpha < beta, finite), resolves defaults, and builds
// the mechanism. INVALID_ARGUMENT with the parameter, its value and the rule.
absl::StatusOr<std::unique_ptr<FeatureMechanism>> CreateFeatureMechanism(
    MechanismSpec spec);

// The budget key of asking this mechanism about attribute ("features").
QueryKey MakeQueryKey(std::string attribute, const FeatureMechanism& m);

// OK if epsilon is finite and > 0; otherwise INVALID_ARGUMENT
// "epsilon must be finite and > 0, got <value>". Every mechanism's check.
absl::Status ValidateEpsilon(double epsilon);

// The Bernoulli parameter of the bit mechanisms (one-bit, Multi-bit), for
// u = (x - alpha)/(beta - alpha) in [0, 1] and e = e^eps:
//   1/(e+1) + u (e-1)/(e+1), written so that e = inf gives u.
inline double BitProbability(double u, double e) {
  if (!(e < INFINITY)) return u;
  return (1.0 + u * (e - 1.0)) / (e + 1.0);
}

// Shared validation, used by every Create: returns the spec with `sampled`
// resolved to default_sampled when unset.
absl::StatusOr<MechanismSpec> ValidateSpec(MechanismSpec spec,
                                           int default_sampled);

}  // namespace ldpgraph
