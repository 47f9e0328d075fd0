#include "server/training/row_file.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph::training {
namespace {

using ::testing::HasSubstr;

// $TMPDIR, else /tmp.
std::string Scratch() { return ""; }

// Written by slices of columns (the last one narrower), read back by rows
// in any order, repeated or not: the same floats.
TEST(RowFileTest, ColumnsWrittenRowsRead) {
  const size_t rows = 37, cols = 11;
  std::vector<float> want(rows * cols);
  for (size_t i = 0; i < want.size(); ++i) {
    want[i] = static_cast<float>(i) * 0.37f - 50.0f;
  }
  auto file = RowFile::Create(Scratch(), rows, cols);
  ASSERT_TRUE(file.ok()) << file.status();
  for (size_t j0 = 0; j0 < cols; j0 += 4) {
    const size_t w = std::min<size_t>(4, cols - j0);
    std::vector<float> slice(rows * w);
    for (size_t r = 0; r < rows; ++r) {
      for (size_t k = 0; k < w; ++k) slice[r * w + k] = want[r * cols + j0 + k];
    }
    ASSERT_TRUE((*file)->WriteColumns(j0, w, slice.data()).ok());
  }
  const std::vector<uint32_t> ids = {36, 0, 5, 5, 17};
  std::vector<float> got(ids.size() * cols, -1.0f);
  (*file)->ReadRows(ids.data(), ids.size(), got.data());
  ASSERT_TRUE((*file)->status().ok());
  for (size_t i = 0; i < ids.size(); ++i) {
    for (size_t j = 0; j < cols; ++j) {
      EXPECT_EQ(got[i * cols + j], want[ids[i] * cols + j]) << i << "," << j;
    }
  }
  // Whole rows in one write replace them all.
  std::vector<float> twice(want);
  for (float& v : twice) v *= 2;
  ASSERT_TRUE((*file)->WriteColumns(0, cols, twice.data()).ok());
  (*file)->ReadRows(ids.data(), ids.size(), got.data());
  EXPECT_EQ(got[0], twice[36 * cols]);
  EXPECT_EQ(got[cols * 4 + 10], twice[17 * cols + 10]);
}

TEST(RowFileTest, BadWritesAndReadsAreErrors) {
  EXPECT_EQ(RowFile::Create(Scratch(), 0, 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  const absl::Status missing =
      RowFile::Create("/nonexistent/folder", 2, 2).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.message()),
              HasSubstr("/nonexistent/folder"));
  auto file = RowFile::Create(Scratch(), 3, 4);
  ASSERT_TRUE(file.ok()) << file.status();
  std::vector<float> slice(3 * 2, 1.0f);
  EXPECT_THAT(std::string((*file)->WriteColumns(3, 2, slice.data()).message()),
              HasSubstr("outside the row file's 4"));
  slice[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THAT(std::string((*file)->WriteColumns(2, 2, slice.data()).message()),
              HasSubstr("row 1, column 3 is not finite"));
  // Unwritten rows read as zeros (the file is reserved zeroed).
  const uint32_t row = 2;
  std::vector<float> got(4, -1.0f);
  (*file)->ReadRows(&row, 1, got.data());
  EXPECT_EQ(got, std::vector<float>(4, 0.0f));
  EXPECT_TRUE((*file)->status().ok());
  // A row past the end cannot be read: zeros, and the error kept.
  const uint32_t past = 3;
  got.assign(4, -1.0f);
  (*file)->ReadRows(&past, 1, got.data());
  EXPECT_EQ(got, std::vector<float>(4, 0.0f));
  EXPECT_THAT(std::string((*file)->status().message()),
              HasSubstr("reading row 3 of the row file"));
}

// No room for the file: an error when it is made, naming the bytes and the
// folder, not a failure halfway through writing. A file size limit stands
// in for a full disk, in a child process.
TEST(RowFileTest, NoRoomIsAnErrorUpFront) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    rlimit limit{1 << 20, 1 << 20};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(3);
    auto file = RowFile::Create(Scratch(), 1000, 1000);  // 4 MB
    if (file.ok()) _exit(1);
    const std::string m(file.status().message());
    _exit(m.find("cannot reserve 4000000 bytes") != std::string::npos &&
                  m.find("--scratch-dir") != std::string::npos
              ? 0
              : 2);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace ldpgraph::training
