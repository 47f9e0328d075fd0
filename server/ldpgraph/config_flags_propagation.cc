// ParsePropagationFlags (config_flags.h): how the features are propagated
// and prepared for the model. PrivGE's choice between PPR and KProp,
// KProp's settings, the standardisation, where Z is held, label denoising,
// the tuning grids LPGNN and UPGNET choose from, the feature scaling and
// PPR's settings, each group a function.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "server/ldpgraph/config_flags.h"
#include "server/ldpgraph/tool_util.h"

namespace ldpgraph::tool {
namespace {

using pipeline::Method;
using pipeline::PipelineConfig;

// --tune-feature-steps and --tune-label-steps (LPGNN only): the grids of
// K_x and K_y each run chooses from.
absl::Status ParseTuneStepGrids(const CliArgs& a, PipelineConfig* config) {
  PipelineConfig& c = *config;
  const Method method = c.method;
  for (const char* flag : {"tune-feature-steps", "tune-label-steps"}) {
    auto list = a.Get(flag);
    if (!list) continue;
    if (!pipeline::IsGnnMethod(method)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, " applies to --method lpgnn or upgnet (KProp, HOA)"));
    }
    std::vector<int>& grid = std::string(flag) == "tune-feature-steps"
                                 ? c.tune_feature_steps
                                 : c.tune_label_steps;
    if (*list == "default") {
      // HOA keeps every scale up to K: UPGNET's grid reaches further.
      const bool hoa = c.aggregator == pipeline::FeatureAggregator::kHoa;
      grid = std::string(flag) == "tune-feature-steps"
                 ? (hoa ? std::vector<int>{0, 2, 4, 8, 16, 32, 64}
                        : std::vector<int>{2, 4, 8, 16})
                 : std::vector<int>{0, 2, 4, 8};
      continue;
    }
    for (absl::string_view item : absl::StrSplit(*list, ',')) {
      int64_t k = 0;
      if (!absl::SimpleAtoi(item, &k) || k < 0 || k > 1000) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", flag, " must be 'default' or a comma-separated list of "
            "steps in [0, 1000], got '", *list, "'"));
      }
      grid.push_back(static_cast<int>(k));
    }
  }
  if (!c.tune_label_steps.empty() && c.tune_feature_steps.empty()) {
    c.tune_feature_steps = {c.feature_steps};
  }
  return absl::OkStatus();
}

// --tune-lr, --tune-weight-decay and --tune-dropout (LPGNN and UPGNET).
absl::Status ParseTuneModelGrids(const CliArgs& a, PipelineConfig* config) {
  PipelineConfig& c = *config;
  const Method method = c.method;
  // The model's grids: "default" is the re-evaluation's of UPGNET
  // (docs/papers.md, "UPGNET and the graph alone").
  struct ModelGrid {
    const char* flag;
    std::vector<double>* grid;
    std::vector<double> defaults;
    double low, high;  // the values' range, [low, high)
  };
  for (ModelGrid g :
       {ModelGrid{"tune-lr", &c.tune_learning_rate, {1e-2, 1e-3, 1e-4}, 1e-12,
                  10},
        ModelGrid{"tune-weight-decay", &c.tune_weight_decay,
                  {0, 1e-4, 1e-3, 1e-2}, 0, 10},
        ModelGrid{"tune-dropout", &c.tune_dropout, {0.25, 0.5, 0.75}, 0, 1}}) {
    auto list = a.Get(g.flag);
    if (!list) continue;
    if (!pipeline::IsGnnMethod(method)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", g.flag, " applies to --method lpgnn or upgnet"));
    }
    if (*list == "default") {
      *g.grid = g.defaults;
      continue;
    }
    for (absl::string_view item : absl::StrSplit(*list, ',')) {
      double v = 0;
      if (!absl::SimpleAtod(item, &v) || !(v >= g.low && v < g.high)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--", g.flag, " must be 'default' or a comma-separated list of "
            "values in [", g.low, ", ", g.high, "), got '", *list, "'"));
      }
      g.grid->push_back(v);
    }
  }
  return absl::OkStatus();
}

// --tune-nfr (LPGNN and UPGNET): the grid of NFR's tau.
absl::Status ParseTuneNfrGrid(const CliArgs& a, PipelineConfig* config) {
  PipelineConfig& c = *config;
  const Method method = c.method;
  if (auto list = a.Get("tune-nfr")) {
    if (!pipeline::IsGnnMethod(method)) {
      return absl::InvalidArgumentError(
          "--tune-nfr applies to --method lpgnn or upgnet");
    }
    if (*list == "default") {
      c.tune_nfr = {0, 0.1, 0.3, 0.5, 0.7, 0.9};
    } else {
      for (absl::string_view item : absl::StrSplit(*list, ',')) {
        double tau = 0;
        if (!absl::SimpleAtod(item, &tau) || !(tau >= 0 && tau < 1)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "--tune-nfr must be 'default' or a comma-separated list of "
              "values in [0, 1), got '", *list, "'"));
        }
        c.tune_nfr.push_back(tau);
      }
    }
  }
  return absl::OkStatus();
}

// The tuning grids each run chooses from (LPGNN and UPGNET): steps, the
// model's settings and NFR's tau.
absl::Status ParseTuneGrids(const CliArgs& a, PipelineConfig* config) {
  RETURN_IF_ERROR(ParseTuneStepGrids(a, config));
  RETURN_IF_ERROR(ParseTuneModelGrids(a, config));
  return ParseTuneNfrGrid(a, config);
}

// --propagation and --auto-ppr-max-nodes (PrivGE's node task).
absl::Status ParseNodePropagationFlags(const CliArgs& a,
                                       PipelineConfig* config) {
  PipelineConfig& c = *config;
  const Method method = c.method;
  if (auto p = a.Get("propagation")) {
    if (method != v1::PIPELINE_METHOD_PRIVGE ||
        c.task != v1::PIPELINE_TASK_NODE) {
      return absl::InvalidArgumentError(
          "--propagation applies to --method privge on --task node");
    }
    ASSIGN_OR_RETURN(c.propagation, pipeline::kNodePropagationNames.Parse(
                                        *p, "--propagation"));
  }
  ASSIGN_OR_RETURN(auto auto_max, a.GetInt("auto-ppr-max-nodes"));
  if (auto_max) {
    if (c.propagation != pipeline::NodePropagation::kAuto) {
      return absl::InvalidArgumentError(
          "--auto-ppr-max-nodes applies to --propagation auto (privge's "
          "node task)");
    }
    if (*auto_max < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--auto-ppr-max-nodes must be >= 0, got ", *auto_max));
    }
    c.auto_ppr_max_nodes = static_cast<size_t>(*auto_max);
  }
  return absl::OkStatus();
}

// KProp's --feature-steps, --kprop-norm and --feature-self-loops (after
// --propagation: PrivGE's node task runs KProp unless PPR alone).
absl::Status ParseKPropFlags(const CliArgs& a, PipelineConfig* config) {
  PipelineConfig& c = *config;
  const Method method = c.method;
  // KProp runs for LPGNN and UPGNET, and for PrivGE's node task unless PPR
  // alone.
  const bool kprop = pipeline::IsGnnMethod(method) ||
                     (method == v1::PIPELINE_METHOD_PRIVGE &&
                      c.task == v1::PIPELINE_TASK_NODE &&
                      c.propagation != pipeline::NodePropagation::kPpr);
  const char* kprop_runs =
      "KProp (--method lpgnn, or privge on the node task with --propagation "
      "kprop or auto)";
  ASSIGN_OR_RETURN(auto feature_steps, a.GetInt("feature-steps"));
  if (feature_steps) {
    if (!kprop) {
      return absl::InvalidArgumentError(
          absl::StrCat("--feature-steps applies to ", kprop_runs));
    }
    ASSIGN_OR_RETURN(c.feature_steps,
                     FlagToInt(*feature_steps, "feature-steps", 0));
  }
  if (auto kn = a.Get("kprop-norm")) {
    if (!kprop) {
      return absl::InvalidArgumentError(
          absl::StrCat("--kprop-norm applies to ", kprop_runs));
    }
    ASSIGN_OR_RETURN(c.kprop_norm, kKPropNormNames.Parse(*kn, "--kprop-norm"));
  }
  c.feature_self_loops = a.Flag("feature-self-loops");
  return absl::OkStatus();
}

