#include "common/dataset/dataset.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/shared_datasets.h"
#include "common/testing/temp_folder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

void WriteText(const std::string& path, absl::string_view text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A valid four-node dataset; each test breaks one file.
constexpr absl::string_view kMeta =
    R"({"name": "tiny", "nodes": 4, "edges": 3, "features": 5, "classes": 3})";
constexpr absl::string_view kEdges = "0 1\n1 2\n2 3\n";
constexpr absl::string_view kNodes = "0 1:0.5 3:1\n1\n2 2:-1.5 5:2\n-1 4:1\n";

struct Files {
  std::string meta = std::string(kMeta);
  std::string edges = std::string(kEdges);
  std::string nodes = std::string(kNodes);
};

void WriteFolder(const TempFolder& dir, const Files& f) {
  WriteText(dir.File("meta.json"), f.meta);
  WriteText(dir.File("edges.txt"), f.edges);
  WriteText(dir.File("nodes.svm"), f.nodes);
}

absl::Status LoadWith(const Files& f) {
  TempFolder dir;
  WriteFolder(dir, f);
  return LoadDataset(dir.path()).status();
}

absl::Status LoadWithNodes(absl::string_view nodes) {
  Files f;
  f.nodes = std::string(nodes);
  return LoadWith(f);
}

absl::Status LoadWithEdges(absl::string_view edges) {
  Files f;
  f.edges = std::string(edges);
  return LoadWith(f);
}

absl::Status LoadWithMeta(absl::string_view meta) {
  Files f;
  f.meta = std::string(meta);
  return LoadWith(f);
}

#define EXPECT_INVALID(status, ...)                                    \
  do {                                                                 \
    const absl::Status _s = (status);                                  \
    EXPECT_EQ(_s.code(), absl::StatusCode::kInvalidArgument) << _s;    \
    EXPECT_THAT(std::string(_s.message()), AllOf(__VA_ARGS__)) << _s;  \
  } while (0)

// ------------------------------------------------------------- valid input

TEST(LoadDatasetTest, LoadsTheTinyDataset) {
  TempFolder dir;
  WriteFolder(dir, Files());
  auto d = LoadDataset(dir.path());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->meta.name, "tiny");
  EXPECT_EQ(d->meta.nodes, 4u);
  EXPECT_EQ(d->meta.edges, 3u);
  EXPECT_EQ(d->meta.features, 5u);
  EXPECT_EQ(d->meta.classes, 3);
  EXPECT_EQ(d->meta.source, "");
  EXPECT_FALSE(d->meta.feature_range.has_value());
  EXPECT_EQ(d->meta.generator_json, "");
  EXPECT_EQ(d->labels, (std::vector<int32_t>{0, 1, 2, -1}));
  EXPECT_EQ(d->graph.num_nodes(), 4u);
  EXPECT_EQ(d->graph.Edges(), (std::vector<Edge>{{0, 1}, {1, 2}, {2, 3}}));
  EXPECT_EQ(d->features.rows, 4u);
  EXPECT_EQ(d->features.cols, 5u);
  EXPECT_EQ(d->features.offsets, (std::vector<uint64_t>{0, 2, 2, 4, 5}));
  EXPECT_EQ(d->features.indices, (std::vector<uint32_t>{0, 2, 1, 4, 3}));
  EXPECT_EQ(d->features.values,
            (std::vector<float>{0.5f, 1.0f, -1.5f, 2.0f, 1.0f}));
}

TEST(LoadDatasetTest, AcceptsTabsCrLfUnsortedEdgesAndNoFinalNewline) {
  Files f;
  f.edges = "2\t3\r\n  1   0\n2 1";  // reversed orientation, unsorted
  f.nodes = "0\t1:0.5  3:1 \r\n1\n2 2:-1.5 5:2\n-1 4:1";
  TempFolder dir;
  WriteFolder(dir, f);
  auto d = LoadDataset(dir.path());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->graph.Edges(), (std::vector<Edge>{{0, 1}, {1, 2}, {2, 3}}));
  EXPECT_EQ(d->features.indices, (std::vector<uint32_t>{0, 2, 1, 4, 3}));
}

TEST(LoadDatasetTest, DropsExplicitZeros) {
  Files f;
  f.nodes = "0 1:0 3:1 4:-0\n1 2:0.0\n2\n-1\n";
  TempFolder dir;
  WriteFolder(dir, f);
  auto d = LoadDataset(dir.path());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->features.offsets, (std::vector<uint64_t>{0, 1, 1, 1, 1}));
  EXPECT_EQ(d->features.indices, (std::vector<uint32_t>{2}));
}

TEST(LoadDatasetTest, ReadsOptionalKeysAndIgnoresUnknownOnes) {
  Files f;
  f.meta = R"({"name": "g", "nodes": 4, "edges": 3, "features": 5,
    "classes": 3, "source": "s", "license": "l", "notes": "n",
    "feature_range": [-2, 2.5], "unknown": [1, {"x": null}],
    "generator": {"seed": 7, "nodes": 4, "avg_degree": 1.5}})";
  TempFolder dir;
  WriteFolder(dir, f);
  auto d = LoadDataset(dir.path());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->meta.source, "s");
  EXPECT_EQ(d->meta.license, "l");
  EXPECT_EQ(d->meta.notes, "n");
  ASSERT_TRUE(d->meta.feature_range.has_value());
  EXPECT_EQ(d->meta.feature_range->first, -2.0);
  EXPECT_EQ(d->meta.feature_range->second, 2.5);
  // Key order kept as written.
  EXPECT_EQ(d->meta.generator_json,
            R"({"seed":7,"nodes":4,"avg_degree":1.5})");
}

