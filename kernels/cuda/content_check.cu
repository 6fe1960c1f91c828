// Copyright 2026 The pagedkv Authors.
//
// Content-check kernels: grid-stride loops applying the shared predicates of
// kernels/content_checks.h; word 0 keeps the smallest bad-entry word. kValidate: the host reads
// the words back (one copy, one stream synchronisation) and, on a bad entry, words the error with
// the CPU check over host copies of the arrays. kDeferred: a one-thread kernel moves the word into
// the deferred flag; the caller reads that later (ReadAndClearDeferredCheck).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "kernels/content_checks.h"
#include "kernels/cuda/content_check.h"
#include "kernels/cuda/cuda_check.h"
#include "pagedkv/kernels/bad_entry.h"
#include "pagedkv/kernels/cuda_ops.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1024;

unsigned BlocksFor(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

__device__ __forceinline__ int64_t GridStart() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t GridStride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}
// Keeps the smallest bad-entry word in words[0] (initialised to all ones).
__device__ __forceinline__ void Report(uint64_t* words, CheckedOp op, CheckedArray array,
                                       int64_t index) {
  atomicMin(reinterpret_cast<unsigned long long*>(&words[0]),  // NOLINT(runtime/int)
            static_cast<unsigned long long>(EncodeBadEntry(op, array, index)));  // NOLINT
}

// Up to two slot arrays and two position arrays of the same length.
struct IndexArrays {
  CheckedOp op = CheckedOp::kRope;
  const int64_t* slots[2] = {nullptr, nullptr};
  CheckedArray slot_ids[2] = {CheckedArray::kSlotMapping, CheckedArray::kSlotMapping};
  const int32_t* positions[2] = {nullptr, nullptr};
  CheckedArray position_ids[2] = {CheckedArray::kPositions, CheckedArray::kPositions};
  int64_t n = 0;
  int64_t num_slots = 0;
  bool allow_skip = false;  // slot -1 allowed
};

__global__ void CheckIndexArraysKernel(IndexArrays a, uint64_t* words) {
  for (int64_t i = GridStart(); i < a.n; i += GridStride()) {
    for (int k = 0; k < 2; ++k) {
      if (a.slots[k] != nullptr && !SlotValid(a.slots[k][i], a.num_slots, a.allow_skip)) {
        Report(words, a.op, a.slot_ids[k], i);
      }
      if (a.positions[k] != nullptr && !PositionValid(a.positions[k][i])) {
        Report(words, a.op, a.position_ids[k], i);
      }
    }
  }
}

__global__ void CheckTokenIdsKernel(const int32_t* ids, int64_t n, int64_t vocab_size,
                                    uint64_t* words) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) {
    if (!TokenIdValid(ids[i], vocab_size)) {
      Report(words, CheckedOp::kEmbeddingGather, CheckedArray::kTokenIds, i);
    }
  }
}

__global__ void CheckSampleParamsKernel(const SamplingParams* params, int64_t n, uint64_t* words) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) {
    if (!SamplingParamsValid(params[i]))
      Report(words, CheckedOp::kSample, CheckedArray::kParams, i);
  }
}

// The checks of CheckPagedAttentionContents, reported as FirstBadEntry(PagedAttentionArgs) does;
// word 1 gets the largest valid kv_len.
__global__ void CheckPagedAttentionKernel(PagedAttentionArgs a, uint64_t* words) {
  constexpr CheckedOp kOp = CheckedOp::kPagedAttention;
  const int64_t capacity = static_cast<int64_t>(a.max_blocks_per_seq) * a.cache.block_size;
  for (int64_t s = GridStart(); s <= a.num_seqs; s += GridStride()) {
    const int32_t start = a.query_start_loc[s];
    if (s == 0 && start != 0) Report(words, kOp, CheckedArray::kQueryStartLoc, 0);
    if (s == a.num_seqs) {
      if (start != a.num_tokens) Report(words, kOp, CheckedArray::kQueryStartLoc, s);
      continue;
    }
    if (a.query_start_loc[s + 1] < start) Report(words, kOp, CheckedArray::kQueryStartLoc, s + 1);
    const int32_t kv_len = a.kv_lens[s];
    if (KvLenValid(kv_len, capacity)) {
      atomicMax(reinterpret_cast<unsigned long long*>(&words[1]),  // NOLINT(runtime/int)
                static_cast<unsigned long long>(kv_len));          // NOLINT(runtime/int)
    } else {
      Report(words, kOp, CheckedArray::kKvLens, s);
    }
  }
  const int64_t entries = static_cast<int64_t>(a.num_seqs) * a.max_blocks_per_seq;
  for (int64_t e = GridStart(); e < entries; e += GridStride()) {
    const int32_t kv_len = a.kv_lens[e / a.max_blocks_per_seq];
    if (!KvLenValid(kv_len, capacity)) continue;  // reported above
    if (e % a.max_blocks_per_seq >= UsedBlocks(kv_len, a.cache.block_size)) continue;
    if (!AttentionTableEntryValid(a, e / a.max_blocks_per_seq, e % a.max_blocks_per_seq)) {
      Report(words, kOp, CheckedArray::kBlockTables, e);
    }
  }
  for (int64_t t = GridStart(); t < a.num_tokens; t += GridStride()) {
    if (!PositionValid(a.positions[t])) Report(words, kOp, CheckedArray::kPositions, t);
  }
}

