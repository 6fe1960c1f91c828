// Copyright 2026 The pagedkv Authors.
//
// Quantized KV rows (pagedkv/kernels/kv_quant.h) and the page ops over them: each dtype's bytes
// against a reference written here from the format's definition (ggml's reference quantizers for
// the GGUF blocks), the block types' bytes read back by the weight decoder (GGUF's layout), error
// bounds, row sizes; KV write, attention and re-rotation over quantized pages against float64
// references; bad input.
#include "pagedkv/kernels/kv_quant.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "hwy/targets.h"
#include "kernels/cpu/simd/simd_kernels.h"
#include "pagedkv/dtype.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/kernels/fp8_convert.h"
#include "pagedkv/kernels/quant_blocks.h"
#include "pagedkv/kernels/rope_table.h"
#include "tests/kernels/dtypes/quant_pages.h"
#include "tests/kernels/kernel_test_util.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::Quantize;
using ::pagedkv::testing::QuantPages;
using ::pagedkv::testing::RandomFloats;
using ::pagedkv::testing::ReferenceAttentionFactor;
using ::pagedkv::testing::ReferenceDenseAttention;
using ::pagedkv::testing::ReferenceInvFreq;
using ::pagedkv::testing::ReferenceRotate;

constexpr DType kQuantized[] = {DType::kInt8, DType::kFp8E4M3, DType::kFp8E5M2,
                                DType::kQ8_0, DType::kQ4_0,    DType::kQ4_1};

// Rows that exercise the edges: random at several magnitudes, all zero, one outlier, constants.
std::vector<std::vector<float>> TestRows(int32_t n) {
  std::vector<std::vector<float>> rows;
  for (float scale : {1.0f, 1e-6f, 1e-30f, 3e4f, 1e30f}) {
    std::vector<float> r = RandomFloats(n, static_cast<uint32_t>(rows.size()) + 3);
    for (float& x : r) x *= scale;
    rows.push_back(r);
  }
  rows.push_back(std::vector<float>(n, 0.0f));
  std::vector<float> outlier(n, 0.01f);
  outlier[5] = -40.0f;
  rows.push_back(outlier);
  rows.push_back(std::vector<float>(n, 2.5f));
  rows.push_back(std::vector<float>(n, -2.5f));
  return rows;
}

// The smallest bf16 value >= d (d >= 0 finite), found by stepping bf16 codes.
float BF16AtLeast(float d) {
  uint16_t code = static_cast<uint16_t>(FloatToBits(d) >> 16);  // truncation: <= d
  while (BF16BitsToF32(code) < d) ++code;
  return BF16BitsToF32(code);
}

// int8 / fp8 row from the banner's definition.
std::vector<unsigned char> ReferenceScaledRow(DType dtype, const std::vector<float>& x) {
  const auto n = static_cast<int32_t>(x.size());
  float amax = 0.0f;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  const float range =
      dtype == DType::kInt8 ? 127.0f : (dtype == DType::kFp8E4M3 ? 448.0f : 57344.0f);
  const float d = BF16AtLeast(amax / range);
  const float inverse = d > 0.0f ? 1.0f / d : 0.0f;
  std::vector<unsigned char> row(static_cast<size_t>(n) + 2);
  for (int32_t i = 0; i < n; ++i) {
    const float y = x[i] * inverse;
    if (dtype == DType::kInt8) {
      const long q = std::clamp(std::lrint(y), -127L, 127L);
      row[i] = static_cast<unsigned char>(static_cast<int8_t>(q));
    } else {
      row[i] = dtype == DType::kFp8E4M3 ? F32ToFp8E4M3(y) : F32ToFp8E5M2(y);
    }
  }
  const uint16_t bits = static_cast<uint16_t>(FloatToBits(d) >> 16);
  row[n] = static_cast<unsigned char>(bits & 0xff);
  row[n + 1] = static_cast<unsigned char>(bits >> 8);
  return row;
}

// One GGUF block per ggml's quantize_row_{q8_0,q4_0,q4_1}_ref.
void ReferenceBlock(DType dtype, const float* x, unsigned char* out) {
  auto put16 = [](unsigned char* p, float v) {
    const uint16_t h = F32ToF16Bits(v);
    p[0] = static_cast<unsigned char>(h & 0xff);
    p[1] = static_cast<unsigned char>(h >> 8);
  };
  if (dtype == DType::kQ8_0) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    put16(out, d);
    for (int j = 0; j < 32; ++j) out[2 + j] = static_cast<unsigned char>(std::lround(x[j] * id));
    return;
  }
  float lo = x[0], hi = x[0], amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
    if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
  }
  const bool q4_0 = dtype == DType::kQ4_0;
  const float d = q4_0 ? max / -8.0f : (hi - lo) / 15.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  put16(out, d);
  if (!q4_0) put16(out + 2, lo);
  for (int j = 0; j < 16; ++j) {
    const float a = q4_0 ? x[j] * id + 8.5f : (x[j] - lo) * id + 0.5f;
    const float b = q4_0 ? x[j + 16] * id + 8.5f : (x[j + 16] - lo) * id + 0.5f;
    const int qa = std::min(15, static_cast<int>(static_cast<int8_t>(a)));
    const int qb = std::min(15, static_cast<int>(static_cast<int8_t>(b)));
    out[(q4_0 ? 2 : 4) + j] = static_cast<unsigned char>(qa | (qb << 4));
  }
}

std::vector<unsigned char> Reference(DType dtype, const std::vector<float>& x) {
  const auto n = static_cast<int32_t>(x.size());
  if (!IsBlockDType(dtype)) return ReferenceScaledRow(dtype, x);
  std::vector<unsigned char> row(static_cast<size_t>(KvRowBytes(dtype, n)));
  const int64_t block = KvRowBytes(dtype, 32);
  for (int32_t b = 0; b < n / 32; ++b) ReferenceBlock(dtype, &x[b * 32], &row[b * block]);
  return row;
}

TEST(KvQuantTest, RowBytesMatchTheFormatDefinitions) {
  for (DType dtype : kQuantized) {
    for (const auto& x : TestRows(64)) {
      ASSERT_EQ(Quantize(dtype, x), Reference(dtype, x)) << DTypeName(dtype) << " x[0] " << x[0];
    }
  }
}

TEST(KvQuantTest, BlockRowsAreGgufBlocks) {  // the weight decoder reads them as GGUF's types
  const std::pair<DType, WeightType> pairs[] = {{DType::kQ8_0, WeightType::kQ8_0},
                                                {DType::kQ4_0, WeightType::kQ4_0},
                                                {DType::kQ4_1, WeightType::kQ4_1}};
  for (const auto& [dtype, weight] : pairs) {
    for (const auto& x : TestRows(96)) {
      if (std::fabs(x[0]) > 1e20f) continue;  // f16 scales overflow (NaN, as in llama.cpp)
      const auto row = Quantize(dtype, x);
      ASSERT_EQ(std::ssize(row), WeightRowBytes(weight, 96));
      std::vector<float> y(96);
      DequantizeKvRow(dtype, row.data(), 96, y.data());
      for (int j = 0; j < 96; ++j) {
        ASSERT_EQ(y[j], QuantValue(weight, row.data(), j)) << DTypeName(dtype) << " " << j;
        ASSERT_EQ(y[j], LoadKvValue(row.data(), dtype, 0, 96, j));
      }
    }
  }
}

// |x' - x| within half a step of the row's scale (q4: a step, as ggml's offsets round), fp8
// within half an ulp of its format at the scaled value (relative), plus the scale's own floor.
TEST(KvQuantTest, DequantizedValuesAreWithinTheStep) {
  for (DType dtype : kQuantized) {
    for (const auto& x : TestRows(64)) {
      const auto row = Quantize(dtype, x);
      std::vector<float> y(64);
      LoadKvRow(row.data(), dtype, 0, 64, y.data());
      float amax = 0.0f;
      for (float v : x) amax = std::max(amax, std::fabs(v));
      for (int i = 0; i < 64; ++i) {
        const double err = std::fabs(double(y[i]) - x[i]);
        double bound = 0;
        switch (dtype) {
          case DType::kInt8:
          case DType::kQ8_0:
            bound = 0.5 * amax / 127.0 * 1.01 + 1e-45;
            break;
          case DType::kQ4_0:
          case DType::kQ4_1:
            bound = 2.0 * amax / 15.0 * 1.01 + 1e-45;
            break;
          case DType::kFp8E4M3:  // 3 mantissa bits; subnormals below 2^-6 of the range
            bound = std::fabs(x[i]) * 0x1p-4 + amax / 448.0 * 0x1p-9 * 1.01 + 1e-45;
            break;
          default:  // E5M2: 2 mantissa bits
            bound = std::fabs(x[i]) * 0x1p-3 + amax / 57344.0 * 0x1p-16 * 1.01 + 1e-45;
            break;
        }
        // The f16 scales of the block types cannot hold 1e-30 or 1e30 rows: skip those.
        if (IsBlockDType(dtype) && (amax < 1e-4f || amax > 1e4f)) continue;
        ASSERT_LE(err, bound) << DTypeName(dtype) << " i " << i << " x " << x[i] << " y " << y[i];
      }
    }
  }
}