// ---------------------------------------------------------- missing things

TEST(LoadDatasetMetaTest, ReadsMetaAloneAndChecksItLikeLoadDataset) {
  TempFolder dir;
  WriteFolder(dir, Files());
  // The records are not read: a broken nodes.svm does not matter.
  {
    std::ofstream f(dir.File("nodes.svm"));
    f << "not a record\n";
  }
  auto meta = LoadDatasetMeta(dir.path());
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->name, "tiny");
  EXPECT_EQ(meta->nodes, 4u);
  EXPECT_EQ(meta->features, 5u);
  EXPECT_EQ(meta->classes, 3);
  EXPECT_FALSE(LoadDataset(dir.path()).ok());
  // A broken meta.json gets LoadDataset's error; a missing folder NOT_FOUND.
  {
    std::ofstream f(dir.File("meta.json"));
    f << "{\"name\": 3}";
  }
  EXPECT_INVALID(LoadDatasetMeta(dir.path()).status(), HasSubstr("meta.json"));
  EXPECT_EQ(LoadDatasetMeta(dir.File("missing")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(LoadDatasetTest, MissingFolderIsNotFound) {
  TempFolder dir;
  const std::string missing = dir.File("no_such_dataset");
  const absl::Status s = LoadDataset(missing).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(missing));
}

TEST(LoadDatasetTest, MissingFileIsNotFoundNamingThePath) {
  for (absl::string_view name : {"meta.json", "edges.txt", "nodes.svm"}) {
    TempFolder dir;
    WriteFolder(dir, Files());
    fs::remove(dir.File(name));
    const absl::Status s = LoadDataset(dir.path()).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(dir.File(name)));
  }
}

// Linux opens a directory like a file; its SEEK_END offset is no size (on
// ext4 it is about 2^63, and reserving that threw std::bad_alloc).
TEST(LoadDatasetTest, DirectoryInPlaceOfAFileIsAnErrorNamingThePath) {
  for (absl::string_view name : {"meta.json", "edges.txt", "nodes.svm"}) {
    TempFolder dir;
    WriteFolder(dir, Files());
    fs::remove(dir.File(name));
    fs::create_directory(dir.File(name));
    const absl::Status s = LoadDataset(dir.path()).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(s.message(), dir.File(name) + " is a directory, not a file");
  }
  TempFolder dir;
  fs::create_directory(dir.File("edges.txt"));
  const absl::Status s =
      LoadEdgeList(dir.File("edges.txt"), EdgeListOptions()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message(), dir.File("edges.txt") + " is a directory, not a file");
}

// ---------------------------------------------------------------- meta.json

TEST(LoadDatasetTest, MalformedJsonNamesFileAndBytePosition) {
  EXPECT_INVALID(LoadWithMeta(R"({"name": "tiny", "nodes": 4,, })"),
                 HasSubstr("meta.json"), HasSubstr("malformed JSON at byte 29"));
}

TEST(LoadDatasetTest, MetaMustBeAnObject) {
  EXPECT_INVALID(LoadWithMeta("[1, 2]"), HasSubstr("meta.json"),
                 HasSubstr("expected a JSON object"), HasSubstr("array"));
}

TEST(LoadDatasetTest, MissingRequiredKey) {
  for (absl::string_view key : {"name", "nodes", "edges", "features",
                                "classes"}) {
    std::string meta = std::string(kMeta);
    const std::string quoted = absl::StrCat("\"", key, "\"");
    meta.replace(meta.find(quoted), quoted.size(), "\"other\"");
    EXPECT_INVALID(LoadWithMeta(meta), HasSubstr("meta.json"),
                   HasSubstr(absl::StrCat("missing required key ", quoted)));
  }
}

