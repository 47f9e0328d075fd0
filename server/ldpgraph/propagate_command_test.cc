// Tests for `ldpgraph propagate`: a clear error naming the flag for each kind
// of bad command line (exit 2), runtime failures naming the path (exit 1),
// and end to end on a small generated dataset: the .npy it writes has the
// right shape, numpy reads it, and it equals what the propagation library
// computes on the same (scaled, optionally perturbed) features; results do
// not depend on --threads; a seeded run says it is not private and is
// reproducible; what gets propagated is the curator's estimate of the
// reports, not the raw features.
#include "server/ldpgraph/propagate_command.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/dataset/dataset.h"
#include "common/dataset/feature_schema.h"
#include "common/dataset/generator.h"
#include "common/mechanisms/feature_mechanism.h"
#include "common/linalg/npy.h"
#include "common/random/random.h"
#include "server/propagation/propagation.h"

namespace ldpgraph::tool {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr size_t kNodes = 300;
constexpr size_t kFeatures = 20;

struct PropagateRun {
  int code;
  std::string out, err;
};

PropagateRun Propagate(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = RunPropagate(args, out, err);
  return {code, out.str(), err.str()};
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteAll(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  ASSERT_TRUE(f.good()) << path;
}

// A generated dataset (300 nodes, 20 features, feature_range [0, 1]) written
// once per suite, plus fresh per-test paths removed at the end of the test.
class PropagateCommandTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(absl::StrCat(
        ::testing::TempDir(), "/propagate_command_test_", getpid()));
    fs::remove_all(*root_);
    fs::create_directories(*root_);
    GeneratorOptions o = DefaultGeneratorOptions();
    o.nodes = kNodes;
    o.classes = 3;
    o.features = static_cast<int>(kFeatures);
    o.avg_degree = 6;
    o.homophily = 0.7;
    o.seed = 5;
    auto d = GenerateDataset(o);
    ASSERT_TRUE(d.ok()) << d.status();
    dataset_ = new std::string(*root_ + "/generated");
    ASSERT_TRUE(WriteDataset(*d, *dataset_).ok());
  }
  static void TearDownTestSuite() {
    fs::remove_all(*root_);
    delete root_;
    delete dataset_;
    root_ = dataset_ = nullptr;
  }

  const std::string& dataset() const { return *dataset_; }

