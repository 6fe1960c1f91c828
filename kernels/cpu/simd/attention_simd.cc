// Copyright 2026 The pagedkv Authors.
//
// Vector paged attention for the (query token, KV head) groups of one or more tokens. Keys are
// taken in chunks of kChunk: the chunk's scores, their max, one scalar exp to rescale the running
// state (the online softmax of kernels/softmax_math.h, per chunk instead of per key), then one
// vector exp per key, and the weighted values added in key order. Query heads of the group, and
// the rows of tokens whose keys lie in the same blocks, share each chunk's K/V rows.
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

// Keys per online-softmax step (kAttentionChunkKeys); a multiple of every target's lanes.
constexpr int kChunk = static_cast<int>(kAttentionChunkKeys);

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

// Vectors of acc one key pass updates: its four chains of each stay in registers (16 of the 32
// AVX-512 registers; 8 of the 16 elsewhere).
#if HWY_TARGET <= HWY_AVX3
constexpr int kPassVectors = 4;
#else
constexpr int kPassVectors = 2;
#endif

// acc[offset, offset + G * lanes) = WeightedSum of each of its G vectors, the keys in the outer
// loop: each key's weight is broadcast and its row pointer read once for all G vectors. Per lane
// the same multiply-adds in the same order as WeightedSum (chain j % 4, then (c0 + c1) + (c2 +
// c3)).
template <int G>
HWY_INLINE void AccumulatePass(float* HWY_RESTRICT acc, float rescale, const float* p,
                               const float* const* v, int num_keys, int32_t offset) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const auto lanes = static_cast<int32_t>(hn::Lanes(d));
  V c[4][G];
  HWY_UNROLL(4)
  for (int g = 0; g < G; ++g) {
    c[0][g] = hn::Mul(hn::LoadU(d, acc + offset + g * lanes), hn::Set(d, rescale));
    c[1][g] = c[2][g] = c[3][g] = hn::Zero(d);
  }
  // Key `key` into chain `chain`.
  auto add_key = [&](int chain, int key) HWY_ATTR {
    const V w = hn::Set(d, p[key]);
    const float* row = v[key] + offset;
    HWY_UNROLL(4)
    for (int g = 0; g < G; ++g) {
      c[chain][g] = hn::MulAdd(w, hn::LoadU(d, row + g * lanes), c[chain][g]);
    }
  };
  int j = 0;
  for (; j + 4 <= num_keys; j += 4) {
    HWY_UNROLL(4)
    for (int i = 0; i < 4; ++i) add_key(i, j + i);
  }
  for (int i = 0; j + i < num_keys; ++i) add_key(i, j + i);  // at most three keys left
  HWY_UNROLL(4)
  for (int g = 0; g < G; ++g) {
    hn::StoreU(hn::Add(hn::Add(c[0][g], c[1][g]), hn::Add(c[2][g], c[3][g])), d,
               acc + offset + g * lanes);
  }
}

// acc[0, NV * lanes) = acc * rescale + sum_j p[j] * v[j] (WeightedSum's order, as Accumulate),
// kPassVectors vectors per pass over the keys.
template <int NV>
HWY_INLINE void AccumulateFixed(float* HWY_RESTRICT acc, float rescale, const float* p,
                                const float* const* v, int num_keys) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int32_t>(hn::Lanes(d));
  constexpr int kG = NV < kPassVectors ? NV : kPassVectors;
  static_assert(NV % kG == 0, "head_dim's vectors split into whole passes");
  for (int v0 = 0; v0 < NV; v0 += kG) AccumulatePass<kG>(acc, rescale, p, v, num_keys, v0 * lanes);
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

// One chunk of keys: row pointers for K and V (pages that are not fp32 decoded into the
// scratch rows).
struct ChunkRows {
  float k_scratch[kChunk][kMaxHeadDim];
  float v_scratch[kChunk][kMaxHeadDim];
  const float* k[kChunk];
  const float* v[kChunk];
};

// Points `c` at keys [j0, j0 + nk) of `table` and prefetches the chunk after it when it starts
// before `end`.
HWY_INLINE void LoadChunk(const PagedKvLayout& cache, const PagedKvLayout& v_side,
                          const int32_t* table, int32_t kv_head, int64_t j0, int nk, int64_t end,
                          ChunkRows* c) {
  SideRows(cache, table, kv_head, j0, nk, c->k_scratch, c->k);
  SideRows(v_side, table, kv_head, j0, nk, c->v_scratch, c->v);
  if (j0 + kChunk < end) {
    const int next = static_cast<int>(std::min<int64_t>(kChunk, end - j0 - kChunk));
    PrefetchRows(cache, table, kv_head, j0 + kChunk, next);
    PrefetchRows(v_side, table, kv_head, j0 + kChunk, next);
  }
}

// One online-softmax step of one query head over the chunk's first nk keys.
template <int NV>
HWY_INLINE void StepHead(const float* q, const ChunkRows& c, int nk, int32_t hd, float scale,
                         HeadState* state, float* acc, float* p) {
  const float chunk_max = Scores<NV>(q, c.k, nk, hd, scale, p);
  const float new_m = std::max(state->m, chunk_max);
  // exp(m - new_m): 0 on the first chunk (exp(-inf)), exactly 1 when the max stays.
  const float rescale = new_m == state->m ? 1.0f : expf(state->m - new_m);
  state->l = state->l * rescale + ExpShifted(p, new_m);
  state->m = new_m;
  if constexpr (NV > 0) {
    AccumulateFixed<NV>(acc, rescale, p, c.v, nk);
  } else {
    Accumulate(acc, rescale, p, c.v, nk, hd);
  }
}

