// Copyright 2026 The pagedkv Authors.
//
// Hand-built GGUF blocks of every supported type against values computed here from ggml's
// block definitions (see engine/model/formats/gguf_dequant.h), and the size checks.
#include "engine/model/formats/gguf_dequant.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/kernels/quant_blocks.h"
#include "tests/engine/model/gguf_test_writer.h"

namespace pagedkv::model_internal {
namespace {

using ::pagedkv::testing::F16Value;
using ::pagedkv::testing::PutF16;
using ::testing::HasSubstr;

std::vector<float> Dequant(uint32_t type, const std::string& bytes, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n), -999.0f);
  absl::Status st = DequantizeGguf(type, bytes, n, out.data());
  EXPECT_TRUE(st.ok()) << st;
  return out;
}

TEST(GgufDequantTest, PlainTypes) {
  const float f[3] = {1.5f, -2.25f, 1e-3f};
  std::string f32(reinterpret_cast<const char*>(f), sizeof(f));
  EXPECT_THAT(Dequant(0, f32, 3), ::testing::ElementsAre(1.5f, -2.25f, 1e-3f));
  std::string f16;
  PutF16(&f16, 0x3C00);  // 1.0
  PutF16(&f16, 0xC500);  // -5.0
  PutF16(&f16, 0x0001);  // 2^-24, subnormal
  EXPECT_THAT(Dequant(1, f16, 3), ::testing::ElementsAre(1.0f, -5.0f, std::ldexp(1.0f, -24)));
  std::string bf16;
  PutF16(&bf16, 0x3FC0);  // 1.5
  PutF16(&bf16, 0xC040);  // -3.0
  EXPECT_THAT(Dequant(30, bf16, 2), ::testing::ElementsAre(1.5f, -3.0f));
}

