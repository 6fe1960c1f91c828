// Copyright 2026 The pagedkv Authors.
//
// CUDA paged attention with split-K (flash decoding).
//
// Partition kernel: one block per (query token, kv head, tile of up to kHeadTile query heads of
// that kv head's GQA group, key partition), so each K/V row is read once per tile, not once per
// query head. The block's kWarps warps take the partition's keys round robin, two keys per step
// (four row loads in flight per warp); within a warp, lane l holds dims [l * N, l * N + N) of q,
// of the K/V rows (one vector load per row when aligned) and of the accumulators, so a key's
// score is N multiply-adds per lane and one butterfly reduction per head. Each warp keeps one
// OnlineSoftmax per head (kernels/softmax_math.h); the warps' states are merged in shared memory
// with MergeAttentionState. With one partition the block writes the normalised output; otherwise
// it writes its partial (m, l, unnormalised accumulator) to the workspace and the merge kernel
// folds the partitions with the same MergeAttentionState. Key ranges come from AttentionFirstKey
// (the sliding window) / AttentionLastKey / PartitionKeyRange and the partition count from
// ChooseAttentionSplit (kernels/attention_split.h), the functions the CPU tests exercise.
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "kernels/attention_split.h"
#include "kernels/content_checks.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/content_check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/op_validate.h"
#include "kernels/softmax_math.h"
#include "pagedkv/kernels/cuda_ops.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/kernels/kv_quant.h"
#include "pagedkv/rope_config.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarpSize;
constexpr int kHeadTile = 4;  // query heads per block

// Launch constants of one PagedAttention call.
struct AttentionPlan {
  float scale = 1.0f;            // score scale
  int32_t head_tiles = 1;        // blocks per kv head along its GQA group
  int32_t num_partitions = 1;    // key partitions (1: no split, no merge kernel)
  int64_t partition_size = 0;    // keys per partition
  bool vector_loads = false;     // K/V rows start aligned for N-element vector loads
  float* partial_acc = nullptr;  // [num_tokens, num_q_heads, num_partitions, head_dim]
  float* partial_ml = nullptr;   // [num_tokens, num_q_heads, num_partitions, 2] (m, l)
};

