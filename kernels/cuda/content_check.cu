// Copyright 2026 The pagedkv Authors.
//
// Content-check kernels: grid-stride loops applying the shared predicates of
// kernels/content_checks.h; any bad entry sets word 0. The host then reads the words back (one
// copy, one stream synchronisation) and, on a bad entry, words the error with the CPU check over
// host copies of the arrays.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/content_checks.h"
#include "kernels/cuda/content_check.h"
#include "kernels/cuda/cuda_check.h"
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
__device__ __forceinline__ void Flag(uint32_t* words) { atomicOr(&words[0], 1u); }

// Up to two slot arrays and two position arrays of the same length.
struct IndexArrays {
  const int64_t* slots[2] = {nullptr, nullptr};
  const int32_t* positions[2] = {nullptr, nullptr};
  int64_t n = 0;
  int64_t num_slots = 0;
  bool allow_skip = false;  // slot -1 allowed
};

__global__ void CheckIndexArraysKernel(IndexArrays a, uint32_t* words) {
  for (int64_t i = GridStart(); i < a.n; i += GridStride()) {
    for (int k = 0; k < 2; ++k) {
      if (a.slots[k] != nullptr && !SlotValid(a.slots[k][i], a.num_slots, a.allow_skip)) {
        Flag(words);
      }
      if (a.positions[k] != nullptr && !PositionValid(a.positions[k][i])) Flag(words);
    }
  }
}

__global__ void CheckTokenIdsKernel(const int32_t* ids, int64_t n, int64_t vocab_size,
                                    uint32_t* words) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) {
    if (!TokenIdValid(ids[i], vocab_size)) Flag(words);
  }
}

__global__ void CheckSampleParamsKernel(const SamplingParams* params, int64_t n, uint32_t* words) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) {
    if (!SamplingParamsValid(params[i])) Flag(words);
  }
}

// The checks of CheckPagedAttentionContents; word 1 gets the largest valid kv_len.
__global__ void CheckPagedAttentionKernel(PagedAttentionArgs a, uint32_t* words) {
  const int64_t capacity = static_cast<int64_t>(a.max_blocks_per_seq) * a.cache.block_size;
  for (int64_t s = GridStart(); s <= a.num_seqs; s += GridStride()) {
    const int32_t start = a.query_start_loc[s];
    if (s == 0 && start != 0) Flag(words);
    if (s == a.num_seqs) {
      if (start != a.num_tokens) Flag(words);
      continue;
    }
    if (a.query_start_loc[s + 1] < start) Flag(words);
    const int32_t kv_len = a.kv_lens[s];
    if (KvLenValid(kv_len, capacity)) {
      atomicMax(&words[1], static_cast<uint32_t>(kv_len));
    } else {
      Flag(words);
    }
  }
  const int64_t entries = static_cast<int64_t>(a.num_seqs) * a.max_blocks_per_seq;
  for (int64_t e = GridStart(); e < entries; e += GridStride()) {
    const int32_t kv_len = a.kv_lens[e / a.max_blocks_per_seq];
    if (!KvLenValid(kv_len, capacity)) continue;  // flagged above
    if (e % a.max_blocks_per_seq >= UsedBlocks(kv_len, a.cache.block_size)) continue;
    if (!BlockIdValid(a.block_tables[e], a.cache.num_blocks)) Flag(words);
  }
  for (int64_t t = GridStart(); t < a.num_tokens; t += GridStride()) {
    if (!PositionValid(a.positions[t])) Flag(words);
  }
}

// Zeroes the check words, runs `launch(words)` (which enqueues one check kernel on `stream`),
// copies the words to the host and waits. Returns word 0 != 0 (a bad entry); *value gets word 1.
template <typename Launch>
absl::StatusOr<bool> RunCheck(const char* kernel, cudaStream_t stream, Workspace& workspace,
                              Launch launch, uint32_t* value = nullptr) {
  PAGEDKV_ASSIGN_OR_RETURN(uint32_t * words, workspace.DeviceCheckWords());
  const size_t bytes = Workspace::kCheckWords * sizeof(uint32_t);
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(words, 0, bytes, stream));
  launch(words);
  PAGEDKV_RETURN_IF_ERROR(CudaStatus(cudaGetLastError(), kernel, __FILE__, __LINE__));
  uint32_t* host = workspace.HostCheckWords();
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host, words, bytes, cudaMemcpyDeviceToHost, stream));
  PAGEDKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  if (value != nullptr) *value = host[1];
  return host[0] != 0;
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

absl::Status CheckRopeOnDevice(const RopeArgs& args, cudaStream_t stream, Workspace& workspace) {
  IndexArrays arrays;
  arrays.positions[0] = args.positions;
  arrays.n = args.num_tokens;
  PAGEDKV_ASSIGN_OR_RETURN(
      const bool bad, RunCheck("CheckIndexArraysKernel", stream, workspace, [&](uint32_t* w) {
        CheckIndexArraysKernel<<<BlocksFor(arrays.n), kThreads, 0, stream>>>(arrays, w);
      }));
  if (!bad) return absl::OkStatus();
  PAGEDKV_ASSIGN_OR_RETURN(auto positions, ToHost(args.positions, args.num_tokens, stream));
  RopeArgs host = args;
  host.positions = positions.data();
  return HostVerdict(CheckRopeContents(host), "Rope");
}

absl::Status CheckReshapeAndCacheOnDevice(const ReshapeAndCacheArgs& args, cudaStream_t stream,
                                          Workspace& workspace) {
  IndexArrays arrays;
  arrays.slots[0] = args.slot_mapping;
  if (args.rotate) arrays.positions[0] = args.positions;
  arrays.n = args.num_tokens;
  arrays.num_slots = args.cache.NumSlots();
  arrays.allow_skip = true;
  PAGEDKV_ASSIGN_OR_RETURN(
      const bool bad, RunCheck("CheckIndexArraysKernel", stream, workspace, [&](uint32_t* w) {
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
                                   Workspace& workspace) {
  IndexArrays arrays;
  arrays.slots[0] = args.src_slots;
  arrays.slots[1] = args.dst_slots;
  arrays.positions[0] = args.old_positions;
  arrays.positions[1] = args.new_positions;
  arrays.n = args.num_tokens;
  arrays.num_slots = args.cache.NumSlots();
  PAGEDKV_ASSIGN_OR_RETURN(
      const bool bad, RunCheck("CheckIndexArraysKernel", stream, workspace, [&](uint32_t* w) {
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
                                          Workspace& workspace) {
  PAGEDKV_ASSIGN_OR_RETURN(
      const bool bad, RunCheck("CheckTokenIdsKernel", stream, workspace, [&](uint32_t* w) {
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
                                                    cudaStream_t stream, Workspace& workspace) {
  const int64_t entries = static_cast<int64_t>(args.num_seqs) * args.max_blocks_per_seq;
  const int64_t n = std::max({int64_t{args.num_seqs} + 1, entries, args.num_tokens});
  uint32_t max_kv_len = 0;
  PAGEDKV_ASSIGN_OR_RETURN(const bool bad,
                           RunCheck(
                               "CheckPagedAttentionKernel", stream, workspace,
                               [&](uint32_t* w) {
                                 CheckPagedAttentionKernel<<<BlocksFor(n), kThreads, 0, stream>>>(
                                     args, w);
                               },
                               &max_kv_len));
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

absl::Status CheckSampleOnDevice(const SampleArgs& args, cudaStream_t stream,
                                 Workspace& workspace) {
  PAGEDKV_ASSIGN_OR_RETURN(
      const bool bad, RunCheck("CheckSampleParamsKernel", stream, workspace, [&](uint32_t* w) {
        CheckSampleParamsKernel<<<BlocksFor(args.num_seqs), kThreads, 0, stream>>>(
            args.params, args.num_seqs, w);
      }));
  if (!bad) return absl::OkStatus();
  PAGEDKV_ASSIGN_OR_RETURN(auto params, ToHost(args.params, args.num_seqs, stream));
  SampleArgs host = args;
  host.params = params.data();
  return HostVerdict(CheckSampleContents(host), "Sample");
}

}  // namespace pagedkv::cuda
