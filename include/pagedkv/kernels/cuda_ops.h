// Copyright 2026 The pagedkv Authors.
//
// CUDA backend: the same ops and argument structs as pagedkv::cpu (pagedkv/kernels/cpu_ops.h), over
// device pointers, enqueued on `stream` (asynchronous; errors of the launch itself are returned,
// errors during execution surface at the next synchronising call). Launchers check sizes, head
// dims and dtypes on the host (InvalidArgument, nothing enqueued).
//
// Contents of device index arrays (slots, positions, token ids, block tables, sampling params)
// are checked according to LaunchOptions::check:
//  - ContentCheck::kValidate (default): a small validation kernel runs first and its verdict is
//    copied back to the host (one 16-byte copy and one stream synchronisation per call, see
//    kernels/cuda/content_check.h); a bad entry gives the same InvalidArgument as the CPU backend
//    and nothing is written.
//  - ContentCheck::kTrusted: the fast path for callers that validated on the host already (the
//    engine's ModelRunner checks every ModelInput): no check, no synchronisation; the kernels
//    still skip out-of-range entries (memory-safe) but never report them.
//  - ContentCheck::kDeferred: the validation kernel runs, but nothing waits for it. It records the
//    first bad entry (op, array, index: pagedkv/kernels/bad_entry.h) in a device flag, the
//    caller's LaunchOptions::deferred_flag or the workspace's own (Workspace::DeferredFlag()),
//    unless the flag already holds an earlier call's entry; the op's kernels then skip bad entries
//    as with kTrusted. The launcher returns OK for bad contents: the caller reads the flag later,
//    once per step for instance, with ReadAndClearDeferredCheck (one copy, one synchronisation).
//    Cost: one memset and two tiny kernels per call, no host round trip.
// CUDA graph capture: kValidate synchronises the stream, which capture forbids, so capture
// launches with kTrusted or kDeferred, after one warm-up call outside capture (the first call
// allocates the workspace's words and scratch; a capture must not allocate).
// Launchers that need temporary device memory (split-K attention) or check words take them from
// LaunchOptions::workspace, or from DefaultWorkspace(stream) when it is null (kernels/cuda/
// workspace.h); steady-state calls allocate nothing.
// Only built when PAGEDKV_HAVE_CUDA.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(auto cublas, pagedkv::cuda::CublasHandle::Create());
//   PAGEDKV_RETURN_IF_ERROR(pagedkv::cuda::Linear(args, cublas.get(), stream));
//   PAGEDKV_RETURN_IF_ERROR(pagedkv::cuda::PagedAttention(attn, stream));  // validated
//   PAGEDKV_RETURN_IF_ERROR(pagedkv::cuda::PagedAttention(
//       attn, stream, {.check = pagedkv::cuda::ContentCheck::kTrusted, .workspace = &ws}));
//   // Deferred: record, keep going, read once per step.
//   PAGEDKV_RETURN_IF_ERROR(pagedkv::cuda::PagedAttention(
//       attn, stream, {.check = pagedkv::cuda::ContentCheck::kDeferred, .workspace = &ws}));
//   PAGEDKV_RETURN_IF_ERROR(pagedkv::cuda::ReadAndClearDeferredCheck(&ws, stream));
#ifndef PAGEDKV_KERNELS_CUDA_OPS_H_
#define PAGEDKV_KERNELS_CUDA_OPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "pagedkv/export.h"
#include "pagedkv/kernels/cuda_workspace.h"
#include "pagedkv/kernels/op_args.h"

struct cublasContext;
typedef struct cublasContext* cublasHandle_t;

