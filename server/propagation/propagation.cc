#include "server/propagation/propagation.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <limits>
#include <cmath>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/stopwatch.h"
#include "common/status_macros.h"

namespace ldpgraph {
namespace {

using Clock = std::chrono::steady_clock;

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

// Runs body(task) for task in [0, tasks) on `threads` workers, each task
// exactly once; body receives the worker index for per-worker state.
template <typename Body>
void ParallelFor(size_t tasks, int threads, Body body) {
  const int workers =
      static_cast<int>(std::min<size_t>(std::max(threads, 1), tasks));
  if (workers <= 1) {
    for (size_t t = 0; t < tasks; ++t) body(0, t);
    return;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  pool.reserve(workers);
  for (int w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      for (size_t t; (t = next.fetch_add(1)) < tasks;) body(w, t);
    });
  }
  for (auto& t : pool) t.join();
}

// Input of push, column-major and already multiplied by D^-r.
// SparseInput: columns of a sparse matrix. DenseInput: a dense matrix read
// in place.
struct SparseInput {
  size_t rows = 0, cols = 0;
  std::vector<uint64_t> offsets;  // cols + 1
  std::vector<NodeId> nodes;
  std::vector<double> values;

  // order maps a graph node id to its row of x; columns list node ids in
  // ascending order.
  SparseInput(const SparseRows& x, const std::vector<double>& deg_neg_r,
              const std::vector<NodeId>& order)
      : rows(x.rows), cols(x.cols), offsets(x.cols + 1, 0) {
    for (uint32_t j : x.indices) ++offsets[j + 1];
    for (size_t j = 0; j < cols; ++j) offsets[j + 1] += offsets[j];
    nodes.resize(x.nnz());
    values.resize(x.nnz());
    std::vector<uint64_t> fill(offsets.begin(), offsets.end() - 1);
    for (size_t v = 0; v < rows; ++v) {
      const NodeId old = order[v];
      for (uint64_t p = x.offsets[old]; p < x.offsets[old + 1]; ++p) {
        if (x.values[p] == 0.0f) continue;
        const uint64_t at = fill[x.indices[p]]++;
        nodes[at] = static_cast<NodeId>(v);
        values[at] = x.values[p] * deg_neg_r[old];
      }
    }
    // Explicit zeros were skipped: compact each column.
    uint64_t write = 0;
    for (size_t j = 0; j < cols; ++j) {
      const uint64_t begin = offsets[j];
      offsets[j] = write;
      for (uint64_t p = begin; p < fill[j]; ++p) {
        nodes[write] = nodes[p];
        values[write] = values[p];
        ++write;
      }
    }
    offsets[cols] = write;
  }
  // Calls f(v, k, value) for every non-zero of columns [j0, j0 + w).
  template <typename F>
  void ForEachInBlock(size_t j0, size_t w, F f) const {
    for (size_t k = 0; k < w; ++k) {
      for (uint64_t p = offsets[j0 + k]; p < offsets[j0 + k + 1]; ++p) {
        f(nodes[p], k, values[p]);
      }
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
  template <typename F>
  void ForEachInBlock(size_t j0, size_t w, F f) const {
    for (size_t v = 0; v < rows; ++v) {
      const NodeId old = order[v];
      const float* row = x.data.data() + size_t{old} * cols + j0;
      for (size_t k = 0; k < w; ++k) {
        if (row[k] != 0.0f) f(static_cast<NodeId>(v), k, row[k] * deg_neg_r[old]);
      }
    }
  }
};

// One worker's scratch space. A task is a group of up to kGroup consecutive
// columns, pushed in blocks of w columns; results gather in an n x group
// buffer that is copied into Z's rows at the end, so Z is written
// row-contiguously instead of one scattered float per (node, column).
class PushWorker {
 public:
  static constexpr size_t kGroup = 16;

  PushWorker(size_t n, size_t w)
      : n_(n), w_(w), residue_(n * w, 0), reserve_(n * w, 0.0), scratch_(w),
        group_(n * kGroup), active_((n + 63) / 64, 0) {}

  // g is the relabelled graph; order maps its node ids to rows of z.
  template <typename Input>
  void RunGroup(const Graph& g, const std::vector<NodeId>& order,
                const Input& in, size_t j0, size_t width,
                const PprOptions& o, const std::vector<double>& push_coef,
                const std::vector<double>& deg_r, DenseMatrix& z,
                PropagationStats& stats) {
    std::fill(group_.begin(), group_.begin() + n_ * width, 0.0f);
    for (size_t b = 0; b < width; b += w_) {
      const size_t w = std::min(w_, width - b);
      RunBlock(g, in, j0 + b, w, b, width, o, push_coef, deg_r, stats);
    }
    for (size_t v = 0; v < n_; ++v) {
      std::copy(&group_[v * width], &group_[v * width] + width,
                z.data.data() + size_t{order[v]} * z.cols + j0);
    }
  }

 private:

  // Dispatches to a block loop whose width is a compile-time constant for
  // the common widths, so the per-neighbour update vectorises fully.
  template <typename Input>
  void RunBlock(const Graph& g, const Input& in, size_t j0, size_t w,
                size_t group_col, size_t width, const PprOptions& o,
                const std::vector<double>& push_coef,
                const std::vector<double>& deg_r, PropagationStats& stats) {
    switch (w) {
      case 16:
        return RunBlockImpl<16>(g, in, j0, w, group_col, width, o, push_coef, deg_r, stats);
      case 8:
        return RunBlockImpl<8>(g, in, j0, w, group_col, width, o, push_coef, deg_r, stats);
      case 4:
        return RunBlockImpl<4>(g, in, j0, w, group_col, width, o, push_coef, deg_r, stats);
      case 1:
        return RunBlockImpl<1>(g, in, j0, w, group_col, width, o, push_coef, deg_r, stats);
      default:
        return RunBlockImpl<0>(g, in, j0, w, group_col, width, o, push_coef, deg_r, stats);
    }
  }

  // kW > 0: the block width, known at compile time (w == kW); 0: runtime w.
  template <size_t kW, typename Input>
  void RunBlockImpl(const Graph& g, const Input& in, size_t j0, size_t w_in,
                    size_t group_col, size_t width, const PprOptions& o,
                    const std::vector<double>& push_coef,
                    const std::vector<double>& deg_r, PropagationStats& stats) {
    const size_t w = kW > 0 ? kW : w_in;
    const double alpha = o.alpha;
    const Residue rmax_r = static_cast<Residue>(o.rmax);
    const size_t stride = w_;
    // Candidates are bits of active_: nodes that received mass since their
    // last push. Each sweep visits them in ascending id order, so pushes walk
    // memory forwards, and checks the threshold there (not at every update,
    // which keeps a data-dependent branch out of the neighbour loop). A node
    // activated ahead of the sweep is visited in the same sweep (Gauss-Seidel
    // order), one behind it in the next. Cost per sweep: the candidates plus
    // n / 64 words; the block ends after a sweep without a push.
    in.ForEachInBlock(j0, w, [&](NodeId v, size_t k, double value) {
      residue_[v * stride + k] = static_cast<Residue>(value);
      active_[v >> 6] |= uint64_t{1} << (v & 63);
    });
    const uint64_t* offsets = g.offsets().data();
    const NodeId* targets = g.targets().data();
    Residue* rv_copy = scratch_.data();
    const size_t words = active_.size();
    bool any = true;
    while (any) {
      any = false;
      for (size_t i = 0; i < words; ++i) {
        // Only bits ahead of the sweep's position; ones set behind it wait.
        uint64_t ahead = ~uint64_t{0};
        while ((active_[i] & ahead) != 0) {
          const int b = std::countr_zero(active_[i] & ahead);
          const NodeId v = static_cast<NodeId>((i << 6) + b);
          active_[i] &= ~(uint64_t{1} << b);
          ahead = b == 63 ? 0 : ~uint64_t{0} << (b + 1);
          Residue* rv = &residue_[v * stride];
          if (!AnyAbove(rv, w, rmax_r)) continue;
          any = true;
          double* qv = &reserve_[v * stride];
          for (size_t k = 0; k < w; ++k) {
            rv_copy[k] = rv[k];
            qv[k] += alpha * rv[k];
            rv[k] = 0;
          }
          ++stats.pushes;
          const uint64_t end = offsets[v + 1];
          stats.residue_updates += (end - offsets[v]) * w;
          for (uint64_t p = offsets[v]; p < end; ++p) {
            const NodeId u = targets[p];
            const Residue c = static_cast<Residue>(push_coef[u]);
            Residue* ru = &residue_[u * stride];
            for (size_t k = 0; k < w; ++k) ru[k] += c * rv_copy[k];
            active_[u >> 6] |= uint64_t{1} << (u & 63);
          }
        }
      }
    }
    // Z = D^r Q for the block, and a clean workspace for the next one.
    for (NodeId v = 0; v < n_; ++v) {
      float* out = &group_[v * width + group_col];
      double* qv = &reserve_[v * stride];
      Residue* rv = &residue_[v * stride];
      for (size_t k = 0; k < w; ++k) {
        out[k] = static_cast<float>(deg_r[v] * qv[k]);
        qv[k] = 0.0;
        rv[k] = 0.0;
      }
    }
  }

 private:
  template <typename T>
  static bool AnyAbove(const T* x, size_t w, T t) {
    bool above = false;
    for (size_t k = 0; k < w; ++k) above |= std::fabs(x[k]) > t;
    return above;
  }

  size_t n_, w_;
  // Block residues are float: half the memory traffic of the hot loop; the
  // rounding (2^-24 relative per update) stays far below any useful rmax.
  using Residue = float;
  std::vector<Residue> residue_;
  std::vector<double> reserve_;
  std::vector<Residue> scratch_;
  std::vector<float> group_;
  std::vector<uint64_t> active_;  // one bit per node: a push candidate
};

// Block width for push: 16 columns (one neighbour-list walk moves 16
// residues, and a 16-float residue row is one cache line), fewer when d is
// smaller or when the per-worker scratch space (16 bytes per node and
// column: float residue, double reserve, float result) would pass 256 MiB.
int ChooseBlockColumns(size_t n, size_t d) {
  if (d == 0) return 1;
  const size_t budget = size_t{256} << 20;
  const size_t per_column = std::max<size_t>(1, n) * 16;
  size_t w = std::min(PushWorker::kGroup, std::max<size_t>(1, budget / per_column));
  return static_cast<int>(std::min(w, d));
}

// g: the relabelled graph; order: its node ids -> rows of x and z; deg_r
// indexed by g's ids.
template <typename Input>
DenseMatrix RunPush(const Graph& g, const std::vector<NodeId>& order,
                    const Input& in, const PprOptions& o,
                    const std::vector<double>& deg_r, PropagationStats* stats) {
  const size_t n = g.num_nodes(), d = in.cols;
  DenseMatrix z(n, d);
  std::vector<double> push_coef(n);
  for (NodeId u = 0; u < n; ++u) {
    push_coef[u] = (1.0 - o.alpha) / std::max<uint32_t>(1, g.degree(u));
  }
  const size_t w =
      o.block_columns > 0
          ? std::min<size_t>({static_cast<size_t>(o.block_columns),
                              PushWorker::kGroup, std::max<size_t>(d, 1)})
          : ChooseBlockColumns(n, d);
  const size_t groups = (d + PushWorker::kGroup - 1) / PushWorker::kGroup;
  const int workers =
      static_cast<int>(std::max<size_t>(1, std::min<size_t>(o.threads, groups)));
  std::vector<std::unique_ptr<PushWorker>> space(workers);
  std::vector<PropagationStats> per_worker(workers);
  ParallelFor(groups, workers, [&](int worker, size_t group) {
    if (!space[worker]) space[worker] = std::make_unique<PushWorker>(n, w);
    const size_t j0 = group * PushWorker::kGroup;
    const size_t width = std::min(PushWorker::kGroup, d - j0);
    space[worker]->RunGroup(g, order, in, j0, width, o, push_coef, deg_r, z,
                            per_worker[worker]);
  });
  if (stats != nullptr) {
    *stats = PropagationStats();
    for (const auto& s : per_worker) {
      stats->pushes += s.pushes;
      stats->residue_updates += s.residue_updates;
    }
    stats->block_columns = static_cast<int>(w);
  }
  return z;
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

}  // namespace

absl::Status ValidatePprOptions(const PprOptions& o) {
  if (!(o.alpha > 0.0 && o.alpha <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("alpha must be in (0, 1], got ", o.alpha));
  }
  if (!(o.r >= 0.0 && o.r <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("r must be in [0, 1], got ", o.r));
  }
  if (!(o.rmax > 0.0) || !std::isfinite(o.rmax)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rmax must be finite and > 0, got ", o.rmax));
  }
  if (!(o.tolerance > 0.0) || !std::isfinite(o.tolerance)) {
    return absl::InvalidArgumentError(
        absl::StrCat("tolerance must be finite and > 0, got ", o.tolerance));
  }
  if (o.max_iterations < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_iterations must be >= 1, got ", o.max_iterations));
  }
  if (o.threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("threads must be >= 1, got ", o.threads));
  }
  if (o.block_columns < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "block_columns must be >= 0 (0 = automatic), got ", o.block_columns));
  }
  return absl::OkStatus();
}

