// Copyright 2026 The pagedkv Authors.
//
// The AVX2 int8 kernels (compiled with target attributes, so the file builds for any -march and
// runs only where Avx2Supported() says so). A tile is 8 W rows by RX rows of x. Per block:
//   - each W row's 32 values become one vector of unsigned bytes u (Q4_0 / Q4_1: the nibbles
//     0..15 in value order; Q8_0: |w|, with the signs moved onto x: sign(qx, w)), so maddubs
//     (u8 x s8 -> pairs of int16, no saturation: 2 * 15 * 127 and 2 * 128 * 127 fit) then madd
//     with ones gives 8 int32 partial sums per (x row, W row);
//   - the 8 W rows' partial vectors are reduced to one vector of their 8 exact block sums (Q4_0:
//     less 8 * sum(qx), the nibbles' bias), and the fp32 chain of int8_activations.h runs in
//     the 8 lanes, one lane per output column: the portable loop's operations in its order,
//     so the same bits.
#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "kernels/cpu/int8_linear.h"
#include "kernels/cpu/int8_x86_inl.h"
#include "kernels/cpu/thread_scratch.h"
#include "pagedkv/kernels/int8_activations.h"
#include "pagedkv/kernels/quant_blocks.h"

namespace pagedkv::cpu::int8_kernels {

namespace {

// As in quant_linear_simd.cc: decode streams each weight once per token; prefetch ahead of it.
constexpr int64_t kPrefetchBytes = 8192;

// Rows of x from which W is decoded once per call, a panel of kPanelTiles tiles of 8 rows at a
// time, before the rows of x read it.
constexpr int64_t kDecodeMinRows = 8;
constexpr int64_t kPanelTiles = 8;

// One W block as the unsigned maddubs operand (see the banner); *w_signs gets Q8_0's raw int8.
template <WeightType kType>
PAGEDKV_AVX2 inline __m256i UnsignedWeights(const unsigned char* block, __m256i* w_signs) {
  if constexpr (kType == WeightType::kQ8_0) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
    *w_signs = w;
    return _mm256_abs_epi8(w);  // -128 gives 0x80, which maddubs reads as 128
  } else {
    return x86::Nibbles(block, kType);
  }
}

// One block of 8 W rows as the tile consumes it: the unsigned bytes, Q8_0's signed bytes, and
// the rows' d (and Q4_1's m) as fp32 lanes.
struct BlockOperands {
  __m256i u[8];
  __m256i s[8];
  __m256 dw;
  __m256 mw;
};

// Reads 8 W rows' blocks straight from the file's bytes (few rows of x: each block is used by
// at most 4 rows, so decoding it ahead would cost more than it saves).
template <WeightType kType>
struct RawRows {
  const unsigned char* w;
  int64_t row_bytes;
  PAGEDKV_AVX2 void Load(int64_t b, BlockOperands* o) const {
    const unsigned char* wb = w + b * QuantBlockBytes(kType);
    for (int c = 0; c < 8; ++c) {
      __builtin_prefetch(reinterpret_cast<const void*>(
          reinterpret_cast<uintptr_t>(wb + c * row_bytes) + kPrefetchBytes));
      o->u[c] = UnsignedWeights<kType>(wb + c * row_bytes, &o->s[c]);
    }
    o->dw = x86::Halves8(wb, row_bytes, 0);
    if constexpr (kType == WeightType::kQ4_1) o->mw = x86::Halves8(wb, row_bytes, 2);
  }
};

// Bytes per block of a decoded tile: 8 groups of 32 bytes, group g holding values 4g..4g+3 of
// rows 0..7 (row c at bytes 4c..4c+3: Q4_0 / Q4_1 the nibbles 0..15, Q8_0 the int8 values), so
// one maddubs of a group against 4 bytes of x broadcast gives every row's partial sum in its own
// lanes (no horizontal sums); then 8 fp32 d and 8 fp32 m (Q4_1; unused otherwise).
constexpr int64_t kDecodedBlockBytes = 8 * 32 + 2 * 8 * sizeof(float);

// Decodes 8 W rows (all their blocks) into `out` (kDecodedBlockBytes per block, 32-byte aligned).
template <WeightType kType>
PAGEDKV_AVX2 void DecodeTile(const RawRows<kType>& rows, int64_t blocks, unsigned char* out) {
  for (int64_t b = 0; b < blocks; ++b) {
    BlockOperands o;
    rows.Load(b, &o);
    alignas(32) uint32_t words[8][8];  // [row][group]: 4 values of a row
    for (int c = 0; c < 8; ++c) {
      const __m256i bytes = kType == WeightType::kQ8_0 ? o.s[c] : o.u[c];
      _mm256_store_si256(reinterpret_cast<__m256i*>(words[c]), bytes);
    }
    unsigned char* at = out + b * kDecodedBlockBytes;
    for (int g = 0; g < 8; ++g) {
      const __m256i group =
          _mm256_setr_epi32(static_cast<int32_t>(words[0][g]), static_cast<int32_t>(words[1][g]),
                            static_cast<int32_t>(words[2][g]), static_cast<int32_t>(words[3][g]),
                            static_cast<int32_t>(words[4][g]), static_cast<int32_t>(words[5][g]),
                            static_cast<int32_t>(words[6][g]), static_cast<int32_t>(words[7][g]));
      _mm256_store_si256(reinterpret_cast<__m256i*>(at + 32 * g), group);
    }
    _mm256_store_ps(reinterpret_cast<float*>(at + 256), o.dw);
    if constexpr (kType == WeightType::kQ4_1) {
      _mm256_store_ps(reinterpret_cast<float*>(at + 256 + 32), o.mw);
    }
  }
}

// The exact integer sums of one block: lane c = sum over the block of W row c times x's q.
// Q4_0 / Q4_1: the 8 groups' int16 pair sums are added in int16 (each at most 2 * 15 * 127, all
// 8 at most 30,480 < 2^15), then widened once; Q8_0's pairs (up to 2 * 128 * 127) are widened
// per group.
template <WeightType kType>
PAGEDKV_AVX2 inline __m256i InterleavedSums(const __m256i* groups, const int8_t* xq) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i sum = _mm256_setzero_si256();
  for (int g = 0; g < 8; ++g) {
    int32_t word;
    std::memcpy(&word, xq + 4 * g, sizeof(word));
    const __m256i xv = _mm256_set1_epi32(word);
    if constexpr (kType == WeightType::kQ8_0) {
      const __m256i pairs =
          _mm256_maddubs_epi16(_mm256_abs_epi8(groups[g]), _mm256_sign_epi8(xv, groups[g]));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, ones));
    } else {
      sum = _mm256_add_epi16(sum, _mm256_maddubs_epi16(groups[g], xv));
    }
  }
  if constexpr (kType != WeightType::kQ8_0) sum = _mm256_madd_epi16(sum, ones);
  return sum;
}

