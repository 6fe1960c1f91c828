// Copyright 2026 The pagedkv Authors.
//
// The AVX-512 VNNI int8 kernel (compiled with target attributes, so the file builds for any
// -march and runs only where VnniSupported() says so). A tile is 16 W rows: one output column per
// fp32 lane of a 512-bit vector.
//   - Each tile is first decoded, block by block, into 8 groups of 64 bytes: group g holds
//     values 4g..4g+3 of rows 0..15 (row c at bytes 4c..4c+3) as unsigned bytes u (Q4_0 / Q4_1:
//     the nibbles 0..15; Q8_0: w + 128, i.e. w ^ 0x80), then the rows' d (and Q4_1's m) as 16
//     fp32 lanes. The decode is an in-register transpose of 16 rows x 8 words.
//   - Per block and row of x, one vpdpbusd per group against 4 bytes of x broadcast adds the 16
//     rows' exact partial products into their own int32 lanes (u8 x s8 products summed in int32,
//     no saturation), starting from -bias * sum(qx) (Q4_0: 8, Q8_0: 128, Q4_1: 0), so the lanes
//     end as the exact block sums of int8_activations.h's step 2;
//   - the fp32 chain of step 3 runs in the 16 lanes: the portable loop's operations in its
//     order, so the same bits as every other kernel.
// Below kDecodeMinRows rows of x each tile is decoded alone (it stays in L1 while the rows read
// it); from there on panels of kPanelTiles tiles are decoded once per call and stay in L2. One
// row of x (decode) does not pay for the transpose: 8 W rows at a time, each row's block against
// x by one 256-bit vpdpbusd, the 8 rows' lanes summed (as the AVX2 kernel does after its
// maddubs + madd), then the same chain.
// GCC 12's AVX-512 intrinsics start their results from _mm512_undefined_*(), a self-initialised
// variable that -Wmaybe-uninitialized reports once inlined; nothing here reads an undefined value.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/int8_linear.h"
#include "kernels/cpu/int8_x86_inl.h"
#include "kernels/cpu/thread_scratch.h"
#include "pagedkv/kernels/int8_activations.h"
#include "pagedkv/kernels/quant_blocks.h"

#define PAGEDKV_VNNI \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))

namespace pagedkv::cpu::int8_kernels {

namespace {

constexpr int64_t kTileRows = 16;
// As in the AVX2 kernel: the decode streams each weight once per call; prefetch ahead of it.
constexpr int64_t kPrefetchBytes = 8192;
constexpr int64_t kDecodeMinRows = 8;
constexpr int64_t kPanelTiles = 8;

// Bytes per block of a decoded tile: 8 groups of 64 bytes, 16 fp32 d, 16 fp32 m (Q4_1).
constexpr int64_t kDecodedBlockBytes = 8 * 64 + 2 * 16 * sizeof(float);

// What the block sums start from, per unit of sum(qx): minus the weights' offset.
template <WeightType kType>
constexpr int32_t kBias = kType == WeightType::kQ4_0 ? 8 : (kType == WeightType::kQ8_0 ? 128 : 0);

// One W row's block as 32 unsigned bytes in value order (see the banner).
template <WeightType kType>
PAGEDKV_VNNI inline __m256i UnsignedRow(const unsigned char* block) {
  if constexpr (kType == WeightType::kQ8_0) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
    return _mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80)));
  } else {
    return x86::Nibbles(block, kType);
  }
}

// The f16 at byte `at` of 16 W rows' block, as fp32 lanes.
PAGEDKV_VNNI inline __m512 Halves16(const unsigned char* wb, int64_t row_bytes, int64_t at) {
  alignas(32) uint16_t h[16];
  for (int c = 0; c < 16; ++c) h[c] = QuantU16At(wb + c * row_bytes + at);
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h)));
}

