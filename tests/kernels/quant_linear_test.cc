// Copyright 2026 The pagedkv Authors.
//
// Linear over weights in their file's format (kernels/cpu/quant_linear.h): for rows of random
// blocks of every type (Q4_0, Q4_1, Q8_0, Q4_K, Q6_K, F16, BF16), y matches a float64 reference
// (each weight decoded from the block's bytes by the published formula, products summed in float64)
// on every SIMD target this CPU runs, with and without accumulate; every row of a batch equals its
// one-row product bit for bit for any thread count below kQuantPanelMinRows rows, and from there on
// equals PackedLinear over the weights converted to fp32 (as the GGUF loader converts them) bit for
// bit; bad input is rejected with y untouched.
#include "kernels/cpu/quant_linear.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "hwy/targets.h"
#include "kernels/cpu/packed_linear.h"
#include "kernels/cpu/simd/simd_kernels.h"
#include "kernels/cpu/thread_pool.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/kernels/quant_blocks.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/quant_test_rows.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::RandomFloats;

using ::pagedkv::testing::RandomRows;
using ::pagedkv::testing::RefWeight;

std::string TypeName(const ::testing::TestParamInfo<WeightType>& info) {
  static constexpr const char* kNames[] = {"F32", "Q4_1", "Q8_0", "Q4_0",
                                           "F16", "BF16", "Q4_K", "Q6_K"};
  return kNames[static_cast<int>(info.param)];
}

// Widths k to try for `type`: multiples of its block size (any for the half types).
std::vector<int64_t> WidthsOf(WeightType type) {
  switch (QuantBlockValuesOf(type)) {
    case 1:
      return {7, 32, 50, 576};
    case kQuantBlockValues:
      return {32, 64, 576};
    default:
      return {256, 512};
  }
}

void CheckAgainstFloat64(WeightType type) {
  for (int64_t n : {1, 3, 4, 5, 13, 70}) {
    for (int64_t k : WidthsOf(type)) {
      for (int64_t m : {1, 2, 3, 5, 16, 21}) {  // from 16 rows: the panel path
        for (bool accumulate : {false, true}) {
          const auto seed = static_cast<uint32_t>(n * 7919 + k * 31 + m);
          const auto x = RandomFloats(static_cast<size_t>(m * k), seed);
          const auto w = RandomRows(type, n, k, seed + 1);
          std::vector<float> y = RandomFloats(static_cast<size_t>(m * n), seed + 2);
          const std::vector<float> y0 = y;
          ASSERT_TRUE(cpu::QuantLinear({.x = x.data(),
                                        .w = w.data(),
                                        .w_type = type,
                                        .y = y.data(),
                                        .m = m,
                                        .n = n,
                                        .k = k,
                                        .accumulate = accumulate},
                                       nullptr)
                          .ok());
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double ref = accumulate ? y0[static_cast<size_t>(i * n + j)] : 0.0;
              double mag = std::fabs(ref);
              for (int64_t t = 0; t < k; ++t) {
                const double p =
                    double{x[static_cast<size_t>(i * k + t)]} * RefWeight(type, w, k, j, t);
                ref += p;
                mag += std::fabs(p);
              }
              // fp32 sums of k products (plus Q4_1's per-block offset sums): k + 2 roundings.
              ASSERT_NEAR(y[static_cast<size_t>(i * n + j)], ref,
                          static_cast<double>(k + 2) * 6e-8 * mag + 1e-30)
                  << "n " << n << " k " << k << " m " << m << " row " << i << " col " << j;
            }
          }
        }
      }
    }
  }
}

class QuantLinearTest : public ::testing::TestWithParam<WeightType> {};

TEST_P(QuantLinearTest, MatchesFloat64ReferenceOnEverySimdTarget) {
  for (int64_t target : {HWY_AVX3, HWY_AVX2, HWY_SSE4, HWY_SCALAR}) {
    if ((hwy::SupportedTargets() & target) == 0 && target != HWY_SCALAR) continue;
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    EXPECT_STREQ(cpu::simd::TargetName(), hwy::TargetName(target));
    CheckAgainstFloat64(GetParam());
  }
  hwy::SetSupportedTargetsForTest(0);  // back to what the CPU supports
}

TEST_P(QuantLinearTest, EveryRowEqualsItsOneRowProductForAnyThreadCount) {
  const WeightType type = GetParam();
  const int64_t m = 9, n = 203, k = QuantBlockValuesOf(type) == 1 ? 130 : 256;
  const auto x = RandomFloats(static_cast<size_t>(m * k), 11);
  const auto w = RandomRows(type, n, k, 12);
  std::vector<float> alone(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    ASSERT_TRUE(cpu::QuantLinear({.x = x.data() + i * k,
                                  .w = w.data(),
                                  .w_type = type,
                                  .y = alone.data() + i * n,
                                  .m = 1,
                                  .n = n,
                                  .k = k},
                                 nullptr)
                    .ok());
  }
  for (int32_t threads : {1, 2, 3}) {
    auto pool = cpu::ThreadPool::Create(threads);
    ASSERT_TRUE(pool.ok());
    std::vector<float> batched(static_cast<size_t>(m * n));
    ASSERT_TRUE(cpu::QuantLinear({.x = x.data(),
                                  .w = w.data(),
                                  .w_type = type,
                                  .y = batched.data(),
                                  .m = m,
                                  .n = n,
                                  .k = k},
                                 pool->get())
                    .ok());
    EXPECT_EQ(std::memcmp(batched.data(), alone.data(), batched.size() * sizeof(float)), 0)
        << threads << " threads";
  }
}