  // A fresh path (nothing exists there) for this test.
  std::string Path(const std::string& name) {
    const std::string dir = absl::StrCat(
        *root_, "/",
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
    made_.push_back(dir);
    const std::string path = dir + "/" + name;
    fs::remove_all(path);
    return path;
  }
  void TearDown() override {
    for (const auto& p : made_) fs::remove_all(p);
  }

  // The dataset as the command sees it.
  static Dataset Load(const std::string& dir) {
    auto d = LoadDataset(dir);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *std::move(d) : Dataset();
  }

  // Runs the command on the generated dataset with --out, expects success,
  // and returns the bytes of the output file.
  std::string RunOk(const std::string& out, std::vector<std::string> args,
                    PropagateRun* result = nullptr) {
    args.insert(args.begin(), {"--dataset", dataset(), "--out", out});
    PropagateRun r = Propagate(args);
    EXPECT_EQ(r.code, 0) << r.err;
    if (result != nullptr) *result = r;
    return ReadAll(out);
  }

  DenseMatrix RunMatrix(const std::string& name,
                        const std::vector<std::string>& args,
                        PropagateRun* result = nullptr) {
    const std::string out = Path(name);
    RunOk(out, args, result);
    auto z = ReadNpy(out);
    EXPECT_TRUE(z.ok()) << z.status();
    return z.ok() ? *std::move(z) : DenseMatrix();
  }

 private:
  static std::string* root_;
  static std::string* dataset_;
  std::vector<std::string> made_;
};

std::string* PropagateCommandTest::root_ = nullptr;
std::string* PropagateCommandTest::dataset_ = nullptr;

void ExpectSameMatrix(const DenseMatrix& got, const DenseMatrix& want) {
  ASSERT_EQ(got.rows, want.rows);
  ASSERT_EQ(got.cols, want.cols);
  size_t differing = 0;
  for (size_t i = 0; i < got.data.size(); ++i) {
    // Bit-identical: compare the representation, not a tolerance.
    if (std::memcmp(&got.data[i], &want.data[i], sizeof(float)) != 0) {
      if (++differing <= 5) {
        ADD_FAILURE() << "entry (" << i / got.cols << ", " << i % got.cols
                      << "): got " << got.data[i] << ", want "
                      << want.data[i];
      }
    }
  }
  EXPECT_EQ(differing, 0u);
}

size_t NonZeros(const DenseMatrix& m, size_t row) {
  size_t n = 0;
  for (float v : m.row(row)) n += v != 0.0f;
  return n;
}

// The curator's estimate of every node's report, exactly as an agent seeded
// like the command (one generator, nodes in order) would produce it: the
// whole dense Estimate of each row.
DenseMatrix CuratorEstimates(const SparseRows& x, const MechanismSpec& spec,
                             uint64_t seed) {
  auto mech = CreateFeatureMechanism(spec);
  EXPECT_TRUE(mech.ok()) << mech.status();
  if (!mech.ok()) return DenseMatrix();
  SeededRandomForTesting rng(seed);
  const DenseMatrix dense = x.ToDense();
  DenseMatrix out(x.rows, x.cols);
  std::vector<double> row(x.cols), estimate(x.cols);
  for (size_t v = 0; v < x.rows; ++v) {
    for (size_t j = 0; j < x.cols; ++j) row[j] = dense.at(v, j);
    auto report = (*mech)->Perturb(row, rng);
    EXPECT_TRUE(report.ok()) << report.status();
    if (!report.ok()) return DenseMatrix();
    EXPECT_TRUE((*mech)->Estimate(*report, absl::MakeSpan(estimate)).ok());
    for (size_t j = 0; j < x.cols; ++j) {
      // An exact zero is "not held" (+0), whatever its sign.
      out.at(v, j) = estimate[j] == 0.0 ? 0.0f : static_cast<float>(estimate[j]);
    }
  }
  return out;
}

// ------------------------------------------------------------------ help

TEST(PropagateHelpTest, HelpExitsZeroAndListsEveryFlagAndMechanism) {
  for (const char* help : {"--help", "-h"}) {
    PropagateRun r = Propagate({help});
    EXPECT_EQ(r.code, 0) << help;
    EXPECT_EQ(r.err, "") << help;
    EXPECT_EQ(r.out, PropagateHelp()) << help;
  }
  const std::string help = PropagateHelp();
  for (const char* flag :
       {"--dataset DIR", "--out Z.npy", "--scale", "--mechanism", "--epsilon",
        "--k K", "--m M", "--seed", "--method", "--alpha", "--r R", "--rmax",
        "--tolerance", "--threads", "--block-columns", "--steps",
        "--self-loops", "--json"}) {
    EXPECT_THAT(help, HasSubstr(flag));
  }
  for (const char* name : {"push", "power", "gcn", "kprop", "hds",
                           "square-wave", "multibit", "onebit", "piecewise",
                           "laplace", "symmetric", "unit", "none",
                           "feature_range", "NOT private"}) {
    EXPECT_THAT(help, HasSubstr(name));
  }
}

TEST(PropagateHelpTest, HelpWinsOverOtherwiseBadArguments) {
  PropagateRun r = Propagate({"--bogus", "--method", "nope", "--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, PropagateHelp());
}

// ------------------------------------------- bad command lines (no dataset)

struct BadCase {
  std::vector<std::string> args;
  std::string message;
};

// Usage errors are found before the dataset is read: --dataset names a
// folder that does not exist, which would otherwise be exit 1.
class PropagateUsageErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(PropagateUsageErrorTest, ExitsTwoNamingTheFlag) {
  std::vector<std::string> args = GetParam().args;
  for (auto& a : args) {
    if (a == "MISSING") {
      a = absl::StrCat(::testing::TempDir(), "/propagate_command_test_none_",
                       getpid());
    }
  }
  PropagateRun r = Propagate(args);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr(GetParam().message));
  EXPECT_THAT(r.err, HasSubstr("ldpgraph propagate --help"));
}

#define BASE "--dataset", "MISSING", "--out", "z.npy"

INSTANTIATE_TEST_SUITE_P(
    BadCommandLines, PropagateUsageErrorTest,
    ::testing::Values(
        BadCase{{"--out", "z.npy"}, "--dataset is required"},
        BadCase{{"--dataset", "MISSING"}, "--out is required"},
        BadCase{{BASE, "--bogus", "1"}, "unknown flag --bogus"},
        BadCase{{BASE, "stray"}, "unexpected argument 'stray'"},
        BadCase{{BASE, "--method", "bogus"},
                "--method must be one of push, power, gcn, kprop, got 'bogus'"},
        BadCase{{BASE, "--epsilon", "1"}, "--epsilon needs --mechanism"},
        BadCase{{BASE, "--mechanism", "hds"}, "--mechanism needs --epsilon"},
        BadCase{{BASE, "--epsilon", "x", "--mechanism", "hds"},
                "--epsilon must be a finite number, got 'x'"},
        BadCase{{BASE, "--k", "1"}, "--k/--m need --mechanism"},
        BadCase{{BASE, "--mechanism", "hds", "--epsilon", "1", "--k", "1",
                 "--m", "1"},
                "give --k or --m, not both"},
        BadCase{{BASE, "--seed", "-3"},
                "--seed must be a non-negative integer, got '-3'"},
        BadCase{{BASE, "--method", "power", "--rmax", "1e-3"},
                "--rmax applies to --method push only"},
        BadCase{{BASE, "--tolerance", "1e-3"},
                "--tolerance applies to --method power only"},
        BadCase{{BASE, "--steps", "3"},
                "--steps and --self-loops apply to --method gcn or kprop"},
        BadCase{{BASE, "--method", "power", "--self-loops"},
                "--steps and --self-loops apply to --method gcn or kprop"},
        BadCase{{BASE, "--method", "gcn", "--alpha", "0.2"},
                "apply to --method push or power only"},
        BadCase{{BASE, "--method", "kprop", "--block-columns", "4"},
                "apply to --method push or power only"},
        BadCase{{BASE, "--alpha", "0"}, "--alpha must be in (0, 1], got 0"},
        BadCase{{BASE, "--method", "power", "--alpha", "1.5"},
                "--alpha must be in (0, 1], got 1.5"},
        BadCase{{BASE, "--r", "2"}, "--r must be in [0, 1], got 2"},
        BadCase{{BASE, "--seed", "3"}, "--seed needs --mechanism"},
        BadCase{{BASE, "--mechanism", "hdss", "--epsilon", "1"},
                "--mechanism: "},
        BadCase{{BASE, "--mechanism", "hds", "--epsilon", "-1"},
                "--epsilon must be finite and > 0"},
        BadCase{{BASE, "--method", "kprop", "--alpha", "0.2"},
                "apply to --method push or power only"},
        BadCase{{BASE, "--method", "gcn", "--threads", "2"},
                "--threads applies to --method push, power or kprop"},
        BadCase{{BASE, "--rmax", "0"}, "--rmax must be finite and > 0"},
        BadCase{{BASE, "--method", "power", "--tolerance", "-1"},
                "--tolerance must be finite and > 0"},
        BadCase{{BASE, "--threads", "-1"},
                "--threads must be an integer >= 0, got -1"},
        BadCase{{BASE, "--threads", "two"},
                "--threads must be an integer, got 'two'"},
        BadCase{{BASE, "--block-columns", "-1"},
                "--block-columns must be an integer >= 0, got -1"},
        BadCase{{BASE, "--method", "gcn", "--steps", "-1"},
                "--steps must be an integer >= 0, got -1"},
        BadCase{{BASE, "--scale", "bogus"},
                "--scale: unknown feature scaling"},
        BadCase{{BASE, "--json=1"}, "--json takes no value"},
        BadCase{{BASE, "--out", "y.npy"}, "--out given more than once"},
        BadCase{{BASE, "--method"}, "--method needs a value"}));

#undef BASE

// ---------------------------------- errors found once the dataset is read

TEST_F(PropagateCommandTest, MechanismErrorsExitTwoAndWriteNothing) {
  const std::vector<BadCase> cases = {
      {{"--mechanism", "gauss", "--epsilon", "1"},
       "unknown mechanism 'gauss'; choose one of: "},
      {{"--mechanism", "hds", "--epsilon", "0"},
       "epsilon must be finite and > 0, got 0"},
      {{"--mechanism", "hds", "--epsilon", "1", "--k", "0"},
       "--k/--m must be an integer >= 1, got 0"},
      {{"--mechanism", "hds", "--epsilon", "1", "--k", "21"},
       "must be in 1..d = 1..20, got 21"},
      {{"--mechanism", "multibit", "--epsilon", "1", "--m", "-2"},
       "--k/--m must be an integer >= 1, got -2"},
  };
  for (const BadCase& c : cases) {
    const std::string out = Path("z.npy");
    std::vector<std::string> args = {"--dataset", dataset(), "--out", out};
    args.insert(args.end(), c.args.begin(), c.args.end());
    PropagateRun r = Propagate(args);
    EXPECT_EQ(r.code, 2) << c.message << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message));
    EXPECT_EQ(r.out, "");
    EXPECT_FALSE(fs::exists(out)) << c.message;
    EXPECT_FALSE(fs::exists(out + ".tmp")) << c.message;
  }
}