// --standardize, --no-standardize and --standardize-clip.
absl::Status ParseStandardizeFlags(const CliArgs& a, PipelineConfig* config) {
  PipelineConfig& c = *config;
  const Method method = c.method;
  if (a.Flag("standardize") && a.Flag("no-standardize")) {
    return absl::InvalidArgumentError(
        "give --standardize or --no-standardize, not both");
  }
  if (a.Flag("standardize")) {
    c.standardize = true;
  } else if (a.Flag("no-standardize") || c.mechanism == "none") {
    // Raw features need no rescaling; HDS estimates (C * x, small) do.
    c.standardize = false;
    c.standardize_clip = 0;
  }
  ASSIGN_OR_RETURN(auto clip, a.GetDouble("standardize-clip"));
  if (clip) {
    if (method != v1::PIPELINE_METHOD_PRIVGE ||
        c.task != v1::PIPELINE_TASK_NODE) {
      return absl::InvalidArgumentError(
          "--standardize-clip applies to --method privge on --task node");
    }
    if (!(*clip >= 0) || std::isinf(*clip)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--standardize-clip must be finite and >= 0 (0: no clamp), got ",
          *clip));
    }
    if (*clip > 0 && !c.standardize) {
      return absl::InvalidArgumentError(
          "--standardize-clip clamps the standardised Z: it needs the "
          "standardisation (no --no-standardize, a --mechanism)");
    }
    c.standardize_clip = *clip;
  }
  return absl::OkStatus();
}

// --z-storage and --scratch-dir (PrivGE's node task: where Z is held).
absl::Status ParseZStorageFlags(const CliArgs& a, PipelineConfig* config) {
  PipelineConfig& c = *config;
  const Method method = c.method;
  const bool privge_node = method == v1::PIPELINE_METHOD_PRIVGE &&
                           c.task == v1::PIPELINE_TASK_NODE;
  if (auto zs = a.Get("z-storage")) {
    if (!privge_node) {
      return absl::InvalidArgumentError(
          "--z-storage applies to --method privge on --task node");
    }
    ASSIGN_OR_RETURN(c.z_storage,
                     pipeline::kZStorageNames.Parse(*zs, "--z-storage"));
  }
  if (auto dir = a.Get("scratch-dir")) {
    if (!privge_node) {
      return absl::InvalidArgumentError(
          "--scratch-dir applies to --method privge on --task node (Z's "
          "file of rows)");
    }
    if (dir->empty()) {
      return absl::InvalidArgumentError("--scratch-dir needs a folder");
    }
    c.scratch_dir = *dir;
  }
  return absl::OkStatus();
}

// --scale; the non-private baseline's default is unit.
absl::Status ParseScaleFlag(const CliArgs& a, PipelineConfig* config) {
  PipelineConfig& c = *config;
  if (auto s = a.Get("scale")) {
    auto parsed = ParseFeatureScaling(*s);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--scale: ", parsed.status().message()));
    }
    c.scaling = *parsed;
  } else if (c.mechanism == "none") {
    // The non-private baseline uses the features as they are; min-max to
    // [0, 1] leaves binary bag-of-words features unchanged.
    c.scaling = FeatureScaling::kUnit;
  }
  return absl::OkStatus();
}

// PPR's --alpha, --r and --rmax (PrivGE), applied and checked by
// ApplyPprOverrides.
absl::Status ParsePprFlags(const CliArgs& a, PipelineConfig* config) {
  PipelineConfig& c = *config;
  ASSIGN_OR_RETURN(const PprOverrides given, ReadPprFlags(a));
  if (given.any() && c.method != v1::PIPELINE_METHOD_PRIVGE) {
    return absl::InvalidArgumentError(
        "--alpha, --r and --rmax apply to --method privge (PPR)");
  }
  if (!given.any()) return absl::OkStatus();
  ASSIGN_OR_RETURN(c.ppr, ApplyPprOverrides(c.ppr, given));
  return absl::OkStatus();
}

}  // namespace

// --feature-steps, --standardize, label denoising, the tuning grids,
// --kprop-norm, --scale and PPR's --alpha, --r and --rmax.
absl::Status ParsePropagationFlags(const CliArgs& a, PipelineConfig* config) {
  RETURN_IF_ERROR(ParseNodePropagationFlags(a, config));
  RETURN_IF_ERROR(ParseKPropFlags(a, config));
  RETURN_IF_ERROR(ParseStandardizeFlags(a, config));
  RETURN_IF_ERROR(ParseZStorageFlags(a, config));
  PipelineConfig& c = *config;
  c.label_self_loops = a.Flag("label-self-loops");
  if (auto ld = a.Get("label-denoising")) {
    ASSIGN_OR_RETURN(c.label_denoising, pipeline::kLabelDenoisingNames.Parse(
                                            *ld, "--label-denoising"));
  }
  RETURN_IF_ERROR(ParseTuneGrids(a, config));
  RETURN_IF_ERROR(ParseScaleFlag(a, config));
  return ParsePprFlags(a, config);
}

}  // namespace ldpgraph::tool
