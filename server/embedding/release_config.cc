#include "server/embedding/release_config.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace ldpgraph::embedding {
namespace {

bool PositiveFinite(double x) { return std::isfinite(x) && x > 0; }

}  // namespace

absl::Status ValidateSePrivGEmbConfig(const SePrivGEmbConfig& c) {
  if (c.dim < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("dim must be >= 1, got ", c.dim));
  }
  if (c.negatives < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("negatives must be >= 1, got ", c.negatives));
  }
  if (c.batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size must be >= 1, got ", c.batch_size));
  }
  if (!PositiveFinite(c.learning_rate)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "learning_rate must be finite and > 0, got ", c.learning_rate));
  }
  if (c.max_epochs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_epochs must be >= 1, got ", c.max_epochs));
  }
  if (c.max_steps && *c.max_steps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_steps must be >= 1, got ", *c.max_steps));
  }
  if (c.optimizer != Optimizer::kSgd && c.optimizer != Optimizer::kAdam) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer must be sgd or adam, got ", static_cast<int>(c.optimizer)));
  }
  if (!c.private_training) return absl::OkStatus();
  if (!PositiveFinite(c.clip)) {
    return absl::InvalidArgumentError(
        absl::StrCat("clip must be finite and > 0, got ", c.clip));
  }
  if (!PositiveFinite(c.noise_multiplier)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "noise_multiplier must be finite and > 0, got ", c.noise_multiplier));
  }
  if (!PositiveFinite(c.target_epsilon)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "target_epsilon must be finite and > 0, got ", c.target_epsilon));
  }
  if (!(c.target_delta > 0 && c.target_delta < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("target_delta must lie in (0, 1), got ", c.target_delta));
  }
  return absl::OkStatus();
}

absl::Status ValidateDpneConfig(const DpneConfig& c) {
  if (c.dim < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("dim must be >= 1, got ", c.dim));
  }
  if (!(c.lambda > 0) || !std::isfinite(c.lambda)) {
    return absl::InvalidArgumentError(
        absl::StrCat("lambda must be > 0 and finite, got ", c.lambda));
  }
  if (!(c.mu > 0) || !std::isfinite(c.mu)) {
    return absl::InvalidArgumentError(
        absl::StrCat("mu must be > 0 and finite, got ", c.mu));
  }
  if (c.sweeps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("sweeps must be >= 1, got ", c.sweeps));
  }
  if (c.private_release && (!(c.epsilon > 0) || !std::isfinite(c.epsilon))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "epsilon must be > 0 and finite for a private release, got ",
        c.epsilon));
  }
  if (!(c.sensitivity > 0) || !std::isfinite(c.sensitivity)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sensitivity must be > 0 and finite, got ", c.sensitivity));
  }
  return absl::OkStatus();
}

SePrivGEmbConfig SePrivGEmbConfigOf(const ReleaseConfig& c) {
  SePrivGEmbConfig s = c.se_privgemb;
  s.private_training = c.private_release;
  s.target_epsilon = c.epsilon;
  s.target_delta = c.delta;
  return s;
}

DpneConfig DpneConfigOf(const ReleaseConfig& c) {
  DpneConfig d = c.dpne;
  d.private_release = c.private_release;
  d.epsilon = c.epsilon;
  return d;
}

absl::Status ValidateReleaseConfig(const ReleaseConfig& c) {
  if (c.private_release) {
    if (!(c.epsilon > 0) || !std::isfinite(c.epsilon)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "release epsilon must be finite and > 0, got ", c.epsilon));
    }
    if (c.method == ReleaseMethod::kSePrivGemb &&
        !(c.delta > 0 && c.delta < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("release delta must be in (0, 1), got ", c.delta));
    }
  }
  if (c.method == ReleaseMethod::kSePrivGemb) {
    return ValidateSePrivGEmbConfig(SePrivGEmbConfigOf(c));
  }
  return ValidateDpneConfig(DpneConfigOf(c));
}

}  // namespace ldpgraph::embedding
