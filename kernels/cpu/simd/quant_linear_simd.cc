// Copyright 2026 The pagedkv Authors.
//
// Vector Linear over weights in their file's format (y = x W^T, see
// pagedkv/kernels/quant_blocks.h). Q4_0, Q4_1 and Q8_0 (the register decode): each block's 32
// integers are widened to fp32 in registers (both nibbles of a byte from one load; Q4_0's less 8)
// and multiply-added with x into a block sum vector, which is scaled by d into one accumulator
// vector per (x row, W row); Q4_1's offsets add m * sum(x over the block) per block, in block
// order, after the lane sum:
//   y[i][j] = LaneSum(sum_b d_b sum_c q_c x_c) + sum_b m_b xsum_b,   all in fp32.
// A tile is RX rows of x times RW rows of W, every element its own chain, so a y[i][j] does not
// depend on m, on the tile or on the thread split.
// Many rows of x (QuantLinearPanels, m >= kQuantPanelMinRows): each column panel of W is decoded
// once per call into the packed fp32 layout (value = q * d + m, a multiply then an add, as the
// load-time conversion of engine/model/formats/gguf_dequant.cc computes it) and every row of x runs
// the packed kernel's outer-product tile over it (panel_tile-inl.h): the same bits as PackedLinear
// over the converted fp32 weights.
// F16, BF16, Q4_K and Q6_K (the row decode): each W row is decoded whole into fp32 (DecodeRow,
// the load-time conversion's bits: F16C / shifts for the half types, one scale per sub-block for
// the super-block types) and then dotted with every row of x (m < 16: RowDot, four vector chains)
// or transposed into the panel (m >= 16: the same packed tile as above). Every W value is decoded
// once per call either way, as a load-time conversion would do once per load.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd/quant_linear_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Each target's pass re-includes this file after foreach_target.h.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "hwy/highway.h"
#include "kernels/cpu/simd/decoded_rows-inl.h"
#include "kernels/cpu/simd/panel_tile-inl.h"
#include "kernels/cpu/simd/simd_kernels.h"
#include "pagedkv/kernels/quant_blocks.h"

HWY_BEFORE_NAMESPACE();
namespace pagedkv::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using V = hn::Vec<DF>;

constexpr bool IsNibbles(WeightType t) { return t == WeightType::kQ4_0 || t == WeightType::kQ4_1; }

// A block's q as fp32 lanes: lanes [o, o + N) into *lo and lanes [o + 16, o + 16 + N) into *hi
// (for Q4_0 / Q4_1 the high nibbles of the same bytes). N divides 16 on every x86 target and the
// scalar one.
template <WeightType kType>
HWY_INLINE void BlockQ(const unsigned char* HWY_RESTRICT block, int o, V* lo, V* hi) {
  const DF df;
  const hn::Rebind<int32_t, DF> di;
  if constexpr (IsNibbles(kType)) {
    const hn::Rebind<uint8_t, DF> du8;
    const hn::Rebind<uint32_t, DF> du;
    const auto bytes =
        hn::PromoteTo(du, hn::LoadU(du8, block + (kType == WeightType::kQ4_1 ? 4 : 2) + o));
    const auto bias = hn::Set(di, kType == WeightType::kQ4_0 ? 8 : 0);
    *lo = hn::ConvertTo(df, hn::Sub(hn::BitCast(di, hn::And(bytes, hn::Set(du, 0x0Fu))), bias));
    *hi = hn::ConvertTo(df, hn::Sub(hn::BitCast(di, hn::ShiftRight<4>(bytes)), bias));
  } else {
    const hn::Rebind<int8_t, DF> di8;
    const auto* q = reinterpret_cast<const int8_t*>(block + 2);
    *lo = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(di8, q + o)));
    *hi = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(di8, q + 16 + o)));
  }
}

// dm[2c] = d and dm[2c + 1] = m (Q4_1; unused for Q8_0) of the blocks blk[c], c < RW. On x86
// targets with F16C (AVX2 and up) four blocks' halves are converted by one instruction, to the
// same values as F16BitsToF32 (a signalling NaN comes back quiet: no real weight is one).
template <WeightType kType, int RW>
HWY_INLINE void BlockScales(const unsigned char* const* HWY_RESTRICT blk, float* HWY_RESTRICT dm) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  if constexpr (RW == 4) {
    int32_t words[4];  // d | m << 16 of each block (Q4_0 / Q8_0: d and two bytes of integers)
    for (int c = 0; c < 4; ++c) std::memcpy(&words[c], blk[c], sizeof(int32_t));
    _mm256_storeu_ps(dm, _mm256_cvtph_ps(_mm_setr_epi32(words[0], words[1], words[2], words[3])));
    return;
  }
