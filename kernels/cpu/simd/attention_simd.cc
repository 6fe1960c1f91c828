// Copyright 2026 The pagedkv Authors.
//
// Vector paged attention for one (query token, KV head) group. Keys are taken in chunks of
// kChunk: the chunk's scores, their max, one scalar exp to rescale the running state (the online
// softmax of kernels/softmax_math.h, per chunk instead of per key), then one vector exp per key,
// and the weighted values added in key order. Query heads of the group share each K/V row load.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/simd/attention_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Each target's pass re-includes this file after foreach_target.h.
#include <math.h>

#include <algorithm>
#include <cstdint>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "kernels/cpu/simd/kv_dequant-inl.h"
#include "kernels/cpu/simd/reduce-inl.h"
#include "kernels/cpu/simd/simd_kernels.h"
#include "pagedkv/kernels/kv_quant.h"
#include "pagedkv/rope_config.h"

HWY_BEFORE_NAMESPACE();
namespace pagedkv::cpu::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int kChunk = 32;    // keys per online-softmax step; a multiple of every target's lanes
constexpr int kMaxGroup = 8;  // query heads per pass over the keys (stack scratch)

// Running state of one query head: max m, normaliser l, unnormalised output acc.
struct HeadState {
  float m = -INFINITY;
  float l = 0.0f;
};

// s[i] = dot(a, b[i]) for i < 4: vectors in order, SumOfLanes4, then the scalar tail. Every key's
// score takes this same path (a partial quad repeats its last key), so it does not depend on where
// the key falls in the chunk.
HWY_INLINE void Dot4(const float* HWY_RESTRICT a, const float* const* b, int32_t n,
                     float* HWY_RESTRICT s) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int32_t>(hn::Lanes(d));
  auto acc0 = hn::Zero(d), acc1 = hn::Zero(d), acc2 = hn::Zero(d), acc3 = hn::Zero(d);
  int32_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto va = hn::LoadU(d, a + i);
    acc0 = hn::MulAdd(va, hn::LoadU(d, b[0] + i), acc0);
    acc1 = hn::MulAdd(va, hn::LoadU(d, b[1] + i), acc1);
    acc2 = hn::MulAdd(va, hn::LoadU(d, b[2] + i), acc2);
    acc3 = hn::MulAdd(va, hn::LoadU(d, b[3] + i), acc3);
  }
#if !HWY_MEM_OPS_MIGHT_FAULT
  if (i < n) {  // AVX-512: the tail as one zero-filled masked vector
    const auto mask = hn::FirstN(d, static_cast<size_t>(n - i));
    const auto va = hn::MaskedLoad(mask, d, a + i);
    acc0 = hn::MulAdd(va, hn::MaskedLoad(mask, d, b[0] + i), acc0);
    acc1 = hn::MulAdd(va, hn::MaskedLoad(mask, d, b[1] + i), acc1);
    acc2 = hn::MulAdd(va, hn::MaskedLoad(mask, d, b[2] + i), acc2);
    acc3 = hn::MulAdd(va, hn::MaskedLoad(mask, d, b[3] + i), acc3);
    i = n;
  }
#endif
  SumOfLanes4(d, acc0, acc1, acc2, acc3, s);
  for (int j = 0; j < 4; ++j) {
    for (int32_t t = i; t < n; ++t) s[j] += a[t] * b[j][t];
  }
}

// s[i] = dot(a, b[i]) for i < 4 over a row of exactly NV full vectors (head_dim == NV * lanes):
// Dot4's order with the row length known at compile time.
template <int NV>
HWY_INLINE void Dot4Fixed(const float* HWY_RESTRICT a, const float* const* b,
                          float* HWY_RESTRICT s) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int32_t>(hn::Lanes(d));
  auto acc0 = hn::Zero(d), acc1 = hn::Zero(d), acc2 = hn::Zero(d), acc3 = hn::Zero(d);
  for (int v = 0; v < NV; ++v) {
    const auto va = hn::LoadU(d, a + v * lanes);
    acc0 = hn::MulAdd(va, hn::LoadU(d, b[0] + v * lanes), acc0);
    acc1 = hn::MulAdd(va, hn::LoadU(d, b[1] + v * lanes), acc1);
    acc2 = hn::MulAdd(va, hn::LoadU(d, b[2] + v * lanes), acc2);
    acc3 = hn::MulAdd(va, hn::LoadU(d, b[3] + v * lanes), acc3);
  }
  SumOfLanes4(d, acc0, acc1, acc2, acc3, s);
}