// 16 consecutive f16 values at p, as fp32 lanes.
PAGEDKV_VNNI inline __m512 Halves16At(const unsigned char* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Rows 2p and 2p+1 (8 words each) as one vector of word pairs: [r0 w0, r1 w0, r0 w1, r1 w1, ...].
PAGEDKV_VNNI inline __m512i InterleaveRowPair(__m256i r0, __m256i r1) {
  const __m512i idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  return _mm512_permutex2var_epi32(_mm512_castsi256_si512(r0), idx, _mm512_castsi256_si512(r1));
}

// 16 rows of 8 words -> 8 groups: group g = word g of rows 0..15. `pairs[p]` interleaves rows
// 2p, 2p+1 (qword g = their words g), so this is an 8 x 8 transpose of qwords.
PAGEDKV_VNNI inline void TransposePairs(const __m512i* pairs, __m512i* groups) {
  __m512i t[8];
  for (int p = 0; p < 8; p += 2) {
    t[p] = _mm512_unpacklo_epi64(pairs[p], pairs[p + 1]);      // lane k: qwords 2k of p, p+1
    t[p + 1] = _mm512_unpackhi_epi64(pairs[p], pairs[p + 1]);  // lane k: qwords 2k+1
  }
  for (int odd = 0; odd < 2; ++odd) {
    const __m512i* s = t + odd;  // s[0], s[2], s[4], s[6]: pairs 01, 23, 45, 67
    const __m512i u0 = _mm512_shuffle_i64x2(s[0], s[2], 0x88);  // lanes 0, 2 of 01 then of 23
    const __m512i u1 = _mm512_shuffle_i64x2(s[0], s[2], 0xDD);  // lanes 1, 3
    const __m512i u2 = _mm512_shuffle_i64x2(s[4], s[6], 0x88);
    const __m512i u3 = _mm512_shuffle_i64x2(s[4], s[6], 0xDD);
    groups[0 + odd] = _mm512_shuffle_i64x2(u0, u2, 0x88);  // 128-bit lane 0 of every pair
    groups[4 + odd] = _mm512_shuffle_i64x2(u0, u2, 0xDD);  // lane 2
    groups[2 + odd] = _mm512_shuffle_i64x2(u1, u3, 0x88);  // lane 1
    groups[6 + odd] = _mm512_shuffle_i64x2(u1, u3, 0xDD);  // lane 3
  }
}

// Decodes 16 W rows (every block) starting at `w` into `out` (kDecodedBlockBytes per block).
template <WeightType kType>
PAGEDKV_VNNI void DecodeTile(const unsigned char* w, int64_t row_bytes, int64_t blocks,
                             unsigned char* out) {
  for (int64_t b = 0; b < blocks; ++b) {
    const unsigned char* wb = w + b * QuantBlockBytes(kType);
    __m512i pairs[8];
    for (int p = 0; p < 8; ++p) {
      const unsigned char* r0 = wb + 2 * p * row_bytes;
      __builtin_prefetch(r0 + kPrefetchBytes);
      __builtin_prefetch(r0 + row_bytes + kPrefetchBytes);
      pairs[p] = InterleaveRowPair(UnsignedRow<kType>(r0), UnsignedRow<kType>(r0 + row_bytes));
    }
    __m512i groups[8];
    TransposePairs(pairs, groups);
    unsigned char* at = out + b * kDecodedBlockBytes;
    for (int g = 0; g < 8; ++g) _mm512_store_si512(at + 64 * g, groups[g]);
    _mm512_store_ps(at + 512, Halves16(wb, row_bytes, 0));
    if constexpr (kType == WeightType::kQ4_1) {
      _mm512_store_ps(at + 512 + 64, Halves16(wb, row_bytes, 2));
    }
  }
}

// y[j0 + c] (+)= x[0] . W[j0 + c] for c < 8, W's blocks read from the file's bytes (m = 1).
template <WeightType kType>
PAGEDKV_VNNI void OneRowTile(const Int8Rows& x, const unsigned char* w, int64_t row_bytes, float* y,
                             bool accumulate) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < x.blocks_per_row; ++b) {
    const unsigned char* wb = w + b * QuantBlockBytes(kType);
    const __m256i xq =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + b * kQuantBlockValues));
    __m256i p[8];
    for (int c = 0; c < 8; ++c) {
      __builtin_prefetch(wb + c * row_bytes + kPrefetchBytes);
      p[c] =
          _mm256_dpbusd_epi32(_mm256_setzero_si256(), UnsignedRow<kType>(wb + c * row_bytes), xq);
    }
    const __m256i isum =
        _mm256_sub_epi32(x86::LaneSums8(p), _mm256_set1_epi32(kBias<kType> * x.qsum[b]));
    const __m256 dd = _mm256_mul_ps(x86::Halves8(wb, row_bytes, 0), _mm256_set1_ps(x.scale[b]));
    acc = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(isum), acc);
    if constexpr (kType == WeightType::kQ4_1) {
      acc = _mm256_fmadd_ps(x86::Halves8(wb, row_bytes, 2), _mm256_set1_ps(x.sum[b]), acc);
    }
  }
  if (accumulate) acc = _mm256_add_ps(_mm256_loadu_ps(y), acc);
  _mm256_storeu_ps(y, acc);
}

