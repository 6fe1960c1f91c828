// Copyright 2026 The pagedkv Authors.
//
// CPU backend ops: every op over host memory on the calling thread, fp32 arithmetic; Linear, LM
// head, RMSNorm, SwiGLU and paged attention use vector kernels picked at run time for the CPU
// (Google Highway: SSE2 baseline, SSE4, AVX2+FMA, AVX-512). The CPU Backend
// (engine/model/runner/backend.h) runs the same kernels split over its threads, with bit-identical
// results. Each call validates its arguments (shapes, head dims, dtypes, and the contents of slot
// lists, positions and block tables) before writing anything: on InvalidArgument no output has been
// touched. The argument structs (pagedkv/kernels/op_args.h) are the same ones the CUDA backend
// takes.
//
// Example:
//   pagedkv::LinearArgs qkv{.x = h, .w = wqkv, .y = out, .m = tokens, .n = 3 * dim, .k = dim};
//   PAGEDKV_RETURN_IF_ERROR(pagedkv::cpu::Linear(qkv));
#ifndef PAGEDKV_KERNELS_CPU_OPS_H_
#define PAGEDKV_KERNELS_CPU_OPS_H_

#include "absl/status/status.h"
#include "pagedkv/export.h"
#include "pagedkv/kernels/op_args.h"

namespace pagedkv::cpu {

// y = x W^T (+ y). Register-tiled: up to 4 rows of x share each load of 4 rows of W; each y[i][j]
// is reduced in an order fixed by k and j alone (not by m: a row's result ignores the other rows).
PAGEDKV_EXPORT absl::Status Linear(const LinearArgs& args);
// out[t] = table[token_ids[t]].
PAGEDKV_EXPORT absl::Status EmbeddingGather(const EmbeddingGatherArgs& args);
// out[i] = fp32(src[rows[i]]), any source dtype.
PAGEDKV_EXPORT absl::Status GatherRows(const GatherRowsArgs& args);
// Row-wise RMSNorm.
PAGEDKV_EXPORT absl::Status RmsNorm(const RmsNormArgs& args);
// silu(gate) * up.
PAGEDKV_EXPORT absl::Status SwiGlu(const SwiGluArgs& args);
// logits = hidden W^T (separate or tied weight).
PAGEDKV_EXPORT absl::Status LmHead(const LmHeadArgs& args);
// Rotates q and k in place by per-token positions.
PAGEDKV_EXPORT absl::Status Rope(const RopeArgs& args);
// Rotates q (in place) and k, writes k and v to slot_mapping slots (-1 skipped).
PAGEDKV_EXPORT absl::Status ReshapeAndCache(const ReshapeAndCacheArgs& args);
// Re-rotates cached keys from old to new positions and copies values.
PAGEDKV_EXPORT absl::Status ReRotate(const ReRotateArgs& args);
// Causal paged attention over a flat batch of query tokens (one exp per key and head).
PAGEDKV_EXPORT absl::Status PagedAttention(const PagedAttentionArgs& args);
// One token per sequence: greedy, temperature, top-p, seeded.
PAGEDKV_EXPORT absl::Status Sample(const SampleArgs& args);

}  // namespace pagedkv::cpu

#endif  // PAGEDKV_KERNELS_CPU_OPS_H_
