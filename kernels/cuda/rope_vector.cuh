// Copyright 2026 The pagedkv Authors.
//
// Vector building blocks of the KV write and re-rotation kernels (kernels/cuda/rope.cu), device
// code only. A "vector" is N consecutive elements of one head row (N in {1, 2, 4, 8}), moved in
// accesses of at most 16 bytes; the launcher picks N so that every such access is aligned. The
// per-element math is still the shared PAGEDKV_HD code: LoadElement / StoreElement convert each
// element, RopeTableView::CosSin / RopeComposeDelta give each pair's cos/sin (a table entry is
// read as a vector, the same floats CosSin returns), RotatePair turns each pair. So a kernel built
// on these helpers gives the same bits as one calling those functions element by element.
//
// Example (one chunk of N pairs of a K head, fp32 in, bf16 out):
//   float x[2 * N], cs[2 * N];
//   int32_t da, db;
//   ChunkDims<N>(rope.layout, rope.rotary_dim, chunk, &da, &db);
//   LoadFloats<N>(k_head + da, x);
//   LoadFloats<N>(k_head + db, x + N);
//   CosSinChunk<N>(rope, position, chunk * N, cs);
//   RotateChunk<N>(rope.layout, cs, x, SharedRotation());
//   StoreVector<N, DType::kBF16>(cache.k, dst_head + da, x);
//   StoreVector<N, DType::kBF16>(cache.k, dst_head + db, x + N);
#ifndef PAGEDKV_KERNELS_CUDA_ROPE_VECTOR_CUH_
#define PAGEDKV_KERNELS_CUDA_ROPE_VECTOR_CUH_

#include <cstdint>
#include <type_traits>

#include "pagedkv/dtype.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/kernels/rope_table.h"

namespace pagedkv::cuda {

// Storage type of one element of `D` (the raw bits for the 16-bit types).
template <DType D>
using StorageOf = std::conditional_t<D == DType::kF32, float, uint16_t>;

// Copies kBytes (1 < kBytes, a power of two) from `src` to `dst`, both aligned to
// min(kBytes, 16) bytes, in accesses of min(kBytes, 16) bytes.
template <int kBytes>
__device__ __forceinline__ void CopyBytes(void* dst, const void* src) {
  if constexpr (kBytes >= 16) {
#pragma unroll
    for (int i = 0; i < kBytes / 16; ++i) {
      static_cast<uint4*>(dst)[i] = static_cast<const uint4*>(src)[i];
    }
  } else if constexpr (kBytes == 8) {
    *static_cast<uint2*>(dst) = *static_cast<const uint2*>(src);
  } else if constexpr (kBytes == 4) {
    *static_cast<uint32_t*>(dst) = *static_cast<const uint32_t*>(src);
  } else {
    static_assert(kBytes == 2, "CopyBytes: 2, 4, 8 or a multiple of 16 bytes");
    *static_cast<uint16_t*>(dst) = *static_cast<const uint16_t*>(src);
  }
}

// out[j] = src[j], j < N; `src` aligned to min(4 N, 16) bytes.
template <int N>
__device__ __forceinline__ void LoadFloats(const float* src, float* out) {
  alignas(16) float raw[N];
  CopyBytes<N * 4>(raw, src);
#pragma unroll
  for (int j = 0; j < N; ++j) out[j] = raw[j];
}

// out[j] = LoadElement(base, D, offset + j), j < N; element `offset` aligned to the vector.
template <int N, DType D>
__device__ __forceinline__ void LoadVector(const void* base, int64_t offset, float* out) {
  alignas(16) StorageOf<D> raw[N];
  CopyBytes<N * sizeof(StorageOf<D>)>(raw, static_cast<const StorageOf<D>*>(base) + offset);
#pragma unroll
  for (int j = 0; j < N; ++j) out[j] = LoadElement(raw, D, j);
}

// StoreElement(base, D, offset + j, in[j]), j < N, as one vector; element `offset` aligned.
template <int N, DType D>
__device__ __forceinline__ void StoreVector(void* base, int64_t offset, const float* in) {
  alignas(16) StorageOf<D> raw[N];
#pragma unroll
  for (int j = 0; j < N; ++j) StoreElement(raw, D, j, in[j]);
  CopyBytes<N * sizeof(StorageOf<D>)>(static_cast<StorageOf<D>*>(base) + offset, raw);
}

// raw[j] = element offset + j of the D array `base`, j < N, as stored (no conversion); element
// `offset` aligned to the vector. `raw` aligned to 16 bytes.
template <int N, DType D>
__device__ __forceinline__ void LoadRaw(const void* base, int64_t offset, StorageOf<D>* raw) {
  CopyBytes<N * sizeof(StorageOf<D>)>(raw, static_cast<const StorageOf<D>*>(base) + offset);
}

// Element offset + j of the D array `base` = raw[j], j < N, as one vector (see LoadRaw).
template <int N, DType D>
__device__ __forceinline__ void StoreRaw(void* base, int64_t offset, const StorageOf<D>* raw) {
  CopyBytes<N * sizeof(StorageOf<D>)>(static_cast<StorageOf<D>*>(base) + offset, raw);
}

// First dims (da, db) of the two N-element vectors holding pairs [chunk N, chunk N + N) of a head
// with `rotary_dim` rotated dims. kHalfSplit: pair chunk N + j is (da + j, db + j), as
// RopePairDims says (i, i + rotary_dim / 2). kInterleaved: the two vectors are one run of 2 N dims
// from da = 2 chunk N (db = da + N), pair chunk N + j is its dims (2 j, 2 j + 1).
// REQUIRES: rotary_dim a multiple of 2 N.
template <int N>
__device__ __forceinline__ void ChunkDims(RopeLayout layout, int32_t rotary_dim, int32_t chunk,
                                          int32_t* da, int32_t* db) {
  if (layout == RopeLayout::kInterleaved) {
    *da = 2 * chunk * N;
    *db = *da + N;
  } else {
    *da = chunk * N;
    *db = rotary_dim / 2 + chunk * N;
  }
}

// RotatePair, for RotateChunk.
struct SharedRotation {
  __device__ void operator()(float* x, float* y, float c, float s) const { RotatePair(x, y, c, s); }
};

// RotatePair's formula with the rounding of each product fixed: x = fma(x0, c, -(y0 s)),
// y = fma(y0, c, x0 s), the unfused products rounded once. RotatePair leaves that choice to nvcc's
// multiply-add contraction, which decides per call site; this is what it chose in the per-pair KV
// write kernel that the vector one replaced, so the KV write's pages stay bit-identical.
struct KvWriteRotation {
  __device__ void operator()(float* x, float* y, float c, float s) const {
    const float x0 = *x;
    const float y0 = *y;
    *x = __fmaf_rn(x0, c, -__fmul_rn(y0, s));
    *y = __fmaf_rn(y0, c, __fmul_rn(x0, s));
  }
};

// Rotates the N pairs held in x[0, 2 N) (the two vectors of ChunkDims, x[0, N) at da and
// x[N, 2 N) at db) by cos/sin cs[2 j], cs[2 j + 1] of pair j, with `rotate` (a RotatePair).
template <int N, typename Rotation>
__device__ __forceinline__ void RotateChunk(RopeLayout layout, const float* cs, float* x,
                                            Rotation rotate) {
  if (layout == RopeLayout::kInterleaved) {
#pragma unroll
    for (int j = 0; j < N; ++j) rotate(&x[2 * j], &x[2 * j + 1], cs[2 * j], cs[2 * j + 1]);
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) rotate(&x[j], &x[N + j], cs[2 * j], cs[2 * j + 1]);
  }
}

