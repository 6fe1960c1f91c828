// Copyright 2026 The pagedkv Authors.
//
// CUDA RoPE, KV write (reshape_and_cache) and re-rotation. RoPE: one block per token; threads walk
// (head, pair). KV write and re-rotation: blocks of a few tokens, each token's threads walking its
// TokenJobs: a rotated job turns one chunk of N pairs for a few heads with one cos/sin lookup (a
// vector load of the table entries), a pass-through or V job moves a few N-element vectors
// (JobSize); each job issues all its loads before its stores. Every global access is an
// N-element vector (up to 16 bytes), N the widest of 8, 4, 2, 1 that the layout's strides,
// head_dim, rotary_dim and pointer alignment allow (1: scalar accesses, any layout). The math is
// RopeTableView::CosSin / ReRotateCosSin / RotatePair / Load- and StoreElement from
// pagedkv/kernels/rope_table.h, rope_math.h and dtype_convert.h applied per element (through
// kernels/cuda/rope_vector.cuh), the same functions the CPU reference calls. With
// ContentCheck::kTrusted or kDeferred, tokens with a negative position or an out-of-range slot are
// skipped (nothing written for them). Page offsets come from the layout's strides (resolved by the
// launcher), one SlotOffset per token. The KV write rotates q (when given) with the RoPE kernel.
// Quantized pages take the row kernels of quantized_kv.cu instead.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "kernels/content_checks.h"
#include "kernels/cuda/content_check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/quantized_kv.h"
#include "kernels/cuda/rope_vector.cuh"
#include "kernels/op_validate.h"
#include "pagedkv/kernels/cuda_ops.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/kernels/rope_table.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cuda {
namespace {

constexpr int kThreads = 128;       // RopeKernel: one block per token
constexpr int kJobThreads = 128;    // KV write and re-rotation: threads per block
constexpr int kJobBlocksPerSm = 4;  // ... and blocks per SM (at most 128 registers a thread)

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

// Work sizes of one thread job: `rot_heads` heads per rotated job (sharing one cos/sin lookup),
// `items` vectors per pass-through or V job: about 128 bytes of loads in flight per thread within
// the register budget (kJobBlocksPerSm). The KV write reads fp32 input.
struct JobSize {
  int rot_heads;
  int items;
};
constexpr JobSize kWriteJob{.rot_heads = 2, .items = 4};
// The re-rotation reads the cache's own dtype: more per job for 16-bit elements.
constexpr JobSize ShiftJobSize(DType dtype) {
  return DTypeSize(dtype) == 2 ? JobSize{.rot_heads = 4, .items = 8}
                               : JobSize{.rot_heads = 2, .items = 4};
}

// A token's work of one kind (K's pass-through dims, or V) as `count` items, each N consecutive
// elements of one head: item i is head i / per_head, dims first_dim + (i % per_head) N. Job j
// moves items j, j + jobs, ... (JobSize::items of them, those < count): all loads, then all
// stores.
struct VectorItems {
  int32_t per_head = 0;   // items per head
  int32_t first_dim = 0;  // dim of a head's first item
  int32_t count = 0;      // num_heads * per_head
  int32_t jobs = 0;       // ceil(count / JobSize::items)

  __device__ void HeadDim(int32_t item, int32_t n, int32_t* head, int32_t* dim) const {
    *head = item / per_head;
    *dim = first_dim + (item % per_head) * n;
  }
};

// A token's thread jobs, in this order: rotated K (job j: chunk j % rot of the N-pair chunks, see
// ChunkDims, for heads g, g + head_groups, ... where g = j / rot, JobSize::rot_heads of them),
// K's pass-through items, V's items.
struct TokenJobs {
  int32_t num_heads = 0;
  int32_t rot = 0;          // chunks per head: rotary_dim / (2 N)
  int32_t head_groups = 0;  // ceil(num_heads / JobSize::rot_heads)
  VectorItems pass;         // K's dims [rotary_dim, head_dim)
  VectorItems val;          // V's dims [0, head_dim)
  int32_t tokens_per_block = 1;

