// Copyright 2026 The pagedkv Authors.
//
// The AVX2 int8 kernel for Q4_K / Q6_K (compiled with target attributes; runs only where
// Avx2Supported() says so). It reads the matrix's Int8Tiles (int8_tiles.h: 16 W rows per tile,
// each 32-value block as 4-value groups of the 16 rows, scales decoded) as two halves of 8 rows,
// one output column per int32 / fp32 lane of a 256-bit vector:
//   - per block and row of x, maddubs of each group's 32 bytes (8 rows x 4 values, unsigned)
//     against 4 bytes of x broadcast gives the rows' pair sums in int16, madd with ones widens
//     them to the rows' int32 partial sums: Q4_K's 8 groups are added in int16 first (each pair at
//     most 2 * 15 * 127, all 8 at most 30,480 < 2^15), Q6_K's (q + 32 up to 63: pairs up to
//     16,002) are widened per group into its two halves' sums;
//   - the chain of int8_activations.h runs in the 8 lanes in the portable loop's order (Q4_K:
//     fma(dw * dx, isum), fma(-mw, sx); Q6_K: isum = sc_lo * lo + sc_hi * hi in int32, then
//     fma(d * dx, isum)), so the same bits as every other kernel.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/int8_linear.h"
#include "kernels/cpu/int8_x86_inl.h"
#include "pagedkv/kernels/int8_activations.h"
#include "pagedkv/kernels/quant_blocks.h"

namespace pagedkv::cpu::int8_kernels {

namespace {

// x's 4 bytes of group g (values 4g .. 4g + 3) of block xb, broadcast.
PAGEDKV_AVX2 inline __m256i XWord(const Int8Rows& x, int64_t xb, int g) {
  int32_t word;
  std::memcpy(&word, x.q + xb * kQuantBlockValues + 4 * g, 4);
  return _mm256_set1_epi32(word);
}

// Q4_K: one block of half h (rows 8h .. 8h + 7) of a tile for RX rows of x.
template <int RX>
PAGEDKV_AVX2 inline void Q4KStep(const Int8Rows& x, int64_t row, int64_t b, const unsigned char* at,
                                 int h, __m256* acc) {
  const __m256i low = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  __m256i groups[8];
  for (int v = 0; v < 4; ++v) {
    const __m256i packed =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at + 64 * v + 32 * h));
    groups[v] = _mm256_and_si256(packed, low);
    groups[v + 4] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low);
  }
  const __m256 dw = _mm256_loadu_ps(reinterpret_cast<const float*>(at + 256 + 32 * h));
  const __m256 neg_mw = _mm256_loadu_ps(reinterpret_cast<const float*>(at + 320 + 32 * h));
  for (int r = 0; r < RX; ++r) {
    const int64_t xb = (row + r) * x.blocks_per_row + b;
    __m256i pairs = _mm256_setzero_si256();
    for (int g = 0; g < 8; ++g) {
      pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(groups[g], XWord(x, xb, g)));
    }
    const __m256i isum = _mm256_madd_epi16(pairs, ones);
    const __m256 dd = _mm256_mul_ps(dw, _mm256_set1_ps(x.scale[xb]));
    acc[r] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(isum), acc[r]);
    acc[r] = _mm256_fmadd_ps(neg_mw, _mm256_set1_ps(x.sum[xb]), acc[r]);
  }
}

// Q6_K: one block of half h of a tile for RX rows of x.
template <int RX>
PAGEDKV_AVX2 inline void Q6KStep(const Int8Rows& x, int64_t row, int64_t b, const unsigned char* at,
                                 int h, __m256* acc) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i groups[8];
  for (int g = 0; g < 8; ++g) {
    groups[g] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at + 64 * g + 32 * h));
  }
  const __m256i sc_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at + 512 + 32 * h));
  const __m256i sc_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at + 576 + 32 * h));
  const __m256 d = _mm256_loadu_ps(reinterpret_cast<const float*>(at + 640 + 32 * h));
  for (int r = 0; r < RX; ++r) {
    const int64_t xb = (row + r) * x.blocks_per_row + b;
    __m256i lo = _mm256_set1_epi32(-32 * x.qsum_lo[xb]);
    __m256i hi = _mm256_set1_epi32(-32 * (x.qsum[xb] - x.qsum_lo[xb]));
    for (int g = 0; g < 4; ++g) {
      lo = _mm256_add_epi32(
          lo, _mm256_madd_epi16(_mm256_maddubs_epi16(groups[g], XWord(x, xb, g)), ones));
      hi = _mm256_add_epi32(
          hi, _mm256_madd_epi16(_mm256_maddubs_epi16(groups[g + 4], XWord(x, xb, g + 4)), ones));
    }
    const __m256i isum =
        _mm256_add_epi32(_mm256_mullo_epi32(sc_lo, lo), _mm256_mullo_epi32(sc_hi, hi));
    const __m256 dd = _mm256_mul_ps(d, _mm256_set1_ps(x.scale[xb]));
    acc[r] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(isum), acc[r]);
  }
}

// y[r][c] (+)= x[row + r] . W[16 t + 8 h + c] for r < RX, c < 8.
template <WeightType kType, int RX>
PAGEDKV_AVX2 void HalfTile(const Int8Rows& x, int64_t row, const Int8Tiles& tiles, int64_t t, int h,
                           float* y, int64_t ldy, bool accumulate) {
  __m256 acc[RX];
  for (int r = 0; r < RX; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < x.blocks_per_row; ++b) {
    if constexpr (kType == WeightType::kQ4_K) {
      Q4KStep<RX>(x, row, b, tiles.block(t, b), h, acc);
    } else {
      Q6KStep<RX>(x, row, b, tiles.block(t, b), h, acc);
    }
  }
  for (int r = 0; r < RX; ++r) {
    float* out = y + r * ldy;
    _mm256_storeu_ps(out, accumulate ? _mm256_add_ps(_mm256_loadu_ps(out), acc[r]) : acc[r]);
  }
}

// Every row of x against tiles [j_begin / 16, j_end / 16), 4 rows of x at a time.
template <WeightType kType>
PAGEDKV_AVX2 void SuperColumns(const QuantLinearArgs& a, const Int8Rows& x, const Int8Tiles& tiles,
                               int64_t j_begin, int64_t j_end) {
  for (int64_t j = j_begin; j < j_end; j += kInt8TileRows) {
    for (int h = 0; h < 2; ++h) {
      float* y = a.y + j + 8 * h;
      int64_t i = 0;
      for (; i + 4 <= a.m; i += 4) {
        HalfTile<kType, 4>(x, i, tiles, j / kInt8TileRows, h, y + i * a.n, a.n, a.accumulate);
      }
      for (; i < a.m; ++i) {
        HalfTile<kType, 1>(x, i, tiles, j / kInt8TileRows, h, y + i * a.n, a.n, a.accumulate);
      }
    }
  }
}

}  // namespace

void Avx2TiledSuperColumns(const QuantLinearArgs& a, const Int8Rows& x, const Int8Tiles& tiles,
                           int64_t j_begin, int64_t j_end) {
  if (a.w_type == WeightType::kQ4_K) {
    return SuperColumns<WeightType::kQ4_K>(a, x, tiles, j_begin, j_end);
  }
  SuperColumns<WeightType::kQ6_K>(a, x, tiles, j_begin, j_end);
}

}  // namespace pagedkv::cpu::int8_kernels