// y[r][j0 + c] (+)= x[r] . W[j0 + c] for r < RX, c < 8, from a tile DecodeTile wrote: the same
// integer sums and the same fp32 chain as Tile, so the same bits.
template <WeightType kType, int RX>
PAGEDKV_AVX2 void DecodedTile(const Int8Rows& x, int64_t row, const unsigned char* tile, float* y,
                              int64_t ldy, bool accumulate) {
  const int64_t blocks = x.blocks_per_row;
  __m256 acc[RX];
  for (int r = 0; r < RX; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const unsigned char* at = tile + b * kDecodedBlockBytes;
    __m256i groups[8];
    for (int g = 0; g < 8; ++g) {
      groups[g] = _mm256_load_si256(reinterpret_cast<const __m256i*>(at + 32 * g));
    }
    const __m256 dw = _mm256_load_ps(reinterpret_cast<const float*>(at + 256));
    for (int r = 0; r < RX; ++r) {
      const int64_t xb = (row + r) * blocks + b;
      __m256i isum = InterleavedSums<kType>(groups, x.q + xb * kQuantBlockValues);
      if constexpr (kType == WeightType::kQ4_0) {
        isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(8 * x.qsum[xb]));
      }
      const __m256 dd = _mm256_mul_ps(dw, _mm256_set1_ps(x.scale[xb]));
      acc[r] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(isum), acc[r]);
      if constexpr (kType == WeightType::kQ4_1) {
        const __m256 mw = _mm256_load_ps(reinterpret_cast<const float*>(at + 256 + 32));
        acc[r] = _mm256_fmadd_ps(mw, _mm256_set1_ps(x.sum[xb]), acc[r]);
      }
    }
  }
  for (int r = 0; r < RX; ++r) {
    float* out = y + r * ldy;
    if (accumulate) acc[r] = _mm256_add_ps(_mm256_loadu_ps(out), acc[r]);
    _mm256_storeu_ps(out, acc[r]);
  }
}