TEST(LoadDatasetTest, WrongTypedKeys) {
  EXPECT_INVALID(
      LoadWithMeta(
          R"({"name": "t", "nodes": "4", "edges": 3, "features": 5, "classes": 3})"),
      HasSubstr("meta.json"), HasSubstr("key \"nodes\""),
      HasSubstr("non-negative integer"), HasSubstr("found string"));
  EXPECT_INVALID(
      LoadWithMeta(
          R"({"name": "t", "nodes": 4, "edges": 3.5, "features": 5, "classes": 3})"),
      HasSubstr("key \"edges\""), HasSubstr("non-negative integer"),
      HasSubstr("found number"));
  EXPECT_INVALID(
      LoadWithMeta(
          R"({"name": "t", "nodes": 4, "edges": 3, "features": 5, "classes": -1})"),
      HasSubstr("key \"classes\""), HasSubstr("non-negative integer"));
  EXPECT_INVALID(
      LoadWithMeta(
          R"({"name": 5, "nodes": 4, "edges": 3, "features": 5, "classes": 3})"),
      HasSubstr("key \"name\""), HasSubstr("a string"));
  EXPECT_INVALID(
      LoadWithMeta(R"({"name": "t", "nodes": 4, "edges": 3, "features": 5,
                       "classes": 3, "notes": ["x"]})"),
      HasSubstr("key \"notes\""), HasSubstr("a string"), HasSubstr("array"));
  EXPECT_INVALID(
      LoadWithMeta(R"({"name": "t", "nodes": 4, "edges": 3, "features": 5,
                       "classes": 3, "generator": "x"})"),
      HasSubstr("key \"generator\""), HasSubstr("JSON object"));
  EXPECT_INVALID(
      LoadWithMeta(R"({"name": "t", "nodes": 1e20, "edges": 3, "features": 5,
                       "classes": 3})"),
      HasSubstr("key \"nodes\""), HasSubstr("non-negative integer"));
  // Beyond what a Graph holds (NodeId is 32-bit).
  EXPECT_INVALID(
      LoadWithMeta(R"({"name": "t", "nodes": 4294967296, "edges": 3,
                       "features": 5, "classes": 3})"),
      HasSubstr("key \"nodes\""), HasSubstr("<= 4294967294"));
}

TEST(LoadDatasetTest, BadFeatureRange) {
  for (absl::string_view range :
       {"[1, 1]", "[2, 1]", "[0]", "[0, 1, 2]", "[0, \"1\"]", "3"}) {
    EXPECT_INVALID(
        LoadWithMeta(absl::StrCat(
            R"({"name": "t", "nodes": 4, "edges": 3, "features": 5, )",
            R"("classes": 3, "feature_range": )", range, "}")),
        HasSubstr("meta.json"), HasSubstr("key \"feature_range\""),
        HasSubstr("lo < hi"));
  }
}

// ---------------------------------------------------------------- edges.txt

TEST(LoadDatasetTest, EdgeCountBelowMeta) {
  EXPECT_INVALID(LoadWithEdges("0 1\n1 2\n"), HasSubstr("edges.txt:3:"),
                 HasSubstr("file ends after 2 edge lines"),
                 HasSubstr("edges = 3"));
}

TEST(LoadDatasetTest, EdgeCountAboveMeta) {
  EXPECT_INVALID(LoadWithEdges("0 1\n1 2\n2 3\n0 3\n0 2\n"),
                 HasSubstr("edges.txt:4:"), HasSubstr("extra edge line"),
                 HasSubstr("edges = 3"), HasSubstr("has 5 lines"));
}

TEST(LoadDatasetTest, BlankEdgeLineIsAnError) {
  EXPECT_INVALID(LoadWithEdges("0 1\n\n2 3\n"), HasSubstr("edges.txt:2:"),
                 HasSubstr("found none"));
}

TEST(LoadDatasetTest, MissingEdgeToken) {
  EXPECT_INVALID(LoadWithEdges("0 1\n1\n2 3\n"), HasSubstr("edges.txt:2:"),
                 HasSubstr("expected two node ids"), HasSubstr("found one"));
}

TEST(LoadDatasetTest, ExtraEdgeToken) {
  EXPECT_INVALID(LoadWithEdges("0 1\n1 2\n2 3 1\n"),
                 HasSubstr("edges.txt:3:"), HasSubstr("extra token '1'"));
}

TEST(LoadDatasetTest, NonIntegerEdgeToken) {
  EXPECT_INVALID(LoadWithEdges("0 1\nx 2\n2 3\n"), HasSubstr("edges.txt:2:"),
                 HasSubstr("node id 'x' is not a non-negative integer"));
  EXPECT_INVALID(LoadWithEdges("0 1\n1 2.0\n2 3\n"),
                 HasSubstr("edges.txt:2:"), HasSubstr("'2.0'"));
  EXPECT_INVALID(LoadWithEdges("0 1\n+1 2\n2 3\n"),
                 HasSubstr("edges.txt:2:"), HasSubstr("'+1'"));
}

TEST(LoadDatasetTest, NegativeEdgeToken) {
  EXPECT_INVALID(LoadWithEdges("0 1\n1 2\n-2 3\n"),
                 HasSubstr("edges.txt:3:"), HasSubstr("negative node id '-2'"));
}

TEST(LoadDatasetTest, EdgeIdOutOfRange) {
  EXPECT_INVALID(LoadWithEdges("0 1\n1 4\n2 3\n"), HasSubstr("edges.txt:2:"),
                 HasSubstr("node id 4 out of range"), HasSubstr("nodes = 4"));
  EXPECT_INVALID(LoadWithEdges("0 1\n1 2\n2 99999999999999999999999\n"),
                 HasSubstr("edges.txt:3:"), HasSubstr("out of range"));
}

TEST(LoadDatasetTest, SelfLoop) {
  EXPECT_INVALID(LoadWithEdges("0 1\n2 2\n2 3\n"), HasSubstr("edges.txt:2:"),
                 HasSubstr("self loop 2 2"));
}