TEST_F(PropagateCommandTest, ScaleNoneNeedsAFeatureRange) {
  // The generated dataset declares [0, 1]: --scale none keeps the values.
  Dataset d = Load(dataset());
  ASSERT_TRUE(d.meta.feature_range.has_value());
  const DenseMatrix z = RunMatrix("none.npy", {"--scale", "none"});
  auto want = PprPush(d.graph, d.features, PprOptions());
  ASSERT_TRUE(want.ok()) << want.status();
  ExpectSameMatrix(z, *want);

  // The same data without feature_range in meta.json.
  d.meta.feature_range.reset();
  const std::string dir = Path("no_range");
  ASSERT_TRUE(WriteDataset(d, dir).ok());
  ASSERT_THAT(ReadAll(dir + "/meta.json"), Not(HasSubstr("feature_range")));
  const std::string out = Path("z.npy");
  PropagateRun r = Propagate({"--dataset", dir, "--out", out, "--scale", "none"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--scale none needs a public feature range"));
  EXPECT_THAT(r.err, HasSubstr(dir + "/meta.json declares no feature_range"));
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(fs::exists(out));
  // The default scaling works on it.
  r = Propagate({"--dataset", dir, "--out", out});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out));
}

// --------------------------------------------------------- runtime errors

TEST_F(PropagateCommandTest, MissingDatasetFolderExitsOneNamingIt) {
  const std::string missing = Path("no_such_dataset");
  const std::string out = Path("z.npy");
  PropagateRun r = Propagate({"--dataset", missing, "--out", out});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("dataset folder " + missing + " not found"));
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(PropagateCommandTest, MalformedDatasetExitsOneWithFileAndLine) {
  const std::string dir = Path("broken");
  fs::copy(dataset(), dir, fs::copy_options::recursive);
  std::vector<std::string> lines =
      absl::StrSplit(ReadAll(dir + "/nodes.svm"), '\n');
  ASSERT_GE(lines.size(), 3u);
  lines[1] = "0 1:abc";  // line 2: a value that is not a number
  WriteAll(dir + "/nodes.svm", absl::StrJoin(lines, "\n"));
  const std::string out = Path("z.npy");
  PropagateRun r = Propagate({"--dataset", dir, "--out", out});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("ldpgraph propagate: " + dir + "/nodes.svm:2:"));
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(PropagateCommandTest, UnwritableOutExitsOneNamingThePath) {
  // A path inside a regular file.
  const std::string file = Path("plain");
  WriteAll(file, "not a folder");
  const std::string inside = file + "/z.npy";
  PropagateRun r = Propagate({"--dataset", dataset(), "--out", inside});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr(inside));
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(ReadAll(file), "not a folder");

  // An existing folder: the temporary file is written, the rename fails,
  // and the temporary file is removed again.
  const std::string folder = Path("folder");
  fs::create_directories(folder + "/keep");
  r = Propagate({"--dataset", dataset(), "--out", folder});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr(folder));
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(fs::is_directory(folder + "/keep"));
  EXPECT_FALSE(fs::exists(folder + ".tmp"));
}

