#include "server/ldpgraph/prepare_command.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cli_args.h"
#include "common/dataset/device_index.h"
#include "common/dataset/prepare.h"
#include "common/status_macros.h"
#include "server/ldpgraph/tool_util.h"

namespace ldpgraph::tool {
namespace {

struct Options {
  std::string dataset, out;
  bool force = false, json = false;
};

absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(CliArgs a, CliArgs::Parse(args, {"dataset", "out"},
                                             {"force", "json", "help"}));
  Options o;
  if (!a.Has("dataset") || a.Get("dataset")->empty()) {
    return absl::InvalidArgumentError(
        "--dataset is required (the dataset folder to prepare)");
  }
  o.dataset = *a.Get("dataset");
  o.out = a.Get("out").value_or(o.dataset);
  o.force = a.Flag("force");
  o.json = a.Flag("json");
  return o;
}

std::string SchemaSummary(const DatasetMeta& m) {
  if (m.feature_range.has_value()) {
    return absl::StrFormat("one range [%g, %g] for all %d features",
                           m.feature_range->first, m.feature_range->second,
                           m.features);
  }
  return absl::StrCat(m.feature_ranges.size(), " per-feature ranges");
}

}  // namespace

std::string PrepareHelp() {
  return R"(ldpgraph prepare: ready a dataset folder for agent hosts

Usage: ldpgraph prepare --dataset DIR [--out DIR2] [--force] [--json]

An agent host reads only its own nodes' records and scales their features
with the dataset's public feature schema alone: no other node's value takes
part, as on a real device. This writes what that needs:
  * meta.json's feature schema ("feature_range" [lo, hi] for every feature,
    or "feature_ranges", one [lo, hi] per feature). A folder that declares
    one keeps it. Otherwise it is computed CENTRALLY, from every node's
    values (per feature: min and max, 0 included unless every node stores
    the feature), which is the papers' preprocessing, and labelled so in
    "feature_schema". A real deployment publishes its schema instead. One
    range is written when it scales every value exactly as the per-feature
    ranges would (binary features: [0, 1]).
  * devices.idx, the device index (line offsets of nodes.svm and each node's
    neighbour list), so that a host reads its shard without the rest.
`ldpgraph generate` writes both itself. Seeded results do not move on the
folder: the central schema scales every value as ldpgraph eval does.

Flags:
  --dataset DIR  the dataset folder (README "Datasets")
  --out DIR2     write the prepared copy there (a new or empty folder)
                 instead of into DIR: for a read-only DIR such as
                 ../shared/datasets/cora
  --force        with --out: write into a non-empty folder
  --json         one JSON line: out, nodes, features, schema ("declared" or
                 "central"), feature_range or ranges, seconds

Exit codes: 0 success, 1 runtime failure (a broken dataset, a write error),
2 bad usage.

Example:
  ldpgraph prepare --dataset ../shared/datasets/cora --out /tmp/cora
)";
}

int RunPrepare(const std::vector<std::string>& args, std::ostream& out,
               std::ostream& err) {
  auto options =
      ParseCommand("prepare", args, PrepareHelp, ParseOptions, out, err);
  if (!options.ok()) return options.exit_code();
  const Options& o = *options;
  if (o.out != o.dataset) {
    if (absl::Status s = CheckOutFolder(o.out, o.force); !s.ok()) {
      err << "ldpgraph prepare: " << s.message() << "\n";
      return kExitUsageError;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  auto prepared = PrepareDataset(o.dataset, o.out);
  if (!prepared.ok()) {
    err << "ldpgraph prepare: " << prepared.status().message();
    if (o.out == o.dataset &&
        absl::IsPermissionDenied(prepared.status())) {
      err << " (a read-only folder: give --out DIR for a prepared copy)";
    }
    err << "\n";
    return kExitRuntimeError;
  }
  const DatasetMeta& m = prepared->meta;
  const double seconds = SecondsSince(start);
  const char* origin = prepared->schema_computed ? "central" : "declared";
  if (o.json) {
    nlohmann::ordered_json j;
    j["out"] = o.out;
    j["nodes"] = m.nodes;
    j["features"] = m.features;
    j["schema"] = origin;
    if (m.feature_range.has_value()) {
      j["feature_range"] = {m.feature_range->first, m.feature_range->second};
    } else {
      j["ranges"] = m.feature_ranges.size();
    }
    j["seconds"] = seconds;
    out << j.dump() << "\n";
  } else {
    out << absl::StrFormat(
        "prepared %s: %d nodes; feature schema %s: %s%s; device index %s "
        "(%.2f s)\n",
        o.out, m.nodes, origin, SchemaSummary(m),
        prepared->schema_computed
            ? " (computed from every node's values, as the papers preprocess;"
              " a real deployment publishes its schema)"
            : "",
        kDeviceIndexFile, seconds);
  }
  return kExitOk;
}

}  // namespace ldpgraph::tool