__device__ __forceinline__ int32_t SequenceOf(const int32_t* query_start_loc, int32_t num_seqs,
                                              int64_t token) {
  int32_t lo = 0;  // largest s < num_seqs with query_start_loc[s] <= token
  int32_t hi = num_seqs;
  while (hi - lo > 1) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (query_start_loc[mid] <= token) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// Unpacks two 16-bit elements (element 2i in the low half: little-endian) to fp32.
__device__ __forceinline__ void Unpack2(uint32_t word, DType dtype, float* out) {
  const uint16_t lo = static_cast<uint16_t>(word & 0xffffu);
  const uint16_t hi = static_cast<uint16_t>(word >> 16);
  if (dtype == DType::kF16) {
    out[0] = F16BitsToF32(lo);
    out[1] = F16BitsToF32(hi);
  } else {
    out[0] = BF16BitsToF32(lo);
    out[1] = BF16BitsToF32(hi);
  }
}

// out[r] = element offset + r of `base` for r < N, as fp32; elements at or beyond `valid` read as
// 0. `vector`: one aligned vector load (REQUIRES offset % N == 0, base 16-byte aligned, and valid
// >= N or valid <= 0), else scalar loads.
template <int N>
__device__ __forceinline__ void LoadChunk(const void* base, DType dtype, int64_t offset,
                                          int32_t valid, bool vector, float (&out)[N]) {
  if (vector && valid >= N) {
    if (dtype == DType::kF32) {
      const float* p = static_cast<const float*>(base) + offset;
      if constexpr (N == 2) {
        const float2 x = *reinterpret_cast<const float2*>(p);
        out[0] = x.x;
        out[1] = x.y;
      } else {
#pragma unroll
        for (int i = 0; i < N / 4; ++i) {
          const float4 x = reinterpret_cast<const float4*>(p)[i];
          out[4 * i] = x.x;
          out[4 * i + 1] = x.y;
          out[4 * i + 2] = x.z;
          out[4 * i + 3] = x.w;
        }
      }
    } else {
      const uint16_t* p = static_cast<const uint16_t*>(base) + offset;
      if constexpr (N == 2) {
        Unpack2(*reinterpret_cast<const uint32_t*>(p), dtype, out);
      } else if constexpr (N == 4) {
        const uint2 x = *reinterpret_cast<const uint2*>(p);
        Unpack2(x.x, dtype, out);
        Unpack2(x.y, dtype, out + 2);
      } else {
        static_assert(N == 8, "N is 2, 4 or 8");
        const uint4 x = *reinterpret_cast<const uint4*>(p);
        Unpack2(x.x, dtype, out);
        Unpack2(x.y, dtype, out + 2);
        Unpack2(x.z, dtype, out + 4);
        Unpack2(x.w, dtype, out + 6);
      }
    }
    return;
  }
#pragma unroll
  for (int r = 0; r < N; ++r) out[r] = r < valid ? LoadElement(base, dtype, offset + r) : 0.0f;
}

// Loads this lane's chunk of the row at storage unit `row` of `side` (one dtype's pages, at
// side.k): a quantized row dequantized value by value (kv_quant.h).
template <int N>
__device__ __forceinline__ void LoadSideChunk(const PagedKvLayout& side, int64_t row, int32_t d0,
                                              bool vector, float (&out)[N]) {
  if (IsQuantizedDType(side.dtype)) {
#pragma unroll
    for (int r = 0; r < N; ++r) {
      const bool in_row = d0 + r < side.head_dim;
      out[r] = in_row ? LoadKvValue(side.k, side.dtype, row, side.head_dim, d0 + r) : 0.0f;
    }
    return;
  }
  LoadChunk<N>(side.k, side.dtype, row + d0, side.head_dim - d0, vector, out);
}

// Loads this lane's chunk of K and V for key `j`; false (nothing loaded) when the block table
// entry is out of range (only reachable with ContentCheck::kTrusted). Warp-uniform. REQUIRES:
// v_side is cache.VSide() (made once per thread, not per key).
template <int N>
__device__ __forceinline__ bool LoadKey(const PagedKvLayout& cache, const PagedKvLayout& v_side,
                                        const int32_t* table, int64_t j, int32_t kvh, int32_t d0,
                                        bool vector, float (&k)[N], float (&v)[N]) {
  const int32_t block = table[j / cache.block_size];
  if (!BlockIdValid(block, cache.num_blocks)) return false;
  // Strides are resolved by the launcher, so the stride fields are the effective ones.
  const auto in_block = static_cast<int32_t>(j % cache.block_size);
  const int64_t row = cache.TokenOffset(block, in_block) + kvh * cache.head_stride;
  const int64_t v_row =
      cache.MixedDTypes() ? v_side.TokenOffset(block, in_block) + kvh * v_side.head_stride : row;
  LoadSideChunk<N>(cache, row, d0, vector, k);
  LoadSideChunk<N>(v_side, v_row, d0, vector, v);
  return true;
}

// Folds one key into every head's state: scores by a warp butterfly, then the online update.
template <int N>
__device__ __forceinline__ void AttendKey(const float (&q)[kHeadTile][N], const float (&k)[N],
                                          const float (&v)[N], float scale,
                                          OnlineSoftmax (&softmax)[kHeadTile],
                                          float (&acc)[kHeadTile][N]) {
  float dot[kHeadTile];
#pragma unroll
  for (int h = 0; h < kHeadTile; ++h) {
    dot[h] = 0.0f;
#pragma unroll
    for (int r = 0; r < N; ++r) dot[h] += q[h][r] * k[r];
  }
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
#pragma unroll
    for (int h = 0; h < kHeadTile; ++h) dot[h] += __shfl_xor_sync(0xffffffffu, dot[h], offset);
  }
#pragma unroll
  for (int h = 0; h < kHeadTile; ++h) {
    float rescale, p;
    softmax[h].Update(dot[h] * scale, &rescale, &p);
#pragma unroll
    for (int r = 0; r < N; ++r) acc[h][r] = acc[h][r] * rescale + p * v[r];
  }
}

// What one thread block of the partition kernel works on.
struct PartitionWork {
  int64_t token = 0;       // query token
  int32_t kv_head = 0;     // KV head
  int32_t head0 = 0;       // first query head of this block
  int32_t tile_heads = 0;  // query heads of this block (<= kHeadTile)
  int64_t partition = 0;   // key partition
  int64_t begin = 0;       // keys [begin, end) of the partition
  int64_t end = 0;
  const int32_t* table = nullptr;  // the sequence's block table
};

__device__ __forceinline__ PartitionWork LocatePartition(const PagedAttentionArgs& a,
                                                         const AttentionPlan& plan) {
  const PagedKvLayout& cache = a.cache;
  const int32_t group = a.num_q_heads / cache.num_kv_heads;
  PartitionWork w;
  w.token = blockIdx.x;
  w.kv_head = static_cast<int32_t>(blockIdx.y) / plan.head_tiles;
  const int32_t tile = static_cast<int32_t>(blockIdx.y) % plan.head_tiles;
  w.head0 = w.kv_head * group + tile * kHeadTile;
  w.tile_heads = min(kHeadTile, group - tile * kHeadTile);
  w.partition = blockIdx.z;
  const int32_t s = SequenceOf(a.query_start_loc, a.num_seqs, w.token);
  const int64_t kv_len = a.kv_lens[s];
  const int64_t position = a.positions[w.token];
  const int64_t capacity = static_cast<int64_t>(a.max_blocks_per_seq) * cache.block_size;
  int64_t first = 0;
  int64_t last = -1;  // no key (only reachable with ContentCheck::kTrusted)
  if (PositionValid(position) && kv_len >= 1) {
    first = AttentionFirstKey(a.causal, a.sliding_window, position);
    last = AttentionLastKey(a.causal, position, kv_len);
    if (last >= capacity) last = capacity - 1;
  }
  // Partitions tile [first, last] from the window's first key (PlanPartitions sized them for at
  // most the window's keys); those past last are empty.
  PartitionKeyRange(first, last, plan.partition_size, w.partition, &w.begin, &w.end);
  w.table = a.block_tables + static_cast<int64_t>(s) * a.max_blocks_per_seq;
  return w;
}

// This lane's dims [d0, d0 + N) of each head's query; zeros past tile_heads and head_dim (they
// score 0 and are not written). Clears the accumulators.
template <int N>
__device__ __forceinline__ void LoadQueries(const PagedAttentionArgs& a, const PartitionWork& w,
                                            int32_t d0, float (&q)[kHeadTile][N],
                                            float (&acc)[kHeadTile][N]) {
  const int32_t hd = a.cache.head_dim;
#pragma unroll
  for (int h = 0; h < kHeadTile; ++h) {
#pragma unroll
    for (int r = 0; r < N; ++r) {
      q[h][r] = 0.0f;
      acc[h][r] = 0.0f;
    }
    if (h < w.tile_heads) {
      const float* qh = a.q + (w.token * a.num_q_heads + w.head0 + h) * hd;
#pragma unroll
      for (int r = 0; r < N; ++r) {
        if (d0 + r < hd) q[h][r] = qh[d0 + r];
      }
    }
  }
}

// Per-warp softmax states and accumulators of one thread block, in shared memory.
template <int N>
struct WarpStates {
  float m[kWarps][kHeadTile];
  float l[kWarps][kHeadTile];
  float acc[kWarps][kHeadTile][kWarpSize * N];
};

// Merges the warps' states of each (head, dim) and writes the output row, or the partition's
// partial state when the keys are split.
template <int N>
__device__ __forceinline__ void MergeWarpsAndWrite(const PagedAttentionArgs& a,
                                                   const AttentionPlan& plan,
                                                   const PartitionWork& w,
                                                   const WarpStates<N>& states) {
  const int32_t hd = a.cache.head_dim;
  for (int32_t idx = threadIdx.x; idx < w.tile_heads * hd; idx += kThreads) {
    const int32_t h = idx / hd;
    const int32_t d = idx % hd;
    OnlineSoftmax total;
    float o = 0.0f;
#pragma unroll
    for (int warp = 0; warp < kWarps; ++warp) {
      OnlineSoftmax part;
      part.m = states.m[warp][h];
      part.l = states.l[warp][h];
      MergeAttentionState(&total, &o, part, &states.acc[warp][h][d], 1);
    }
    const int64_t row = w.token * a.num_q_heads + w.head0 + h;  // (token, query head)
    if (plan.num_partitions == 1) {
      a.out[row * hd + d] = o * total.InverseSum();
    } else {
      const int64_t prow = row * plan.num_partitions + w.partition;
      plan.partial_acc[prow * hd + d] = o;
      if (d == 0) {
        plan.partial_ml[2 * prow] = total.m;
        plan.partial_ml[2 * prow + 1] = total.l;
      }
    }
  }
}

