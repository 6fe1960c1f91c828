// Copyright 2026 The pagedkv Authors.
//
// XXH3's AVX2 kernel for tier-value checksums (tier_checksum.h); this file alone is compiled with
// -mavx2 (cache/CMakeLists.txt), and runs only where the CPU reports AVX2.
#include <cstddef>
#include <cstdint>
#include <span>

#include "cache/tiers/tier_checksum.h"

#define PAGEDKV_TIER_CHECKSUM_NAME TierValueChecksumAvx2
#include "cache/tiers/tier_checksum_kernel.inc"
