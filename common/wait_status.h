// How a child process ended, from waitpid's status, in words: "exited with
// status 1", "killed by signal 9 (Killed)", or "ended".
#pragma once

#include <sys/wait.h>

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace ldpgraph {

inline std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) {
    return absl::StrCat("exited with status ", WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return absl::StrCat("killed by signal ", WTERMSIG(status), " (",
                        strsignal(WTERMSIG(status)), ")");
  }
  return "ended";
}

}  // namespace ldpgraph
