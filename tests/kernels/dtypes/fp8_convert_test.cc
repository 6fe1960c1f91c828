// Copyright 2026 The pagedkv Authors.
//
// fp8 conversions (pagedkv/kernels/fp8_convert.h) against a reference built from the formats'
// definitions in double: every code decodes to sign * 2^e * (1 + m / 2^mb) (or the subnormal
// m * 2^(1 - bias - mb)); encoding picks the nearest finite code, ties to the even one, and
// saturates.
#include "pagedkv/kernels/fp8_convert.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace pagedkv {
namespace {

struct Format {
  const char* name;
  Fp8Format f;
  uint8_t (*encode)(float);
  float (*decode)(uint8_t);
  double max_finite;
};

const Format kFormats[] = {
    {"e4m3", kFp8E4M3, F32ToFp8E4M3, Fp8E4M3ToF32, 448.0},
    {"e5m2", kFp8E5M2, F32ToFp8E5M2, Fp8E5M2ToF32, 57344.0},
};

// The value of code c from the definition (NaN and infinity as the format says).
double Reference(const Format& fmt, uint8_t c) {
  const int mb = fmt.f.mantissa_bits;
  const int e = (c & 0x7F) >> mb;
  const int m = c & ((1 << mb) - 1);
  const double sign = (c & 0x80) != 0 ? -1.0 : 1.0;
  const int top = (1 << (7 - mb)) - 1;
  if (!fmt.f.ieee_specials && (c & 0x7F) == 0x7F) return std::nan("");
  if (fmt.f.ieee_specials && e == top) {
    return m == 0 ? sign * std::numeric_limits<double>::infinity() : std::nan("");
  }
  if (e == 0) return sign * m * std::ldexp(1.0, 1 - fmt.f.bias - mb);
  return sign * (1.0 + m / static_cast<double>(1 << mb)) * std::ldexp(1.0, e - fmt.f.bias);
}

// The code a correct encoder gives x: the nearest finite magnitude, ties to the even code,
// saturating; NaN for NaN.
uint8_t ReferenceEncode(const Format& fmt, float x) {
  if (std::isnan(x)) return static_cast<uint8_t>((std::signbit(x) ? 0x80 : 0) | kFp8NanCode);
  const double a = std::fabs(static_cast<double>(x));
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (a >= fmt.max_finite) return static_cast<uint8_t>(sign | fmt.f.max_code);  // saturation
  uint8_t best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  for (int c = 0; c <= fmt.f.max_code; ++c) {
    const double err = std::fabs(Reference(fmt, static_cast<uint8_t>(c)) - a);
    if (err < best_err || (err == best_err && (c & 1) == 0)) {
      best = static_cast<uint8_t>(c);
      best_err = err;
    }
  }
  return static_cast<uint8_t>(sign | best);
}

TEST(Fp8ConvertTest, EveryCodeDecodesToItsDefinitionAndEncodesBack) {
  for (const Format& fmt : kFormats) {
    SCOPED_TRACE(fmt.name);
    for (int c = 0; c < 256; ++c) {
      const auto code = static_cast<uint8_t>(c);
      const double want = Reference(fmt, code);
      const float got = fmt.decode(code);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << c;
        EXPECT_EQ(fmt.encode(got) & 0x7F, kFp8NanCode) << c;
        continue;
      }
      EXPECT_EQ(static_cast<double>(got), want) << c;
      if (std::isinf(want)) continue;
      EXPECT_EQ(std::signbit(got), (c & 0x80) != 0) << c;
      EXPECT_EQ(fmt.encode(got), code) << c;  // exact values round-trip, -0 included
    }
  }
}

TEST(Fp8ConvertTest, EncodingRoundsToNearestEvenAndSaturates) {
  std::mt19937 rng(41);
  for (const Format& fmt : kFormats) {
    SCOPED_TRACE(fmt.name);
    std::vector<float> xs = {0.0f,
                             -0.0f,
                             1e-30f,
                             -1e-30f,
                             std::numeric_limits<float>::denorm_min(),
                             std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity(),
                             1e30f,
                             -1e30f,
                             static_cast<float>(fmt.max_finite) * 1.06f};
    // Every midpoint between neighbouring codes (the ties) and its neighbours.
    for (int c = 0; c < fmt.f.max_code; ++c) {
      const double mid = 0.5 * (Reference(fmt, static_cast<uint8_t>(c)) +
                                Reference(fmt, static_cast<uint8_t>(c + 1)));
      const auto m = static_cast<float>(mid);
      xs.insert(xs.end(), {m, -m, std::nextafter(m, 0.0f), std::nextafter(m, 1e30f)});
    }
    // Random magnitudes over the whole range (log-uniform), both signs.
    std::uniform_real_distribution<double> log2(-20.0, std::log2(fmt.max_finite) + 2.0);
    for (int i = 0; i < 20000; ++i) {
      const auto x = static_cast<float>(std::exp2(log2(rng)));
      xs.push_back((i & 1) != 0 ? -x : x);
    }
    for (float x : xs) EXPECT_EQ(fmt.encode(x), ReferenceEncode(fmt, x)) << "x = " << x;
    EXPECT_EQ(fmt.encode(std::numeric_limits<float>::infinity()), fmt.f.max_code);
    EXPECT_EQ(fmt.encode(std::nanf("")) & 0x7F, kFp8NanCode);
  }
}

}  // namespace
}  // namespace pagedkv
