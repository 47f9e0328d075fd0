#include "common/dataset/prepare.h"

#include <filesystem>

#include "common/dataset/device_index.h"
#include "common/dataset/feature_schema.h"
#include "common/status_macros.h"

namespace ldpgraph {

absl::StatusOr<PreparedDataset> PrepareDataset(const std::string& dir,
                                               const std::string& out) {
  ASSIGN_OR_RETURN(Dataset d, LoadDataset(dir));
  PreparedDataset result;
  if (!DeclaredFeatureSchema(d.meta, dir).ok()) {
    DeclareFeatureSchema(CentralFeatureSchema(d.features), kCentralSchemaNote,
                         &d.meta);
    result.schema_computed = true;
  }
  RETURN_IF_ERROR(WriteDataset(d, out));
  result.meta = std::move(d.meta);
  return result;
}

bool DatasetPrepared(const std::string& dir, const DatasetMeta& meta,
                     bool needs_schema) {
  std::error_code ec;
  if (!std::filesystem::exists(
          std::filesystem::path(dir) / kDeviceIndexFile, ec)) {
    return false;
  }
  return !needs_schema || DeclaredFeatureSchema(meta, dir).ok();
}

}  // namespace ldpgraph
