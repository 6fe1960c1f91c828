// Copyright 2026 The pagedkv Authors.
#include "cache/tiers/disk/read_helpers.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace pagedkv {
namespace {

// Every job of every batch runs exactly once, and has returned when Run returns.
TEST(ReadHelpersTest, RunsEveryJobOnceAndJoins) {
  for (int32_t helpers : {0, 1, 3}) {
    std::unique_ptr<ReadHelpers> pool = ReadHelpers::Create(helpers).value();
    EXPECT_EQ(pool->num_helpers(), helpers);
    for (size_t n = 0; n <= 9; ++n) {
      std::vector<std::atomic<int>> runs(n);
      pool->Run(n, [&](size_t i) {
        std::this_thread::sleep_for(std::chrono::microseconds(200 * (i % 3)));
        runs[i].fetch_add(1);
      });
      for (size_t i = 0; i < n; ++i)
        EXPECT_EQ(runs[i].load(), 1) << helpers << " " << n << " " << i;
    }
  }
}

// With a helper and jobs that wait for each other, both run at once (the batch would never end
// otherwise); after the helper sleeps (past its spin, or told to Rest), the next Run wakes it.
TEST(ReadHelpersTest, HelpersRunJobsAtOnceAndWakeAfterSleeping) {
  std::unique_ptr<ReadHelpers> pool = ReadHelpers::Create(1).value();
  for (int round = 0; round < 4; ++round) {
    std::atomic<int> arrived{0};
    std::vector<std::thread::id> ids(2);
    pool->Run(2, [&](size_t i) {
      ids[i] = std::this_thread::get_id();
      arrived.fetch_add(1);
      while (arrived.load() < 2) std::this_thread::yield();
    });
    EXPECT_NE(ids[0], ids[1]);
    if (round % 2 == 0) pool->Rest();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the helper goes to sleep
  }
}

TEST(ReadHelpersTest, ANegativeCountIsRefused) {
  EXPECT_EQ(ReadHelpers::Create(-1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagedkv
