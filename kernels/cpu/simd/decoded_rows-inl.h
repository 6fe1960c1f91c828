// Copyright 2026 The pagedkv Authors.
//
// Per-target (Highway -inl.h convention, like panel_tile-inl.h, whose tile it runs)
// QuantLinear over the weight types without a block-in-registers decode (F16, BF16, Q4_K, Q6_K;
// layouts in pagedkv/kernels/quant_blocks.h). Values are decoded with the bits of the load-time
// conversion (QuantValue; engine/model/formats/gguf_dequant.cc), a vector at a time (F16C, shifts,
// the super-blocks' integer and scale steps in lanes), and then
//   - m < kQuantPanelMinRows: F16 / BF16 rows are widened in registers and multiplied with x
//     (HalvesDot; SSE4 and scalar F16: as Q4_K / Q6_K); Q4_K / Q6_K rows are decoded once into
//     an fp32 row in cache and dotted with every row of x (RowDot). Both use four vector chains in
//     k order, then one, summed in a fixed order, then a scalar tail, so a y[i][j] does not depend
//     on m, on the column split or on the thread count;
//   - m >= kQuantPanelMinRows: each panel's rows decoded 16 rows by 64 (halves) or 256 values at
//     a time and transposed into the packed panel that the packed tile runs over: PackedLinear's
//     bits over the converted weights.
// Every W value is decoded once per call (m < 16: per row of x for the halves), as a conversion
// at load decodes it once per load.
// Only quant_linear_simd.cc includes this file (it defines HWY_NOINLINE functions).
//
// Example (inside HWY_NAMESPACE):
//   DecodedColumnsImpl(args, j_begin, j_end);
#if defined(PAGEDKV_KERNELS_CPU_SIMD_DECODED_ROWS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PAGEDKV_KERNELS_CPU_SIMD_DECODED_ROWS_INL_H_
#undef PAGEDKV_KERNELS_CPU_SIMD_DECODED_ROWS_INL_H_
#else
#define PAGEDKV_KERNELS_CPU_SIMD_DECODED_ROWS_INL_H_
#endif

#include <algorithm>
#include <cstdint>
#include <vector>

#include "hwy/highway.h"
#include "kernels/cpu/simd/panel_tile-inl.h"
#include "pagedkv/kernels/op_args.h"
#include "pagedkv/kernels/quant_blocks.h"

HWY_BEFORE_NAMESPACE();
namespace pagedkv::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// F16 values [0, k) into out: eight at a time by F16C (AVX2 and up), the rest one by one.
HWY_INLINE void DecodeF16(const unsigned char* HWY_RESTRICT row, int64_t k,
                          float* HWY_RESTRICT out) {
  int64_t i = 0;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  for (; i + 8 <= k; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
#endif
  for (; i < k; ++i) out[i] = F16BitsToF32(QuantU16At(row + 2 * i));
}

// BF16 values [0, k) into out: the 16 bits shifted into the top of each fp32 lane.
HWY_INLINE void DecodeBF16(const unsigned char* HWY_RESTRICT row, int64_t k,
                           float* HWY_RESTRICT out) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  const hn::Rebind<uint32_t, decltype(df)> du32;
  const auto n = static_cast<int64_t>(hn::Lanes(df));
  const auto* bits = reinterpret_cast<const uint16_t*>(row);
  int64_t i = 0;
  for (; i + n <= k; i += n) {
    const auto wide = hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, bits + i)));
    hn::StoreU(hn::BitCast(df, wide), df, out + i);
  }
  for (; i < k; ++i) out[i] = BF16BitsToF32(QuantU16At(row + 2 * i));
}

// One Q4_K super-block into out[0, 256): per sub-block of 32, (d sc) q - dmin m; sub-blocks
// 2h and 2h + 1 from the low and high nibbles of the same 32 bytes, widened once.
HWY_INLINE void DecodeQ4K(const unsigned char* HWY_RESTRICT b, float* HWY_RESTRICT out) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<uint8_t, decltype(df)> du8;
  const hn::Rebind<uint32_t, decltype(df)> du32;
  const hn::Rebind<int32_t, decltype(df)> di32;
  const auto n = static_cast<int32_t>(hn::Lanes(df));
  const float d = QuantF16At(b), dmin = QuantF16At(b + 2);
  for (int32_t h = 0; h < 4; ++h) {
    int32_t sc0 = 0, m0 = 0, sc1 = 0, m1 = 0;
    QuantQ4KScaleMin(b, 2 * h, &sc0, &m0);
    QuantQ4KScaleMin(b, 2 * h + 1, &sc1, &m1);
    const auto dsc0 = hn::Set(df, d * static_cast<float>(sc0));
    const auto dm0 = hn::Set(df, dmin * static_cast<float>(m0));
    const auto dsc1 = hn::Set(df, d * static_cast<float>(sc1));
    const auto dm1 = hn::Set(df, dmin * static_cast<float>(m1));
    const unsigned char* q = b + 16 + h * 32;
    for (int32_t l = 0; l < 32; l += n) {  // N divides 32 on every target
      const auto bytes = hn::PromoteTo(du32, hn::LoadU(du8, q + l));
      const auto lo = hn::ConvertTo(df, hn::BitCast(di32, hn::And(bytes, hn::Set(du32, 0x0Fu))));
      const auto hi = hn::ConvertTo(df, hn::BitCast(di32, hn::ShiftRight<4>(bytes)));
      hn::StoreU(hn::Sub(hn::Mul(dsc0, lo), dm0), df, out + 64 * h + l);
      hn::StoreU(hn::Sub(hn::Mul(dsc1, hi), dm1), df, out + 64 * h + 32 + l);
    }
  }
}

// One Q6_K super-block into out[0, 256): d * float(sc (q - 32)), 16 values (one scale) at a time.
// Value j: low nibble in byte 64 (j / 128) + j % 32 + 32 (quarter % 2) (high nibble for quarters
// 2, 3 of its 128), top bits 2 quarter of byte 128 + 32 (j / 128) + j % 32, scale j / 16.
HWY_INLINE void DecodeQ6K(const unsigned char* HWY_RESTRICT b, float* HWY_RESTRICT out) {
  const float d = QuantF16At(b + 208);
  for (int32_t g = 0; g < 16; ++g) {  // values [16 g, 16 g + 16)
    const int32_t half = g / 8, quarter = (g % 8) / 2, l0 = (g % 2) * 16;
    const unsigned char* ql = b + half * 64 + (quarter % 2) * 32 + l0;
    const unsigned char* qh = b + 128 + half * 32 + l0;
    const int nibble_shift = quarter < 2 ? 0 : 4, high_shift = 2 * quarter;
    const int32_t sc = static_cast<int8_t>(b[192 + g]);
    const hn::ScalableTag<float> df;
    const hn::Rebind<uint8_t, decltype(df)> du8;
    const hn::Rebind<int32_t, decltype(df)> di32;
    const auto n = static_cast<int32_t>(hn::Lanes(df));
    for (int32_t l = 0; l < 16; l += n) {  // N divides 16 on every target
      const auto low = hn::BitCast(
          di32, hn::PromoteTo(hn::Rebind<uint32_t, decltype(df)>(), hn::LoadU(du8, ql + l)));
      const auto high = hn::BitCast(
          di32, hn::PromoteTo(hn::Rebind<uint32_t, decltype(df)>(), hn::LoadU(du8, qh + l)));
      const auto q = hn::Sub(
          hn::Or(hn::And(hn::ShiftRightSame(low, nibble_shift), hn::Set(di32, 0x0F)),
                 hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(high, high_shift), hn::Set(di32, 3)))),
          hn::Set(di32, 32));
      const auto v = hn::ConvertTo(df, hn::Mul(q, hn::Set(di32, sc)));
      hn::StoreU(hn::Mul(hn::Set(df, d), v), df, out + 16 * g + l);
    }
  }
}

// Values [k0, k0 + count) of one W row into out[0, count), each equal to QuantValue(type, row,
// kk) bit for bit. REQUIRES: type one of F16, BF16, Q4_K, Q6_K; k0 and count multiples of its
// block values.
HWY_INLINE void DecodeRange(WeightType type, const unsigned char* HWY_RESTRICT row, int64_t k0,
                            int64_t count, float* HWY_RESTRICT out) {
  switch (type) {
    case WeightType::kF16:
      return DecodeF16(row + 2 * k0, count, out);
    case WeightType::kBF16:
      return DecodeBF16(row + 2 * k0, count, out);
    case WeightType::kQ4_K:
      for (int64_t s = 0; s < count / kQuantSuperValues; ++s) {
        DecodeQ4K(row + (k0 / kQuantSuperValues + s) * 144, out + s * kQuantSuperValues);
      }
      return;
    default:
      for (int64_t s = 0; s < count / kQuantSuperValues; ++s) {
        DecodeQ6K(row + (k0 / kQuantSuperValues + s) * 210, out + s * kQuantSuperValues);
      }
      return;
  }
}

// x . w over k values in fp32: four vector chains in k order, then one, their sum, the lane sum,
// then the remaining values one by one.
HWY_INLINE float RowDot(const float* HWY_RESTRICT x, const float* HWY_RESTRICT w, int64_t k) {
  const hn::ScalableTag<float> df;
  const auto n = static_cast<int64_t>(hn::Lanes(df));
  auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  int64_t i = 0;
  for (; i + 4 * n <= k; i += 4 * n) {
    a0 = hn::MulAdd(hn::LoadU(df, x + i), hn::LoadU(df, w + i), a0);
    a1 = hn::MulAdd(hn::LoadU(df, x + i + n), hn::LoadU(df, w + i + n), a1);
    a2 = hn::MulAdd(hn::LoadU(df, x + i + 2 * n), hn::LoadU(df, w + i + 2 * n), a2);
    a3 = hn::MulAdd(hn::LoadU(df, x + i + 3 * n), hn::LoadU(df, w + i + 3 * n), a3);
  }
  for (; i + n <= k; i += n) a0 = hn::MulAdd(hn::LoadU(df, x + i), hn::LoadU(df, w + i), a0);
  float sum = hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; i < k; ++i) sum += x[i] * w[i];
  return sum;
}

// Whether this target widens F16 / BF16 vectors exactly in registers (F16: by F16C, AVX2 and up).
HWY_INLINE bool WidensInRegisters(WeightType type) {
  return type == WeightType::kBF16 ||
         (type == WeightType::kF16 && HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2);
}

// N half values at p (F16 or BF16) as fp32 lanes. REQUIRES: WidensInRegisters(type).
HWY_INLINE hn::Vec<hn::ScalableTag<float>> Halves(WeightType type, const unsigned char* p) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  const hn::Rebind<uint32_t, decltype(df)> du32;
  const auto bits = hn::LoadU(du16, reinterpret_cast<const uint16_t*>(p));
  if (type == WeightType::kBF16)
    return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, bits)));
  const hn::Rebind<hwy::float16_t, decltype(df)> df16;
  return hn::PromoteTo(df, hn::BitCast(df16, bits));
}

// x . W row for an F16 / BF16 row widened in registers, the chains of RowDot.
HWY_INLINE float HalvesDot(WeightType type, const float* HWY_RESTRICT x,
                           const unsigned char* HWY_RESTRICT row, int64_t k) {
  const hn::ScalableTag<float> df;
  const auto n = static_cast<int64_t>(hn::Lanes(df));
  auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  int64_t i = 0;
  for (; i + 4 * n <= k; i += 4 * n) {
    a0 = hn::MulAdd(hn::LoadU(df, x + i), Halves(type, row + 2 * i), a0);
    a1 = hn::MulAdd(hn::LoadU(df, x + i + n), Halves(type, row + 2 * (i + n)), a1);
    a2 = hn::MulAdd(hn::LoadU(df, x + i + 2 * n), Halves(type, row + 2 * (i + 2 * n)), a2);
    a3 = hn::MulAdd(hn::LoadU(df, x + i + 3 * n), Halves(type, row + 2 * (i + 3 * n)), a3);
  }
  for (; i + n <= k; i += n) a0 = hn::MulAdd(hn::LoadU(df, x + i), Halves(type, row + 2 * i), a0);
  float sum = hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; i < k; ++i) sum += x[i] * QuantValue(type, row, i);
  return sum;
}

// Columns [j_begin, j_end) of y: each W row widened in registers (F16 / BF16 where the target
// can) or else decoded once into an fp32 row, then dotted with every row of x.
HWY_NOINLINE void DecodedColumnsImpl(const QuantLinearArgs& a, int64_t j_begin, int64_t j_end) {
  const int64_t rb = WeightRowBytes(a.w_type, a.k);
  const auto* w = static_cast<const unsigned char*>(a.w);
  if (WidensInRegisters(a.w_type)) {
    for (int64_t j = j_begin; j < j_end; ++j) {
      for (int64_t r = 0; r < a.m; ++r) {
        const float v = HalvesDot(a.w_type, a.x + r * a.k, w + j * rb, a.k);
        float* out = a.y + r * a.n + j;
        *out = a.accumulate ? *out + v : v;
      }
    }
    return;
  }
  std::vector<float> row(static_cast<size_t>(a.k));
  for (int64_t j = j_begin; j < j_end; ++j) {
    DecodeRange(a.w_type, w + j * rb, 0, a.k, row.data());
    for (int64_t r = 0; r < a.m; ++r) {
      const float v = RowDot(a.x + r * a.k, row.data(), a.k);
      float* out = a.y + r * a.n + j;
      *out = a.accumulate ? *out + v : v;
    }
  }
}

constexpr int64_t kDecodeChunk = kQuantSuperValues;  // whole super-blocks
constexpr int64_t kHalvesChunk = 64;                 // F16 / BF16: `rows` stays in L1

// W rows [j0, j0 + cols) decoded into one packed panel (zero columns past cols), a chunk of
// values at a time into `rows` (row c at c * chunk), then transposed into panel rows (scalar:
// gathers are slower on the CPUs we run).
HWY_NOINLINE void DecodeRowsPanel(const QuantLinearArgs& a, int64_t j0, int64_t cols,
                                  float* HWY_RESTRICT rows, float* HWY_RESTRICT panel) {
  const int64_t p = PanelWidthOfTarget();
  const int64_t rb = WeightRowBytes(a.w_type, a.k);
  const auto* w = static_cast<const unsigned char*>(a.w);
  const int64_t chunk = QuantBlockValuesOf(a.w_type) == 1 ? kHalvesChunk : kDecodeChunk;
  // W rows per transposed group: a cache line of a panel row (the whole row on narrow targets).
  const int64_t group = std::min<int64_t>(16, p);
  for (int64_t k0 = 0; k0 < a.k; k0 += chunk) {
    const int64_t len = std::min(chunk, a.k - k0);
    for (int64_t g0 = 0; g0 < p; g0 += group) {
      const int64_t live = std::clamp<int64_t>(cols - g0, 0, group);
      for (int64_t c = 0; c < live; ++c) {
        DecodeRange(a.w_type, w + (j0 + g0 + c) * rb, k0, len, rows + c * chunk);
      }
      for (int64_t kk = 0; kk < len; ++kk) {
        float* HWY_RESTRICT dst = panel + (k0 + kk) * p + g0;
        for (int64_t c = 0; c < live; ++c) dst[c] = rows[c * chunk + kk];
        for (int64_t c = live; c < group; ++c) dst[c] = 0.0f;
      }
    }
  }
}

// PanelAllRows in a function of its own: inlined into DecodedPanelsImpl, GCC kept the tile's
// accumulators on the stack (a store per vector and step, 4x slower).
HWY_NOINLINE void PanelAllRowsApart(const QuantLinearArgs& a, const float* HWY_RESTRICT panel,
                                    int64_t j0, int64_t cols) {
  PanelAllRows(a.x, a.m, a.k, panel, a.y + j0, a.n, cols, a.accumulate);
}

// Column panels [panel_begin, panel_end): each decoded (DecodeRowsPanel), then every row of x
// runs the packed tile over it.
HWY_NOINLINE void DecodedPanelsImpl(const QuantLinearArgs& a, int64_t panel_begin,
                                    int64_t panel_end, float* HWY_RESTRICT scratch) {
  const int64_t p = PanelWidthOfTarget();
  std::vector<float> rows(static_cast<size_t>(std::min<int64_t>(16, p) * kDecodeChunk));
  for (int64_t panel = panel_begin; panel < panel_end; ++panel) {
    const int64_t j0 = panel * p;
    const int64_t cols = std::min(p, a.n - j0);
    DecodeRowsPanel(a, j0, cols, rows.data(), scratch);
    PanelAllRowsApart(a, scratch, j0, cols);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace pagedkv::cpu::simd
HWY_AFTER_NAMESPACE();

#endif  // include guard
