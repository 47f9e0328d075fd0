// Personalised PageRank by backward push (propagation.h's PprPush,
// PprPushByDensity, PprPushBlockColumns, AbsoluteRmax): the nodes
// relabelled breadth-first, the columns split into blocks between the
// workers, each block's scratch space and its output. The sweep itself is
// internal/push_sweep.cc, the output internal/push_output.cc.
#include "server/propagation/propagation.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <vector>

#include <sys/mman.h>

#include "common/parallel.h"
#include "common/status_macros.h"
#include "common/stopwatch.h"
#include "server/propagation/internal/propagation_internal.h"
#include "server/propagation/internal/push_input.h"
#include "server/propagation/internal/push_output.h"
#include "server/propagation/internal/push_sweep.h"

namespace ldpgraph {
namespace {

using Clock = std::chrono::steady_clock;
using propagation::internal::BlockSpace;
using propagation::internal::CheckShape;
using propagation::internal::CheckUnweighted;
using propagation::internal::DegreePowers;
using propagation::internal::DenseInput;
using propagation::internal::OutputSink;
using propagation::internal::SparseInput;
using propagation::internal::SweepFor;

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

}  // namespace ldpgraph
