// Copyright 2026 The pagedkv Authors.
//
// Linear over weights kept in their file's format (y = x W^T, QuantLinearArgs; Q4_0, Q4_1, Q8_0,
// Q4_K, Q6_K, F16, BF16, layouts in pagedkv/kernels/quant_blocks.h): weights are decoded on the
// fly and products summed in fp32 (no int8 activations). Q4_0 / Q4_1 / Q8_0 are decoded block by
// block in registers; F16, BF16, Q4_K and Q6_K a row at a time into an fp32 row in cache
// (simd/decoded_rows-inl.h). Below kQuantPanelMinRows rows of x, each block's integers are
// widened in registers and multiplied with x (the memory-bound decode path); from there on, each
// panel of W rows is decoded once per call into fp32 and the packed kernel's outer-product tile
// runs over it, which gives exactly PackedLinear's bits over the weights converted to fp32 at
// load (q * d + m). Work is split by output columns; every y[i][j] is computed the same way
// whatever the split or the thread count, and for a given m whatever the other rows of x.
//
// Example:
//   PAGEDKV_RETURN_IF_ERROR(cpu::QuantLinear({.x = x, .w = q4_1_rows, .w_type = WeightType::kQ4_1,
//                                             .y = y, .m = m, .n = n, .k = k}, pool));
#ifndef PAGEDKV_KERNELS_CPU_QUANT_LINEAR_H_
#define PAGEDKV_KERNELS_CPU_QUANT_LINEAR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/int8_tiles.h"
#include "kernels/cpu/thread_pool.h"
#include "pagedkv/export.h"
#include "pagedkv/kernels/op_args.h"

namespace pagedkv::cpu {

// Rows of x from which QuantLinear decodes panels (compute-bound prefill) instead of multiplying
// blocks in registers (memory-bound decode).
inline constexpr int64_t kQuantPanelMinRows = 16;

// With args.activations == kInt8 and Q4_0 / Q4_1 / Q8_0 weights it runs Int8QuantLinear
// (kernels/cpu/int8_linear.h), which reads `int8_tiles` (args.w's tiles, int8_tiles.h; may be
// null) where its kernel multiplies tiles; other weight types and kF32 ignore them.
// InvalidArgument (y untouched) for invalid args: null pointers, n or k <= 0, m < 0, a w_type
// that is kF32 or not a WeightType, k not a multiple of QuantBlockValuesOf(w_type) (32 for Q4_0,
// Q4_1, Q8_0; 256 for Q4_K, Q6_K; any k for F16, BF16), y aliasing x or w, tiles not built from
// args.w (source, type, n, k). pool may be null.
PAGEDKV_EXPORT absl::Status QuantLinear(const QuantLinearArgs& args, ThreadPool* pool,
                                        const Int8Tiles* int8_tiles = nullptr);

// Decodes the tokens' rows (QuantValue, element by element). With `tiles` (the table's Int8Tiles
// that hold rows, Int8Tiles::holds_rows) the rows' bytes are copied from the tiles, so the
// table's own rows are not read: the same bytes, the same bits. Tiles that hold no rows are
// ignored. InvalidArgument (out untouched) for null pointers, a bad type or dim, a token id
// outside [0, vocab_size), or tiles not built from args.table (source, type, vocab_size, dim).
PAGEDKV_EXPORT absl::Status QuantEmbeddingGather(const QuantEmbeddingGatherArgs& args,
                                                 const Int8Tiles* tiles = nullptr);

}  // namespace pagedkv::cpu

#endif  // PAGEDKV_KERNELS_CPU_QUANT_LINEAR_H_