TEST(LoadDatasetTest, DuplicateEdgeSameOrientation) {
  EXPECT_INVALID(LoadWithEdges("0 1\n1 2\n0 1\n"), HasSubstr("edges.txt:3:"),
                 HasSubstr("duplicate edge 0 1"), HasSubstr("line 1"));
}

TEST(LoadDatasetTest, DuplicateEdgeOtherOrientation) {
  EXPECT_INVALID(LoadWithEdges("2 3\n1 2\n3 2\n"), HasSubstr("edges.txt:3:"),
                 HasSubstr("duplicate edge 3 2"), HasSubstr("line 1 as 2 3"));
}

TEST(LoadDatasetTest, DuplicateEdgeReportsTheFirstRepeatingLine) {
  Files f;
  f.meta = R"({"name": "t", "nodes": 4, "edges": 5, "features": 5, "classes": 3})";
  // {2,3} repeats on line 5, {0,1} already on line 4.
  f.edges = "2 3\n0 1\n1 2\n1 0\n3 2\n";
  EXPECT_INVALID(LoadWith(f), HasSubstr("edges.txt:4:"),
                 HasSubstr("duplicate edge 1 0"), HasSubstr("line 2"));
}

// ---------------------------------------------------------------- nodes.svm

TEST(LoadDatasetTest, TooFewNodeLines) {
  EXPECT_INVALID(LoadWithNodes("0 1:0.5\n1\n2 2:1\n"),
                 HasSubstr("nodes.svm:4:"),
                 HasSubstr("file ends after 3 node lines"),
                 HasSubstr("nodes = 4"));
}

TEST(LoadDatasetTest, TooManyNodeLines) {
  EXPECT_INVALID(LoadWithNodes("0\n1\n2\n-1\n0\n1\n"),
                 HasSubstr("nodes.svm:5:"), HasSubstr("extra node line"),
                 HasSubstr("nodes = 4"), HasSubstr("has 6 lines"));
}

TEST(LoadDatasetTest, NanValue) {
  EXPECT_INVALID(LoadWithNodes("0\n1\n2 1:1 2:nan\n-1\n"),
                 HasSubstr("nodes.svm:3:"), HasSubstr("feature index 2"),
                 HasSubstr("non-finite value 'nan'"));
}

TEST(LoadDatasetTest, InfValue) {
  EXPECT_INVALID(LoadWithNodes("0\n1 4:-inf\n2\n-1\n"),
                 HasSubstr("nodes.svm:2:"), HasSubstr("feature index 4"),
                 HasSubstr("non-finite value '-inf'"));
}

TEST(LoadDatasetTest, ValueOutOfFloatRange) {
  EXPECT_INVALID(LoadWithNodes("0\n1\n2\n-1 5:1e39\n"),
                 HasSubstr("nodes.svm:4:"), HasSubstr("feature index 5"),
                 HasSubstr("'1e39' out of float range"));
}

TEST(LoadDatasetTest, NonNumericValue) {
  EXPECT_INVALID(LoadWithNodes("0 1:abc\n1\n2\n-1\n"),
                 HasSubstr("nodes.svm:1:"), HasSubstr("feature index 1"),
                 HasSubstr("'abc' is not a number"));
  EXPECT_INVALID(LoadWithNodes("0 1:1.5x\n1\n2\n-1\n"),
                 HasSubstr("nodes.svm:1:"), HasSubstr("'1.5x' is not a number"));
}

TEST(LoadDatasetTest, IndexZero) {
  EXPECT_INVALID(LoadWithNodes("0\n1 0:1 2:1\n2\n-1\n"),
                 HasSubstr("nodes.svm:2:"), HasSubstr("feature index 0"),
                 HasSubstr("1-based"));
}

TEST(LoadDatasetTest, IndexAboveFeatures) {
  EXPECT_INVALID(LoadWithNodes("0\n1\n2 2:1 6:1\n-1\n"),
                 HasSubstr("nodes.svm:3:"),
                 HasSubstr("feature index 6 > features = 5"));
  EXPECT_INVALID(LoadWithNodes("0\n1\n2 2:1 99999999999999999999999:1\n-1\n"),
                 HasSubstr("nodes.svm:3:"), HasSubstr("> features = 5"));
}

TEST(LoadDatasetTest, IndicesNotAscending) {
  EXPECT_INVALID(LoadWithNodes("0 1:1 4:1 3:1\n1\n2\n-1\n"),
                 HasSubstr("nodes.svm:1:"),
                 HasSubstr("feature index 3 after index 4"),
                 HasSubstr("strictly ascending"));
}

TEST(LoadDatasetTest, DuplicateIndex) {
  EXPECT_INVALID(LoadWithNodes("0\n1\n2\n-1 2:1 2:3\n"),
                 HasSubstr("nodes.svm:4:"),
                 HasSubstr("duplicate feature index 2"));
}

TEST(LoadDatasetTest, MalformedPair) {
  for (absl::string_view pair : {"7", "2:", ":1", "a:1", "-2:1"}) {
    EXPECT_INVALID(LoadWithNodes(absl::StrCat("0\n1 ", pair, "\n2\n-1\n")),
                   HasSubstr("nodes.svm:2:"), HasSubstr(pair));
  }
  EXPECT_INVALID(LoadWithNodes("0\n1 7\n2\n-1\n"),
                 HasSubstr("expected index:value"));
  EXPECT_INVALID(LoadWithNodes("0\n1 2::1\n2\n-1\n"),
                 HasSubstr("nodes.svm:2:"), HasSubstr("value ':1'"));
}

