// Copyright 2026 The pagedkv Authors.
//
// CPU reference backend: every op over host memory, single-threaded, fp32 arithmetic. Each call
// validates its arguments (shapes, head dims, dtypes, and the contents of slot lists, positions and
// block tables) before writing anything: on InvalidArgument no output has been touched.
// The argument structs (pagedkv/kernels/op_args.h) are the same ones the CUDA backend takes.
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

// y = x W^T (+ y). Blocked: 4 rows of x share each pass over a row of W.
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
// Causal paged attention over a flat batch of query tokens.
PAGEDKV_EXPORT absl::Status PagedAttention(const PagedAttentionArgs& args);
// One token per sequence: greedy, temperature, top-p, seeded.
PAGEDKV_EXPORT absl::Status Sample(const SampleArgs& args);

}  // namespace pagedkv::cpu

#endif  // PAGEDKV_KERNELS_CPU_OPS_H_