// p[0, kChunk) = scale * q . k_rows[j] for j < nk and -inf beyond; returns their max. NV > 0:
// head_dim is NV full vectors (Dot4Fixed); NV == 0: any head_dim (Dot4). A partial quad repeats
// its last key, so every key's score takes the same path wherever it falls in the chunk.
template <int NV>
HWY_INLINE float Scores(const float* HWY_RESTRICT q, const float* const* k_rows, int nk, int32_t hd,
                        float scale, float* HWY_RESTRICT p) {
  for (int j = 0; j < nk; j += 4) {
    const float* quad[4];
    for (int i = 0; i < 4; ++i) quad[i] = k_rows[std::min(j + i, nk - 1)];
    if constexpr (NV > 0) {
      Dot4Fixed<NV>(q, quad, p + j);
    } else {
      Dot4(q, quad, hd, p + j);
    }
  }
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int>(hn::Lanes(d));
  const auto vscale = hn::Set(d, scale);
  const auto neg_inf = hn::Set(d, -INFINITY);
  auto vmax = neg_inf;
  for (int i = 0; i < kChunk; i += lanes) {
    const auto scores = i < nk ? hn::IfThenElse(hn::FirstN(d, static_cast<size_t>(nk - i)),
                                                hn::Mul(hn::LoadU(d, p + i), vscale), neg_inf)
                               : neg_inf;
    hn::StoreU(scores, d, p + i);
    vmax = hn::Max(vmax, scores);
  }
  return hn::GetLane(hn::MaxOfLanes(d, vmax));
}

// p[0, kChunk) = exp(p - m) (entries padded with -inf give 0); returns their sum.
HWY_INLINE float ExpShifted(float* HWY_RESTRICT p, float m) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int>(hn::Lanes(d));
  const auto shift = hn::Set(d, m);
  auto sum = hn::Zero(d);
  for (int i = 0; i < kChunk; i += lanes) {
    const auto e = hn::Exp(d, hn::Sub(hn::LoadU(d, p + i), shift));
    hn::StoreU(e, d, p + i);
    sum = hn::Add(sum, e);
  }
  return hn::GetLane(hn::SumOfLanes(d, sum));
}

// a * rescale + sum_j p[j] * v[j] over keys j < num_keys, four independent chains (keys j % 4)
// added as (c0 + c1) + (c2 + c3): a fixed order, and no chain of dependent multiply-adds.
template <class D, class V, class LoadFn>
HWY_INLINE V WeightedSum(D d, V a, float rescale, const float* p, int num_keys, LoadFn load) {
  V c0 = hn::Mul(a, hn::Set(d, rescale)), c1 = hn::Zero(d), c2 = hn::Zero(d), c3 = hn::Zero(d);
  int j = 0;
  for (; j + 4 <= num_keys; j += 4) {
    c0 = hn::MulAdd(hn::Set(d, p[j]), load(j), c0);
    c1 = hn::MulAdd(hn::Set(d, p[j + 1]), load(j + 1), c1);
    c2 = hn::MulAdd(hn::Set(d, p[j + 2]), load(j + 2), c2);
    c3 = hn::MulAdd(hn::Set(d, p[j + 3]), load(j + 3), c3);
  }
  if (j < num_keys) c0 = hn::MulAdd(hn::Set(d, p[j]), load(j), c0);
  if (j + 1 < num_keys) c1 = hn::MulAdd(hn::Set(d, p[j + 1]), load(j + 1), c1);
  if (j + 2 < num_keys) c2 = hn::MulAdd(hn::Set(d, p[j + 2]), load(j + 2), c2);
  return hn::Add(hn::Add(c0, c1), hn::Add(c2, c3));
}

// acc[0, n) = acc * rescale + sum_j p[j] * v[j][0, n) (WeightedSum's order).
HWY_INLINE void Accumulate(float* HWY_RESTRICT acc, float rescale, const float* p,
                           const float* const* v, int num_keys, int32_t n) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int32_t>(hn::Lanes(d));
  int32_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto a = WeightedSum(d, hn::LoadU(d, acc + i), rescale, p, num_keys,
                               [&](int j) { return hn::LoadU(d, v[j] + i); });
    hn::StoreU(a, d, acc + i);
  }
#if !HWY_MEM_OPS_MIGHT_FAULT
  if (i < n) {  // AVX-512: the tail as one masked vector
    const auto mask = hn::FirstN(d, static_cast<size_t>(n - i));
    const auto a = WeightedSum(d, hn::MaskedLoad(mask, d, acc + i), rescale, p, num_keys,
                               [&](int j) { return hn::MaskedLoad(mask, d, v[j] + i); });
    hn::BlendedStore(a, mask, d, acc + i);
    i = n;
  }