// y[r][j0 + c] (+)= x[r] . W[j0 + c] for r < RX, c < 8, W's blocks read from the file's bytes.
template <WeightType kType, int RX>
PAGEDKV_AVX2 void Tile(const Int8Rows& x, int64_t row, const RawRows<kType>& source, float* y,
                       int64_t ldy, bool accumulate) {
  const int64_t blocks = x.blocks_per_row;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[RX];
  for (int r = 0; r < RX; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    BlockOperands w;
    source.Load(b, &w);
    for (int r = 0; r < RX; ++r) {
      const int64_t xb = (row + r) * blocks + b;
      const __m256i xq =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + xb * kQuantBlockValues));
      __m256i p[8];
      for (int c = 0; c < 8; ++c) {
        const __m256i xs = kType == WeightType::kQ8_0 ? _mm256_sign_epi8(xq, w.s[c]) : xq;
        p[c] = _mm256_madd_epi16(_mm256_maddubs_epi16(w.u[c], xs), ones);
      }
      __m256i isum = x86::LaneSums8(p);
      if constexpr (kType == WeightType::kQ4_0) {
        isum = _mm256_sub_epi32(isum, _mm256_set1_epi32(8 * x.qsum[xb]));
      }
      const __m256 dd = _mm256_mul_ps(w.dw, _mm256_set1_ps(x.scale[xb]));
      acc[r] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(isum), acc[r]);
      if constexpr (kType == WeightType::kQ4_1) {
        acc[r] = _mm256_fmadd_ps(w.mw, _mm256_set1_ps(x.sum[xb]), acc[r]);
      }
    }
  }
  for (int r = 0; r < RX; ++r) {
    float* out = y + r * ldy;
    if (accumulate) acc[r] = _mm256_add_ps(_mm256_loadu_ps(out), acc[r]);
    _mm256_storeu_ps(out, acc[r]);
  }
}

// Rows [0, m) of x against 8 W rows read from the file's bytes, 4 rows of x at a time.
template <WeightType kType>
PAGEDKV_AVX2 void RawRowsTimesTile(const QuantLinearArgs& a, const Int8Rows& x,
                                   const RawRows<kType>& raw, int64_t j) {
  int64_t i = 0;
  for (; i + 4 <= a.m; i += 4) Tile<kType, 4>(x, i, raw, a.y + i * a.n + j, a.n, a.accumulate);
  for (; i < a.m; ++i) Tile<kType, 1>(x, i, raw, a.y + i * a.n + j, a.n, a.accumulate);
}

// Rows [0, m) of x against `tiles` decoded tiles (columns j0 .. j0 + 8 * tiles): each group of 4
// rows of x runs every tile while its blocks are in L1, and the panel of tiles stays in L2.
template <WeightType kType>
PAGEDKV_AVX2 void RowsTimesPanel(const QuantLinearArgs& a, const Int8Rows& x,
                                 const unsigned char* panel, int64_t tiles, int64_t j0) {
  const int64_t tile_bytes = x.blocks_per_row * kDecodedBlockBytes;
  int64_t i = 0;
  for (; i + 4 <= a.m; i += 4) {
    for (int64_t t = 0; t < tiles; ++t) {
      DecodedTile<kType, 4>(x, i, panel + t * tile_bytes, a.y + i * a.n + j0 + 8 * t, a.n,
                            a.accumulate);
    }
  }
  for (; i < a.m; ++i) {
    for (int64_t t = 0; t < tiles; ++t) {
      DecodedTile<kType, 1>(x, i, panel + t * tile_bytes, a.y + i * a.n + j0 + 8 * t, a.n,
                            a.accumulate);
    }
  }
}

// The decoded panel's buffer (ThreadScratch); when it cannot be allocated the caller reads the
// file's bytes instead (the same bits).
struct DecodedPanelTag {};

// A column past the last whole tile: the portable chain for every row (same bits).
void TailColumn(const QuantLinearArgs& a, const Int8Rows& x, int64_t j) {
  const int64_t bb = QuantBlockBytes(a.w_type);
  const unsigned char* row = QuantRow(a.w, a.w_type, a.k, j);
  for (int64_t i = 0; i < a.m; ++i) {
    float acc = 0.0f;
    for (int64_t b = 0; b < x.blocks_per_row; ++b) {
      const int64_t xb = i * x.blocks_per_row + b;
      const int32_t isum = Int8BlockDot(a.w_type, row + b * bb, x.q + xb * kQuantBlockValues);
      acc = Int8BlockAccumulate(a.w_type, row + b * bb, x.scale[xb], x.sum[xb], isum, acc);
    }
    float* out = a.y + i * a.n + j;
    *out = a.accumulate ? *out + acc : acc;
  }
}

