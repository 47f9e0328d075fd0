// `ldpctl simulate` in this process, for what happens before (or instead
// of) a deployment: flag validation, and the work folder of a run that fails
// before or as its first process starts (a stand-in curator that exits at
// once). The deployment itself is tested end to end, with the real
// binaries, in tests/integration/simulate_test.cc.
#include "server/ldpctl/simulate.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
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

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

struct Result {
  int code;
  std::string out, err;
};

// Each test's own $TMPDIR (tmp_), where simulate makes its default work
// folder, and a scratch folder (scratch_) beside it.
class SimulateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = root_.File("tmp");
    scratch_ = root_.File("scratch");
    fs::create_directory(tmp_);
    fs::create_directory(scratch_);
    const char* old = std::getenv("TMPDIR");
    if (old != nullptr) old_tmpdir_ = old;
    setenv("TMPDIR", tmp_.c_str(), 1);
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

  // The default work folders simulate left in $TMPDIR.
  std::vector<std::string> LeftInTmp() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(tmp_)) {
      out.push_back(e.path().string());
    }
    return out;
  }

  TempFolder root_;
  std::string tmp_, scratch_;
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
    EXPECT_TRUE(fs::is_empty(tmp_));
  }
  Result r = Simulate({"--cap", "nan"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("--cap must be a finite number"));
}

// --threads reaches the curator as --pipeline-threads; a bad count is a
// usage error before anything starts.
TEST_F(SimulateTest, ThreadsMustBeACount) {
  for (const char* threads : {"-1", "5000"}) {
    SCOPED_TRACE(threads);
    Result r = Simulate({"--nodes", "400", "--threads", threads});
    EXPECT_EQ(r.code, kExitUsage);
    EXPECT_THAT(r.err, HasSubstr(absl::StrCat(
                           "--threads must be in [0, 4096] (0 = every core), got ",
                           threads)));
    EXPECT_EQ(r.out, "");
    EXPECT_TRUE(fs::is_empty(tmp_));
  }
}

// --latency, --jitter and --loss are checked, naming the flag, before a
// proxy or process starts.
TEST_F(SimulateTest, NetworkFlagsAreCheckedBeforeAnythingStarts) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--loss", "1"}, "--loss must be in [0, 1), got 1"},
      {{"--loss", "-0.1"}, "--loss must be in [0, 1), got -0.1"},
      {{"--latency", "-1"}, "--latency must be in [0, 600000] milliseconds, got -1"},
      {{"--jitter", "700000"}, "--jitter must be in [0, 600000] milliseconds"},
      {{"--latency", "nan"}, "--latency must be a finite number"},
  };
  for (const auto& [flags, message] : cases) {
    SCOPED_TRACE(flags[0] + " " + flags[1]);
    std::vector<std::string> args = {"--nodes", "400"};
    args.insert(args.end(), flags.begin(), flags.end());
    Result r = Simulate(args);
    EXPECT_EQ(r.code, kExitUsage);
    EXPECT_THAT(r.err, HasSubstr(message));
    EXPECT_EQ(r.out, "");
    EXPECT_TRUE(fs::is_empty(tmp_));
  }
}

// --defence and --screen-alpha are checked before anything starts.
TEST_F(SimulateTest, DefenceFlagsAreChecked) {
  Result r = Simulate({"--nodes", "400", "--defence", "filter"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("--defence: defence must be a comma list of "
                               "none, screen, robust, edge-consistency, got "
                               "'filter'"));
  // edge-consistency screens edge reports: the curator's own graph has none.
  r = Simulate({"--nodes", "400", "--defence", "robust,edge-consistency"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("--defence edge-consistency screens edge "
                               "reports: it needs --edges rr or blink"));
  r = Simulate({"--nodes", "400", "--screen-alpha", "0.01"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("--screen-alpha needs --defence screen"));
  r = Simulate({"--nodes", "400", "--defence", "screen", "--screen-alpha", "0"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("--screen-alpha must be in (0, 1), got 0"));
  EXPECT_TRUE(fs::is_empty(tmp_));
}

// A failure before any process starts leaves no log: the default folder
// goes, and the error names only the cause.
TEST_F(SimulateTest, EarlyFailureRemovesTheDefaultFolderAndDoesNotNameIt) {
  const std::string missing = scratch_ + "/no-such-dataset";
  Result r = Simulate({"--dataset", missing});
  EXPECT_EQ(r.code, kExitNotFound) << r.err;
  EXPECT_THAT(r.err, HasSubstr(missing));
  EXPECT_THAT(r.err, Not(HasSubstr("ldpctl-sim-")));
  EXPECT_THAT(r.err, Not(HasSubstr("are in")));
  EXPECT_THAT(LeftInTmp(), ::testing::IsEmpty());

  // Past the dataset and the certificates, the binaries are missing.
  r = Simulate({"--nodes", "400", "--hosts", "2", "--bin-dir",
                scratch_ + "/no-bin"});
  EXPECT_EQ(r.code, kExitNotFound) << r.err;
  EXPECT_THAT(r.err, HasSubstr("/no-bin/ldpgraph-curator"));
  EXPECT_THAT(r.err, Not(HasSubstr("ldpctl-sim-")));
  EXPECT_THAT(LeftInTmp(), ::testing::IsEmpty());
}

TEST_F(SimulateTest, EarlyFailureCleansANamedWorkDirAndKeepsOneThatExisted) {
  const std::vector<std::string> fail = {"--nodes", "400", "--hosts", "2",
                                         "--bin-dir", scratch_ + "/no-bin"};
  // A new --work-dir that simulate made: removed.
  const std::string fresh = scratch_ + "/runs/w1";
  std::vector<std::string> args = fail;
  args.insert(args.end(), {"--work-dir", fresh});
  Result r = Simulate(args);
  EXPECT_EQ(r.code, kExitNotFound) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr(fresh)));
  EXPECT_FALSE(fs::exists(fresh));

  // An empty one that existed: emptied again, so the same command can be
  // run once the cause is fixed, and left in place.
  const std::string existing = scratch_ + "/w2";
  fs::create_directory(existing);
  args = fail;
  args.insert(args.end(), {"--work-dir", existing});
  r = Simulate(args);
  EXPECT_EQ(r.code, kExitNotFound) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr(existing)));
  EXPECT_TRUE(fs::is_directory(existing));
  EXPECT_TRUE(fs::is_empty(existing));

  // A non-empty one is refused and never touched.
  const std::string full = scratch_ + "/w3";
  fs::create_directory(full);
  std::ofstream(full + "/mine.txt") << "x";
  args = fail;
  args.insert(args.end(), {"--work-dir", full});
  r = Simulate(args);
  EXPECT_EQ(r.code, kExitRefused) << r.err;
  EXPECT_THAT(r.err, HasSubstr(full + " is not empty"));
  EXPECT_THAT(r.err, Not(HasSubstr("are in")));
  EXPECT_TRUE(fs::exists(full + "/mine.txt"));
  EXPECT_EQ(std::distance(fs::directory_iterator(full), fs::directory_iterator()), 1);

  // --keep keeps it anyway.
  const std::string kept = scratch_ + "/w4";
  args = fail;
  args.insert(args.end(), {"--work-dir", kept, "--keep"});
  r = Simulate(args);
  EXPECT_EQ(r.code, kExitNotFound) << r.err;
  EXPECT_THAT(r.err, HasSubstr(kept));
  EXPECT_TRUE(fs::exists(kept + "/tls"));
}

