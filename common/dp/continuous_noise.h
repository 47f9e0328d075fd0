// Continuous noise for the curator's central-DP releases (server/embedding):
// Gaussian noise for DP-SGD (SE-PrivGEmb) and the Gamma-norm, uniform-
// direction vectors of objective perturbation (DPNE).
//
// Every draw takes a RandomSource: a deployment passes SecureRandom
// (OpenSSL), tests and research runs may pass SeededRandomForTesting, which
// is reproducible and not private. These are double-precision samplers: the
// values feed an optimiser whose iterates are released, not a single noisy
// statistic, so the floating-point attack on a released x + noise (Mironov,
// CCS'12) does not apply in its direct form; the README of server/embedding
// says what this leaves open.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/random/random.h"

namespace ldpgraph::dp {

// One standard normal draw (Marsaglia's polar method on 53-bit uniforms).
double StandardNormal(RandomSource& rng);

// Adds an independent N(0, sigma^2) draw to every entry of out (out[i] +=
// noise; it does not overwrite). sigma >= 0 and finite (the caller's
// contract; sigma == 0 leaves out unchanged and draws nothing).
void AddGaussian(double sigma, RandomSource& rng, absl::Span<float> out);

// Gamma(shape, scale) for shape >= 1 (Marsaglia and Tsang, 2000) and any
// scale > 0. INVALID_ARGUMENT otherwise.
absl::StatusOr<double> SampleGamma(double shape, double scale,
                                   RandomSource& rng);

// A vector of length dim uniform on the unit sphere (normalised Gaussian).
// dim >= 1.
std::vector<double> UniformDirection(int dim, RandomSource& rng);

// The noise vector of objective perturbation: density proportional to
// exp(-beta * ||eta||) on R^dim, drawn as a norm from Gamma(dim, 1 / beta)
// and a uniform direction (Chaudhuri, Monteleoni and Sarwate, JMLR 2011,
// Algorithm 2). INVALID_ARGUMENT unless dim >= 1 and beta > 0, finite.
absl::StatusOr<std::vector<double>> ObjectivePerturbationNoise(
    int dim, double beta, RandomSource& rng);

}  // namespace ldpgraph::dp