#endif
  for (; i < n; ++i) {
    float c[4] = {acc[i] * rescale, 0.0f, 0.0f, 0.0f};
    for (int j = 0; j < num_keys; ++j) c[j % 4] += p[j] * v[j][i];
    acc[i] = (c[0] + c[1]) + (c[2] + c[3]);
  }
}

// acc[0, NV * lanes) = acc * rescale + sum_j p[j] * v[j] (WeightedSum's order, as Accumulate).
template <int NV>
HWY_INLINE void AccumulateFixed(float* HWY_RESTRICT acc, float rescale, const float* p,
                                const float* const* v, int num_keys) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int32_t>(hn::Lanes(d));
  for (int i = 0; i < NV * lanes; i += lanes) {
    const auto a = WeightedSum(d, hn::LoadU(d, acc + i), rescale, p, num_keys,
                               [&](int j) { return hn::LoadU(d, v[j] + i); });
    hn::StoreU(a, d, acc + i);
  }
}

// dst[0, n) = the f16 / bf16 row at element `offset` of `base`. f16 a vector at a time (F16C's
// vcvtph2ps on x86, whatever MXCSR's flush-to-zero bits say), bf16 and the tail through
// LoadRow's plain loop, which the compiler vectorizes: both exact (every half is a float).
HWY_INLINE void LoadHalfRow(const void* base, DType dtype, int64_t offset, int32_t n, float* dst) {
  if (dtype != DType::kF16) return LoadRow(base, dtype, offset, n, dst);
  const hn::ScalableTag<float> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  const auto* src = static_cast<const hwy::float16_t*>(base) + offset;
  const auto lanes = static_cast<int32_t>(hn::Lanes(df));
  int32_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, src + i)), df, dst + i);
  }
  if (i < n) LoadRow(base, dtype, offset + i, n - i, dst + i);
}

// Points rows[jj] at the rows of keys [j0, j0 + nk) of kv_head in `side` (one dtype's pages, at
// side.k); pages that are not fp32 are decoded (kv_dequant-inl.h) into the scratch rows. One
// division per chunk: offsets then step by token_stride within a block. REQUIRES: side resolved
// (explicit strides).
HWY_INLINE void SideRows(const PagedKvLayout& side, const int32_t* table, int32_t kv_head,
                         int64_t j0, int nk, float (*scratch)[kMaxHeadDim], const float** rows) {
  int64_t block = j0 / side.block_size;
  int64_t in_block = j0 % side.block_size;
  const int64_t head = kv_head * side.head_stride;
  int64_t offset = table[block] * side.block_stride + in_block * side.token_stride + head;
  for (int jj = 0; jj < nk; ++jj) {
    if (side.dtype == DType::kF32) {
      rows[jj] = static_cast<const float*>(side.k) + offset;
    } else {
      if (IsQuantizedDType(side.dtype)) {
        DecodeKvRow(side.k, side.dtype, offset, side.head_dim, scratch[jj]);
      } else {
        LoadHalfRow(side.k, side.dtype, offset, side.head_dim, scratch[jj]);
      }
      rows[jj] = scratch[jj];
    }
    if (++in_block < side.block_size) {
      offset += side.token_stride;
    } else if (jj + 1 < nk) {  // the next key opens the next block (never read past the table)
      in_block = 0;
      offset = table[++block] * side.block_stride + head;
    }
  }
}

