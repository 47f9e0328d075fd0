#include "server/pipeline/edge_screen.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ldpgraph::pipeline {
namespace {

// Each list strictly ascending, below n, without its node; the sizes match.
absl::Status CheckReports(const EdgeScreenParams& params,
                          const EdgeReports& reports) {
  const uint32_t n = params.nodes;
  if (reports.neighbours.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("edge screen: ", reports.neighbours.size(),
                     " neighbour lists for ", n, " nodes"));
  }
  if (!reports.reported.empty() && reports.reported.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("edge screen: ", reports.reported.size(),
                     " reported flags for ", n, " nodes"));
  }
  if (params.degree_epsilon && reports.noisy_degrees.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("edge screen: ", reports.noisy_degrees.size(),
                     " noisy degrees for ", n, " nodes (Blink reports one "
                     "per node)"));
  }
  for (uint32_t v = 0; v < n; ++v) {
    const auto& list = reports.neighbours[v];
    for (size_t i = 0; i < list.size(); ++i) {
      if (list[i] >= n || list[i] == v ||
          (i > 0 && list[i] <= list[i - 1])) {
        return absl::InvalidArgumentError(absl::StrCat(
            "edge screen: node ", v, "'s report must be strictly ascending, "
            "below ", n, " and without ", v, "; entry ", i, " is ", list[i]));
      }
    }
    const bool reported = reports.reported.empty() || reports.reported[v];
    if (params.degree_epsilon && reported &&
        !std::isfinite(reports.noisy_degrees[v])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "edge screen: node ", v, "'s noisy degree is not finite"));
    }
  }
  return absl::OkStatus();
}

// Check 1 (Blink): each active node's noisy degree against the degree its
// bits imply, at `level` per node (split half and half between the bits
// and the noise). The nodes flagged (out->degree_flagged) leave *active.
void CheckDegrees(const EdgeReports& reports, double level,
                  std::vector<bool>* active, EdgeScreenResult* out) {
  const uint32_t n = out->nodes;
  const double p = out->flip_probability;
  out->degree_level = level;
  out->bits_bound = BitsDeviationBound(n - 1, p, level / 2);
  out->noise_bound = DegreeNoiseBound(out->degree_epsilon, level / 2);
  out->degree_threshold =
      out->noise_bound + out->bits_bound / (1.0 - 2.0 * p);
  const double noise_ones = static_cast<double>(n - 1) * p;
  for (uint32_t i = 0; i < n; ++i) {
    if (!(*active)[i]) continue;
    const double bits_degree =
        (static_cast<double>(reports.neighbours[i].size()) - noise_ones) /
        (1.0 - 2.0 * p);
    const double gap = reports.noisy_degrees[i] - bits_degree;
    out->degree_gap[i] = gap;
    out->max_degree_gap = std::max(out->max_degree_gap, std::abs(gap));
    if (std::abs(gap) > out->degree_threshold) {
      out->degree_flagged.push_back(i);
    }
  }
  for (uint32_t i : out->degree_flagged) (*active)[i] = false;
}

// Who claims each node among the active ones: node j's claimants are
// nodes[offsets[j]] .. nodes[offsets[j + 1] - 1], ascending.
struct EdgeClaimants {
  std::vector<uint64_t> offsets;
  std::vector<uint32_t> nodes;
};

EdgeClaimants ClaimantsOf(const EdgeReports& reports,
                          const std::vector<bool>& active) {
  const uint32_t n = static_cast<uint32_t>(active.size());
  EdgeClaimants out;
  out.offsets.assign(n + 1, 0);
  for (uint32_t i = 0; i < n; ++i) {
    if (!active[i]) continue;
    for (uint32_t j : reports.neighbours[i]) ++out.offsets[j + 1];
  }
  for (uint32_t v = 0; v < n; ++v) out.offsets[v + 1] += out.offsets[v];
  out.nodes.resize(out.offsets[n]);
  std::vector<uint64_t> next(out.offsets.begin(), out.offsets.end() - 1);
  for (uint32_t i = 0; i < n; ++i) {
    if (!active[i]) continue;
    for (uint32_t j : reports.neighbours[i]) out.nodes[next[j]++] = i;
  }
  return out;
}

// Whether j's report lists i.
bool ConfirmsClaim(const EdgeReports& reports, uint32_t j, uint32_t i) {
  const auto& back = reports.neighbours[j];
  return std::binary_search(back.begin(), back.end(), i);
}