// Once a process has started, its log is worth reading: the folder stays
// and the error says where.
TEST_F(SimulateTest, AFailureAfterAProcessStartedKeepsAndNamesTheFolder) {
  const std::string curator = scratch_ + "/ldpgraph-curator";
  std::ofstream(curator) << "#!/bin/sh\necho 'stand-in curator: broken' >&2\nexit 3\n";
  fs::permissions(curator, fs::perms(0755));
  Result r = Simulate({"--nodes", "400", "--hosts", "2", "--bin-dir", scratch_});
  EXPECT_EQ(r.code, kExitFailed) << r.err;
  EXPECT_THAT(r.err, HasSubstr("curator exited with status 3"));
  EXPECT_THAT(r.err, HasSubstr("stand-in curator: broken"));
  const std::vector<std::string> left = LeftInTmp();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_THAT(r.err,
              HasSubstr(absl::StrCat("logs, stores and certificates are in ", left[0])));
  EXPECT_TRUE(fs::exists(left[0] + "/curator.log"));
}

}  // namespace
}  // namespace ldpgraph::ldpctl

namespace ldpgraph::ldpctl {
namespace {

// --malicious and its settings are checked before anything starts.
TEST(SimulateAttackFlagsTest, BadSettingsAreUsageErrors) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{"--malicious", "1"}, "--malicious: the malicious fraction must be in [0, 1), got 1"},
      {{"--attack-class", "2"}, "--attack-class applies to --malicious F"},
      {{"--attack-dims", "2"}, "--attack-dims applies to --malicious F"},
      {{"--attack", "labels-only"}, "--attack applies to --malicious F"},
      {{"--malicious", "0.1", "--attack", "flood"}, "--attack"},
      {{"--malicious", "0.1", "--attack", "flood"}, "'flood'"},
      {{"--attack-edges", "5"}, "--attack-edges applies to --malicious F"},
      {{"--malicious", "0.1", "--attack-edges", "5"},
       "--attack-edges applies to --attack fake-edges"},
      {{"--malicious", "0.1", "--attack", "fake-edges"},
       "--attack fake-edges crafts edge reports: it needs --edges rr or blink"},
      {{"--malicious", "0.1", "--attack", "fake-edges", "--edges", "ns1"},
       "it needs --edges rr or blink"},
      {{"--malicious", "0.1", "--attack", "fake-edges", "--edges", "rr",
        "--attack-edges", "0"},
       "--attack-edges must be >= 1, got 0"},
      {{"--malicious", "0.1", "--attack-dims", "0"}, "target dimensions must be >= 1"},
      {{"--malicious", "0.1", "--attack-class", "-1"}, "attack class must be >= 0"},
  };
  for (const Case& c : cases) {
    std::ostringstream out, err;
    std::vector<std::string> args = {"--nodes", "400"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    EXPECT_EQ(RunSimulate(args, "/nonexistent/ldpctl", out, err), kExitUsage);
    EXPECT_THAT(err.str(), HasSubstr(c.message));
  }
}

// The help names every attack and defence (the texts ldpgraph eval shares).
TEST(SimulateAttackFlagsTest, HelpNamesTheAttacksAndDefences) {
  const std::string help = SimulateHelp();
  for (const char* name : {"--attack A", "maximal-gain", "input", "adaptive",
                           "labels-only", "fake-edges", "--defence D[,D...]",
                           "robust:", "screen:", "--screen-alpha A"}) {
    EXPECT_THAT(help, HasSubstr(name));
  }
  EXPECT_THAT(RunHelp(), HasSubstr("robust:"));
}

}  // namespace
}  // namespace ldpgraph::ldpctl
