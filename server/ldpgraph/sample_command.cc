#include "server/ldpgraph/sample_command.h"

#include <charconv>
#include <cmath>
#include <initializer_list>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cli_args.h"
#include "common/mechanisms/edge_rr.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/mechanisms/label_rr.h"
#include "common/random/random.h"
#include "common/status_macros.h"
#include "common/wire/codec.h"
#include "common/wire/names.h"
#include "server/ldpgraph/tool_util.h"

namespace ldpgraph::tool {
namespace {

using wire::kMechanismKindNames;

// The mechanism --mechanism names: a feature mechanism, label or edge
// randomized response. INVALID_ARGUMENT "unknown mechanism '<name>'; choose
// one of: <the feature mechanisms>, label-rr, edge-rr" for any other name.
absl::StatusOr<v1::MechanismKind> SampledKind(absl::string_view name) {
  const std::initializer_list<v1::MechanismKind> kSampled = {
      v1::MECHANISM_KIND_SQUARE_WAVE, v1::MECHANISM_KIND_HDS,
      v1::MECHANISM_KIND_MULTIBIT,    v1::MECHANISM_KIND_ONEBIT,
      v1::MECHANISM_KIND_PIECEWISE,   v1::MECHANISM_KIND_LAPLACE,
      v1::MECHANISM_KIND_LABEL_RR,    v1::MECHANISM_KIND_EDGE_RR};
  for (v1::MechanismKind kind : kSampled) {
    if (kMechanismKindNames.Name(kind) == name) return kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mechanism '", name,
                   "'; choose one of: ", kMechanismKindNames.Choices(kSampled)));
}

// Shortest decimal form that reads back to the same double.
void AppendNumber(std::string& line, double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  line.append(buf, end);
}

void WriteRow(std::ostream& out, const std::vector<double>& row) {
  std::string line;
  line.reserve(row.size() * 8);
  for (size_t i = 0; i < row.size(); ++i) {
    if (i) line.push_back(',');
    AppendNumber(line, row[i]);
  }
  line.push_back('\n');
  out << line;
}

// Running mean and variance per dimension (Welford), for --summary.
class Moments {
 public:
  explicit Moments(size_t d) : mean_(d, 0.0), m2_(d, 0.0) {}
  void Add(const std::vector<double>& row) {
    ++n_;
    for (size_t i = 0; i < row.size(); ++i) {
      const double delta = row[i] - mean_[i];
      mean_[i] += delta / n_;
      m2_[i] += delta * (row[i] - mean_[i]);
    }
  }
  double mean(size_t i) const { return mean_[i]; }
  double variance(size_t i) const { return n_ > 1 ? m2_[i] / (n_ - 1) : 0.0; }
  uint64_t count() const { return n_; }

 private:
  uint64_t n_ = 0;
  std::vector<double> mean_, m2_;
};

struct Options {
  std::string mechanism;
  double epsilon = 0;
  std::optional<int64_t> sampled;
  double alpha = -1, beta = 1;
  std::vector<double> input;
  uint64_t count = 1;
  std::optional<uint64_t> seed;
  bool estimate = false;
  bool summary = false;
  int64_t classes = 0;
  int64_t nodes = 0;
  int64_t node = 0;
};

absl::StatusOr<Options> ParseOptions(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(
      CliArgs a,
      CliArgs::Parse(args,
                     {"mechanism", "epsilon", "k", "m", "alpha", "beta", "input",
                      "count", "seed", "classes", "nodes", "node"},
                     {"estimate", "summary", "help"}));
  Options o;
  auto mech = a.Get("mechanism");
  if (!mech) return absl::InvalidArgumentError("--mechanism is required");
  o.mechanism = *mech;
  ASSIGN_OR_RETURN(auto eps, a.GetDouble("epsilon"));
  if (!eps) return absl::InvalidArgumentError("--epsilon is required");
  o.epsilon = *eps;
  ASSIGN_OR_RETURN(auto k, a.GetInt("k"));
  ASSIGN_OR_RETURN(auto m, a.GetInt("m"));
  if (k && m) return absl::InvalidArgumentError("give --k or --m, not both");
  o.sampled = k ? k : m;
  ASSIGN_OR_RETURN(auto alpha, a.GetDouble("alpha"));
  ASSIGN_OR_RETURN(auto beta, a.GetDouble("beta"));
  if (alpha) o.alpha = *alpha;
  if (beta) o.beta = *beta;
  ASSIGN_OR_RETURN(auto input, a.GetDoubleList("input"));
  if (!input) return absl::InvalidArgumentError("--input is required");
  o.input = *input;
  ASSIGN_OR_RETURN(auto count, a.GetUint("count"));
  if (count) o.count = *count;
  if (o.count == 0) return absl::InvalidArgumentError("--count must be >= 1");
  ASSIGN_OR_RETURN(o.seed, a.GetUint("seed"));
  o.estimate = a.Flag("estimate");
  o.summary = a.Flag("summary");
  ASSIGN_OR_RETURN(auto classes, a.GetInt("classes"));
  ASSIGN_OR_RETURN(auto nodes, a.GetInt("nodes"));
  ASSIGN_OR_RETURN(auto node, a.GetInt("node"));
  o.classes = classes.value_or(0);
  o.nodes = nodes.value_or(0);
  o.node = node.value_or(0);
  return o;
}

// Produces one output row per call.
using RowSource = std::function<absl::StatusOr<std::vector<double>>()>;

struct Sampler {
  RowSource next;
  // Expected mean and variance per output dimension, when known.
  std::vector<double> mean, variance;
  std::vector<double> shown_input;  // the input as the summary shows it
  std::string description;
};

absl::StatusOr<Sampler> MakeFeatureSampler(const Options& o, MechanismKind kind,
                                           RandomSource& rng) {
  MechanismSpec spec;
  spec.kind = kind;
  spec.epsilon = o.epsilon;
  spec.dimension = static_cast<int>(o.input.size());
  if (o.sampled) {
    ASSIGN_OR_RETURN(spec.sampled, FlagToInt(*o.sampled, "k/--m", 0));
  }
  spec.alpha = o.alpha;
  spec.beta = o.beta;
  ASSIGN_OR_RETURN(std::shared_ptr<FeatureMechanism> mech,
                   CreateFeatureMechanism(spec));
  Sampler s;
  const size_t d = o.input.size();
  for (double x : o.input) {
    const double clipped = mech->Clip(x);
    s.shown_input.push_back(clipped);
    if (o.estimate) {
      s.mean.push_back(mech->EstimateMean(clipped));
      s.variance.push_back(mech->EstimateVariance(clipped));
    }
  }
  s.description = absl::StrFormat(
      "%s, epsilon %g, d %d, sampled %d, range [%g, %g]%s", o.mechanism,
      o.epsilon, mech->dimension(), mech->sampled(), o.alpha, o.beta,
      o.estimate ? ", curator estimate" : ", raw report");
  const bool estimate = o.estimate;
  const std::vector<double> input = o.input;
  s.next = [mech, estimate, input, d, &rng]() -> absl::StatusOr<std::vector<double>> {
    ASSIGN_OR_RETURN(SparseReport r, mech->Perturb(input, rng));
    std::vector<double> row(d, 0.0);
    if (estimate) {
      RETURN_IF_ERROR(mech->Estimate(r, absl::MakeSpan(row)));
      return row;
    }
    for (size_t i = 0; i < r.size(); ++i) {
      if (!r.bits.empty()) {
        // Multi-bit: the sign x* in {-1, +1}; one-bit: the bit y in {0, 1}.
        const bool bit = r.bits[i];
        row[r.index(i)] = mech->kind() == MechanismKind::kMultiBit
                              ? (bit ? 1.0 : -1.0)
                              : (bit ? 1.0 : 0.0);
      } else {
        row[r.index(i)] = r.values[i];
      }
    }
    return row;
  };
  if (!o.estimate) {
    // Moments of the raw report are known in closed form only where the
    // estimator is the identity (HDS, square wave).
    if (kind == MechanismKind::kHds || kind == MechanismKind::kSquareWave) {
      for (double x : s.shown_input) {
        s.mean.push_back(mech->EstimateMean(x));
        s.variance.push_back(mech->EstimateVariance(x));
      }
    }
  }
  return s;
}

absl::StatusOr<Sampler> MakeLabelSampler(const Options& o, RandomSource& rng) {
  if (o.input.size() != 1 || o.input[0] != std::floor(o.input[0])) {
    return absl::InvalidArgumentError(
        absl::StrCat(kMechanismKindNames.Name(v1::MECHANISM_KIND_LABEL_RR),
                     " takes one integer label: --input L"));
  }
  ASSIGN_OR_RETURN(int classes, FlagToInt(o.classes, "classes", 0));
  ASSIGN_OR_RETURN(std::shared_ptr<LabelRandomizedResponse> rr,
                   LabelRandomizedResponse::Create(o.epsilon, classes));
  const int label = static_cast<int>(o.input[0]);
  RETURN_IF_ERROR(rr->ValidateReport(label));
  Sampler s;
  s.description = absl::StrFormat(
      "%s, epsilon %g, %d classes, keep probability %.6g%s",
      kMechanismKindNames.Name(v1::MECHANISM_KIND_LABEL_RR), o.epsilon,
      classes, rr->keep_probability(),
      o.estimate ? ", unbiased one-hot estimate" : ", one-hot report");
  s.shown_input.assign(classes, 0.0);
  s.shown_input[label] = 1.0;
  const std::vector<double> t = rr->TransitionMatrix();
  for (int j = 0; j < classes; ++j) {
    const double pj = t[label * classes + j];
    if (o.estimate) {
      // Estimate component j is (1[r=j] - q)/(p - q): mean e_label[j],
      // variance pj (1 - pj) / (p - q)^2.
      const double gap = rr->keep_probability() - rr->other_probability();
      s.mean.push_back(j == label ? 1.0 : 0.0);
      s.variance.push_back(pj * (1 - pj) / (gap * gap));
    } else {
      s.mean.push_back(pj);
      s.variance.push_back(pj * (1 - pj));
    }
  }
  const bool estimate = o.estimate;
  s.next = [rr, label, classes, estimate, &rng]() -> absl::StatusOr<std::vector<double>> {
    ASSIGN_OR_RETURN(int reported, rr->Perturb(label, rng));
    if (estimate) return rr->UnbiasedOneHot(reported);
    std::vector<double> row(classes, 0.0);
    row[reported] = 1.0;
    return row;
  };
  return s;
}

absl::StatusOr<Sampler> MakeEdgeSampler(const Options& o, RandomSource& rng) {
  // The tool prints a dense row of N values per draw; the mechanism itself
  // never materialises one (common/mechanisms/edge_rr.h).
  constexpr int64_t kMaxPrintedNodes = 10'000'000;
  const absl::string_view name =
      kMechanismKindNames.Name(v1::MECHANISM_KIND_EDGE_RR);
  if (o.nodes < 2 || o.nodes > kMaxPrintedNodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " needs --nodes N with 2 <= N <= ", kMaxPrintedNodes,
        " (each draw prints a dense row of N values)"));
  }
  const uint32_t n = static_cast<uint32_t>(o.nodes);
  if (o.node < 0 || o.node >= o.nodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--node must be in [0, ", o.nodes, "), got ", o.node));
  }
  const uint32_t v = static_cast<uint32_t>(o.node);
  std::vector<uint32_t> neighbours;
  for (double x : o.input) {
    if (x < 0 || x != std::floor(x) || x >= o.nodes) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " --input lists neighbour ids in [0, ", o.nodes, "), got ", x));
    }
    neighbours.push_back(static_cast<uint32_t>(x));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<EdgeRandomizedResponse> rr,
                   EdgeRandomizedResponse::Create(o.epsilon, n));
  RETURN_IF_ERROR(rr->ValidateReport(v, neighbours));
  Sampler s;
  s.description = absl::StrFormat(
      "%s, epsilon %g, node %d of %d, flip probability %.6g%s", name,
      o.epsilon, v, n, rr->flip_probability(),
      o.estimate ? ", unbiased adjacency estimate" : ", reported bit row");
  s.shown_input.assign(n, 0.0);
  for (uint32_t u : neighbours) s.shown_input[u] = 1.0;
  const bool estimate = o.estimate;
  s.next = [rr, v, neighbours, n, estimate, &rng]() -> absl::StatusOr<std::vector<double>> {
    ASSIGN_OR_RETURN(std::vector<uint32_t> reported,
                     rr->Perturb(v, neighbours, rng));
    std::vector<double> row(n, estimate ? rr->UnbiasedBit(false) : 0.0);
    if (estimate) row[v] = 0.0;
    for (uint32_t u : reported) row[u] = estimate ? rr->UnbiasedBit(true) : 1.0;
    return row;
  };
  return s;
}

