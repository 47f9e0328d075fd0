// A node's features as its device holds them: the non-zeros the dataset
// stores (ascending indices, float values) and the shard's public scaling,
// shared by every node of the shard. The dense scaled row a mechanism
// perturbs is computed on demand (Dense), when a feature question is
// answered, and dropped after: a host keeps about 8 bytes per stored
// non-zero per node instead of 8 bytes per feature (the dense row of a
// d = 8,415 dataset is 67 KB).
//
// Dense() is ScaleFeatureRow (common/dataset/feature_schema.h) over the
// stored non-zeros: deterministic, and equal value for value to the row the
// scaled dense vector held before, so answers do not change.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/dataset/dataset.h"
#include "common/dataset/feature_schema.h"

namespace ldpgraph::agent {

// How a shard's stored values become the values its nodes answer with: the
// dataset's public schema and the campaigns' scaling. Immutable; one per
// shard, shared by its nodes.
struct FeatureScale {
  FeatureSchema schema;  // schema.dimension(): the feature count
  FeatureScaling scaling = FeatureScaling::kNone;

  // INVALID_ARGUMENT for a range that is not finite with lo <= hi (the
  // scaled values would not be finite); kNone reads only the dimension.
  static absl::StatusOr<std::shared_ptr<const FeatureScale>> Create(
      FeatureSchema schema, FeatureScaling scaling);
  // kNone over `dimension` features: values as stored.
  static std::shared_ptr<const FeatureScale> AsStored(size_t dimension);
};

// Copyable value. Not thread-safe to modify; const use is.
class NodeFeatures {
 public:
  // No features (a question about them is refused with NO_DATA).
  NodeFeatures() = default;
  // indices[p] and values[p]: the p-th stored non-zero. Not checked here:
  // Validate (NodeAgent::Create calls it) rejects, among others, spans of
  // different sizes.
  NodeFeatures(absl::Span<const uint32_t> indices,
               absl::Span<const float> values,
               std::shared_ptr<const FeatureScale> scale);
  // A dense row kept as is (kNone): its non-zeros, stored as float, over
  // a scale of its own. For tests and small records: Dense() gives row back
  // when each of its values is a float.
  static NodeFeatures FromDense(absl::Span<const double> row);

  NodeFeatures(const NodeFeatures& other);
  NodeFeatures& operator=(const NodeFeatures& other);
  // Moving leaves `other` without features.
  NodeFeatures(NodeFeatures&& other) noexcept;
  NodeFeatures& operator=(NodeFeatures&& other) noexcept;

  // The feature count (0: no features).
  size_t dimension() const {
    return scale_ == nullptr ? 0 : scale_->schema.dimension();
  }
  bool empty() const { return dimension() == 0; }
  absl::Span<const uint32_t> indices() const { return {indices_.get(), size_}; }
  absl::Span<const float> values() const { return {values_.get(), size_}; }

  // INVALID_ARGUMENT for indices that are not strictly ascending or not
  // below dimension(), a value that is not finite (naming "features[j]"),
  // spans of different sizes, or stored non-zeros without a scale.
  absl::Status Validate() const;

  // The dense scaled row: ScaleFeatureRow(indices(), values(), schema,
  // scaling); empty without features. O(dimension) time and memory.
  std::vector<double> Dense() const;

 private:
  void CopyFrom(absl::Span<const uint32_t> indices,
                absl::Span<const float> values);

  std::shared_ptr<const FeatureScale> scale_;
  std::unique_ptr<uint32_t[]> indices_;
  std::unique_ptr<float[]> values_;
  uint32_t size_ = 0;
  bool size_mismatch_ = false;  // built from spans of different sizes
};

}  // namespace ldpgraph::agent
