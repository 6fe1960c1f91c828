// Copyright 2026 The pagedkv Authors.
//
// fp16 / bf16 conversions: exhaustive round trips and round-to-nearest-even against neighbours
// computed in float64.
#include "pagedkv/kernels/dtype_convert.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string_view>

#include "gtest/gtest.h"
#include "pagedkv/dtype.h"

namespace pagedkv {
namespace {

// Reference: binary16 value of bits, written from the format definition.
double HalfValue(uint16_t h) {
  const int sign = (h >> 15) ? -1 : 1;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  if (exp == 31) return mant ? std::nan("") : sign * INFINITY;
  return sign * std::ldexp(1024 + mant, exp - 25);
}

TEST(DTypeTest, SizesNamesAndParsing) {
  EXPECT_EQ(DTypeSize(DType::kF32), 4);
  EXPECT_EQ(DTypeSize(DType::kF16), 2);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2);
  EXPECT_FALSE(IsValidDType(static_cast<DType>(99)));
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kInt8, DType::kFp8E4M3,
                  DType::kFp8E5M2, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
    auto parsed = ParseDType(DTypeName(d));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, d);
    EXPECT_EQ(IsQuantizedDType(d), DTypeSize(d) == 1) << DTypeName(d);
  }
  EXPECT_EQ(*ParseDType("fp8"), DType::kFp8E4M3);
  EXPECT_EQ(ParseDType("int4").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ParseDType("q5_0").status().message().find("q4_1"), std::string_view::npos);
}

TEST(DTypeConvertTest, HalfDecodesEveryBitPatternExactly) {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const double expected = HalfValue(static_cast<uint16_t>(bits));
    const float got = F16BitsToF32(static_cast<uint16_t>(bits));
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got));
      continue;
    }
    ASSERT_EQ(static_cast<double>(got), expected) << bits;
    ASSERT_EQ(std::signbit(got), (bits & 0x8000) != 0) << bits;
    // Every finite half round-trips.
    ASSERT_EQ(F32ToF16Bits(got), bits) << bits;
  }
}

TEST(DTypeConvertTest, HalfRoundsToNearestEven) {
  std::mt19937 rng(1);
  std::uniform_int_distribution<uint32_t> bits_dist(0, 0xffffffffu);
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    const float f = BitsToFloat(bits_dist(rng));
    if (std::isnan(f)) continue;
    const uint16_t h = F32ToF16Bits(f);
    const double got = HalfValue(h);
    if (std::abs(f) >= 65520.0) {
      EXPECT_TRUE(std::isinf(got)) << f;
      continue;
    }
    // No representable half is strictly closer; ties go to the even mantissa.
    const double err = std::abs(got - f);
    for (int delta : {-1, 1}) {
      const uint16_t neighbour = static_cast<uint16_t>(h + delta);
      if ((neighbour & 0x7c00) == 0x7c00) continue;
      if (((neighbour ^ h) & 0x8000) != 0) continue;
      const double other = std::abs(HalfValue(neighbour) - f);
      ASSERT_LE(err, other) << f;
      if (err == other) {
        ASSERT_EQ(h & 1, 0) << f;
      }
    }
    ++checked;
  }
  EXPECT_GT(checked, 100000);
  // Hand-picked ties and edges.
  EXPECT_EQ(F32ToF16Bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie -> even (down)
  EXPECT_EQ(F32ToF16Bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(F32ToF16Bits(std::ldexp(1.0f, -25)), 0x0000);             // half the smallest subnormal
  EXPECT_EQ(F32ToF16Bits(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(F32ToF16Bits(65504.0f), 0x7bff);
  EXPECT_EQ(F32ToF16Bits(-INFINITY), 0xfc00);
}

TEST(DTypeConvertTest, BFloat16RoundsToNearestEven) {
  std::mt19937 rng(2);
  std::uniform_int_distribution<uint32_t> bits_dist(0, 0xffffffffu);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t x = bits_dist(rng);
    const float f = BitsToFloat(x);
    const uint16_t b = F32ToBF16Bits(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(BF16BitsToF32(b)));
      continue;
    }
    const uint32_t down = x & 0xffff0000u;
    const uint32_t rem = x & 0xffffu;
    uint32_t expected = down >> 16;
    if (rem > 0x8000u || (rem == 0x8000u && (expected & 1u))) ++expected;
    ASSERT_EQ(b, expected) << x;
  }
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const float f = BF16BitsToF32(static_cast<uint16_t>(bits));
    if (!std::isnan(f)) {
      ASSERT_EQ(F32ToBF16Bits(f), bits);
    }
  }
}

TEST(DTypeConvertTest, LoadStoreRoundTrip) {
  uint16_t half_buf[2] = {0, 0};
  StoreElement(half_buf, DType::kF16, 1, 0.1f);
  EXPECT_EQ(LoadElement(half_buf, DType::kF16, 1), RoundToDType(0.1f, DType::kF16));
  EXPECT_NEAR(LoadElement(half_buf, DType::kF16, 1), 0.1f, 0.1f * std::ldexp(1.0, -11));
  StoreElement(half_buf, DType::kBF16, 0, 0.1f);
  EXPECT_NEAR(LoadElement(half_buf, DType::kBF16, 0), 0.1f, 0.1f * std::ldexp(1.0, -8));
  float f32_buf[1] = {0};
  StoreElement(f32_buf, DType::kF32, 0, 0.1f);
  EXPECT_EQ(LoadElement(f32_buf, DType::kF32, 0), 0.1f);
}

}  // namespace
}  // namespace pagedkv