// kDeferred: moves this call's word (words[0]) into the flag unless the flag holds one already.
__global__ void CommitDeferredKernel(const uint64_t* words, uint64_t* flag) {
  const uint64_t word = words[0];
  if (word == ~uint64_t{0}) return;                             // no bad entry
  atomicCAS(reinterpret_cast<unsigned long long*>(flag), 0ull,  // NOLINT(runtime/int)
            static_cast<unsigned long long>(word));             // NOLINT(runtime/int)
}

// Initialises the check words, runs `launch(words)` (which enqueues one check kernel on `stream`).
// kValidate: copies the words to the host and waits; returns true for a bad entry, *value gets
// word 1. kDeferred: enqueues the commit into the deferred flag and returns false.
template <typename Launch>
absl::StatusOr<bool> RunCheck(const char* kernel, cudaStream_t stream, Workspace& workspace,
                              const LaunchOptions& options, Launch launch,
                              uint64_t* value = nullptr) {
  PAGEDKV_ASSIGN_OR_RETURN(uint64_t * words, workspace.DeviceCheckWords());
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(words, 0xff, sizeof(uint64_t), stream));
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(words + 1, 0, sizeof(uint64_t), stream));
  launch(words);
  PAGEDKV_RETURN_IF_ERROR(CudaStatus(cudaGetLastError(), kernel, __FILE__, __LINE__));
  if (options.check == ContentCheck::kDeferred) {
    uint64_t* flag = options.deferred_flag;
    if (flag == nullptr) {
      PAGEDKV_ASSIGN_OR_RETURN(flag, workspace.DeferredFlag());
    }
    CommitDeferredKernel<<<1, 1, 0, stream>>>(words, flag);
    PAGEDKV_CUDA_CHECK_LAUNCH("CommitDeferredKernel");
    return false;
  }
  uint64_t* host = workspace.HostCheckWords();
  const size_t bytes = Workspace::kCheckWords * sizeof(uint64_t);
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host, words, bytes, cudaMemcpyDeviceToHost, stream));
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  if (value != nullptr) *value = host[1];
  return host[0] != ~uint64_t{0};
}

// Host copy of n elements at device pointer `device` (ordered on `stream`).
template <typename T>
absl::StatusOr<std::vector<T>> ToHost(const T* device, int64_t n, cudaStream_t stream) {
  std::vector<T> host(static_cast<size_t>(n));
  if (n == 0) return host;
  PAGEDKV_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost, stream));
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return host;
}

// The host check's verdict on the flagged input; it must reject it too.
absl::Status HostVerdict(const absl::Status& host_check, const char* op) {
  if (!host_check.ok()) return host_check;
  return absl::InternalError(
      absl::StrCat(op, ": the device content check rejected an input the host check accepts"));
}

}  // namespace

absl::Status CheckRopeOnDevice(const RopeArgs& args, cudaStream_t stream, Workspace& workspace,
                               const LaunchOptions& options) {
  IndexArrays arrays;
  arrays.op = CheckedOp::kRope;
  arrays.positions[0] = args.positions;
  arrays.n = args.num_tokens;
  PAGEDKV_ASSIGN_OR_RETURN(
      const bool bad,
      RunCheck("CheckIndexArraysKernel", stream, workspace, options, [&](uint64_t* w) {
        CheckIndexArraysKernel<<<BlocksFor(arrays.n), kThreads, 0, stream>>>(arrays, w);
      }));
  if (!bad) return absl::OkStatus();
  PAGEDKV_ASSIGN_OR_RETURN(auto positions, ToHost(args.positions, args.num_tokens, stream));
  RopeArgs host = args;
  host.positions = positions.data();
  return HostVerdict(CheckRopeContents(host), "Rope");
}