// Columns [j_begin, j_end) of the one row of y, 8 at a time; the rest through the AVX2 kernel.
template <WeightType kType>
PAGEDKV_VNNI void OneRowColumns(const QuantLinearArgs& a, const Int8Rows& x, int64_t j_begin,
                                int64_t j_end) {
  const int64_t rb = WeightRowBytes(kType, a.k);
  const auto* w = static_cast<const unsigned char*>(a.w);
  const int64_t whole_end = j_begin + (j_end - j_begin) / 8 * 8;
  for (int64_t j = j_begin; j < whole_end; j += 8) {
    OneRowTile<kType>(x, w + j * rb, rb, a.y + j, a.accumulate);
  }
  if (whole_end < j_end) Avx2Columns(a, x, whole_end, j_end);
}

// Calls fn(std::integral_constant<int, RX>{}, i) over rows [0, m) in groups of RX = 8, 4, 2, 1.
template <typename Fn>
PAGEDKV_VNNI inline void ForRowGroups(int64_t m, Fn&& fn) {
  int64_t i = 0;
  for (; i + 8 <= m; i += 8) fn(std::integral_constant<int, 8>{}, i);
  for (; i + 4 <= m; i += 4) fn(std::integral_constant<int, 4>{}, i);
  for (; i + 2 <= m; i += 2) fn(std::integral_constant<int, 2>{}, i);
  for (; i < m; ++i) fn(std::integral_constant<int, 1>{}, i);
}

// The int8 chain's next step for one block of 16 W rows (`groups`, their d and Q4_1's m) and RX
// rows of x: the exact block sums (RX independent vpdpbusd chains, interleaved group by group),
// then acc[r] = fma(dw * dx, isum, acc[r]) (+ fma(mw, sx, acc[r])).
template <WeightType kType, int RX>
PAGEDKV_VNNI inline void BlockStep(const Int8Rows& x, int64_t row, int64_t b, const __m512i* groups,
                                   __m512 dw, __m512 mw, __m512* acc) {
  const int64_t blocks = x.blocks_per_row;
  __m512i isum[RX];
  for (int r = 0; r < RX; ++r) {
    isum[r] = _mm512_set1_epi32(-kBias<kType> * x.qsum[(row + r) * blocks + b]);
  }
  for (int g = 0; g < 8; ++g) {
    for (int r = 0; r < RX; ++r) {
      int32_t word;
      std::memcpy(&word, x.q + ((row + r) * blocks + b) * kQuantBlockValues + 4 * g, 4);
      isum[r] = _mm512_dpbusd_epi32(isum[r], groups[g], _mm512_set1_epi32(word));
    }
  }
  for (int r = 0; r < RX; ++r) {
    const int64_t xb = (row + r) * blocks + b;
    const __m512 dd = _mm512_mul_ps(dw, _mm512_set1_ps(x.scale[xb]));
    acc[r] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(isum[r]), acc[r]);
    if constexpr (kType == WeightType::kQ4_1) {
      acc[r] = _mm512_fmadd_ps(mw, _mm512_set1_ps(x.sum[xb]), acc[r]);
    }
  }
}

