// Copyright 2026 The pagedkv Authors.
//
// Int8 activations over Q4_K / Q6_K weights (the super-block chain of
// pagedkv/kernels/int8_activations.h): the VNNI and AVX2 kernels on Int8Tiles and the portable one
// give the chain's bits, block by block; the tiles hold the decoded blocks where int8_tiles.h says;
// y stays within the activations' rounding of a float64 reference; rows do not depend on the batch;
// and where no kernel multiplies the type (no tiles) QuantLinear keeps fp32 activations' bits.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kernels/cpu/int8_linear.h"
#include "kernels/cpu/int8_tiles.h"
#include "kernels/cpu/quant_linear.h"
#include "kernels/cpu/thread_pool.h"
#include "pagedkv/kernels/int8_activations.h"
#include "pagedkv/kernels/quant_blocks.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/quant_test_rows.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::RandomFloats;
using ::pagedkv::testing::RandomRows;
using ::pagedkv::testing::RefWeight;

constexpr WeightType kSuperTypes[] = {WeightType::kQ4_K, WeightType::kQ6_K};

class Int8SuperLinearTest : public ::testing::Test {
 protected:
  void TearDown() override { ASSERT_TRUE(cpu::ForceInt8Kernel("auto").ok()); }
};

QuantLinearArgs Args(const std::vector<float>& x, const std::vector<unsigned char>& w,
                     WeightType type, std::vector<float>* y, int64_t m, int64_t n, int64_t k) {
  return {.x = x.data(),
          .w = w.data(),
          .w_type = type,
          .y = y->data(),
          .m = m,
          .n = n,
          .k = k,
          .activations = ActivationType::kInt8};
}

// The chain for y[i][j] from the header's functions, 32-value block by block.
float Chain(WeightType type, const std::vector<float>& x, const std::vector<unsigned char>& w,
            int64_t k, int64_t i, int64_t j) {
  const unsigned char* row = QuantRow(w.data(), type, k, j);
  float acc = 0.0f;
  for (int64_t b = 0; b < k / kQuantBlockValues; ++b) {
    int8_t q[kQuantBlockValues];
    float dx = 0;
    int32_t qsum = 0;
    QuantizeActivationBlock(x.data() + i * k + b * kQuantBlockValues, q, &dx, &qsum);
    acc = Int8RowBlockAccumulate(type, row, b, dx, dx * static_cast<float>(qsum),
                                 Int8RowBlockDot(type, row, b, q), acc);
  }
  return acc;
}

// The kernels that multiply Q4_K / Q6_K here: the portable one, the AVX2 and VNNI ones from tiles.
std::vector<std::string> SuperKernels() {
  std::vector<std::string> names = {"portable"};
  if (cpu::int8_kernels::Avx2Supported()) names.push_back("avx2");
  if (cpu::int8_kernels::VnniSupported()) names.push_back("avx512vnni");
  if (names.size() < 3) {
    std::printf("[   NOTE   ] this CPU runs %zu of 3 super-block int8 kernels\n", names.size());
  }
  return names;
}

TEST_F(Int8SuperLinearTest, EveryKernelGivesTheChainsBits) {
  auto pool = cpu::ThreadPool::Create(3);
  ASSERT_TRUE(pool.ok());
  for (WeightType type : kSuperTypes) {
    for (auto [n, k] : {std::pair<int64_t, int64_t>{16, 256}, {48, 512}, {160, 256}}) {
      const auto w = RandomRows(type, n, k, 5 + static_cast<uint32_t>(n));
      absl::StatusOr<cpu::Int8Tiles> tiles = cpu::Int8Tiles::Build(w.data(), type, n, k);
      ASSERT_TRUE(tiles.ok()) << tiles.status();
      for (int64_t m : {1, 2, 3, 5, 8, 9, 17}) {
        const auto x = RandomFloats(static_cast<size_t>(m * k), 6 + static_cast<uint32_t>(m));
        for (const std::string& kernel : SuperKernels()) {
          ASSERT_TRUE(cpu::ForceInt8Kernel(kernel.c_str()).ok());
          for (bool accumulate : {false, true}) {
            std::vector<float> y(static_cast<size_t>(m * n), 0.5f);
            QuantLinearArgs a = Args(x, w, type, &y, m, n, k);
            a.accumulate = accumulate;
            ASSERT_TRUE(cpu::QuantLinear(a, pool->get(), &*tiles).ok());
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < n; ++j) {
                const float chain = Chain(type, x, w, k, i, j);
                ASSERT_EQ(y[i * n + j], accumulate ? 0.5f + chain : chain)
                    << kernel << " type " << static_cast<int>(type) << " m " << m << " n " << n
                    << " at " << i << "," << j;
              }
            }
          }
        }
      }
    }
  }
}

