#include "common/dataset/generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/random/random.h"
#include "common/status_macros.h"

namespace ldpgraph {
namespace {

// Sub-stream seeds: splitmix64 of (seed, stream), so the three streams are
// independent of each other and of nearby seeds.
uint64_t StreamSeed(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
constexpr uint64_t kClassStream = 0;
constexpr uint64_t kGraphStream = 1;
constexpr uint64_t kFeatureStream = 2;

constexpr size_t kMaxGeneratedNodes = size_t{1} << 31;
constexpr int kValueSteps = 1000;  // feature values are k / 1000

// Walker's alias method (Vose's construction): O(n) to build, O(1) to draw
// an index with probability proportional to its weight.
class AliasTable {
 public:
  AliasTable() = default;
  explicit AliasTable(const std::vector<double>& w) {
    const size_t n = w.size();
    prob_.assign(n, 1.0);
    alias_.resize(n);
    std::iota(alias_.begin(), alias_.end(), 0u);
    double total = 0;
    for (double x : w) total += x;
    std::vector<double> scaled(n);
    std::vector<uint32_t> small, large;
    for (size_t i = 0; i < n; ++i) {
      scaled[i] = w[i] * static_cast<double>(n) / total;
      (scaled[i] < 1.0 ? small : large).push_back(static_cast<uint32_t>(i));
    }
    while (!small.empty() && !large.empty()) {
      const uint32_t s = small.back(), l = large.back();
      small.pop_back();
      prob_[s] = scaled[s];
      alias_[s] = l;
      scaled[l] = (scaled[l] + scaled[s]) - 1.0;
      if (scaled[l] < 1.0) {
        large.pop_back();
        small.push_back(l);
      }
    }
    // Leftovers (rounding) keep probability 1.
  }
  uint32_t Draw(RandomSource& rng) const {
    const uint32_t i = static_cast<uint32_t>(rng.UniformInt(prob_.size()));
    return rng.UniformDouble() < prob_[i] ? i : alias_[i];
  }

 private:
  std::vector<double> prob_;
  std::vector<uint32_t> alias_;
};

uint64_t PackEdge(uint32_t a, uint32_t b) {
  if (a > b) std::swap(a, b);
  return (uint64_t{a} << 32) | b;
}

// Fills `have` (sorted, distinct) with exactly `quota` edges, each drawn by
// draw() (which never returns a self loop), in rounds: draw the deficit,
// sort, merge with what is there, repeat. `budget` bounds the total draws.
template <typename DrawFn>
absl::Status FillBlock(size_t quota, DrawFn draw, uint64_t& budget,
                       std::vector<uint64_t>& have) {
  have.clear();
  std::vector<uint64_t> fresh, merged;
  while (have.size() < quota) {
    const size_t need = quota - have.size();
    if (need > budget) {
      return absl::InternalError(
          "edge placement did not converge (too many repeated edges)");
    }
    budget -= need;
    fresh.resize(need);
    for (size_t i = 0; i < need; ++i) fresh[i] = draw();
    std::sort(fresh.begin(), fresh.end());
    fresh.erase(std::unique(fresh.begin(), fresh.end()), fresh.end());
    if (have.empty()) {
      have.swap(fresh);
    } else {
      merged.clear();
      merged.reserve(have.size() + fresh.size());
      std::set_union(have.begin(), have.end(), fresh.begin(), fresh.end(),
                     std::back_inserter(merged));
      have.swap(merged);
    }
  }
  return absl::OkStatus();
}

size_t ClassSize(size_t nodes, int classes, int c) {
  return nodes / classes + (static_cast<size_t>(c) < nodes % classes ? 1 : 0);
}

uint64_t Pairs(uint64_t s) { return s < 2 ? 0 : s * (s - 1) / 2; }

struct EdgePlan {
  uint64_t m = 0;
  std::vector<uint64_t> intra;  // quota per class
  uint64_t inter = 0;
};

// Splits m edges into per-class intra quotas (largest remainder, by pairs)
// and the inter-class quota. Pure integer arithmetic.
EdgePlan PlanEdges(const GeneratorOptions& o) {
  EdgePlan p;
  const double m = std::round(static_cast<double>(o.nodes) * o.avg_degree / 2);
  p.m = static_cast<uint64_t>(m);
  const uint64_t m_in = static_cast<uint64_t>(
      std::round(static_cast<double>(p.m) * o.homophily));
  p.inter = p.m - m_in;
  std::vector<uint64_t> pairs(o.classes);
  unsigned __int128 total = 0;
  for (int c = 0; c < o.classes; ++c) {
    pairs[c] = Pairs(ClassSize(o.nodes, o.classes, c));
    total += pairs[c];
  }
  p.intra.assign(o.classes, 0);
  if (m_in == 0 || total == 0) return p;
  std::vector<std::pair<uint64_t, int>> remainders(o.classes);
  uint64_t assigned = 0;
  for (int c = 0; c < o.classes; ++c) {
    const unsigned __int128 num = static_cast<unsigned __int128>(m_in) * pairs[c];
    p.intra[c] = static_cast<uint64_t>(num / total);
    remainders[c] = {static_cast<uint64_t>(num % total), c};
    assigned += p.intra[c];
  }
  std::sort(remainders.begin(), remainders.end(),
            [](const auto& a, const auto& b) {
              return a.first != b.first ? a.first > b.first : a.second < b.second;
            });
  for (uint64_t i = 0; assigned < m_in; ++i, ++assigned) {
    ++p.intra[remainders[i].second];
  }
  return p;
}

std::string OptionsJson(const GeneratorOptions& o) {
  nlohmann::ordered_json j;
  j["generator_version"] = kGeneratorVersion;
  j["model"] = "degree-corrected stochastic block model";
  j["nodes"] = o.nodes;
  j["classes"] = o.classes;
  j["features"] = o.features;
  j["avg_degree"] = o.avg_degree;
  j["homophily"] = o.homophily;
  j["seed"] = o.seed;
  j["degree_exponent"] = o.degree_exponent;
  j["features_per_node"] = ResolvedFeaturesPerNode(o);
  j["topic_weight"] = o.topic_weight;
  return j.dump();
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

}  // namespace

GeneratorOptions DefaultGeneratorOptions() {
  GeneratorOptions o;
  o.nodes = 3000;
  o.classes = 6;
  o.features = 64;
  o.avg_degree = 10;
  o.homophily = 0.8;
  o.seed = 1;
  o.degree_exponent = 2.5;
  o.topic_weight = 0.4;
  return o;
}

int ResolvedFeaturesPerNode(const GeneratorOptions& o) {
  if (o.features_per_node) return *o.features_per_node;
  const int r = static_cast<int>(std::lround(o.features / 4.0));
  return std::min(o.features, std::clamp(r, 1, 20));
}

absl::Status ValidateGeneratorOptions(const GeneratorOptions& o) {
  if (o.classes < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("classes must be >= 2, got ", o.classes));
  }
  if (o.nodes < 2 * static_cast<size_t>(o.classes) ||
      o.nodes >= kMaxGeneratedNodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nodes must be >= 2 * classes (", 2 * static_cast<size_t>(o.classes),
        ") and < 2^31, got ", o.nodes));
  }
  if (o.features < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("features must be >= 1, got ", o.features));
  }
  if (!(std::isfinite(o.homophily) && o.homophily >= 0 && o.homophily <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("homophily must be in [0, 1], got ", o.homophily));
  }
  const double max_degree = static_cast<double>(o.nodes) - 1;
  if (!(std::isfinite(o.avg_degree) && o.avg_degree > 0 &&
        o.avg_degree < max_degree)) {
    return absl::InvalidArgumentError(
        absl::StrCat("avg_degree must be > 0 and < nodes - 1 (", max_degree,
                     "), got ", o.avg_degree));
  }
  if (!(o.degree_exponent == 0 ||
        (o.degree_exponent > 2 && o.degree_exponent <= 100))) {
    return absl::InvalidArgumentError(
        absl::StrCat("degree_exponent must be 0 (off) or in (2, 100], got ",
                     o.degree_exponent));
  }
  if (o.features_per_node &&
      (*o.features_per_node < 1 || *o.features_per_node > o.features)) {
    return absl::InvalidArgumentError(
        absl::StrCat("features_per_node must be in [1, features] = [1, ",
                     o.features, "], got ", *o.features_per_node));
  }
  if (!(std::isfinite(o.topic_weight) && o.topic_weight >= 0 &&
        o.topic_weight <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("topic_weight must be in [0, 1], got ", o.topic_weight));
  }
  // Block feasibility: at most half of each block's pairs.
  const EdgePlan plan = PlanEdges(o);
  if (plan.m == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "avg_degree ", o.avg_degree, " gives no edge on ", o.nodes, " nodes"));
  }
  for (int c = 0; c < o.classes; ++c) {
    const uint64_t pairs = Pairs(ClassSize(o.nodes, o.classes, c));
    if (plan.intra[c] > pairs / 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "avg_degree ", o.avg_degree, " with homophily ", o.homophily,
          " needs ", plan.intra[c], " edges inside class ", c, " of ",
          ClassSize(o.nodes, o.classes, c), " nodes (", pairs,
          " pairs; at most half may be used): lower avg_degree or "
          "homophily, or use fewer classes"));
    }
  }
  uint64_t inter_pairs = Pairs(o.nodes);
  for (int c = 0; c < o.classes; ++c) {
    inter_pairs -= Pairs(ClassSize(o.nodes, o.classes, c));
  }
  if (plan.inter > inter_pairs / 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "avg_degree ", o.avg_degree, " with homophily ", o.homophily,
        " needs ", plan.inter, " edges between classes of ", inter_pairs,
        " possible (at most half may be used): lower avg_degree or raise "
        "homophily"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Dataset> GenerateDataset(const GeneratorOptions& o) {
  return GenerateDataset(o, GeneratorProgress());
}

namespace {

// The planted classes: every class the same size (up to one), members drawn
// by a shuffle of the nodes. labels[v] is v's class; members[c] lists class
// c's nodes in ascending order.
void AssignClasses(const GeneratorOptions& o, std::vector<int32_t>* labels,
                   std::vector<std::vector<uint32_t>>* members) {
  const size_t n = o.nodes;
  const int num_classes = o.classes;
  labels->assign(n, 0);
  members->assign(num_classes, {});
  PublicRandom rng(StreamSeed(o.seed, kClassStream));
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  for (size_t i = n - 1; i > 0; --i) {
    std::swap(order[i], order[rng.UniformInt(i + 1)]);
  }
  for (int c = 0; c < num_classes; ++c) {
    (*members)[c].reserve(ClassSize(n, num_classes, c));
  }
  for (size_t p = 0; p < n; ++p) {
    (*labels)[order[p]] = static_cast<int32_t>(p % num_classes);
  }
  for (size_t v = 0; v < n; ++v) {
    (*members)[(*labels)[v]].push_back(static_cast<uint32_t>(v));
  }
}

// Each node's degree propensity: Pareto with the options' tail exponent
// (1 everywhere when it is 0), capped at sqrt(n), normalised to mean 1
// within each class.
std::vector<double> DegreePropensities(
    const GeneratorOptions& o, const std::vector<std::vector<uint32_t>>& members,
    PublicRandom& rng) {
  const size_t n = o.nodes;
  std::vector<double> theta(n, 1.0);
  if (o.degree_exponent > 0) {
    const double cap = std::sqrt(static_cast<double>(n));
    const double power = -1.0 / (o.degree_exponent - 1.0);
    for (size_t v = 0; v < n; ++v) {
      // Rounded to 2^-16 so that a last-bit difference in a C library's
      // pow does not change the data (see the header).
      const double p = std::pow(1.0 - rng.UniformDouble(), power);
      theta[v] = std::min(cap, std::ldexp(std::round(std::ldexp(p, 16)), -16));
    }
  }
  for (const std::vector<uint32_t>& mem : members) {
    double sum = 0;
    for (uint32_t v : mem) sum += theta[v];
    const double scale = static_cast<double>(mem.size()) / sum;
    for (uint32_t v : mem) theta[v] *= scale;
  }
  return theta;
}

// The planned edges as sorted packed keys: each class's block, then the
// pairs between classes, endpoints drawn in proportion to propensity.
absl::StatusOr<std::vector<uint64_t>> DrawEdgeKeys(
    const GeneratorOptions& o, const EdgePlan& plan,
    const std::vector<int32_t>& labels,
    const std::vector<std::vector<uint32_t>>& members) {
  PublicRandom rng(StreamSeed(o.seed, kGraphStream));
  const std::vector<double> theta = DegreePropensities(o, members, rng);
  // Generous bound on draws: far above what any valid option needs.
  uint64_t budget = 200 * plan.m + 1000000;
  std::vector<uint64_t> keys;
  keys.reserve(plan.m);
  std::vector<uint64_t> block;
  for (int c = 0; c < o.classes; ++c) {
    if (plan.intra[c] == 0) continue;
    const std::vector<uint32_t>& mem = members[c];
    std::vector<double> w(mem.size());
    for (size_t i = 0; i < mem.size(); ++i) w[i] = theta[mem[i]];
    const AliasTable table(w);
    auto draw = [&]() {
      while (true) {
        const uint32_t a = table.Draw(rng), b = table.Draw(rng);
        if (a != b) return PackEdge(mem[a], mem[b]);
      }
    };
    RETURN_IF_ERROR(FillBlock(plan.intra[c], draw, budget, block));
    keys.insert(keys.end(), block.begin(), block.end());
  }
  if (plan.inter > 0) {
    const AliasTable table(theta);
    auto draw = [&]() {
      const uint32_t a = table.Draw(rng);
      while (true) {
        const uint32_t b = table.Draw(rng);
        if (labels[b] != labels[a]) return PackEdge(a, b);
      }
    };
    RETURN_IF_ERROR(FillBlock(plan.inter, draw, budget, block));
    keys.insert(keys.end(), block.begin(), block.end());
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

// The graph of the packed keys (consumed: freed before the graph is built).
absl::StatusOr<Graph> GraphOfKeys(size_t n, std::vector<uint64_t>& keys) {
  std::vector<Edge> edges(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    edges[i] = {static_cast<NodeId>(keys[i] >> 32),
                static_cast<NodeId>(keys[i] & 0xFFFFFFFFu)};
  }
  std::vector<uint64_t>().swap(keys);
  Graph::BuildOptions build;
  build.allow_self_loops = false;
  build.merge_duplicates = false;
  return Graph::FromEdges(n, edges, build);
}

// Sparse features: each class owns a topic of dim / classes dimensions; a
// node has about ResolvedFeaturesPerNode distinct non-zeros, each from its
// class's topic with probability topic_weight, else uniform, valued k/1000.
SparseRows DrawFeatures(const GeneratorOptions& o,
                        const std::vector<int32_t>& labels) {
  const size_t n = o.nodes;
  const int num_classes = o.classes;
  PublicRandom rng(StreamSeed(o.seed, kFeatureStream));
  const uint32_t dim = static_cast<uint32_t>(o.features);
  std::vector<uint32_t> perm(dim);
  std::iota(perm.begin(), perm.end(), 0u);
  for (uint32_t i = dim - 1; i > 0; --i) {
    std::swap(perm[i], perm[rng.UniformInt(uint64_t{i} + 1)]);
  }
  const uint32_t t = std::max<uint32_t>(1, dim / num_classes);
  std::vector<std::vector<uint32_t>> topic(num_classes);
  for (int c = 0; c < num_classes; ++c) {
    for (uint32_t j = 0; j < t; ++j) {
      topic[c].push_back(
          perm[(uint64_t{static_cast<uint32_t>(c)} * t + j) % dim]);
    }
  }
  const int r = ResolvedFeaturesPerNode(o);
  const uint32_t r_lo = std::clamp<uint32_t>((r + 1) / 2, 1, dim);
  const uint32_t r_hi = std::clamp<uint32_t>((3 * r) / 2, r_lo, dim);
  SparseRows x;
  x.cols = dim;
  x.indices.reserve(n * static_cast<size_t>(r));
  x.values.reserve(n * static_cast<size_t>(r));
  x.offsets.reserve(n + 1);
  std::vector<uint32_t> stamp(dim, 0);  // stamp[j] == v + 1: j taken by v
  std::vector<uint32_t> idx;
  std::vector<float> val;
  for (size_t v = 0; v < n; ++v) {
    const uint32_t mark = static_cast<uint32_t>(v + 1);
    const std::vector<uint32_t>& own = topic[labels[v]];
    const uint32_t count =
        r_lo + static_cast<uint32_t>(rng.UniformInt(r_hi - r_lo + 1));
    idx.clear();
    for (uint32_t s = 0; s < count; ++s) {
      uint32_t j;
      if (rng.Bernoulli(o.topic_weight)) {
        j = own[rng.UniformInt(own.size())];
        if (stamp[j] == mark) j = static_cast<uint32_t>(rng.UniformInt(dim));
      } else {
        j = static_cast<uint32_t>(rng.UniformInt(dim));
      }
      while (stamp[j] == mark) j = static_cast<uint32_t>(rng.UniformInt(dim));
      stamp[j] = mark;
      idx.push_back(j);
    }
    std::sort(idx.begin(), idx.end());
    val.resize(idx.size());
    for (float& y : val) {
      y = static_cast<float>(1 + rng.UniformInt(kValueSteps)) / kValueSteps;
    }
    x.AppendRow(idx, val);
  }
  return x;
}

// The metadata of a generated dataset: its counts, a description of the
// model in words, and the options as JSON.
void DescribeGenerated(const GeneratorOptions& o, const EdgePlan& plan,
                       Dataset* d) {
  const int num_classes = o.classes;
  DatasetMeta& meta = d->meta;
  meta.name = "generated";
  meta.nodes = o.nodes;
  meta.edges = d->graph.num_edges();
  meta.features = static_cast<size_t>(o.features);
  meta.classes = num_classes;
  meta.source = "ldpgraph generate";
  meta.license = "generated data, no restrictions";
  meta.notes = absl::StrCat(
      "Synthetic: a degree-corrected stochastic block model with ",
      num_classes, " balanced planted classes; ", plan.m,
      " distinct undirected edges, ", plan.m - plan.inter,
      " of them inside a class (edge homophily ",
      plan.m == 0 ? 0.0 : static_cast<double>(plan.m - plan.inter) / plan.m,
      "); degree propensities ",
      o.degree_exponent > 0
          ? absl::StrCat("Pareto with tail exponent ", o.degree_exponent,
                         " capped at sqrt(nodes)")
          : std::string("uniform"),
      "; each class owns a topic of ",
      std::max(1, o.features / num_classes), " of the ", o.features,
      " feature dimensions, and each node has about ",
      ResolvedFeaturesPerNode(o), " non-zero features, each from its class "
      "topic with probability ", o.topic_weight,
      ", else uniform, with values k/1000 uniform in (0, 1]. Every node is "
      "labelled. The \"generator\" key holds the parameters; ldpgraph's "
      "common/dataset/generator.h describes the model.");
  meta.feature_range = std::make_pair(0.0, 1.0);
  meta.feature_schema =
      "generator: every value is drawn from (0, 1], so [0, 1] is public";
  meta.generator_json = OptionsJson(o);
}

}  // namespace

absl::StatusOr<Dataset> GenerateDataset(const GeneratorOptions& o,
                                        const GeneratorProgress& progress) {
  RETURN_IF_ERROR(ValidateGeneratorOptions(o));
  auto phase_start = std::chrono::steady_clock::now();
  auto report = [&](absl::string_view phase) {
    if (progress) progress(phase, Seconds(phase_start));
    phase_start = std::chrono::steady_clock::now();
  };
  std::vector<int32_t> labels;
  std::vector<std::vector<uint32_t>> members;
  AssignClasses(o, &labels, &members);
  report("classes");
  const EdgePlan plan = PlanEdges(o);
  ASSIGN_OR_RETURN(std::vector<uint64_t> keys,
                   DrawEdgeKeys(o, plan, labels, members));
  report("edges");
  Dataset d;
  ASSIGN_OR_RETURN(d.graph, GraphOfKeys(o.nodes, keys));
  report("graph");
  d.features = DrawFeatures(o, labels);
  report("features");
  d.labels = std::move(labels);
  DescribeGenerated(o, plan, &d);
  return d;
}

double EdgeHomophily(const Graph& graph, absl::Span<const int32_t> labels) {
  uint64_t same = 0, total = 0;
  for (NodeId u = 0; u < graph.num_nodes(); ++u) {
    for (NodeId v : graph.neighbors(u)) {
      if (v < u) continue;
      ++total;
      if (labels[u] >= 0 && labels[u] == labels[v]) ++same;
    }
  }
  return total == 0 ? 0.0 : static_cast<double>(same) / total;
}

}  // namespace ldpgraph
