// Copyright 2026 The pagedkv Authors.
//
// Linear over packed weights (kernels/cpu/packed_linear.h): matches a float64 reference for shapes
// around the panel width and the row tile, on every SIMD target this CPU runs (AVX-512, AVX2,
// SSE4, the scalar baseline; each with its own panel width); every row of a batched product equals
// the one-row product bit for bit, for any thread count; bad input is rejected with y untouched;
// the cache packs only weights inside a declared constant range, once.
#include "kernels/cpu/packed_linear.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "hwy/targets.h"
#include "kernels/cpu/int8_linear.h"
#include "kernels/cpu/simd/simd_kernels.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/quant_test_rows.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::RandomFloats;

cpu::PackedWeights MustPack(const std::vector<float>& w, int64_t n, int64_t k) {
  auto packed = cpu::PackedWeights::Pack(w.data(), n, k);
  EXPECT_TRUE(packed.ok()) << packed.status();
  return std::move(packed).value();
}

// The float64 check of y = x W^T (+ y0) for the shapes around the current target's panel width.
void CheckAgainstFloat64() {
  const int64_t width = cpu::simd::PackedPanelWidth();
  for (int64_t n : {int64_t{1}, width - 1, width, width + 3, 3 * width + 5}) {
    for (int64_t k : {1, 7, 64, 173}) {
      for (int64_t m : {1, 2, 3, 4, 5, 9}) {
        for (bool accumulate : {false, true}) {
          const auto seed = static_cast<uint32_t>(n * 7919 + k * 31 + m);
          const auto x = RandomFloats(static_cast<size_t>(m * k), seed);
          const auto w = RandomFloats(static_cast<size_t>(n * k), seed + 1);
          std::vector<float> y = RandomFloats(static_cast<size_t>(m * n), seed + 2);
          const std::vector<float> y0 = y;
          const cpu::PackedWeights packed = MustPack(w, n, k);
          ASSERT_TRUE(cpu::PackedLinear({.x = x.data(),
                                         .w = w.data(),
                                         .y = y.data(),
                                         .m = m,
                                         .n = n,
                                         .k = k,
                                         .accumulate = accumulate},
                                        packed, nullptr)
                          .ok());
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double ref = accumulate ? y0[static_cast<size_t>(i * n + j)] : 0.0;
              double mag = std::fabs(ref);
              for (int64_t t = 0; t < k; ++t) {
                const double p = double{x[static_cast<size_t>(i * k + t)]} *
                                 double{w[static_cast<size_t>(j * k + t)]};
                ref += p;
                mag += std::fabs(p);
              }
              ASSERT_NEAR(y[static_cast<size_t>(i * n + j)], ref,
                          static_cast<double>(k + 1) * 6e-8 * mag + 1e-30)
                  << "n " << n << " k " << k << " m " << m << " row " << i << " col " << j;
            }
          }
        }
      }
    }
  }
}

TEST(PackedLinearTest, MatchesFloat64ReferenceAroundPanelAndTileEdges) { CheckAgainstFloat64(); }

TEST(PackedLinearTest, MatchesFloat64ReferenceOnEverySimdTarget) {
  for (int64_t target : {HWY_AVX3, HWY_AVX2, HWY_SSE4, HWY_SCALAR}) {
    if ((hwy::SupportedTargets() & target) == 0 && target != HWY_SCALAR) continue;
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    EXPECT_STREQ(cpu::simd::TargetName(), hwy::TargetName(target));
    CheckAgainstFloat64();
  }
  hwy::SetSupportedTargetsForTest(0);  // back to what the CPU supports
}

TEST(PackedLinearTest, EveryRowEqualsItsOneRowProductForAnyThreadCount) {
  const int64_t m = 37, n = 2 * cpu::simd::PackedPanelWidth() + 9, k = 96;
  const auto x = RandomFloats(static_cast<size_t>(m * k), 11);
  const auto w = RandomFloats(static_cast<size_t>(n * k), 12);
  const cpu::PackedWeights packed = MustPack(w, n, k);
  std::vector<float> alone(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    ASSERT_TRUE(cpu::PackedLinear({.x = x.data() + i * k,
                                   .w = w.data(),
                                   .y = alone.data() + i * n,
                                   .m = 1,
                                   .n = n,
                                   .k = k},
                                  packed, nullptr)
                    .ok());
  }
  for (int32_t threads : {1, 2, 3}) {
    auto pool = cpu::ThreadPool::Create(threads);
    ASSERT_TRUE(pool.ok());
    std::vector<float> batched(static_cast<size_t>(m * n));
    ASSERT_TRUE(cpu::PackedLinear(
                    {.x = x.data(), .w = w.data(), .y = batched.data(), .m = m, .n = n, .k = k},
                    packed, pool->get())
                    .ok());
    EXPECT_EQ(std::memcmp(batched.data(), alone.data(), batched.size() * sizeof(float)), 0)
        << threads << " threads";
  }
}

