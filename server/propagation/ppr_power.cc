// Personalised PageRank by power iteration (propagation.h's PprPower): the
// reference, its series evaluated term by term in double precision.
#include "server/propagation/propagation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "common/parallel.h"
#include "common/status_macros.h"
#include "common/stopwatch.h"
#include "server/propagation/internal/propagation_internal.h"

namespace ldpgraph {

using propagation::internal::CheckShape;
using propagation::internal::CheckUnweighted;
using propagation::internal::DegreePowers;

absl::StatusOr<DenseMatrix> PprPower(const Graph& graph, const DenseMatrix& x,
                                     const PprOptions& o,
                                     PropagationStats* stats) {
  RETURN_IF_ERROR(ValidatePprOptions(o));
  RETURN_IF_ERROR(CheckShape(graph, x.rows));
  RETURN_IF_ERROR(CheckUnweighted(graph));
  const auto start = std::chrono::steady_clock::now();
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

}  // namespace ldpgraph
