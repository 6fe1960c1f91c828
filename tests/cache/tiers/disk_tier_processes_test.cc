// Copyright 2026 The pagedkv Authors.
//
// Two processes on one folder: a child process stores and evicts (a small budget, far more blocks
// than it holds) while this process reads the same blocks; every read must be a whole, right
// value or a miss. Then this process adopts the child's files.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "pagedkv/tiers/disk_tier.h"
#include "tests/cache/tiers/disk_tier_test_util.h"

namespace pagedkv::testing_disk {
namespace {

constexpr int kBlocks = 64;
constexpr int kRounds = 200;

// The child: store every block again and again through a budget of 8 (each round evicts).
[[noreturn]] void WriterProcess(const std::string& dir, int ready_fd) {
  absl::StatusOr<std::unique_ptr<DiskTier>> tier = DiskTier::Create(Options(dir, 8));
  if (!tier.ok()) ::_exit(2);
  const char go = 'g';
  if (::write(ready_fd, &go, 1) != 1) ::_exit(3);
  for (int round = 0; round < kRounds; ++round) {
    for (uint64_t id = 0; id < kBlocks; ++id) {
      if (!StoreBlocks(**tier, {MakeBlock(id)}).ok()) ::_exit(4);
    }
    (*tier)->Flush();
  }
  tier->reset();
  ::_exit(0);
}

TEST(DiskTierProcessesTest, OneWritesAndEvictsWhileTheOtherReads) {
  TempDir dir;
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();  // before this process starts any thread
  ASSERT_GE(child, 0);
  if (child == 0) WriterProcess(dir.path(), pipe_fds[1]);
  char go = 0;
  ASSERT_EQ(::read(pipe_fds[0], &go, 1), 1);
  std::unique_ptr<DiskTier> reader = DiskTier::Create(Options(dir.path(), 1000)).value();
  int64_t hits = 0, reads = 0;
  int status = 0;
  while (::waitpid(child, &status, WNOHANG) == 0) {
    for (uint64_t id = 0; id < kBlocks; ++id) {
      hits += Load(*reader, {MakeBlock(id)});  // Load fails the test on a wrong value
      ++reads;
    }
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writer status " << status;
  EXPECT_GT(reads, 0);
  EXPECT_EQ(reader->disk_stats().corrupt_values, 0);
  EXPECT_EQ(reader->disk_stats().read_errors, 0);
  // The writer's last 8 blocks stay: this process reads and adopts them.
  int64_t left = 0;
  for (uint64_t id = 0; id < kBlocks; ++id) left += Load(*reader, {MakeBlock(id)});
  EXPECT_EQ(left, 8);
  EXPECT_GE(reader->disk_stats().adopted, 8);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  RecordProperty("hits_while_writing", static_cast<int>(hits));
}

}  // namespace
}  // namespace pagedkv::testing_disk