// ------------------------------------------------------------ end to end

TEST_F(PropagateCommandTest, PushWritesAnNpyOfShapeNodesByFeatures) {
  const std::string out = Path("z.npy");
  PropagateRun r;
  const std::string bytes = RunOk(out, {}, &r);
  EXPECT_EQ(r.err, "");  // no mechanism, no seed: nothing to warn about
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat(dataset(), ": 300 nodes, 900 edges, "
                                            "20 features")));
  EXPECT_THAT(r.out, HasSubstr("scale symmetric"));
  EXPECT_THAT(r.out, HasSubstr("mechanism: none (raw features)"));
  EXPECT_THAT(r.out, HasSubstr("push: alpha 0.1, r 0.5, rmax 0.0001, "));
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("wrote ", out,
                                            " (300 x 20 float32)")));
  EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  auto z = ReadNpy(out);
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ(z->rows, kNodes);
  EXPECT_EQ(z->cols, kFeatures);
  EXPECT_EQ(bytes.size() % 64, 0u);  // header padded to 64, 300*20*4 = 24000
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  size_t non_zero = 0;
  for (float v : z->data) {
    EXPECT_TRUE(std::isfinite(v));
    non_zero += v != 0;
  }
  EXPECT_GT(non_zero, z->data.size() / 2);
}

