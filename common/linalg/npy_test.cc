#include "common/linalg/npy.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/npy_test_" + name;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(NpyTest, HeaderIsNumpyVersion1AlignedTo64) {
  DenseMatrix m(2, 3);
  for (size_t i = 0; i < 6; ++i) m.data[i] = static_cast<float>(i) - 2.5f;
  const std::string path = TempPath("header.npy");
  ASSERT_TRUE(WriteNpy(path, m).ok());
  const std::string bytes = ReadAll(path);
  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(bytes[6], 1);
  EXPECT_EQ(bytes[7], 0);
  const size_t header_len = static_cast<unsigned char>(bytes[8]) |
                            (static_cast<unsigned char>(bytes[9]) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u);
  const std::string header = bytes.substr(10, header_len);
  EXPECT_THAT(header, HasSubstr("'descr': '<f4'"));
  EXPECT_THAT(header, HasSubstr("'fortran_order': False"));
  EXPECT_THAT(header, HasSubstr("'shape': (2, 3)"));
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(bytes.size(), 10 + header_len + 6 * sizeof(float));
}

TEST(NpyTest, RoundTrip) {
  DenseMatrix m(17, 5);
  for (size_t i = 0; i < m.data.size(); ++i) m.data[i] = 0.1f * i - 3.0f;
  const std::string path = TempPath("roundtrip.npy");
  ASSERT_TRUE(WriteNpy(path, m).ok());
  auto back = ReadNpy(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->rows, 17u);
  EXPECT_EQ(back->cols, 5u);
  EXPECT_EQ(back->data, m.data);
}

TEST(NpyTest, EmptyMatrix) {
  DenseMatrix m(0, 4);
  const std::string path = TempPath("empty.npy");
  ASSERT_TRUE(WriteNpy(path, m).ok());
  auto back = ReadNpy(path);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->rows, 0u);
  EXPECT_EQ(back->cols, 4u);
}

TEST(NpyTest, WriteFailureNamesPathAndLeavesNoFile) {
  const std::string dir = TempPath("not_a_dir");
  { std::ofstream(dir) << "x"; }
  const std::string path = dir + "/z.npy";
  auto s = WriteNpy(path, DenseMatrix(1, 1));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(dir));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(NpyTest, ReadRejectsOtherDtypesAndGarbage) {
  const std::string garbage = TempPath("garbage.npy");
  { std::ofstream(garbage) << "hello world, not numpy"; }
  auto g = ReadNpy(garbage);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("bad magic"));

  const std::string f8 = TempPath("f8.npy");
  {
    std::string header =
        "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1), }";
    header.append(64 - (10 + header.size() + 1) % 64, ' ');
    header.push_back('\n');
    std::ofstream out(f8, std::ios::binary);
    out << "\x93NUMPY" << '\x01' << '\x00'
        << static_cast<char>(header.size() & 0xff)
        << static_cast<char>(header.size() >> 8) << header
        << std::string(8, '\0');
  }
  auto d = ReadNpy(f8);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("not float32"));

  auto missing = ReadNpy(TempPath("does_not_exist.npy"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST(NpyTest, TruncatedDataIsAnError) {
  DenseMatrix m(4, 4);
  const std::string path = TempPath("trunc.npy");
  ASSERT_TRUE(WriteNpy(path, m).ok());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 4);
  auto back = ReadNpy(path);
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(back.status().message(), HasSubstr("truncated data"));
}

// numpy.load must read what WriteNpy writes: the promise `ldpgraph
// propagate --out Z.npy` makes. Needs python3 with numpy (Debian
// python3-numpy, installed by deploy/install-deps.sh).
TEST(NpyTest, NumpyLoadsIt) {
  if (std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0) {
    GTEST_FAIL() << "python3 with numpy is required (apt-get install "
                    "python3-numpy; deploy/install-deps.sh does it)";
  }
  DenseMatrix m(3, 2);
  m.data = {1.5f, -2.0f, 0.25f, 1e-7f, 3e8f, -0.0f};
  const std::string path = TempPath("numpy.npy");
  ASSERT_TRUE(WriteNpy(path, m).ok());
  const std::string cmd =
      "/usr/bin/python3 -c \"import numpy as np; a = np.load('" + path +
      "'); assert a.dtype == np.float32, a.dtype; assert a.shape == (3, 2), "
      "a.shape; assert a.flags['C_CONTIGUOUS']; "
      "assert (a == np.array([[1.5, -2.0], [0.25, 1e-7], [3e8, -0.0]], "
      "dtype=np.float32)).all(), a\"";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(NpyTest, NumpyLoadsInt64Ids) {
  if (std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0) {
    GTEST_FAIL() << "python3 with numpy is required";
  }
  const std::string path = TempPath("ids.npy");
  ASSERT_TRUE(WriteNpyInt64(path, {0, 7, -1, int64_t{1} << 40}).ok());
  const std::string cmd =
      "/usr/bin/python3 -c \"import numpy as np; a = np.load('" + path +
      "'); assert a.dtype == np.int64, a.dtype; assert a.shape == (4,), "
      "a.shape; assert list(a) == [0, 7, -1, 2**40], a\"";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string empty = TempPath("ids-empty.npy");
  ASSERT_TRUE(WriteNpyInt64(empty, {}).ok());
  EXPECT_THAT(ReadAll(empty), HasSubstr("'shape': (0,)"));
  EXPECT_THAT(WriteNpyInt64("/nonexistent-dir/ids.npy", {1}).message(),
              HasSubstr("/nonexistent-dir/ids.npy"));
}

}  // namespace
}  // namespace ldpgraph