  __host__ __device__ int32_t RotJobs() const { return rot * head_groups; }
  __host__ __device__ int32_t KJobs() const { return RotJobs() + pass.jobs; }
  __host__ __device__ int32_t All() const { return KJobs() + val.jobs; }
  __host__ __device__ int32_t BlockJobs() const { return tokens_per_block * All(); }
  // Token of the block and that token's job for block job i < BlockJobs(). A block's jobs are
  // grouped by kind (every token's rotated jobs, then pass-through, then V), so that a warp
  // mostly runs one kind of job: divergent kinds would run one after the other.
  __device__ void Locate(int32_t i, int32_t* token, int32_t* job) const {
    const int32_t rot_jobs = tokens_per_block * RotJobs();
    const int32_t pass_jobs = tokens_per_block * pass.jobs;
    if (i < rot_jobs) {
      *token = i / RotJobs();
      *job = i % RotJobs();
    } else if (i < rot_jobs + pass_jobs) {
      *token = (i - rot_jobs) / pass.jobs;
      *job = RotJobs() + (i - rot_jobs) % pass.jobs;
    } else {
      *token = (i - rot_jobs - pass_jobs) / val.jobs;
      *job = KJobs() + (i - rot_jobs - pass_jobs) % val.jobs;
    }
  }
  // Head of slot k of rotated job `job`, or -1 past the last head.
  __device__ int32_t RotHead(int32_t job, int k) const {
    const int32_t h = job / rot + k * head_groups;
    return h < num_heads ? h : -1;
  }
};

VectorItems MakeVectorItems(int32_t num_heads, int32_t first_dim, int32_t end_dim, int n,
                            int items_per_job) {
  const int32_t per_head = (end_dim - first_dim) / n;
  const int32_t count = num_heads * per_head;
  return {.per_head = per_head,
          .first_dim = first_dim,
          .count = count,
          .jobs = (count + items_per_job - 1) / items_per_job};
}

// REQUIRES: rotary_dim a multiple of 2 n, head_dim a multiple of n.
TokenJobs MakeTokenJobs(int32_t num_heads, int32_t head_dim, int32_t rotary_dim, int n,
                        JobSize size) {
  return {.num_heads = num_heads,
          .rot = rotary_dim / (2 * n),
          .head_groups = (num_heads + size.rot_heads - 1) / size.rot_heads,
          .pass = MakeVectorItems(num_heads, rotary_dim, head_dim, n, size.items),
          .val = MakeVectorItems(num_heads, 0, head_dim, n, size.items)};
}

// `jobs` with as many tokens per block as kJobThreads threads cover (at least one).
TokenJobs WithBlockTokens(TokenJobs jobs) {
  jobs.tokens_per_block = std::max(1, kJobThreads / jobs.All());
  return jobs;
}

// One token of the KV write. Its input rows are read before its slot and position are checked
// (the reads are in bounds either way), so the two loads do not wait on each other.
struct WriteRow {
  const float* k;    // the token's K input row
  const float* v;    // the token's V input row
  int64_t slot;      // slot_mapping[t]
  int64_t position;  // positions[t] (0 when not rotating)

  // False for a token that writes nothing: slot -1, or (only with ContentCheck::kTrusted) an
  // out-of-range slot or a negative position.
  __device__ bool Writes(const PagedKvLayout& cache) const {
    return PositionValid(position) && slot != -1 &&
           SlotValid(slot, cache.NumSlots(), /*allow_skip=*/false);
  }
};

// KV write of rotated job `job`: for each of its heads, the RoPE of the per-pair loop (cos and
// sin times rope.attention_factor, RotatePair as KvWriteRotation), rounded once to D.
template <int N, DType D>
__device__ __forceinline__ void WriteRotated(const ReshapeAndCacheArgs& a, const WriteRow& r,
                                             const TokenJobs& jobs, int32_t job) {
  const int32_t chunk = job % jobs.rot;
  int32_t da, db;
  ChunkDims<N>(a.rope.layout, a.rope.rotary_dim, chunk, &da, &db);
  float x[kWriteJob.rot_heads][2 * N], cs[2 * N];
#pragma unroll
  for (int k = 0; k < kWriteJob.rot_heads; ++k) {
    const int32_t h = jobs.RotHead(job, k);
    if (h < 0) continue;
    LoadFloats<N>(r.k + int64_t{h} * a.cache.head_dim + da, x[k]);
    LoadFloats<N>(r.k + int64_t{h} * a.cache.head_dim + db, x[k] + N);
  }
  if (!r.Writes(a.cache)) return;
  CosSinChunk<N>(a.rope, r.position, chunk * N, cs);
#pragma unroll
  for (int j = 0; j < 2 * N; ++j) cs[j] *= a.rope.attention_factor;
  const int64_t dst = a.cache.SlotOffset(r.slot);  // cache strides are resolved by the launcher
#pragma unroll
  for (int k = 0; k < kWriteJob.rot_heads; ++k) {
    const int32_t h = jobs.RotHead(job, k);
    if (h < 0) continue;
    RotateChunk<N>(a.rope.layout, cs, x[k], KvWriteRotation());
    StoreVector<N, D>(a.cache.k, dst + h * a.cache.head_stride + da, x[k]);
    StoreVector<N, D>(a.cache.k, dst + h * a.cache.head_stride + db, x[k] + N);
  }
}

// KV write of job `job` of `items`: fp32 input row `src` to the pages, rounded to D.
template <int N, DType D>
__device__ __forceinline__ void WriteItems(const float* src, void* pages,
                                           const PagedKvLayout& cache, const WriteRow& r,
                                           const VectorItems& items, int32_t job) {
  float x[kWriteJob.items][N];
  int32_t h, d;
#pragma unroll
  for (int k = 0; k < kWriteJob.items; ++k) {
    const int32_t item = job + k * items.jobs;
    if (item >= items.count) continue;
    items.HeadDim(item, N, &h, &d);
    LoadFloats<N>(src + int64_t{h} * cache.head_dim + d, x[k]);
  }
  if (!r.Writes(cache)) return;
  const int64_t dst = cache.SlotOffset(r.slot);
#pragma unroll
  for (int k = 0; k < kWriteJob.items; ++k) {
    const int32_t item = job + k * items.jobs;
    if (item >= items.count) continue;
    items.HeadDim(item, N, &h, &d);
    StoreVector<N, D>(pages, dst + h * cache.head_stride + d, x[k]);
  }
}

// Job `job` (see TokenJobs) of the KV write of one token.
template <int N, DType D>
__device__ __forceinline__ void WriteJob(const ReshapeAndCacheArgs& a, const WriteRow& r,
                                         const TokenJobs& jobs, int32_t job) {
  if (job < jobs.RotJobs()) {
    WriteRotated<N, D>(a, r, jobs, job);
  } else if (job < jobs.KJobs()) {
    WriteItems<N, D>(r.k, a.cache.k, a.cache, r, jobs.pass, job - jobs.RotJobs());
  } else {
    WriteItems<N, D>(r.v, a.cache.v, a.cache, r, jobs.val, job - jobs.KJobs());
  }
}

// KV write of K and V (q is rotated by RopeKernel): jobs.tokens_per_block tokens per block, the
// threads walking their TokenJobs (kWriteJob). Tokens for which WriteRow::Writes is false write
// nothing.
template <int N, DType D>
__global__ void __launch_bounds__(kJobThreads, kJobBlocksPerSm)
    ReshapeAndCacheKernel(ReshapeAndCacheArgs a, int64_t k_stride, int64_t v_stride,
                          TokenJobs jobs) {
  for (int32_t i = threadIdx.x; i < jobs.BlockJobs(); i += blockDim.x) {
    int32_t token, job;
    jobs.Locate(i, &token, &job);
    const int64_t t = static_cast<int64_t>(blockIdx.x) * jobs.tokens_per_block + token;
    if (t >= a.num_tokens) continue;
    const WriteRow r{.k = a.k + t * k_stride,
                     .v = a.v + t * v_stride,
                     .slot = a.slot_mapping[t],
                     .position = a.rotate ? a.positions[t] : 0};
    WriteJob<N, D>(a, r, jobs, job);
  }
}

// Where the re-rotation of one token reads and writes.
struct ShiftRow {
  int64_t src;  // element offset of (src slot, head 0, d 0)
  int64_t dst;  // element offset of (dst slot, head 0, d 0)
  int64_t old_position;
  int64_t new_position;
  bool in_place;  // src slot == dst slot: only the rotated dims change
};

// The ShiftRow of token t; false for a token that writes nothing (only with
// ContentCheck::kTrusted: a slot out of range or a negative position).
__device__ __forceinline__ bool ShiftRowOf(const ReRotateArgs& a, int64_t t, ShiftRow* r) {
  const PagedKvLayout& cache = a.cache;
  const int64_t src = a.src_slots[t];
  const int64_t dst = a.dst_slots[t];
  const int64_t old_position = a.old_positions[t];
  const int64_t new_position = a.new_positions[t];
  if (!SlotValid(src, cache.NumSlots(), false) || !SlotValid(dst, cache.NumSlots(), false)) {
    return false;
  }
  if (!PositionValid(old_position) || !PositionValid(new_position)) return false;
  // cache strides are resolved by the launcher
  *r = ShiftRow{.src = cache.SlotOffset(src),
                .dst = cache.SlotOffset(dst),
                .old_position = old_position,
                .new_position = new_position,
                .in_place = src == dst};
  return true;
}

// Re-rotation of rotated job `job`: for each of its heads, ReRotateCosSin and RotatePair per pair.
template <int N, DType D>
__device__ __forceinline__ void ShiftRotated(const ReRotateArgs& a, const ShiftRow& r,
                                             const TokenJobs& jobs, int32_t job) {
  const int32_t chunk = job % jobs.rot;
  int32_t da, db;
  ChunkDims<N>(a.rope.layout, a.rope.rotary_dim, chunk, &da, &db);
  constexpr int kHeads = ShiftJobSize(D).rot_heads;
  alignas(16) StorageOf<D> raw[kHeads][2 * N];
#pragma unroll
  for (int k = 0; k < kHeads; ++k) {
    const int32_t h = jobs.RotHead(job, k);
    if (h < 0) continue;
    LoadRaw<N, D>(a.cache.k, r.src + h * a.cache.head_stride + da, raw[k]);
    LoadRaw<N, D>(a.cache.k, r.src + h * a.cache.head_stride + db, raw[k] + N);
  }
  float cs[2 * N];
  ReRotateCosSinChunk<N>(a.rope, a.mode, r.old_position, r.new_position, chunk * N, cs);
#pragma unroll
  for (int k = 0; k < kHeads; ++k) {
    const int32_t h = jobs.RotHead(job, k);
    if (h < 0) continue;
    float x[2 * N];
#pragma unroll
    for (int j = 0; j < 2 * N; ++j) x[j] = LoadElement(raw[k], D, j);
    RotateChunk<N>(a.rope.layout, cs, x, SharedRotation());
    StoreVector<N, D>(a.cache.k, r.dst + h * a.cache.head_stride + da, x);
    StoreVector<N, D>(a.cache.k, r.dst + h * a.cache.head_stride + db, x + N);
  }
}

// Raw copy of job `job` of `items` from the src row to the dst row of `pages`.
template <int N, DType D>
__device__ __forceinline__ void ShiftItems(void* pages, const PagedKvLayout& cache,
                                           const ShiftRow& r, const VectorItems& items,
                                           int32_t job) {
  constexpr int kItems = ShiftJobSize(D).items;
  alignas(16) StorageOf<D> raw[kItems][N];
  int32_t h, d;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int32_t item = job + k * items.jobs;
    if (item >= items.count) continue;
    items.HeadDim(item, N, &h, &d);
    LoadRaw<N, D>(pages, r.src + h * cache.head_stride + d, raw[k]);
  }
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int32_t item = job + k * items.jobs;
    if (item >= items.count) continue;
    items.HeadDim(item, N, &h, &d);
    StoreRaw<N, D>(pages, r.dst + h * cache.head_stride + d, raw[k]);
  }
}

// Job `job` (see TokenJobs) of the re-rotation of one token.
template <int N, DType D>
__device__ __forceinline__ void ShiftJob(const ReRotateArgs& a, const ShiftRow& r,
                                         const TokenJobs& jobs, int32_t job) {
  if (job < jobs.RotJobs()) {
    ShiftRotated<N, D>(a, r, jobs, job);
  } else if (job < jobs.KJobs()) {
    ShiftItems<N, D>(a.cache.k, a.cache, r, jobs.pass, job - jobs.RotJobs());
  } else {
    ShiftItems<N, D>(a.cache.v, a.cache, r, jobs.val, job - jobs.KJobs());
  }
}

// Re-rotation; blocks as ReshapeAndCacheKernel (ShiftJobSize(D)). In place (src == dst) only the
// rotated jobs run.
template <int N, DType D>
__global__ void __launch_bounds__(kJobThreads, kJobBlocksPerSm)
    ReRotateKernel(ReRotateArgs a, TokenJobs jobs) {
  for (int32_t i = threadIdx.x; i < jobs.BlockJobs(); i += blockDim.x) {
    int32_t token, job;
    jobs.Locate(i, &token, &job);
    const int64_t t = static_cast<int64_t>(blockIdx.x) * jobs.tokens_per_block + token;
    ShiftRow r;
    if (t >= a.num_tokens || !ShiftRowOf(a, t, &r)) continue;
    if (r.in_place && job >= jobs.RotJobs()) continue;
    ShiftJob<N, D>(a, r, jobs, job);
  }
}

absl::Status CheckGrid(const char* op, int64_t num_tokens) {
  if (num_tokens > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": num_tokens must be < 2^31"));
  }
  return absl::OkStatus();
}

bool Aligned(const void* p, int64_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Bytes of one access of an n-element vector of `element_bytes`-byte elements (CopyBytes).
int64_t AccessBytes(int n, int64_t element_bytes) {
  return std::min<int64_t>(n * element_bytes, 16);
}

// True when every (slot, head) row of `cache` starts at a multiple of n elements and k and v are
// aligned to one n-element access.
bool CacheTakesVectors(const PagedKvLayout& cache, int n) {
  const int64_t bytes = AccessBytes(n, DTypeSize(cache.dtype));
  return RowsAlignedTo(cache, n) && Aligned(cache.k, bytes) && Aligned(cache.v, bytes);
}

// True when the rotated dims split into chunks of n pairs and the table into n-pair entries.
bool RopeTakesVectors(const RopeTableView& rope, int n) {
  return rope.rotary_dim % (2 * n) == 0 && Aligned(rope.cos_sin, AccessBytes(2 * n, 4));
}

// True when the KV write's every access fits n-element vectors (cache: strides resolved).
bool KvWriteTakesVectors(const ReshapeAndCacheArgs& a, int64_t k_stride, int64_t v_stride, int n) {
  const int64_t bytes = AccessBytes(n, 4);
  return CacheTakesVectors(a.cache, n) && (!a.rotate || RopeTakesVectors(a.rope, n)) &&
         k_stride % n == 0 && v_stride % n == 0 && Aligned(a.k, bytes) && Aligned(a.v, bytes);
}

// Widest vector (8, 4, 2 or 1 elements) the KV write's layout allows.
int KvWriteWidth(const ReshapeAndCacheArgs& a, int64_t k_stride, int64_t v_stride) {
  for (int n : {8, 4, 2}) {
    if (KvWriteTakesVectors(a, k_stride, v_stride, n)) return n;
  }
  return 1;
}

// Widest vector (8, 4, 2 or 1 elements) the re-rotation's layout allows (cache: strides resolved).
int ReRotateWidth(const ReRotateArgs& a) {
  for (int n : {8, 4, 2}) {
    if (CacheTakesVectors(a.cache, n) && RopeTakesVectors(a.rope, n)) return n;
  }
  return 1;
}

// Threads of a block running `jobs`: its jobs rounded up to a warp, at most kJobThreads.
unsigned JobBlock(const TokenJobs& jobs) {
  return static_cast<unsigned>(std::min(kJobThreads, (jobs.BlockJobs() + 31) / 32 * 32));
}

unsigned JobGrid(int64_t num_tokens, const TokenJobs& jobs) {
  return static_cast<unsigned>((num_tokens + jobs.tokens_per_block - 1) / jobs.tokens_per_block);
}

// Calls launch(width, dtype) with std::integral_constant<int, N> and <DType, D> for N and dtype.
template <int N, typename Launch>
void DispatchDType(DType dtype, const Launch& launch) {
  using Width = std::integral_constant<int, N>;
  switch (dtype) {
    case DType::kF16:
      launch(Width{}, std::integral_constant<DType, DType::kF16>{});
      return;
    case DType::kBF16:
      launch(Width{}, std::integral_constant<DType, DType::kBF16>{});
      return;
    case DType::kF32:
    default:
      launch(Width{}, std::integral_constant<DType, DType::kF32>{});
      return;
  }
}

template <typename Launch>
void DispatchVector(int n, DType dtype, const Launch& launch) {
  switch (n) {
    case 8:
      DispatchDType<8>(dtype, launch);
      return;
    case 4:
      DispatchDType<4>(dtype, launch);
      return;
    case 2:
      DispatchDType<2>(dtype, launch);
      return;
    default:
      DispatchDType<1>(dtype, launch);
      return;
  }
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
  const int64_t hd = args.cache.head_dim;
  const int64_t row = args.cache.num_kv_heads * hd;
  const int64_t q_stride = args.q_stride == 0 ? args.num_q_heads * hd : args.q_stride;
  const int64_t k_stride = args.k_stride == 0 ? row : args.k_stride;
  const int64_t v_stride = args.v_stride == 0 ? row : args.v_stride;
  if (args.rotate && args.q != nullptr) {
    const RopeArgs q{.q = args.q,
                     .positions = args.positions,
                     .num_tokens = args.num_tokens,
                     .num_q_heads = args.num_q_heads,
                     .rope = args.rope};
    RopeKernel<<<static_cast<unsigned>(args.num_tokens), kThreads, 0, stream>>>(q, q_stride, 0);
    PAGEDKV_CUDA_CHECK_LAUNCH("RopeKernel");
  }
  ReshapeAndCacheArgs launch = args;
  launch.cache = args.cache.Resolved();
  // Row by row: quantized rows, and any row whose rotated float key is wanted.
  if (IsQuantizedDType(launch.cache.dtype) || launch.cache.MixedDTypes() ||
      launch.rotated_k != nullptr) {
    return LaunchQuantizedKvWrite(launch, k_stride, v_stride, stream);
  }
  const int n = KvWriteWidth(launch, k_stride, v_stride);
  const TokenJobs jobs =
      WithBlockTokens(MakeTokenJobs(launch.cache.num_kv_heads, launch.cache.head_dim,
                                    args.rotate ? args.rope.rotary_dim : 0, n, kWriteJob));
  DispatchVector(n, launch.cache.dtype, [&](auto width, auto dtype) {
    ReshapeAndCacheKernel<decltype(width)::value, decltype(dtype)::value>
        <<<JobGrid(args.num_tokens, jobs), JobBlock(jobs), 0, stream>>>(launch, k_stride, v_stride,
                                                                        jobs);
  });
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
  // Row by row: quantized rows, and moves from float keys.
  if (IsQuantizedDType(launch.cache.dtype) || launch.cache.MixedDTypes() ||
      launch.src_keys != nullptr) {
    return LaunchQuantizedReRotate(launch, stream);
  }
  const int n = ReRotateWidth(launch);
  const TokenJobs jobs =
      WithBlockTokens(MakeTokenJobs(launch.cache.num_kv_heads, launch.cache.head_dim,
                                    args.rope.rotary_dim, n, ShiftJobSize(launch.cache.dtype)));
  DispatchVector(n, launch.cache.dtype, [&](auto width, auto dtype) {
    ReRotateKernel<decltype(width)::value, decltype(dtype)::value>
        <<<JobGrid(args.num_tokens, jobs), JobBlock(jobs), 0, stream>>>(launch, jobs);
  });
  PAGEDKV_CUDA_CHECK_LAUNCH("ReRotateKernel");
  return absl::OkStatus();
}

}  // namespace pagedkv::cuda
