#include "common/wire/codec.h"

#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/random/random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::wire {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<FeatureMechanism> Make(MechanismKind kind, int d,
                                       std::optional<int> sampled) {
  MechanismSpec s;
  s.kind = kind;
  s.epsilon = 1.0;
  s.dimension = d;
  s.sampled = sampled;
  s.alpha = kind == MechanismKind::kMultiBit ? 0.0 : -1.0;
  s.beta = 1.0;
  return *CreateFeatureMechanism(s);
}

TEST(CodecTest, RoundTripsEveryFeatureMechanism) {
  SeededRandomForTesting rng(7);
  for (auto kind : {MechanismKind::kHds, MechanismKind::kMultiBit,
                    MechanismKind::kOneBit, MechanismKind::kPiecewise,
                    MechanismKind::kLaplace, MechanismKind::kSquareWave}) {
    const int d = kind == MechanismKind::kSquareWave ? 1 : 37;
    std::optional<int> sampled;
    if (kind == MechanismKind::kHds || kind == MechanismKind::kMultiBit ||
        kind == MechanismKind::kPiecewise) {
      sampled = 5;
    }
    auto m = Make(kind, d, sampled);
    std::vector<double> x(d, 0.25);
    auto report = m->Perturb(x, rng);
    ASSERT_TRUE(report.ok()) << report.status();
    v1::FeatureReport w = EncodeFeatureReport(*report);
    // Through bytes, as on the wire.
    v1::FeatureReport parsed;
    ASSERT_TRUE(parsed.ParseFromString(w.SerializeAsString()));
    auto back = DecodeFeatureReport(parsed, *m);
    ASSERT_TRUE(back.ok()) << MechanismName(kind) << ": " << back.status();
    EXPECT_EQ(back->dense, report->dense);
    EXPECT_EQ(back->indices, report->indices);
    EXPECT_EQ(back->values, report->values);
    EXPECT_EQ(back->bits, report->bits);
  }
}

TEST(CodecTest, SpecRoundTripsAndKeysResolveDefaults) {
  auto m = Make(MechanismKind::kHds, 1433, std::nullopt);
  v1::MechanismSpec w = ToWire(m->spec());
  EXPECT_EQ(w.kind(), v1::MECHANISM_KIND_HDS);
  auto back = FromWireFeatureSpec(w);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->dimension, 1433);
  // sampled = 0 (default) and sampled = 1 (HDS's default) are one question.
  v1::MechanismSpec explicit_k = w;
  explicit_k.set_sampled(1);
  w.set_sampled(0);
  EXPECT_EQ(WireQueryKey(v1::ATTRIBUTE_FEATURES, w).Canonical(),
            WireQueryKey(v1::ATTRIBUTE_FEATURES, explicit_k).Canonical());
  explicit_k.set_sampled(2);
  EXPECT_NE(WireQueryKey(v1::ATTRIBUTE_FEATURES, w).Canonical(),
            WireQueryKey(v1::ATTRIBUTE_FEATURES, explicit_k).Canonical());
}

TEST(CodecTest, ValidateWireSpecRejectsEachBadField) {
  v1::MechanismSpec w;
  EXPECT_THAT(ValidateWireSpec(w).message(), HasSubstr("spec.kind"));
  w.set_kind(v1::MECHANISM_KIND_HDS);
  w.set_epsilon(0);
  w.set_dimension(10);
  w.set_range_low(-1);
  w.set_range_high(1);
  EXPECT_THAT(ValidateWireSpec(w).message(), HasSubstr("epsilon"));
  w.set_epsilon(1);
  EXPECT_TRUE(ValidateWireSpec(w).ok());
  w.set_sampled(11);
  EXPECT_EQ(ValidateWireSpec(w).code(), absl::StatusCode::kInvalidArgument);
  v1::MechanismSpec label;
  label.set_kind(v1::MECHANISM_KIND_LABEL_RR);
  label.set_epsilon(1);
  label.set_dimension(1);
  EXPECT_EQ(ValidateWireSpec(label).code(), absl::StatusCode::kInvalidArgument);
  label.set_dimension(7);
  EXPECT_TRUE(ValidateWireSpec(label).ok());
}

