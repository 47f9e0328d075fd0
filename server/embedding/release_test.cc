// Tests for the release methods' names and their link to the pipeline's
// methods: one table of names (the pipeline methods'), conversions both
// ways, and the parse error naming the release methods only.
#include "server/embedding/release.h"

#include <gtest/gtest.h>

namespace ldpgraph::embedding {
namespace {

TEST(ReleaseMethodTest, NamesAreThePipelineMethods) {
  for (const auto& [method, name] : kReleaseMethodNames.values()) {
    EXPECT_EQ(name, wire::kPipelineMethodNames.Name(ToPipelineMethod(method)));
    EXPECT_EQ(ReleaseMethodOf(ToPipelineMethod(method)), method);
    auto parsed = ParseReleaseMethod(name);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, method);
  }
  EXPECT_EQ(ReleaseMethodName(ReleaseMethod::kSePrivGemb), "se-privgemb");
  EXPECT_EQ(ReleaseMethodName(ReleaseMethod::kDpne), "dpne");
  EXPECT_EQ(ToPipelineMethod(ReleaseMethod::kDpne), v1::PIPELINE_METHOD_DPNE);
}

TEST(ReleaseMethodTest, OtherPipelineMethodsAreNoReleases) {
  for (v1::PipelineMethod m :
       {v1::PIPELINE_METHOD_UNSPECIFIED, v1::PIPELINE_METHOD_PRIVGE,
        v1::PIPELINE_METHOD_LPGNN, static_cast<v1::PipelineMethod>(99)}) {
    EXPECT_FALSE(ReleaseMethodOf(m).has_value()) << m;
  }
  auto parsed = ParseReleaseMethod("privge");
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message(),
            "release method must be one of se-privgemb, dpne, got 'privge'");
}

}  // namespace
}  // namespace ldpgraph::embedding
