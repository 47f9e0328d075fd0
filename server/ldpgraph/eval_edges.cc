#include "server/ldpgraph/eval_edges.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/attacks/poisoning.h"
#include "common/random/random.h"
#include "common/status_macros.h"
#include "server/ldpgraph/tool_util.h"

namespace ldpgraph::tool {
namespace {

using pipeline::EdgeMechanism;
using pipeline::PrivateEdgesConfig;

bool FakeEdges(const pipeline::PipelineConfig& c) {
  return c.attack_fraction > 0 &&
         c.attack_kind == poisoning::AttackKind::kFakeEdges;
}

}  // namespace

absl::StatusOr<EvalEdgesOptions> ParseEvalEdgesFlags(
    const CliArgs& a, const pipeline::PipelineConfig& c) {
  EvalEdgesOptions o;
  const auto kind = a.Get("edges");
  if (!kind) {
    for (const char* f : {"edge-epsilon", "blink-delta", "blink-variant"}) {
      if (a.Get(f)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", f, " applies to --edges rr or blink"));
      }
    }
    if (FakeEdges(c)) {
      return absl::InvalidArgumentError(
          "--attack fake-edges crafts edge reports: it needs --edges rr or "
          "blink");
    }
    if (c.defences.edge_consistency) {
      return absl::InvalidArgumentError(
          "--defence edge-consistency screens edge reports: it needs --edges "
          "rr or blink");
    }
  }
  if (auto v = a.Get("attack-edges")) {
    if (!FakeEdges(c)) {
      return absl::InvalidArgumentError(
          "--attack-edges applies to --attack fake-edges (with --malicious F)");
    }
    ASSIGN_OR_RETURN(auto victims, a.GetInt("attack-edges"));
    ASSIGN_OR_RETURN(o.attack_edges, FlagToInt(*victims, "attack-edges", 1));
  }
  if (!kind) return o;
  if (c.task != v1::PIPELINE_TASK_NODE) {
    return absl::InvalidArgumentError(
        "--edges applies to the node task (the link task holds out edges of "
        "the curator's graph)");
  }
  PrivateEdgesConfig pc;
  ASSIGN_OR_RETURN(pc.kind,
                   pipeline::kEdgeMechanismNames.Parse(*kind, "--edges"));
  ASSIGN_OR_RETURN(auto eps, a.GetDouble("edge-epsilon"));
  if (eps) pc.epsilon = *eps;
  if (pc.kind != EdgeMechanism::kBlink) {
    for (const char* f : {"blink-delta", "blink-variant"}) {
      if (a.Get(f)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", f, " applies to --edges blink"));
      }
    }
  }
  ASSIGN_OR_RETURN(auto delta, a.GetDouble("blink-delta"));
  if (delta) pc.blink_delta = *delta;
  if (auto v = a.Get("blink-variant")) {
    ASSIGN_OR_RETURN(pc.blink_variant,
                     edges::kBlinkVariantNames.Parse(*v, "--blink-variant"));
  }
  pc.edge_consistency = c.defences.edge_consistency;
  absl::Status valid = pc.Validate();
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--edges ", *kind, ": ", valid.message()));
  }
  o.config = pc;
  return o;
}

pipeline::RunOverrides EvalRunGraph::overrides() const {
  pipeline::RunOverrides o;
  if (edges) o.graph = &edges->graph;
  // A node the edge screen caught is not trusted with its label either.
  if (edges && edges->screen) o.untrusted = &edges->screen->flagged;
  return o;
}

void EvalRunGraph::AddTo(nlohmann::json* run) const {
  if (edges) (*run)["edges"] = pipeline::PrivateEdgesToJson(*edges);
}

absl::StatusOr<EvalRunGraph> BuildEvalRunGraph(
    const Dataset& d, const pipeline::PipelineConfig& c,
    const EvalEdgesOptions& o, uint64_t seed, int run) {
  EvalRunGraph out;
  if (!o.enabled()) return out;
  const uint32_t n = static_cast<uint32_t>(d.graph.num_nodes());
  std::unique_ptr<poisoning::EdgeAdversary> adversary;
  if (FakeEdges(c)) {
    // The pipeline's attacker's nodes (PreparePoisoning): the same seed.
    ASSIGN_OR_RETURN(
        adversary,
        poisoning::EdgeAdversary::Create(
            n, poisoning::MaliciousNodes(n, seed, c.attack_fraction),
            o.attack_edges));
  }
  std::vector<SeededRandomForTesting> seeded;
  std::unique_ptr<SecureRandom> secure;
  if (c.secure_noise) {
    ASSIGN_OR_RETURN(secure, SecureRandom::Create());
  } else {
    const uint64_t s = pipeline::EdgeNoiseSeed(seed, run);
    seeded.reserve(n);
    for (uint32_t v = 0; v < n; ++v) seeded.emplace_back(NodeNoiseSeed(s, v));
  }
  ASSIGN_OR_RETURN(
      out.edges,
      pipeline::BuildPrivateEdges(
          d.graph, *o.config, adversary.get(),
          [&](uint32_t v) -> RandomSource& {
            return secure != nullptr ? static_cast<RandomSource&>(*secure)
                                     : seeded[v];
          }));
  return out;
}

void AddEdgesSettings(const EvalEdgesOptions& o,
                      const pipeline::PipelineConfig& c,
                      nlohmann::json* parameters) {
  if (!o.enabled()) return;
  nlohmann::json j = pipeline::PrivateEdgesConfigToJson(*o.config);
  if (FakeEdges(c)) j["attack_edges"] = o.attack_edges;
  (*parameters)["edges"] = std::move(j);
}

std::string EdgesSummary(const EvalEdgesOptions& o,
                         const nlohmann::json& per_run) {
  if (!o.enabled()) return "";
  std::vector<std::string> runs;
  for (const auto& r : per_run) {
    if (!r.contains("edges")) continue;
    const auto& e = r["edges"];
    std::string s = absl::StrFormat("%d edges", e["edges"].get<uint64_t>());
    if (!e["screen"].is_null()) {
      absl::StrAppend(
          &s, absl::StrFormat(", %d flagged (%d of %d malicious)",
                              e["screen"]["flagged_nodes"].get<uint64_t>(),
                              e["malicious_flagged"].get<uint64_t>(),
                              e["malicious"].get<uint64_t>()));
    }
    runs.push_back(std::move(s));
  }
  return absl::StrFormat("%s graph, eps_e %g, per run: %s",
                         pipeline::kEdgeMechanismNames.Name(o.config->kind),
                         o.config->epsilon, absl::StrJoin(runs, "; "));
}

}  // namespace ldpgraph::tool
