#include "common/dp/continuous_noise.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/random/random.h"
#include "common/status_macros.h"

namespace ldpgraph::dp {
namespace {

// Marsaglia's polar method: two independent standard normals from a point
// uniform in the unit disc (rejection from the square [-1, 1)^2).
std::pair<double, double> PolarPair(RandomSource& rng) {
  while (true) {
    const double u = 2 * rng.UniformDouble() - 1;
    const double v = 2 * rng.UniformDouble() - 1;
    const double s = u * u + v * v;
    if (s >= 1 || s == 0) continue;
    const double f = std::sqrt(-2 * std::log(s) / s);
    return {u * f, v * f};
  }
}

}  // namespace

double StandardNormal(RandomSource& rng) { return PolarPair(rng).first; }

void AddGaussian(double sigma, RandomSource& rng, absl::Span<float> out) {
  if (sigma == 0) return;
  size_t i = 0;
  for (; i + 1 < out.size(); i += 2) {
    const auto [a, b] = PolarPair(rng);
    out[i] = static_cast<float>(out[i] + sigma * a);
    out[i + 1] = static_cast<float>(out[i + 1] + sigma * b);
  }
  if (i < out.size()) {
    out[i] = static_cast<float>(out[i] + sigma * StandardNormal(rng));
  }
}

// Marsaglia and Tsang, "A simple method for generating gamma variables",
// ACM TOMS 26(3), 2000: for shape a >= 1, d = a - 1/3, c = 1 / sqrt(9 d);
// x ~ N(0, 1), v = (1 + c x)^3, accept d v when v > 0 and
// log(u) < x^2 / 2 + d - d v + d log(v) (with the cheap squeeze
// u < 1 - 0.0331 x^4 first).
absl::StatusOr<double> SampleGamma(double shape, double scale,
                                   RandomSource& rng) {
  if (!std::isfinite(shape) || !(shape >= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gamma shape must be finite and >= 1, got ", shape));
  }
  if (!std::isfinite(scale) || !(scale > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gamma scale must be finite and > 0, got ", scale));
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1 / std::sqrt(9 * d);
  while (true) {
    const double x = StandardNormal(rng);
    const double t = 1 + c * x;
    if (t <= 0) continue;
    const double v = t * t * t;
    const double u = rng.UniformDouble();
    const double x2 = x * x;
    if (u < 1 - 0.0331 * x2 * x2 ||
        std::log(u) < 0.5 * x2 + d * (1 - v + std::log(v))) {
      return d * v * scale;
    }
  }
}

std::vector<double> UniformDirection(int dim, RandomSource& rng) {
  if (dim < 1) return {};
  std::vector<double> x(dim);
  while (true) {
    double norm2 = 0;
    for (int i = 0; i < dim; ++i) {
      x[i] = StandardNormal(rng);
      norm2 += x[i] * x[i];
    }
    if (norm2 > 0) {
      const double norm = std::sqrt(norm2);
      for (double& v : x) v /= norm;
      return x;
    }
  }
}

absl::StatusOr<std::vector<double>> ObjectivePerturbationNoise(
    int dim, double beta, RandomSource& rng) {
  if (dim < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("noise dimension must be >= 1, got ", dim));
  }
  if (!std::isfinite(beta) || !(beta > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("beta must be finite and > 0, got ", beta));
  }
  // The norm of eta has density proportional to r^(dim-1) exp(-beta r):
  // Gamma(dim, 1 / beta).
  ASSIGN_OR_RETURN(const double norm, SampleGamma(dim, 1 / beta, rng));
  std::vector<double> eta = UniformDirection(dim, rng);
  for (double& v : eta) v *= norm;
  return eta;
}

}  // namespace ldpgraph::dp