TEST(LoadDatasetTest, LabelOutOfRange) {
  EXPECT_INVALID(LoadWithNodes("0\n3 1:1\n2\n-1\n"),
                 HasSubstr("nodes.svm:2:"), HasSubstr("label '3' out of range"),
                 HasSubstr("classes = 3"));
  EXPECT_INVALID(LoadWithNodes("0\n1\n-2\n-1\n"), HasSubstr("nodes.svm:3:"),
                 HasSubstr("label '-2' out of range"));
  EXPECT_INVALID(LoadWithNodes("0\n1\n99999999999999999999\n-1\n"),
                 HasSubstr("nodes.svm:3:"), HasSubstr("out of range"));
}

TEST(LoadDatasetTest, NonIntegerLabel) {
  EXPECT_INVALID(LoadWithNodes("0\n1.5 1:1\n2\n-1\n"),
                 HasSubstr("nodes.svm:2:"),
                 HasSubstr("label '1.5' is not an integer"));
  EXPECT_INVALID(LoadWithNodes("0\n1\nx\n-1\n"), HasSubstr("nodes.svm:3:"),
                 HasSubstr("label 'x' is not an integer"));
}

TEST(LoadDatasetTest, MissingLabel) {
  EXPECT_INVALID(LoadWithNodes("0\n\n2\n-1\n"), HasSubstr("nodes.svm:2:"),
                 HasSubstr("missing label"));
}

TEST(LoadDatasetTest, ValueOutsideFeatureRange) {
  Files f;
  f.meta = R"({"name": "t", "nodes": 4, "edges": 3, "features": 5,
               "classes": 3, "feature_range": [-1, 1]})";
  f.nodes = "0 1:1\n1 2:-1\n2 3:1.5\n-1\n";
  EXPECT_INVALID(LoadWith(f), HasSubstr("nodes.svm:3:"),
                 HasSubstr("feature index 3"), HasSubstr("'1.5'"),
                 HasSubstr("outside feature_range [-1, 1]"));
}

// ------------------------------------------------------------- round trip

Dataset TinyDataset() {
  Dataset d;
  d.meta.name = "round trip";
  d.meta.nodes = 999;  // not trusted: written from the graph
  d.meta.edges = 999;
  d.meta.features = 6;
  d.meta.classes = 4;
  d.meta.source = "made by hand";
  d.meta.license = "CC0 \"quoted\" \xc3\xa9";
  d.meta.notes = "line one\nline two";
  d.meta.feature_range = std::make_pair(-4e38, 4e38);
  d.meta.generator_json = R"({"seed":7,"nodes":5,"avg_degree":2.5,"x":[1,2]})";
  // Unsorted, both orientations: the writer must sort with u < v.
  d.graph = *Graph::FromEdges(5, {{3, 1}, {0, 4}, {2, 0}, {1, 0}});
  d.labels = {0, -1, 3, 2, 1};
  d.features.cols = 6;
  const std::vector<float> tricky = {0.1f, 1e-45f, -3.4028235e38f,
                                     0.048049200f, 1.0f / 3.0f, 1e-7f};
  d.features.AppendRow(std::vector<uint32_t>{0, 5},
                       std::vector<float>{tricky[0], tricky[1]});
  d.features.AppendRow({}, {});
  d.features.AppendRow(std::vector<uint32_t>{1, 2, 3},
                       std::vector<float>{tricky[2], tricky[3], tricky[4]});
  d.features.AppendRow(std::vector<uint32_t>{4}, std::vector<float>{-2.0f});
  d.features.AppendRow(std::vector<uint32_t>{0, 1, 2, 3, 4, 5},
                       std::vector<float>{1, 2, 3, 4, 5, tricky[5]});
  return d;
}

TEST(WriteDatasetTest, RoundTrip) {
  TempFolder dir;
  const Dataset d = TinyDataset();
  const std::string out = dir.File("sub/folder");  // created on demand
  ASSERT_TRUE(WriteDataset(d, out).ok());
  auto back = LoadDataset(out);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->meta.name, d.meta.name);
  EXPECT_EQ(back->meta.nodes, 5u);
  EXPECT_EQ(back->meta.edges, 4u);
  EXPECT_EQ(back->meta.features, 6u);
  EXPECT_EQ(back->meta.classes, 4);
  EXPECT_EQ(back->meta.source, d.meta.source);
  EXPECT_EQ(back->meta.license, d.meta.license);
  EXPECT_EQ(back->meta.notes, d.meta.notes);
  EXPECT_EQ(back->meta.feature_range, d.meta.feature_range);
  EXPECT_EQ(back->meta.generator_json, d.meta.generator_json);
  EXPECT_EQ(back->graph.Edges(), d.graph.Edges());
  EXPECT_EQ(back->labels, d.labels);
  EXPECT_EQ(back->features.rows, d.features.rows);
  EXPECT_EQ(back->features.cols, d.features.cols);
  EXPECT_EQ(back->features.offsets, d.features.offsets);
  EXPECT_EQ(back->features.indices, d.features.indices);
  // Bit-exact floats: shortest round-trip text.
  ASSERT_EQ(back->features.values.size(), d.features.values.size());
  for (size_t i = 0; i < d.features.values.size(); ++i) {
    EXPECT_EQ(back->features.values[i], d.features.values[i]) << i;
  }
  EXPECT_EQ(ReadText(fs::path(out) / "edges.txt"), "0 1\n0 2\n0 4\n1 3\n");
  const std::string nodes = ReadText(fs::path(out) / "nodes.svm");
  EXPECT_THAT(nodes, HasSubstr("0 1:0.1 6:1e-45\n-1\n3 2:-3.4028235e+38 "));
  EXPECT_THAT(nodes, HasSubstr("\n2 5:-2\n1 1:1 2:2 3:3 4:4 5:5 6:1e-07\n"));
  // No temporary files left behind.
  for (const auto& entry : fs::directory_iterator(out)) {
    EXPECT_NE(entry.path().extension(), ".tmp") << entry.path();
  }
}

