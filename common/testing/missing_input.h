// Tests only: what a test does when something it needs from outside the
// source tree is absent (the shared datasets, a built binary). On a
// developer's machine it skips, saying what is missing and where it looked;
// under CI (the environment variable CI is "true" or "1", as CI machines
// set it) it fails with the same message, so that a CI run cannot pass
// while silently testing less. The Python tests follow the same rule
// (python/tests/conftest.py).
//
//   if (!fs::exists(cora + "/meta.json")) {
//     LDPGRAPH_SKIP_OR_FAIL_IN_CI() << "no dataset at " << cora;
//   }
//
// Like GTEST_SKIP(), it returns from the enclosing function (a test body,
// SetUp or a helper returning void) and takes a message with <<.
#pragma once

#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "gtest/gtest.h"

namespace ldpgraph::test_inputs {

// Whether the environment says this is a CI run: CI=true or CI=1 (any case).
inline bool InCi() {
  const char* ci = std::getenv("CI");
  if (ci == nullptr) return false;
  const std::string v = absl::AsciiStrToLower(ci);
  return v == "true" || v == "1";
}

// A skip, or under CI a fatal failure.
inline ::testing::TestPartResult::Type MissingInputResult() {
  return InCi() ? ::testing::TestPartResult::kFatalFailure
                : ::testing::TestPartResult::kSkip;
}

// The line before the test's own message: under CI, why this fails.
inline const char* MissingInputSummary() {
  return InCi() ? "CI is set: a missing test input is a failure, not a skip "
                  "(outside CI this test skips)"
                : "";
}

}  // namespace ldpgraph::test_inputs

#define LDPGRAPH_SKIP_OR_FAIL_IN_CI()                                 \
  return ::testing::internal::AssertHelper(                           \
             ::ldpgraph::test_inputs::MissingInputResult(), __FILE__,     \
             __LINE__, ::ldpgraph::test_inputs::MissingInputSummary()) =  \
             ::testing::Message()
