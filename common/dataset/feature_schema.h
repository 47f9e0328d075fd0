// A dataset's public feature schema: the range each feature lies in.
//
// A device scales its own feature vector with the schema alone, the way a
// deployed client scales with a published configuration: no value of any
// other node takes part. meta.json declares the schema, either one range for
// every feature ("feature_range": [lo, hi]) or one per feature
// ("feature_ranges": [[lo, hi], ...]). `ldpgraph generate` writes the range
// its generator draws from. For a folder without one (the citation
// datasets), `ldpgraph prepare` computes it centrally, from every node's
// values, as the papers' preprocessing does, and labels it so in
// "feature_schema"; a real deployment publishes its schema instead.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/dataset/dataset.h"
#include "common/linalg/matrix.h"

namespace ldpgraph {

// The "feature_schema" text ldpgraph prepare writes beside a schema it
// computed from every node's values.
inline constexpr char kCentralSchemaNote[] =
    "central: computed from every node's values by ldpgraph prepare, as the "
    "papers preprocess; a real deployment publishes its schema instead";

struct FeatureSchema {
  // One [lo, hi] per feature, lo <= hi.
  std::vector<std::pair<double, double>> ranges;

  size_t dimension() const { return ranges.size(); }
  // Feature j's value v on the range [to_lo, to_hi]: clamped into j's
  // range, then mapped linearly; a constant feature (lo == hi) maps to to_lo.
  double Scale(size_t j, double v, double to_lo, double to_hi) const;
};

// The schema meta.json declares. FAILED_PRECONDITION when it declares none,
// naming `ldpgraph prepare --dataset <dir>`.
absl::StatusOr<FeatureSchema> DeclaredFeatureSchema(const DatasetMeta& meta,
                                                    const std::string& dir);

// The schema computed from every row of x: per column, the min and max of
// its values, with 0 taking part unless every row stores the column. What
// the papers' central preprocessing does; scaling x with it maps each
// column's min to the target's lo and its max to hi. O(nnz + cols).
FeatureSchema CentralFeatureSchema(const SparseRows& x);

// Declares `schema` in *meta: one feature_range when that scales every value
// exactly as the per-feature ranges do (every non-constant feature has the
// same range and every constant one sits at its lo), feature_ranges
// otherwise; feature_schema = note.
void DeclareFeatureSchema(const FeatureSchema& schema, std::string note,
                          DatasetMeta* meta);

// x (x.cols == schema.dimension()) scaled by s; kNone returns a copy.
// Entries whose scaled value is 0 are dropped, and a column whose 0 maps
// elsewhere becomes dense (every row that does not store it gets that
// value). Each value is computed in double and stored as float.
// Deterministic; O(nnz + cols + rows * dense columns).
SparseRows ScaleFeatures(const SparseRows& x, const FeatureSchema& schema,
                         FeatureScaling s);

// One node's dense feature vector, scaled: what an agent computes from its
// own stored non-zeros (indices ascending, < schema.dimension()). Equal,
// value for value, to the node's row of ScaleFeatures.
std::vector<double> ScaleFeatureRow(absl::Span<const uint32_t> indices,
                                    absl::Span<const float> values,
                                    const FeatureSchema& schema,
                                    FeatureScaling s);

// The central tools' scaling of a whole dataset: with its declared schema,
// else (a folder not yet prepared) with CentralFeatureSchema(d.features),
// which is what the agents of a prepared copy use. A column whose 0 scales
// elsewhere comes out dense (ScaleFeatures): [0, 1] features scaled to
// [-1, 1] store every entry. Row by row (ScaleFeatureRow with
// DatasetFeatureSchema) holds one row at a time instead.
SparseRows ScaleDatasetFeatures(const Dataset& d, FeatureScaling s);

// The schema ScaleDatasetFeatures scales d with.
FeatureSchema DatasetFeatureSchema(const Dataset& d);

}  // namespace ldpgraph