class DecodeRejects : public ::testing::Test {
 protected:
  void SetUp() override {
    hds_ = Make(MechanismKind::kHds, 20, 3);
    mb_ = Make(MechanismKind::kMultiBit, 20, 3);
    SeededRandomForTesting rng(1);
    std::vector<double> x(20, 0.5);
    good_hds_ = EncodeFeatureReport(*hds_->Perturb(x, rng));
    good_mb_ = EncodeFeatureReport(*mb_->Perturb(x, rng));
  }
  static std::string Message(const absl::StatusOr<SparseReport>& r) {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  }
  std::unique_ptr<FeatureMechanism> hds_, mb_;
  v1::FeatureReport good_hds_, good_mb_;
};

TEST_F(DecodeRejects, WrongSampledCount) {
  good_hds_.add_indices(19);
  good_hds_.add_values(0.0);
  EXPECT_FALSE(DecodeFeatureReport(good_hds_, *hds_).ok());
}

TEST_F(DecodeRejects, IndexOutOfRange) {
  good_hds_.set_indices(2, 20);
  EXPECT_THAT(Message(DecodeFeatureReport(good_hds_, *hds_)), HasSubstr("20"));
}

TEST_F(DecodeRejects, ValuesMissing) {
  good_hds_.mutable_values()->RemoveLast();
  EXPECT_THAT(Message(DecodeFeatureReport(good_hds_, *hds_)),
              HasSubstr("values holds 2"));
}

TEST_F(DecodeRejects, ValueOutsideDomain) {
  good_hds_.set_values(0, 1e6);
  EXPECT_FALSE(DecodeFeatureReport(good_hds_, *hds_).ok());
}

TEST_F(DecodeRejects, BitsForAValueMechanism) {
  good_hds_.set_bits("\x01");
  good_hds_.set_bit_count(1);
  EXPECT_THAT(Message(DecodeFeatureReport(good_hds_, *hds_)),
              HasSubstr("got bits"));
}

TEST_F(DecodeRejects, ValuesForABitMechanism) {
  good_mb_.add_values(1.0);
  EXPECT_THAT(Message(DecodeFeatureReport(good_mb_, *mb_)),
              HasSubstr("reports bits"));
}

TEST_F(DecodeRejects, BitCountMismatch) {
  good_mb_.set_bit_count(4);
  EXPECT_THAT(Message(DecodeFeatureReport(good_mb_, *mb_)),
              HasSubstr("bit_count 4"));
}

TEST_F(DecodeRejects, NonZeroPadding) {
  std::string bits = good_mb_.bits();
  bits[0] = static_cast<char>(bits[0] | 0x80);
  good_mb_.set_bits(bits);
  EXPECT_THAT(Message(DecodeFeatureReport(good_mb_, *mb_)),
              HasSubstr("padding"));
}

TEST_F(DecodeRejects, DenseWithIndices) {
  auto onebit = Make(MechanismKind::kOneBit, 20, std::nullopt);
  SeededRandomForTesting rng(2);
  std::vector<double> x(20, 0.0);
  v1::FeatureReport w = EncodeFeatureReport(*onebit->Perturb(x, rng));
  ASSERT_TRUE(DecodeFeatureReport(w, *onebit).ok());
  w.add_indices(0);
  EXPECT_THAT(Message(DecodeFeatureReport(w, *onebit)),
              HasSubstr("dense report carries no indices"));
}

TEST_F(DecodeRejects, SpecOfAnotherMechanism) {
  *good_hds_.mutable_spec() = ToWire(hds_->spec());
  EXPECT_TRUE(DecodeFeatureReport(good_hds_, *hds_).ok());
  good_hds_.mutable_spec()->set_epsilon(2.0);
  EXPECT_THAT(Message(DecodeFeatureReport(good_hds_, *hds_)),
              HasSubstr("differs from the campaign"));
}

