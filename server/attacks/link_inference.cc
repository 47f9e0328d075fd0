#include "server/attacks/link_inference.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/dataset/splits.h"
#include "common/random/random.h"
#include "common/random/seed_mix.h"
#include "common/status_macros.h"
#include "server/propagation/propagation.h"
#include "server/training/linkteller.h"
#include "server/training/metrics.h"

namespace ldpgraph::link_inference {
namespace {

// LinkTellerSources' stream, apart from any other drawn from the same seed.
constexpr uint64_t kLinkTellerTag = 0x6c696e6b74656c6cULL;  // "linktell"

}  // namespace

std::vector<Edge> SampleNonEdges(const Graph& g, size_t count, uint64_t seed) {
  const uint64_t n = g.num_nodes();
  const uint64_t pairs = n < 2 ? 0 : n * (n - 1) / 2;
  const uint64_t edges = g.num_edges() - g.num_self_loops();
  const uint64_t available = pairs - std::min(pairs, edges);
  count = std::min<uint64_t>(count, available);
  PublicRandom rng(seed);
  std::vector<Edge> out;
  out.reserve(count);
  if (count == available) {
    // Every non-edge (tiny graphs): no rejection loop that could stall.
    for (NodeId u = 0; u < n; ++u) {
      for (NodeId v = u + 1; v < n; ++v) {
        if (!g.HasEdge(u, v)) out.push_back(Edge{u, v});
      }
    }
    return out;
  }
  DrawRandomNonEdges(g, count, rng, &out);
  return out;
}

absl::StatusOr<double> SimilarityAttackAuc(const Graph& truth,
                                           const DenseMatrix& outputs,
                                           const std::vector<Edge>& non_edges) {
  if (outputs.rows < truth.num_nodes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("outputs hold ", outputs.rows, " rows for a graph of ",
                     truth.num_nodes(), " nodes"));
  }
  std::vector<double> norm(outputs.rows);
  for (size_t v = 0; v < outputs.rows; ++v) {
    double s = 0;
    for (float x : outputs.row(v)) s += double(x) * x;
    norm[v] = std::sqrt(s);
  }
  auto score = [&](NodeId u, NodeId v) -> float {
    if (norm[u] == 0 || norm[v] == 0) return 0.0f;
    double dot = 0;
    auto a = outputs.row(u), b = outputs.row(v);
    for (size_t j = 0; j < outputs.cols; ++j) dot += double(a[j]) * b[j];
    return static_cast<float>(dot / (norm[u] * norm[v]));
  };
  std::vector<float> pos, neg;
  for (const Edge& e : truth.Edges()) {
    if (e.u != e.v) pos.push_back(score(e.u, e.v));
  }
  for (const Edge& e : non_edges) {
    if (e.u >= outputs.rows || e.v >= outputs.rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          "non-edge (", e.u, ", ", e.v, ") names a node without an output"));
    }
    neg.push_back(score(e.u, e.v));
  }
  return training::RocAuc(pos, neg);
}

absl::StatusOr<double> LinkTellerAttackAuc(const Graph& truth,
                                           const std::vector<Edge>& non_edges,
                                           const Graph& graph,
                                           const pipeline::PipelineConfig& c,
                                           const pipeline::RunResult& r,
                                           const std::vector<bool>* sources,
                                           int threads) {
  if (r.node_model == nullptr || r.node_features == nullptr) {
    return absl::InvalidArgumentError(
        "LinkTeller needs the run's model and features (keep_node_model)");
  }
  if (graph.num_nodes() != truth.num_nodes() || non_edges.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LinkTeller: the model's graph has ", graph.num_nodes(),
        " nodes, the truth ", truth.num_nodes(), "; ", non_edges.size(),
        " non-edges"));
  }
  const DenseMatrix dense = r.node_features->ToDense();
  const training::Mat<double> x =
      Eigen::Map<const training::Mat<float>>(
          dense.data.data(), static_cast<Eigen::Index>(dense.rows),
          static_cast<Eigen::Index>(dense.cols))
          .cast<double>();
  // KProp's step over the graph the model answers on, as the pipeline
  // propagated (c.feature_self_loops, c.kprop_norm).
  training::SpMat<double> t;
  if (c.feature_steps > 0) {
    std::vector<Eigen::Triplet<double, int64_t>> entries;
    for (const KPropEntry& e :
         KPropOperator(graph, c.feature_self_loops, c.kprop_norm)) {
      entries.emplace_back(e.row, e.col, e.weight);
    }
    t.resize(graph.num_nodes(), graph.num_nodes());
    t.setFromTriplets(entries.begin(), entries.end());
  }
  ASSIGN_OR_RETURN(training::LinkTeller attack,
                   training::LinkTeller::Create(
                       {r.node_model.get(), &graph, &x, &t, c.feature_steps}));
  std::vector<Edge> pairs;
  for (const Edge& e : truth.Edges()) {
    if (e.u != e.v) pairs.push_back(e);
  }
  const size_t positives = pairs.size();
  pairs.insert(pairs.end(), non_edges.begin(), non_edges.end());
  ASSIGN_OR_RETURN(std::vector<double> scores,
                   attack.DirectedScores(pairs, sources, threads));
  std::vector<float> pos, neg;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (std::isnan(scores[i])) continue;  // its source was not queried
    (i / 2 < positives ? pos : neg).push_back(static_cast<float>(scores[i]));
  }
  if (pos.empty() || neg.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LinkTeller's sources are in ", pos.size(), " edge and ", neg.size(),
        " non-edge directions: more sources are needed"));
  }
  return training::RocAuc(pos, neg);
}

std::vector<bool> LinkTellerSources(size_t n, uint32_t count, uint64_t seed) {
  if (count == 0 || count >= n) return std::vector<bool>(n, true);
  std::vector<bool> out(n, false);
  PublicRandom rng(SeedMix(seed ^ kLinkTellerTag));
  for (uint32_t v :
       rng.SampleWithoutReplacement(static_cast<uint32_t>(n), count)) {
    out[v] = true;
  }
  return out;
}

}  // namespace ldpgraph::link_inference