// Check 2: one-sided claims among the nodes still active, at `level` per
// node, peeled: the node with the most (the first on a tie) is flagged
// (out->one_sided_flagged) and leaves *active while it passes the
// threshold of the nodes left.
void CheckOneSided(const EdgeReports& reports, double level,
                   std::vector<bool>* active, EdgeScreenResult* out) {
  const uint32_t n = out->nodes;
  const double p = out->flip_probability;
  std::vector<bool>& live = *active;
  uint32_t left = 0;
  for (uint32_t v = 0; v < n; ++v) left += live[v] ? 1 : 0;
  const double q = p * (1.0 - p);
  out->one_sided_level = level;
  if (left < 2) return;
  out->one_sided_mean = static_cast<double>(left - 1) * q;
  // Who claims each node, to update the counts when it leaves.
  const EdgeClaimants claimants = ClaimantsOf(reports, live);
  for (uint32_t i = 0; i < n; ++i) {
    if (!live[i]) continue;
    uint32_t c = 0;
    for (uint32_t j : reports.neighbours[i]) {
      if (live[j] && !ConfirmsClaim(reports, j, i)) ++c;
    }
    out->one_sided[i] = c;
  }
  uint64_t threshold = BinomialUpperQuantile(left - 1, q, level);
  out->one_sided_threshold = threshold;
  while (left >= 2) {
    uint32_t worst = n;
    for (uint32_t i = 0; i < n; ++i) {
      if (!live[i]) continue;
      if (worst == n || out->one_sided[i] > out->one_sided[worst]) worst = i;
    }
    if (out->one_sided[worst] <= threshold) break;
    out->one_sided_flagged.push_back(worst);
    live[worst] = false;
    --left;
    // Its denials no longer count against the nodes that claimed it.
    for (uint64_t k = claimants.offsets[worst];
         k < claimants.offsets[worst + 1]; ++k) {
      const uint32_t i = claimants.nodes[k];
      if (live[i] && !ConfirmsClaim(reports, worst, i)) --out->one_sided[i];
    }
    if (left >= 2) threshold = BinomialUpperQuantile(left - 1, q, level);
  }
  out->one_sided_last_threshold = threshold;
  std::sort(out->one_sided_flagged.begin(), out->one_sided_flagged.end());
  for (uint32_t i = 0; i < n; ++i) {
    if (live[i]) {
      out->max_one_sided = std::max(out->max_one_sided, out->one_sided[i]);
    }
  }
}

}  // namespace

absl::Status EdgeScreenParams::Validate() const {
  if (nodes < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("edge screen: nodes must be >= 2, got ", nodes));
  }
  if (!(flip_probability > 0 && flip_probability < 0.5)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "edge screen: flip probability must be in (0, 1/2), got ",
        flip_probability));
  }
  if (degree_epsilon &&
      !(*degree_epsilon > 0 && std::isfinite(*degree_epsilon))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "edge screen: degree epsilon must be finite and > 0, got ",
        *degree_epsilon));
  }
  if (!(alpha > 0 && alpha < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("edge screen: alpha must be in (0, 1), got ", alpha));
  }
  return absl::OkStatus();
}

double BitsDeviationBound(uint64_t bits, double p, double level) {
  const double l = std::log(2.0 / level);
  const double s2 = static_cast<double>(bits) * p * (1.0 - p);
  const double a = l * (1.0 - p) / 3.0;
  // The positive root of t^2 = l (2 s2 + 2 (1-p) t / 3).
  return a + std::sqrt(a * a + 2.0 * l * s2);
}

double DegreeNoiseBound(double degree_epsilon, double level) {
  return std::log(2.0 / level) / degree_epsilon;
}

absl::StatusOr<EdgeScreenResult> ScreenEdgeReports(
    const EdgeScreenParams& params, const EdgeReports& reports) {
  RETURN_IF_ERROR(params.Validate());
  RETURN_IF_ERROR(CheckReports(params, reports));
  const uint32_t n = params.nodes;
  // Whether a node is still evidence: it reported and nothing flagged it.
  std::vector<bool> active(n);
  for (uint32_t v = 0; v < n; ++v) {
    active[v] = reports.reported.empty() || reports.reported[v];
  }
  EdgeScreenResult out;
  out.alpha = params.alpha;
  out.nodes = n;
  out.flip_probability = params.flip_probability;
  out.degree_check = params.degree_epsilon.has_value();
  out.checks = out.degree_check ? 2 : 1;
  for (uint32_t v = 0; v < n; ++v) out.reporters += active[v] ? 1 : 0;
  out.one_sided.assign(n, 0);
  if (out.degree_check) {
    out.degree_epsilon = *params.degree_epsilon;
    out.degree_gap.assign(n, 0.0);
  }
  const uint32_t m = out.reporters;
  if (m < 2) return out;
  const double level = params.alpha / (out.checks * static_cast<double>(m));
  if (out.degree_check) CheckDegrees(reports, level, &active, &out);
  CheckOneSided(reports, level, &active, &out);
  std::set_union(out.one_sided_flagged.begin(), out.one_sided_flagged.end(),
                 out.degree_flagged.begin(), out.degree_flagged.end(),
                 std::back_inserter(out.flagged));
  return out;
}

nlohmann::json EdgeScreenToJson(const EdgeScreenResult& s) {
  nlohmann::json j;
  j["screen"] = "applied";
  j["alpha"] = s.alpha;
  j["nodes"] = s.nodes;
  j["reporters"] = s.reporters;
  j["flip_probability"] = s.flip_probability;
  j["checks"] = s.checks;
  j["one_sided"] = {{"threshold", s.one_sided_threshold},
                    {"last_threshold", s.one_sided_last_threshold},
                    {"level", s.one_sided_level},
                    {"mean", s.one_sided_mean},
                    {"max", s.max_one_sided},
                    {"flagged_nodes", s.one_sided_flagged.size()}};
  if (s.degree_check) {
    j["degree"] = {{"epsilon", s.degree_epsilon},
                   {"level", s.degree_level},
                   {"bits_bound", s.bits_bound},
                   {"noise_bound", s.noise_bound},
                   {"threshold", s.degree_threshold},
                   {"max_gap", s.max_degree_gap},
                   {"flagged_nodes", s.degree_flagged.size()}};
  }
  j["flagged_nodes"] = s.flagged.size();
  j["flagged"] = s.flagged;
  return j;
}

}  // namespace ldpgraph::pipeline
