#include "common/wire/codec.h"

#include <vector>

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

}  // namespace
}  // namespace ldpgraph::wire
