// The in-memory driver of a whole graph's exchange (RunSubstitution) and the
// curator's assembly of the nodes' reports into one graph (AssembleGraph).
// The parameters are in substitution_params.cc, the exchanged vectors in
// exchange_features.cc, one node's protocol in substitution_node.cc.
#include "common/edges/substitution.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/edges/substitution_internal.h"
#include "common/parallel.h"
#include "common/status_macros.h"

namespace ldpgraph::edges {

absl::StatusOr<RunOutput> RunSubstitution(
    const Graph& g, const SubstitutionParams& params,
    std::shared_ptr<const ExchangeFeatures> features,
    const std::vector<v1::FeatureReport>& own,
    const std::function<RandomSource*(uint32_t)>& rng_of,
    const RunOptions& options) {
  RETURN_IF_ERROR(params.Validate());
  const uint32_t n = static_cast<uint32_t>(g.num_nodes());
  if (own.size() != n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d feature reports for %d nodes", own.size(), n));
  }
  std::vector<std::unique_ptr<SubstitutionNode>> nodes(n);
  for (uint32_t v = 0; v < n; ++v) {
    auto nb = g.neighbors(v);
    std::vector<uint32_t> neighbours(nb.begin(), nb.end());
    if (options.abstaining.contains(v)) {
      nodes[v] = SubstitutionNode::Abstaining(params, v, std::move(neighbours));
      continue;
    }
    RandomSource* rng = rng_of(v);
    ASSIGN_OR_RETURN(nodes[v],
                     SubstitutionNode::Create(params, features, v,
                                              std::move(neighbours), own[v],
                                              rng));
  }
  RunOutput output;
  // Per round: every node advances (in parallel), then every message is
  // serialised, parsed and delivered, grouped by recipient (in parallel).
  std::vector<absl::Status> errors(n);
  std::vector<std::vector<std::pair<uint32_t, std::string>>> inbox(n);
  for (int step = 0; step <= params.rounds() + 1; ++step) {
    std::vector<std::vector<Outgoing>> sent(n);
    ParallelFor(n, n < 64 ? 1 : options.threads, [&](int, size_t v) {
      absl::StatusOr<std::vector<Outgoing>> out = nodes[v]->Advance();
      if (!out.ok()) {
        errors[v] = out.status();
        return;
      }
      sent[v] = *std::move(out);
    });
    for (uint32_t v = 0; v < n; ++v) RETURN_IF_ERROR(errors[v]);
    for (auto& in : inbox) in.clear();
    for (uint32_t v = 0; v < n; ++v) {
      for (Outgoing& o : sent[v]) {
        std::string bytes = o.message.SerializeAsString();
        ++output.stats.messages;
        output.stats.message_bytes += bytes.size();
        output.stats.vectors_sent +=
            substitution_internal::VectorsOf(o.message).size();
        inbox[o.to].emplace_back(v, std::move(bytes));
      }
      sent[v].clear();
    }
    ParallelFor(n, n < 64 ? 1 : options.threads, [&](int, size_t v) {
      for (const auto& [from, bytes] : inbox[v]) {
        v1::EdgeExchange m;
        if (!m.ParseFromString(bytes)) {
          errors[v] = absl::InternalError("a message did not parse");
          return;
        }
        absl::Status s = nodes[v]->Deliver(from, m);
        if (!s.ok()) {
          errors[v] = s;
          return;
        }
      }
    });
    for (uint32_t v = 0; v < n; ++v) RETURN_IF_ERROR(errors[v]);
  }
  output.results.resize(n);
  for (uint32_t v = 0; v < n; ++v) {
    ASSIGN_OR_RETURN(output.results[v], nodes[v]->result());
    const SubstitutionStats& s = output.results[v].stats;
    if (!nodes[v]->abstaining()) {
      output.stats.degree += s.degree;
      output.stats.dropped += s.dropped;
      output.stats.substituted += s.substituted;
      output.stats.unresolved += s.unresolved;
    }
    if (nodes[v]->abstaining()) output.results[v].neighbours.clear();
  }
  return output;
}

// ---- AssembleGraph ----

absl::string_view SymmetrisationName(Symmetrisation s) {
  return s == Symmetrisation::kUnion ? "union" : "lower-id";
}

absl::StatusOr<Graph> AssembleGraph(
    uint32_t n, const std::vector<std::vector<uint32_t>>& reports,
    Symmetrisation rule) {
  if (reports.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d reports for %d nodes", reports.size(), n));
  }
  std::vector<Edge> edges;
  for (uint32_t v = 0; v < n; ++v) {
    const auto& r = reports[v];
    for (size_t i = 0; i < r.size(); ++i) {
      if (r[i] >= n || r[i] == v || (i > 0 && r[i] <= r[i - 1])) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "report of node %u: entry %u at position %d is not a node, is "
            "the node itself or is not strictly ascending",
            v, r[i], i));
      }
      if (rule == Symmetrisation::kLowerId && r[i] < v) continue;
      edges.push_back(Edge{std::min(v, r[i]), std::max(v, r[i])});
    }
  }
  Graph::BuildOptions o;
  o.merge_duplicates = true;
  return Graph::FromEdges(n, edges, o);
}

}  // namespace ldpgraph::edges
