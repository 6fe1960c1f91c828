// Copyright 2026 The pagedkv Authors.
//
// QuantLinear with int8 activations (kernels/cpu/int8_linear.h) over Q4_0, Q4_1 and Q8_0 rows:
// the activation quantization of every kernel equals the published rule bit for bit; every
// kernel this CPU runs (AVX-512 VNNI, AVX2, portable) gives exactly the chain of
// pagedkv/kernels/int8_activations.h, computed here block by block; y stays within the bound that
// the activations' rounding implies around a float64 reference over the original x; every row is
// the same bits whatever m, the thread count or the other rows (batch invariance); weight types
// without an int8 path give kF32's bits; bad input is rejected with y untouched.
#include "kernels/cpu/int8_linear.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
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

constexpr WeightType kInt8Types[] = {WeightType::kQ4_0, WeightType::kQ4_1, WeightType::kQ8_0};

// The kernels this CPU runs, by ForceInt8Kernel name.
std::vector<std::string> Kernels() {
  std::vector<std::string> names = {"portable"};
  if (cpu::int8_kernels::Avx2Supported()) names.push_back("avx2");
  if (cpu::int8_kernels::VnniSupported()) names.push_back("avx512vnni");
  if (names.size() < 3) {
    std::printf(
        "[   NOTE   ] this CPU runs %zu of 3 int8 kernels; the others are not tested here\n",
        names.size());
  }
  return names;
}

