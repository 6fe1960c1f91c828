// Copyright 2026 The pagedkv Authors.
//
// XXH3's AVX-512 kernel for tier-value checksums (tier_checksum.h); this file alone is compiled
// with -mavx512f (cache/CMakeLists.txt), and runs only where the CPU reports AVX-512F.
#include <cstddef>
#include <cstdint>
#include <span>

#include "cache/tiers/tier_checksum.h"

// GCC 12 reports an uninitialized vector inside its own AVX-512 intrinsics as XXH3 uses them
// (shuffles, and the set1 / undefined vectors of its seeded secret): false positives in
// avx512fintrin.h, not in XXH3 or here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#define PAGEDKV_TIER_CHECKSUM_NAME TierValueChecksumAvx512
#include "cache/tiers/tier_checksum_kernel.inc"
