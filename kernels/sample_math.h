// Copyright 2026 The pagedkv Authors.
//
// Counter-based random numbers for seeded sampling, identical on host and device: the uniform
// draw of a sequence depends only on (seed, counter), so a request replays the same tokens on
// either backend and regardless of batching.
//
// Example:
//   double u = pagedkv::SampleUniform(/*seed=*/42, /*counter=*/num_generated_tokens);
#ifndef PAGEDKV_KERNELS_SAMPLE_MATH_H_
#define PAGEDKV_KERNELS_SAMPLE_MATH_H_

#include <cstdint>

#include "pagedkv/hd.h"
#include "pagedkv/kernels/dtype_convert.h"

namespace pagedkv {

// SplitMix64 finaliser.
PAGEDKV_HD uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform double in [0, 1) from (seed, counter); 53 random bits.
PAGEDKV_HD double SampleUniform(uint64_t seed, uint64_t counter) {
  const uint64_t bits = SplitMix64(SplitMix64(seed) ^ (counter * 0xd1342543de82ef95ull + 1));
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);
}

// Temperatures below this sample greedily (argmax), as vLLM does (its _SAMPLING_EPS): dividing
// logits by a smaller one overflows float (1 / 1e-39 is inf, and 0 * inf is NaN), and the
// distribution it would give is the argmax's to float precision anyway.
inline constexpr float kMinSamplingTemperature = 1e-5f;

// True when `temperature` means greedy decoding: <= 0, or below kMinSamplingTemperature.
PAGEDKV_HD bool IsGreedyTemperature(float temperature) {
  return temperature < kMinSamplingTemperature;
}

// True when top_k limits a row of `vocab` tokens: 1 <= top_k < vocab (vLLM treats 0, and a k
// that covers the vocabulary, as off).
PAGEDKV_HD bool TopKActive(int32_t top_k, int64_t vocab) { return top_k >= 1 && top_k < vocab; }

// A float's bits mapped so that unsigned order is float order (-inf < ... < -0 < +0 < ... < inf),
// for bisection over logits; OrderedFloat inverts it.
PAGEDKV_HD uint32_t OrderedKey(float f) {
  const uint32_t bits = FloatToBits(f);
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}
PAGEDKV_HD float OrderedFloat(uint32_t key) {
  return BitsToFloat((key & 0x80000000u) != 0 ? key & 0x7fffffffu : ~key);
}

}  // namespace pagedkv

#endif  // PAGEDKV_KERNELS_SAMPLE_MATH_H_
