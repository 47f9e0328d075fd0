// `ldpctl simulate` in this process, for what happens before (or instead
// of) a deployment: flag validation. The deployment itself is tested end to
// end, with the real binaries, in tests/integration/simulate_test.cc.
#include "server/ldpctl/simulate.h"

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/temp_folder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/ldpctl/connection.h"

namespace ldpgraph::ldpctl {
namespace {

using ::testing::HasSubstr;

struct Result {
  int code;
  std::string out, err;
};

// Each test's own $TMPDIR, where simulate makes its default work folder.
class SimulateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* old = std::getenv("TMPDIR");
    if (old != nullptr) old_tmpdir_ = old;
    setenv("TMPDIR", tmp_.path().c_str(), 1);
  }
  void TearDown() override {
    if (old_tmpdir_) {
      setenv("TMPDIR", old_tmpdir_->c_str(), 1);
    } else {
      unsetenv("TMPDIR");
    }
  }

  Result Simulate(const std::vector<std::string>& args) {
    std::ostringstream out, err;
    const int code = RunSimulate(args, "/nonexistent/ldpctl", out, err);
    return {code, out.str(), err.str()};
  }

  TempFolder tmp_;
  std::optional<std::string> old_tmpdir_;
};

// The agent hosts refuse a cap that is not > 0 when they start; simulate
// must say so itself, naming the flag, before it starts anything.
TEST_F(SimulateTest, CapMustBePositive) {
  for (const char* cap : {"0", "-1", "-0"}) {
    SCOPED_TRACE(cap);
    Result r = Simulate({"--nodes", "400", "--cap", cap});
    EXPECT_EQ(r.code, kExitUsage);
    EXPECT_THAT(r.err, HasSubstr(absl::StrCat("--cap must be > 0, got ", cap)));
    EXPECT_THAT(r.err, HasSubstr("can answer nothing"));
    EXPECT_THAT(r.err, HasSubstr("ldpctl simulate --help"));
    EXPECT_EQ(r.out, "");
    EXPECT_TRUE(std::filesystem::is_empty(tmp_.path()));
  }
  Result r = Simulate({"--cap", "nan"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("--cap must be a finite number"));
}

}  // namespace
}  // namespace ldpgraph::ldpctl