// Restores the automatic kernel choice when a test ends.
class Int8LinearTest : public ::testing::Test {
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

// The int8 chain for y[i][j], written out from the header's functions block by block.
float ExpectedOutput(WeightType type, const std::vector<float>& x,
                     const std::vector<unsigned char>& w, int64_t k, int64_t i, int64_t j) {
  const unsigned char* row = QuantRow(w.data(), type, k, j);
  float acc = 0.0f;
  for (int64_t b = 0; b < k / kQuantBlockValues; ++b) {
    int8_t q[kQuantBlockValues];
    float dx = 0;
    int32_t qsum = 0;
    QuantizeActivationBlock(x.data() + i * k + b * kQuantBlockValues, q, &dx, &qsum);
    const unsigned char* block = row + b * QuantBlockBytes(type);
    acc = Int8BlockAccumulate(type, block, dx, dx * static_cast<float>(qsum),
                              Int8BlockDot(type, block, q), acc);
  }
  return acc;
}

TEST_F(Int8LinearTest, QuantizeActivationBlockFollowsTheRule) {
  std::vector<float> x = RandomFloats(4 * kQuantBlockValues, 3, -2.0f, 2.0f);
  for (int c = 0; c < kQuantBlockValues; ++c) x[kQuantBlockValues + c] = 0.0f;  // an all-zero block
  x[2 * kQuantBlockValues] = 5.0f;  // its amax gives d = 5/127; 2.5 lies on a half step
  x[2 * kQuantBlockValues + 1] = 2.5f * (5.0f / 127.0f);
  for (int b = 0; b < 4; ++b) {
    const float* xb = x.data() + b * kQuantBlockValues;
    int8_t q[kQuantBlockValues];
    float d = 0;
    int32_t qsum = 0;
    QuantizeActivationBlock(xb, q, &d, &qsum);
    float amax = 0;
    for (int c = 0; c < kQuantBlockValues; ++c) amax = std::max(amax, std::fabs(xb[c]));
    EXPECT_EQ(d, amax / 127.0f);
    int32_t sum = 0;
    for (int c = 0; c < kQuantBlockValues; ++c) {
      EXPECT_GE(q[c], -127);
      EXPECT_LE(q[c], 127);
      EXPECT_LE(std::fabs(xb[c] - q[c] * d), d * 0.5f * (1 + 1e-5f)) << "block " << b;
      sum += q[c];
    }
    EXPECT_EQ(qsum, sum);
    if (b == 1) {
      EXPECT_EQ(d, 0.0f);
    }
  }
}

TEST_F(Int8LinearTest, EveryKernelGivesTheChainsBits) {
  constexpr int64_t k = 96;
  for (WeightType type : kInt8Types) {
    // n: one 8-column tile, a tail, 16-column tiles with an 8-column and a ragged rest, two
    // full panels of 16-column tiles; m: each row-group size, below and from the panel rows.
    for (int64_t n : {8, 13, 16, 77, 280}) {
      for (int64_t m : {1, 3, 4, 5, 7, 8, 17}) {
        const auto w = RandomRows(type, n, k, 7 + static_cast<uint32_t>(n));
        const auto x = RandomFloats(static_cast<size_t>(m * k), 11 + static_cast<uint32_t>(m));
        for (const std::string& kernel : Kernels()) {
          ASSERT_TRUE(cpu::ForceInt8Kernel(kernel.c_str()).ok());
          for (bool accumulate : {false, true}) {
            std::vector<float> y(static_cast<size_t>(m * n), 0.25f);
            QuantLinearArgs a = Args(x, w, type, &y, m, n, k);
            a.accumulate = accumulate;
            ASSERT_TRUE(cpu::QuantLinear(a, nullptr).ok());
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < n; ++j) {
                const float chain = ExpectedOutput(type, x, w, k, i, j);
                const float want = accumulate ? 0.25f + chain : chain;
                ASSERT_EQ(y[i * n + j], want)
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

// SmolLM2's shapes and a prefill's rows: every kernel gives the portable loop's bits (several
// panels, every row group, 4 threads).
TEST_F(Int8LinearTest, EveryKernelGivesThePortableBitsAtModelSize) {
  constexpr int64_t m = 55;
  auto pool = cpu::ThreadPool::Create(4);
  ASSERT_TRUE(pool.ok());
  for (auto [type, n, k] : {std::tuple{WeightType::kQ4_1, int64_t{1536}, int64_t{576}},
                            std::tuple{WeightType::kQ4_1, int64_t{576}, int64_t{1536}},
                            std::tuple{WeightType::kQ8_0, int64_t{1000}, int64_t{576}}}) {
    const auto w = RandomRows(type, n, k, 71);
    const auto x = RandomFloats(static_cast<size_t>(m * k), 72);
    std::vector<float> want(static_cast<size_t>(m * n));
    ASSERT_TRUE(cpu::ForceInt8Kernel("portable").ok());
    ASSERT_TRUE(cpu::QuantLinear(Args(x, w, type, &want, m, n, k), pool->get()).ok());
    for (const std::string& kernel : Kernels()) {
      ASSERT_TRUE(cpu::ForceInt8Kernel(kernel.c_str()).ok());
      for (int64_t rows : {int64_t{1}, int64_t{2}, m}) {
        std::vector<float> y(static_cast<size_t>(rows * n));
        ASSERT_TRUE(cpu::QuantLinear(Args(x, w, type, &y, rows, n, k), pool->get()).ok());
        ASSERT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * sizeof(float)))
            << kernel << " type " << static_cast<int>(type) << " n " << n << " rows " << rows;
      }
    }
  }
}

// |y - x W^T| <= sum_c |W[j][c]| dx(c) / 2 (the activations' rounding) + fp32 rounding.
TEST_F(Int8LinearTest, StaysWithinTheActivationRoundingOfAFloat64Reference) {
  constexpr int64_t m = 6, n = 40, k = 128;
  for (WeightType type : kInt8Types) {
    const auto w = RandomRows(type, n, k, 21);
    const auto x = RandomFloats(static_cast<size_t>(m * k), 22, -3.0f, 3.0f);
    std::vector<float> y(static_cast<size_t>(m * n));
    ASSERT_TRUE(cpu::QuantLinear(Args(x, w, type, &y, m, n, k), nullptr).ok());
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

TEST_F(Int8LinearTest, RowsDoNotDependOnTheBatchOrTheThreads) {
  constexpr int64_t n = 70, k = 64;
  auto pool = cpu::ThreadPool::Create(3);
  ASSERT_TRUE(pool.ok());
  for (WeightType type : kInt8Types) {
    const auto w = RandomRows(type, n, k, 31);
    const auto x = RandomFloats(static_cast<size_t>(40 * k), 32);
    std::vector<float> alone(static_cast<size_t>(n));
    for (int64_t m : {2, 15, 16, 40}) {
      std::vector<float> batch(static_cast<size_t>(m * n));
      ASSERT_TRUE(cpu::QuantLinear(Args(x, w, type, &batch, m, n, k), pool->get()).ok());
      for (int64_t i = 0; i < m; ++i) {
        const std::vector<float> row(x.begin() + i * k, x.begin() + (i + 1) * k);
        ASSERT_TRUE(cpu::QuantLinear(Args(row, w, type, &alone, 1, n, k), nullptr).ok());
        ASSERT_EQ(0, std::memcmp(alone.data(), batch.data() + i * n, n * sizeof(float)))
            << "type " << static_cast<int>(type) << " m " << m << " row " << i;
      }
    }
  }
}

// Q8_0 bytes of -128 (no quantizer writes them, a file may hold them): |w| is 128 as an unsigned
// byte, so the integer sums stay exact.
TEST_F(Int8LinearTest, Q8ZeroMinus128IsExact) {
  constexpr int64_t n = 24, k = 32;  // a 16-column tile and an 8-column one
  auto w = RandomRows(WeightType::kQ8_0, n, k, 41);
  for (int64_t j = 0; j < n; ++j) {
    for (int c = 0; c < 32; c += 3) w[j * 34 + 2 + c] = 0x80;
  }
  for (int64_t m : {1, 9}) {
    const auto x = RandomFloats(static_cast<size_t>(m * k), 42);
    for (const std::string& kernel : Kernels()) {
      ASSERT_TRUE(cpu::ForceInt8Kernel(kernel.c_str()).ok());
      std::vector<float> y(static_cast<size_t>(m * n));
      ASSERT_TRUE(cpu::QuantLinear(Args(x, w, WeightType::kQ8_0, &y, m, n, k), nullptr).ok());
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          EXPECT_EQ(y[i * n + j], ExpectedOutput(WeightType::kQ8_0, x, w, k, i, j))
              << kernel << " at " << i << "," << j;
        }
      }
    }
  }
}

// Int8Tiles hold the file's bytes in the documented places (int8_tiles.h).
TEST_F(Int8LinearTest, TilesHoldTheBlocksBytesWhereTheLayoutSays) {
  constexpr int64_t n = 32, k = 64;
  for (WeightType type : kInt8Types) {
    const auto w = RandomRows(type, n, k, 81);
    absl::StatusOr<cpu::Int8Tiles> tiles = cpu::Int8Tiles::Build(w.data(), type, n, k);
    ASSERT_TRUE(tiles.ok()) << tiles.status();
    const int64_t values = type == WeightType::kQ4_1 ? 4 : 2;
    const int64_t value_bytes = type == WeightType::kQ8_0 ? 512 : 256;
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t b = 0; b < k / 32; ++b) {
        const unsigned char* block = QuantRow(w.data(), type, k, j) + b * QuantBlockBytes(type);
        const unsigned char* tile = tiles->block(j / 16, b);
        const int64_t c = j % 16;
        for (int64_t i = 0; i < (type == WeightType::kQ8_0 ? 32 : 16); ++i) {
          const unsigned char want =
              type == WeightType::kQ8_0 ? block[values + i] ^ 0x80 : block[values + i];
          ASSERT_EQ(tile[64 * (i / 4) + 4 * c + i % 4], want) << "row " << j << " byte " << i;
        }
        EXPECT_EQ(0, std::memcmp(tile + value_bytes + 2 * c, block, 2));  // d
        if (type == WeightType::kQ4_1) {
          EXPECT_EQ(0, std::memcmp(tile + value_bytes + 32 + 2 * c, block + 2, 2));  // m
        }
      }
    }
  }
}

// Q4_0 / Q4_1 / Q8_0 tiles give W's rows back byte for byte, and the embedding gather from them
// gives the rows' bits; Q4_K / Q6_K tiles hold no rows and the gather reads the table then.
TEST_F(Int8LinearTest, TilesGiveTheRowsBackAndTheGatherTheirBits) {
  constexpr int64_t n = 48, k = 256;
  const std::vector<int32_t> ids = {0, 47, 16, 3, 3, 31};
  const auto m = static_cast<int64_t>(ids.size());
  for (WeightType type : {WeightType::kQ4_0, WeightType::kQ4_1, WeightType::kQ8_0,
                          WeightType::kQ4_K, WeightType::kQ6_K}) {
    const auto w = RandomRows(type, n, k, 83);
    absl::StatusOr<cpu::Int8Tiles> tiles = cpu::Int8Tiles::Build(w.data(), type, n, k);
    ASSERT_TRUE(tiles.ok()) << tiles.status();
    EXPECT_EQ(tiles->holds_rows(), !Int8SuperBlockType(type));
    const auto row_bytes = static_cast<size_t>(WeightRowBytes(type, k));
    std::vector<unsigned char> row(row_bytes);
    for (int64_t j = 0; tiles->holds_rows() && j < n; ++j) {
      tiles->CopyRow(j, row.data());
      ASSERT_EQ(0, std::memcmp(row.data(), QuantRow(w.data(), type, k, j), row_bytes)) << j;
    }
    std::vector<float> want(static_cast<size_t>(m * k)), got(want.size(), -1.0f);
    QuantEmbeddingGatherArgs args{.table = w.data(),
                                  .table_type = type,
                                  .token_ids = ids.data(),
                                  .out = want.data(),
                                  .num_tokens = m,
                                  .vocab_size = n,
                                  .dim = k};
    ASSERT_TRUE(cpu::QuantEmbeddingGather(args).ok());
    args.out = got.data();
    ASSERT_TRUE(cpu::QuantEmbeddingGather(args, &*tiles).ok());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)));
    std::fill(got.begin(), got.end(), -1.0f);
    args.table = w.data() + row_bytes;  // another table: its tiles are refused, out untouched
    args.vocab_size = n - 1;
    EXPECT_EQ(cpu::QuantEmbeddingGather(args, &*tiles).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(got, std::vector<float>(want.size(), -1.0f));
  }
}

// Every kernel given W's tiles gives the chain's bits (the VNNI kernel multiplies the tiles, the
// others read the rows), for every row-group size and accumulate.
TEST_F(Int8LinearTest, TilesGiveTheChainsBits) {
  constexpr int64_t k = 96;
  auto pool = cpu::ThreadPool::Create(3);
  ASSERT_TRUE(pool.ok());
  for (WeightType type : kInt8Types) {
    for (int64_t n : {16, 48, 320}) {
      const auto w = RandomRows(type, n, k, 91 + static_cast<uint32_t>(n));
      absl::StatusOr<cpu::Int8Tiles> tiles = cpu::Int8Tiles::Build(w.data(), type, n, k);
      ASSERT_TRUE(tiles.ok()) << tiles.status();
      for (int64_t m : {1, 2, 3, 5, 8, 9, 17}) {
        const auto x = RandomFloats(static_cast<size_t>(m * k), 92 + static_cast<uint32_t>(m));
        for (const std::string& kernel : Kernels()) {
          ASSERT_TRUE(cpu::ForceInt8Kernel(kernel.c_str()).ok());
          for (bool accumulate : {false, true}) {
            std::vector<float> y(static_cast<size_t>(m * n), 0.5f);
            QuantLinearArgs a = Args(x, w, type, &y, m, n, k);
            a.accumulate = accumulate;
            ASSERT_TRUE(cpu::QuantLinear(a, pool->get(), &*tiles).ok());
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < n; ++j) {
                const float chain = ExpectedOutput(type, x, w, k, i, j);
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

TEST_F(Int8LinearTest, TilesRefuseWhatTheyCannotHoldAndForeignTilesAreRefused) {
  const auto w = RandomRows(WeightType::kQ4_1, 32, 64, 101);
  for (auto [type, n, k] : {std::tuple{WeightType::kQ4_1, int64_t{24}, int64_t{64}},
                            std::tuple{WeightType::kQ4_1, int64_t{32}, int64_t{48}},
                            std::tuple{WeightType::kQ4_K, int64_t{32}, int64_t{96}},
                            std::tuple{WeightType::kQ4_1, int64_t{0}, int64_t{64}}}) {
    const absl::Status s = cpu::Int8Tiles::Build(w.data(), type, n, k).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << n << " " << k;
    EXPECT_NE(s.message().find("multiple of 16 and k of the type's block"), std::string::npos) << s;
  }
  EXPECT_EQ(cpu::Int8Tiles::Build(nullptr, WeightType::kQ4_1, 32, 64).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<cpu::Int8Tiles> tiles = cpu::Int8Tiles::Build(w.data(), WeightType::kQ4_1, 32, 64);
  ASSERT_TRUE(tiles.ok()) << tiles.status();
  const auto other = RandomRows(WeightType::kQ4_1, 32, 64, 102);
  const auto x = RandomFloats(64, 103);
  std::vector<float> y(32, 3.0f);
  const absl::Status s =
      cpu::QuantLinear(Args(x, other, WeightType::kQ4_1, &y, 1, 32, 64), nullptr, &*tiles);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("int8_tiles"), std::string::npos) << s;
  EXPECT_EQ(y, std::vector<float>(32, 3.0f));
}

// Half weights, and Q4_K / Q6_K without tiles (int8_super_linear_test.cc has the rest).
TEST_F(Int8LinearTest, TypesWithoutAnInt8PathGiveTheFp32Bits) {
  constexpr int64_t m = 3, n = 9, k = 256;
  for (WeightType type : {WeightType::kQ4_K, WeightType::kQ6_K, WeightType::kF16}) {
    const auto w = RandomRows(type, n, k, 51);
    const auto x = RandomFloats(static_cast<size_t>(m * k), 52);
    std::vector<float> int8_y(m * n), f32_y(m * n);
    QuantLinearArgs a = Args(x, w, type, &int8_y, m, n, k);
    ASSERT_TRUE(cpu::QuantLinear(a, nullptr).ok());
    a.y = f32_y.data();
    a.activations = ActivationType::kF32;
    ASSERT_TRUE(cpu::QuantLinear(a, nullptr).ok());
    EXPECT_EQ(int8_y, f32_y);
  }
}

// A saved choice comes back whatever was forced in between (the engine restores it on a failed
// Init).
TEST_F(Int8LinearTest, ASavedKernelChoiceIsRestored) {
  ASSERT_TRUE(cpu::ForceInt8Kernel("portable").ok());
  const cpu::Int8KernelChoice saved = cpu::CurrentInt8KernelChoice();
  ASSERT_TRUE(cpu::ForceInt8Kernel("auto").ok());
  EXPECT_STREQ(cpu::ForcedInt8Kernel(), "auto");
  cpu::RestoreInt8KernelChoice(saved);
  EXPECT_STREQ(cpu::ForcedInt8Kernel(), "portable");
  EXPECT_STREQ(cpu::Int8KernelName(), "portable");
}

TEST_F(Int8LinearTest, BadInputIsRefusedAndYUntouched) {
  constexpr int64_t n = 8, k = 32;
  const auto w = RandomRows(WeightType::kQ4_1, n, k, 61);
  const auto x = RandomFloats(k, 62);
  std::vector<float> y(n, 7.0f);
  QuantLinearArgs a = Args(x, w, WeightType::kQ4_1, &y, 1, n, k);
  a.activations = static_cast<ActivationType>(9);
  const absl::Status s = cpu::QuantLinear(a, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("activations"), std::string::npos) << s;
  EXPECT_EQ(y, std::vector<float>(n, 7.0f));
  EXPECT_EQ(cpu::ForceInt8Kernel("vnni9").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cpu::ForceInt8Kernel(nullptr).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagedkv
