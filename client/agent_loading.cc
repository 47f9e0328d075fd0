// What an agent host reads at start (client/agent.h): its shard's records
// (LoadShard), the simulated attack of a poisoning scenario, and
// ldpgraph-agent's attack flags.
#include "client/agent.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/dataset/device_index.h"
#include "common/dataset/feature_schema.h"
#include "common/status_macros.h"
#include "common/wire/codec.h"
#include "common/wire/names.h"

namespace ldpgraph::agent {

absl::StatusOr<std::vector<NodeRecord>> LoadShard(
    const std::string& dataset_dir, FeatureScaling scaling, uint32_t begin,
    uint32_t end, uint64_t checksum_bytes) {
  ASSIGN_OR_RETURN(const DatasetMeta meta, LoadDatasetMeta(dataset_dir));
  ASSIGN_OR_RETURN(
      std::vector<DeviceRecord> stored,
      ReadDeviceRecords(dataset_dir, meta, begin, end, checksum_bytes));
  // One scale for the shard, shared by its records.
  std::shared_ptr<const FeatureScale> scale;
  if (scaling != FeatureScaling::kNone) {
    ASSIGN_OR_RETURN(FeatureSchema schema,
                     DeclaredFeatureSchema(meta, dataset_dir));
    ASSIGN_OR_RETURN(scale, FeatureScale::Create(std::move(schema), scaling));
  } else {
    scale = FeatureScale::AsStored(meta.features);
  }
  std::vector<NodeRecord> records;
  records.reserve(stored.size());
  for (DeviceRecord& s : stored) {
    NodeRecord r;
    r.node = s.node;
    r.features = NodeFeatures(s.indices, s.values, scale);
    if (s.label >= 0) r.label = s.label;
    r.neighbours = std::move(s.neighbours);
    r.neighbours.shrink_to_fit();
    records.push_back(std::move(r));
    s = DeviceRecord();  // its buffers, copied or moved, go now
  }
  return records;
}

absl::StatusOr<SimulatedAttack> LoadSimulatedAttack(
    const std::string& dataset_dir, FeatureScaling scaling,
    const poisoning::AttackSettings& s, uint64_t seed,
    absl::FunctionRef<bool(uint32_t)> offline, double screen_alpha,
    int attack_edges) {
  RETURN_IF_ERROR(s.Validate());
  ASSIGN_OR_RETURN(Dataset d, LoadDataset(dataset_dir));
  if (s.target_class >= d.meta.classes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the attack class ", s.target_class, " is not one of the ",
        d.meta.classes, " classes of ", dataset_dir));
  }
  // As pipeline::PreparePoisoning, step for step: a seeded deployment must
  // derive the attacker `ldpgraph eval` derives.
  const uint32_t n = static_cast<uint32_t>(d.graph.num_nodes());
  const std::vector<uint32_t> nodes =
      poisoning::MaliciousNodes(n, seed, s.fraction, offline);
  const SparseRows x = ScaleDatasetFeatures(d, scaling);
  ASSIGN_OR_RETURN(std::vector<uint32_t> ranking,
                   poisoning::RankDims(x, d.labels, nodes, s.target_class));
  std::vector<uint32_t> dims(
      ranking.begin(),
      ranking.begin() + std::min<size_t>(ranking.size(), s.target_dims));
  std::sort(dims.begin(), dims.end());
  std::optional<poisoning::AdaptivePlan> plan;
  if (s.kind == poisoning::AttackKind::kAdaptive) {
    // The attacker knows the screen's public settings: n and alpha.
    plan = poisoning::AdaptivePlan{n, nodes.size(), screen_alpha,
                                   std::move(ranking)};
  }
  ASSIGN_OR_RETURN(std::unique_ptr<poisoning::Adversary> adversary,
                   poisoning::Adversary::Create(s.target_class, std::move(dims),
                                                s.kind, std::move(plan)));
  SimulatedAttack out;
  out.adversary = std::move(adversary);
  if (s.kind == poisoning::AttackKind::kFakeEdges) {
    ASSIGN_OR_RETURN(out.edge_adversary,
                     poisoning::EdgeAdversary::Create(n, nodes, attack_edges));
  }
  out.nodes.insert(nodes.begin(), nodes.end());
  return out;
}

// --- ldpgraph-agent's attack flags -------------------------------------------

const std::vector<std::string>& SimulatedAttackFlagNames() {
  static const auto* names = new std::vector<std::string>{
      "malicious", "malicious-seed", "attack", "attack-class", "attack-dims",
      "attack-alpha", "attack-edges"};
  return *names;
}

absl::StatusOr<SimulatedAttackFlags> ParseSimulatedAttackFlags(
    const CliArgs& a) {
  SimulatedAttackFlags f;
  poisoning::AttackSettings& s = f.settings;
  ASSIGN_OR_RETURN(auto fraction, a.GetDouble("malicious"));
  if (fraction) {
    if (!(*fraction >= 0 && *fraction < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--malicious must be in [0, 1), got ", *fraction));
    }
    s.fraction = *fraction;
  }
  ASSIGN_OR_RETURN(auto seed, a.GetUint("malicious-seed"));
  if (seed) f.seed = *seed;
  if (auto kind = a.Get("attack")) {
    ASSIGN_OR_RETURN(s.kind, poisoning::kAttackNames.Parse(*kind, "--attack"));
  }
  ASSIGN_OR_RETURN(auto cls, a.GetInt("attack-class"));
  if (cls) {
    if (*cls < 0 || *cls > 1 << 30) {
      return absl::InvalidArgumentError(
          absl::StrCat("--attack-class must be a class >= 0, got ", *cls));
    }
    s.target_class = static_cast<int>(*cls);
  }
  ASSIGN_OR_RETURN(auto dims, a.GetInt("attack-dims"));
  if (dims) {
    if (*dims < 1 || *dims > 1 << 30) {
      return absl::InvalidArgumentError(
          absl::StrCat("--attack-dims must be >= 1, got ", *dims));
    }
    s.target_dims = static_cast<int>(*dims);
  }
  ASSIGN_OR_RETURN(auto alpha, a.GetDouble("attack-alpha"));
  if (alpha) {
    if (!(*alpha > 0 && *alpha < 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--attack-alpha must be in (0, 1), got ", *alpha));
    }
    f.screen_alpha = *alpha;
  }
  ASSIGN_OR_RETURN(auto victims, a.GetInt("attack-edges"));
  if (victims) {
    if (*victims < 1 || *victims > 1 << 30) {
      return absl::InvalidArgumentError(
          absl::StrCat("--attack-edges must be >= 1, got ", *victims));
    }
    f.attack_edges = static_cast<int>(*victims);
  }
  if (s.fraction == 0) {
    for (const std::string& flag : SimulatedAttackFlagNames()) {
      if (flag != "malicious" && a.Has(flag)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", flag, " applies to --malicious F with F > 0"));
      }
    }
  }
  if (alpha && s.kind != poisoning::AttackKind::kAdaptive) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--attack-alpha applies to --attack adaptive (the attacker that "
        "knows the screen), not ", poisoning::kAttackNames.Name(s.kind)));
  }
  if (victims && s.kind != poisoning::AttackKind::kFakeEdges) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--attack-edges applies to --attack fake-edges, not ",
        poisoning::kAttackNames.Name(s.kind)));
  }
  if (absl::Status v = s.Validate(); !v.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--malicious: ", v.message()));
  }
  return f;
}

}  // namespace ldpgraph::agent