// Grid (num_tokens, num_kv_heads * head_tiles, num_partitions), kThreads threads. Each warp
// folds every kWarps-th key of the partition (two per iteration) into its heads' online softmax;
// the warps then merge.
template <int N>
__global__ void __launch_bounds__(kThreads)
    PagedAttentionPartitionKernel(PagedAttentionArgs a, AttentionPlan plan) {
  __shared__ WarpStates<N> states;
  const PartitionWork w = LocatePartition(a, plan);
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int32_t d0 = lane * N;  // this lane's dims [d0, d0 + N)
  float q[kHeadTile][N];
  float acc[kHeadTile][N];
  OnlineSoftmax softmax[kHeadTile];
  LoadQueries<N>(a, w, d0, q, acc);
  const PagedKvLayout v_side = a.cache.VSide();
  for (int64_t j = w.begin + warp; j < w.end; j += 2 * kWarps) {
    const int64_t j2 = j + kWarps;
    float k0[N], v0[N], k1[N], v1[N];
    const bool ok0 =
        LoadKey<N>(a.cache, v_side, w.table, j, w.kv_head, d0, plan.vector_loads, k0, v0);
    const bool ok1 = j2 < w.end && LoadKey<N>(a.cache, v_side, w.table, j2, w.kv_head, d0,
                                              plan.vector_loads, k1, v1);
    if (ok0) AttendKey<N>(q, k0, v0, plan.scale, softmax, acc);
    if (ok1) AttendKey<N>(q, k1, v1, plan.scale, softmax, acc);
  }
#pragma unroll
  for (int h = 0; h < kHeadTile; ++h) {
    if (lane == 0) {
      states.m[warp][h] = softmax[h].m;
      states.l[warp][h] = softmax[h].l;
    }
#pragma unroll
    for (int r = 0; r < N; ++r) states.acc[warp][h][d0 + r] = acc[h][r];
  }
  __syncthreads();
  MergeWarpsAndWrite<N>(a, plan, w, states);
}

// Grid (num_tokens, num_q_heads), kThreads threads over head_dim.
__global__ void __launch_bounds__(kThreads)
    PagedAttentionMergeKernel(PagedAttentionArgs a, AttentionPlan plan) {
  const int32_t hd = a.cache.head_dim;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * a.num_q_heads + blockIdx.y;
  const int64_t prow0 = row * plan.num_partitions;
  for (int32_t d = threadIdx.x; d < hd; d += kThreads) {
    OnlineSoftmax total;
    float o = 0.0f;
    for (int32_t p = 0; p < plan.num_partitions; ++p) {
      OnlineSoftmax part;
      part.m = plan.partial_ml[2 * (prow0 + p)];
      part.l = plan.partial_ml[2 * (prow0 + p) + 1];
      MergeAttentionState(&total, &o, part, &plan.partial_acc[(prow0 + p) * hd + d], 1);
    }
    a.out[row * hd + d] = o * total.InverseSum();
  }
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <int N>
absl::Status LaunchPartitions(const PagedAttentionArgs& args, const AttentionPlan& plan,
                              cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(args.num_tokens),
                  static_cast<unsigned>(args.cache.num_kv_heads * plan.head_tiles),
                  static_cast<unsigned>(plan.num_partitions));
  PagedAttentionPartitionKernel<N><<<grid, kThreads, 0, stream>>>(args, plan);
  PAGEDKV_CUDA_CHECK_LAUNCH("PagedAttentionPartitionKernel");
  return absl::OkStatus();
}

}  // namespace

namespace {

// The sizes a launch must fit in (grid dimensions).
absl::Status CheckLaunchLimits(const PagedAttentionArgs& args, int32_t head_tiles) {
  if (args.num_tokens > 0 && args.num_seqs == 0) {  // tokens are looked up in sequences
    return absl::InvalidArgumentError("PagedAttention: num_tokens > 0 needs num_seqs >= 1");
  }
  if (args.num_tokens > INT32_MAX || args.num_q_heads > 65535 ||
      int64_t{args.cache.num_kv_heads} * head_tiles > 65535) {
    return absl::InvalidArgumentError(
        "PagedAttention: num_tokens must be < 2^31 and num_q_heads <= 65535");
  }
  return absl::OkStatus();
}

// Splits the keys into partitions for the device's SMs and takes their scratch from the
// workspace. `max_keys` bounds every sequence's keys.
absl::Status PlanPartitions(const PagedAttentionArgs& args, int64_t max_keys, Workspace& workspace,
                            AttentionPlan& plan) {
  int device = 0;
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  int num_sms = 1;
  PAGEDKV_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device));
  const PagedKvLayout& cache = args.cache;
  const int32_t hd = cache.head_dim;
  const int64_t partial_bytes =
      args.num_tokens * args.num_q_heads * (int64_t{hd} + 2) * static_cast<int64_t>(sizeof(float));
  const AttentionSplit split =
      ChooseAttentionSplit({.max_keys = max_keys,
                            .base_blocks = args.num_tokens * cache.num_kv_heads * plan.head_tiles,
                            .num_sms = num_sms,
                            .partial_bytes = partial_bytes});
  plan.num_partitions = split.num_partitions;
  // One partition covers every key any token can read (last key < capacity).
  plan.partition_size = split.num_partitions == 1
                            ? int64_t{args.max_blocks_per_seq} * cache.block_size
                            : split.partition_size;
  if (plan.num_partitions > 1) {
    const int64_t rows = args.num_tokens * args.num_q_heads * plan.num_partitions;
    PAGEDKV_ASSIGN_OR_RETURN(void* scratch,
                             workspace.Scratch(rows * (int64_t{hd} + 2) * sizeof(float)));
    plan.partial_acc = static_cast<float*>(scratch);
    plan.partial_ml = plan.partial_acc + rows * hd;
  }
  return absl::OkStatus();
}

