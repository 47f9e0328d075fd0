#include "common/linalg/blas.h"

#include <mutex>

// OpenBLAS's C entry points (declared here rather than through its cblas.h,
// whose folder depends on which OpenBLAS variant Debian installed).
extern "C" {
void openblas_set_num_threads(int num_threads);
char* openblas_get_corename(void);
}

namespace ldpgraph {

void UseSingleThreadedBlas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

std::string BlasCoreName() {
  const char* name = openblas_get_corename();
  return name == nullptr ? "unknown" : name;
}

}  // namespace ldpgraph