absl::Status CheckReshapeAndCacheOnDevice(const ReshapeAndCacheArgs& args, cudaStream_t stream,
                                          Workspace& workspace, const LaunchOptions& options) {
  IndexArrays arrays;
  arrays.op = CheckedOp::kReshapeAndCache;
  arrays.slots[0] = args.slot_mapping;
  if (args.rotate) arrays.positions[0] = args.positions;
  arrays.n = args.num_tokens;
  arrays.num_slots = args.cache.NumSlots();
  arrays.allow_skip = true;
  PAGEDKV_ASSIGN_OR_RETURN(
      const bool bad,
      RunCheck("CheckIndexArraysKernel", stream, workspace, options, [&](uint64_t* w) {
        CheckIndexArraysKernel<<<BlocksFor(arrays.n), kThreads, 0, stream>>>(arrays, w);
      }));
  if (!bad) return absl::OkStatus();
  PAGEDKV_ASSIGN_OR_RETURN(auto slots, ToHost(args.slot_mapping, args.num_tokens, stream));
  std::vector<int32_t> positions;
  ReshapeAndCacheArgs host = args;
  host.slot_mapping = slots.data();
  if (args.rotate) {
    PAGEDKV_ASSIGN_OR_RETURN(positions, ToHost(args.positions, args.num_tokens, stream));
    host.positions = positions.data();
  }
  return HostVerdict(CheckReshapeAndCacheContents(host), "ReshapeAndCache");
}

absl::Status CheckReRotateOnDevice(const ReRotateArgs& args, cudaStream_t stream,
                                   Workspace& workspace, const LaunchOptions& options) {
  IndexArrays arrays;
  arrays.op = CheckedOp::kReRotate;
  arrays.slots[0] = args.src_slots;
  arrays.slot_ids[0] = CheckedArray::kSrcSlots;
  arrays.slots[1] = args.dst_slots;
  arrays.slot_ids[1] = CheckedArray::kDstSlots;
  arrays.positions[0] = args.old_positions;
  arrays.position_ids[0] = CheckedArray::kOldPositions;
  arrays.positions[1] = args.new_positions;
  arrays.position_ids[1] = CheckedArray::kNewPositions;
  arrays.n = args.num_tokens;
  arrays.num_slots = args.cache.NumSlots();
  PAGEDKV_ASSIGN_OR_RETURN(
      const bool bad,
      RunCheck("CheckIndexArraysKernel", stream, workspace, options, [&](uint64_t* w) {
        CheckIndexArraysKernel<<<BlocksFor(arrays.n), kThreads, 0, stream>>>(arrays, w);
      }));
  if (!bad) return absl::OkStatus();
  const int64_t n = args.num_tokens;
  PAGEDKV_ASSIGN_OR_RETURN(auto src, ToHost(args.src_slots, n, stream));
  PAGEDKV_ASSIGN_OR_RETURN(auto dst, ToHost(args.dst_slots, n, stream));
  PAGEDKV_ASSIGN_OR_RETURN(auto old_positions, ToHost(args.old_positions, n, stream));
  PAGEDKV_ASSIGN_OR_RETURN(auto new_positions, ToHost(args.new_positions, n, stream));
  ReRotateArgs host = args;
  host.src_slots = src.data();
  host.dst_slots = dst.data();
  host.old_positions = old_positions.data();
  host.new_positions = new_positions.data();
  return HostVerdict(CheckReRotateContents(host), "ReRotate");
}

absl::Status CheckEmbeddingGatherOnDevice(const EmbeddingGatherArgs& args, cudaStream_t stream,
                                          Workspace& workspace, const LaunchOptions& options) {
  PAGEDKV_ASSIGN_OR_RETURN(
      const bool bad, RunCheck("CheckTokenIdsKernel", stream, workspace, options, [&](uint64_t* w) {
        CheckTokenIdsKernel<<<BlocksFor(args.num_tokens), kThreads, 0, stream>>>(
            args.token_ids, args.num_tokens, args.vocab_size, w);
      }));
  if (!bad) return absl::OkStatus();
  PAGEDKV_ASSIGN_OR_RETURN(auto ids, ToHost(args.token_ids, args.num_tokens, stream));
  EmbeddingGatherArgs host = args;
  host.token_ids = ids.data();
  return HostVerdict(CheckEmbeddingGatherContents(host), "EmbeddingGather");
}

