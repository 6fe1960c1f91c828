// Copyright 2026 The pagedkv Authors.
//
// ActivationType: how a Linear over block-format weights treats its activations (QuantLinearArgs,
// ModelRunnerOptions, EngineOptions). Its own header so that engine options need no op structs.
//
// Example:
//   options.activations = pagedkv::ActivationType::kInt8;
#ifndef PAGEDKV_KERNELS_ACTIVATION_TYPE_H_
#define PAGEDKV_KERNELS_ACTIVATION_TYPE_H_

#include <cstdint>

namespace pagedkv {

// How QuantLinear treats the activations x.
enum class ActivationType : uint8_t {
  kF32 = 0,   // products of decoded weights and x summed in fp32
  kInt8 = 1,  // x quantized per 32-value block to int8, exact integer block dots
              // (pagedkv/kernels/int8_activations.h); Q4_0 / Q4_1 / Q8_0 weights only, the
              // other weight types keep kF32
};

}  // namespace pagedkv

#endif  // PAGEDKV_KERNELS_ACTIVATION_TYPE_H_