#endif
  for (int c = 0; c < RW; ++c) {
    dm[2 * c] = QuantBlockScale(blk[c]);
    dm[2 * c + 1] = QuantBlockMin(kType, blk[c]);
  }
}

// How far ahead of the block it reads each W row is prefetched. The tiles walk W in memory order
// (4 rows at a time, each row's blocks in order), so this is a sequential prefetch about five
// tiles ahead: decode streams every weight once per token, and the hardware prefetcher alone kept
// it at ~6.5 GB/s on a SmolLM2 decode here; 8 KB ahead measured best (2.5x decode, 512 B..16 KB
// tried, bench/RESULTS.md). A prefetch never faults, so prefetching past W's end is harmless.
constexpr int64_t kPrefetchBytes = 8192;

// y[r][w] (+)= x[r] . W[w] for r < RX, w < RW; xsum[r][b]: x row r summed over block b (Q4_1).
// Per block, sum_c q_c x_c in fp32 (blk), then acc += d * blk; Q4_1's m * xsum per block apart.
template <WeightType kType, int RX, int RW>
HWY_INLINE void Tile(const float* HWY_RESTRICT x, const float* HWY_RESTRICT xsum, int64_t k,
                     const unsigned char* HWY_RESTRICT w, int64_t row_bytes, float* HWY_RESTRICT y,
                     int64_t ldy, bool accumulate) {
  const DF df;
  const int n_lanes = static_cast<int>(hn::Lanes(df));
  const int64_t blocks = k / kQuantBlockValues;
  const int64_t bb = QuantBlockBytes(kType);
  V acc[RX][RW];
  float offs[RX][RW] = {};
  for (int r = 0; r < RX; ++r) {
    for (int c = 0; c < RW; ++c) acc[r][c] = hn::Zero(df);
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const unsigned char* blk[RW];
    for (int c = 0; c < RW; ++c) blk[c] = w + c * row_bytes + b * bb;
    for (int c = 0; c < RW; ++c) {  // an address, never dereferenced: no pointer past W is formed
      __builtin_prefetch(
          reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(blk[c]) + kPrefetchBytes));
    }
    float dm[2 * RW];
    BlockScales<kType, RW>(blk, dm);
    V sum[RX][RW];
    for (int r = 0; r < RX; ++r) {
      for (int c = 0; c < RW; ++c) sum[r][c] = hn::Zero(df);
    }
    for (int o = 0; o < kQuantBlockValues / 2; o += n_lanes) {
      V lo[RW], hi[RW];
      for (int c = 0; c < RW; ++c) BlockQ<kType>(blk[c], o, &lo[c], &hi[c]);
      for (int r = 0; r < RX; ++r) {
        const float* xb = x + r * k + b * kQuantBlockValues;
        const V xlo = hn::LoadU(df, xb + o);
        const V xhi = hn::LoadU(df, xb + 16 + o);
        for (int c = 0; c < RW; ++c) {
          sum[r][c] = hn::MulAdd(lo[c], xlo, sum[r][c]);
          sum[r][c] = hn::MulAdd(hi[c], xhi, sum[r][c]);
        }
      }
    }
    for (int c = 0; c < RW; ++c) {
      const V d = hn::Set(df, dm[2 * c]);
      for (int r = 0; r < RX; ++r) acc[r][c] = hn::MulAdd(sum[r][c], d, acc[r][c]);
    }
    if constexpr (kType == WeightType::kQ4_1) {
      for (int c = 0; c < RW; ++c) {
        for (int r = 0; r < RX; ++r) offs[r][c] += dm[2 * c + 1] * xsum[r * blocks + b];
      }
    }
  }
  for (int r = 0; r < RX; ++r) {
    for (int c = 0; c < RW; ++c) {
      const float v = hn::GetLane(hn::SumOfLanes(df, acc[r][c])) + offs[r][c];
      float* out = y + r * ldy + c;
      *out = accumulate ? *out + v : v;
    }
  }
}

