// Rényi differential privacy (RDP) accounting for the curator's central-DP
// releases (SE-PrivGEmb, DPNE; server/embedding).
//
// A mechanism is (alpha, r)-RDP if the Rényi divergence of order alpha
// between its output distributions on any two neighbouring inputs is at
// most r (Mironov, CSF'17). RDP composes by addition at every order, so an
// accountant keeps one curve r(alpha) over a fixed grid of orders, adds the
// curve of every step, and converts to (epsilon, delta)-DP only when asked.
//
// Curves provided:
//  - the Gaussian mechanism, noise multiplier sigma (noise standard
//    deviation / L2 sensitivity): r(alpha) = alpha / (2 sigma^2);
//  - the Gaussian mechanism on a sample drawn WITHOUT replacement (a fixed
//    batch of m of N examples, gamma = m / N; Wang, Balle and
//    Kasiviswanathan, AISTATS'19, Theorem 9), the sampling SE-PrivGEmb
//    ("Structure-Preference Enabled Graph Embedding Generation under
//    Differential Privacy") uses. Neighbouring datasets there differ by
//    REPLACING one example, so the base Gaussian's sensitivity is that of
//    a replacement
//    (2C for per-example gradients clipped to C; the caller passes sigma
//    relative to that sensitivity). Integer orders >= 2 only; other orders
//    of the grid get +infinity (never chosen by a conversion);
//  - the Poisson-subsampled Gaussian (each example kept independently with
//    probability q; Mironov, Talwar and Zhang 2019), add/remove neighbours,
//    the accountant of Abadi et al. as TensorFlow Privacy and Opacus compute
//    it: for checking against their published figures and for callers that
//    sample that way;
//  - pure epsilon-DP (DPNE's objective perturbation): r(alpha) =
//    min(epsilon, alpha * epsilon^2 / 2) (Bun and Steinke, TCC'16, Prop. 3.3
//    via zCDP).
//
// Conversion to (epsilon, delta), minimised over the grid:
//  - kClassic (Mironov, Prop. 3): eps = r(a) + log(1/delta) / (a - 1);
//  - kImproved (Balle et al., AISTATS'20, Theorem 21; what Opacus and TF
//    Privacy use today): eps = r(a) + log((a - 1) / a)
//    - (log(delta) + log(a)) / (a - 1), clamped below at 0.
//
// All functions are pure and thread-compatible; RdpAccountant is a value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ldpgraph::dp {

// The default grid of orders: 1.1, 1.2, ..., 10.9 (step 0.1), then every
// integer 11..256, then 512 and 1024. Ascending, all > 1. Covers the
// optimum of every release ldpgraph makes (noise multipliers 0.5..50,
// 1..1e6 steps); the conversion reports the order it chose so a caller can
// see when the optimum sits at an end of the grid.
std::vector<double> DefaultOrders();

// alpha / (2 sigma^2). INVALID_ARGUMENT unless sigma > 0 and alpha > 1.
absl::StatusOr<double> GaussianRdp(double noise_multiplier, double order);

// RDP at `order` of the Gaussian mechanism (noise multiplier sigma relative
// to the replace-one sensitivity) run on a uniformly random subset of size
// gamma * N drawn without replacement: WBK'19 Theorem 9 with
// eps(infinity) = infinity, computed in log space (no overflow for
// orders up to 1024 and sigma down to 0.5). +infinity for a non-integer
// order. INVALID_ARGUMENT unless 0 < gamma <= 1, sigma > 0, order > 1.
// gamma == 1 gives the plain Gaussian curve.
absl::StatusOr<double> SampledWithoutReplacementGaussianRdp(
    double gamma, double noise_multiplier, double order);

// RDP at `order` of the Poisson-subsampled Gaussian (sampling rate q, noise
// multiplier sigma relative to the add/remove sensitivity), exactly as
// TensorFlow Privacy's compute_rdp: the closed sum for integer orders, the
// two-series form for fractional ones. INVALID_ARGUMENT unless 0 <= q <= 1,
// sigma > 0 and order > 1. q == 0 gives 0; q == 1 the plain Gaussian.
absl::StatusOr<double> PoissonSubsampledGaussianRdp(double q,
                                                    double noise_multiplier,
                                                    double order);