TEST(CodecTest, LabelAndEdgeReports) {
  v1::MechanismSpec label;
  label.set_kind(v1::MECHANISM_KIND_LABEL_RR);
  label.set_epsilon(1);
  label.set_dimension(7);
  v1::LabelReport l;
  l.set_label(6);
  EXPECT_TRUE(ValidateLabelReport(l, label).ok());
  l.set_label(7);
  EXPECT_THAT(ValidateLabelReport(l, label).message(), HasSubstr("out of range"));

  v1::MechanismSpec edges;
  edges.set_kind(v1::MECHANISM_KIND_EDGE_RR);
  edges.set_epsilon(1);
  edges.set_dimension(10);
  v1::EdgeReport e;
  for (uint32_t u : {1u, 4u, 9u}) e.add_neighbours(u);
  EXPECT_TRUE(ValidateEdgeReport(e, edges, 3).ok());
  EXPECT_THAT(ValidateEdgeReport(e, edges, 4).message(),
              HasSubstr("reporting node"));
  e.add_neighbours(9);
  EXPECT_THAT(ValidateEdgeReport(e, edges, 3).message(),
              HasSubstr("ascending"));
  e.set_neighbours(3, 10);
  EXPECT_THAT(ValidateEdgeReport(e, edges, 3).message(),
              HasSubstr("out of range"));
}

// A valid neighbour substitution spec: approach 1 over Multi-bit reports.
v1::MechanismSpec SubstitutionSpec() {
  v1::MechanismSpec w;
  w.set_kind(v1::MECHANISM_KIND_EDGE_SUBSTITUTION);
  w.set_epsilon(1.0);
  w.set_dimension(300);
  v1::SubstitutionSpec* s = w.mutable_substitution();
  s->set_approach(1);
  s->set_similarity("cosine");
  s->set_top_k(5);
  s->set_max_dummies(5);
  s->set_dummy_mean(0.5);
  s->set_dummy_std(0.5);
  s->set_round_timeout_ms(10000);
  v1::MechanismSpec* f = s->mutable_features();
  f->set_kind(v1::MECHANISM_KIND_MULTIBIT);
  f->set_epsilon(2.0);
  f->set_dimension(16);
  f->set_range_low(0);
  f->set_range_high(1);
  return w;
}

// A valid Blink spec: eps 2 in all, delta 0.1, n = 300.
v1::MechanismSpec BlinkSpec() {
  v1::MechanismSpec w;
  w.set_kind(v1::MECHANISM_KIND_EDGE_BLINK);
  w.set_epsilon(2.0);
  w.set_dimension(300);
  w.mutable_blink()->set_degree_share(0.1);
  return w;
}

TEST(SubstitutionSpecTest, ValidSpecAnswersAboutEdges) {
  const v1::MechanismSpec w = SubstitutionSpec();
  EXPECT_TRUE(ValidateWireSpec(w).ok()) << ValidateWireSpec(w);
  EXPECT_EQ(AttributeOf(v1::MECHANISM_KIND_EDGE_SUBSTITUTION),
            v1::ATTRIBUTE_EDGES);
  const QueryKey key = WireQueryKey(v1::ATTRIBUTE_EDGES, w);
  EXPECT_EQ(key.attribute, "edges");
  EXPECT_EQ(key.mechanism, "edge-substitution");
  EXPECT_EQ(key.epsilon, 1.0);
  v1::MechanismSpec approach2 = w;
  approach2.mutable_substitution()->set_approach(2);
  approach2.mutable_substitution()->set_similarity("l2");
  EXPECT_TRUE(ValidateWireSpec(approach2).ok());
}

