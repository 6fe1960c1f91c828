// Copyright 2026 The pagedkv Authors.
#include "cache/tiers/tier_checksum.h"

#include <cstddef>
#include <cstdint>
#include <span>

#define PAGEDKV_TIER_CHECKSUM_NAME TierValueChecksumPortable
#include "cache/tiers/tier_checksum_kernel.inc"
#undef PAGEDKV_TIER_CHECKSUM_NAME

namespace pagedkv {

#if !defined(PAGEDKV_TIER_CHECKSUM_AVX2)
namespace internal {
uint64_t TierValueChecksumAvx2(std::span<const std::byte> head, std::span<const TokenId> tokens,
                               std::span<const std::byte> payload) {
  return TierValueChecksumPortable(head, tokens, payload);
}
uint64_t TierValueChecksumAvx512(std::span<const std::byte> head, std::span<const TokenId> tokens,
                                 std::span<const std::byte> payload) {
  return TierValueChecksumPortable(head, tokens, payload);
}
}  // namespace internal
#endif

uint64_t TierValueChecksum(std::span<const std::byte> head, std::span<const TokenId> tokens,
                           std::span<const std::byte> payload) {
#if defined(PAGEDKV_TIER_CHECKSUM_AVX2)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx512) return internal::TierValueChecksumAvx512(head, tokens, payload);
  if (avx2) return internal::TierValueChecksumAvx2(head, tokens, payload);
#endif
  return internal::TierValueChecksumPortable(head, tokens, payload);
}

}  // namespace pagedkv