// From kQuantPanelMinRows rows of x, QuantLinear is PackedLinear over W converted to fp32 by
// q * d (+ m), bit for bit, for every thread count, with and without accumulate, on every SIMD
// target this CPU runs (the panel width differs between targets).
TEST_P(QuantLinearTest, ManyRowsEqualPackedLinearOverTheConvertedWeights) {
  const WeightType type = GetParam();
  // Several decode chunks of every kind (64 half values, 256-value super-blocks) and a tail.
  const int64_t values = QuantBlockValuesOf(type);
  const int64_t n = 203, k = values == 1 ? 163 : values == kQuantBlockValues ? 96 : 512;
  for (int64_t target : {HWY_AVX3, HWY_AVX2, HWY_SSE4, HWY_SCALAR}) {
    if ((hwy::SupportedTargets() & target) == 0 && target != HWY_SCALAR) continue;
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    const auto w = RandomRows(type, n, k, 21);
    std::vector<float> w32(static_cast<size_t>(n * k));
    for (int64_t j = 0; j < n; ++j) {
      const unsigned char* row = w.data() + j * WeightRowBytes(type, k);
      for (int64_t t = 0; t < k; ++t)
        w32[static_cast<size_t>(j * k + t)] = QuantValue(type, row, t);
    }
    auto packed = cpu::PackedWeights::Pack(w32.data(), n, k);
    ASSERT_TRUE(packed.ok()) << packed.status();
    for (int64_t m : {cpu::kQuantPanelMinRows, int64_t{17}, int64_t{35}}) {
      for (bool accumulate : {false, true}) {
        const auto x = RandomFloats(static_cast<size_t>(m * k), static_cast<uint32_t>(m));
        const auto y0 = RandomFloats(static_cast<size_t>(m * n), static_cast<uint32_t>(m + 1));
        std::vector<float> want = y0;
        ASSERT_TRUE(cpu::PackedLinear({.x = x.data(),
                                       .w = w32.data(),
                                       .y = want.data(),
                                       .m = m,
                                       .n = n,
                                       .k = k,
                                       .accumulate = accumulate},
                                      *packed, nullptr)
                        .ok());
        for (int32_t threads : {1, 2, 3}) {
          auto pool = cpu::ThreadPool::Create(threads);
          ASSERT_TRUE(pool.ok());
          std::vector<float> got = y0;
          ASSERT_TRUE(cpu::QuantLinear({.x = x.data(),
                                        .w = w.data(),
                                        .w_type = type,
                                        .y = got.data(),
                                        .m = m,
                                        .n = n,
                                        .k = k,
                                        .accumulate = accumulate},
                                       pool->get())
                          .ok());
          EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
              << "m " << m << ", " << threads << " threads, accumulate " << accumulate;
        }
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// The embedding gather decodes each token's row exactly (every value representable in fp32).
TEST_P(QuantLinearTest, EmbeddingGatherDecodesTheTokensRows) {
  const WeightType type = GetParam();
  const int64_t vocab = 5, dim = WidthsOf(type).back();
  const auto table = RandomRows(type, vocab, dim, 31);
  const std::vector<int32_t> ids = {4, 0, 2, 4};
  std::vector<float> out(ids.size() * static_cast<size_t>(dim));
  ASSERT_TRUE(cpu::QuantEmbeddingGather({.table = table.data(),
                                         .table_type = type,
                                         .token_ids = ids.data(),
                                         .out = out.data(),
                                         .num_tokens = static_cast<int64_t>(ids.size()),
                                         .vocab_size = vocab,
                                         .dim = dim})
                  .ok());
  for (size_t t = 0; t < ids.size(); ++t) {
    for (int64_t i = 0; i < dim; ++i) {
      ASSERT_NEAR(out[t * static_cast<size_t>(dim) + static_cast<size_t>(i)],
                  RefWeight(type, table, dim, ids[t], i),
                  1e-6 * (1.0 + std::fabs(RefWeight(type, table, dim, ids[t], i))))
          << "token " << t << " value " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, QuantLinearTest,
                         ::testing::Values(WeightType::kQ4_0, WeightType::kQ4_1, WeightType::kQ8_0,
                                           WeightType::kF16, WeightType::kBF16, WeightType::kQ4_K,
                                           WeightType::kQ6_K),
                         TypeName);

TEST(QuantLinearBadInputTest, RejectsBadInputLeavingYUntouched) {
  const int64_t n = 4, k = 64;
  const auto x = RandomFloats(static_cast<size_t>(k), 1);
  const auto w = RandomRows(WeightType::kQ4_1, n, k, 2);
  std::vector<float> y(static_cast<size_t>(n), 5.0f);
  const QuantLinearArgs good{.x = x.data(), .w = w.data(), .y = y.data(), .m = 1, .n = n, .k = k};
  QuantLinearArgs odd_k = good;
  odd_k.k = 48;
  QuantLinearArgs f32 = good;
  f32.w_type = WeightType::kF32;
  QuantLinearArgs null_x = good;
  null_x.x = nullptr;
  QuantLinearArgs unknown = good;
  unknown.w_type = static_cast<WeightType>(kWeightTypeCount);
  QuantLinearArgs k_of_q4_k = good;  // 64 values: not a whole 256-value super-block
  k_of_q4_k.w_type = WeightType::kQ4_K;
  QuantLinearArgs k_of_q6_k = good;
  k_of_q6_k.w_type = WeightType::kQ6_K;
  for (const QuantLinearArgs& bad : {odd_k, f32, null_x, unknown, k_of_q4_k, k_of_q6_k}) {
    const absl::Status status = cpu::QuantLinear(bad, nullptr);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    for (float v : y) ASSERT_EQ(v, 5.0f);
  }
  EXPECT_NE(cpu::QuantLinear(odd_k, nullptr).message().find("multiple of"), std::string::npos);
}

}  // namespace
}  // namespace pagedkv
