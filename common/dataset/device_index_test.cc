#include "common/dataset/device_index.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/dataset/dataset.h"
#include "common/dataset/generator.h"
#include "common/testing/temp_folder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

Dataset Small(size_t nodes = 300) {
  GeneratorOptions o;
  o.nodes = nodes;
  o.classes = 3;
  o.features = 20;
  o.avg_degree = 6;
  o.homophily = 0.8;
  o.seed = 5;
  auto d = GenerateDataset(o, {});
  EXPECT_TRUE(d.ok()) << d.status();
  d->labels[7] = -1;  // an unlabelled node in the shard below
  return *std::move(d);
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// The records of [begin, end) must be the dataset's rows, as LoadDataset
// reads them.
void ExpectRecordsOf(const Dataset& d, const std::vector<DeviceRecord>& got,
                     uint32_t begin, uint32_t end) {
  ASSERT_EQ(got.size(), end - begin);
  for (uint32_t v = begin; v < end; ++v) {
    const DeviceRecord& r = got[v - begin];
    EXPECT_EQ(r.node, v);
    EXPECT_EQ(r.label, d.labels[v]) << v;
    const auto idx = d.features.row_indices(v);
    const auto val = d.features.row_values(v);
    EXPECT_EQ(r.indices, std::vector<uint32_t>(idx.begin(), idx.end())) << v;
    EXPECT_EQ(r.values, std::vector<float>(val.begin(), val.end())) << v;
    const auto nb = d.graph.neighbors(v);
    EXPECT_EQ(r.neighbours, std::vector<uint32_t>(nb.begin(), nb.end())) << v;
  }
}

TEST(DeviceIndexTest, AShardReadsItsOwnRecords) {
  TempFolder tmp;
  const Dataset d = Small();
  ASSERT_TRUE(WriteDataset(d, tmp.path()).ok());
  ASSERT_TRUE(fs::exists(tmp.File(kDeviceIndexFile)));
  for (auto [b, e] : {std::pair<uint32_t, uint32_t>{0, 1}, {0, 300}, {5, 40},
                      {299, 300}}) {
    auto got = ReadDeviceRecords(tmp.path(), d.meta, b, e);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectRecordsOf(d, *got, b, e);
  }
}

// Every byte the shard does not own is garbage: every other line of
// nodes.svm, all of edges.txt, and every part of devices.idx outside the
// header and the shard's slices. With the checksums off (as past
// kDeviceIndexChecksumBytes) the shard reads the same records.
TEST(DeviceIndexTest, ReadsNothingOutsideItsShard) {
  TempFolder tmp;
  const Dataset d = Small();
  ASSERT_TRUE(WriteDataset(d, tmp.path()).ok());
  const uint32_t begin = 120, end = 135;
  const uint64_t n = d.graph.num_nodes();

  std::string svm = Read(tmp.File("nodes.svm"));
  for (size_t at = 0, line = 0; at < svm.size(); ++line) {
    const size_t nl = svm.find('\n', at);
    if (line < begin || line >= end) {
      for (size_t k = at; k < nl; ++k) svm[k] = '#';
    }
    at = nl + 1;
  }
  Write(tmp.File("nodes.svm"), svm);
  std::string edges = Read(tmp.File("edges.txt"));
  for (char& c : edges) c = c == '\n' ? c : '?';
  Write(tmp.File("edges.txt"), edges);

  std::string idx = Read(tmp.File(kDeviceIndexFile));
  const uint64_t header = 104;  // magic, n, two sizes and SHA-256s, entries
  const uint64_t offsets = header, adjacency = header + (n + 1) * 8,
                 lists = header + 2 * (n + 1) * 8;
  std::vector<bool> keep(idx.size(), false);
  for (size_t k = 0; k < header; ++k) keep[k] = true;
  for (uint64_t k = offsets + begin * 8; k < offsets + (end + 1) * 8; ++k) {
    keep[k] = true;
  }
  for (uint64_t k = adjacency + begin * 8; k < adjacency + (end + 1) * 8; ++k) {
    keep[k] = true;
  }
  uint64_t first = 0;
  for (uint32_t v = 0; v < begin; ++v) first += d.graph.neighbors(v).size();
  uint64_t last = first;
  for (uint32_t v = begin; v < end; ++v) last += d.graph.neighbors(v).size();
  for (uint64_t k = lists + first * 4; k < lists + last * 4; ++k) keep[k] = true;
  for (size_t k = 0; k < idx.size(); ++k) {
    if (!keep[k]) idx[k] = static_cast<char>(0xA5);
  }
  Write(tmp.File(kDeviceIndexFile), idx);

  auto got = ReadDeviceRecords(tmp.path(), d.meta, begin, end,
                               /*checksum_bytes=*/0);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectRecordsOf(d, *got, begin, end);
  // And the garbage is real: the whole folder no longer loads, and with
  // the checksums on (the default for a folder this small) the index is
  // refused as made from other files.
  EXPECT_FALSE(LoadDataset(tmp.path()).ok());
  EXPECT_THAT(ReadDeviceRecords(tmp.path(), d.meta, begin, end)
                  .status()
                  .message(),
              HasSubstr("nodes.svm has changed since it was indexed"));
}

// The index records what it was made from: an edges.txt with a line fewer
// (and meta.json's count lowered to match, so that the curator loads the
// new graph) is refused by its size, an edit of the same length by its
// SHA-256, both naming the file and the command that makes a new index;
// and an index of the older format, which recorded neither, is refused.
TEST(DeviceIndexTest, AnIndexOfOtherFilesIsRefusedByName) {
  TempFolder tmp;
  Dataset d = Small(50);
  ASSERT_TRUE(WriteDataset(d, tmp.path()).ok());
  const std::string edges = Read(tmp.File("edges.txt"));
  const std::string prepare = "ldpgraph prepare --dataset " + tmp.path();

  const size_t first_line = edges.find('\n') + 1;
  Write(tmp.File("edges.txt"), edges.substr(first_line));
  DatasetMeta fewer = d.meta;
  fewer.edges -= 1;
  auto shorter = ReadDeviceRecords(tmp.path(), fewer, 0, 5);
  EXPECT_EQ(shorter.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(shorter.status().message(),
              AllOf(HasSubstr("edges.txt is " +
                              std::to_string(edges.size() - first_line) +
                              " bytes, the index was made for " +
                              std::to_string(edges.size())),
                    HasSubstr(prepare)));

  // The same length: the first edge's ids swapped for another pair of
  // single digits.
  std::string edited = edges;
  const size_t digit = edited.find_first_of("0123456789");
  ASSERT_NE(digit, std::string::npos);
  edited[digit] = edited[digit] == '9' ? '8' : static_cast<char>(edited[digit] + 1);
  Write(tmp.File("edges.txt"), edited);
  auto same_size = ReadDeviceRecords(tmp.path(), d.meta, 0, 5);
  EXPECT_EQ(same_size.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(same_size.status().message(),
              AllOf(HasSubstr("edges.txt has changed since it was indexed"),
                    HasSubstr(prepare)));
  // Sizes alone (a folder past kDeviceIndexChecksumBytes) do not see it.
  EXPECT_TRUE(ReadDeviceRecords(tmp.path(), d.meta, 0, 5, 0).ok());

  // The files as indexed again: accepted.
  Write(tmp.File("edges.txt"), edges);
  ASSERT_TRUE(ReadDeviceRecords(tmp.path(), d.meta, 0, 5).ok());

  std::string idx = Read(tmp.File(kDeviceIndexFile));
  idx[7] = '1';
  Write(tmp.File(kDeviceIndexFile), idx);
  EXPECT_THAT(ReadDeviceRecords(tmp.path(), d.meta, 0, 5).status().message(),
              AllOf(HasSubstr("an index of an older format"),
                    HasSubstr(prepare)));
}

TEST(DeviceIndexTest, AMissingOrStaleIndexNamesTheCommand) {
  TempFolder tmp;
  const Dataset d = Small(50);
  ASSERT_TRUE(WriteDataset(d, tmp.path()).ok());
  fs::remove(tmp.File(kDeviceIndexFile));
  auto missing = ReadDeviceRecords(tmp.path(), d.meta, 0, 5);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(missing.status().message(),
              HasSubstr("ldpgraph prepare --dataset " + tmp.path()));

  ASSERT_TRUE(WriteDeviceIndex(tmp.path(), d.graph).ok());
  ASSERT_TRUE(ReadDeviceRecords(tmp.path(), d.meta, 0, 5).ok());
  Write(tmp.File("nodes.svm"), Read(tmp.File("nodes.svm")) + "0\n");
  auto stale = ReadDeviceRecords(tmp.path(), d.meta, 0, 5);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(stale.status().message(),
              AllOf(HasSubstr("does not match"), HasSubstr("nodes.svm is")));

  DatasetMeta other = d.meta;
  other.nodes = 60;
  EXPECT_THAT(ReadDeviceRecords(tmp.path(), other, 0, 5).status().message(),
              HasSubstr("indexes 50 nodes"));
}

TEST(DeviceIndexTest, BadRangesAndBadOwnLinesAreErrors) {
  TempFolder tmp;
  Dataset d = Small(50);
  ASSERT_TRUE(WriteDataset(d, tmp.path()).ok());
  EXPECT_EQ(ReadDeviceRecords(tmp.path(), d.meta, 3, 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ReadDeviceRecords(tmp.path(), d.meta, 40, 51).status().message(),
              HasSubstr("beyond its 50 nodes"));
  // Node 2's own line broken, same length: the parse error names its line.
  std::string svm = Read(tmp.File("nodes.svm"));
  size_t at = 0;
  for (int i = 0; i < 2; ++i) at = svm.find('\n', at) + 1;
  svm[at] = 'x';
  Write(tmp.File("nodes.svm"), svm);
  // Sizes alone: the shard that holds the line parses it.
  auto bad = ReadDeviceRecords(tmp.path(), d.meta, 0, 5, 0);
  EXPECT_THAT(bad.status().message(), HasSubstr("nodes.svm:3: label"));
  EXPECT_TRUE(ReadDeviceRecords(tmp.path(), d.meta, 3, 5, 0).ok());
}

}  // namespace
}  // namespace ldpgraph
