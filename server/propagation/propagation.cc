#include "server/propagation/propagation.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <limits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include <sys/mman.h>

#include "absl/strings/str_cat.h"
#include "common/stopwatch.h"
#include "common/status_macros.h"
#include "common/parallel.h"
#include "server/propagation/internal/push_output.h"

namespace ldpgraph {
namespace {

using Clock = std::chrono::steady_clock;
using propagation::internal::OutputSink;

// deg(v)^power, with an isolated node's degree taken as 1.
std::vector<double> DegreePowers(const Graph& g, double power) {
  std::vector<double> out(g.num_nodes());
  for (NodeId v = 0; v < g.num_nodes(); ++v) {
    const uint32_t d = g.degree(v);
    out[v] = d == 0 ? 1.0 : std::pow(static_cast<double>(d), power);
  }
  return out;
}

absl::Status CheckShape(const Graph& g, size_t rows) {
  if (rows != g.num_nodes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("feature matrix has ", rows, " rows but the graph has ",
                     g.num_nodes(), " nodes"));
  }
  return absl::OkStatus();
}

// Personalised PageRank reads structure only: a weighted graph is refused
// rather than silently propagated as unweighted.
absl::Status CheckUnweighted(const Graph& g) {
  if (g.weighted()) {
    return absl::UnimplementedError(
        "personalised PageRank propagation does not support weighted graphs");
  }
  return absl::OkStatus();
}

// Input of push, read in place a block of columns at a time and multiplied
// by D^-r on the way. ForEachInBlock(j0, w, cursor, f) calls f(v, k, value)
// for every non-zero x(order[v], j0 + k), k < w, with value = that entry
// times deg^-r, v ascending. SparseInput: a sparse matrix, no column-major
// copy of it; cursor holds a position per node (from NewCursor) and a
// caller passes blocks in ascending j0 with the same cursor, so that each
// row is read once from left to right over all the blocks. DenseInput: a
// dense matrix (no cursor).
struct SparseInput {
  const SparseRows& x;
  const std::vector<double>& deg_neg_r;
  const std::vector<NodeId>& order;  // graph node id -> row of x
  size_t rows, cols;
  SparseInput(const SparseRows& m, const std::vector<double>& d,
              const std::vector<NodeId>& ord)
      : x(m), deg_neg_r(d), order(ord), rows(m.rows), cols(m.cols) {}
  // Where each node's row starts.
  std::vector<uint64_t> NewCursor() const {
    std::vector<uint64_t> cursor(rows);
    for (size_t v = 0; v < rows; ++v) cursor[v] = x.offsets[order[v]];
    return cursor;
  }
  template <typename F>
  void ForEachInBlock(size_t j0, size_t w, std::vector<uint64_t>& cursor,
                      F f) const {
    const uint32_t* indices = x.indices.data();
    const float* values = x.values.data();
    constexpr size_t kAhead = 8;  // rows: each one's block is a cache miss
    for (size_t v = 0; v < rows; ++v) {
      if (v + kAhead < rows) {
        __builtin_prefetch(indices + cursor[v + kAhead]);
        __builtin_prefetch(values + cursor[v + kAhead]);
      }
      const NodeId old = order[v];
      const uint64_t end = x.offsets[old + 1];
      uint64_t p = cursor[v];
      while (p != end && indices[p] < j0) ++p;
      for (; p != end && indices[p] < j0 + w; ++p) {
        if (values[p] != 0.0f) {
          f(static_cast<NodeId>(v), indices[p] - j0, values[p] * deg_neg_r[old]);
        }
      }
      cursor[v] = p;
    }
  }
};

struct DenseInput {
  const DenseMatrix& x;
  const std::vector<double>& deg_neg_r;
  const std::vector<NodeId>& order;  // graph node id -> row of x
  size_t rows, cols;
  DenseInput(const DenseMatrix& m, const std::vector<double>& d,
             const std::vector<NodeId>& ord)
      : x(m), deg_neg_r(d), order(ord), rows(m.rows), cols(m.cols) {}
  std::vector<uint64_t> NewCursor() const { return {}; }
  template <typename F>
  void ForEachInBlock(size_t j0, size_t w, std::vector<uint64_t>&, F f) const {
    for (size_t v = 0; v < rows; ++v) {
      const NodeId old = order[v];
      const float* row = x.data.data() + size_t{old} * cols + j0;
      for (size_t k = 0; k < w; ++k) {
        if (row[k] != 0.0f) f(static_cast<NodeId>(v), k, row[k] * deg_neg_r[old]);
      }
    }
  }
};

// Zeroed scratch memory aligned to 64 bytes (a cache line: a 16-float
// residue row is one line). Buffers of 4 MiB or more are aligned to 2 MiB
// and advised for transparent huge pages: at a million nodes the residue
// updates land all over the buffer, and with 4 KiB pages nearly each one
// would also miss the TLB.
template <typename T>
class Scratch {
 public:
  explicit Scratch(size_t count) : count_(count) {
    const size_t bytes = std::max<size_t>(count * sizeof(T), 1);
    const bool huge = bytes >= (size_t{4} << 20);
    const size_t align = huge ? size_t{2} << 20 : 64;
    const size_t rounded = (bytes + align - 1) / align * align;
    data_ = static_cast<T*>(std::aligned_alloc(align, rounded));
    if (data_ == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    if (huge) madvise(data_, rounded, MADV_HUGEPAGE);
#endif
    std::memset(static_cast<void*>(data_), 0, rounded);
  }
  ~Scratch() { std::free(data_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T* data() { return data_; }
  size_t size() const { return count_; }

 private:
  size_t count_;
  T* data_;
};

// What one block's sweeps read and write. Residue rows are kW floats
// (residue[v * kW + k]), reserve rows kW doubles; active has a bit per node.
struct BlockSpace {
  float* residue;
  double* reserve;
  uint64_t* active;
  size_t words;              // of active
  const uint64_t* offsets;   // the relabelled graph's CSR
  const NodeId* targets;
  uint64_t num_targets;      // entries of targets
  const float* push_coef;    // (1 - alpha) / deg(u), as the float it is used as
  float rmax;
  double alpha;
  size_t columns;            // the block's real width (<= the lanes)
};

// Vector types of kW lanes: float residues, double reserves.
// (GCC drops vector_size on a dependent alias, hence one specialisation
// per width.)
template <size_t kW>
struct Lanes;
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
  if constexpr (kW < 4) {
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
//
// Rows are GCC vector types, so the neighbour update is a few vector
// instructions whatever the target (4 SSE2 registers for 16 floats, 2 AVX2
// or 1 AVX-512). Every lane is an IEEE single multiply and add, in the same
// order on every target: propagation.cc is built with -ffp-contract=off, so
// no target fuses them and the results are the same bits everywhere.
constexpr uint64_t kPrefetchEdges = 128;

template <size_t kW, bool kPrefetch>
[[gnu::always_inline]] inline void SweepBlock(const BlockSpace& s,
                                              PropagationStats& stats) {
  using V = typename Lanes<kW>::F;
  using VD = typename Lanes<kW>::D;
  static_assert(kW >= 2 && kW <= 16 && (kW & (kW - 1)) == 0);
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
        q[v] += alpha * __builtin_convertvector(rv, VD);
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

// kW = 1: plain floats, no prefetching (one float per node is 4 MiB at a
// million nodes).
template <>
[[gnu::always_inline]] inline void SweepBlock<1, false>(
    const BlockSpace& s, PropagationStats& stats) {
  float* const res = s.residue;
  double* const q = s.reserve;
  uint64_t* const active = s.active;
  const float t = s.rmax;
  uint64_t pushes = 0, updates = 0;
  bool any = true;
  while (any) {
    any = false;
    for (size_t i = 0; i < s.words; ++i) {
      uint64_t ahead = ~uint64_t{0};
      while ((active[i] & ahead) != 0) {
        const int b = std::countr_zero(active[i] & ahead);
        const NodeId v = static_cast<NodeId>((i << 6) + b);
        active[i] &= ~(uint64_t{1} << b);
        ahead = b == 63 ? 0 : ~uint64_t{0} << (b + 1);
        const float rv = res[v];
        if (!(rv > t || rv < -t)) continue;
        any = true;
        q[v] += s.alpha * rv;
        res[v] = 0;
        ++pushes;
        const uint64_t begin = s.offsets[v], end = s.offsets[v + 1];
        updates += end - begin;
        for (uint64_t p = begin; p < end; ++p) {
          const NodeId u = s.targets[p];
          res[u] += s.push_coef[u] * rv;
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
using SweepFn = void (*)(const BlockSpace&, PropagationStats&);

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

// Residue buffers (see SweepBlock), and KProp's features, above this size
// prefetch.
constexpr size_t kPrefetchAboveBytes = size_t{4} << 20;

// The sweep for kw lanes (1, 2, 4, 8 or 16) over n nodes.
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

// The smallest of 1, 2, 4, 8, 16 that holds w columns. A block of w columns
// runs as one of that width with the extra lanes zero: they never exceed
// rmax, so the pushes and results are those of the w columns alone.
size_t LaneWidth(size_t w) { return std::bit_ceil(std::max<size_t>(w, 1)); }

// One worker's scratch space, for blocks of up to w columns.
class PushWorker {
 public:
  static constexpr size_t kMaxColumns = 16;

  PushWorker(size_t n, size_t w)
      : n_(n), residue_(n * LaneWidth(w)), reserve_(n * LaneWidth(w)),
        active_((n + 63) / 64) {}

  // Pushes columns [j0, j0 + w) of in (w <= the width the worker was built
  // for) and writes D^r Q into those columns of Z (sink). Successive calls on one
  // worker take ascending j0 from the same input (see SparseInput). g is
  // the relabelled graph; order maps its node ids to rows of z; push_coef
  // and deg_r are indexed by g's ids.
  template <typename Input>
  void RunBlock(const Graph& g, const std::vector<NodeId>& order,
                const Input& in, size_t j0, size_t w, const PprOptions& o,
                const std::vector<float>& push_coef,
                const std::vector<double>& deg_r, OutputSink& sink,
                PropagationStats& stats) {
    const size_t kw = LaneWidth(w);
    float* residue = residue_.data();
    uint64_t* active = active_.data();
    if (!cursor_started_) {
      cursor_ = in.NewCursor();
      cursor_started_ = true;
    }
    in.ForEachInBlock(j0, w, cursor_, [&](NodeId v, size_t k, double value) {
      residue[v * kw + k] = static_cast<float>(value);
      active[v >> 6] |= uint64_t{1} << (v & 63);
    });
    BlockSpace s;
    s.residue = residue;
    s.reserve = reserve_.data();
    s.active = active;
    s.words = active_.size();
    s.offsets = g.offsets().data();
    s.targets = g.targets().data();
    s.num_targets = g.targets().size();
    s.push_coef = push_coef.data();
    s.rmax = static_cast<float>(o.rmax);
    s.alpha = o.alpha;
    s.columns = w;
    SweepFor(kw, n_)(s, stats);
    // Z = D^r Q for the block, and a clean workspace for the next one.
    sink.Write(j0, w, kw, deg_r, reserve_.data());
    std::fill_n(residue, n_ * kw, 0.0f);
  }

 private:
  size_t n_;
  // Block residues are float: half the memory traffic of the hot loop; the
  // rounding (2^-24 relative per update) stays far below any useful rmax.
  Scratch<float> residue_;
  Scratch<double> reserve_;
  Scratch<uint64_t> active_;  // one bit per node: a push candidate
  std::vector<uint64_t> cursor_;  // the input's position in each row
  bool cursor_started_ = false;
};

// Block width for push: 16 columns (one neighbour-list walk moves 16
// residues, and a 16-float residue row is one cache line) while the
// per-worker scratch space (12 bytes per node and column: float residue,
// double reserve) stays within 256 MiB, 8 past it (1.4M nodes; the scratch
// then grows with n, 96 bytes a node, 0.96 GB a worker at 10M nodes); d
// when smaller. Narrower blocks walk every neighbour list once per block
// and push each node about as often: at 2M nodes (64 columns of HDS
// reports, alpha 0.05) 16 columns took 34 s, 8 took 29 s, 4 took 57 s and
// 2 took 82 s, which the 256 MiB bound used to pick from 2.8M and 5.6M
// nodes on.
int ChooseBlockColumns(size_t n, size_t d) {
  if (d == 0) return 1;
  const size_t budget = size_t{256} << 20;
  const size_t per_column = std::max<size_t>(1, n) * 12;
  const size_t w = budget / per_column >= PushWorker::kMaxColumns
                       ? PushWorker::kMaxColumns
                       : PushWorker::kMaxColumns / 2;
  return static_cast<int>(std::min(w, d));
}

// g: the relabelled graph; order: its node ids -> rows of x and z; deg_r
// indexed by g's ids. Z goes to sink.
template <typename Input>
void RunPush(const Graph& g, const std::vector<NodeId>& order,
             const Input& in, const PprOptions& o,
             const std::vector<double>& deg_r, OutputSink& sink,
             PropagationStats* stats) {
  const size_t n = g.num_nodes(), d = in.cols;
  std::vector<float> push_coef(n);
  for (NodeId u = 0; u < n; ++u) {
    push_coef[u] = static_cast<float>(
        (1.0 - o.alpha) / std::max<uint32_t>(1, g.degree(u)));
  }
  const size_t w = static_cast<size_t>(PprPushBlockColumns(n, d, o));
  const size_t blocks = (d + w - 1) / w;
  const int workers = static_cast<int>(std::max<size_t>(
      1, std::min<size_t>(ResolveThreads(o.threads), blocks)));
  std::vector<std::unique_ptr<PushWorker>> space(workers);
  std::vector<PropagationStats> per_worker(workers);
  ParallelFor(blocks, workers, [&](int worker, size_t block) {
    if (!space[worker]) space[worker] = std::make_unique<PushWorker>(n, w);
    const size_t j0 = block * w;
    space[worker]->RunBlock(g, order, in, j0, std::min(w, d - j0), o,
                            push_coef, deg_r, sink, per_worker[worker]);
  });
  if (stats != nullptr) {
    *stats = PropagationStats();
    for (const auto& s : per_worker) {
      stats->pushes += s.pushes;
      stats->residue_updates += s.residue_updates;
    }
    stats->block_columns = static_cast<int>(w);
  }
}

// Breadth-first relabelling: node ids in BFS order (each component from
// its smallest unvisited id), so that a push's neighbours sit close
// together in memory: order maps new ids to old, graph is relabelled.
struct Relabelled {
  std::vector<NodeId> order;  // new -> old
  Graph graph;
};

Relabelled RelabelBfs(const Graph& g) {
  const size_t n = g.num_nodes();
  Relabelled r;
  r.order.reserve(n);
  constexpr NodeId kUnseen = std::numeric_limits<NodeId>::max();
  std::vector<NodeId> rank(n, kUnseen);  // old -> new
  for (NodeId s = 0; s < n; ++s) {
    if (rank[s] != kUnseen) continue;
    size_t head = r.order.size();
    rank[s] = static_cast<NodeId>(r.order.size());
    r.order.push_back(s);
    while (head < r.order.size()) {
      const NodeId v = r.order[head++];
      for (NodeId u : g.neighbors(v)) {
        if (rank[u] == kUnseen) {
          rank[u] = static_cast<NodeId>(r.order.size());
          r.order.push_back(u);
        }
      }
    }
  }
  std::vector<Edge> edges = g.Edges();
  for (Edge& e : edges) e = Edge{rank[e.u], rank[e.v]};
  Graph::BuildOptions options;
  options.allow_self_loops = true;
  r.graph = *Graph::FromEdges(n, edges, options);
  return r;
}

std::vector<double> Permute(const std::vector<double>& by_old,
                            const std::vector<NodeId>& order) {
  std::vector<double> out(order.size());
  for (size_t v = 0; v < order.size(); ++v) out[v] = by_old[order[v]];
  return out;
}

float LargestAbs(const std::vector<float>& values) {
  float largest = 0.0f;
  for (float v : values) largest = std::max(largest, std::abs(v));
  return largest;
}
float LargestAbs(const SparseRows& x) { return LargestAbs(x.values); }
float LargestAbs(const DenseMatrix& x) { return LargestAbs(x.data); }

// AbsoluteRmax (propagation.h) on either input.
template <typename Matrix>
PprOptions WithAbsoluteRmax(const PprOptions& options, const Matrix& x) {
  PprOptions o = options;
  if (o.relative_rmax) {
    o.rmax *= std::max(1.0f, LargestAbs(x));
    o.relative_rmax = false;
  }
  return o;
}

// Every push: Input is SparseInput or DenseInput, a view of x with D^-r
// and the relabelling; Z laid out as PprPushByDensity says.
template <typename Input, typename Matrix>
absl::StatusOr<std::optional<SparseRows>> PushOn(
    const Graph& graph, const Matrix& x, const PprOptions& options,
    uint64_t max_nonzeros, absl::FunctionRef<absl::Span<float>()> dense_out,
    PropagationStats* stats) {
  RETURN_IF_ERROR(ValidatePprOptions(options));
  RETURN_IF_ERROR(CheckShape(graph, x.rows));
  RETURN_IF_ERROR(CheckUnweighted(graph));
  const auto start = Clock::now();
  const std::vector<double> deg_r = DegreePowers(graph, options.r);
  const std::vector<double> deg_neg_r = DegreePowers(graph, -options.r);
  Relabelled rl = RelabelBfs(graph);
  Input in(x, deg_neg_r, rl.order);
  const PprOptions o = WithAbsoluteRmax(options, x);
  OutputSink sink(graph.num_nodes(), x.cols, rl.order, max_nonzeros,
                  dense_out);
  RunPush(rl.graph, rl.order, in, o, Permute(deg_r, rl.order), sink, stats);
  std::optional<SparseRows> z = sink.Finish();
  if (stats != nullptr) {
    stats->nonzeros = sink.nonzeros();
    stats->seconds = SecondsSince(start);
  }
  return z;
}

// PprPush: dense from the start, into a DenseMatrix.
template <typename Input, typename Matrix>
absl::StatusOr<DenseMatrix> PushDense(const Graph& graph, const Matrix& x,
                                      const PprOptions& options,
                                      PropagationStats* stats) {
  DenseMatrix z;
  RETURN_IF_ERROR(PushOn<Input>(graph, x, options, 0,
                                [&] {
                                  z = DenseMatrix(x.rows, x.cols);
                                  return absl::MakeSpan(z.data);
                                },
                                stats)
                      .status());
  return z;
}

}  // namespace

int PprPushBlockColumns(size_t n, size_t d, const PprOptions& options) {
  if (options.block_columns > 0) {
    return static_cast<int>(std::min<size_t>(
        {static_cast<size_t>(options.block_columns), PushWorker::kMaxColumns,
         std::max<size_t>(d, 1)}));
  }
  return ChooseBlockColumns(n, d);
}

PprOptions AbsoluteRmax(const PprOptions& options, const SparseRows& x) {
  return WithAbsoluteRmax(options, x);
}

absl::StatusOr<DenseMatrix> PprPush(const Graph& graph, const SparseRows& x,
                                    const PprOptions& options,
                                    PropagationStats* stats) {
  return PushDense<SparseInput>(graph, x, options, stats);
}

absl::StatusOr<DenseMatrix> PprPush(const Graph& graph, const DenseMatrix& x,
                                    const PprOptions& options,
                                    PropagationStats* stats) {
  return PushDense<DenseInput>(graph, x, options, stats);
}

absl::StatusOr<std::optional<SparseRows>> PprPushByDensity(
    const Graph& graph, const SparseRows& x, const PprOptions& options,
    uint64_t max_nonzeros, absl::FunctionRef<absl::Span<float>()> dense_out,
    PropagationStats* stats) {
  return PushOn<SparseInput>(graph, x, options, max_nonzeros, dense_out,
                             stats);
}

absl::StatusOr<DenseMatrix> PprPower(const Graph& graph, const DenseMatrix& x,
                                     const PprOptions& o,
                                     PropagationStats* stats) {
  RETURN_IF_ERROR(ValidatePprOptions(o));
  RETURN_IF_ERROR(CheckShape(graph, x.rows));
  RETURN_IF_ERROR(CheckUnweighted(graph));
  const auto start = Clock::now();
  const size_t n = graph.num_nodes(), d = x.cols;
  const int threads = ResolveThreads(o.threads);
  const std::vector<double> deg_neg_r = DegreePowers(graph, -o.r);
  const std::vector<double> deg_r_minus_1 = DegreePowers(graph, o.r - 1.0);
  // Tail bound constant: max_v deg(v)^r * max_u |x_u|_inf deg(u)^-r.
  double max_deg_r = 0.0, max_scaled = 0.0;
  for (NodeId v = 0; v < n; ++v) {
    max_deg_r = std::max(max_deg_r, 1.0 / deg_neg_r[v]);
    double m = 0.0;
    for (size_t j = 0; j < d; ++j) m = std::max(m, std::fabs(double(x.at(v, j))));
    max_scaled = std::max(max_scaled, m * deg_neg_r[v]);
  }
  const double bound_constant = max_deg_r * max_scaled;

  std::vector<double> y(x.data.begin(), x.data.end()), next(n * d);
  std::vector<double> acc(n * d);
  double weight = o.alpha;  // alpha (1 - alpha)^l
  for (size_t i = 0; i < n * d; ++i) acc[i] = weight * y[i];
  int terms = 1;
  // Remaining tail after terms 0..L: (1 - alpha)^{L+1} * bound_constant.
  double tail = (1.0 - o.alpha) * bound_constant;
  const uint64_t* offsets = graph.offsets().data();
  const NodeId* targets = graph.targets().data();
  while (tail > o.tolerance && terms < o.max_iterations) {
    // next(v) = deg(v)^{r-1} sum_{u in N(v)} deg(u)^-r y(u).
    const size_t chunk = 256;
    ParallelFor((n + chunk - 1) / chunk, threads, [&](int, size_t c) {
      const size_t v_end = std::min(n, (c + 1) * chunk);
      for (size_t v = c * chunk; v < v_end; ++v) {
        double* out = &next[v * d];
        std::fill(out, out + d, 0.0);
        for (uint64_t p = offsets[v]; p < offsets[v + 1]; ++p) {
          const NodeId u = targets[p];
          const double wu = deg_neg_r[u];
          const double* yu = &y[size_t{u} * d];
          for (size_t j = 0; j < d; ++j) out[j] += wu * yu[j];
        }
        const double s = deg_r_minus_1[v];
        for (size_t j = 0; j < d; ++j) out[j] *= s;
      }
    });
    y.swap(next);
    weight *= 1.0 - o.alpha;
    for (size_t i = 0; i < n * d; ++i) acc[i] += weight * y[i];
    ++terms;
    tail *= 1.0 - o.alpha;
  }
  DenseMatrix z(n, d);
  for (size_t i = 0; i < n * d; ++i) z.data[i] = static_cast<float>(acc[i]);
  if (stats != nullptr) {
    *stats = PropagationStats();
    stats->iterations = terms;
    stats->tail_bound = tail;
    stats->seconds = SecondsSince(start);
  }
  return z;
}

absl::StatusOr<DenseMatrix> GcnAggregate(const Graph& graph,
                                         const DenseMatrix& x) {
  RETURN_IF_ERROR(CheckShape(graph, x.rows));
  const size_t n = graph.num_nodes(), d = x.cols;
  // d~ = (weighted) degree counting the (possibly added, weight 1) self loop.
  std::vector<double> inv_sqrt(n);
  std::vector<uint8_t> has_loop(n);
  for (NodeId v = 0; v < n; ++v) {
    has_loop[v] = graph.HasSelfLoop(v);
    inv_sqrt[v] =
        1.0 / std::sqrt(graph.weighted_degree(v) + (has_loop[v] ? 0 : 1));
  }
  DenseMatrix out(n, d);
  std::vector<double> acc(d);
  for (NodeId v = 0; v < n; ++v) {
    std::fill(acc.begin(), acc.end(), 0.0);
    auto add = [&](NodeId u, double w) {
      const double c = w * inv_sqrt[u];
      const float* xu = x.data.data() + size_t{u} * d;
      for (size_t j = 0; j < d; ++j) acc[j] += c * xu[j];
    };
    auto nb = graph.neighbors(v);
    for (size_t i = 0; i < nb.size(); ++i) add(nb[i], graph.weight(v, i));
    if (!has_loop[v]) add(v, 1.0);
    for (size_t j = 0; j < d; ++j) out.at(v, j) = static_cast<float>(inv_sqrt[v] * acc[j]);
  }
  return out;
}

namespace {

// Each node's total weight of aggregated rows (its weighted degree, the
// degree exactly when unweighted, plus 1 for the self loop when asked and
// absent), and for kSymmetric 1/sqrt of it (empty for kMean).
struct KPropScales {
  std::vector<double> count;
  std::vector<double> inv_sqrt;
};

KPropScales ComputeKPropScales(const Graph& graph, bool self_loops,
                               KPropNorm norm) {
  const size_t n = graph.num_nodes();
  KPropScales s;
  s.count.resize(n);
  for (NodeId v = 0; v < n; ++v) {
    const bool saw_self = graph.HasSelfLoop(v);
    s.count[v] = graph.weighted_degree(v) + (self_loops && !saw_self ? 1 : 0);
  }
  if (norm == KPropNorm::kSymmetric) {
    s.inv_sqrt.resize(n);
    for (NodeId v = 0; v < n; ++v) {
      s.inv_sqrt[v] =
          s.count[v] > 0 ? 1.0 / std::sqrt(double(s.count[v])) : 0.0;
    }
  }
  return s;
}

}  // namespace

std::vector<KPropEntry> KPropOperator(const Graph& graph, bool self_loops,
                                      KPropNorm norm) {
  const KPropScales s = ComputeKPropScales(graph, self_loops, norm);
  std::vector<KPropEntry> out;
  out.reserve(2 * graph.num_edges() + graph.num_nodes());
  for (NodeId v = 0; v < graph.num_nodes(); ++v) {
    if (s.count[v] == 0) {
      out.push_back({v, v, 1.0});
      continue;
    }
    auto weight = [&](NodeId u, double edge_weight) {
      return s.inv_sqrt.empty()
                 ? edge_weight / s.count[v]
                 : edge_weight * s.inv_sqrt[u] * s.inv_sqrt[v];
    };
    bool saw_self = false;
    auto nb = graph.neighbors(v);
    for (size_t i = 0; i < nb.size(); ++i) {
      saw_self |= nb[i] == v;
      out.push_back({v, nb[i], weight(nb[i], graph.weight(v, i))});
    }
    if (self_loops && !saw_self) out.push_back({v, v, weight(v, 1.0)});
  }
  return out;
}

absl::StatusOr<DenseMatrix> KProp(const Graph& graph, DenseMatrix x,
                                  int steps, bool self_loops, int threads,
                                  KPropNorm norm) {
  RETURN_IF_ERROR(CheckShape(graph, x.rows));
  if (steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KProp steps must be >= 0, got ", steps));
  }
  if (threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "threads must be >= 0 (0 = every core), got ", threads));
  }
  const size_t n = graph.num_nodes(), d = x.cols;
  const KPropScales scales = ComputeKPropScales(graph, self_loops, norm);
  const std::vector<double>& count = scales.count;
  const std::vector<double>& inv_sqrt = scales.inv_sqrt;
  DenseMatrix cur = std::move(x), next(n, d);
  // Rows in chunks, each row computed by one thread: the same bits for any
  // thread count.
  constexpr size_t kChunk = 256;
  const size_t chunks = (n + kChunk - 1) / kChunk;
  const int workers = static_cast<int>(
      std::max<size_t>(1, std::min<size_t>(ResolveThreads(threads), chunks)));
  std::vector<std::vector<double>> accs(workers, std::vector<double>(d));
  // Past the caches (a million nodes of 64 features is 256 MB a copy) every
  // neighbour's row is a miss to memory, at a random place: the rows of
  // the neighbours kPrefetchAhead adjacency entries on are requested while
  // this one is added (at most kPrefetchLines cache lines of each; the
  // hardware prefetcher follows a longer row). Below kPrefetchAboveBytes
  // of features (push's bound, above) the rows stay in cache and no
  // prefetch is issued. The arithmetic is the same: so are the bits.
  constexpr size_t kPrefetchAhead = 16, kPrefetchLines = 8;
  const bool prefetch = n * d * sizeof(float) > kPrefetchAboveBytes;
  const size_t row_lines =
      std::min(kPrefetchLines, (d * sizeof(float) + 63) / 64);
  const uint64_t* offsets = graph.offsets().data();
  const NodeId* targets = graph.targets().data();
  const uint64_t entries = graph.targets().size();
  for (int s = 0; s < steps; ++s) {
    ParallelFor(chunks, workers, [&](int worker, size_t c) {
      std::vector<double>& acc = accs[worker];
      const float* rows = cur.data.data();
      const NodeId v_end = static_cast<NodeId>(std::min(n, (c + 1) * kChunk));
      for (NodeId v = static_cast<NodeId>(c * kChunk); v < v_end; ++v) {
        float* out = next.data.data() + size_t{v} * d;
        if (count[v] == 0) {
          const float* own = rows + size_t{v} * d;
          std::copy(own, own + d, out);
          continue;
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        // Unweighted, edge_weight is 1 and w exactly the unweighted factor.
        auto add = [&](NodeId u, double edge_weight) {
          const float* xu = rows + size_t{u} * d;
          const double w =
              edge_weight * (inv_sqrt.empty() ? 1.0 : inv_sqrt[u]);
          for (size_t j = 0; j < d; ++j) acc[j] += w * xu[j];
        };
        bool saw_self = false;
        auto nb = graph.neighbors(v);
        const uint64_t first = offsets[v];
        for (size_t i = 0; i < nb.size(); ++i) {
          if (prefetch && first + i + kPrefetchAhead < entries) {
            const char* later = reinterpret_cast<const char*>(
                rows + size_t{targets[first + i + kPrefetchAhead]} * d);
            for (size_t l = 0; l < row_lines; ++l) {
              __builtin_prefetch(later + 64 * l);
            }
          }
          saw_self |= nb[i] == v;
          add(nb[i], graph.weight(v, i));
        }
        if (self_loops && !saw_self) add(v, 1.0);
        if (inv_sqrt.empty()) {
          for (size_t j = 0; j < d; ++j) {
            out[j] = static_cast<float>(acc[j] / count[v]);
          }
        } else {
          for (size_t j = 0; j < d; ++j) {
            out[j] = static_cast<float>(acc[j] * inv_sqrt[v]);
          }
        }
      }
    });
    std::swap(cur, next);
  }
  return cur;
}

absl::StatusOr<DenseMatrix> HighOrderAggregate(const Graph& graph,
                                               DenseMatrix x, int steps,
                                               bool self_loops, int threads,
                                               KPropNorm norm) {
  RETURN_IF_ERROR(CheckShape(graph, x.rows));
  if (steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("HOA steps must be >= 0, got ", steps));
  }
  if (steps == 0) return x;
  // The sum in double per entry would double the memory; the K terms are
  // of one scale (T's spectrum is in [-1, 1]), so float holds the mean to
  // a few ulps.
  std::vector<float> sum(x.data.size(), 0.0f);
  DenseMatrix cur = std::move(x);
  for (int k = 0; k < steps; ++k) {
    ASSIGN_OR_RETURN(cur, KProp(graph, std::move(cur), 1, self_loops, threads,
                                norm));
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += cur.data[i];
  }
  const float inv = 1.0f / static_cast<float>(steps);
  for (size_t i = 0; i < sum.size(); ++i) cur.data[i] = sum[i] * inv;
  return cur;
}

}  // namespace ldpgraph
