#include "server/ldpctl/memory_sampler.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "gtest/gtest.h"

namespace ldpgraph::ldpctl {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr size_t kChildBytes = 192 * kMiB;

// Forks a child that maps and touches kChildBytes, then writes one byte to
// `ready` and waits until the write end of `release` is closed. Returns its
// pid.
pid_t HoldingChild(int ready, const int release[2]) {
  const pid_t pid = fork();
  if (pid == 0) {
    close(release[1]);
    void* p = mmap(nullptr, kChildBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) _exit(1);
    std::memset(p, 1, kChildBytes);
    char c = 1;
    if (write(ready, &c, 1) != 1) _exit(1);
    while (read(release[0], &c, 1) > 0) {
    }
    _exit(0);
  }
  return pid;
}

TEST(MemorySamplerTest, CountsDescendantsWhileTheyLiveAndKeepsThePeak) {
  MemorySampler sampler(std::chrono::milliseconds(20));
  const uint64_t alone = TreeResidentBytes(getpid());
  ASSERT_GT(alone, 0u);
  int ready[2], release[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(release), 0);
  const pid_t child = HoldingChild(ready[1], release);
  ASSERT_GT(child, 0);
  close(release[0]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  const uint64_t with_child = TreeResidentBytes(getpid());
  EXPECT_GE(with_child, alone + kChildBytes * 9 / 10);
  // The sampler's thread sees it at its next sample that began after the
  // child was ready: wait for two more completed samples (one under way
  // when the child became ready may have read the child half-touched),
  // not for the peak to pass some share of the child, which a sample
  // taken while the child was still touching its pages can pass.
  const uint64_t seen = sampler.Samples();
  for (int i = 0; i < 500 && sampler.Samples() < seen + 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(sampler.Samples(), seen + 2) << "the sampler stopped sampling";
  EXPECT_GE(sampler.PeakBytes(), alone + kChildBytes * 9 / 10);
  close(release[1]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // Gone from the sum now; the peak stays.
  EXPECT_LT(TreeResidentBytes(getpid()), alone + kChildBytes / 2);
  EXPECT_GE(sampler.PeakBytes(), alone + kChildBytes * 9 / 10);
  close(ready[0]);
  close(ready[1]);
}

TEST(MemorySamplerTest, AGoneProcessHoldsNothing) {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_EQ(TreeResidentBytes(pid), 0u);
}

}  // namespace
}  // namespace ldpgraph::ldpctl
