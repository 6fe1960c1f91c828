// Copyright 2026 The pagedkv Authors.
//
// The CPU backend's vector kernels (Google Highway, run-time dispatch): each .cc under simd/ is
// compiled once per x86 target (SSE4, AVX2+FMA, AVX-512, plus the SSE2-only baseline), and the
// first call picks the best one the running CPU supports. Internal to kernels/cpu: the callers
// have validated the arguments, and split the work over threads by output rows/columns/heads, so
// each function computes a disjoint slice of the output, the same way whatever the slice.
//
// Determinism: every output element is reduced in one fixed order that depends only on the shape
// (k, head_dim, number of keys), never on the slice, the thread count or the other rows of the
// batch. Results may differ between targets (an AVX-512 and an AVX2 machine round differently).
//
// Example:
//   simd::LinearColumns(args, 0, args.n);   // y = x W^T, all of it, on this thread
#ifndef PAGEDKV_KERNELS_CPU_SIMD_SIMD_KERNELS_H_
#define PAGEDKV_KERNELS_CPU_SIMD_SIMD_KERNELS_H_

#include <cstdint>

#include "pagedkv/export.h"
#include "pagedkv/kernels/op_args.h"
#include "pagedkv/kernels/paged_kv_layout.h"
#include "pagedkv/kernels/rope_table.h"
#include "pagedkv/rope_config.h"

namespace pagedkv::cpu::simd {

// Name of the Highway target dispatch picks on this machine, e.g. "AVX3" (AVX-512), "AVX2".
PAGEDKV_EXPORT const char* TargetName();

// Columns [n_begin, n_end) of y = x W^T (+ y): every row of x against those rows of W. Each
// y[i][j] is one dot product over k: full vectors in k order, a lane sum, then the tail.
// REQUIRES: args validated; 0 <= n_begin <= n_end <= args.n; n_begin a multiple of 4, and n_end
// too unless it is n (the column groups of the lane sums start at multiples of 4).
PAGEDKV_EXPORT void LinearColumns(const LinearArgs& args, int64_t n_begin, int64_t n_end);

// Packed weights: W [n, k] stored k-major in panels of PackedPanelWidth() columns,
// packed[panel][kk][c] = W[panel * width + c][kk] (zero past n), so ceil(n / width) * width * k
// floats. The width is the dispatched target's (fixed for the process).
PAGEDKV_EXPORT int64_t PackedPanelWidth();
// REQUIRES: out holds the packed size above and is aligned to 64 bytes.
PAGEDKV_EXPORT void PackWeights(const float* w, int64_t n, int64_t k, float* out);
// Rows of x per work item of PackedLinearTiles.
inline constexpr int64_t kPackedTileRows = 4;
// Work items [item_begin, item_end) of y = x W^T (+ y) with args.w ignored and `packed` its packed
// W: item = panel * row_blocks + row_block (row blocks of kPackedTileRows rows of x). Each y[i][j]
// is one FMA chain over k in order, then added to y when accumulating; the same for any m or
// item range. REQUIRES: args validated; packed from PackWeights(args.w, args.n, args.k).
PAGEDKV_EXPORT void PackedLinearTiles(const LinearArgs& args, const float* packed,
                                      int64_t item_begin, int64_t item_end);

// Columns [n_begin, n_end) of y = x W^T (+ y) with W in a file format (QuantLinearArgs): every
// row of x against those rows of W, one fp32 chain per y[i][j] (see quant_linear_simd.cc), the
// same for any column range or m. REQUIRES: args validated (ValidateQuantLinear).
PAGEDKV_EXPORT void QuantLinearColumns(const QuantLinearArgs& args, int64_t n_begin, int64_t n_end);
// The many-rows form: column panels [panel_begin, panel_end) of PackedPanelWidth() W rows each,
// each decoded into `scratch` (the packed fp32 layout above) and run against every row of x; the
// same bits as PackedLinearTiles over W converted to fp32 (QuantValue). REQUIRES: args
// validated; scratch holds PackedPanelWidth() * args.k floats, aligned to 64 bytes, and is this
// call's own.
PAGEDKV_EXPORT void QuantLinearPanels(const QuantLinearArgs& args, int64_t panel_begin,
                                      int64_t panel_end, float* scratch);

// Rows [row_begin, row_end) of RMSNorm / SwiGLU. REQUIRES: args validated.
PAGEDKV_EXPORT void RmsNormRows(const RmsNormArgs& args, int64_t row_begin, int64_t row_end);
PAGEDKV_EXPORT void SwiGluRows(const SwiGluArgs& args, int64_t row_begin, int64_t row_end);

// sum over i < n of exp(x[i] - shift), in float64: each exp in fp32 (Highway's Exp, about one
// ulp; arguments below -88 count as -88), summed in fp32 over 8 vectors, then in float64. For
// shift = max(x) the relative error stays near 1e-6 (log-probabilities over a vocabulary).
PAGEDKV_EXPORT double SumExpShifted(const float* x, int64_t n, float shift);

// One query token's heads of one KV head (the GQA group): out[g] = softmax(q[g] K^T * scale) V
// over keys [first_key, num_keys) of the sequence, one exp per key and head (online softmax over
// chunks of keys: the running state is rescaled once per chunk).
struct PAGEDKV_EXPORT AttentionGroup {
  const float* q = nullptr;        // [group, head_dim]: the group's query heads, contiguous
  float* out = nullptr;            // [group, head_dim]
  const int32_t* table = nullptr;  // the sequence's block table
  int64_t first_key = 0;           // first key read, >= 0 (a sliding window's start)
  int64_t num_keys = 0;            // end of the keys read, >= 0 (none: out is 0)
  int32_t kv_head = 0;
  int32_t group = 0;   // query heads sharing kv_head, >= 1
  float scale = 0.0f;  // score scale (> 0)
};
// REQUIRES: cache resolved (PagedKvLayout::Resolved) and valid; table covers num_keys positions.
PAGEDKV_EXPORT void AttendGroup(const PagedKvLayout& cache, const AttentionGroup& job);

// Keys per online-softmax step of AttendGroup / AttendRows. A row's result depends only on its
// own query, keys and this chunking (steps start at first_key), never on the rows beside it.
inline constexpr int64_t kAttentionChunkKeys = 32;
// Query heads (rows x group) one AttendRows pass holds.
inline constexpr int32_t kMaxAttentionHeadRows = 24;

// Several tokens' AttentionGroups of one KV head in one walk over their common keys: keys
// [0, shared_keys) lie in the same blocks for every row (the same sequence, or sequences whose
// block tables begin alike: forks of one prompt, a shared system prompt), so each chunk of them
// is read (and decoded) once for all rows; each row then goes on alone through its own table.
// Every row's output has the same bits as AttendGroup of that row alone.
struct PAGEDKV_EXPORT AttentionRows {
  const AttentionGroup* rows = nullptr;  // same kv_head, group and scale; first_key 0
  int32_t num_rows = 0;                  // >= 1, num_rows * group <= kMaxAttentionHeadRows
  int64_t shared_keys = 0;               // a multiple of kAttentionChunkKeys (0: nothing shared)
};
// REQUIRES: as AttendGroup for every row, and rows[0].table equal to every row's table over the
// blocks of keys [0, shared_keys) that row reads.
PAGEDKV_EXPORT void AttendRows(const PagedKvLayout& cache, const AttentionRows& job);

// The row decode AttendGroup applies to non-f32 pages (kv_dequant-inl.h; f16 / bf16 by
// vector conversion) on this CPU's target: dst[0, n) = the row at storage unit `offset` of
// `base`. The same bits as LoadKvRow (tests).
PAGEDKV_EXPORT void DecodeKvRowForAttention(const void* base, DType dtype, int64_t offset,
                                            int32_t n, float* dst);

// One token's rotation: for each rotated pair (a, b) with angle (c, s), cm[a] = cm[b] = c,
// sm[a] = -s, sm[b] = s, so x'[d] = x[d] * cm[d] + x[partner(d)] * sm[d] for d < rotary_dim
// (dims from rotary_dim on pass through).
struct PAGEDKV_EXPORT RotationCoefficients {
  float cm[kMaxHeadDim];
  float sm[kMaxHeadDim];
  RopeLayout layout = RopeLayout::kInterleaved;
  int32_t rotary_dim = 0;
};
// RoPE to `position` (from the table, or computed past it), attention factor applied: the same
// angles as RopeRotateHead.
PAGEDKV_EXPORT void RopeCoefficients(const RopeTableView& rope, int64_t position,
                                     RotationCoefficients* r);
// Re-rotation from old_position to new_position (ReRotateCosSin's angles, no attention factor).
PAGEDKV_EXPORT void ReRotateCoefficients(const RopeTableView& rope, ReRotateMode mode,
                                         int64_t old_position, int64_t new_position,
                                         RotationCoefficients* r);
// Rotates heads x + h * head_stride, h < num_heads, in place; bit-identical to RotatePair.
PAGEDKV_EXPORT void RotateHeads(const RotationCoefficients& r, float* x, int32_t num_heads,
                                int64_t head_stride);

}  // namespace pagedkv::cpu::simd

#endif  // PAGEDKV_KERNELS_CPU_SIMD_SIMD_KERNELS_H_