TEST(PackedLinearTest, RejectsBadInputLeavingYUntouched) {
  const int64_t n = 10, k = 8;
  const auto x = RandomFloats(static_cast<size_t>(k), 1);
  const auto w = RandomFloats(static_cast<size_t>(n * k), 2);
  const auto other = RandomFloats(static_cast<size_t>(n * k), 3);
  const cpu::PackedWeights packed = MustPack(w, n, k);
  std::vector<float> y(static_cast<size_t>(n), 5.0f);
  const LinearArgs good{.x = x.data(), .w = w.data(), .y = y.data(), .m = 1, .n = n, .k = k};
  LinearArgs wrong_w = good;
  wrong_w.w = other.data();
  LinearArgs wrong_n = good;
  wrong_n.n = n - 1;
  LinearArgs null_x = good;
  null_x.x = nullptr;
  for (const LinearArgs& bad : {wrong_w, wrong_n, null_x}) {
    const absl::Status status = cpu::PackedLinear(bad, packed, nullptr);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    for (float v : y) ASSERT_EQ(v, 5.0f);
  }
  EXPECT_NE(cpu::PackedLinear(wrong_w, packed, nullptr).message().find("pack args.w"),
            std::string::npos);
  EXPECT_EQ(cpu::PackedWeights::Pack(nullptr, n, k).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cpu::PackedWeights::Pack(w.data(), 0, k).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cpu::PackedWeights::Pack(w.data(), INT64_MAX / 2, INT64_MAX / 2).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PackedWeightCacheTest, PacksOnlyInsideDeclaredRangesAndOnce) {
  const int64_t n = 6, k = 5;
  const auto storage = RandomFloats(static_cast<size_t>(3 * n * k), 4);
  cpu::PackedWeightCache cache;
  auto miss = cache.Find(storage.data(), n, k);
  ASSERT_TRUE(miss.ok());
  EXPECT_EQ(*miss, nullptr);
  // Declare the first two matrices only.
  ASSERT_TRUE(cache.DeclareConstant(storage.data(), 2 * n * k * sizeof(float)).ok());
  auto first = cache.Find(storage.data(), n, k);
  ASSERT_TRUE(first.ok());
  ASSERT_NE(*first, nullptr);
  EXPECT_EQ((*first)->source(), storage.data());
  auto again = cache.Find(storage.data(), n, k);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);
  auto second = cache.Find(storage.data() + n * k, n, k);
  ASSERT_TRUE(second.ok());
  EXPECT_NE(*second, nullptr);
  // Straddles the end of the declared range, or lies past it: not packed.
  auto straddle = cache.Find(storage.data() + n * k + 1, n, k);
  ASSERT_TRUE(straddle.ok());
  EXPECT_EQ(*straddle, nullptr);
  auto past = cache.Find(storage.data() + 2 * n * k, n, k);
  ASSERT_TRUE(past.ok());
  EXPECT_EQ(*past, nullptr);
  EXPECT_EQ(cache.num_packed(), 2);
  // The third matrix declared in two overlapping pieces: found as one range.
  ASSERT_TRUE(
      cache.DeclareConstant(storage.data() + 2 * n * k + 3, (n * k - 3) * sizeof(float)).ok());
  ASSERT_TRUE(cache.DeclareConstant(storage.data() + 2 * n * k, 5 * sizeof(float)).ok());
  auto third = cache.Find(storage.data() + 2 * n * k, n, k);
  ASSERT_TRUE(third.ok());
  EXPECT_NE(*third, nullptr);
  // And the first two with it: one merged range, so a matrix straddling the old ends is found.
  auto straddle_now = cache.Find(storage.data() + n * k + 1, n, k);
  ASSERT_TRUE(straddle_now.ok());
  EXPECT_NE(*straddle_now, nullptr);
  EXPECT_EQ(cache.num_packed(), 4);
  EXPECT_EQ(cache.DeclareConstant(nullptr, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(cache.DeclareConstant(storage.data(), 0).ok());
}

// Int8Tiles of block-format weights: built once, only inside declared ranges, only where the
// VNNI kernel would read them (Int8TilesUsable: this CPU, the type, n a multiple of 16).
TEST(PackedWeightCacheTest, BuildsInt8TilesOnlyWhereDeclaredAndUsable) {
  constexpr int64_t n = 32, k = 64;
  const auto w = testing::RandomRows(WeightType::kQ4_1, n, k, 5);
  cpu::PackedWeightCache cache;
  auto miss = cache.FindInt8Tiles(w.data(), WeightType::kQ4_1, n, k);
  ASSERT_TRUE(miss.ok());
  EXPECT_EQ(*miss, nullptr);
  ASSERT_TRUE(cache.DeclareConstant(w.data(), w.size()).ok());
  auto found = cache.FindInt8Tiles(w.data(), WeightType::kQ4_1, n, k);
  ASSERT_TRUE(found.ok());
  if (!cpu::Int8TilesUsable(WeightType::kQ4_1, n, k)) {
    std::printf("[   NOTE   ] no AVX-512 VNNI here: tiles are never built\n");
    EXPECT_EQ(*found, nullptr);
    return;
  }
  ASSERT_NE(*found, nullptr);
  EXPECT_EQ((*found)->source(), w.data());
  auto again = cache.FindInt8Tiles(w.data(), WeightType::kQ4_1, n, k);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *found);
  // n not a multiple of 16, or more rows than were declared: no tiles.
  auto ragged = cache.FindInt8Tiles(w.data(), WeightType::kQ4_1, 24, k);
  ASSERT_TRUE(ragged.ok());
  EXPECT_EQ(*ragged, nullptr);
  auto past = cache.FindInt8Tiles(w.data(), WeightType::kQ4_1, 2 * n, k);
  ASSERT_TRUE(past.ok());
  EXPECT_EQ(*past, nullptr);
  EXPECT_EQ(cache.num_int8_tiles(), 1);
  ASSERT_TRUE(cpu::ForceInt8Kernel("avx2").ok());  // the kernel that would run reads no tiles
  auto other_kernel = cache.FindInt8Tiles(w.data(), WeightType::kQ4_0, n, k / 2);
  ASSERT_TRUE(cpu::ForceInt8Kernel("auto").ok());
  ASSERT_TRUE(other_kernel.ok());
  EXPECT_EQ(*other_kernel, nullptr);
}

}  // namespace
}  // namespace pagedkv
