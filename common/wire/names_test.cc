// Tests for the wire's name tables: each lists every value of its proto
// enum but UNSPECIFIED, in the proto's order, named by the rule the Python
// package derives its names by (prefix stripped, lower case, underscores as
// dashes); the feature kinds keep the feature mechanisms' own names; the
// tables parse what they print and reject the rest with the table's message.
#include "common/wire/names.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "common/wire/codec.h"

namespace ldpgraph::wire {
namespace {

// The command-line name of a proto enum value by the rule of names.h.
std::string RuleName(absl::string_view proto_name, absl::string_view prefix) {
  absl::string_view rest = proto_name;
  EXPECT_TRUE(absl::ConsumePrefix(&rest, prefix)) << proto_name;
  return absl::StrReplaceAll(absl::AsciiStrToLower(rest), {{"_", "-"}});
}

// table lists every value of the enum but 0 (UNSPECIFIED), in the proto's
// order, each named by the rule, and parses each name back to its value.
template <class E, size_t N>
void ExpectFollowsTheProto(const NameTable<E, N>& table,
                           const google::protobuf::EnumDescriptor* d,
                           absl::string_view prefix) {
  SCOPED_TRACE(d->full_name());
  ASSERT_EQ(d->value(0)->number(), 0);
  ASSERT_EQ(static_cast<size_t>(d->value_count()), N + 1);
  for (int i = 1; i < d->value_count(); ++i) {
    const auto* v = d->value(i);
    const E value = static_cast<E>(v->number());
    EXPECT_EQ(table.values()[i - 1].value, value) << v->name();
    EXPECT_EQ(table.Name(value), RuleName(v->name(), prefix));
    auto parsed = table.Parse(table.Name(value));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, value);
  }
  EXPECT_EQ(table.Name(static_cast<E>(0)), "unknown");
  EXPECT_FALSE(table.Contains(static_cast<E>(0)));
}

TEST(WireNamesTest, MechanismKindsFollowTheProto) {
  ExpectFollowsTheProto(kMechanismKindNames, v1::MechanismKind_descriptor(),
                        "MECHANISM_KIND_");
}

TEST(WireNamesTest, AttributesFollowTheProto) {
  ExpectFollowsTheProto(kAttributeNames, v1::Attribute_descriptor(),
                        "ATTRIBUTE_");
}

TEST(WireNamesTest, PipelineMethodsAndTasksFollowTheProto) {
  ExpectFollowsTheProto(kPipelineMethodNames, v1::PipelineMethod_descriptor(),
                        "PIPELINE_METHOD_");
  ExpectFollowsTheProto(kPipelineTaskNames, v1::PipelineTask_descriptor(),
                        "PIPELINE_TASK_");
}

TEST(WireNamesTest, FeatureKindsKeepTheFeatureMechanismsNames) {
  for (const auto& [kind, name] : kFeatureMechanismNames.values()) {
    EXPECT_EQ(kMechanismKindNames.Name(ToWireKind(kind)), name);
  }
}

TEST(WireNamesTest, RejectsOtherNamesListingTheChoices) {
  EXPECT_EQ(kMechanismKindNames.Parse("gauss").status().message(),
            "mechanism must be one of square-wave, hds, multibit, onebit, "
            "piecewise, laplace, label-rr, edge-rr, edge-substitution, "
            "edge-blink, got 'gauss'");
  EXPECT_EQ(kAttributeNames.Parse("Label").status().message(),
            "attribute must be one of features, label, edges, got 'Label'");
  EXPECT_EQ(kAttributeNames.ChoicesOr(), "features, label or edges");
  EXPECT_EQ(kPipelineMethodNames.Parse("").status().message(),
            "method must be one of privge, lpgnn, se-privgemb, dpne, upgnet, got ''");
  EXPECT_EQ(kPipelineTaskNames.Parse("edge").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ldpgraph::wire