void WriteSummary(std::ostream& out, const Sampler& s, const Moments& m) {
  const bool theory = !s.mean.empty();
  out << "# " << s.description << ", " << m.count() << " draws\n";
  out << absl::StrFormat("%5s %12s %12s %12s %12s %12s %8s\n", "dim", "input",
                         "mean", theory ? "expected" : "-", "variance",
                         theory ? "expected" : "-", theory ? "z" : "-");
  for (size_t i = 0; i < s.shown_input.size(); ++i) {
    std::string expected_mean = "-", expected_var = "-", z = "-";
    if (theory) {
      expected_mean = absl::StrFormat("%.6g", s.mean[i]);
      expected_var = absl::StrFormat("%.6g", s.variance[i]);
      // z-score of the sample mean against the expected mean.
      const double se = std::sqrt(s.variance[i] / m.count());
      z = se > 0 ? absl::StrFormat("%.2f", (m.mean(i) - s.mean[i]) / se) : "-";
    }
    out << absl::StrFormat("%5d %12.6g %12.6g %12s %12.6g %12s %8s\n", i,
                           s.shown_input[i], m.mean(i), expected_mean,
                           m.variance(i), expected_var, z);
  }
}

}  // namespace

std::string SampleHelp() {
  return R"(ldpgraph sample: perturb one private value or vector as an agent would.

Usage:
  ldpgraph sample --mechanism NAME --epsilon E [parameters] --input v1,...,vd
                  [--count N] [--seed S] [--estimate] [--summary]

Prints N perturbed vectors, one per line, comma-separated and dense (0 for the
dimensions a report leaves out). With --estimate each report is passed through
the curator-side estimator first. With --summary it prints, instead of the
vectors, a table per dimension: empirical mean and variance over the N draws
beside the values mechanisms.md predicts, and the z-score of the mean.

Feature mechanisms (input: d values; clipped to [alpha, beta] first):
  square-wave   Square wave on one value (d = 1). PrivGE, Algorithm 1.
                Output in [-1-b, 1+b] (canonical coordinates). --estimate: the
                output as it is (PrivGE uses no unbiasing).
  hds           High-dimensional square wave: k of d dimensions, eps/k each.
                PrivGE, Algorithm 2. --k (default 1). --estimate: identity.
  multibit      Multi-bit encoder: m of d dimensions, one sign bit each
                (report shows -1/+1, 0 unsampled). LPGNN (Sajadmanesh &
                Gatica-Perez, CCS'21), Algorithm 1. --m (default
                max(1, min(d, floor(eps/2.18)))). --estimate: the rectifier.
  onebit        One-bit / PGC: every dimension one bit (0/1), eps/d each.
                Sajadmanesh & Gatica-Perez 2020, after Duchi et al.
                --estimate: the unbiased y*.
  piecewise     Piecewise mechanism: k of d dimensions, eps/k each. Wang et
                al., ICDE'19. --k (default 1; d = k = 1 is the 1-D mechanism).
                --estimate: mapped back to [alpha, beta], scaled by d/k.
  laplace       Laplace: all d dimensions (Lap(Delta d/eps)) or k of d
                (Lap(Delta k/eps)). --k (default d). --estimate: scaled by d/k.

  Feature parameters: --alpha A --beta B   the public range (default -1, 1).

Label mechanism:
  label-rr      k-ary randomized response. --classes C; --input is the label.
                Report shown as a one-hot row; --estimate: the unbiased one-hot
                estimate through the inverse transition matrix.

Edge mechanism:
  edge-rr       Randomized response on the neighbour bit vector (Qin et al.,
                CCS'17). --nodes N --node V; --input lists V's neighbours.
                Prints the reported bit row (length N); --estimate: unbiased
                bits (r - q)/(p - q).

Common flags:
  --epsilon E   privacy budget one report spends (pure epsilon-LDP), > 0
  --count N     number of independent draws (default 1)
  --seed S      use the seeded generator: reproducible, NOT differentially
                private; for tests and simulations only (a warning is printed)
  --help        this text

Examples:
  ldpgraph sample --mechanism hds --epsilon 1 --k 2 --input 0.5,-0.2,1 --count 3
  ldpgraph sample --mechanism multibit --epsilon 4 --input 0.1,0.9 --estimate \
                  --count 100000 --summary --seed 7
)";
}

