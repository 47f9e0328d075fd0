// k-ary randomized response on a class label (Warner 1965; the label
// mechanism of LPGNN's "Drop"). Formulas: mechanisms.md.
//
// With c classes and budget eps, keep the true label with probability
//   p = e^eps / (e^eps + c - 1)
// and otherwise report one of the other c - 1 labels uniformly, each with
//   q = 1 / (e^eps + c - 1).
// The curator knows the transition matrix T[i][j] = P(report j | true i)
// and may correct for it: UnbiasedOneHot(j) = (e_j - q 1) / (p - q) has
// expectation e_i given the true label i (T^-1 = (I - q 1 1^T) / (p - q)).
// The output is a label: no floating-point channel.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/random/random.h"

namespace ldpgraph {

class LabelRandomizedResponse {
 public:
  // epsilon finite and > 0; classes c >= 2.
  static absl::StatusOr<std::unique_ptr<LabelRandomizedResponse>> Create(
      double epsilon, int classes);

  double epsilon() const { return epsilon_; }
  int classes() const { return classes_; }
  double keep_probability() const { return p_; }
  double other_probability() const { return q_; }

  // Perturbs a label in [0, c); INVALID_ARGUMENT otherwise.
  absl::StatusOr<int> Perturb(int label, RandomSource& rng) const;

  // INVALID_ARGUMENT unless the reported label is in [0, c).
  absl::Status ValidateReport(int reported) const;

  // c x c, row-major: T[i * c + j] = P(report j | true i). Rows sum to 1.
  std::vector<double> TransitionMatrix() const;

  // The unbiased estimate of the true label's one-hot vector from a reported
  // label (length c). Validates the report.
  absl::StatusOr<std::vector<double>> UnbiasedOneHot(int reported) const;

 private:
  LabelRandomizedResponse(double epsilon, int classes);

  double epsilon_;
  int classes_;
  double p_;
  double q_;
};

}  // namespace ldpgraph