TEST(WriteDatasetTest, MetaKeyOrderAndFormat) {
  TempFolder dir;
  ASSERT_TRUE(WriteDataset(TinyDataset(), dir.path()).ok());
  const std::string meta = ReadText(dir.File("meta.json"));
  std::vector<size_t> positions;
  for (absl::string_view key :
       {"\"name\"", "\"nodes\"", "\"edges\"", "\"features\"", "\"classes\"",
        "\"feature_range\"", "\"source\"", "\"license\"", "\"notes\"",
        "\"generator\""}) {
    const size_t pos = meta.find(std::string(key));
    ASSERT_NE(pos, std::string::npos) << key;
    positions.push_back(pos);
  }
  EXPECT_TRUE(std::is_sorted(positions.begin(), positions.end())) << meta;
  EXPECT_THAT(meta, HasSubstr("{\n  \"name\": \"round trip\",\n  \"nodes\": 5,"
                              "\n  \"edges\": 4,"));
  EXPECT_THAT(meta, HasSubstr("\"generator\": {\n    \"seed\": 7,"));
  EXPECT_EQ(meta.back(), '\n');
}

TEST(WriteDatasetTest, OmitsOptionalKeysWhenUnset) {
  TempFolder dir;
  Dataset d = TinyDataset();
  d.meta.feature_range.reset();
  d.meta.generator_json.clear();
  ASSERT_TRUE(WriteDataset(d, dir.path()).ok());
  const std::string meta = ReadText(dir.File("meta.json"));
  EXPECT_THAT(meta, Not(HasSubstr("feature_range")));
  EXPECT_THAT(meta, Not(HasSubstr("generator")));
  EXPECT_THAT(meta, HasSubstr("\"notes\""));
}

TEST(WriteDatasetTest, DropsStoredZerosAndOverwrites) {
  TempFolder dir;
  Dataset d = TinyDataset();
  ASSERT_TRUE(WriteDataset(d, dir.path()).ok());
  d.features.values[0] = 0.0f;  // row 0, column 0
  ASSERT_TRUE(WriteDataset(d, dir.path()).ok());
  auto back = LoadDataset(dir.path());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->features.nnz(), d.features.nnz() - 1);
  EXPECT_EQ(back->features.row_indices(0).size(), 1u);
  EXPECT_EQ(back->features.row_indices(0)[0], 5u);
}

TEST(WriteDatasetTest, ParentIsARegularFile) {
  TempFolder dir;
  WriteText(dir.File("blocker"), "not a folder");
  const std::string target = dir.File("blocker/dataset");
  const absl::Status s = WriteDataset(TinyDataset(), target);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(target));
  EXPECT_THAT(std::string(s.message()), HasSubstr("Not a directory"));
  for (const auto& entry : fs::recursive_directory_iterator(dir.path())) {
    EXPECT_NE(entry.path().extension(), ".tmp") << entry.path();
  }
}

TEST(WriteDatasetTest, RenameFailureRemovesTemporaryFiles) {
  TempFolder dir;
  // edges.txt is a non-empty folder: renaming onto it fails.
  fs::create_directories(dir.File("edges.txt/inside"));
  const absl::Status s = WriteDataset(TinyDataset(), dir.path());
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(dir.File("edges.txt")));
  for (const auto& entry : fs::recursive_directory_iterator(dir.path())) {
    EXPECT_NE(entry.path().extension(), ".tmp") << entry.path();
  }
  EXPECT_FALSE(fs::exists(dir.File("meta.json")));
}