int RunSample(const std::vector<std::string>& args, std::ostream& out,
              std::ostream& err) {
  auto options =
      ParseCommand("sample", args, SampleHelp, ParseOptions, out, err);
  if (!options.ok()) return options.exit_code();
  const Options& o = *options;

  auto random = MakeRandomSource(o.seed, err);
  if (!random.ok()) {
    err << "ldpgraph sample: " << random.status().message() << "\n";
    return kExitRuntimeError;
  }
  std::unique_ptr<RandomSource> rng = std::move(*random);

  absl::StatusOr<Sampler> sampler;
  const absl::StatusOr<v1::MechanismKind> kind = SampledKind(o.mechanism);
  if (!kind.ok()) {
    sampler = kind.status();
  } else if (*kind == v1::MECHANISM_KIND_LABEL_RR) {
    sampler = MakeLabelSampler(o, *rng);
  } else if (*kind == v1::MECHANISM_KIND_EDGE_RR) {
    sampler = MakeEdgeSampler(o, *rng);
  } else if (auto feature = wire::FromWireFeatureKind(*kind); !feature.ok()) {
    sampler = feature.status();
  } else {
    sampler = MakeFeatureSampler(o, *feature, *rng);
  }
  if (!sampler.ok()) {
    err << "ldpgraph sample: " << sampler.status().message() << "\n";
    return kExitUsageError;
  }

  std::optional<Moments> moments;
  if (o.summary) moments.emplace(sampler->shown_input.size());
  for (uint64_t i = 0; i < o.count; ++i) {
    auto row = sampler->next();
    if (!row.ok()) {
      err << "ldpgraph sample: " << row.status().message() << "\n";
      return kExitRuntimeError;
    }
    if (moments) {
      moments->Add(*row);
    } else {
      WriteRow(out, *row);
    }
  }
  if (moments) WriteSummary(out, *sampler, *moments);
  out.flush();
  return out.good() ? 0 : kExitRuntimeError;
}

}  // namespace ldpgraph::tool