namespace {

float LargestAbs(const std::vector<float>& values) {
  float largest = 0.0f;
  for (float v : values) largest = std::max(largest, std::abs(v));
  return largest;
}
float LargestAbs(const SparseRows& x) { return LargestAbs(x.values); }
float LargestAbs(const DenseMatrix& x) { return LargestAbs(x.data); }

// Both PprPush overloads: Input is SparseInput or DenseInput, built from x
// with D^-r and the relabelling.
template <typename Input, typename Matrix>
absl::StatusOr<DenseMatrix> PushOn(const Graph& graph, const Matrix& x,
                                   const PprOptions& options,
                                   PropagationStats* stats) {
  RETURN_IF_ERROR(ValidatePprOptions(options));
  RETURN_IF_ERROR(CheckShape(graph, x.rows));
  const auto start = Clock::now();
  const std::vector<double> deg_r = DegreePowers(graph, options.r);
  const std::vector<double> deg_neg_r = DegreePowers(graph, -options.r);
  Relabelled rl = RelabelBfs(graph);
  Input in(x, deg_neg_r, rl.order);
  PprOptions o = options;
  if (o.relative_rmax) o.rmax *= std::max(1.0f, LargestAbs(x));
  DenseMatrix z =
      RunPush(rl.graph, rl.order, in, o, Permute(deg_r, rl.order), stats);
  if (stats != nullptr) stats->seconds = SecondsSince(start);
  return z;
}

}  // namespace

absl::StatusOr<DenseMatrix> PprPush(const Graph& graph, const SparseRows& x,
                                    const PprOptions& options,
                                    PropagationStats* stats) {
  return PushOn<SparseInput>(graph, x, options, stats);
}

absl::StatusOr<DenseMatrix> PprPush(const Graph& graph, const DenseMatrix& x,
                                    const PprOptions& options,
                                    PropagationStats* stats) {
  return PushOn<DenseInput>(graph, x, options, stats);
}

absl::StatusOr<DenseMatrix> PprPower(const Graph& graph, const DenseMatrix& x,
                                     const PprOptions& o,
                                     PropagationStats* stats) {
  RETURN_IF_ERROR(ValidatePprOptions(o));
  RETURN_IF_ERROR(CheckShape(graph, x.rows));
  const auto start = Clock::now();
  const size_t n = graph.num_nodes(), d = x.cols;
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
    ParallelFor((n + chunk - 1) / chunk, o.threads, [&](int, size_t c) {
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
  // d~ = degree counting the (possibly added) self loop.
  std::vector<double> inv_sqrt(n);
  std::vector<uint8_t> has_loop(n);
  for (NodeId v = 0; v < n; ++v) {
    has_loop[v] = graph.HasSelfLoop(v);
    inv_sqrt[v] = 1.0 / std::sqrt(double(graph.degree(v) + (has_loop[v] ? 0 : 1)));
  }
  DenseMatrix out(n, d);
  std::vector<double> acc(d);
  for (NodeId v = 0; v < n; ++v) {
    std::fill(acc.begin(), acc.end(), 0.0);
    auto add = [&](NodeId u) {
      const double c = inv_sqrt[u];
      const float* xu = x.data.data() + size_t{u} * d;
      for (size_t j = 0; j < d; ++j) acc[j] += c * xu[j];
    };
    for (NodeId u : graph.neighbors(v)) add(u);
    if (!has_loop[v]) add(v);
    for (size_t j = 0; j < d; ++j) out.at(v, j) = static_cast<float>(inv_sqrt[v] * acc[j]);
  }
  return out;
}

absl::StatusOr<DenseMatrix> KProp(const Graph& graph, const DenseMatrix& x,
                                  int steps, bool self_loops) {
  RETURN_IF_ERROR(CheckShape(graph, x.rows));
  if (steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KProp steps must be >= 0, got ", steps));
  }
  const size_t n = graph.num_nodes(), d = x.cols;
  DenseMatrix cur = x, next(n, d);
  std::vector<double> acc(d);
  for (int s = 0; s < steps; ++s) {
    for (NodeId v = 0; v < n; ++v) {
      std::fill(acc.begin(), acc.end(), 0.0);
      size_t count = 0;
      auto add = [&](NodeId u) {
        const float* xu = cur.data.data() + size_t{u} * d;
        for (size_t j = 0; j < d; ++j) acc[j] += xu[j];
        ++count;
      };
      bool saw_self = false;
      for (NodeId u : graph.neighbors(v)) {
        saw_self |= u == v;
        add(u);
      }
      if (self_loops && !saw_self) add(v);
      float* out = next.data.data() + size_t{v} * d;
      if (count == 0) {
        const float* own = cur.data.data() + size_t{v} * d;
        std::copy(own, own + d, out);
      } else {
        for (size_t j = 0; j < d; ++j) out[j] = static_cast<float>(acc[j] / count);
      }
    }
    std::swap(cur, next);
  }
  return cur;
}

}  // namespace ldpgraph