TEST(KvQuantTest, BranchlessFp8DecodeGivesTheSameBitsForEveryCode) {
  for (int c = 0; c < 256; ++c) {
    for (const Fp8Format& f : {kFp8E4M3, kFp8E5M2}) {
      const auto code = static_cast<uint8_t>(c);
      ASSERT_EQ(FloatToBits(Fp8ToF32Branchless(code, f)), FloatToBits(Fp8ToF32(code, f))) << c;
    }
  }
}

// The row decoder (block loops) and the per-value one agree for every dtype.
TEST(KvQuantTest, RowAndValueDecodesAgree) {
  for (DType dtype : kQuantized) {
    for (const auto& x : TestRows(128)) {
      const auto row = Quantize(dtype, x);
      std::vector<float> y(128);
      DequantizeKvRow(dtype, row.data(), 128, y.data());
      for (int j = 0; j < 128; ++j) {
        const float one = DequantizeKvValue(dtype, row.data(), 128, j);
        ASSERT_TRUE(y[j] == one || (std::isnan(y[j]) && std::isnan(one))) << DTypeName(dtype) << j;
      }
    }
  }
}

// Runs `check` with each x86 SIMD target this CPU runs forced (the fp8 decode has an F16C path
// on AVX2 and up and a plain one below), then once more on the CPU's own best target.
template <typename Check>
void OnEverySimdTarget(Check check) {
  for (int64_t target : {HWY_AVX3, HWY_AVX2, HWY_SSE4, HWY_SCALAR}) {
    if ((hwy::SupportedTargets() & target) == 0 && target != HWY_SCALAR) continue;
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    check();
  }
  hwy::SetSupportedTargetsForTest(0);  // back to what the CPU supports
  check();
}

// The CPU attention's vector decode (kv_dequant-inl.h) gives LoadKvRow's bits for rows of
// random bytes, whose scales and codes cover every fp8 code (subnormals, NaN, E5M2's infinities),
// every int8 and nibble value, and tails shorter than a vector (head_dim 40, 136).
void CheckAttentionDecodeAgainstScalar() {
  std::mt19937 rng(71);
  for (DType dtype : {DType::kBF16, DType::kInt8, DType::kFp8E4M3, DType::kFp8E5M2, DType::kQ8_0,
                      DType::kQ4_0, DType::kQ4_1}) {
    for (int32_t hd : {32, 40, 64, 128, 136, 256}) {
      if (hd % KvRowValuesMultiple(dtype) != 0) continue;
      const int64_t units = KvRowUnits(dtype, hd);
      std::vector<unsigned char> row(static_cast<size_t>(units * DTypeSize(dtype)) + 16);
      for (int trial = 0; trial < 64; ++trial) {
        for (size_t i = 0; i < row.size(); ++i) row[i] = static_cast<unsigned char>(rng());
        if (IsQuantizedDType(dtype) && !IsBlockDType(dtype)) {  // a moderate positive scale
          row[hd] = 0;
          row[hd + 1] = static_cast<unsigned char>(0x3c + trial % 8);
          for (int c = 0; c < hd; ++c) row[c] = static_cast<unsigned char>((trial * hd + c) & 0xff);
        }
        std::vector<float> want(hd), got(hd, -1.0f);
        LoadKvRow(row.data(), dtype, 0, hd, want.data());
        cpu::simd::DecodeKvRowForAttention(row.data(), dtype, 0, hd, got.data());
        for (int32_t j = 0; j < hd; ++j) {
          ASSERT_EQ(FloatToBits(got[j]), FloatToBits(want[j]))
              << DTypeName(dtype) << " hd " << hd << " j " << j << " byte " << int{row[j]};
        }
      }
    }
  }
}

TEST(KvQuantTest, AttentionDecodeGivesTheScalarBits) {
  OnEverySimdTarget(CheckAttentionDecodeAgainstScalar);
}

#if defined(__x86_64__)
// With flush-to-zero and denormals-are-zero set (-ffast-math programs, torch.set_flush_denormal),
// the CPU attention's fp8 decode still gives every code's value, subnormal codes included: no
// intermediate is an fp32 subnormal. The scale is 1, so every product is the code's value.
void CheckFp8DecodeUnderFlushToZero() {
  constexpr int32_t kValues = 256;
  for (DType dtype : {DType::kFp8E4M3, DType::kFp8E5M2}) {
    std::vector<unsigned char> row(4 * kValues);  // the row (kValues + 2 bytes), then slack
    for (int c = 0; c < kValues; ++c) row[c] = static_cast<unsigned char>(c);
    row[kValues] = 0x80;  // bf16 1.0: 0x3F80, little-endian
    row[kValues + 1] = 0x3F;
    std::vector<float> want(kValues), got(kValues, -1.0f);
    LoadKvRow(row.data(), dtype, 0, kValues, want.data());
    const unsigned int csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u);  // FTZ (bit 15) and DAZ (bit 6)
    cpu::simd::DecodeKvRowForAttention(row.data(), dtype, 0, kValues, got.data());
    _mm_setcsr(csr);
    for (int c = 0; c < kValues; ++c) {
      ASSERT_EQ(FloatToBits(got[c]), FloatToBits(want[c])) << DTypeName(dtype) << " code " << c;
    }
  }
}

TEST(KvQuantTest, Fp8DecodeKeepsSubnormalCodesUnderFlushToZero) {
  OnEverySimdTarget(CheckFp8DecodeUnderFlushToZero);
}
// f16 pages decode a vector at a time (vcvtph2ps): every code equals the software decode, its
// subnormals too with MXCSR's flush-to-zero and denormals-are-zero bits set.
TEST(KvQuantTest, F16DecodeKeepsEveryCodeUnderFlushToZero) {
  constexpr int32_t kValues = 1 << 16;
  std::vector<uint16_t> row(kValues);
  for (int32_t c = 0; c < kValues; ++c) row[static_cast<size_t>(c)] = static_cast<uint16_t>(c);
  std::vector<float> want(kValues), got(kValues, -1.0f);
  LoadKvRow(row.data(), DType::kF16, 0, kValues - 5, want.data());  // an odd tail, too
  const unsigned int csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8040u);  // FTZ (bit 15) and DAZ (bit 6)
  cpu::simd::DecodeKvRowForAttention(row.data(), DType::kF16, 0, kValues - 5, got.data());
  _mm_setcsr(csr);
  for (int32_t c = 0; c < kValues - 5; ++c) {
    if (std::isnan(want[c])) {
      ASSERT_TRUE(std::isnan(got[c])) << "code " << c;
    } else {
      ASSERT_EQ(FloatToBits(got[c]), FloatToBits(want[c])) << "code " << c;
    }
  }
}

#endif

TEST(KvQuantTest, RowSizesAgainstBf16) {
  for (int64_t hd : {64, 128}) {
    const double bf16 = static_cast<double>(KvRowBytes(DType::kBF16, hd));
    EXPECT_LE(KvRowBytes(DType::kInt8, hd) / bf16, 0.52);
    EXPECT_LE(KvRowBytes(DType::kFp8E4M3, hd) / bf16, 0.52);
    EXPECT_DOUBLE_EQ(KvRowBytes(DType::kQ8_0, hd) / bf16, 34.0 / 64.0);  // llama.cpp's q8_0
    EXPECT_LE(KvRowBytes(DType::kQ4_0, hd) / bf16, 0.29);
  }
  EXPECT_EQ(KvRowUnits(DType::kQ4_1, 128), 80);
  EXPECT_EQ(KvRowValuesMultiple(DType::kQ4_0), 32);
  EXPECT_EQ(KvRowValuesMultiple(DType::kInt8), 1);
}

