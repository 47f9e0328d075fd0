#include "common/attacks/poisoning.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/dp/tails.h"
#include "common/mechanisms/hds.h"
#include "common/mechanisms/multibit.h"
#include "common/mechanisms/onebit.h"
#include "common/mechanisms/piecewise.h"
#include "common/random/seed_mix.h"
#include "common/status_macros.h"

namespace ldpgraph::poisoning {
namespace {


// The largest output of a windowed grid: its top point.
double TopOfGrid(const internal::WindowedGrid& g) {
  return static_cast<double>(g.half_points()) * g.granularity();
}

}  // namespace

std::vector<uint32_t> MaliciousNodes(uint32_t n, uint64_t seed,
                                     double fraction,
                                     absl::FunctionRef<bool(uint32_t)> offline) {
  std::vector<uint32_t> out;
  for (uint32_t v = 0; v < n; ++v) {
    if (SimulatedMalicious(seed, v, fraction) && !offline(v)) out.push_back(v);
  }
  return out;
}

absl::StatusOr<std::vector<uint32_t>> RankDims(
    const SparseRows& x, absl::Span<const int32_t> labels,
    absl::Span<const uint32_t> nodes, int target_class) {
  if (labels.size() != x.rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "target dimensions: ", labels.size(), " labels for ", x.rows,
        " feature rows"));
  }
  if (target_class < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "target dimensions need a class >= 0, got class ", target_class));
  }
  std::vector<double> in_t(x.cols, 0.0), others(x.cols, 0.0);
  size_t count_t = 0, count_others = 0;
  for (uint32_t v : nodes) {
    if (v >= x.rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          "target dimensions: node ", v, " is not below ", x.rows));
    }
    if (labels[v] < 0) continue;
    const bool is_t = labels[v] == target_class;
    std::vector<double>& sum = is_t ? in_t : others;
    ++(is_t ? count_t : count_others);
    const auto idx = x.row_indices(v);
    const auto val = x.row_values(v);
    for (size_t p = 0; p < idx.size(); ++p) sum[idx[p]] += val[p];
  }
  std::vector<double> score(x.cols);
  for (size_t j = 0; j < x.cols; ++j) {
    score[j] = (count_t ? in_t[j] / count_t : 0.0) -
               (count_others ? others[j] / count_others : 0.0);
  }
  std::vector<uint32_t> order(x.cols);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return score[a] > score[b];
  });
  return order;
}

absl::StatusOr<std::vector<uint32_t>> TargetDims(
    const SparseRows& x, absl::Span<const int32_t> labels,
    absl::Span<const uint32_t> nodes, int target_class, int target_dims) {
  if (target_class < 0 || target_dims < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "target dimensions need a class >= 0 and R >= 1, got class ",
        target_class, " and R ", target_dims));
  }
  ASSIGN_OR_RETURN(std::vector<uint32_t> order,
                   RankDims(x, labels, nodes, target_class));
  order.resize(std::min<size_t>(static_cast<size_t>(target_dims), x.cols));
  std::sort(order.begin(), order.end());
  return order;
}

int AdaptiveTargetCount(uint64_t n, uint64_t malicious, int d, int k,
                        double alpha, int r) {
  if (k >= d) return r;
  const double q = static_cast<double>(k) / d;
  const uint64_t threshold = BinomialUpperQuantile(n, q, alpha / d);
  const double mean = static_cast<double>(n - malicious) * q;
  for (int rr = std::max(1, std::min(r, d)); rr < d; ++rr) {
    const double p = std::min(1.0, static_cast<double>(k) / rr);
    const double lambda = mean + static_cast<double>(malicious) * p;
    if (rr * PoissonTailAbove(lambda, threshold) <= kAdaptiveRisk) return rr;
  }
  return d;
}

absl::StatusOr<std::unique_ptr<Adversary>> Adversary::Create(
    int target_class, std::vector<uint32_t> target_dims, AttackKind kind,
    std::optional<AdaptivePlan> plan) {
  if (target_class < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the attack class must be >= 0, got ", target_class));
  }
  if (target_dims.empty()) {
    return absl::InvalidArgumentError("the attack needs a target dimension");
  }
  for (size_t i = 1; i < target_dims.size(); ++i) {
    if (target_dims[i] <= target_dims[i - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "target dimensions must be strictly ascending: position ", i,
          " has ", target_dims[i], " after ", target_dims[i - 1]));
    }
  }
  if (kind == AttackKind::kAdaptive) {
    if (!plan) {
      return absl::InvalidArgumentError(
          "the adaptive attack needs its plan (n, its nodes, alpha, ranking)");
    }
    if (plan->malicious > plan->nodes || !(plan->alpha > 0 && plan->alpha < 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the adaptive attack's plan needs malicious <= nodes and alpha in "
          "(0, 1), got ", plan->malicious, " of ", plan->nodes, ", alpha ",
          plan->alpha));
    }
    std::vector<uint32_t> head(
        plan->ranking.begin(),
        plan->ranking.begin() +
            std::min(plan->ranking.size(), target_dims.size()));
    std::sort(head.begin(), head.end());
    if (head != target_dims) {
      return absl::InvalidArgumentError(
          "the adaptive attack's ranking must start with its targets");
    }
  }
  return std::unique_ptr<Adversary>(new Adversary(
      target_class, std::move(target_dims), kind, std::move(plan)));
}

