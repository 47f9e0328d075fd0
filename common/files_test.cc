// Tests for MakeDirs (mkdir -p with a private leaf), ReadFileToString and
// the atomic writes.
#include "common/files.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/testing/temp_folder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ldpgraph {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Sets the umask for one test and restores it.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : old_(::umask(mask)) {}
  ~ScopedUmask() { ::umask(old_); }

 private:
  mode_t old_;
};

TEST(MakeDirsTest, CreatesMissingParentsAndAPrivateLeaf) {
  ScopedUmask umask(022);
  TempFolder dir(TempFolder::kLeaveMissing);
  const std::string leaf = dir.path() + "/state/curator";
  ASSERT_TRUE(MakeDirs(leaf).ok());
  EXPECT_TRUE(fs::is_directory(leaf));
  EXPECT_EQ(ModeOf(dir.path()), 0755u);
  EXPECT_EQ(ModeOf(dir.path() + "/state"), 0755u);
  EXPECT_EQ(ModeOf(leaf), 0700u);
}

TEST(MakeDirsTest, ExistingDirectoriesAreFineAndKeepTheirMode) {
  ScopedUmask umask(022);
  TempFolder dir;
  const std::string leaf = dir.File("a/b");
  ASSERT_TRUE(MakeDirs(leaf).ok());
  fs::permissions(leaf, fs::perms(0750));
  ASSERT_TRUE(MakeDirs(leaf).ok());
  EXPECT_EQ(ModeOf(leaf), 0750u);
  ASSERT_TRUE(MakeDirs(dir.File("a")).ok());
  EXPECT_EQ(ModeOf(dir.File("a")), 0755u);
}

TEST(MakeDirsTest, TrailingAndRepeatedSlashes) {
  TempFolder dir;
  ASSERT_TRUE(MakeDirs(dir.path() + "//x///y/").ok());
  EXPECT_TRUE(fs::is_directory(dir.File("x/y")));
  EXPECT_TRUE(MakeDirs("/").ok());
}

TEST(MakeDirsTest, LeafModeIsAParameter) {
  ScopedUmask umask(022);
  TempFolder dir;
  ASSERT_TRUE(MakeDirs(dir.File("p/q"), 0755).ok());
  EXPECT_EQ(ModeOf(dir.File("p/q")), 0755u);
}

TEST(MakeDirsTest, AFileInTheWayIsAnErrorNamingIt) {
  TempFolder dir;
  std::ofstream(dir.File("file")) << "x";
  absl::Status s = MakeDirs(dir.File("file/sub"));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(s.message(), dir.File("file") + " exists and is not a directory");
  s = MakeDirs(dir.File("file"));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(s.message(), dir.File("file") + " exists and is not a directory");
}

TEST(MakeDirsTest, EmptyPath) {
  EXPECT_EQ(MakeDirs("").code(), absl::StatusCode::kInvalidArgument);
}

TEST(ReadFileToStringTest, ReadsAFileAndNamesAMissingPathOrADirectory) {
  TempFolder dir;
  {
    std::ofstream out(dir.File("ca.pem"), std::ios::binary);
    out << "pem\n";
  }
  auto text = ReadFileToString(dir.File("ca.pem"));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "pem\n");

  auto missing = ReadFileToString(dir.File("missing.pem"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(dir.File("missing.pem")));

  // A directory opens like a file on Linux and reads as nothing; it must be
  // an error, not an empty certificate.
  fs::create_directory(dir.File("dir.pem"));
  auto folder = ReadFileToString(dir.File("dir.pem"));
  EXPECT_EQ(folder.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(folder.status().message(),
            dir.File("dir.pem") + " is a directory, not a file");
}

TEST(AtomicFileWriterTest, WritesWholeOrNothing) {
  TempFolder dir;
  const std::string path = dir.File("out.txt");
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  EXPECT_EQ(*ReadFileToString(path), "first");
  // Replacing: the new content, and no temporary file left behind.
  const std::string big(3 * AtomicFileWriter::kBufferSize + 17, 'x');
  ASSERT_TRUE(WriteFileAtomically(path, big).ok());
  EXPECT_EQ(*ReadFileToString(path), big);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  {
    // Not committed: the old file stays, the temporary one goes.
    AtomicFileWriter w(path);
    ASSERT_TRUE(w.Open().ok());
    w.Append("half");
    EXPECT_TRUE(fs::exists(path + ".tmp"));
  }
  EXPECT_EQ(*ReadFileToString(path), big);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  // A folder that does not exist: an error naming the path, nothing made.
  const std::string nowhere = dir.File("missing/out.txt");
  absl::Status s = WriteFileAtomically(nowhere, "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr(nowhere));
}

TEST(AtomicFileWriterTest, ReserveAndAdvanceAppendInOrder) {
  TempFolder dir;
  const std::string path = dir.File("r.txt");
  AtomicFileWriter w(path);
  ASSERT_TRUE(w.Open().ok());
  for (int i = 0; i < 300000; ++i) {
    char* p = w.Reserve(8);
    p[0] = static_cast<char>('a' + i % 26);
    w.Advance(p + 1);
  }
  ASSERT_TRUE(w.Close().ok());
  ASSERT_TRUE(w.Commit().ok());
  const std::string text = *ReadFileToString(path);
  ASSERT_EQ(text.size(), 300000u);
  EXPECT_EQ(text[0], 'a');
  EXPECT_EQ(text[299999], static_cast<char>('a' + 299999 % 26));
}

}  // namespace
}  // namespace ldpgraph