// The KV write stores each rotated key row quantized once: the bytes of QuantizeKvRow applied to
// the f32 KV write's row (the same rotation), and V's row quantized as given.
TEST(KvQuantTest, KvWriteQuantizesTheRotatedRows) {
  RopeConfig config;
  config.head_dim = 64;
  auto table = RopeTable::Create(config, 512);
  ASSERT_TRUE(table.ok());
  const int64_t n = 5, row = 2 * 64;
  const auto k = RandomFloats(n * row, 31, -3.0f, 3.0f);
  const auto v = RandomFloats(n * row, 32);
  const std::vector<int32_t> positions = {0, 7, 100, 511, 3};
  const std::vector<int64_t> slots = {0, 9, -1, 31, 4};
  QuantPages f32(DType::kF32, 8, 4, 2, 64);
  auto write = [&](const PagedKvLayout& layout) {
    return cpu::ReshapeAndCache({.k = k.data(),
                                 .v = v.data(),
                                 .positions = positions.data(),
                                 .slot_mapping = slots.data(),
                                 .num_tokens = n,
                                 .rope = table->View(),
                                 .cache = layout});
  };
  ASSERT_TRUE(write(f32.layout).ok());
  for (DType dtype : kQuantized) {
    QuantPages pages(dtype, 8, 4, 2, 64);
    ASSERT_TRUE(write(pages.layout).ok());
    for (int64_t t = 0; t < n; ++t) {
      if (slots[t] < 0) continue;
      for (int32_t h = 0; h < 2; ++h) {
        ASSERT_EQ(pages.RowBytes(pages.layout.k, slots[t], h),
                  Quantize(dtype, f32.Row(f32.layout.k, slots[t], h)));
        const std::vector<float> v_row(&v[t * row + h * 64], &v[t * row + (h + 1) * 64]);
        ASSERT_EQ(pages.RowBytes(pages.layout.v, slots[t], h), Quantize(dtype, v_row));
      }
    }
    // Untouched slots keep their bytes.
    EXPECT_EQ(pages.RowBytes(pages.layout.k, 1, 0),
              std::vector<unsigned char>(pages.layout.RowUnits(), 0x5a));
  }
}

// K and V rows of `slots.size()` tokens written as given (no RoPE).
absl::Status WriteRows(const PagedKvLayout& layout, const std::vector<float>& k,
                       const std::vector<float>& v, const std::vector<int64_t>& slots) {
  return cpu::ReshapeAndCache({.k = k.data(),
                               .v = v.data(),
                               .slot_mapping = slots.data(),
                               .num_tokens = std::ssize(slots),
                               .rotate = false,
                               .cache = layout});
}

