#include "common/dataset/feature_schema.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace ldpgraph {

double FeatureSchema::Scale(size_t j, double v, double to_lo,
                            double to_hi) const {
  const auto [lo, hi] = ranges[j];
  if (!(hi > lo)) return to_lo;
  const double t = (v - lo) / (hi - lo);
  return std::clamp(to_lo + (to_hi - to_lo) * t, to_lo, to_hi);
}

absl::StatusOr<FeatureSchema> DeclaredFeatureSchema(const DatasetMeta& meta,
                                                    const std::string& dir) {
  FeatureSchema schema;
  if (meta.feature_range.has_value()) {
    schema.ranges.assign(meta.features, *meta.feature_range);
  } else if (!meta.feature_ranges.empty()) {
    schema.ranges = meta.feature_ranges;
  } else if (meta.features > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, "/meta.json declares no public feature schema (feature_range "
        "or feature_ranges), and an agent scales its features with that "
        "alone: run `ldpgraph prepare --dataset ", dir,
        "` (add --out DIR for a read-only folder) to compute one centrally, "
        "as the papers preprocess, or declare the deployment's published "
        "ranges"));
  }
  return schema;
}

FeatureSchema CentralFeatureSchema(const SparseRows& x) {
  const size_t d = x.cols;
  std::vector<double> min(d, std::numeric_limits<double>::infinity());
  std::vector<double> max(d, -std::numeric_limits<double>::infinity());
  std::vector<uint64_t> stored(d, 0);
  for (size_t p = 0; p < x.indices.size(); ++p) {
    const uint32_t j = x.indices[p];
    const double v = x.values[p];
    min[j] = std::min(min[j], v);
    max[j] = std::max(max[j], v);
    ++stored[j];
  }
  FeatureSchema schema;
  schema.ranges.resize(d);
  for (size_t j = 0; j < d; ++j) {
    if (stored[j] < x.rows || stored[j] == 0) {
      min[j] = std::min(min[j], 0.0);
      max[j] = std::max(max[j], 0.0);
    }
    schema.ranges[j] = {min[j], max[j]};
  }
  return schema;
}

void DeclareFeatureSchema(const FeatureSchema& schema, std::string note,
                          DatasetMeta* meta) {
  meta->feature_range.reset();
  meta->feature_ranges.clear();
  meta->feature_schema = std::move(note);
  // One range serves when it scales every value as the per-feature ones do.
  std::optional<std::pair<double, double>> common;
  bool one = true;
  for (const auto& r : schema.ranges) {
    if (r.second > r.first) {
      if (common.has_value() && *common != r) one = false;
      common = r;
    }
  }
  if (one && common.has_value()) {
    for (const auto& r : schema.ranges) {
      if (!(r.second > r.first) && r.first != common->first) one = false;
    }
  }
  if (one && common.has_value()) {
    meta->feature_range = common;
  } else {
    meta->feature_ranges = schema.ranges;
  }
}

SparseRows ScaleFeatures(const SparseRows& x, const FeatureSchema& schema,
                         FeatureScaling s) {
  if (s == FeatureScaling::kNone) return x;
  const auto [lo, hi] = *ScaledRange(s, DatasetMeta());
  const size_t d = x.cols;
  auto scale = [&](size_t j, double v) -> float {
    return static_cast<float>(schema.Scale(j, v, lo, hi));
  };
  // Columns whose absent entries (0) map to a non-zero value.
  std::vector<uint32_t> dense;
  std::vector<float> dense_value;
  for (size_t j = 0; j < d; ++j) {
    const float z = scale(j, 0.0);
    if (z != 0.0f) {
      dense.push_back(static_cast<uint32_t>(j));
      dense_value.push_back(z);
    }
  }
  SparseRows out;
  out.rows = x.rows;
  out.cols = d;
  out.offsets.reserve(x.rows + 1);
  const size_t capacity = x.indices.size() + x.rows * dense.size();
  out.indices.reserve(capacity);
  out.values.reserve(capacity);
  for (size_t i = 0; i < x.rows; ++i) {
    const uint64_t end = x.offsets[i + 1];
    uint64_t p = x.offsets[i];
    size_t q = 0;
    while (p < end || q < dense.size()) {
      if (q == dense.size() || (p < end && x.indices[p] <= dense[q])) {
        const uint32_t j = x.indices[p];
        if (q < dense.size() && dense[q] == j) ++q;
        const float v = scale(j, x.values[p]);
        if (v != 0.0f) {
          out.indices.push_back(j);
          out.values.push_back(v);
        }
        ++p;
      } else {
        out.indices.push_back(dense[q]);
        out.values.push_back(dense_value[q]);
        ++q;
      }
    }
    out.offsets.push_back(out.indices.size());
  }
  return out;
}

std::vector<double> ScaleFeatureRow(absl::Span<const uint32_t> indices,
                                    absl::Span<const float> values,
                                    const FeatureSchema& schema,
                                    FeatureScaling s) {
  const size_t d = schema.dimension();
  std::vector<double> row(d, 0.0);
  if (s == FeatureScaling::kNone) {
    for (size_t p = 0; p < indices.size(); ++p) row[indices[p]] = values[p];
    return row;
  }
  const auto [lo, hi] = *ScaledRange(s, DatasetMeta());
  for (size_t j = 0; j < d; ++j) {
    row[j] = static_cast<float>(schema.Scale(j, 0.0, lo, hi));
  }
  for (size_t p = 0; p < indices.size(); ++p) {
    row[indices[p]] =
        static_cast<float>(schema.Scale(indices[p], values[p], lo, hi));
  }
  return row;
}

FeatureSchema DatasetFeatureSchema(const Dataset& d) {
  auto declared = DeclaredFeatureSchema(d.meta, "");
  if (declared.ok() && declared->dimension() == d.features.cols) {
    return *std::move(declared);
  }
  return CentralFeatureSchema(d.features);
}

SparseRows ScaleDatasetFeatures(const Dataset& d, FeatureScaling s) {
  if (s == FeatureScaling::kNone) return d.features;
  return ScaleFeatures(d.features, DatasetFeatureSchema(d), s);
}

}  // namespace ldpgraph