TEST_F(PropagateCommandTest, RawPushIsBitIdenticalToTheLibrary) {
  const Dataset d = Load(dataset());
  for (auto [flag, scaling] :
       {std::pair<const char*, FeatureScaling>{"symmetric",
                                               FeatureScaling::kSymmetric},
        {"unit", FeatureScaling::kUnit}, {"-1,1", FeatureScaling::kSymmetric}}) {
    SCOPED_TRACE(flag);
    std::vector<std::string> args = {"--scale", flag};
    if (std::string(flag) == "symmetric") args.clear();  // the default
    const DenseMatrix z = RunMatrix("z.npy", args);
    auto want = PprPush(d.graph, ScaleDatasetFeatures(d, scaling),
                        PprOptions());
    ASSERT_TRUE(want.ok()) << want.status();
    ExpectSameMatrix(z, *want);
  }
  // Non-default PPR parameters reach the library.
  PprOptions o;
  o.alpha = 0.3;
  o.r = 0.2;
  o.rmax = 1e-3;
  o.block_columns = 1;
  const DenseMatrix z =
      RunMatrix("custom.npy", {"--alpha", "0.3", "--r", "0.2", "--rmax",
                               "1e-3", "--block-columns", "1"});
  auto want = PprPush(d.graph, ScaleDatasetFeatures(d, FeatureScaling::kSymmetric), o);
  ASSERT_TRUE(want.ok()) << want.status();
  ExpectSameMatrix(z, *want);
  auto default_push = PprPush(
      d.graph, ScaleDatasetFeatures(d, FeatureScaling::kSymmetric),
      PprOptions());
  ASSERT_TRUE(default_push.ok());
  EXPECT_NE(z.data, default_push->data);
}

TEST_F(PropagateCommandTest, PowerAgreesWithPushWithinTheBound) {
  const Dataset d = Load(dataset());
  PropagateRun pr;
  const DenseMatrix push = RunMatrix("push.npy", {}, &pr);
  const DenseMatrix power = RunMatrix("power.npy", {"--method", "power"}, &pr);
  EXPECT_THAT(pr.out, HasSubstr("power: alpha 0.1, r 0.5, "));
  ASSERT_EQ(push.rows, kNodes);
  ASSERT_EQ(power.rows, kNodes);
  ASSERT_EQ(power.cols, kFeatures);
  const double rmax = 1e-4, r = 0.5;
  double worst = 0;
  for (size_t v = 0; v < kNodes; ++v) {
    const double deg = std::max<uint32_t>(1, d.graph.degree(v));
    const double bound = std::pow(deg, r) * rmax + 1e-5;
    for (size_t j = 0; j < kFeatures; ++j) {
      const double diff = std::abs(push.at(v, j) - power.at(v, j));
      worst = std::max(worst, diff / bound);
      EXPECT_LE(diff, bound) << "node " << v << " feature " << j;
    }
  }
  EXPECT_LE(worst, 1.0);
  // And power equals the library's reference.
  auto want = PprPower(
      d.graph, ScaleDatasetFeatures(d, FeatureScaling::kSymmetric).ToDense(),
      PprOptions());
  ASSERT_TRUE(want.ok()) << want.status();
  ExpectSameMatrix(power, *want);
}

TEST_F(PropagateCommandTest, ThreadsDoNotChangeTheBytes) {
  for (const char* method : {"push", "power"}) {
    SCOPED_TRACE(method);
    const std::string one = RunOk(
        Path("one.npy"), {"--method", method, "--threads", "1"});
    const std::string two = RunOk(
        Path("two.npy"), {"--method", method, "--threads", "2"});
    // The default, 0: every core.
    const std::string all = RunOk(Path("all.npy"), {"--method", method});
    EXPECT_GT(one.size(), kNodes * kFeatures * 4);
    EXPECT_EQ(one, two);
    EXPECT_EQ(one, all);
  }
  const std::vector<std::string> hds = {"--mechanism", "hds", "--epsilon", "1",
                                        "--seed", "3"};
  auto one = hds, two = hds;
  one.insert(one.end(), {"--threads", "1"});
  two.insert(two.end(), {"--threads", "2", "--block-columns", "0"});
  EXPECT_EQ(RunOk(Path("hds1.npy"), one), RunOk(Path("hds2.npy"), two));
}

TEST_F(PropagateCommandTest, GcnMatchesRepeatedGcnAggregate) {
  const Dataset d = Load(dataset());
  const DenseMatrix x =
      ScaleDatasetFeatures(d, FeatureScaling::kSymmetric).ToDense();
  for (int steps : {0, 1, 3}) {
    SCOPED_TRACE(steps);
    PropagateRun r;
    const DenseMatrix z = RunMatrix(
        "gcn.npy", {"--method", "gcn", "--steps", std::to_string(steps)}, &r);
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("gcn: ", steps, " steps")));
    DenseMatrix want = x;
    for (int s = 0; s < steps; ++s) {
      auto next = GcnAggregate(d.graph, want);
      ASSERT_TRUE(next.ok()) << next.status();
      want = *std::move(next);
    }
    ExpectSameMatrix(z, want);
  }
  // Default: 2 steps.
  const DenseMatrix z = RunMatrix("gcn_default.npy", {"--method", "gcn"});
  auto one = GcnAggregate(d.graph, x);
  ASSERT_TRUE(one.ok());
  auto two = GcnAggregate(d.graph, *one);
  ASSERT_TRUE(two.ok());
  ExpectSameMatrix(z, *two);
}

