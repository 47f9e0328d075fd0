#include "common/mechanisms/label_rr.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/status_macros.h"

namespace ldpgraph {

absl::StatusOr<std::unique_ptr<LabelRandomizedResponse>>
LabelRandomizedResponse::Create(double epsilon, int classes) {
  RETURN_IF_ERROR(ValidateEpsilon(epsilon));
  if (classes < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("label randomized response needs >= 2 classes, got ",
                     classes));
  }
  return std::unique_ptr<LabelRandomizedResponse>(
      new LabelRandomizedResponse(epsilon, classes));
}

LabelRandomizedResponse::LabelRandomizedResponse(double epsilon, int classes)
    : epsilon_(epsilon), classes_(classes) {
  // Divide by e^eps so that large eps cannot overflow.
  const double inv = std::exp(-epsilon);
  p_ = 1.0 / (1.0 + (classes - 1) * inv);
  q_ = inv / (1.0 + (classes - 1) * inv);
}

absl::Status LabelRandomizedResponse::ValidateReport(int reported) const {
  if (reported < 0 || reported >= classes_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "label ", reported, " is out of range [0, ", classes_, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> LabelRandomizedResponse::Perturb(int label,
                                                     RandomSource& rng) const {
  RETURN_IF_ERROR(ValidateReport(label));
  if (rng.Bernoulli(p_)) return label;
  int other = static_cast<int>(rng.UniformInt(classes_ - 1));
  if (other >= label) ++other;
  return other;
}

std::vector<double> LabelRandomizedResponse::TransitionMatrix() const {
  std::vector<double> t(static_cast<size_t>(classes_) * classes_, q_);
  for (int i = 0; i < classes_; ++i) t[i * classes_ + i] = p_;
  return t;
}

absl::StatusOr<std::vector<double>> LabelRandomizedResponse::UnbiasedOneHot(
    int reported) const {
  RETURN_IF_ERROR(ValidateReport(reported));
  const double inv = 1.0 / (p_ - q_);
  std::vector<double> v(classes_, -q_ * inv);
  v[reported] = (1.0 - q_) * inv;
  return v;
}

}  // namespace ldpgraph
