// The MLP's two large products on pubmed's shape (9,858 x 500 times
// 500 x 64, and the transposed product back), timed for one way of building
// Eigen's matrix product: its own kernels for the target the compiler was
// given, or OpenBLAS behind it (EIGEN_USE_BLAS). Built three ways by
// tests/bench/gemm_variants.sh, which prints them side by side: the
// evidence behind ldpgraph's choice of OpenBLAS (docs/benchmarks.md,
// "Learning at scale"). Not part of the CMake build: the variants differ in
// compiler flags, which one program cannot mix.
#include <Eigen/Dense>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#ifdef EIGEN_USE_BLAS
extern "C" void openblas_set_num_threads(int);
#endif

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

int main(int argc, char** argv) {
  const char* name = argc > 1 ? argv[1] : "variant";
  const int reps = argc > 2 ? std::atoi(argv[2]) : 7;
#ifdef EIGEN_USE_BLAS
  openblas_set_num_threads(1);
#endif
  const Eigen::Index n = 9858, d = 500, h = 64;
  Mat x = Mat::Random(n, d), w = Mat::Random(d, h), y(n, h), dw(d, h);
  std::vector<double> seconds;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 10; ++i) {
      y.noalias() = x * w;
      dw.noalias() = x.transpose() * y;
    }
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count() / 10);
  }
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2];
  std::printf("%-28s %9.4f %8.1f   (checksum %.3g)\n", name, median,
              4.0 * n * d * h / median / 1e9, dw.sum());
  return 0;
}
