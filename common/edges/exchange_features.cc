// The vectors nodes exchange: CompactVector and its similarity scores, and
// ExchangeFeatures, which checks, decodes, encodes and fakes them.
#include "common/edges/substitution.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/wire/codec.h"

namespace ldpgraph::edges {
namespace {

// Standard normal by Box-Muller.
double Gaussian(RandomSource& rng) {
  double u1 = rng.UniformDouble();
  while (u1 <= 0) u1 = rng.UniformDouble();
  const double u2 = rng.UniformDouble();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

}  // namespace

double CompactVector::Dot(const CompactVector& o) const {
  // dense_a . dense_b with a = oa + sa, b = ob + sb (sa, sb sparse):
  // d oa ob + oa sum(sb) + ob sum(sa) + sa . sb.
  double sa = 0, sb = 0, cross = 0;
  for (float v : values) sa += v;
  for (float v : o.values) sb += v;
  size_t i = 0, j = 0;
  while (i < indices.size() && j < o.indices.size()) {
    if (indices[i] < o.indices[j]) {
      ++i;
    } else if (indices[i] > o.indices[j]) {
      ++j;
    } else {
      cross += static_cast<double>(values[i]) * o.values[j];
      ++i;
      ++j;
    }
  }
  return static_cast<double>(dimension) * offset * o.offset + offset * sb +
         o.offset * sa + cross;
}

CompactVector CompactVector::FromDense(const std::vector<double>& dense) {
  CompactVector c;
  c.dimension = static_cast<uint32_t>(dense.size());
  if (dense.empty()) return c;
  std::vector<double> sorted = dense;
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2,
                   sorted.end());
  c.offset = static_cast<float>(sorted[sorted.size() / 2]);
  for (size_t i = 0; i < dense.size(); ++i) {
    const float v = static_cast<float>(dense[i]);
    if (v != c.offset) {
      c.indices.push_back(static_cast<uint32_t>(i));
      c.values.push_back(v - c.offset);
    }
  }
  c.sum = 0;
  c.norm2 = 0;
  for (size_t i = 0; i < dense.size(); ++i) {
    const double v = static_cast<float>(dense[i]);
    c.sum += v;
    c.norm2 += v * v;
  }
  return c;
}

double SimilarityScore(Similarity s, const CompactVector& a,
                       const CompactVector& b) {
  const double dot = a.Dot(b);
  if (s == Similarity::kCosine) {
    const double den = std::sqrt(a.norm2) * std::sqrt(b.norm2);
    return den > 0 ? dot / den : 0.0;
  }
  return -(a.norm2 + b.norm2 - 2 * dot);
}

std::shared_ptr<const ExchangeFeatures> ExchangeFeatures::Private(
    std::shared_ptr<const FeatureMechanism> mechanism) {
  auto f = std::shared_ptr<ExchangeFeatures>(new ExchangeFeatures());
  f->dimension_ = mechanism->dimension();
  f->alpha_ = mechanism->spec().alpha;
  f->beta_ = mechanism->spec().beta;
  f->mechanism_ = std::move(mechanism);
  return f;
}

std::shared_ptr<const ExchangeFeatures> ExchangeFeatures::RawForResearch(
    int dimension, double alpha, double beta) {
  auto f = std::shared_ptr<ExchangeFeatures>(new ExchangeFeatures());
  f->dimension_ = dimension;
  f->alpha_ = alpha;
  f->beta_ = beta;
  return f;
}

absl::StatusOr<CompactVector> ExchangeFeatures::Decode(
    const v1::FeatureReport& r) const {
  std::vector<double> dense(dimension_, 0.0);
  if (mechanism_ != nullptr) {
    ASSIGN_OR_RETURN(SparseReport report,
                     wire::DecodeFeatureReport(r, *mechanism_));
    RETURN_IF_ERROR(mechanism_->Estimate(report, absl::MakeSpan(dense)));
    return CompactVector::FromDense(dense);
  }
  if (r.dense() || r.has_spec() || r.bit_count() != 0 ||
      r.indices_size() != r.values_size()) {
    return absl::InvalidArgumentError(
        "raw vector: want indices and values of its nonzero entries only");
  }
  for (int i = 0; i < r.indices_size(); ++i) {
    const uint32_t j = r.indices(i);
    if (j >= static_cast<uint32_t>(dimension_) ||
        (i > 0 && j <= r.indices(i - 1))) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "raw vector: index %u at position %d not ascending or >= %d", j, i,
          dimension_));
    }
    const double v = r.values(i);
    if (!std::isfinite(v) || v < alpha_ || v > beta_) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "raw vector: value %g at index %u outside [%g, %g]", v, j, alpha_,
          beta_));
    }
    dense[j] = v;
  }
  return CompactVector::FromDense(dense);
}

absl::StatusOr<v1::FeatureReport> ExchangeFeatures::Encode(
    absl::Span<const double> x, RandomSource& rng) const {
  if (x.size() != static_cast<size_t>(dimension_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "feature vector has ", x.size(), " values, want ", dimension_));
  }
  if (mechanism_ != nullptr) {
    ASSIGN_OR_RETURN(SparseReport report, mechanism_->Perturb(x, rng));
    return wire::EncodeFeatureReport(report);
  }
  v1::FeatureReport r;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      return absl::InvalidArgumentError(absl::StrCat("NaN at index ", i));
    }
    const double v = std::clamp(x[i], alpha_, beta_);
    if (v != 0) {
      r.add_indices(static_cast<uint32_t>(i));
      r.add_values(v);
    }
  }
  return r;
}

absl::StatusOr<v1::FeatureReport> ExchangeFeatures::Dummy(
    double mean, double std, RandomSource& rng) const {
  std::vector<double> x(dimension_);
  for (double& v : x) v = std::clamp(mean + std * Gaussian(rng), alpha_, beta_);
  return Encode(x, rng);
}

std::string CanonicalKey(const v1::FeatureReport& r) {
  return r.SerializeAsString();
}

}  // namespace ldpgraph::edges