// Elements per lane: 2, 4 or 8 (head_dim up to 64, 128 or 256).
int LaneElements(int32_t head_dim) {
  return head_dim <= 2 * kWarpSize ? 2 : (head_dim <= 4 * kWarpSize ? 4 : 8);
}

absl::Status LaunchPlan(const PagedAttentionArgs& args, const AttentionPlan& plan, int n,
                        cudaStream_t stream) {
  PagedAttentionArgs launch = args;
  launch.cache = args.cache.Resolved();
  if (n == 2) {
    PAGEDKV_RETURN_IF_ERROR(LaunchPartitions<2>(launch, plan, stream));
  } else if (n == 4) {
    PAGEDKV_RETURN_IF_ERROR(LaunchPartitions<4>(launch, plan, stream));
  } else {
    PAGEDKV_RETURN_IF_ERROR(LaunchPartitions<8>(launch, plan, stream));
  }
  if (plan.num_partitions > 1) {
    const dim3 grid(static_cast<unsigned>(args.num_tokens),
                    static_cast<unsigned>(args.num_q_heads));
    PagedAttentionMergeKernel<<<grid, kThreads, 0, stream>>>(launch, plan);
    PAGEDKV_CUDA_CHECK_LAUNCH("PagedAttentionMergeKernel");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status PagedAttention(const PagedAttentionArgs& args, cudaStream_t stream,
                            const LaunchOptions& options) {
  PAGEDKV_RETURN_IF_ERROR(ValidatePagedAttention(args));
  // An empty batch still has its sequences checked when validating, as the CPU backend does.
  if (args.num_tokens == 0 && options.check == ContentCheck::kTrusted) return absl::OkStatus();
  const PagedKvLayout& cache = args.cache;
  const int32_t group = args.num_q_heads / cache.num_kv_heads;
  AttentionPlan plan;
  plan.head_tiles = (group + kHeadTile - 1) / kHeadTile;
  PAGEDKV_RETURN_IF_ERROR(CheckLaunchLimits(args, plan.head_tiles));
  PAGEDKV_ASSIGN_OR_RETURN(Workspace * workspace, WorkspaceOrDefault(options.workspace, stream));
  absl::MutexLock lock(&workspace->mutex());
  int64_t max_keys = int64_t{args.max_blocks_per_seq} * cache.block_size;
  if (options.check != ContentCheck::kTrusted) {
    PAGEDKV_ASSIGN_OR_RETURN(const int32_t max_kv_len,
                             CheckPagedAttentionOnDevice(args, stream, *workspace, options));
    if (max_kv_len >= 0) max_keys = max_kv_len;  // -1 (kDeferred): unknown, use the capacity
  }
  if (args.num_tokens == 0) return absl::OkStatus();
  // A token reads at most sliding_window keys (partitions start at its window's first key).
  if (args.sliding_window > 0 && args.sliding_window < max_keys) max_keys = args.sliding_window;
  PAGEDKV_RETURN_IF_ERROR(PlanPartitions(args, max_keys, *workspace, plan));
  const int32_t hd = cache.head_dim;
  plan.scale = args.scale > 0.0f ? args.scale : 1.0f / sqrtf(static_cast<float>(hd));
  const int n = LaneElements(hd);
  // A vector load needs every row to start at a multiple of n elements (strides included) and the
  // base pointers aligned to the widest vector (16 bytes).
  plan.vector_loads = RowsAlignedTo(cache, n) && Aligned16(cache.k) && Aligned16(cache.v);
  return LaunchPlan(args, plan, n, stream);
}

}  // namespace pagedkv::cuda
