// Tests for MakeDirs: mkdir -p with a private leaf.
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

}  // namespace
}  // namespace ldpgraph
