#include "server/ldpctl/memory_sampler.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <vector>

namespace ldpgraph::ldpctl {
namespace {

// The parent of pid from /proc/<pid>/stat ("pid (comm) state ppid ..."; comm
// may hold spaces and parentheses, so read after the last ')'). -1 if gone.
int ParentOf(int pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return -1;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* close = std::strrchr(buf, ')');
  if (close == nullptr) return -1;
  char state = 0;
  int ppid = -1;
  if (std::sscanf(close + 1, " %c %d", &state, &ppid) != 2) return -1;
  return ppid;
}

// Resident bytes of pid from /proc/<pid>/statm (its second field, in
// pages); 0 if gone.
uint64_t ResidentBytes(int pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/statm", pid);
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  const int got = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  if (got != 2) return 0;
  return static_cast<uint64_t>(resident) *
         static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

uint64_t TreeResidentBytes(int root) {
  std::unordered_map<int, std::vector<int>> children;
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      char* end = nullptr;
      const long pid = std::strtol(e->d_name, &end, 10);
      if (end == e->d_name || *end != '\0' || pid <= 0) continue;
      const int ppid = ParentOf(static_cast<int>(pid));
      if (ppid > 0) children[ppid].push_back(static_cast<int>(pid));
    }
    closedir(d);
  }
  uint64_t total = 0;
  std::vector<int> todo = {root};
  while (!todo.empty()) {
    const int pid = todo.back();
    todo.pop_back();
    total += ResidentBytes(pid);
    auto it = children.find(pid);
    if (it != children.end()) {
      todo.insert(todo.end(), it->second.begin(), it->second.end());
    }
  }
  return total;
}

MemorySampler::MemorySampler(std::chrono::milliseconds interval)
    : interval_(interval) {
  SampleNow();
  thread_ = std::thread([this] {
    while (!stop_.load()) {
      // Sleep in short steps so that the destructor does not wait long.
      const auto until = std::chrono::steady_clock::now() + interval_;
      while (!stop_.load() && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (!stop_.load()) SampleNow();
    }
  });
}

MemorySampler::~MemorySampler() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

uint64_t MemorySampler::SampleNow() const {
  const uint64_t now = TreeResidentBytes(static_cast<int>(getpid()));
  uint64_t seen = peak_.load();
  while (now > seen && !peak_.compare_exchange_weak(seen, now)) {
  }
  samples_.fetch_add(1);
  return now;
}

}  // namespace ldpgraph::ldpctl