// cs[2 j], cs[2 j + 1] = rope.CosSin(position, first + j), j < N. A position inside the table is
// one vector load of its entries (first a multiple of N; the table aligned to min(8 N, 16) bytes,
// which the launcher checks); other positions call CosSin per pair, in a loop that is not
// unrolled: the computed path (float64 cos and sin) is long and rare, and N inlined copies of it
// would cost the common path registers.
template <int N>
__device__ __forceinline__ void CosSinChunk(const RopeTableView& rope, int64_t position,
                                            int32_t first, float* cs) {
  if (position >= 0 && position < rope.num_positions) {
    LoadFloats<2 * N>(rope.cos_sin + (position * rope.NumPairs() + first) * 2, cs);
    return;
  }
  float computed[2 * N];
#pragma unroll 1
  for (int j = 0; j < N; ++j) {
    rope.CosSin(position, first + j, &computed[2 * j], &computed[2 * j + 1]);
  }
#pragma unroll
  for (int j = 0; j < 2 * N; ++j) cs[j] = computed[j];
}

// cs as ReRotateCosSin(rope, mode, old_position, new_position, first + j) for j < N.
template <int N>
__device__ __forceinline__ void ReRotateCosSinChunk(const RopeTableView& rope, ReRotateMode mode,
                                                    int64_t old_position, int64_t new_position,
                                                    int32_t first, float* cs) {
  if (mode == ReRotateMode::kDelta) {
    CosSinChunk<N>(rope, new_position - old_position, first, cs);
    return;
  }
  float cs_new[2 * N], cs_old[2 * N];
  CosSinChunk<N>(rope, new_position, first, cs_new);
  CosSinChunk<N>(rope, old_position, first, cs_old);
#pragma unroll
  for (int j = 0; j < N; ++j) {
    RopeComposeDelta(cs_new[2 * j], cs_new[2 * j + 1], cs_old[2 * j], cs_old[2 * j + 1], &cs[2 * j],
                     &cs[2 * j + 1]);
  }
}

}  // namespace pagedkv::cuda

#endif  // PAGEDKV_KERNELS_CUDA_ROPE_VECTOR_CUH_