// Each rejected field: code and a message naming it.
TEST(SubstitutionSpecTest, RejectsEachBadField) {
  struct Case {
    const char* name;
    std::function<void(v1::MechanismSpec&)> spoil;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"no substitution", [](v1::MechanismSpec& w) { w.clear_substitution(); },
       "spec.substitution is required"},
      {"epsilon zero", [](v1::MechanismSpec& w) { w.set_epsilon(0); },
       "epsilon"},
      {"epsilon infinite",
       [](v1::MechanismSpec& w) { w.set_epsilon(INFINITY); }, "epsilon"},
      {"one node", [](v1::MechanismSpec& w) { w.set_dimension(1); },
       "n >= 2"},
      {"approach 0",
       [](v1::MechanismSpec& w) { w.mutable_substitution()->set_approach(0); },
       "approach must be 1 or 2"},
      {"approach 3",
       [](v1::MechanismSpec& w) { w.mutable_substitution()->set_approach(3); },
       "approach must be 1 or 2"},
      {"similarity",
       [](v1::MechanismSpec& w) {
         w.mutable_substitution()->set_similarity("dot");
       },
       "similarity must be cosine or l2"},
      {"top_k 0",
       [](v1::MechanismSpec& w) { w.mutable_substitution()->set_top_k(0); },
       "top_k"},
      {"top_k huge",
       [](v1::MechanismSpec& w) { w.mutable_substitution()->set_top_k(5000); },
       "top_k"},
      {"max_dummies huge",
       [](v1::MechanismSpec& w) {
         w.mutable_substitution()->set_max_dummies(5000);
       },
       "max_dummies"},
      {"dummy_mean nan",
       [](v1::MechanismSpec& w) {
         w.mutable_substitution()->set_dummy_mean(NAN);
       },
       "dummy_mean"},
      {"dummy_std negative",
       [](v1::MechanismSpec& w) {
         w.mutable_substitution()->set_dummy_std(-1);
       },
       "dummy_std"},
      {"dummy_std infinite",
       [](v1::MechanismSpec& w) {
         w.mutable_substitution()->set_dummy_std(INFINITY);
       },
       "dummy_std"},
      {"no timeout",
       [](v1::MechanismSpec& w) {
         w.mutable_substitution()->set_round_timeout_ms(0);
       },
       "round_timeout_ms"},
      {"no features",
       [](v1::MechanismSpec& w) {
         w.mutable_substitution()->clear_features();
       },
       "spec.substitution.features"},
      {"features of an edge kind",
       [](v1::MechanismSpec& w) {
         w.mutable_substitution()->mutable_features()->set_kind(
             v1::MECHANISM_KIND_EDGE_RR);
       },
       "must be a feature mechanism"},
      {"features with infinite epsilon (raw features)",
       [](v1::MechanismSpec& w) {
         w.mutable_substitution()->mutable_features()->set_epsilon(INFINITY);
       },
       "raw features never leave an agent"},
      {"features with epsilon zero",
       [](v1::MechanismSpec& w) {
         w.mutable_substitution()->mutable_features()->set_epsilon(0);
       },
       "features.epsilon"},
      {"features with a bad range",
       [](v1::MechanismSpec& w) {
         w.mutable_substitution()->mutable_features()->set_range_high(0);
       },
       "spec.substitution.features: "},
      {"features with a nested substitution",
       [](v1::MechanismSpec& w) {
         w.mutable_substitution()
             ->mutable_features()
             ->mutable_substitution()
             ->set_approach(1);
       },
       "must not carry a substitution"},
  };
  for (const Case& c : cases) {
    v1::MechanismSpec w = SubstitutionSpec();
    c.spoil(w);
    const absl::Status s = ValidateWireSpec(w);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(s.message(), HasSubstr(c.message)) << c.name << ": " << s;
  }
}

