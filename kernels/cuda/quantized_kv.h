// Copyright 2026 The pagedkv Authors.
//
// CUDA KV write and re-rotation over quantized pages (pagedkv/dtype.h's int8, fp8, q8_0, q4_0,
// q4_1): one thread per (token, KV head) row, which holds the row in fp32, rotates it with the
// shared RoPE pair math and quantizes it whole with pagedkv/kernels/kv_quant.h (the CPU ops'
// functions). Called by rope.cu's launchers after validation and content checks; the caller
// rotates q. REQUIRES: args.cache resolved (explicit strides).
#ifndef PAGEDKV_KERNELS_CUDA_QUANTIZED_KV_H_
#define PAGEDKV_KERNELS_CUDA_QUANTIZED_KV_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "pagedkv/kernels/op_args.h"

namespace pagedkv::cuda {

// K and V rows of every token with a valid slot (and position) quantized into the pages (and the
// rotated float keys into args.rotated_k when set). Any dtype: the launchers also send 16/32-bit
// pages here when rotated_k or src_keys is set.
absl::Status LaunchQuantizedKvWrite(const ReshapeAndCacheArgs& args, int64_t k_stride,
                                    int64_t v_stride, cudaStream_t stream);

// Each token's K row dequantized (or taken from args.src_keys), re-rotated and quantized at its
// dst slot; its V row copied.
absl::Status LaunchQuantizedReRotate(const ReRotateArgs& args, cudaStream_t stream);

}  // namespace pagedkv::cuda

#endif  // PAGEDKV_KERNELS_CUDA_QUANTIZED_KV_H_