TEST(WriteDatasetTest, RejectsInvalidDatasets) {
  TempFolder dir;
  {
    Dataset d = TinyDataset();
    d.graph = *Graph::FromEdges(5, {{0, 1}, {2, 2}}, {true, true});
    const absl::Status s = WriteDataset(d, dir.path());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr("self loop"));
  }
  {
    Dataset d = TinyDataset();
    d.labels.pop_back();
    const absl::Status s = WriteDataset(d, dir.path());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr("4 labels for 5 nodes"));
  }
  {
    Dataset d = TinyDataset();
    d.labels[2] = 4;
    const absl::Status s = WriteDataset(d, dir.path());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr("node 2: label 4"));
  }
  {
    Dataset d = TinyDataset();
    d.features.values[1] = std::numeric_limits<float>::quiet_NaN();
    const absl::Status s = WriteDataset(d, dir.path());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr("non-finite"));
  }
  {
    Dataset d = TinyDataset();
    d.meta.feature_range = std::make_pair(-1.0, 1.0);
    const absl::Status s = WriteDataset(d, dir.path());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr("outside"));
  }
  {
    Dataset d = TinyDataset();
    d.meta.generator_json = "[1]";
    const absl::Status s = WriteDataset(d, dir.path());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr("generator_json"));
  }
  // Nothing was written by the rejected calls.
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

// ------------------------------------------------------------ LoadEdgeList

TEST(LoadEdgeListTest, CommentsBlankLinesTabsOrientationsAndDuplicates) {
  TempFolder dir;
  WriteText(dir.File("g.txt"),
            "# a comment\n% another\n\n  \t\n0\t1\n  3   1 \r\n1 0\n2 3\n"
            "   # indented comment\n3 2");
  auto g = LoadEdgeList(dir.File("g.txt"), EdgeListOptions());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->num_nodes(), 4u);  // largest id + 1
  EXPECT_EQ(g->Edges(), (std::vector<Edge>{{0, 1}, {1, 3}, {2, 3}}));
}

TEST(LoadEdgeListTest, SelfLoopIsAnErrorUnlessAllowed) {
  TempFolder dir;
  WriteText(dir.File("g.txt"), "# header\n0 1\n2 2\n");
  const absl::Status s =
      LoadEdgeList(dir.File("g.txt"), EdgeListOptions()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("g.txt:3:"), HasSubstr("self loop 2 2")));
  EdgeListOptions allow;
  allow.allow_self_loops = true;
  auto g = LoadEdgeList(dir.File("g.txt"), allow);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->num_self_loops(), 1u);
  EXPECT_TRUE(g->HasSelfLoop(2));
  EXPECT_EQ(g->num_edges(), 2u);
}

TEST(LoadEdgeListTest, GivenNodeCount) {
  TempFolder dir;
  WriteText(dir.File("g.txt"), "0 1\n1 2\n");
  EdgeListOptions options;
  options.num_nodes = 10;
  auto g = LoadEdgeList(dir.File("g.txt"), options);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->num_nodes(), 10u);
  EXPECT_EQ(g->degree(9), 0u);
  options.num_nodes = 2;
  const absl::Status s = LoadEdgeList(dir.File("g.txt"), options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("g.txt:2:"), HasSubstr("node id 2 out of range"),
                    HasSubstr("num_nodes = 2")));
}

TEST(LoadEdgeListTest, EmptyFileAndErrors) {
  TempFolder dir;
  WriteText(dir.File("empty.txt"), "# nothing\n");
  auto g = LoadEdgeList(dir.File("empty.txt"), EdgeListOptions());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->num_nodes(), 0u);
  WriteText(dir.File("bad.txt"), "0 1\n1 x\n");
  absl::Status s = LoadEdgeList(dir.File("bad.txt"), EdgeListOptions()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("bad.txt:2:"), HasSubstr("'x'")));
  WriteText(dir.File("extra.txt"), "0 1 0.5\n");
  s = LoadEdgeList(dir.File("extra.txt"), EdgeListOptions()).status();
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("extra.txt:1:"), HasSubstr("extra token '0.5'")));
  s = LoadEdgeList(dir.File("missing.txt"), EdgeListOptions()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr(dir.File("missing.txt")));
}

// ------------------------------------------------------------ scaling

TEST(FeatureScalingTest, ParseAndName) {
  EXPECT_EQ(*ParseFeatureScaling("none"), FeatureScaling::kNone);
  EXPECT_EQ(*ParseFeatureScaling("unit"), FeatureScaling::kUnit);
  EXPECT_EQ(*ParseFeatureScaling("0,1"), FeatureScaling::kUnit);
  EXPECT_EQ(*ParseFeatureScaling("symmetric"), FeatureScaling::kSymmetric);
  EXPECT_EQ(*ParseFeatureScaling("-1,1"), FeatureScaling::kSymmetric);
  for (absl::string_view bad : {"", "Unit", "0, 1", "[0,1]", "minmax"}) {
    const absl::Status s = ParseFeatureScaling(bad).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(s.message()),
                AllOf(HasSubstr(absl::StrCat("'", bad, "'")),
                      HasSubstr("none, unit (or 0,1), symmetric (or -1,1)")));
  }
  for (FeatureScaling s : {FeatureScaling::kNone, FeatureScaling::kUnit,
                           FeatureScaling::kSymmetric}) {
    EXPECT_EQ(*ParseFeatureScaling(FeatureScalingName(s)), s);
  }
  EXPECT_EQ(FeatureScalingName(FeatureScaling::kUnit), "unit");
}