// Q6_K scales of -128 and weights of -32 (the extremes): the int32 and fp32 sums stay exact.
TEST_F(Int8SuperLinearTest, Q6KExtremesAreExact) {
  constexpr int64_t n = 16, k = 256;
  auto w = RandomRows(WeightType::kQ6_K, n, k, 8);
  for (int64_t j = 0; j < n; ++j) {
    unsigned char* sb = w.data() + j * 210;
    for (int i = 0; i < 192; ++i) sb[i] = 0;       // every q = 0 - 32
    for (int i = 192; i < 208; ++i) sb[i] = 0x80;  // every scale -128
  }
  std::vector<float> x(k, -1.0f);  // qx = -127 everywhere: the largest |isum|
  absl::StatusOr<cpu::Int8Tiles> tiles = cpu::Int8Tiles::Build(w.data(), WeightType::kQ6_K, n, k);
  ASSERT_TRUE(tiles.ok()) << tiles.status();
  for (const std::string& kernel : SuperKernels()) {
    ASSERT_TRUE(cpu::ForceInt8Kernel(kernel.c_str()).ok());
    std::vector<float> y(n);
    ASSERT_TRUE(
        cpu::QuantLinear(Args(x, w, WeightType::kQ6_K, &y, 1, n, k), nullptr, &*tiles).ok());
    for (int64_t j = 0; j < n; ++j) {
      EXPECT_EQ(y[j], Chain(WeightType::kQ6_K, x, w, k, 0, j)) << kernel;
      EXPECT_LT(y[j], 0.0f);  // -128 * 32 * (-32) * (-127) per block, times d * dx > 0
    }
  }
}

TEST_F(Int8SuperLinearTest, TilesHoldTheDecodedBlocksWhereTheLayoutSays) {
  constexpr int64_t n = 32, k = 512;
  for (WeightType type : kSuperTypes) {
    const auto w = RandomRows(type, n, k, 9);
    absl::StatusOr<cpu::Int8Tiles> tiles = cpu::Int8Tiles::Build(w.data(), type, n, k);
    ASSERT_TRUE(tiles.ok()) << tiles.status();
    EXPECT_EQ(tiles->bytes(), n * (k / 32) * (type == WeightType::kQ4_K ? 384 : 704) / 16);
    for (int64_t j = 0; j < n; ++j) {
      const unsigned char* row = QuantRow(w.data(), type, k, j);
      for (int64_t b = 0; b < k / 32; ++b) {
        const unsigned char* sb = row + (b / 8) * QuantBlockBytes(type);
        const auto s = static_cast<int32_t>(b % 8);
        const unsigned char* tile = tiles->block(j / 16, b);
        const int64_t c = j % 16;
        auto f32_at = [&](int64_t at) {
          float v;
          std::memcpy(&v, tile + at + 4 * c, 4);
          return v;
        };
        auto i32_at = [&](int64_t at) {
          int32_t v;
          std::memcpy(&v, tile + at + 4 * c, 4);
          return v;
        };
        if (type == WeightType::kQ4_K) {
          for (int v = 0; v < 16; ++v) {
            const unsigned char byte = tile[64 * (v / 4) + 4 * c + v % 4];
            ASSERT_EQ(byte & 0x0F, Int8Q4KValue(sb, s, v)) << j << " " << b << " " << v;
            ASSERT_EQ(byte >> 4, Int8Q4KValue(sb, s, 16 + v)) << j << " " << b << " " << v;
          }
          float dw = 0, mw = 0;
          Int8Q4KScales(sb, s, &dw, &mw);
          EXPECT_EQ(f32_at(256), dw);
          EXPECT_EQ(f32_at(320), -mw);
        } else {
          for (int v = 0; v < 32; ++v) {
            ASSERT_EQ(tile[64 * (v / 4) + 4 * c + v % 4], Int8Q6KValue(sb, s, v) + 32) << j;
          }
          int32_t lo = 0, hi = 0;
          Int8Q6KScales(sb, s, &lo, &hi);
          EXPECT_EQ(i32_at(512), lo);
          EXPECT_EQ(i32_at(576), hi);
          EXPECT_EQ(f32_at(640), QuantF16At(sb + 208));
        }
      }
    }
  }
}