template <WeightType kType, int RX>
HWY_NOINLINE void RowsTimesColumns(const QuantLinearArgs& a, const float* xsum, int64_t row,
                                   int64_t j_begin, int64_t j_end) {
  const int64_t rb = WeightRowBytes(kType, a.k);
  const auto* w = static_cast<const unsigned char*>(a.w);
  const float* x = a.x + row * a.k;
  const float* xs = xsum + row * (a.k / kQuantBlockValues);
  float* y = a.y + row * a.n;
  int64_t j = j_begin;
  for (; j + 4 <= j_end; j += 4) {
    Tile<kType, RX, 4>(x, xs, a.k, w + j * rb, rb, y + j, a.n, a.accumulate);
  }
  for (; j < j_end; ++j) Tile<kType, RX, 1>(x, xs, a.k, w + j * rb, rb, y + j, a.n, a.accumulate);
}

template <WeightType kType>
void ColumnsImpl(const QuantLinearArgs& a, int64_t j_begin, int64_t j_end) {
  const int64_t blocks = a.k / kQuantBlockValues;
  std::vector<float> xsum;
  if constexpr (kType == WeightType::kQ4_1) {
    xsum.resize(static_cast<size_t>(a.m * blocks));
    for (int64_t i = 0; i < a.m * blocks; ++i) {  // plain sums in k order
      float s = 0.0f;
      for (int64_t t = 0; t < kQuantBlockValues; ++t) s += a.x[i * kQuantBlockValues + t];
      xsum[static_cast<size_t>(i)] = s;
    }
  }
  // W rows in chunks that stay in cache while every row pair of x passes over them.
  constexpr int64_t kChunk = 64;
  for (int64_t j0 = j_begin; j0 < j_end; j0 += kChunk) {
    const int64_t j1 = std::min(j_end, j0 + kChunk);
    int64_t row = 0;
    for (; row + 2 <= a.m; row += 2) RowsTimesColumns<kType, 2>(a, xsum.data(), row, j0, j1);
    if (row < a.m) RowsTimesColumns<kType, 1>(a, xsum.data(), row, j0, j1);
  }
}

// W rows [j0, j0 + cols) of a block-quantized W decoded into one packed panel
// (panel[kk][c] = W[j0 + c][kk], zero for c >= cols; the layout of PackWeights). One vector holds
// one value of N consecutive W rows (a lane per row), so it is stored whole into a panel row:
// per block, each 4-byte word of the integers is gathered from the N rows at once and its bytes
// (Q8_0) or nibbles (Q4_0, Q4_1) widened in place. The words lie inside the block (Q4_0: bytes
// 2-17, Q4_1: 4-19, Q8_0: 2-33), so nothing past W is read; lanes of rows >= cols read row 0 and
// are zeroed.
template <WeightType kType>
HWY_INLINE void DecodePanel(const unsigned char* HWY_RESTRICT w, int64_t row_bytes, int64_t k,
                            int64_t cols, float* HWY_RESTRICT panel) {
  const DF df;
  const hn::Rebind<int32_t, DF> di;
  const int64_t n_lanes = static_cast<int64_t>(hn::Lanes(df));
  const int64_t p = PanelWidthOfTarget();
  const int64_t bb = QuantBlockBytes(kType);
  constexpr int kFirst = kType == WeightType::kQ4_1 ? 4 : 2;  // byte of the first integer
  constexpr int kWords = kType == WeightType::kQ8_0 ? 8 : 4;  // words of integers per block
  HWY_ALIGN int32_t row_at[hn::MaxLanes(di)];
  HWY_ALIGN float scale[hn::MaxLanes(df)];
  HWY_ALIGN float offset[hn::MaxLanes(df)];
  for (int64_t c0 = 0; c0 < p; c0 += n_lanes) {
    const int64_t live = std::clamp<int64_t>(cols - c0, 0, n_lanes);
    if (live == 0) {
      for (int64_t kk = 0; kk < k; ++kk) hn::Store(hn::Zero(df), df, panel + kk * p + c0);
      continue;
    }
    for (int64_t t = 0; t < n_lanes; ++t) {
      row_at[t] = static_cast<int32_t>((t < live ? c0 + t : 0) * row_bytes);
    }
    const auto rows = hn::Load(di, row_at);
    const auto keep = hn::FirstN(df, static_cast<size_t>(live));
    for (int64_t b = 0; b < k / kQuantBlockValues; ++b) {
      const unsigned char* blocks = w + b * bb;
      for (int64_t t = 0; t < n_lanes; ++t) {
        scale[t] = QuantBlockScale(blocks + row_at[t]);
        offset[t] = QuantBlockMin(kType, blocks + row_at[t]);
      }
      const V d = hn::Load(df, scale);
      [[maybe_unused]] const V m = hn::Load(df, offset);  // Q4_1 only
      float* out = panel + b * kQuantBlockValues * p + c0;
      for (int g = 0; g < kWords; ++g) {
        const auto word =
            hn::GatherOffset(di, reinterpret_cast<const int32_t*>(blocks + kFirst + 4 * g), rows);
        for (int byte = 0; byte < 4; ++byte) {
          const int j = 4 * g + byte;  // value j of the block (and j + 16 for a high nibble)
          if constexpr (IsNibbles(kType)) {
            const auto bias = hn::Set(di, kType == WeightType::kQ4_0 ? 8 : 0);
            const auto low =
                hn::Sub(hn::And(hn::ShiftRightSame(word, 8 * byte), hn::Set(di, 0x0F)), bias);
            const auto high =
                hn::Sub(hn::And(hn::ShiftRightSame(word, 8 * byte + 4), hn::Set(di, 0x0F)), bias);
            const V lo = hn::Add(hn::Mul(hn::ConvertTo(df, low), d), m);
            const V hi = hn::Add(hn::Mul(hn::ConvertTo(df, high), d), m);
            hn::Store(hn::IfThenElseZero(keep, lo), df, out + j * p);
            hn::Store(hn::IfThenElseZero(keep, hi), df, out + (j + 16) * p);
          } else {
            const auto q = hn::ShiftRightSame(hn::ShiftLeftSame(word, 24 - 8 * byte), 24);
            const V v = hn::Mul(hn::ConvertTo(df, q), d);
            hn::Store(hn::IfThenElseZero(keep, v), df, out + j * p);
          }
        }
      }
    }
  }
}