namespace pagedkv::cuda {

// Whether a launcher checks the contents of its device index arrays before writing.
enum class ContentCheck : int32_t {
  kValidate = 0,  // validation kernel + one host synchronisation; InvalidArgument on bad entries
  kTrusted = 1,   // caller guarantees valid contents; bad entries are skipped silently
  kDeferred = 2,  // validation kernel records the first bad entry in a device flag; no sync
};

// Per-call options of the launchers that read device index arrays.
struct PAGEDKV_EXPORT LaunchOptions {
  ContentCheck check = ContentCheck::kValidate;  // see above
  Workspace* workspace = nullptr;                // null: DefaultWorkspace(stream)
  uint64_t* deferred_flag = nullptr;  // kDeferred: caller's device word; null: workspace's
};

// Copies the deferred-check flag `flag` (a device word) to the host, waits for `stream`, and
// clears it on `stream`. OK when no bad entry was recorded, else BadEntryStatus(word): the
// InvalidArgument naming the first bad entry's op, array and index. The caller allocates the flag
// (8 bytes, cudaMemset to 0 before the first launch) and orders on `stream` every launch that
// records into it. REQUIRES: flag is device (or managed) memory; not during graph capture.
PAGEDKV_EXPORT absl::Status ReadAndClearDeferredCheck(uint64_t* flag, cudaStream_t stream);
// The same for the flag of `workspace` (null: DefaultWorkspace(stream)), which kDeferred launches
// without LaunchOptions::deferred_flag record into.
PAGEDKV_EXPORT absl::Status ReadAndClearDeferredCheck(Workspace* workspace, cudaStream_t stream);
// Enqueues clearing `flag` to 0 on `stream`, with no synchronisation (capturable), e.g. at the
// start of a captured step whose flag the host reads after the graph ran.
PAGEDKV_EXPORT absl::Status ClearDeferredCheck(uint64_t* flag, cudaStream_t stream);

// y = x W^T (+ y) with cuBLAS SGEMM (fp32 math, no TF32).
PAGEDKV_EXPORT absl::Status Linear(const LinearArgs& args, cublasHandle_t cublas,
                                   cudaStream_t stream = nullptr);
// logits = hidden W^T via Linear.
PAGEDKV_EXPORT absl::Status LmHead(const LmHeadArgs& args, cublasHandle_t cublas,
                                   cudaStream_t stream = nullptr);
// out[t] = table[token_ids[t]].
absl::Status EmbeddingGather(const EmbeddingGatherArgs& args, cudaStream_t stream = nullptr,
                             const LaunchOptions& options = {});
// out[i] = fp32(src[rows[i]]), any source dtype: one thread block per gathered row
// (kernels/cuda/gather.cu). Checks: kValidate or kTrusted; kDeferred is InvalidArgument.
absl::Status GatherRows(const GatherRowsArgs& args, cudaStream_t stream = nullptr,
                        const LaunchOptions& options = {});
// Row-wise RMSNorm.
PAGEDKV_EXPORT absl::Status RmsNorm(const RmsNormArgs& args, cudaStream_t stream = nullptr);
// silu(gate) * up.
PAGEDKV_EXPORT absl::Status SwiGlu(const SwiGluArgs& args, cudaStream_t stream = nullptr);
// Rotates q and k in place by per-token positions.
absl::Status Rope(const RopeArgs& args, cudaStream_t stream = nullptr,
                  const LaunchOptions& options = {});
// Rotates q (in place) and k, writes k and v to slot_mapping slots (-1 skipped).
absl::Status ReshapeAndCache(const ReshapeAndCacheArgs& args, cudaStream_t stream = nullptr,
                             const LaunchOptions& options = {});
// Re-rotates cached keys from old to new positions and copies values.
absl::Status ReRotate(const ReRotateArgs& args, cudaStream_t stream = nullptr,
                      const LaunchOptions& options = {});
// Causal paged attention over a flat batch of query tokens. Few, long sequences are split into
// key partitions (split-K, kernels/attention_split.h) merged by a second kernel; the partition
// count comes from the batch's largest kv_len (known after validation) or, with kTrusted, from
// max_blocks_per_seq * block_size.
absl::Status PagedAttention(const PagedAttentionArgs& args, cudaStream_t stream = nullptr,
                            const LaunchOptions& options = {});
// One token per sequence: greedy, temperature, top-p, seeded (same rule and random stream as
// the CPU backend). One block per row (CUB block reduce / scan); no temporary memory.
absl::Status Sample(const SampleArgs& args, cudaStream_t stream = nullptr,
                    const LaunchOptions& options = {});

}  // namespace pagedkv::cuda

#endif  // PAGEDKV_KERNELS_CUDA_OPS_H_
