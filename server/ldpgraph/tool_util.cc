#include "server/ldpgraph/tool_util.h"

#include <sys/resource.h>

namespace ldpgraph::tool {

absl::StatusOr<std::unique_ptr<RandomSource>> MakeRandomSource(
    std::optional<uint64_t> seed, std::ostream& err) {
  if (seed) {
    err << kSeededWarning << "\n";
    return std::unique_ptr<RandomSource>(
        std::make_unique<SeededRandomForTesting>(*seed));
  }
  auto secure = SecureRandom::Create();
  if (!secure.ok()) return secure.status();
  return std::unique_ptr<RandomSource>(std::move(*secure));
}

uint64_t PeakRssBytes() {
  struct rusage usage {};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // Linux: KiB
}

}  // namespace ldpgraph::tool