// The block views agree with the fp32 decode: w = dw q - mw (Q4_K), d (sc q) (Q6_K).
TEST_F(Int8SuperLinearTest, BlockViewsDecodeToTheFileValues) {
  constexpr int64_t k = 512;
  for (WeightType type : kSuperTypes) {
    const auto w = RandomRows(type, 3, k, 10);
    for (int64_t j = 0; j < 3; ++j) {
      const unsigned char* row = QuantRow(w.data(), type, k, j);
      for (int64_t kk = 0; kk < k; ++kk) {
        const unsigned char* sb = row + (kk / 256) * QuantBlockBytes(type);
        const auto s = static_cast<int32_t>(kk % 256 / 32), c = static_cast<int32_t>(kk % 32);
        double want = 0;
        if (type == WeightType::kQ4_K) {
          float dw = 0, mw = 0;
          Int8Q4KScales(sb, s, &dw, &mw);
          want = static_cast<double>(dw) * Int8Q4KValue(sb, s, c) - mw;
        } else {
          int32_t lo = 0, hi = 0;
          Int8Q6KScales(sb, s, &lo, &hi);
          want = static_cast<double>(QuantF16At(sb + 208)) *
                 ((c < 16 ? lo : hi) * Int8Q6KValue(sb, s, c));
        }
        ASSERT_NEAR(RefWeight(type, w, k, j, kk), want, 1e-6 * std::fabs(want) + 1e-12)
            << static_cast<int>(type) << " " << j << " " << kk;
      }
    }
  }
}

// |y - x W^T| <= sum_c |W[j][c]| dx(c) / 2 (the activations' rounding) + fp32 rounding.
TEST_F(Int8SuperLinearTest, StaysWithinTheActivationRoundingOfAFloat64Reference) {
  constexpr int64_t m = 4, n = 32, k = 512;
  for (WeightType type : kSuperTypes) {
    const auto w = RandomRows(type, n, k, 11);
    const auto x = RandomFloats(static_cast<size_t>(m * k), 12, -3.0f, 3.0f);
    absl::StatusOr<cpu::Int8Tiles> tiles = cpu::Int8Tiles::Build(w.data(), type, n, k);
    ASSERT_TRUE(tiles.ok()) << tiles.status();
    std::vector<float> y(static_cast<size_t>(m * n));
    ASSERT_TRUE(cpu::QuantLinear(Args(x, w, type, &y, m, n, k), nullptr, &*tiles).ok());
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double exact = 0, bound = 0, magnitude = 0;
        for (int64_t c = 0; c < k; ++c) {
          const double wv = RefWeight(type, w, k, j, c);
          const float* xb = x.data() + i * k + c / kQuantBlockValues * kQuantBlockValues;
          float amax = 0;
          for (int t = 0; t < kQuantBlockValues; ++t) amax = std::max(amax, std::fabs(xb[t]));
          exact += wv * x[i * k + c];
          bound += std::fabs(wv) * amax / 127.0 / 2;
          magnitude += std::fabs(wv * x[i * k + c]);
        }
        EXPECT_NEAR(y[i * n + j], exact, bound + 1e-5 * magnitude + 1e-6)
            << "type " << static_cast<int>(type) << " at " << i << "," << j;
      }
    }
  }
}