// The memo key changes with every parameter, and with the feature question.
TEST(SubstitutionSpecTest, EveryParameterChangesTheQuestion) {
  const v1::MechanismSpec base = SubstitutionSpec();
  const std::string key = WireQueryKey(v1::ATTRIBUTE_EDGES, base).Canonical();
  const std::vector<std::function<void(v1::MechanismSpec&)>> changes = {
      [](v1::MechanismSpec& w) { w.set_epsilon(1.5); },
      [](v1::MechanismSpec& w) { w.set_dimension(301); },
      [](v1::MechanismSpec& w) { w.mutable_substitution()->set_approach(2); },
      [](v1::MechanismSpec& w) {
        w.mutable_substitution()->set_similarity("l2");
      },
      [](v1::MechanismSpec& w) { w.mutable_substitution()->set_top_k(4); },
      [](v1::MechanismSpec& w) {
        w.mutable_substitution()->set_max_dummies(6);
      },
      [](v1::MechanismSpec& w) {
        w.mutable_substitution()->set_dummy_mean(0.25);
      },
      [](v1::MechanismSpec& w) {
        w.mutable_substitution()->set_dummy_std(0.125);
      },
      [](v1::MechanismSpec& w) {
        w.mutable_substitution()->set_round_timeout_ms(20000);
      },
      [](v1::MechanismSpec& w) {
        w.mutable_substitution()->mutable_features()->set_epsilon(3.0);
      },
      [](v1::MechanismSpec& w) {
        w.mutable_substitution()->mutable_features()->set_kind(
            v1::MECHANISM_KIND_ONEBIT);
      },
      [](v1::MechanismSpec& w) {
        w.mutable_substitution()->mutable_features()->set_dimension(17);
      },
      [](v1::MechanismSpec& w) {
        w.mutable_substitution()->mutable_features()->set_sampled(2);
      },
      [](v1::MechanismSpec& w) {
        w.mutable_substitution()->mutable_features()->set_range_low(-1);
      },
  };
  std::set<std::string> seen = {key};
  for (size_t i = 0; i < changes.size(); ++i) {
    v1::MechanismSpec w = base;
    changes[i](w);
    ASSERT_TRUE(ValidateWireSpec(w).ok()) << i << ": " << ValidateWireSpec(w);
    EXPECT_TRUE(seen.insert(WireQueryKey(v1::ATTRIBUTE_EDGES, w).Canonical())
                    .second)
        << "change " << i << " kept the key " << key;
  }
  // The feature sampled count is compared after resolving its default, as
  // for a features campaign: m = 0 and Multi-bit's default are one question.
  v1::MechanismSpec explicit_m = base;
  auto spec = FromWireFeatureSpec(base.substitution().features());
  ASSERT_TRUE(spec.ok());
  auto mech = CreateFeatureMechanism(*spec);
  ASSERT_TRUE(mech.ok());
  explicit_m.mutable_substitution()->mutable_features()->set_sampled(
      static_cast<uint32_t>(*(*mech)->spec().sampled));
  EXPECT_EQ(WireQueryKey(v1::ATTRIBUTE_EDGES, explicit_m).Canonical(), key);
}

// A substitution campaign asks the features question of its feature spec
// (the same key a features campaign with that spec has) and its own.
TEST(SubstitutionSpecTest, CampaignQuestions) {
  const v1::MechanismSpec w = SubstitutionSpec();
  const std::vector<QueryKey> q = CampaignQuestions(v1::ATTRIBUTE_EDGES, w);
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q[0].Canonical(),
            WireQueryKey(v1::ATTRIBUTE_FEATURES, w.substitution().features())
                .Canonical());
  EXPECT_EQ(q[0].attribute, "features");
  EXPECT_EQ(q[0].epsilon, 2.0);
  EXPECT_EQ(q[1].Canonical(), WireQueryKey(v1::ATTRIBUTE_EDGES, w).Canonical());
  v1::MechanismSpec rr;
  rr.set_kind(v1::MECHANISM_KIND_EDGE_RR);
  rr.set_epsilon(1);
  rr.set_dimension(10);
  EXPECT_EQ(CampaignQuestions(v1::ATTRIBUTE_EDGES, rr).size(), 1u);

  // The compiled spec lists the same questions without building anything.
  for (const v1::MechanismSpec& spec : {w, rr}) {
    auto compiled = CompiledSpec::Compile(spec);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    const std::vector<QueryKey> from_wire =
        CampaignQuestions(v1::ATTRIBUTE_EDGES, spec);
    const std::vector<QueryKey> from_compiled =
        compiled->Questions(v1::ATTRIBUTE_EDGES);
    ASSERT_EQ(from_compiled.size(), from_wire.size());
    for (size_t i = 0; i < from_wire.size(); ++i) {
      EXPECT_EQ(from_compiled[i].Canonical(), from_wire[i].Canonical());
    }
  }
}