TEST(FeatureScalingTest, ScaledRange) {
  DatasetMeta meta;
  EXPECT_FALSE(ScaledRange(FeatureScaling::kNone, meta).has_value());
  meta.feature_range = std::make_pair(-3.0, 5.0);
  EXPECT_EQ(ScaledRange(FeatureScaling::kNone, meta), meta.feature_range);
  EXPECT_EQ(ScaledRange(FeatureScaling::kUnit, meta), std::make_pair(0.0, 1.0));
  EXPECT_EQ(ScaledRange(FeatureScaling::kSymmetric, meta),
            std::make_pair(-1.0, 1.0));
}

// ---------------------------------------------------------- real datasets

struct Summary {
  size_t unlabelled = 0;
  size_t isolated = 0;
  size_t max_label = 0;
};

Summary Summarize(const Dataset& d) {
  Summary s;
  for (size_t v = 0; v < d.graph.num_nodes(); ++v) {
    if (d.labels[v] < 0) ++s.unlabelled;
    if (d.labels[v] >= 0) s.max_label = std::max<size_t>(s.max_label, d.labels[v]);
    if (d.graph.degree(static_cast<NodeId>(v)) == 0) ++s.isolated;
  }
  return s;
}

#define LOAD_REAL_OR_SKIP(var, name)                                        \
  const std::string var##_dir = (fs::path(SharedDatasetsDir()) / name).string();  \
  if (!fs::is_directory(var##_dir)) {                                       \
    GTEST_SKIP() << "dataset " << name << " not found at " << var##_dir     \
                 << " (set LDPGRAPH_DATASETS to the datasets folder)";      \
  }                                                                         \
  const auto var##_start = std::chrono::steady_clock::now();                \
  auto var##_or = LoadDataset(var##_dir);                                   \
  const double var##_seconds = std::chrono::duration<double>(               \
      std::chrono::steady_clock::now() - var##_start).count();              \
  ASSERT_TRUE(var##_or.ok()) << var##_or.status();                          \
  std::cout << "[ timing   ] loaded " << name << " in " << var##_seconds     \
            << " s\n";                                                      \
  const Dataset& var = *var##_or

TEST(RealDatasetsTest, Cora) {
  LOAD_REAL_OR_SKIP(d, "cora");
  EXPECT_EQ(d.meta.name, "cora");
  EXPECT_EQ(d.graph.num_nodes(), 2708u);
  EXPECT_EQ(d.graph.num_edges(), 5278u);
  EXPECT_EQ(d.features.cols, 1433u);
  EXPECT_EQ(d.meta.classes, 7);
  EXPECT_EQ(d.features.nnz(), 49216u);
  const Summary s = Summarize(d);
  EXPECT_EQ(s.unlabelled, 0u);
  EXPECT_EQ(s.isolated, 0u);
  EXPECT_EQ(s.max_label, 6u);
  // The example line of ../shared/datasets/README.md: node 0 is class 3
  // with nine binary features.
  EXPECT_EQ(d.labels[0], 3);
  EXPECT_EQ(std::vector<uint32_t>(d.features.row_indices(0).begin(),
                                  d.features.row_indices(0).end()),
            (std::vector<uint32_t>{19, 81, 146, 315, 774, 877, 1194, 1247,
                                   1274}));
  EXPECT_TRUE(d.graph.HasEdge(0, 633));
}

TEST(RealDatasetsTest, Citeseer) {
  LOAD_REAL_OR_SKIP(d, "citeseer");
  EXPECT_EQ(d.graph.num_nodes(), 3327u);
  EXPECT_EQ(d.graph.num_edges(), 4552u);
  EXPECT_EQ(d.features.cols, 3703u);
  EXPECT_EQ(d.meta.classes, 6);
  EXPECT_EQ(d.features.nnz(), 105165u);
  const Summary s = Summarize(d);
  EXPECT_EQ(s.unlabelled, 15u);
  EXPECT_EQ(s.isolated, 48u);
  // The unlabelled nodes are the ones without a feature row, all in the
  // Planetoid test range 2312..3326.
  for (size_t v = 0; v < d.labels.size(); ++v) {
    if (d.labels[v] < 0) {
      EXPECT_GE(v, 2312u);
      EXPECT_TRUE(d.features.row_indices(v).empty()) << v;
    }
  }
}

TEST(RealDatasetsTest, Pubmed) {
  LOAD_REAL_OR_SKIP(d, "pubmed");
  EXPECT_EQ(d.graph.num_nodes(), 19717u);
  EXPECT_EQ(d.graph.num_edges(), 44324u);
  EXPECT_EQ(d.features.cols, 500u);
  EXPECT_EQ(d.meta.classes, 3);
  EXPECT_EQ(d.features.nnz(), 988031u);
  const Summary s = Summarize(d);
  EXPECT_EQ(s.unlabelled, 0u);
  EXPECT_EQ(s.isolated, 0u);
  // Load, write, load again: the same dataset.
  TempFolder dir;
  ASSERT_TRUE(WriteDataset(d, dir.path()).ok());
  auto back = LoadDataset(dir.path());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->graph.Edges(), d.graph.Edges());
  EXPECT_EQ(back->labels, d.labels);
  EXPECT_EQ(back->features.offsets, d.features.offsets);
  EXPECT_EQ(back->features.indices, d.features.indices);
  EXPECT_TRUE(back->features.values == d.features.values);
}

}  // namespace
}  // namespace ldpgraph