// Stores (or adds) RX rows of 16 outputs.
template <int RX>
PAGEDKV_VNNI inline void StoreRows(const __m512* acc, float* y, int64_t ldy, bool accumulate) {
  for (int r = 0; r < RX; ++r) {
    float* out = y + r * ldy;
    _mm512_storeu_ps(out, accumulate ? _mm512_add_ps(_mm512_loadu_ps(out), acc[r]) : acc[r]);
  }
}

// y[r][c] (+)= x[row + r] . W[c] for r < RX, c < 16, from a decoded tile.
template <WeightType kType, int RX>
PAGEDKV_VNNI void DecodedTile(const Int8Rows& x, int64_t row, const unsigned char* tile, float* y,
                              int64_t ldy, bool accumulate) {
  __m512 acc[RX];
  for (int r = 0; r < RX; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < x.blocks_per_row; ++b) {
    const unsigned char* at = tile + b * kDecodedBlockBytes;
    __m512i groups[8];
    for (int g = 0; g < 8; ++g) groups[g] = _mm512_load_si512(at + 64 * g);
    const __m512 mw = kType == WeightType::kQ4_1 ? _mm512_load_ps(at + 512 + 64) : __m512{};
    BlockStep<kType, RX>(x, row, b, groups, _mm512_load_ps(at + 512), mw, acc);
  }
  StoreRows<RX>(acc, y, ldy, accumulate);
}

// A tile block of nibbles (Q4_0 / Q4_1 / Q4_K, int8_tiles.h) as its 8 groups: group v is the low
// nibbles of the block's vector v, group v + 4 their high nibbles.
PAGEDKV_VNNI inline void NibbleGroups(const unsigned char* at, __m512i* groups) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  for (int v = 0; v < 4; ++v) {
    const __m512i packed = _mm512_loadu_si512(at + 64 * v);
    groups[v] = _mm512_and_si512(packed, low);
    groups[v + 4] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), low);
  }
}

// y[r][c] (+)= x[row + r] . W[16 t + c] for r < RX, c < 16, from tile t of W's Int8Tiles: the
// groups are the tile's bytes (Q4: its low and high nibbles), the scales one conversion each.
template <WeightType kType, int RX>
PAGEDKV_VNNI void TiledTile(const Int8Rows& x, int64_t row, const Int8Tiles& tiles, int64_t t,
                            float* y, int64_t ldy, bool accumulate) {
  constexpr int64_t kValueBytes = kType == WeightType::kQ8_0 ? 512 : 256;
  __m512 acc[RX];
  for (int r = 0; r < RX; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < x.blocks_per_row; ++b) {
    const unsigned char* at = tiles.block(t, b);
    __m512i groups[8];
    if constexpr (kType == WeightType::kQ8_0) {
      for (int g = 0; g < 8; ++g) groups[g] = _mm512_loadu_si512(at + 64 * g);
    } else {
      NibbleGroups(at, groups);
    }
    const __m512 mw = kType == WeightType::kQ4_1 ? Halves16At(at + kValueBytes + 32) : __m512{};
    BlockStep<kType, RX>(x, row, b, groups, Halves16At(at + kValueBytes), mw, acc);
  }
  StoreRows<RX>(acc, y, ldy, accumulate);
}