template <WeightType kType>
PAGEDKV_AVX2 void Columns(const QuantLinearArgs& a, const Int8Rows& x, int64_t j_begin,
                          int64_t j_end) {
  const int64_t rb = WeightRowBytes(kType, a.k);
  const auto* w = static_cast<const unsigned char*>(a.w);
  // Below kDecodeMinRows rows of x each tile of 8 W rows is read from the file's bytes by every
  // row; from there on, panels of up to kPanelTiles tiles are decoded once (DecodeTile) and every
  // row reads ready vectors. The columns past the last whole tile run the portable chain.
  const int64_t whole_end = j_begin + (j_end - j_begin) / 8 * 8;
  const int64_t tile_bytes = x.blocks_per_row * kDecodedBlockBytes;
  unsigned char* panel =
      a.m >= kDecodeMinRows
          ? ThreadScratch<DecodedPanelTag>(static_cast<size_t>(kPanelTiles * tile_bytes))
          : nullptr;
  for (int64_t j0 = j_begin; j0 < whole_end; j0 += 8 * kPanelTiles) {
    const int64_t tiles = std::min(kPanelTiles, (whole_end - j0) / 8);
    if (panel == nullptr) {
      for (int64_t t = 0; t < tiles; ++t) {
        RawRowsTimesTile<kType>(a, x, RawRows<kType>{w + (j0 + 8 * t) * rb, rb}, j0 + 8 * t);
      }
      continue;
    }
    for (int64_t t = 0; t < tiles; ++t) {
      DecodeTile<kType>(RawRows<kType>{w + (j0 + 8 * t) * rb, rb}, x.blocks_per_row,
                        panel + t * tile_bytes);
    }
    RowsTimesPanel<kType>(a, x, panel, tiles, j0);
  }
  for (int64_t j = whole_end; j < j_end; ++j) TailColumn(a, x, j);
}

// The largest of 8 fp32 lanes (each >= 0).
PAGEDKV_AVX2 inline float Max8(__m256 a) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

// One block of QuantizeActivationBlock, vectorised (the same operations per value).
PAGEDKV_AVX2 void QuantizeBlock(const float* x, int8_t* q, float* scale, int32_t* qsum) {
  __m256 v[4];
  for (int g = 0; g < 4; ++g) v[g] = _mm256_loadu_ps(x + 8 * g);
  // The block's largest |value| (max is exact: any order gives the same bits).
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const float amax = Max8(
      _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                    _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3]))));
  const float d = amax / 127.0f;
  const __m256 inv = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
  __m256i i32[4];
  for (int g = 0; g < 4; ++g) {
    __m256 r =
        _mm256_round_ps(_mm256_mul_ps(v[g], inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
    i32[g] = _mm256_cvtps_epi32(r);
  }
  // int32 -> int16 -> int8 packs work per 128-bit half; the permute restores value order.
  const __m256i i16a = _mm256_packs_epi32(i32[0], i32[1]);
  const __m256i i16b = _mm256_packs_epi32(i32[2], i32[3]);
  const __m256i i8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(i16a, i16b),
                                                 _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), i8);
  const __m256i s32 =
      _mm256_add_epi32(_mm256_add_epi32(i32[0], i32[1]), _mm256_add_epi32(i32[2], i32[3]));
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  *scale = d;
  *qsum = _mm_cvtsi128_si32(s);
}

}  // namespace

bool Avx2Supported() {
  // F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports has no "f16c". AVX2's
  // check includes the OS's YMM state, which F16C needs too.
  static const bool supported = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && ((ecx >> 29) & 1u) != 0;
    return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return supported;
}

void Avx2QuantizeBlocks(const float* x, int64_t blocks, int8_t* q, float* scale, int32_t* qsum) {
  for (int64_t b = 0; b < blocks; ++b) {
    QuantizeBlock(x + b * kQuantBlockValues, q + b * kQuantBlockValues, &scale[b], &qsum[b]);
  }
}

void Avx2Columns(const QuantLinearArgs& a, const Int8Rows& x, int64_t j_begin, int64_t j_end) {
  WithInt8Type(a.w_type, [&](auto t) { Columns<decltype(t)::value>(a, x, j_begin, j_end); });
}

}  // namespace pagedkv::cpu::int8_kernels