// min(epsilon, order * epsilon^2 / 2). INVALID_ARGUMENT unless epsilon >= 0
// and finite, order > 1.
absl::StatusOr<double> PureDpRdp(double epsilon, double order);

enum class Conversion { kClassic, kImproved };

struct DpGuarantee {
  double epsilon = 0;
  double delta = 0;
  double order = 0;  // the order the minimum was found at
};

// The smallest epsilon over the grid (see the conversions above).
// INVALID_ARGUMENT if the spans differ in length or are empty, delta is not
// in (0, 1), an order is <= 1 or an rdp value is negative or NaN. An all
// +infinity curve gives epsilon = +infinity (not an error).
absl::StatusOr<DpGuarantee> RdpToDp(absl::Span<const double> orders,
                                    absl::Span<const double> rdp, double delta,
                                    Conversion conversion = Conversion::kImproved);

// The smallest delta at which the curve gives epsilon, over the grid, by the
// same conversion solved for delta (clamped to [0, 1]). INVALID_ARGUMENT as
// above, or if epsilon < 0.
absl::StatusOr<double> RdpToDelta(absl::Span<const double> orders,
                                  absl::Span<const double> rdp, double epsilon,
                                  Conversion conversion = Conversion::kImproved);

// An RDP curve over a fixed grid, built by composition. A value type: copy
// it to ask "what if" without changing the original.
class RdpAccountant {
 public:
  // The default grid.
  RdpAccountant();
  // INVALID_ARGUMENT unless orders is non-empty, ascending and all > 1.
  static absl::StatusOr<RdpAccountant> WithOrders(std::vector<double> orders);

  // Adds `steps` compositions of the without-replacement sampled Gaussian
  // (see SampledWithoutReplacementGaussianRdp). INVALID_ARGUMENT for bad
  // parameters or steps < 0; nothing is added on error.
  absl::Status ComposeSampledWithoutReplacementGaussian(double gamma,
                                                        double noise_multiplier,
                                                        int64_t steps);
  // Same for the Poisson-subsampled Gaussian.
  absl::Status ComposePoissonSubsampledGaussian(double q,
                                                double noise_multiplier,
                                                int64_t steps);
  // Adds one pure epsilon-DP mechanism.
  absl::Status ComposePureDp(double epsilon);
  // Adds another curve on the same grid (INVALID_ARGUMENT otherwise).
  absl::Status Compose(const RdpAccountant& other);

  absl::StatusOr<DpGuarantee> Guarantee(
      double delta, Conversion conversion = Conversion::kImproved) const;

  const std::vector<double>& orders() const { return orders_; }
  const std::vector<double>& rdp() const { return rdp_; }

  // JSON {"orders": [...], "rdp": [...]} ("inf" for +infinity), for the
  // curator's release ledger; FromJson is its inverse (INVALID_ARGUMENT
  // naming what is malformed).
  std::string ToJson() const;
  static absl::StatusOr<RdpAccountant> FromJson(const std::string& json);

 private:
  RdpAccountant(std::vector<double> orders, std::vector<double> rdp);
  std::vector<double> orders_;
  std::vector<double> rdp_;
};

// The largest number of steps s in [0, max_steps] such that s compositions
// of the without-replacement sampled Gaussian, added to `spent`, still give
// epsilon <= target_epsilon at target_delta. Binary search (the curve is
// monotone in s). 0 if even one step exceeds the target. INVALID_ARGUMENT
// for bad parameters.
absl::StatusOr<int64_t> MaxStepsWithinBudget(const RdpAccountant& spent,
                                             double gamma,
                                             double noise_multiplier,
                                             double target_epsilon,
                                             double target_delta,
                                             int64_t max_steps);

}  // namespace ldpgraph::dp
