// Copyright 2026 The pagedkv Authors.
//
// Backend::RunParts on the CPU backend: every part runs once, at once on the pool's threads, with
// its ops on the thread that runs it (an op big enough to split would otherwise re-enter the
// pool); the lowest-numbered failure is returned; a nested call and the one-thread backend run
// parts in order on the calling thread.
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/runner/backend.h"
#include "gtest/gtest.h"
#include "tests/kernels/kernel_test_util.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::RandomFloats;

// Rows per part and the Linear's shape: 16 * 256 * 64 multiply-adds, enough to be split over the
// pool when called outside a part.
constexpr int64_t kRows = 16, kN = 256, kK = 64;
constexpr int32_t kParts = 6;

TEST(CpuBackendPartsTest, EveryPartRunsOnceWithItsOpsOnItsOwnThread) {
  auto backend = CreateCpuBackend({.num_threads = 2});
  ASSERT_TRUE(backend.ok()) << backend.status();
  Backend& b = **backend;
  EXPECT_EQ(b.max_concurrent_parts(), 2);
  const std::vector<float> x = RandomFloats(kParts * kRows * kK, 1);
  const std::vector<float> w = RandomFloats(kN * kK, 2);
  ASSERT_TRUE(b.DeclareConstant(w.data(), w.size() * sizeof(float)).ok());
  std::vector<float> whole(kParts * kRows * kN), split(whole.size());
  ASSERT_TRUE(
      b.Linear(
           {.x = x.data(), .w = w.data(), .y = whole.data(), .m = kParts * kRows, .n = kN, .k = kK})
          .ok());
  std::mutex mu;
  std::vector<int> runs(kParts, 0);
  // A part's Linear that re-entered the pool from inside a part would hang here.
  const absl::Status status = b.RunParts(kParts, [&](int32_t p) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ++runs[static_cast<size_t>(p)];
    }
    return b.Linear({.x = x.data() + p * kRows * kK,
                     .w = w.data(),
                     .y = split.data() + p * kRows * kN,
                     .m = kRows,
                     .n = kN,
                     .k = kK});
  });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(runs, std::vector<int>(kParts, 1));
  EXPECT_EQ(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)), 0);
}

TEST(CpuBackendPartsTest, TheLowestFailingPartsErrorIsReturnedAfterEveryPartRan) {
  for (int32_t threads : {1, 2}) {
    auto backend = CreateCpuBackend({.num_threads = threads});
    ASSERT_TRUE(backend.ok()) << backend.status();
    std::mutex mu;
    int ran = 0;
    const absl::Status status = (*backend)->RunParts(5, [&](int32_t p) {
      {
        std::lock_guard<std::mutex> lock(mu);
        ++ran;
      }
      if (p == 1 || p == 3) return absl::InternalError("part " + std::to_string(p));
      return absl::OkStatus();
    });
    EXPECT_EQ(ran, 5) << threads << " threads";
    EXPECT_EQ(status, absl::InternalError("part 1")) << threads << " threads";
  }
}

TEST(CpuBackendPartsTest, NestedPartsAndTheOneThreadBackendRunInOrderOnTheCaller) {
  auto single = CreateCpuBackend({.num_threads = 1});
  ASSERT_TRUE(single.ok());
  EXPECT_EQ((*single)->max_concurrent_parts(), 1);
  auto pooled = CreateCpuBackend({.num_threads = 2});
  ASSERT_TRUE(pooled.ok());
  std::vector<int32_t> order;
  const auto caller = std::this_thread::get_id();
  ASSERT_TRUE((*single)
                  ->RunParts(3,
                             [&](int32_t p) {
                               EXPECT_EQ(std::this_thread::get_id(), caller);
                               order.push_back(p);
                               return absl::OkStatus();
                             })
                  .ok());
  EXPECT_EQ(order, (std::vector<int32_t>{0, 1, 2}));
  std::vector<std::vector<int32_t>> inner(2);
  ASSERT_TRUE((*pooled)
                  ->RunParts(2,
                             [&](int32_t p) {
                               const auto outer = std::this_thread::get_id();
                               return (*pooled)->RunParts(3, [&, p](int32_t q) {
                                 EXPECT_EQ(std::this_thread::get_id(), outer);
                                 inner[static_cast<size_t>(p)].push_back(q);
                                 return absl::OkStatus();
                               });
                             })
                  .ok());
  EXPECT_EQ(inner[0], (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(inner[1], (std::vector<int32_t>{0, 1, 2}));
}

}  // namespace
}  // namespace pagedkv