TEST(SubstitutionSpecTest, EdgeReports) {
  const v1::MechanismSpec w = SubstitutionSpec();
  v1::EdgeReport e;
  for (uint32_t u : {1u, 4u, 299u}) e.add_neighbours(u);
  EXPECT_TRUE(ValidateEdgeReport(e, w, 3).ok());
  // A spec inside the report must be the campaign's, parameters included.
  *e.mutable_spec() = w;
  EXPECT_TRUE(ValidateEdgeReport(e, w, 3).ok());
  e.mutable_spec()->mutable_substitution()->set_top_k(2);
  EXPECT_THAT(ValidateEdgeReport(e, w, 3).message(), HasSubstr("differs"));
  e.clear_spec();
  EXPECT_THAT(ValidateEdgeReport(e, w, 4).message(),
              HasSubstr("reporting node"));
  e.set_neighbours(2, 300);
  EXPECT_THAT(ValidateEdgeReport(e, w, 3).message(),
              HasSubstr("out of range"));
  e.set_neighbours(2, 4);
  EXPECT_THAT(ValidateEdgeReport(e, w, 3).message(), HasSubstr("ascending"));
}

// A compiled spec holds what the free functions compute from the wire spec,
// and the mechanism they would build.
// --- Blink ---------------------------------------------------------------

TEST(BlinkSpecTest, ValidSpecAnswersAboutEdgesAndDeltaIsPartOfTheQuestion) {
  const v1::MechanismSpec w = BlinkSpec();
  ASSERT_TRUE(ValidateWireSpec(w).ok()) << ValidateWireSpec(w);
  EXPECT_EQ(AttributeOf(w.kind()), v1::ATTRIBUTE_EDGES);
  const QueryKey key = WireQueryKey(v1::ATTRIBUTE_EDGES, w);
  EXPECT_EQ(key.mechanism, "edge-blink");
  EXPECT_THAT(key.parameters, HasSubstr("n=300"));
  EXPECT_THAT(key.parameters, HasSubstr("delta=0.10000000000000001"));
  v1::MechanismSpec other = w;
  other.mutable_blink()->set_degree_share(0.2);
  EXPECT_NE(WireQueryKey(v1::ATTRIBUTE_EDGES, other).Canonical(),
            key.Canonical());
  // Not edge RR's question either, at the same n and epsilon.
  v1::MechanismSpec rr = w;
  rr.set_kind(v1::MECHANISM_KIND_EDGE_RR);
  rr.clear_blink();
  EXPECT_NE(WireQueryKey(v1::ATTRIBUTE_EDGES, rr).Canonical(),
            key.Canonical());
  auto c = CompiledSpec::Compile(w);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->blink()->params().delta, 0.1);
  EXPECT_DOUBLE_EQ(c->blink()->params().epsilon, 2.0);
}

TEST(BlinkSpecTest, RejectsEachBadField) {
  struct Case {
    std::function<void(v1::MechanismSpec&)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](v1::MechanismSpec& w) { w.clear_blink(); }, "spec.blink"},
      {[](v1::MechanismSpec& w) { w.mutable_blink()->set_degree_share(0); },
       "delta"},
      {[](v1::MechanismSpec& w) { w.mutable_blink()->set_degree_share(1); },
       "delta"},
      {[](v1::MechanismSpec& w) {
         w.mutable_blink()->set_degree_share(std::nan(""));
       },
       "delta"},
      {[](v1::MechanismSpec& w) { w.set_epsilon(0); }, "eps"},
      {[](v1::MechanismSpec& w) {
         w.set_epsilon(std::numeric_limits<double>::infinity());
       },
       "eps"},
      {[](v1::MechanismSpec& w) { w.set_dimension(2); }, "n >= 3"},
  };
  for (const Case& c : cases) {
    v1::MechanismSpec w = BlinkSpec();
    c.edit(w);
    SCOPED_TRACE(w.ShortDebugString());
    const absl::Status s = ValidateWireSpec(w);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message));
  }
}