TEST_F(PropagateCommandTest, KPropMatchesTheLibrary) {
  const Dataset d = Load(dataset());
  const DenseMatrix x =
      ScaleDatasetFeatures(d, FeatureScaling::kSymmetric).ToDense();
  struct Case {
    std::vector<std::string> args;
    int steps;
    bool self_loops;
  };
  for (const Case& c :
       {Case{{"--method", "kprop"}, 2, false},
        Case{{"--method", "kprop", "--steps", "3", "--self-loops"}, 3, true},
        Case{{"--method", "kprop", "--steps", "3", "--threads", "2"}, 3, false},
        Case{{"--method", "kprop", "--steps", "0"}, 0, false}}) {
    SCOPED_TRACE(absl::StrJoin(c.args, " "));
    const DenseMatrix z = RunMatrix("kprop.npy", c.args);
    auto want = KProp(d.graph, x, c.steps, c.self_loops);
    ASSERT_TRUE(want.ok()) << want.status();
    ExpectSameMatrix(z, *want);
  }
  // --steps 0 is the scaled input itself.
  ExpectSameMatrix(RunMatrix("zero.npy", {"--method", "kprop", "--steps", "0"}),
                   x);
}

// ----------------------------------------------------------- perturbation

TEST_F(PropagateCommandTest, SeededHdsWarnsAndIsReproducibleBySeed) {
  const std::vector<std::string> base = {"--mechanism", "hds", "--epsilon",
                                         "1", "--k", "1"};
  auto seeded = [&](const std::string& seed) {
    auto args = base;
    args.insert(args.end(), {"--seed", seed});
    return args;
  };
  PropagateRun r;
  const std::string a = RunOk(Path("a.npy"), seeded("7"), &r);
  EXPECT_THAT(r.err, HasSubstr(std::string(kSeededWarning)));
  EXPECT_THAT(r.err, HasSubstr("NOT differentially private"));
  EXPECT_THAT(r.out, Not(HasSubstr("NOT differentially private")));
  EXPECT_THAT(r.out, HasSubstr("mechanism: hds, epsilon 1, sampled 1, range "
                               "[-1, 1], seeded-not-private randomness"));
  const std::string b = RunOk(Path("b.npy"), seeded("7"));
  const std::string c = RunOk(Path("c.npy"), seeded("8"));
  const std::string raw = RunOk(Path("raw.npy"), {});
  EXPECT_GT(a.size(), kNodes * kFeatures * 4);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, raw);
}

TEST_F(PropagateCommandTest, SecureRandomnessWithoutSeedPrintsNoWarning) {
  const std::vector<std::string> args = {"--mechanism", "hds", "--epsilon",
                                         "1", "--k", "1"};
  PropagateRun r;
  const std::string a = RunOk(Path("a.npy"), args, &r);
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, HasSubstr("secure randomness"));
  EXPECT_THAT(r.out, Not(HasSubstr("seeded")));
  const std::string b = RunOk(Path("b.npy"), args);
  EXPECT_GT(a.size(), kNodes * kFeatures * 4);
  EXPECT_NE(a, b);  // fresh randomness each run
}

TEST_F(PropagateCommandTest, HdsK1WithoutPropagationIsOneReportedValuePerNode) {
  // kprop with 0 steps propagates nothing: the output is what the curator
  // holds, one reported dimension per node.
  const DenseMatrix z = RunMatrix(
      "z.npy", {"--mechanism", "hds", "--epsilon", "1", "--k", "1", "--seed",
                "7", "--method", "kprop", "--steps", "0"});
  ASSERT_EQ(z.rows, kNodes);
  ASSERT_EQ(z.cols, kFeatures);
  size_t rows_with_one = 0;
  for (size_t v = 0; v < kNodes; ++v) {
    const size_t nz = NonZeros(z, v);
    EXPECT_LE(nz, 1u) << "node " << v;
    rows_with_one += nz == 1;
  }
  EXPECT_GT(rows_with_one, kNodes * 9 / 10);
  // The raw scaled features are dense ([0, 1] -> [-1, 1] maps 0 to -1):
  // the output is not them.
  const DenseMatrix raw =
      RunMatrix("raw.npy", {"--method", "kprop", "--steps", "0"});
  size_t raw_non_zero = 0;
  for (size_t v = 0; v < kNodes; ++v) raw_non_zero += NonZeros(raw, v);
  EXPECT_GT(raw_non_zero, kNodes * kFeatures * 9 / 10);

  // Propagating the same reports spreads them: rows become dense-ish.
  const DenseMatrix pushed = RunMatrix(
      "pushed.npy",
      {"--mechanism", "hds", "--epsilon", "1", "--k", "1", "--seed", "7"});
  size_t total = 0, rows_with_many = 0;
  for (size_t v = 0; v < kNodes; ++v) {
    const size_t nz = NonZeros(pushed, v);
    total += nz;
    rows_with_many += nz > 1;
  }
  EXPECT_GT(rows_with_many, kNodes * 9 / 10);
  EXPECT_GT(total, kNodes * kFeatures / 2);
}