// The running state of the query heads of one pass: row r's head g at index r * ng + g.
struct PassState {
  float acc[kMaxAttentionHeadRows][kMaxHeadDim];
  float p[kMaxAttentionHeadRows][kChunk];
  HeadState head[kMaxAttentionHeadRows];
};

// Steps query heads [g0, g0 + ng) of row r through the chunk's first nk keys.
template <int NV>
HWY_INLINE void StepRow(const AttentionGroup& row, int r, int32_t g0, int ng, const ChunkRows& c,
                        int nk, int32_t hd, PassState* s) {
  for (int g = 0; g < ng; ++g) {
    const int h = r * ng + g;
    StepHead<NV>(row.q + int64_t{g0 + g} * hd, c, nk, hd, row.scale, &s->head[h], s->acc[h],
                 s->p[h]);
  }
}

// One pass over the keys for query heads [g0, g0 + ng) of every row: keys [0, shared_end)
// through rows[0]'s table, a chunk read once for all rows; then each row alone. NV as in Scores.
template <int NV>
void AttendRowsPass(const PagedKvLayout& cache, const AttentionRows& job, int32_t g0, int ng) {
  const int32_t hd = cache.head_dim;
  const PagedKvLayout v_side = cache.VSide();
  const int32_t kv_head = job.rows[0].kv_head;
  PassState s;
  ChunkRows c;
  int64_t widest = 0;
  for (int r = 0; r < job.num_rows; ++r) {
    widest = std::max(widest, job.rows[r].num_keys);
    for (int g = 0; g < ng; ++g) std::fill(s.acc[r * ng + g], s.acc[r * ng + g] + hd, 0.0f);
  }
  const int64_t shared_end = std::min(job.shared_keys, widest);
  for (int64_t j0 = 0; j0 < shared_end; j0 += kChunk) {
    const int nk = static_cast<int>(std::min<int64_t>(kChunk, shared_end - j0));
    LoadChunk(cache, v_side, job.rows[0].table, kv_head, j0, nk, shared_end, &c);
    for (int r = 0; r < job.num_rows; ++r) {
      const int64_t end = std::min(job.rows[r].num_keys, shared_end);
      if (j0 < end)
        StepRow<NV>(job.rows[r], r, g0, ng, c,
                    static_cast<int>(std::min<int64_t>(kChunk, end - j0)), hd, &s);
    }
  }
  for (int r = 0; r < job.num_rows; ++r) {
    const AttentionGroup& row = job.rows[r];
    for (int64_t j0 = std::max(shared_end, row.first_key); j0 < row.num_keys; j0 += kChunk) {
      const int nk = static_cast<int>(std::min<int64_t>(kChunk, row.num_keys - j0));
      LoadChunk(cache, v_side, row.table, kv_head, j0, nk, row.num_keys, &c);
      StepRow<NV>(row, r, g0, ng, c, nk, hd, &s);
    }
    for (int g = 0; g < ng; ++g) {
      const HeadState& state = s.head[r * ng + g];
      const float inv = state.l > 0.0f ? 1.0f / state.l : 0.0f;
      float* out = row.out + int64_t{g0 + g} * hd;
      for (int32_t i = 0; i < hd; ++i) out[i] = s.acc[r * ng + g][i] * inv;
    }
  }
}

template <int NV>
void AttendRowsAllHeads(const PagedKvLayout& cache, const AttentionRows& job) {
  const int32_t group = job.rows[0].group;
  const int32_t per_pass = std::max(1, kMaxAttentionHeadRows / job.num_rows);
  for (int32_t g0 = 0; g0 < group; g0 += per_pass) {
    AttendRowsPass<NV>(cache, job, g0, std::min(per_pass, group - g0));
  }
}

// Head dims of whole vectors get the unrolled row loops; any other takes the general one.
void AttendRowsImpl(const PagedKvLayout& cache, const AttentionRows& job) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int32_t>(hn::Lanes(d));
  const int32_t hd = cache.head_dim;
  switch (hd % lanes == 0 ? hd / lanes : 0) {
    case 1:
      return AttendRowsAllHeads<1>(cache, job);
    case 2:
      return AttendRowsAllHeads<2>(cache, job);
    case 4:
      return AttendRowsAllHeads<4>(cache, job);
    case 8:
      return AttendRowsAllHeads<8>(cache, job);
    default:
      return AttendRowsAllHeads<0>(cache, job);
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

HWY_EXPORT(AttendRowsImpl);
HWY_EXPORT(DecodeKvRowImpl);

void AttendRows(const PagedKvLayout& cache, const AttentionRows& job) {
  HWY_DYNAMIC_DISPATCH(AttendRowsImpl)(cache, job);
}

void AttendGroup(const PagedKvLayout& cache, const AttentionGroup& job) {
  AttendRows(cache, {.rows = &job, .num_rows = 1, .shared_keys = 0});
}

void DecodeKvRowForAttention(const void* base, DType dtype, int64_t offset, int32_t n, float* dst) {
  HWY_DYNAMIC_DISPATCH(DecodeKvRowImpl)(base, dtype, offset, n, dst);
}

}  // namespace pagedkv::cpu::simd
#endif  // HWY_ONCE