TEST(BlinkSpecTest, EdgeReports) {
  const v1::MechanismSpec w = BlinkSpec();
  auto c = CompiledSpec::Compile(w);
  ASSERT_TRUE(c.ok()) << c.status();
  // A real report of node 3 with neighbours 1, 4, 9.
  SeededRandomForTesting rng(5);
  const std::vector<uint32_t> truth = {1, 4, 9};
  auto report = c->blink()->Report(3, truth, rng);
  ASSERT_TRUE(report.ok()) << report.status();
  v1::EdgeReport e;
  e.mutable_neighbours()->Assign(report->neighbours.begin(),
                                 report->neighbours.end());
  e.set_noisy_degree(report->noisy_degree);
  *e.mutable_spec() = w;
  EXPECT_TRUE(ValidateEdgeReport(e, w, 3).ok()) << ValidateEdgeReport(e, w, 3);
  // An integer degree is on every grid (g <= 1), zero too.
  e.set_noisy_degree(-2);
  EXPECT_TRUE(ValidateEdgeReport(e, w, 3).ok());

  const double g = c->blink()->degree_granularity();
  for (double bad : {2 + g / 2, std::nan(""),
                     std::numeric_limits<double>::infinity()}) {
    SCOPED_TRACE(bad);
    e.set_noisy_degree(bad);
    const absl::Status s = ValidateEdgeReport(e, w, 3);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr("noisy_degree"));
  }
  e.set_noisy_degree(3);
  // The neighbour rules are edge RR's.
  e.add_neighbours(400);
  EXPECT_THAT(ValidateEdgeReport(e, w, 3).message(), HasSubstr("out of range"));
  // A report of another delta is another question.
  e.mutable_neighbours()->RemoveLast();
  e.mutable_spec()->mutable_blink()->set_degree_share(0.3);
  EXPECT_THAT(ValidateEdgeReport(e, w, 3).message(), HasSubstr("differs"));

  // A noisy degree on an edge RR report is forged.
  v1::MechanismSpec rr;
  rr.set_kind(v1::MECHANISM_KIND_EDGE_RR);
  rr.set_epsilon(1);
  rr.set_dimension(10);
  v1::EdgeReport r;
  r.add_neighbours(1);
  r.set_noisy_degree(1);
  const absl::Status s = ValidateEdgeReport(r, rr, 3);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("noisy_degree"));
}

TEST(CompiledSpecTest, AgreesWithTheFreeFunctionsForEveryKind) {
  std::vector<v1::MechanismSpec> specs;
  for (MechanismKind kind :
       {MechanismKind::kSquareWave, MechanismKind::kHds,
        MechanismKind::kMultiBit, MechanismKind::kOneBit,
        MechanismKind::kPiecewise, MechanismKind::kLaplace}) {
    const int d = kind == MechanismKind::kSquareWave ? 1 : 20;
    specs.push_back(ToWire(Make(kind, d, std::nullopt)->spec()));
  }
  v1::MechanismSpec label;
  label.set_kind(v1::MECHANISM_KIND_LABEL_RR);
  label.set_epsilon(1.5);
  label.set_dimension(7);
  specs.push_back(label);
  v1::MechanismSpec edges;
  edges.set_kind(v1::MECHANISM_KIND_EDGE_RR);
  edges.set_epsilon(2);
  edges.set_dimension(300);
  specs.push_back(edges);
  specs.push_back(SubstitutionSpec());
  specs.push_back(BlinkSpec());
  for (const v1::MechanismSpec& w : specs) {
    SCOPED_TRACE(w.ShortDebugString());
    absl::StatusOr<CompiledSpec> c = CompiledSpec::Compile(w);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->kind(), w.kind());
    EXPECT_EQ(c->wire().SerializeAsString(), w.SerializeAsString());
    EXPECT_EQ(c->parameter_string(), WireParameterString(w));
    const v1::Attribute attribute = AttributeOf(w.kind());
    EXPECT_EQ(c->Key(attribute).Canonical(),
              WireQueryKey(attribute, w).Canonical());
    const bool feature = attribute == v1::ATTRIBUTE_FEATURES;
    const bool substitution =
        w.kind() == v1::MECHANISM_KIND_EDGE_SUBSTITUTION;
    EXPECT_EQ(c->feature() != nullptr, feature);
    EXPECT_EQ(c->label() != nullptr, w.kind() == v1::MECHANISM_KIND_LABEL_RR);
    const bool blink = w.kind() == v1::MECHANISM_KIND_EDGE_BLINK;
    EXPECT_EQ(c->edges() != nullptr,
              attribute == v1::ATTRIBUTE_EDGES && !blink);
    EXPECT_EQ(c->blink() != nullptr, blink);
    EXPECT_EQ(c->substitution_features() != nullptr, substitution);
    if (feature) {
      EXPECT_EQ(c->feature()->ParameterString(), c->parameter_string());
      EXPECT_EQ(c->feature()->epsilon(), w.epsilon());
    }
    if (substitution) {
      const v1::MechanismSpec& f = w.substitution().features();
      EXPECT_EQ(c->substitution_features()->Key(v1::ATTRIBUTE_FEATURES)
                    .Canonical(),
                WireQueryKey(v1::ATTRIBUTE_FEATURES, f).Canonical());
      EXPECT_EQ(CampaignQuestions(v1::ATTRIBUTE_EDGES, w)[0].Canonical(),
                c->substitution_features()
                    ->Key(v1::ATTRIBUTE_FEATURES)
                    .Canonical());
    }
  }
}