std::vector<uint32_t> Adversary::TargetsFor(const FeatureMechanism& mech) const {
  if (kind_ != AttackKind::kAdaptive) return target_dims_;
  const int d = mech.dimension();
  std::vector<uint32_t> below;
  for (uint32_t j : plan_->ranking) {
    if (j < static_cast<uint32_t>(d)) below.push_back(j);
  }
  const int r = AdaptiveTargetCount(
      plan_->nodes, plan_->malicious, d, mech.sampled(), plan_->alpha,
      static_cast<int>(target_dims_.size()));
  below.resize(std::min(below.size(), static_cast<size_t>(r)));
  std::sort(below.begin(), below.end());
  return below;
}

std::vector<uint32_t> Adversary::ChooseDims(
    const std::vector<uint32_t>& targets, uint32_t d, uint32_t k,
    RandomSource& rng, std::vector<bool>* in_target) {
  const uint32_t r = static_cast<uint32_t>(targets.size());
  std::vector<std::pair<uint32_t, bool>> chosen;
  if (r >= k) {
    for (uint32_t i : rng.SampleWithoutReplacement(r, k)) {
      chosen.emplace_back(targets[i], true);
    }
  } else {
    for (uint32_t j : targets) chosen.emplace_back(j, true);
    // The complement of the targets in 0..d-1, ascending.
    std::vector<uint32_t> rest;
    rest.reserve(d - r);
    for (uint32_t j = 0, t = 0; j < d; ++j) {
      if (t < r && targets[t] == j) {
        ++t;
      } else {
        rest.push_back(j);
      }
    }
    for (uint32_t i : rng.SampleWithoutReplacement(d - r, k - r)) {
      chosen.emplace_back(rest[i], false);
    }
  }
  std::sort(chosen.begin(), chosen.end());
  std::vector<uint32_t> dims;
  in_target->clear();
  for (const auto& [j, t] : chosen) {
    dims.push_back(j);
    in_target->push_back(t);
  }
  return dims;
}

absl::StatusOr<SparseReport> Adversary::CraftFeatureReport(
    const FeatureMechanism& mech, absl::Span<const double> x,
    RandomSource& rng) const {
  const uint32_t d = static_cast<uint32_t>(mech.dimension());
  if (x.size() != d) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input has ", x.size(), " values, expected d = ", d));
  }
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      return absl::InvalidArgumentError(absl::StrCat("input[", i, "] is NaN"));
    }
  }
  if (target_dims_.back() >= d) {
    return absl::InvalidArgumentError(absl::StrCat(
        "target dimension ", target_dims_.back(), " is not below d = ", d));
  }
  switch (kind_) {
    case AttackKind::kMaximalGain:
    case AttackKind::kAdaptive:
      break;
    case AttackKind::kLabelsOnly:
      return mech.Perturb(x, rng);
    case AttackKind::kInput:
    case AttackKind::kFakeEdges:
      return mech.Perturb(FakeRecord(mech), rng);
  }
  const std::vector<uint32_t> targets = TargetsFor(mech);
  SparseReport r;
  r.dimension = d;
  std::vector<bool> in_target;
  switch (mech.kind()) {
    case MechanismKind::kSquareWave:
    case MechanismKind::kHds:
    case MechanismKind::kPiecewise: {
      const double top =
          mech.kind() == MechanismKind::kPiecewise
              ? TopOfGrid(static_cast<const PiecewiseMechanism&>(mech)
                              .piecewise()
                              .grid())
              : TopOfGrid(
                    static_cast<const HdsMechanism&>(mech).square_wave().grid());
      r.indices = ChooseDims(targets, d, static_cast<uint32_t>(mech.sampled()),
                             rng, &in_target);
      for (bool t : in_target) r.values.push_back(t ? top : 0.0);
      break;
    }
    case MechanismKind::kMultiBit:
      r.indices = ChooseDims(targets, d, static_cast<uint32_t>(mech.sampled()),
                             rng, &in_target);
      for (bool t : in_target) r.bits.push_back(t || rng.Bernoulli(0.5));
      break;
    case MechanismKind::kOneBit: {
      const auto& one = static_cast<const OneBitMechanism&>(mech);
      r.dense = true;
      r.bits.assign(d, false);
      for (uint32_t j = 0, t = 0; j < d; ++j) {
        if (t < targets.size() && targets[t] == j) {
          r.bits[j] = true;
          ++t;
        } else {
          r.bits[j] = rng.Bernoulli(one.ProbabilityOne(mech.Clip(x[j])));
        }
      }
      break;
    }
    case MechanismKind::kLaplace:
      return absl::UnimplementedError(
          "the maximal-gain attack has no laplace form: its output domain is "
          "unbounded, so no report is maximal");
  }
  // What the curator checks: a crafted report that fails it is a bug here.
  RETURN_IF_ERROR(mech.ValidateReport(r));
  return r;
}

std::vector<double> Adversary::FakeRecord(const FeatureMechanism& mech) const {
  const MechanismSpec& spec = mech.spec();
  std::vector<double> x(static_cast<size_t>(mech.dimension()), spec.alpha);
  for (uint32_t j : target_dims_) {
    if (j < x.size()) x[j] = spec.beta;
  }
  return x;
}

absl::StatusOr<int> Adversary::CraftLabel(const LabelRandomizedResponse& rr,
                                          RandomSource& rng) const {
  if (target_class_ >= rr.classes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the attack class ", target_class_, " is not one of the ",
        rr.classes(), " classes"));
  }
  switch (kind_) {
    case AttackKind::kInput:
    case AttackKind::kFakeEdges:
      return rr.Perturb(target_class_, rng);
    case AttackKind::kMaximalGain:
    case AttackKind::kAdaptive:
    case AttackKind::kLabelsOnly:
      break;
  }
  return target_class_;
}

}  // namespace ldpgraph::poisoning