TEST_F(PropagateCommandTest, PropagatesTheCuratorsEstimateOfTheReports) {
  // With a seed, the output equals the library's propagation of the
  // curator's estimates, reproduced here by perturbing every node's scaled
  // row in node order with the same seeded generator.
  const Dataset d = Load(dataset());
  struct Case {
    std::vector<std::string> args;
    MechanismKind kind;
    std::optional<int> sampled;
    FeatureScaling scaling;
    double lo, hi;
  };
  for (const Case& c : {
           Case{{"--mechanism", "hds", "--epsilon", "1", "--k", "1"},
                MechanismKind::kHds, 1, FeatureScaling::kSymmetric, -1, 1},
           Case{{"--mechanism", "hds", "--epsilon", "2", "--k", "3"},
                MechanismKind::kHds, 3, FeatureScaling::kSymmetric, -1, 1},
           Case{{"--mechanism", "laplace", "--epsilon", "1", "--k", "2",
                 "--scale", "unit"},
                MechanismKind::kLaplace, 2, FeatureScaling::kUnit, 0, 1},
           Case{{"--mechanism", "piecewise", "--epsilon", "1"},
                MechanismKind::kPiecewise, std::nullopt,
                FeatureScaling::kSymmetric, -1, 1},
           Case{{"--mechanism", "onebit", "--epsilon", "1", "--scale",
                 "none"},
                MechanismKind::kOneBit, std::nullopt, FeatureScaling::kNone, 0,
                1},
           Case{{"--mechanism", "multibit", "--epsilon", "1", "--m", "2"},
                MechanismKind::kMultiBit, 2, FeatureScaling::kSymmetric, -1,
                1},
           // Range [0, 1]: the rectifier puts (alpha + beta) / 2 = 0.5 on
           // every dimension a node did not report.
           Case{{"--mechanism", "multibit", "--epsilon", "1", "--m", "2",
                 "--scale", "unit"},
                MechanismKind::kMultiBit, 2, FeatureScaling::kUnit, 0, 1},
       }) {
    SCOPED_TRACE(absl::StrJoin(c.args, " "));
    MechanismSpec spec;
    spec.kind = c.kind;
    spec.epsilon = 0;
    spec.dimension = static_cast<int>(kFeatures);
    spec.sampled = c.sampled;
    spec.alpha = c.lo;
    spec.beta = c.hi;
    for (size_t i = 0; i + 1 < c.args.size(); ++i) {
      if (c.args[i] == "--epsilon") {
        ASSERT_TRUE(absl::SimpleAtod(c.args[i + 1], &spec.epsilon));
      }
    }
    const DenseMatrix estimates =
        CuratorEstimates(ScaleDatasetFeatures(d, c.scaling), spec, 11);
    ASSERT_EQ(estimates.rows, kNodes);

    auto args = c.args;
    args.insert(args.end(), {"--seed", "11", "--method", "kprop", "--steps",
                             "0"});
    ExpectSameMatrix(RunMatrix("held.npy", args), estimates);

    args = c.args;
    args.insert(args.end(), {"--seed", "11", "--method", "gcn"});
    auto g1 = GcnAggregate(d.graph, estimates);
    ASSERT_TRUE(g1.ok());
    auto g2 = GcnAggregate(d.graph, *g1);
    ASSERT_TRUE(g2.ok());
    ExpectSameMatrix(RunMatrix("gcn.npy", args), *g2);
  }
}

// ------------------------------------------------------------------ --json

// The value text after "key": in a one-line JSON object (up to the next
// top-level comma or closing brace), or "" when the key is absent.
std::string JsonValue(const std::string& line, const std::string& key) {
  const std::string needle = absl::StrCat("\"", key, "\":");
  const size_t at = line.find(needle);
  if (at == std::string::npos) return "";
  size_t end = at + needle.size();
  bool in_string = false;
  for (; end < line.size(); ++end) {
    const char ch = line[end];
    if (ch == '"' && line[end - 1] != '\\') in_string = !in_string;
    if (!in_string && (ch == ',' || ch == '}')) break;
  }
  return line.substr(at + needle.size(), end - at - needle.size());
}