TEST(GgufDequantTest, Q8_0) {
  std::mt19937 rng(3);
  std::string b;
  PutF16(&b, 0x2E66);  // d
  std::vector<int8_t> q(32);
  for (int8_t& x : q) x = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
  b.append(reinterpret_cast<const char*>(q.data()), 32);
  const std::vector<float> got = Dequant(8, b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(got[j], static_cast<float>(q[j] * F16Value(0x2E66)));
}

// Q4_0 and Q4_1: byte j holds value j (low nibble) and value j + 16 (high nibble).
TEST(GgufDequantTest, Q4_0AndQ4_1) {
  std::mt19937 rng(5);
  std::vector<uint8_t> qs(16);
  for (uint8_t& x : qs) x = static_cast<uint8_t>(rng() % 256);
  std::string b0, b1;
  PutF16(&b0, 0x3555);  // d
  PutF16(&b1, 0x3555);
  PutF16(&b1, 0xBC00);  // m = -1
  b0.append(reinterpret_cast<const char*>(qs.data()), 16);
  b1.append(reinterpret_cast<const char*>(qs.data()), 16);
  const std::vector<float> g0 = Dequant(2, b0, 32), g1 = Dequant(3, b1, 32);
  const double d = F16Value(0x3555);
  for (int j = 0; j < 16; ++j) {
    const int lo = qs[j] & 15, hi = qs[j] >> 4;
    EXPECT_FLOAT_EQ(g0[j], static_cast<float>((lo - 8) * d));
    EXPECT_FLOAT_EQ(g0[j + 16], static_cast<float>((hi - 8) * d));
    EXPECT_FLOAT_EQ(g1[j], static_cast<float>(lo * d - 1.0));
    EXPECT_FLOAT_EQ(g1[j + 16], static_cast<float>(hi * d - 1.0));
  }
}

// Q4_K: 8 sub-blocks of 32 with 6-bit scales sc[k] and mins mn[k] packed in 12 bytes: for k < 4,
// sc in bytes[k] bits 0-5 and mn in bytes[k+4] bits 0-5; for k >= 4, the low 4 bits of sc / mn
// in bytes[k+4]'s low / high nibble and their top 2 bits in bits 6-7 of bytes[k-4] / bytes[k].
TEST(GgufDequantTest, Q4_K) {
  std::mt19937 rng(7);
  int sc[8], mn[8];
  for (int k = 0; k < 8; ++k) {
    sc[k] = static_cast<int>(rng() % 64);
    mn[k] = static_cast<int>(rng() % 64);
  }
  uint8_t s[12] = {};
  for (int k = 0; k < 4; ++k) {
    s[k] = static_cast<uint8_t>(sc[k] | ((sc[k + 4] >> 4) << 6));
    s[k + 4] = static_cast<uint8_t>(mn[k] | ((mn[k + 4] >> 4) << 6));
    s[k + 8] = static_cast<uint8_t>((sc[k + 4] & 15) | ((mn[k + 4] & 15) << 4));
  }
  std::vector<int> q(256);  // the 4-bit value of each output
  for (int& x : q) x = static_cast<int>(rng() % 16);
  std::string b;
  PutF16(&b, 0x2C00);  // d = 1/16
  PutF16(&b, 0x2800);  // dmin = 1/32
  b.append(reinterpret_cast<const char*>(s), 12);
  for (int chunk = 0; chunk < 4; ++chunk) {  // 64 values: sub-block 2c low nibbles, 2c+1 high
    for (int l = 0; l < 32; ++l) {
      b += static_cast<char>(q[64 * chunk + l] | (q[64 * chunk + 32 + l] << 4));
    }
  }
  const std::vector<float> got = Dequant(12, b, 256);
  for (int i = 0; i < 256; ++i) {
    const int k = i / 32;
    const double want = sc[k] / 16.0 * q[i] - mn[k] / 32.0;
    EXPECT_FLOAT_EQ(got[i], static_cast<float>(want)) << i;
  }
}

// Q6_K: value i of each 128-half: l = i % 32, quarter r = i / 32; low 4 bits from ql (bytes l or
// l + 32, low nibble for r in {0,1}, high for {2,3}), high 2 bits from qh[l] bits 2r..2r+1;
// scale index (i / 16) within the half, int8 scales.
TEST(GgufDequantTest, Q6_K) {
  std::mt19937 rng(11);
  std::vector<int> q(256);  // 6-bit values before the -32
  for (int& x : q) x = static_cast<int>(rng() % 64);
  int8_t scales[16];
  for (int8_t& x : scales) x = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
  std::string ql(128, '\0'), qh(64, '\0');
  for (int half = 0; half < 2; ++half) {
    for (int i = 0; i < 128; ++i) {
      const int v = q[128 * half + i], l = i % 32, r = i / 32;
      const int low_byte = 64 * half + l + (r % 2 == 1 ? 32 : 0);
      ql[low_byte] = static_cast<char>(ql[low_byte] | ((v & 15) << (r >= 2 ? 4 : 0)));
      qh[32 * half + l] = static_cast<char>(qh[32 * half + l] | ((v >> 4) << (2 * r)));
    }
  }
  std::string b = ql + qh + std::string(reinterpret_cast<const char*>(scales), 16);
  PutF16(&b, 0x3000);  // d = 1/8
  const std::vector<float> got = Dequant(14, b, 256);
  for (int i = 0; i < 256; ++i) {
    const double want = 0.125 * scales[i / 16] * (q[i] - 32);
    EXPECT_FLOAT_EQ(got[i], static_cast<float>(want)) << i;
  }
}

// The kernels' decode of weights kept native (pagedkv/kernels/quant_blocks.h QuantValue) gives the
// loader's converted values bit for bit, for every type that stays native: random bytes, with
// every half (d, dmin, m, F16 / BF16 values) a finite one.
TEST(GgufDequantTest, NativeDecodeEqualsTheConversionBitForBit) {
  struct Case {
    uint32_t id;
    WeightType type;
    std::vector<int> half_at;  // byte offsets of halves in a block (empty: every value)
  };
  const Case cases[] = {{1, WeightType::kF16, {}},     {30, WeightType::kBF16, {}},
                        {2, WeightType::kQ4_0, {0}},   {3, WeightType::kQ4_1, {0, 2}},
                        {8, WeightType::kQ8_0, {0}},   {12, WeightType::kQ4_K, {0, 2}},
                        {14, WeightType::kQ6_K, {208}}};
  std::mt19937 rng(17);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.id);
    const int64_t n = 2 * kQuantSuperValues;  // two blocks of each type at least
    std::string bytes(static_cast<size_t>(WeightRowBytes(c.type, n)), '\0');
    for (char& ch : bytes) ch = static_cast<char>(rng() % 256);
    const auto bb = static_cast<size_t>(QuantBlockBytes(c.type));
    for (size_t at = 0; at < bytes.size(); at += bb) {
      std::vector<int> halves = c.half_at.empty() ? std::vector<int>{0} : c.half_at;
      for (int h : halves) bytes[at + static_cast<size_t>(h) + 1] &= 0xBB;  // finite: no inf or NaN
    }
    const std::vector<float> want = Dequant(c.id, bytes, n);
    const auto* row = reinterpret_cast<const unsigned char*>(bytes.data());
    for (int64_t i = 0; i < n; ++i) {
      const float got = QuantValue(c.type, row, i);
      ASSERT_EQ(std::memcmp(&got, &want[static_cast<size_t>(i)], sizeof(float)), 0)
          << "value " << i << ": " << got << " vs " << want[static_cast<size_t>(i)];
    }
  }
}

TEST(GgufDequantTest, RefusesWrongSizesAndUnsupportedTypes) {
  std::vector<float> out(64);
  EXPECT_THAT(DequantizeGguf(8, std::string(33, '\0'), 32, out.data()).message(),
              HasSubstr("Q8_0"));
  EXPECT_FALSE(DequantizeGguf(3, std::string(20, '\0'), 31, out.data()).ok());
  EXPECT_FALSE(DequantizeGguf(0, std::string(8, '\0'), 3, out.data()).ok());
  EXPECT_THAT(DequantizeGguf(13, std::string(176, '\0'), 256, out.data()).message(),
              HasSubstr("Q5_K is not supported"));
  EXPECT_THAT(DequantizeGguf(99, "", 0, out.data()).message(), HasSubstr("99"));
}

}  // namespace
}  // namespace pagedkv::model_internal
