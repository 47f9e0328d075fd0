// Neighbourhood aggregation (propagation.h): GCN's normalised aggregation
// (GcnAggregate), LPGNN's KProp with its step as a matrix (KPropOperator),
// and UPGNET's high-order aggregator (HighOrderAggregate).
#include "server/propagation/propagation.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "server/propagation/internal/propagation_internal.h"

namespace ldpgraph {

using propagation::internal::CheckShape;
using propagation::internal::kPrefetchAboveBytes;

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
  // of features (push's bound, propagation_internal.h) the rows stay in
  // cache and no prefetch is issued. The arithmetic is the same: so are the
  // bits.
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