// Asks the caches for the rows of keys [j0, j0 + nk) of kv_head in `side` (SideRows' walk), every
// 64 bytes of each row, so that the next chunk's loads do not wait on memory: the rows of a
// sequence lie in blocks scattered over the pool, where the hardware prefetchers lose the stream.
// No effect on any value.
HWY_INLINE void PrefetchRows(const PagedKvLayout& side, const int32_t* table, int32_t kv_head,
                             int64_t j0, int nk) {
  const int64_t unit = DTypeSize(side.dtype);
  const int64_t row_bytes = KvRowBytes(side.dtype, side.head_dim);
  const auto* base = static_cast<const char*>(side.k);
  int64_t block = j0 / side.block_size;
  int64_t in_block = j0 % side.block_size;
  const int64_t head = kv_head * side.head_stride;
  int64_t offset = table[block] * side.block_stride + in_block * side.token_stride + head;
  for (int jj = 0; jj < nk; ++jj) {
    const char* row = base + offset * unit;
    for (int64_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(row + b);
    __builtin_prefetch(row + row_bytes - 1);  // a row that starts mid-line ends in one more
    if (++in_block < side.block_size) {
      offset += side.token_stride;
    } else if (jj + 1 < nk) {
      in_block = 0;
      offset = table[++block] * side.block_stride + head;
    }
  }
}

// One pass over the keys for query heads [g0, g0 + ng) of the job's group. NV as in Scores.
template <int NV>
void AttendSubgroup(const PagedKvLayout& cache, const AttentionGroup& job, int32_t g0, int ng) {
  const int32_t hd = cache.head_dim;
  float acc[kMaxGroup][kMaxHeadDim];
  float p[kMaxGroup][kChunk];
  HeadState state[kMaxGroup];
  float k_scratch[kChunk][kMaxHeadDim];
  float v_scratch[kChunk][kMaxHeadDim];
  const float* k_rows[kChunk];
  const float* v_rows[kChunk];
  const PagedKvLayout v_side = cache.VSide();
  for (int g = 0; g < ng; ++g) std::fill(acc[g], acc[g] + hd, 0.0f);
  for (int64_t j0 = job.first_key; j0 < job.num_keys; j0 += kChunk) {
    const int nk = static_cast<int>(std::min<int64_t>(kChunk, job.num_keys - j0));
    SideRows(cache, job.table, job.kv_head, j0, nk, k_scratch, k_rows);
    SideRows(v_side, job.table, job.kv_head, j0, nk, v_scratch, v_rows);
    if (j0 + kChunk < job.num_keys) {
      const int next = static_cast<int>(std::min<int64_t>(kChunk, job.num_keys - j0 - kChunk));
      PrefetchRows(cache, job.table, job.kv_head, j0 + kChunk, next);
      PrefetchRows(v_side, job.table, job.kv_head, j0 + kChunk, next);
    }
    for (int g = 0; g < ng; ++g) {
      const float* q = job.q + int64_t{g0 + g} * hd;
      const float chunk_max = Scores<NV>(q, k_rows, nk, hd, job.scale, p[g]);
      const float new_m = std::max(state[g].m, chunk_max);
      // exp(m - new_m): 0 on the first chunk (exp(-inf)), exactly 1 when the max stays.
      const float rescale = new_m == state[g].m ? 1.0f : expf(state[g].m - new_m);
      state[g].l = state[g].l * rescale + ExpShifted(p[g], new_m);
      state[g].m = new_m;
      if constexpr (NV > 0) {
        AccumulateFixed<NV>(acc[g], rescale, p[g], v_rows, nk);
      } else {
        Accumulate(acc[g], rescale, p[g], v_rows, nk, hd);
      }
    }
  }
  for (int g = 0; g < ng; ++g) {
    const float inv = state[g].l > 0.0f ? 1.0f / state[g].l : 0.0f;
    float* out = job.out + int64_t{g0 + g} * hd;
    for (int32_t i = 0; i < hd; ++i) out[i] = acc[g][i] * inv;
  }
}

template <int NV>
void AttendAllSubgroups(const PagedKvLayout& cache, const AttentionGroup& job) {
  for (int32_t g0 = 0; g0 < job.group; g0 += kMaxGroup) {
    AttendSubgroup<NV>(cache, job, g0, std::min(kMaxGroup, job.group - g0));
  }
}

// Head dims of whole vectors get the unrolled row loops; any other takes the general one.
void AttendGroupImpl(const PagedKvLayout& cache, const AttentionGroup& job) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int32_t>(hn::Lanes(d));
  const int32_t hd = cache.head_dim;
  switch (hd % lanes == 0 ? hd / lanes : 0) {
    case 1:
      return AttendAllSubgroups<1>(cache, job);
    case 2:
      return AttendAllSubgroups<2>(cache, job);
    case 4:
      return AttendAllSubgroups<4>(cache, job);
    case 8:
      return AttendAllSubgroups<8>(cache, job);
    default:
      return AttendAllSubgroups<0>(cache, job);
  }
}

// DecodeKvRow of this target, for the tests.
void DecodeKvRowImpl(const void* base, DType dtype, int64_t offset, int32_t n, float* dst) {
  if (IsQuantizedDType(dtype)) return DecodeKvRow(base, dtype, offset, n, dst);
  LoadHalfRow(base, dtype, offset, n, dst);
}

}  // namespace HWY_NAMESPACE
}  // namespace pagedkv::cpu::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace pagedkv::cpu::simd {

HWY_EXPORT(AttendGroupImpl);
HWY_EXPORT(DecodeKvRowImpl);

void AttendGroup(const PagedKvLayout& cache, const AttentionGroup& job) {
  HWY_DYNAMIC_DISPATCH(AttendGroupImpl)(cache, job);
}

void DecodeKvRowForAttention(const void* base, DType dtype, int64_t offset, int32_t n, float* dst) {
  HWY_DYNAMIC_DISPATCH(DecodeKvRowImpl)(base, dtype, offset, n, dst);
}

}  // namespace pagedkv::cpu::simd
#endif  // HWY_ONCE
