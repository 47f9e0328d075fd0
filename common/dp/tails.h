// Exact tails of the binomial and hypergeometric distributions, for tests
// that must hold at a stated level: the curator's report screen
// (server/pipeline/report_screen.h) and the edge-consistency check, and the
// simulated attacker that knows them (common/attacks/poisoning.h: the
// Poisson tail bounds its crafted counts).
#pragma once

#include <cstdint>

namespace ldpgraph {

// The smallest t >= 0 with P(X > t) <= level for X ~ Binomial(n, p), p in
// [0, 1], level in (0, 1): the tail is summed exactly from the pmf in log
// space until its terms fall 40 nats below the level, and the terms left
// out are bounded geometrically, which can only raise t.
uint64_t BinomialUpperQuantile(uint64_t n, double p, double level);

// P(X > t) for X ~ Poisson(lambda), lambda > 0: one minus the pmf summed
// up to t, each term in log space.
double PoissonTailAbove(double lambda, uint64_t t);

// P(H >= h) for H ~ Hypergeometric(population d, successes m, draws k),
// m, k <= d.
double HypergeometricTailAtLeast(int d, int m, int k, int h);

}  // namespace ldpgraph
