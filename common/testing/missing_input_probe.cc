// A probe for the missing-input rule (missing_input.h), run only by
// tests/missing_input_test.sh: it needs the file named by
// $LDPGRAPH_PROBE_INPUT and reports it missing by the rule, so that the rule
// itself is tested without hiding any real test's input.
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/testing/missing_input.h"
#include "gtest/gtest.h"

namespace {

TEST(MissingInputProbe, NeedsItsInput) {
  const char* input = std::getenv("LDPGRAPH_PROBE_INPUT");
  ASSERT_NE(input, nullptr) << "set LDPGRAPH_PROBE_INPUT";
  if (!std::filesystem::exists(input)) {
    LDPGRAPH_SKIP_OR_FAIL_IN_CI() << "no input at " << input;
  }
  SUCCEED();
}

}  // namespace
