// Backward push's block sweep (push_sweep.h): residue rows as GCC vector
// types of 1 to 16 lanes, the sweep written once for every width, and its
// copies for the baseline, AVX2 and AVX-512 targets with the run-time pick.
#include "server/propagation/internal/push_sweep.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "server/propagation/internal/propagation_internal.h"

namespace ldpgraph::propagation::internal {
namespace {

// Vector types of kW lanes: float residues, double reserves; kW = 1 is
// plain float and double.
// (GCC drops vector_size on a dependent alias, hence one specialisation
// per width.)
template <size_t kW>
struct Lanes;
template <>
struct Lanes<1> {
  typedef float F;
  typedef double D;
};
#define LDPGRAPH_LANES(W)                                                  \
  template <>                                                              \
  struct Lanes<W> {                                                        \
    typedef float F __attribute__((vector_size(W * sizeof(float))));      \
    typedef double D __attribute__((vector_size(W * sizeof(double))));    \
  };
typedef float Float4 __attribute__((vector_size(4 * sizeof(float))));
typedef int32_t Int4 __attribute__((vector_size(4 * sizeof(int32_t))));
LDPGRAPH_LANES(2)
LDPGRAPH_LANES(4)
LDPGRAPH_LANES(8)
LDPGRAPH_LANES(16)
#undef LDPGRAPH_LANES

// Whether some |row[k]| > t (false for NaN, like the scalar test). The
// comparisons go 4 lanes at a time: GCC 12 turns a comparison of vectors
// wider than the target's registers into one scalar compare per lane.
template <size_t kW, typename V>
[[gnu::always_inline]] inline bool AnyAbove(const V& row, float t) {
  if constexpr (kW == 1) {
    return row > t || row < -t;
  } else if constexpr (kW < 4) {
    bool above = false;
    for (size_t k = 0; k < kW; ++k) above |= row[k] > t || row[k] < -t;
    return above;
  } else {
    Float4 chunk[kW / 4];
    std::memcpy(chunk, &row, sizeof(chunk));
    const Float4 tv = Float4{} + t;
    Int4 above = Int4{};
    for (size_t i = 0; i < kW / 4; ++i) {
      const Float4 magnitude =
          reinterpret_cast<Float4>(reinterpret_cast<Int4>(chunk[i]) & 0x7fffffff);
      above |= magnitude > tv;
    }
    uint64_t halves[2];
    std::memcpy(halves, &above, sizeof(halves));
    return (halves[0] | halves[1]) != 0;
  }
}

// reserve += alpha * row, lane by lane, the row widened to double (exactly).
template <size_t kW, typename VD, typename V>
[[gnu::always_inline]] inline void AddToReserve(VD& reserve, double alpha,
                                                const V& row) {
  if constexpr (kW == 1) {
    reserve += alpha * static_cast<double>(row);
  } else {
    reserve += alpha * __builtin_convertvector(row, VD);
  }
}

// Pushes one block of kW columns (kW = 1, 2, 4, 8 or 16) until no residue
// exceeds rmax, starting from the residues and candidate bits in s.
// Candidates are bits of active: nodes that received mass since their last
// push. Each sweep visits them in ascending id order, so pushes walk memory
// forwards, and checks the threshold there (not at every update, which keeps
// a data-dependent branch out of the neighbour loop). A node activated ahead
// of the sweep is visited in the same sweep (Gauss-Seidel order), one behind
// it in the next. Cost per sweep: the candidates plus n / 64 words; the block
// ends after a sweep without a push.
//
// kPrefetch: when the residues outgrow the cache (a million nodes: 64 MiB
// for 16 columns), nearly every neighbour update misses, and the misses of
// one push are too few to keep memory busy. Each update then also
// prefetches the residue row of the target kPrefetchEdges entries further
// along the adjacency array: in a sweep of ascending ids that is the
// neighbour list of a node a dozen pushes ahead. (On pubmed, whose residues
// fit in L2, the prefetches cost about 10%, so small graphs go without.)
// kW = 1 goes without (one float per node is 4 MiB at a million nodes).
//
// Rows are GCC vector types, so the neighbour update is a few vector
// instructions whatever the target (4 SSE2 registers for 16 floats, 2 AVX2
// or 1 AVX-512); kW = 1 is plain floats. Every lane is an IEEE single
// multiply and add, in the same order on every target: the library is
// built with -ffp-contract=off, so no target fuses them and the results
// are the same bits everywhere.
constexpr uint64_t kPrefetchEdges = 128;

template <size_t kW, bool kPrefetch>
[[gnu::always_inline]] inline void SweepBlock(const BlockSpace& s,
                                              PropagationStats& stats) {
  using V = typename Lanes<kW>::F;
  using VD = typename Lanes<kW>::D;
  static_assert(kW >= 1 && kW <= 16 && (kW & (kW - 1)) == 0);
  static_assert(kW > 1 || !kPrefetch);
  V* const res = reinterpret_cast<V*>(s.residue);
  VD* const q = reinterpret_cast<VD*>(s.reserve);
  uint64_t* const active = s.active;
  const uint64_t* const offsets = s.offsets;
  const NodeId* const targets = s.targets;
  const float* const coef = s.push_coef;
  const float t = s.rmax;
  const double alpha = s.alpha;
  const uint64_t last_target = s.num_targets - 1;
  uint64_t pushes = 0, updates = 0;
  bool any = true;
  while (any) {
    any = false;
    for (size_t i = 0; i < s.words; ++i) {
      // Only bits ahead of the sweep's position; ones set behind it wait.
      uint64_t ahead = ~uint64_t{0};
      while ((active[i] & ahead) != 0) {
        const int b = std::countr_zero(active[i] & ahead);
        const NodeId v = static_cast<NodeId>((i << 6) + b);
        active[i] &= ~(uint64_t{1} << b);
        ahead = b == 63 ? 0 : ~uint64_t{0} << (b + 1);
        const V rv = res[v];
        if (!AnyAbove<kW>(rv, t)) continue;
        any = true;
        AddToReserve<kW>(q[v], alpha, rv);
        res[v] = V{};
        ++pushes;
        const uint64_t begin = offsets[v], end = offsets[v + 1];
        updates += end - begin;
        for (uint64_t p = begin; p < end; ++p) {
          const NodeId u = targets[p];
          if constexpr (kPrefetch) {
            const uint64_t later = std::min(p + kPrefetchEdges, last_target);
            __builtin_prefetch(&res[targets[later]], 1, 3);
          }
          res[u] += coef[u] * rv;
          active[u >> 6] |= uint64_t{1} << (u & 63);
        }
      }
    }
  }
  stats.pushes += pushes;
  stats.residue_updates += updates * s.columns;
}

// The block sweep compiled for the baseline target and, on x86-64, again
// for AVX2 and AVX-512 (chosen at run time by what the CPU supports). Same
// arithmetic, same bits (see SweepBlock).
template <size_t kW, bool kPrefetch>
void SweepBaseline(const BlockSpace& s, PropagationStats& stats) {
  SweepBlock<kW, kPrefetch>(s, stats);
}
#if defined(__x86_64__) && defined(__GNUC__)
template <size_t kW, bool kPrefetch>
[[gnu::target("avx2")]] void SweepAvx2(const BlockSpace& s,
                                       PropagationStats& stats) {
  SweepBlock<kW, kPrefetch>(s, stats);
}
template <size_t kW, bool kPrefetch>
[[gnu::target("avx512f,avx512vl,avx512bw,avx512dq")]] void SweepAvx512(
    const BlockSpace& s, PropagationStats& stats) {
  SweepBlock<kW, kPrefetch>(s, stats);
}
#endif

template <size_t kW, bool kPrefetch>
SweepFn PickSweep() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")) {
    return &SweepAvx512<kW, kPrefetch>;
  }
  if (__builtin_cpu_supports("avx2")) return &SweepAvx2<kW, kPrefetch>;
#endif
  return &SweepBaseline<kW, kPrefetch>;
}

}  // namespace

SweepFn SweepFor(size_t kw, size_t n) {
  static const SweepFn plain[] = {
      PickSweep<1, false>(), PickSweep<2, false>(), PickSweep<4, false>(),
      PickSweep<8, false>(), PickSweep<16, false>()};
  static const SweepFn prefetching[] = {
      PickSweep<1, false>(), PickSweep<2, true>(), PickSweep<4, true>(),
      PickSweep<8, true>(), PickSweep<16, true>()};
  const bool prefetch = n * kw * sizeof(float) > kPrefetchAboveBytes;
  return (prefetch ? prefetching : plain)[std::countr_zero(kw)];
}

}  // namespace ldpgraph::propagation::internal