absl::StatusOr<int32_t> CheckPagedAttentionOnDevice(const PagedAttentionArgs& args,
                                                    cudaStream_t stream, Workspace& workspace,
                                                    const LaunchOptions& options) {
  const int64_t entries = static_cast<int64_t>(args.num_seqs) * args.max_blocks_per_seq;
  const int64_t n = std::max({int64_t{args.num_seqs} + 1, entries, args.num_tokens});
  uint64_t max_kv_len = 0;
  PAGEDKV_ASSIGN_OR_RETURN(const bool bad,
                           RunCheck(
                               "CheckPagedAttentionKernel", stream, workspace, options,
                               [&](uint64_t* w) {
                                 CheckPagedAttentionKernel<<<BlocksFor(n), kThreads, 0, stream>>>(
                                     args, w);
                               },
                               &max_kv_len));
  if (options.check == ContentCheck::kDeferred) return -1;
  if (!bad) return static_cast<int32_t>(max_kv_len);
  PAGEDKV_ASSIGN_OR_RETURN(auto qsl, ToHost(args.query_start_loc, args.num_seqs + 1, stream));
  PAGEDKV_ASSIGN_OR_RETURN(auto kv_lens, ToHost(args.kv_lens, args.num_seqs, stream));
  PAGEDKV_ASSIGN_OR_RETURN(auto tables, ToHost(args.block_tables, entries, stream));
  PAGEDKV_ASSIGN_OR_RETURN(auto positions, ToHost(args.positions, args.num_tokens, stream));
  PagedAttentionArgs host = args;
  host.query_start_loc = qsl.data();
  host.kv_lens = kv_lens.data();
  host.block_tables = tables.data();
  host.positions = positions.data();
  return HostVerdict(CheckPagedAttentionContents(host), "PagedAttention");
}

absl::Status CheckSampleOnDevice(const SampleArgs& args, cudaStream_t stream, Workspace& workspace,
                                 const LaunchOptions& options) {
  PAGEDKV_ASSIGN_OR_RETURN(
      const bool bad,
      RunCheck("CheckSampleParamsKernel", stream, workspace, options, [&](uint64_t* w) {
        CheckSampleParamsKernel<<<BlocksFor(args.num_seqs), kThreads, 0, stream>>>(
            args.params, args.num_seqs, w);
      }));
  if (!bad) return absl::OkStatus();
  PAGEDKV_ASSIGN_OR_RETURN(auto params, ToHost(args.params, args.num_seqs, stream));
  SampleArgs host = args;
  host.params = params.data();
  return HostVerdict(CheckSampleContents(host), "Sample");
}

absl::Status ReadAndClearDeferredCheck(uint64_t* flag, cudaStream_t stream) {
  if (flag == nullptr) {
    return absl::InvalidArgumentError("ReadAndClearDeferredCheck: flag is null");
  }
  uint64_t word = kNoBadEntry;
  PAGEDKV_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(&word, flag, sizeof(word), cudaMemcpyDeviceToHost, stream));
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(flag, 0, sizeof(uint64_t), stream));
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return BadEntryStatus(word);
}

absl::Status ReadAndClearDeferredCheck(Workspace* workspace, cudaStream_t stream) {
  PAGEDKV_ASSIGN_OR_RETURN(Workspace * ws, WorkspaceOrDefault(workspace, stream));
  absl::MutexLock lock(&ws->mutex());
  PAGEDKV_ASSIGN_OR_RETURN(uint64_t * flag, ws->DeferredFlag());
  return ReadAndClearDeferredCheck(flag, stream);
}

absl::Status ClearDeferredCheck(uint64_t* flag, cudaStream_t stream) {
  if (flag == nullptr) return absl::InvalidArgumentError("ClearDeferredCheck: flag is null");
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(flag, 0, sizeof(uint64_t), stream));
  return absl::OkStatus();
}

}  // namespace pagedkv::cuda