// Compile fails exactly when ValidateWireSpec does, with its message.
TEST(CompiledSpecTest, FailsAsValidateWireSpec) {
  std::vector<v1::MechanismSpec> bad(7);
  bad[1].set_kind(v1::MECHANISM_KIND_HDS);  // epsilon 0
  bad[2].set_kind(v1::MECHANISM_KIND_LABEL_RR);
  bad[2].set_epsilon(1);
  bad[2].set_dimension(1);
  bad[3] = SubstitutionSpec();
  bad[3].mutable_substitution()->mutable_features()->set_sampled(99);
  bad[4] = SubstitutionSpec();
  bad[4].mutable_substitution()->set_top_k(0);
  bad[5] = BlinkSpec();
  bad[5].mutable_blink()->set_degree_share(1.0);
  bad[6] = BlinkSpec();
  bad[6].set_dimension(2);
  for (const v1::MechanismSpec& w : bad) {
    SCOPED_TRACE(w.ShortDebugString());
    const absl::Status v = ValidateWireSpec(w);
    const absl::Status c = CompiledSpec::Compile(w).status();
    EXPECT_FALSE(v.ok());
    EXPECT_EQ(c, v);
  }
}

TEST(CodecTest, AttributeNamesAndKeyMechanismsComeFromTheTables) {
  EXPECT_EQ(*AttributeName(v1::ATTRIBUTE_FEATURES), "features");
  EXPECT_EQ(*AttributeName(v1::ATTRIBUTE_LABEL), "label");
  EXPECT_EQ(*AttributeName(v1::ATTRIBUTE_EDGES), "edges");
  for (int bad : {0, 4}) {
    auto name = AttributeName(static_cast<v1::Attribute>(bad));
    EXPECT_EQ(name.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(name.status().message(),
              absl::StrCat("attribute must be features, label or edges, got ",
                           bad));
  }
  v1::MechanismSpec w;
  w.set_epsilon(1);
  w.set_dimension(5);
  w.set_kind(v1::MECHANISM_KIND_LABEL_RR);
  EXPECT_EQ(WireQueryKey(v1::ATTRIBUTE_LABEL, w).mechanism, "label-rr");
  EXPECT_EQ(WireQueryKey(v1::ATTRIBUTE_LABEL, w).attribute, "label");
  w.set_kind(v1::MECHANISM_KIND_EDGE_RR);
  EXPECT_EQ(WireQueryKey(v1::ATTRIBUTE_EDGES, w).mechanism, "edge-rr");
  // A kind no table lists (never a valid campaign's) keys as edge-rr, an
  // unknown attribute as "unknown".
  w.set_kind(v1::MECHANISM_KIND_UNSPECIFIED);
  EXPECT_EQ(WireQueryKey(v1::ATTRIBUTE_UNSPECIFIED, w).mechanism, "edge-rr");
  EXPECT_EQ(WireQueryKey(v1::ATTRIBUTE_UNSPECIFIED, w).attribute, "unknown");
  w.set_kind(v1::MECHANISM_KIND_PIECEWISE);
  EXPECT_EQ(WireQueryKey(v1::ATTRIBUTE_FEATURES, w).mechanism, "piecewise");
}

}  // namespace
}  // namespace ldpgraph::wire
