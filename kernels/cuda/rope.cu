// Copyright 2026 The pagedkv Authors.
//
// CUDA RoPE, KV write (reshape_and_cache) and re-rotation. One block per token; threads walk
// (head, pair) for the rotated dims and (head, dim) for pass-through dims and values. The math is
// RopeRotatePair / ReRotateCosSin / RotatePair from pagedkv/kernels/rope_table.h and
// pagedkv/kernels/rope_math.h, the same functions the CPU reference calls. With
// ContentCheck::kTrusted or kDeferred, tokens with a negative position or an out-of-range slot are
// skipped (nothing written for them). Page offsets come from the layout's strides (resolved by the
// launcher), one SlotOffset per token.
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "kernels/content_checks.h"
#include "kernels/cuda/content_check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/op_validate.h"
#include "pagedkv/kernels/cuda_ops.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/kernels/rope_table.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cuda {
namespace {

constexpr int kThreads = 128;

__device__ __forceinline__ void RotateHeadsParallel(const RopeTableView& rope, int64_t position,
                                                    float* row, int32_t num_heads) {
  const int32_t num_pairs = rope.NumPairs();
  for (int32_t idx = threadIdx.x; idx < num_heads * num_pairs; idx += blockDim.x) {
    const int32_t h = idx / num_pairs;
    RopeRotatePair(rope, position, idx % num_pairs, row + static_cast<int64_t>(h) * rope.head_dim);
  }
}

__global__ void RopeKernel(RopeArgs a, int64_t q_stride, int64_t k_stride) {
  const int64_t t = blockIdx.x;
  const int64_t position = a.positions[t];
  if (!PositionValid(position)) return;  // only reachable with ContentCheck::kTrusted
  RotateHeadsParallel(a.rope, position, a.q + t * q_stride, a.num_q_heads);
  if (a.k != nullptr) RotateHeadsParallel(a.rope, position, a.k + t * k_stride, a.num_kv_heads);
}

// Copies element (slot, head, d) of raw storage from src_slot to dst_slot.
__device__ __forceinline__ void CopyRaw(void* base, DType dtype, int64_t dst, int64_t src) {
  if (DTypeSize(dtype) == 2) {
    static_cast<uint16_t*>(base)[dst] = static_cast<const uint16_t*>(base)[src];
  } else {
    static_cast<uint32_t*>(base)[dst] = static_cast<const uint32_t*>(base)[src];
  }
}

__global__ void ReshapeAndCacheKernel(ReshapeAndCacheArgs a, int64_t q_stride, int64_t k_stride,
                                      int64_t v_stride) {
  const int64_t t = blockIdx.x;
  const PagedKvLayout& cache = a.cache;
  const int64_t position = a.rotate ? a.positions[t] : 0;
  if (!PositionValid(position)) return;  // only reachable with ContentCheck::kTrusted
  const bool rotate = a.rotate;
  if (rotate && a.q != nullptr) {
    RotateHeadsParallel(a.rope, position, a.q + t * q_stride, a.num_q_heads);
  }
  const int64_t slot = a.slot_mapping[t];
  if (slot == -1 || !SlotValid(slot, cache.NumSlots(), /*allow_skip=*/false)) return;
  const int64_t base = cache.SlotOffset(slot);  // cache strides are resolved by the launcher
  const int64_t head_stride = cache.head_stride;
  const int32_t hd = cache.head_dim;
  const int32_t rd = rotate ? a.rope.rotary_dim : 0;
  const int32_t num_pairs = rd / 2;
  const float af = a.rope.attention_factor;
  for (int32_t idx = threadIdx.x; idx < cache.num_kv_heads * num_pairs; idx += blockDim.x) {
    const int32_t h = idx / num_pairs;
    const int32_t i = idx % num_pairs;
    int32_t da, db;
    RopePairDims(a.rope.layout, rd, i, &da, &db);
    const float* k = a.k + t * k_stride + static_cast<int64_t>(h) * hd;
    float x = k[da];
    float y = k[db];
    float c, s;
    a.rope.CosSin(position, i, &c, &s);
    RotatePair(&x, &y, c * af, s * af);
    StoreElement(cache.k, cache.dtype, base + h * head_stride + da, x);
    StoreElement(cache.k, cache.dtype, base + h * head_stride + db, y);
  }
  const int32_t pass = hd - rd;
  for (int32_t idx = threadIdx.x; idx < cache.num_kv_heads * pass; idx += blockDim.x) {
    const int32_t h = idx / pass;
    const int32_t d = rd + idx % pass;
    StoreElement(cache.k, cache.dtype, base + h * head_stride + d,
                 a.k[t * k_stride + static_cast<int64_t>(h) * hd + d]);
  }
  for (int32_t idx = threadIdx.x; idx < cache.num_kv_heads * hd; idx += blockDim.x) {
    const int32_t h = idx / hd;
    const int32_t d = idx % hd;
    StoreElement(cache.v, cache.dtype, base + h * head_stride + d,
                 a.v[t * v_stride + static_cast<int64_t>(h) * hd + d]);
  }
}

__global__ void ReRotateKernel(ReRotateArgs a) {
  const int64_t t = blockIdx.x;
  const PagedKvLayout& cache = a.cache;
  const int64_t src = a.src_slots[t];
  const int64_t dst = a.dst_slots[t];
  const int64_t old_position = a.old_positions[t];
  const int64_t new_position = a.new_positions[t];
  // Only reachable with ContentCheck::kTrusted:
  if (!SlotValid(src, cache.NumSlots(), false) || !SlotValid(dst, cache.NumSlots(), false)) return;
  if (!PositionValid(old_position) || !PositionValid(new_position)) return;
  const int64_t src_base = cache.SlotOffset(src);  // cache strides are resolved by the launcher
  const int64_t dst_base = cache.SlotOffset(dst);
  const int64_t head_stride = cache.head_stride;
  const int32_t hd = cache.head_dim;
  const int32_t rd = a.rope.rotary_dim;
  const int32_t num_pairs = rd / 2;
  for (int32_t idx = threadIdx.x; idx < cache.num_kv_heads * num_pairs; idx += blockDim.x) {
    const int32_t h = idx / num_pairs;
    const int32_t i = idx % num_pairs;
    float c, s;
    ReRotateCosSin(a.rope, a.mode, old_position, new_position, i, &c, &s);
    int32_t da, db;
    RopePairDims(a.rope.layout, rd, i, &da, &db);
    const int64_t src_head = src_base + h * head_stride;
    const int64_t dst_head = dst_base + h * head_stride;
    float x = LoadElement(cache.k, cache.dtype, src_head + da);
    float y = LoadElement(cache.k, cache.dtype, src_head + db);
    RotatePair(&x, &y, c, s);
    StoreElement(cache.k, cache.dtype, dst_head + da, x);
    StoreElement(cache.k, cache.dtype, dst_head + db, y);
  }
  if (src == dst) return;
  const int32_t pass = hd - rd;
  for (int32_t idx = threadIdx.x; idx < cache.num_kv_heads * pass; idx += blockDim.x) {
    const int32_t h = idx / pass;
    const int32_t d = rd + idx % pass;
    CopyRaw(cache.k, cache.dtype, dst_base + h * head_stride + d, src_base + h * head_stride + d);
  }
  for (int32_t idx = threadIdx.x; idx < cache.num_kv_heads * hd; idx += blockDim.x) {
    const int32_t h = idx / hd;
    const int32_t d = idx % hd;
    CopyRaw(cache.v, cache.dtype, dst_base + h * head_stride + d, src_base + h * head_stride + d);
  }
}

absl::Status CheckGrid(const char* op, int64_t num_tokens) {
  if (num_tokens > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": num_tokens must be < 2^31"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Rope(const RopeArgs& args, cudaStream_t stream, const LaunchOptions& options) {
  PAGEDKV_RETURN_IF_ERROR(ValidateRope(args));
  PAGEDKV_RETURN_IF_ERROR(CheckGrid("Rope", args.num_tokens));
  if (args.num_tokens == 0) return absl::OkStatus();
  if (options.check != ContentCheck::kTrusted) {
    PAGEDKV_ASSIGN_OR_RETURN(Workspace * workspace, WorkspaceOrDefault(options.workspace, stream));
    absl::MutexLock lock(&workspace->mutex());
    PAGEDKV_RETURN_IF_ERROR(CheckRopeOnDevice(args, stream, *workspace, options));
  }
  const int64_t hd = args.rope.head_dim;
  RopeKernel<<<static_cast<unsigned>(args.num_tokens), kThreads, 0, stream>>>(
      args, args.q_stride == 0 ? args.num_q_heads * hd : args.q_stride,
      args.k_stride == 0 ? args.num_kv_heads * hd : args.k_stride);
  PAGEDKV_CUDA_CHECK_LAUNCH("RopeKernel");
  return absl::OkStatus();
}

absl::Status ReshapeAndCache(const ReshapeAndCacheArgs& args, cudaStream_t stream,
                             const LaunchOptions& options) {
  PAGEDKV_RETURN_IF_ERROR(ValidateReshapeAndCache(args));
  PAGEDKV_RETURN_IF_ERROR(CheckGrid("ReshapeAndCache", args.num_tokens));
  if (args.num_tokens == 0) return absl::OkStatus();
  if (options.check != ContentCheck::kTrusted) {
    PAGEDKV_ASSIGN_OR_RETURN(Workspace * workspace, WorkspaceOrDefault(options.workspace, stream));
    absl::MutexLock lock(&workspace->mutex());
    PAGEDKV_RETURN_IF_ERROR(CheckReshapeAndCacheOnDevice(args, stream, *workspace, options));
  }
  const int64_t row = int64_t{args.cache.num_kv_heads} * args.cache.head_dim;
  ReshapeAndCacheArgs launch = args;
  launch.cache = args.cache.Resolved();
  ReshapeAndCacheKernel<<<static_cast<unsigned>(args.num_tokens), kThreads, 0, stream>>>(
      launch, args.q_stride == 0 ? int64_t{args.num_q_heads} * args.cache.head_dim : args.q_stride,
      args.k_stride == 0 ? row : args.k_stride, args.v_stride == 0 ? row : args.v_stride);
  PAGEDKV_CUDA_CHECK_LAUNCH("ReshapeAndCacheKernel");
  return absl::OkStatus();
}

absl::Status ReRotate(const ReRotateArgs& args, cudaStream_t stream, const LaunchOptions& options) {
  PAGEDKV_RETURN_IF_ERROR(ValidateReRotate(args));
  PAGEDKV_RETURN_IF_ERROR(CheckGrid("ReRotate", args.num_tokens));
  if (args.num_tokens == 0) return absl::OkStatus();
  if (options.check != ContentCheck::kTrusted) {
    PAGEDKV_ASSIGN_OR_RETURN(Workspace * workspace, WorkspaceOrDefault(options.workspace, stream));
    absl::MutexLock lock(&workspace->mutex());
    PAGEDKV_RETURN_IF_ERROR(CheckReRotateOnDevice(args, stream, *workspace, options));
  }
  ReRotateArgs launch = args;
  launch.cache = args.cache.Resolved();
  ReRotateKernel<<<static_cast<unsigned>(args.num_tokens), kThreads, 0, stream>>>(launch);
  PAGEDKV_CUDA_CHECK_LAUNCH("ReRotateKernel");
  return absl::OkStatus();
}

}  // namespace pagedkv::cuda
