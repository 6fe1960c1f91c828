// Copyright 2026 The pagedkv Authors.
//
// QuantLinear with int8 activations (QuantLinearArgs::activations = ActivationType::kInt8) over
// Q4_0 / Q4_1 / Q8_0 weights: x is quantized once per call into 32-value blocks, then every
// output is the chain of pagedkv/kernels/int8_activations.h. Kernels, the best the CPU runs:
// AVX-512 VNNI (vpdpbusd, 16 W rows a tile), AVX2 (maddubs + madd, 8 W rows by up to 4 x rows a
// tile; needs AVX2, FMA and F16C), otherwise the portable loop over the same PAGEDKV_HD
// functions; all give the same bits, and a y[i][j] is the same for
// any m, column split, thread count or batch composition (batch invariant, unlike the fp32
// path's two regimes below and from kQuantPanelMinRows rows).
//
// Example:
//   QuantLinearArgs a{.x = x, .w = q4_1_rows, .w_type = WeightType::kQ4_1, .y = y,
//                     .m = m, .n = n, .k = k, .activations = ActivationType::kInt8};
//   PAGEDKV_RETURN_IF_ERROR(cpu::Int8QuantLinear(a, pool));
#ifndef PAGEDKV_KERNELS_CPU_INT8_LINEAR_H_
#define PAGEDKV_KERNELS_CPU_INT8_LINEAR_H_

#include <cstdint>
#include <type_traits>

#include "absl/status/status.h"
#include "kernels/cpu/int8_tiles.h"
#include "kernels/cpu/thread_pool.h"
#include "pagedkv/export.h"
#include "pagedkv/kernels/op_args.h"

namespace pagedkv::cpu {

// x quantized by QuantizeActivationBlock, row after row: [m, k / 32] blocks.
struct Int8Rows {
  const int8_t* q = nullptr;         // [m, k]
  const float* scale = nullptr;      // [m, k / 32]: dx of each block
  const float* sum = nullptr;        // [m, k / 32]: sx = dx * qsum (Q4_1's offset term)
  const int32_t* qsum = nullptr;     // [m, k / 32]: sum of each block's q (Q4_0's bias term)
  const int32_t* qsum_lo = nullptr;  // [m, k / 32]: sum of its first 16 q (Q6_K only, else null)
  int64_t blocks_per_row = 0;        // k / 32
};

// Which kernel Int8QuantLinear runs here: "avx512vnni", "avx2" or "portable" (the forced one
// when set).
PAGEDKV_EXPORT const char* Int8KernelName();

// Forces the kernel for comparisons and tests: "auto" (the default: the best this CPU runs),
// "avx512vnni", "avx2" or "portable". InvalidArgument for another name or for a kernel this CPU
// cannot run.
// Not thread-safe against running kernels: call before work starts.
PAGEDKV_EXPORT absl::Status ForceInt8Kernel(const char* name);
// True when the kernel that runs now multiplies Int8Tiles (int8_tiles.h) of `type`: the VNNI
// kernel for every int8 type, the AVX2 kernel for Q4_K and Q6_K.
PAGEDKV_EXPORT bool Int8KernelReadsTiles(WeightType type);

// What ForceInt8Kernel last set: "auto" (the default) or the forced kernel's name.
PAGEDKV_EXPORT const char* ForcedInt8Kernel();

// The process's choice as ForceInt8Kernel left it, to put back later: restoring cannot fail,
// since the saved value is a choice that was accepted. Not thread-safe against running kernels.
enum class Int8KernelChoice : int {};
PAGEDKV_EXPORT Int8KernelChoice CurrentInt8KernelChoice();
PAGEDKV_EXPORT void RestoreInt8KernelChoice(Int8KernelChoice choice);

// Whether Int8QuantLinear multiplies W of `type` here, `tiled` saying whether W's Int8Tiles are
// given: the 32-value block types always; Q4_K / Q6_K from tiles with the VNNI or the AVX2
// kernel, or with the portable kernel when it is forced. QuantLinear keeps fp32 activations where
// this says no, so no CPU runs a slower path than fp32 activations.
PAGEDKV_EXPORT bool Int8QuantLinearRuns(WeightType type, bool tiled);

// y = x W^T (+ y) with int8 activations; the VNNI kernel multiplies `tiles` (args.w's, or null)
// when given, the others ignore them (the same bits either way). REQUIRES: args validated
// (ValidateQuantLinear), Int8QuantLinearRuns(args.w_type, tiles != null), tiles null or built
// from args.w. ResourceExhausted (y untouched) when the quantized copy of x cannot be allocated.
PAGEDKV_EXPORT absl::Status Int8QuantLinear(const QuantLinearArgs& args, ThreadPool* pool,
                                            const Int8Tiles* tiles = nullptr);

namespace int8_kernels {

// Calls fn(std::integral_constant<WeightType, T>{}) for T = type (Q4_0, Q4_1; any other: Q8_0),
// so that a kernel's entry point instantiates its templates once per int8 weight type.
template <typename Fn>
void WithInt8Type(WeightType type, Fn&& fn) {
  switch (type) {
    case WeightType::kQ4_0:
      return fn(std::integral_constant<WeightType, WeightType::kQ4_0>{});
    case WeightType::kQ4_1:
      return fn(std::integral_constant<WeightType, WeightType::kQ4_1>{});
    default:
      return fn(std::integral_constant<WeightType, WeightType::kQ8_0>{});
  }
}

// Columns [j_begin, j_end) of every row of y; j_begin a multiple of 8.
void Avx2Columns(const QuantLinearArgs& a, const Int8Rows& x, int64_t j_begin, int64_t j_end);
bool Avx2Supported();
// Quantizes `blocks` consecutive 32-value blocks of x (the AVX2 form of QuantizeActivationBlock,
// same bits).
void Avx2QuantizeBlocks(const float* x, int64_t blocks, int8_t* q, float* scale, int32_t* qsum);

// Columns [j_begin, j_end) of every row of y; j_begin a multiple of 16.
void VnniColumns(const QuantLinearArgs& a, const Int8Rows& x, int64_t j_begin, int64_t j_end);
// The same from W's tiles; j_begin and j_end multiples of 16.
void VnniTiledColumns(const QuantLinearArgs& a, const Int8Rows& x, const Int8Tiles& tiles,
                      int64_t j_begin, int64_t j_end);
// AVX-512 F / BW / VL / DQ / VNNI, with the OS's ZMM state, and Avx2Supported().
bool VnniSupported();
// Columns [j_begin, j_end) from Q4_K / Q6_K tiles (int8_tiles.h), by the AVX2 or the VNNI
// kernel; j_begin and j_end multiples of 16.
void Avx2TiledSuperColumns(const QuantLinearArgs& a, const Int8Rows& x, const Int8Tiles& tiles,
                           int64_t j_begin, int64_t j_end);
void VnniTiledSuperColumns(const QuantLinearArgs& a, const Int8Rows& x, const Int8Tiles& tiles,
                           int64_t j_begin, int64_t j_end);

}  // namespace int8_kernels

}  // namespace pagedkv::cpu

#endif  // PAGEDKV_KERNELS_CPU_INT8_LINEAR_H_