TEST_F(PropagateCommandTest, JsonPrintsOneObjectOnOneLine) {
  PropagateRun r;
  const std::string out = Path("z.npy");
  RunOk(out,
        {"--mechanism", "hds", "--epsilon", "1", "--k", "1", "--seed", "7",
         "--json"},
        &r);
  ASSERT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  ASSERT_EQ(r.out.back(), '\n');
  const std::string line = r.out.substr(0, r.out.size() - 1);
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.front(), '{');
  EXPECT_EQ(line.back(), '}');
  EXPECT_THAT(r.err, HasSubstr("NOT differentially private"));  // not in out
  EXPECT_EQ(JsonValue(line, "nodes"), "300");
  EXPECT_EQ(JsonValue(line, "edges"), "900");
  EXPECT_EQ(JsonValue(line, "features"), "20");
  EXPECT_EQ(JsonValue(line, "mechanism"), "\"hds\"");
  EXPECT_EQ(JsonValue(line, "method"), "\"push\"");
  EXPECT_EQ(JsonValue(line, "scale"), "\"symmetric\"");
  EXPECT_EQ(JsonValue(line, "out"), absl::StrCat("\"", out, "\""));
  double epsilon = 0;
  EXPECT_TRUE(absl::SimpleAtod(JsonValue(line, "epsilon"), &epsilon));
  EXPECT_EQ(epsilon, 1.0);
  uint64_t pushes = 0, rss = 0;
  EXPECT_TRUE(absl::SimpleAtoi(JsonValue(line, "pushes"), &pushes)) << line;
  EXPECT_GT(pushes, 0u);
  EXPECT_TRUE(absl::SimpleAtoi(JsonValue(line, "peak_rss_bytes"), &rss))
      << line;
  EXPECT_GT(rss, 1u << 20);
  for (const char* key : {"propagate_seconds", "load_seconds",
                          "perturb_seconds", "write_seconds"}) {
    double seconds = -1;
    EXPECT_TRUE(absl::SimpleAtod(JsonValue(line, key), &seconds))
        << key << " in " << line;
    EXPECT_GE(seconds, 0) << key;
    EXPECT_LT(seconds, 60) << key;
  }
  EXPECT_NE(JsonValue(line, "rmax"), "");
  EXPECT_EQ(JsonValue(line, "iterations"), "");  // power only

  // Without a mechanism: "none" and no epsilon; power reports iterations.
  RunOk(Path("p.npy"), {"--method", "power", "--json"}, &r);
  ASSERT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(JsonValue(r.out, "mechanism"), "\"none\"");
  EXPECT_EQ(JsonValue(r.out, "epsilon"), "");
  EXPECT_EQ(JsonValue(r.out, "method"), "\"power\"");
  EXPECT_EQ(JsonValue(r.out, "pushes"), "");
  int iterations = 0;
  EXPECT_TRUE(absl::SimpleAtoi(JsonValue(r.out, "iterations"), &iterations))
      << r.out;
  EXPECT_GT(iterations, 1);
  EXPECT_NE(JsonValue(r.out, "propagate_seconds"), "");
  EXPECT_NE(JsonValue(r.out, "peak_rss_bytes"), "");
}

// ------------------------------------------------------------------ numpy

TEST_F(PropagateCommandTest, NumpyLoadReadsTheOutput) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    FAIL() << "/usr/bin/python3 with numpy is needed to check that numpy.load "
              "reads the output: install python3-numpy (apt-get install "
              "python3-numpy, as deploy/install-deps.sh does)";
  }
  const std::string out = Path("z.npy");
  RunOk(out, {"--mechanism", "hds", "--epsilon", "1", "--seed", "7"});
  auto z = ReadNpy(out);
  ASSERT_TRUE(z.ok()) << z.status();
  double sum = 0;
  for (float v : z->data) sum += v;
  // numpy checks dtype, shape and C order, and prints the sum and one entry.
  const std::string cmd = absl::StrCat(
      "/usr/bin/python3 -c \"import numpy as np; a = np.load('", out,
      "'); assert a.dtype == np.float32, a.dtype; "
      "assert a.shape == (300, 20), a.shape; "
      "assert a.flags['C_CONTIGUOUS']; "
      "print(repr(float(a.astype(np.float64).sum())), "
      "repr(float(a[299, 19])))\" 2>&1");
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string text;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p) != nullptr) text += buf;
  ASSERT_EQ(pclose(p), 0) << text;
  std::vector<std::string> parts =
      absl::StrSplit(absl::StripAsciiWhitespace(text), ' ');
  ASSERT_EQ(parts.size(), 2u) << text;
  double np_sum = 0, np_last = 0;
  ASSERT_TRUE(absl::SimpleAtod(parts[0], &np_sum)) << text;
  ASSERT_TRUE(absl::SimpleAtod(parts[1], &np_last)) << text;
  EXPECT_NEAR(np_sum, sum, 1e-6 * (1 + std::abs(sum)));
  EXPECT_EQ(np_last, static_cast<double>(z->at(299, 19)));
}

}  // namespace
}  // namespace ldpgraph::tool
