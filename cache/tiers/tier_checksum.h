// Copyright 2026 The pagedkv Authors.
//
// The checksum of a tier value (tier_value_codec.h): XXH3-64 over the token ids and the payload,
// as one stream, seeded with XXH3-64 of the header's first 40 bytes. On x86-64 CPUs it runs
// XXH3's widest kernel the CPU has, chosen once at run time: AVX-512 (tier_checksum_avx512.cc),
// else AVX2 (tier_checksum_avx2.cc, about 1.7x the SSE2 kernel's speed on a multi-MiB payload); the
// result is the same on every path, so values move between machines.
//
// Example:
//   const uint64_t sum = TierValueChecksum(header_bytes, tokens, payload);
#ifndef PAGEDKV_CACHE_TIERS_TIER_CHECKSUM_H_
#define PAGEDKV_CACHE_TIERS_TIER_CHECKSUM_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "pagedkv/types.h"

namespace pagedkv {

uint64_t TierValueChecksum(std::span<const std::byte> head, std::span<const TokenId> tokens,
                           std::span<const std::byte> payload);

namespace internal {
// The kernels, for the dispatcher and for a test that they agree. The AVX2 and AVX-512 ones
// REQUIRE a CPU with AVX2 / AVX-512F (x86-64 builds; elsewhere they are the portable one).
uint64_t TierValueChecksumPortable(std::span<const std::byte> head, std::span<const TokenId> tokens,
                                   std::span<const std::byte> payload);
uint64_t TierValueChecksumAvx2(std::span<const std::byte> head, std::span<const TokenId> tokens,
                               std::span<const std::byte> payload);
uint64_t TierValueChecksumAvx512(std::span<const std::byte> head, std::span<const TokenId> tokens,
                                 std::span<const std::byte> payload);
}  // namespace internal

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_TIERS_TIER_CHECKSUM_H_
