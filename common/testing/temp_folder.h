// Tests only: a folder of the running test's own under the test temp dir,
// removed (with everything in it) when the TempFolder goes out of scope.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace ldpgraph {

class TempFolder {
 public:
  // kCreate makes the folder; kLeaveMissing only picks its path, for tests
  // of code that must create the folder itself.
  enum Creation { kCreate, kLeaveMissing };

  // <TempDir>/ldpgraph_<suite>_<test>_<pid>, emptied first.
  explicit TempFolder(Creation creation = kCreate) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = (std::filesystem::path(::testing::TempDir()) /
             absl::StrCat("ldpgraph_", info->test_suite_name(), "_",
                          info->name(), "_", getpid()))
                .string();
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    if (creation == kCreate) std::filesystem::create_directories(path_);
  }
  ~TempFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;

  const std::string& path() const { return path_; }
  // path()/name.
  std::string File(absl::string_view name) const {
    return (std::filesystem::path(path_) / std::string(name)).string();
  }

 private:
  std::string path_;
};

}  // namespace ldpgraph