TEST_F(Int8SuperLinearTest, RowsDoNotDependOnTheBatchOrTheThreads) {
  constexpr int64_t n = 48, k = 256;
  auto pool = cpu::ThreadPool::Create(3);
  ASSERT_TRUE(pool.ok());
  for (WeightType type : kSuperTypes) {
    const auto w = RandomRows(type, n, k, 13);
    absl::StatusOr<cpu::Int8Tiles> tiles = cpu::Int8Tiles::Build(w.data(), type, n, k);
    ASSERT_TRUE(tiles.ok()) << tiles.status();
    const auto x = RandomFloats(static_cast<size_t>(20 * k), 14);
    std::vector<float> alone(static_cast<size_t>(n));
    for (int64_t m : {2, 9, 20}) {
      std::vector<float> batch(static_cast<size_t>(m * n));
      ASSERT_TRUE(cpu::QuantLinear(Args(x, w, type, &batch, m, n, k), pool->get(), &*tiles).ok());
      for (int64_t i = 0; i < m; ++i) {
        const std::vector<float> row(x.begin() + i * k, x.begin() + (i + 1) * k);
        ASSERT_TRUE(cpu::QuantLinear(Args(row, w, type, &alone, 1, n, k), nullptr, &*tiles).ok());
        ASSERT_EQ(0, std::memcmp(alone.data(), batch.data() + i * n, n * sizeof(float)))
            << "type " << static_cast<int>(type) << " m " << m << " row " << i;
      }
    }
  }
}

// Without tiles, Q4_K / Q6_K keep fp32 activations (but with the portable kernel forced).
TEST_F(Int8SuperLinearTest, WhereNoKernelMultipliesThemTheFp32BitsStay) {
  constexpr int64_t m = 3, n = 16, k = 256;
  std::vector<std::string> kernels = {"auto"};
  if (cpu::int8_kernels::Avx2Supported()) kernels.push_back("avx2");
  if (cpu::int8_kernels::VnniSupported()) kernels.push_back("avx512vnni");
  for (WeightType type : kSuperTypes) {
    const auto w = RandomRows(type, n, k, 15);
    const auto x = RandomFloats(static_cast<size_t>(m * k), 16);
    absl::StatusOr<cpu::Int8Tiles> tiles = cpu::Int8Tiles::Build(w.data(), type, n, k);
    ASSERT_TRUE(tiles.ok()) << tiles.status();
    std::vector<float> f32_y(m * n);
    QuantLinearArgs f32 = Args(x, w, type, &f32_y, m, n, k);
    f32.activations = ActivationType::kF32;
    ASSERT_TRUE(cpu::QuantLinear(f32, nullptr).ok());
    for (const std::string& kernel : kernels) {
      ASSERT_TRUE(cpu::ForceInt8Kernel(kernel.c_str()).ok());
      const bool tiled_runs = kernel != "auto" || cpu::int8_kernels::Avx2Supported();
      EXPECT_EQ(cpu::Int8QuantLinearRuns(type, /*tiled=*/true), tiled_runs) << kernel;
      EXPECT_FALSE(cpu::Int8QuantLinearRuns(type, /*tiled=*/false)) << kernel;
      std::vector<float> y(m * n);
      ASSERT_TRUE(cpu::QuantLinear(Args(x, w, type, &y, m, n, k), nullptr).ok());
      EXPECT_EQ(y, f32_y) << kernel << ": no tiles";
      if (!tiled_runs) {
        ASSERT_TRUE(cpu::QuantLinear(Args(x, w, type, &y, m, n, k), nullptr, &*tiles).ok());
        EXPECT_EQ(y, f32_y) << kernel << ": tiles, but no kernel for them";
      }
    }
  }
  ASSERT_TRUE(cpu::ForceInt8Kernel("portable").ok());
  EXPECT_TRUE(cpu::Int8QuantLinearRuns(WeightType::kQ4_K, /*tiled=*/false));
  EXPECT_TRUE(cpu::Int8QuantLinearRuns(WeightType::kQ4_1, /*tiled=*/false));
  EXPECT_FALSE(cpu::Int8QuantLinearRuns(WeightType::kF16, /*tiled=*/true));
}

}  // namespace
}  // namespace pagedkv
