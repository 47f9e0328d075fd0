// Floating-point-safe samplers behind the continuous mechanisms.
//
// A mechanism that adds continuous noise with ordinary double arithmetic can
// leak its input through the gaps between doubles: the set of outputs that
// can occur differs from input to input (Mironov, "On significance of the
// least significant bits for differential privacy", CCS 2012). ldpgraph
// follows the approach of Google's differential-privacy library: every
// released value is an integer multiple of a power-of-two granularity g, and
// the integer is drawn by an exact discrete procedure from uniform words. The
// set of possible outputs then does not depend on the input, and the privacy
// loss is bounded by the discrete distributions below, not by floating-point
// accidents.
//
//  * WindowedGrid discretises the "two-level density" mechanisms (square wave,
//    Piecewise): points of the grid inside a window of fixed size get
//    probability e^eps * c, all others c. Because the window always holds the
//    same number of points, the discrete mechanism is exactly eps-LDP.
//  * SampleTwoSidedGeometric is the discrete Laplace used by the Laplace
//    mechanism on a grid of granularity g.
#pragma once

#include <cstdint>

#include "common/random/random.h"

namespace ldpgraph::internal {

// The largest power of two <= x, for finite x > 0.
double PowerOfTwoAtMost(double x);
// The smallest power of two >= x, for finite x > 0.
double PowerOfTwoAtLeast(double x);

// Outputs are the grid points i * g for integer i in [-half_points,
// half_points] (the range [-R, R]). A window of window_points consecutive grid
// points has probability density e^eps times that of every point outside it.
// Immutable; thread-compatible.
class WindowedGrid {
 public:
  // range_half_width R > 0 (outputs lie in [-R, R]); window_width in (0, 2R]
  // (the continuous mechanism's high-density interval); epsilon > 0.
  // Granularity: the largest power of two that puts at least 2^20 grid points
  // in the window, coarsened if needed so the range holds at most 2^50
  // points; the window always holds at least one point.
  WindowedGrid(double range_half_width, double window_width, double epsilon);

  // The grid index of the first window point for a window whose continuous
  // left end is window_left: rounded to the grid and clamped so that the
  // whole window lies in the range.
  int64_t WindowStart(double window_left) const;

  // One draw: grid index in [-half_points, half_points]. High-density window
  // [start, start + window_points).
  int64_t SampleIndex(int64_t start, RandomSource& rng) const;
  double Sample(int64_t start, RandomSource& rng) const {
    return static_cast<double>(SampleIndex(start, rng)) * granularity_;
  }

  double granularity() const { return granularity_; }
  int64_t half_points() const { return half_points_; }
  int64_t window_points() const { return window_points_; }
  // Probability that a draw falls in the window.
  double window_probability() const { return p_window_; }

 private:
  double granularity_;
  int64_t half_points_;
  int64_t window_points_;
  double p_window_;
};

// A draw from the geometric distribution on {1, 2, ...} with
// P(k) = (1 - e^-lambda) e^{-lambda (k - 1)}, lambda > 0. Google's
// differential-privacy library draws it by a binary search over the support
// (about 30 steps of transcendental functions for ldpgraph's grids); ldpgraph
// draws the same distribution exactly, without truncation, by a block
// decomposition (whole blocks by Bernoulli trials, the offset in the block by
// rejection), in about three Bernoulli trials and two exp() calls on average.
// Values beyond 2^62 are capped.
int64_t SampleGeometric(double lambda, RandomSource& rng);

// A draw from the two-sided geometric (discrete Laplace) distribution on the
// integers, P(z) proportional to e^{-lambda |z|}.
int64_t SampleTwoSidedGeometric(double lambda, RandomSource& rng);

}  // namespace ldpgraph::internal
