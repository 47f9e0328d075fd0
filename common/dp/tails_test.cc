// The Poisson tail against its closed forms (the binomial and hypergeometric
// tails are checked against brute force in report_screen_test).
#include "common/dp/tails.h"

#include <cmath>

#include <gtest/gtest.h>

namespace ldpgraph {
namespace {

TEST(PoissonTailTest, MatchesClosedForms) {
  // P(X > 0) = 1 - e^-lambda; P(X > 1) = 1 - e^-lambda (1 + lambda).
  EXPECT_NEAR(PoissonTailAbove(2.5, 0), 1 - std::exp(-2.5), 1e-12);
  EXPECT_NEAR(PoissonTailAbove(2.5, 1), 1 - std::exp(-2.5) * 3.5, 1e-12);
  // Far in the tail it is tiny but never negative.
  EXPECT_GE(PoissonTailAbove(1.0, 40), 0.0);
  EXPECT_LT(PoissonTailAbove(1.0, 40), 1e-12);
  // Monotone in t.
  EXPECT_GT(PoissonTailAbove(7.2, 10), PoissonTailAbove(7.2, 12));
}

}  // namespace
}  // namespace ldpgraph