template <WeightType kType>
void PanelsImpl(const QuantLinearArgs& a, int64_t panel_begin, int64_t panel_end,
                float* HWY_RESTRICT scratch) {
  const int64_t p = PanelWidthOfTarget();
  const int64_t rb = WeightRowBytes(kType, a.k);
  const auto* w = static_cast<const unsigned char*>(a.w);
  for (int64_t panel = panel_begin; panel < panel_end; ++panel) {
    const int64_t j0 = panel * p;
    const int64_t cols = std::min(p, a.n - j0);
    DecodePanel<kType>(w + j0 * rb, rb, a.k, cols, scratch);
    PanelAllRows(a.x, a.m, a.k, scratch, a.y + j0, a.n, cols, a.accumulate);
  }
}

void QuantLinearColumnsImpl(const QuantLinearArgs& a, int64_t j_begin, int64_t j_end) {
  switch (a.w_type) {
    case WeightType::kQ4_0:
      return ColumnsImpl<WeightType::kQ4_0>(a, j_begin, j_end);
    case WeightType::kQ4_1:
      return ColumnsImpl<WeightType::kQ4_1>(a, j_begin, j_end);
    case WeightType::kQ8_0:
      return ColumnsImpl<WeightType::kQ8_0>(a, j_begin, j_end);
    default:
      return DecodedColumnsImpl(a, j_begin, j_end);
  }
}

void QuantLinearPanelsImpl(const QuantLinearArgs& a, int64_t panel_begin, int64_t panel_end,
                           float* scratch) {
  switch (a.w_type) {
    case WeightType::kQ4_0:
      return PanelsImpl<WeightType::kQ4_0>(a, panel_begin, panel_end, scratch);
    case WeightType::kQ4_1:
      return PanelsImpl<WeightType::kQ4_1>(a, panel_begin, panel_end, scratch);
    case WeightType::kQ8_0:
      return PanelsImpl<WeightType::kQ8_0>(a, panel_begin, panel_end, scratch);
    default:
      return DecodedPanelsImpl(a, panel_begin, panel_end, scratch);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace pagedkv::cpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pagedkv::cpu::simd {

HWY_EXPORT(QuantLinearColumnsImpl);
HWY_EXPORT(QuantLinearPanelsImpl);

void QuantLinearPanels(const QuantLinearArgs& args, int64_t panel_begin, int64_t panel_end,
                       float* scratch) {
  HWY_DYNAMIC_DISPATCH(QuantLinearPanelsImpl)(args, panel_begin, panel_end, scratch);
}

void QuantLinearColumns(const QuantLinearArgs& args, int64_t n_begin, int64_t n_end) {
  HWY_DYNAMIC_DISPATCH(QuantLinearColumnsImpl)(args, n_begin, n_end);
}

}  // namespace pagedkv::cpu::simd
#endif  // HWY_ONCE