// Attention of one decode token (nq heads) at position len - 1 of a sequence of `len` cached
// keys in `table`'s blocks.
std::vector<float> DecodeOne(const PagedKvLayout& layout, const std::vector<float>& q, int32_t nq,
                             const std::vector<int32_t>& table, int32_t len) {
  const std::vector<int32_t> positions = {len - 1}, qsl = {0, 1}, kv_lens = {len};
  std::vector<float> out(q.size(), NAN);
  const absl::Status status =
      cpu::PagedAttention({.q = q.data(),
                           .out = out.data(),
                           .positions = positions.data(),
                           .query_start_loc = qsl.data(),
                           .kv_lens = kv_lens.data(),
                           .block_tables = table.data(),
                           .num_tokens = 1,
                           .num_seqs = 1,
                           .num_q_heads = nq,
                           .max_blocks_per_seq = static_cast<int32_t>(table.size()),
                           .cache = layout});
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// Decode attention of one sequence (96 keys, GQA 4:1) over quantized pages: within 2e-6 of float64
// attention over the values the pages hold (dequantization is exact arithmetic), and within the
// dtype's stated error of attention over the unquantized keys and values (docs/kernels.md).
TEST(KvQuantTest, AttentionReadsTheQuantizedValues) {
  const int32_t hd = 64, nq = 4, len = 96;
  const auto k = RandomFloats(len * hd, 41, -2.0f, 2.0f);
  const auto v = RandomFloats(len * hd, 42);
  const auto q = RandomFloats(nq * hd, 43, -2.0f, 2.0f);
  std::vector<std::vector<float>> k_rows, v_rows;
  for (int32_t j = 0; j < len; ++j) {
    k_rows.emplace_back(&k[j * hd], &k[(j + 1) * hd]);
    v_rows.emplace_back(&v[j * hd], &v[(j + 1) * hd]);
  }
  std::vector<int64_t> slots(len);
  for (int32_t j = 0; j < len; ++j) slots[j] = (j / 16) * 16 + j % 16;  // blocks 0..5 in order
  const std::vector<int32_t> table = {0, 1, 2, 3, 4, 5};
  const std::pair<DType, double> bounds[] = {{DType::kInt8, 0.01},    {DType::kFp8E4M3, 0.03},
                                             {DType::kFp8E5M2, 0.06}, {DType::kQ8_0, 0.01},
                                             {DType::kQ4_0, 0.08},    {DType::kQ4_1, 0.08}};
  for (const auto& [dtype, bound] : bounds) {
    QuantPages pages(dtype, 6, 16, 1, hd);
    ASSERT_TRUE(WriteRows(pages.layout, k, v, slots).ok());
    std::vector<std::vector<float>> held_k, held_v;
    for (int32_t j = 0; j < len; ++j) {
      held_k.push_back(pages.Row(pages.layout.k, slots[j], 0));
      held_v.push_back(pages.Row(pages.layout.v, slots[j], 0));
    }
    const std::vector<float> out = DecodeOne(pages.layout, q, nq, table, len);
    double worst = 0;
    for (int32_t h = 0; h < nq; ++h) {
      const auto held = ReferenceDenseAttention(&q[h * hd], held_k, held_v, hd);
      const auto exact = ReferenceDenseAttention(&q[h * hd], k_rows, v_rows, hd);
      for (int32_t d = 0; d < hd; ++d) {
        ASSERT_NEAR(out[h * hd + d], held[d], 2e-6) << DTypeName(dtype);
        worst = std::max(worst, std::fabs(out[h * hd + d] - exact[d]));
      }
    }
    EXPECT_LE(worst, bound) << DTypeName(dtype);
    EXPECT_GT(worst, 0.0) << DTypeName(dtype) << ": quantization should change the output";
  }
}

// Re-rotation of a quantized key: dequantize, rotate as the f32 pages do, quantize again (bytes
// equal); V rows move as bytes; in place with partial rotary dims re-quantizes the whole row.
TEST(KvQuantTest, ReRotationRequantizesTheRotatedRow) {
  RopeConfig config;
  config.head_dim = 64;
  config.rotary_dim = 32;
  auto table = RopeTable::Create(config, 4096);
  ASSERT_TRUE(table.ok());
  const auto k = RandomFloats(4 * 128, 51, -2.0f, 2.0f);
  const auto v = RandomFloats(4 * 128, 52);
  const std::vector<int64_t> write_slots = {0, 5, 9, 14};
  const std::vector<int32_t> positions = {3, 40, 700, 2000};
  const std::vector<int64_t> src = {0, 5, 9, 14}, dst = {1, 5, 10, 15};
  const std::vector<int32_t> new_positions = {1000, 41, 3, 2500};
  for (DType dtype : kQuantized) {
    QuantPages pages(dtype, 4, 4, 2, 64);
    QuantPages f32(DType::kF32, 4, 4, 2, 64);
    ASSERT_TRUE(cpu::ReshapeAndCache({.k = k.data(),
                                      .v = v.data(),
                                      .positions = positions.data(),
                                      .slot_mapping = write_slots.data(),
                                      .num_tokens = 4,
                                      .rope = table->View(),
                                      .cache = pages.layout})
                    .ok());
    for (int64_t slot : write_slots) {  // the f32 pages hold exactly the quantized values
      for (int32_t h = 0; h < 2; ++h) {
        for (const void* base : {pages.layout.k, pages.layout.v}) {
          const auto row = pages.Row(base, slot, h);
          void* to = base == pages.layout.k ? f32.layout.k : f32.layout.v;
          StoreKvRow(to, DType::kF32, f32.layout.SlotOffset(slot) + h * 64, 64, row.data());
        }
      }
    }
    for (QuantPages* p : {&pages, &f32}) {
      ASSERT_TRUE(cpu::ReRotate({.src_slots = src.data(),
                                 .dst_slots = dst.data(),
                                 .old_positions = positions.data(),
                                 .new_positions = new_positions.data(),
                                 .num_tokens = 4,
                                 .rope = table->View(),
                                 .cache = p->layout})
                      .ok());
    }
    for (size_t t = 0; t < dst.size(); ++t) {
      for (int32_t h = 0; h < 2; ++h) {
        ASSERT_EQ(pages.RowBytes(pages.layout.k, dst[t], h),
                  Quantize(dtype, f32.Row(f32.layout.k, dst[t], h)))
            << DTypeName(dtype) << " token " << t;
        ASSERT_EQ(pages.RowBytes(pages.layout.v, dst[t], h),
                  pages.RowBytes(pages.layout.v, src[t], h));
      }
    }
  }
}

// Quantized rows in the other page layouts (HND pages, vLLM's joint K/V tensor, both joint
// orders, a padded block stride): the same KV write and attention give the bits of the default
// separate NHD layout.
TEST(KvQuantTest, EveryLayoutGivesTheSameAttention) {
  const int32_t hd = 64, nq = 4, nkv = 2, len = 40, num_blocks = 4, bs = 16;
  const auto k = RandomFloats(len * nkv * hd, 81, -2.0f, 2.0f);
  const auto v = RandomFloats(len * nkv * hd, 82);
  const auto q = RandomFloats(nq * hd, 83, -2.0f, 2.0f);
  std::vector<int64_t> slots(len);
  for (int32_t j = 0; j < len; ++j)
    slots[j] = (j / bs == 0 ? 2 : j / bs == 1 ? 0 : 3) * bs + j % bs;
  const std::vector<int32_t> table = {2, 0, 3};
  for (DType dtype : kQuantized) {
    const PagedKvShape shape{.dtype = dtype,
                             .num_blocks = num_blocks,
                             .block_size = bs,
                             .num_kv_heads = nkv,
                             .head_dim = hd};
    const int64_t page = PageElementsOf(shape);
    std::vector<unsigned char> bytes(static_cast<size_t>(4 * page * num_blocks + 64));
    auto attend = [&](PagedKvLayout layout) {
      std::fill(bytes.begin(), bytes.end(), 0x5a);
      EXPECT_TRUE(WriteRows(layout, k, v, slots).ok());
      return DecodeOne(layout, q, nq, table, len);
    };
    unsigned char* base = bytes.data();
    const std::vector<float> want = attend(SeparateKvLayout(base, base + page * num_blocks, shape));
    PagedKvLayout padded = SeparateKvLayout(base, base + 2 * page * num_blocks, shape);
    padded.block_stride = 2 * page;
    for (const PagedKvLayout& layout :
         {SeparateKvLayout(base, base + page * num_blocks, shape, KvPageOrder::kHND),
          JointKvLayout(base, shape), JointKvLayout(base, shape, KvPageOrder::kHND), padded}) {
      ASSERT_EQ(attend(layout), want) << DTypeName(dtype);
    }
  }
}

TEST(KvQuantTest, BadInputIsRefusedAndTouchesNothing) {
  QuantPages pages(DType::kQ4_0, 2, 4, 1, 64);
  pages.layout.head_dim = 48;  // not a multiple of q4_0's 32-value blocks
  const auto k = RandomFloats(48, 61);
  const std::vector<int64_t> slots = {0};
  const auto before = pages.bytes;
  const absl::Status status = cpu::ReshapeAndCache({.k = k.data(),
                                                    .v = k.data(),
                                                    .slot_mapping = slots.data(),
                                                    .num_tokens = 1,
                                                    .rotate = false,
                                                    .cache = pages.layout});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("q4_0"), std::string::npos) << status.message();
  EXPECT_EQ(pages.bytes, before);
  std::vector<float> out(64);
  const std::vector<int64_t> rows = {0};
  EXPECT_EQ(cpu::GatherRows({.src = pages.bytes.data(),
                             .rows = rows.data(),
                             .out = out.data(),
                             .num_rows = 1,
                             .num_src_rows = 4,
                             .width = 36,
                             .src_dtype = DType::kInt8})
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagedkv
