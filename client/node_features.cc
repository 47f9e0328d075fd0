#include "client/node_features.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ldpgraph::agent {

absl::StatusOr<std::shared_ptr<const FeatureScale>> FeatureScale::Create(
    FeatureSchema schema, FeatureScaling scaling) {
  if (scaling != FeatureScaling::kNone) {
    for (size_t j = 0; j < schema.ranges.size(); ++j) {
      const auto [lo, hi] = schema.ranges[j];
      if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo <= hi)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the feature schema's range of feature ", j, " is [", lo, ", ", hi,
            "]: not finite with lo <= hi"));
      }
    }
  }
  return std::make_shared<const FeatureScale>(
      FeatureScale{std::move(schema), scaling});
}

std::shared_ptr<const FeatureScale> FeatureScale::AsStored(size_t dimension) {
  FeatureSchema schema;
  schema.ranges.assign(dimension, {0.0, 0.0});  // unused: values as stored
  return std::make_shared<const FeatureScale>(
      FeatureScale{std::move(schema), FeatureScaling::kNone});
}

NodeFeatures::NodeFeatures(absl::Span<const uint32_t> indices,
                           absl::Span<const float> values,
                           std::shared_ptr<const FeatureScale> scale)
    : scale_(std::move(scale)) {
  // Validate reports a size mismatch; keep what both hold.
  const size_t n = std::min(indices.size(), values.size());
  CopyFrom(indices.subspan(0, n), values.subspan(0, n));
  if (indices.size() != values.size()) size_mismatch_ = true;
}

NodeFeatures NodeFeatures::FromDense(absl::Span<const double> row) {
  std::vector<uint32_t> indices;
  std::vector<float> values;
  for (size_t j = 0; j < row.size(); ++j) {
    if (row[j] == 0) continue;
    indices.push_back(static_cast<uint32_t>(j));
    values.push_back(static_cast<float>(row[j]));
  }
  return NodeFeatures(indices, values, FeatureScale::AsStored(row.size()));
}

NodeFeatures::NodeFeatures(const NodeFeatures& other) : scale_(other.scale_) {
  CopyFrom(other.indices(), other.values());
  size_mismatch_ = other.size_mismatch_;
}

NodeFeatures& NodeFeatures::operator=(const NodeFeatures& other) {
  if (this != &other) {
    scale_ = other.scale_;
    CopyFrom(other.indices(), other.values());
    size_mismatch_ = other.size_mismatch_;
  }
  return *this;
}

NodeFeatures::NodeFeatures(NodeFeatures&& other) noexcept
    : scale_(std::move(other.scale_)),
      indices_(std::move(other.indices_)),
      values_(std::move(other.values_)),
      size_(std::exchange(other.size_, 0)),
      size_mismatch_(std::exchange(other.size_mismatch_, false)) {}

NodeFeatures& NodeFeatures::operator=(NodeFeatures&& other) noexcept {
  scale_ = std::move(other.scale_);
  indices_ = std::move(other.indices_);
  values_ = std::move(other.values_);
  size_ = std::exchange(other.size_, 0);
  size_mismatch_ = std::exchange(other.size_mismatch_, false);
  return *this;
}

void NodeFeatures::CopyFrom(absl::Span<const uint32_t> indices,
                            absl::Span<const float> values) {
  size_ = static_cast<uint32_t>(indices.size());
  indices_.reset(size_ == 0 ? nullptr : new uint32_t[size_]);
  values_.reset(size_ == 0 ? nullptr : new float[size_]);
  std::copy(indices.begin(), indices.end(), indices_.get());
  std::copy(values.begin(), values.end(), values_.get());
}

absl::Status NodeFeatures::Validate() const {
  if (size_mismatch_) {
    return absl::InvalidArgumentError(
        "the stored features have more indices than values or the reverse");
  }
  if (scale_ == nullptr && size_ > 0) {
    return absl::InvalidArgumentError(
        "stored features without a scale (their dimension is unknown)");
  }
  for (uint32_t p = 0; p < size_; ++p) {
    const uint32_t j = indices_[p];
    if (j >= dimension()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "features[", j, "] is beyond the ", dimension(), " features"));
    }
    if (p > 0 && j <= indices_[p - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stored features must have strictly ascending indices, but ", j,
          " follows ", indices_[p - 1]));
    }
    if (!std::isfinite(values_[p])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "features[", j, "] is not finite (", values_[p], ")"));
    }
  }
  return absl::OkStatus();
}

std::vector<double> NodeFeatures::Dense() const {
  if (empty()) return {};
  return ScaleFeatureRow(indices(), values(), scale_->schema, scale_->scaling);
}

}  // namespace ldpgraph::agent
