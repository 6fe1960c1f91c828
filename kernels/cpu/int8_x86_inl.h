// Copyright 2026 The pagedkv Authors.
//
// Small AVX2 helpers that the x86 int8 kernels share (int8_linear_avx2.cc, int8_linear_vnni.cc).
// Each is compiled with the AVX2 target attribute and inlined into callers built for AVX2 or a
// superset of it; include this header only from those kernel files.
#ifndef PAGEDKV_KERNELS_CPU_INT8_X86_INL_H_
#define PAGEDKV_KERNELS_CPU_INT8_X86_INL_H_

#include <immintrin.h>

#include <cstdint>

#include "pagedkv/kernels/quant_blocks.h"

#define PAGEDKV_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace pagedkv::cpu::int8_kernels::x86 {

// A Q4_0 / Q4_1 block's 32 nibbles as unsigned bytes 0..15 in value order.
PAGEDKV_AVX2 inline __m256i Nibbles(const unsigned char* block, WeightType type) {
  const __m128i bytes = _mm_loadu_si128(
      reinterpret_cast<const __m128i*>(block + (type == WeightType::kQ4_1 ? 4 : 2)));
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(bytes, mask);                     // values 0..15
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);  // values 16..31
  return _mm256_set_m128i(hi, lo);
}

// Sums each vector's 8 int32 lanes: lane c of the result is the sum of p[c].
PAGEDKV_AVX2 inline __m256i LaneSums8(const __m256i* p) {
  const __m256i s01 = _mm256_hadd_epi32(p[0], p[1]);
  const __m256i s23 = _mm256_hadd_epi32(p[2], p[3]);
  const __m256i s45 = _mm256_hadd_epi32(p[4], p[5]);
  const __m256i s67 = _mm256_hadd_epi32(p[6], p[7]);
  const __m256i s0123 = _mm256_hadd_epi32(s01, s23);  // [0 1 2 3 | 0 1 2 3] per 128-bit half
  const __m256i s4567 = _mm256_hadd_epi32(s45, s67);
  const __m256i low = _mm256_permute2x128_si256(s0123, s4567, 0x20);
  const __m256i high = _mm256_permute2x128_si256(s0123, s4567, 0x31);
  return _mm256_add_epi32(low, high);
}

// The f16 at byte `at` (0: d, 2: Q4_1's m) of 8 W rows' block starting at `w`, as fp32 lanes.
PAGEDKV_AVX2 inline __m256 Halves8(const unsigned char* w, int64_t row_bytes, int64_t at) {
  alignas(16) uint16_t h[8];
  for (int c = 0; c < 8; ++c) h[c] = QuantU16At(w + c * row_bytes + at);
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
}

}  // namespace pagedkv::cpu::int8_kernels::x86

#endif  // PAGEDKV_KERNELS_CPU_INT8_X86_INL_H_
