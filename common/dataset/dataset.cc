// LoadDataset, and the feature scalings a dataset's values are mapped by.
// The folder's pieces are read and written elsewhere: meta.json in
// dataset_meta.cc, nodes.svm in node_line.cc, edges.txt in edge_list.cc,
// the whole folder by WriteDataset in dataset_write.cc.
#include "common/dataset/dataset.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/dataset/dataset_internal.h"
#include "common/files.h"
#include "common/status_macros.h"

namespace ldpgraph {

absl::StatusOr<Dataset> LoadDataset(const std::string& dir) {
  using dataset_internal::JoinPath;
  Dataset d;
  ASSIGN_OR_RETURN(d.meta, LoadDatasetMeta(dir));
  {
    const std::string path = JoinPath(dir, dataset_internal::kNodesFile);
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
    RETURN_IF_ERROR(dataset_internal::ParseNodes(path, text, d.meta, &d.labels,
                                                 &d.features));
  }
  {
    const std::string path = JoinPath(dir, dataset_internal::kEdgesFile);
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
    ASSIGN_OR_RETURN(d.graph, dataset_internal::ParseEdges(path, text, d.meta));
  }
  return d;
}

absl::StatusOr<FeatureScaling> ParseFeatureScaling(absl::string_view text) {
  if (text == "none") return FeatureScaling::kNone;
  if (text == "unit" || text == "0,1") return FeatureScaling::kUnit;
  if (text == "symmetric" || text == "-1,1") return FeatureScaling::kSymmetric;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown feature scaling ", dataset_internal::Quote(text),
                   ": expected none, unit (or 0,1), symmetric (or -1,1)"));
}

absl::string_view FeatureScalingName(FeatureScaling s) {
  switch (s) {
    case FeatureScaling::kNone:
      return "none";
    case FeatureScaling::kUnit:
      return "unit";
    case FeatureScaling::kSymmetric:
      return "symmetric";
  }
  return "unknown";
}

std::optional<std::pair<double, double>> ScaledRange(FeatureScaling s,
                                                     const DatasetMeta& meta) {
  switch (s) {
    case FeatureScaling::kNone:
      return meta.feature_range;
    case FeatureScaling::kUnit:
      return std::make_pair(0.0, 1.0);
    case FeatureScaling::kSymmetric:
      return std::make_pair(-1.0, 1.0);
  }
  return std::nullopt;
}

}  // namespace ldpgraph
