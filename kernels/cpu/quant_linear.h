// Copyright 2026 The pagedkv Authors.
//
// Linear over weights kept in their file's block format (y = x W^T, QuantLinearArgs; the block
// layouts are pagedkv/kernels/quant_blocks.h): blocks are decoded in registers and products summed
// in fp32 (no int8 activations). Work is split by output columns; every y[i][j] is computed the
// same way whatever the split, the thread count or m.
//
// Example:
//   PAGEDKV_RETURN_IF_ERROR(cpu::QuantLinear({.x = x, .w = q4_1_rows, .w_type = WeightType::kQ4_1,
//                                             .y = y, .m = m, .n = n, .k = k}, pool));
#ifndef PAGEDKV_KERNELS_CPU_QUANT_LINEAR_H_
#define PAGEDKV_KERNELS_CPU_QUANT_LINEAR_H_

#include "absl/status/status.h"
#include "kernels/cpu/thread_pool.h"
#include "pagedkv/export.h"
#include "pagedkv/kernels/op_args.h"

namespace pagedkv::cpu {

// InvalidArgument (y untouched) for invalid args: null pointers, n or k <= 0, m < 0, k not a
// multiple of 32, a w_type that is not block-quantized, y aliasing x or w. pool may be null.
PAGEDKV_EXPORT absl::Status QuantLinear(const QuantLinearArgs& args, ThreadPool* pool);

// Decodes the tokens' rows (QuantValue, element by element). InvalidArgument (out untouched) for
// null pointers, a bad type or dim, or a token id outside [0, vocab_size).
PAGEDKV_EXPORT absl::Status QuantEmbeddingGather(const QuantEmbeddingGatherArgs& args);

}  // namespace pagedkv::cpu

#endif  // PAGEDKV_KERNELS_CPU_QUANT_LINEAR_H_