// Q6_K's step for one block of 16 W rows (`groups`: q + 32) and RX rows of x: the two halves'
// exact sums (groups 0-3 and 4-7, each from -32 times its half's sum(qx)), isum = sc_lo * lo +
// sc_hi * hi in int32 (exact, int8_activations.h), then acc[r] = fma(d * dx, isum, acc[r]).
template <int RX>
PAGEDKV_VNNI inline void Q6KBlockStep(const Int8Rows& x, int64_t row, int64_t b,
                                      const __m512i* groups, __m512i sc_lo, __m512i sc_hi, __m512 d,
                                      __m512* acc) {
  const int64_t blocks = x.blocks_per_row;
  // Row by row: two sums live at a time (all RX rows' halves at once would spill registers).
  for (int r = 0; r < RX; ++r) {
    const int64_t xb = (row + r) * blocks + b;
    const int8_t* q = x.q + xb * kQuantBlockValues;
    __m512i lo = _mm512_set1_epi32(-32 * x.qsum_lo[xb]);
    __m512i hi = _mm512_set1_epi32(-32 * (x.qsum[xb] - x.qsum_lo[xb]));
    for (int g = 0; g < 4; ++g) {
      int32_t lo_word, hi_word;
      std::memcpy(&lo_word, q + 4 * g, 4);
      std::memcpy(&hi_word, q + 16 + 4 * g, 4);
      lo = _mm512_dpbusd_epi32(lo, groups[g], _mm512_set1_epi32(lo_word));
      hi = _mm512_dpbusd_epi32(hi, groups[g + 4], _mm512_set1_epi32(hi_word));
    }
    const __m512i isum =
        _mm512_add_epi32(_mm512_mullo_epi32(sc_lo, lo), _mm512_mullo_epi32(sc_hi, hi));
    const __m512 dd = _mm512_mul_ps(d, _mm512_set1_ps(x.scale[xb]));
    acc[r] = _mm512_fmadd_ps(dd, _mm512_cvtepi32_ps(isum), acc[r]);
  }
}

// TiledTile for Q4_K / Q6_K tiles: Q4_K is Q4_1's step with the tile's fp32 dw and -mw, Q6_K
// its own.
template <WeightType kType, int RX>
PAGEDKV_VNNI void TiledSuperTile(const Int8Rows& x, int64_t row, const Int8Tiles& tiles, int64_t t,
                                 float* y, int64_t ldy, bool accumulate) {
  __m512 acc[RX];
  for (int r = 0; r < RX; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < x.blocks_per_row; ++b) {
    const unsigned char* at = tiles.block(t, b);
    __m512i groups[8];
    if constexpr (kType == WeightType::kQ4_K) {
      NibbleGroups(at, groups);
      BlockStep<WeightType::kQ4_1, RX>(x, row, b, groups, _mm512_loadu_ps(at + 256),
                                       _mm512_loadu_ps(at + 320), acc);
    } else {
      for (int g = 0; g < 8; ++g) groups[g] = _mm512_loadu_si512(at + 64 * g);
      Q6KBlockStep<RX>(x, row, b, groups, _mm512_loadu_si512(at + 512),
                       _mm512_loadu_si512(at + 576), _mm512_loadu_ps(at + 640), acc);
    }
  }
  StoreRows<RX>(acc, y, ldy, accumulate);
}

// Rows [0, m) of x against tiles [j_begin / 16, j_end / 16) of W's Int8Tiles, kPanelTiles tiles
// at a time: each group of rows runs the panel's tiles while its blocks of x are in L1, and the
// panel (a few tens of KB) stays in L2.
template <WeightType kType>
PAGEDKV_VNNI void TiledColumns(const QuantLinearArgs& a, const Int8Rows& x, const Int8Tiles& tiles,
                               int64_t j_begin, int64_t j_end) {
  for (int64_t j0 = j_begin; j0 < j_end; j0 += kTileRows * kPanelTiles) {
    const int64_t j1 = std::min(j_end, j0 + kTileRows * kPanelTiles);
    ForRowGroups(a.m, [&](auto rx, int64_t i) {
      for (int64_t j = j0; j < j1; j += kTileRows) {
        constexpr int kRx = decltype(rx)::value;
        if constexpr (Int8SuperBlockType(kType)) {
          TiledSuperTile<kType, kRx>(x, i, tiles, j / kTileRows, a.y + i * a.n + j, a.n,
                                     a.accumulate);
        } else {
          TiledTile<kType, kRx>(x, i, tiles, j / kTileRows, a.y + i * a.n + j, a.n, a.accumulate);
        }
      }
    });
  }
}

