#include "server/training/kernels.h"

#include <cmath>
#include <vector>

#include "common/random/random.h"
#include "gtest/gtest.h"

namespace ldpgraph::training::kernels {
namespace {

// Lengths around the 8-lane and 256-bit widths, so both the vector body and
// the scalar tail run, on whichever version the CPU picked.
constexpr size_t kLengths[] = {0, 1, 7, 8, 9, 31, 64, 1001};

std::vector<float> Draw(size_t n, PublicRandom& rng) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(2 * rng.UniformDouble() - 1);
  return v;
}

TEST(KernelsTest, HadamardRowStandardisesEachColumn) {
  PublicRandom rng(1);
  for (size_t d : kLengths) {
    auto a = Draw(d, rng), b = Draw(d, rng), m = Draw(d, rng), s = Draw(d, rng);
    std::vector<float> out(d, -7), plain(d, -7);
    HadamardRow(a.data(), b.data(), m.data(), s.data(), out.data(), d);
    HadamardRow(a.data(), b.data(), nullptr, nullptr, plain.data(), d);
    for (size_t k = 0; k < d; ++k) {
      EXPECT_FLOAT_EQ(plain[k], a[k] * b[k]);
      EXPECT_NEAR(out[k], (a[k] * b[k] - m[k]) * s[k], 1e-6) << d << " " << k;
    }
  }
}

TEST(KernelsTest, SumsMatchADoubleReference) {
  PublicRandom rng(2);
  for (size_t d : kLengths) {
    auto a = Draw(d, rng), b = Draw(d, rng), w = Draw(d, rng);
    double dot = 0;
    for (size_t k = 0; k < d; ++k) dot += double(w[k]) * a[k] * b[k];
    EXPECT_NEAR(TripleDot(a.data(), b.data(), w.data(), d), dot,
                1e-5 * (1 + d))
        << d;
    std::vector<double> sum(d, 1.0), squares(d, 2.0);
    AccumulateHadamard(a.data(), b.data(), sum.data(), squares.data(), d);
    std::vector<float> acc(d, 0.5f);
    AccumulateScaledProduct(a.data(), b.data(), -3.0f, acc.data(), d);
    for (size_t k = 0; k < d; ++k) {
      const double h = a[k] * b[k];
      EXPECT_NEAR(sum[k], 1.0 + h, 1e-7);
      EXPECT_NEAR(squares[k], 2.0 + h * h, 1e-7);
      EXPECT_NEAR(acc[k], 0.5 - 3.0 * h, 1e-6);
    }
  }
}

}  // namespace
}  // namespace ldpgraph::training::kernels