// Rows [0, m) of x against `tiles` decoded tiles (columns j0 .. j0 + 16 * tiles): each group of
// rows runs every tile while its blocks of x are in L1.
template <WeightType kType>
PAGEDKV_VNNI void RowsTimesPanel(const QuantLinearArgs& a, const Int8Rows& x,
                                 const unsigned char* panel, int64_t tiles, int64_t j0) {
  const int64_t tile_bytes = x.blocks_per_row * kDecodedBlockBytes;
  ForRowGroups(a.m, [&](auto rx, int64_t i) {
    for (int64_t t = 0; t < tiles; ++t) {
      DecodedTile<kType, decltype(rx)::value>(
          x, i, panel + t * tile_bytes, a.y + i * a.n + j0 + kTileRows * t, a.n, a.accumulate);
    }
  });
}

// The decoded panel's buffer (ThreadScratch); when it cannot be allocated the AVX2 kernel runs
// instead (the same bits).
struct VnniPanelTag {};

template <WeightType kType>
PAGEDKV_VNNI void Columns(const QuantLinearArgs& a, const Int8Rows& x, int64_t j_begin,
                          int64_t j_end) {
  if (a.m == 1) return OneRowColumns<kType>(a, x, j_begin, j_end);
  const int64_t rb = WeightRowBytes(kType, a.k);
  const auto* w = static_cast<const unsigned char*>(a.w);
  const int64_t whole_end = j_begin + (j_end - j_begin) / kTileRows * kTileRows;
  const int64_t tile_bytes = x.blocks_per_row * kDecodedBlockBytes;
  const int64_t panel_tiles = a.m >= kDecodeMinRows ? kPanelTiles : 1;
  unsigned char* panel = ThreadScratch<VnniPanelTag>(static_cast<size_t>(panel_tiles * tile_bytes));
  if (panel == nullptr) return Avx2Columns(a, x, j_begin, j_end);
  for (int64_t j0 = j_begin; j0 < whole_end; j0 += kTileRows * panel_tiles) {
    const int64_t tiles = std::min(panel_tiles, (whole_end - j0) / kTileRows);
    for (int64_t t = 0; t < tiles; ++t) {
      DecodeTile<kType>(w + (j0 + kTileRows * t) * rb, rb, x.blocks_per_row,
                        panel + t * tile_bytes);
    }
    RowsTimesPanel<kType>(a, x, panel, tiles, j0);
  }
  // Fewer than 16 columns left: the AVX2 kernel's tiles of 8 and its tail (the same bits).
  if (whole_end < j_end) Avx2Columns(a, x, whole_end, j_end);
}

}  // namespace

bool VnniSupported() {
  static const bool supported =
      Avx2Supported() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vnni");
  return supported;
}

void VnniColumns(const QuantLinearArgs& a, const Int8Rows& x, int64_t j_begin, int64_t j_end) {
  WithInt8Type(a.w_type, [&](auto t) { Columns<decltype(t)::value>(a, x, j_begin, j_end); });
}

void VnniTiledColumns(const QuantLinearArgs& a, const Int8Rows& x, const Int8Tiles& tiles,
                      int64_t j_begin, int64_t j_end) {
  WithInt8Type(a.w_type,
               [&](auto t) { TiledColumns<decltype(t)::value>(a, x, tiles, j_begin, j_end); });
}

void VnniTiledSuperColumns(const QuantLinearArgs& a, const Int8Rows& x, const Int8Tiles& tiles,
                           int64_t j_begin, int64_t j_end) {
  if (a.w_type == WeightType::kQ4_K) {
    return TiledColumns<WeightType::kQ4_K>(a, x, tiles, j_begin, j_end);
  }
  TiledColumns<WeightType::kQ6_K>(a, x, tiles, j_begin, j_end);
}

}  // namespace pagedkv::cpu::int8_kernels
