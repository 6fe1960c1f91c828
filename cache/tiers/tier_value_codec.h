// Copyright 2026 The pagedkv Authors.
//
// The value format of the disk and Redis tiers (exported: pagedkv::tier_redis calls it from its
// own shared library): a 64-byte header, the block's token ids (int32 each), then
// the payload (the serialised KV). Little-endian, as written by the host (pagedkv builds only on
// little-endian hosts). Header fields, by byte offset:
//    0 u32 magic "PKVB"          4 u16 version (2)      6 u8 dtype        7 u8 layout
//    8 u32 block size           12 u32 layer count     16 u32 token count 20 u32 reserved (0)
//   24 u64 layout digest        32 u64 payload bytes   40 u64 checksum    48 16 bytes reserved (0)
// The checksum is XXH3-64 of the tokens and the payload, seeded with XXH3-64 of bytes [0, 40)
// (tier_checksum.h). Version 2 padded the header to 64 bytes so that the checksummed bytes begin
// on a cache line of a page-aligned read buffer: XXH3's vector loads are then aligned (disk-tier
// loads of 2 MiB went from 0.70x to 0.75x of a plain read). Version 1 (48 bytes, one XXH3 stream
// over the header's first 40 bytes, the tokens and the payload) is not read.
//
// Example:
//   std::string v = EncodeTierValue(format, tokens, payload);
//   absl::StatusOr<std::span<const std::byte>> kv = DecodeTierValue(format, tokens, bytes);
#ifndef PAGEDKV_CACHE_TIERS_TIER_VALUE_CODEC_H_
#define PAGEDKV_CACHE_TIERS_TIER_VALUE_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "pagedkv/export.h"
#include "pagedkv/tiers/kv_tier.h"
#include "pagedkv/types.h"

namespace pagedkv {

inline constexpr size_t kTierValueHeaderBytes = 64;
inline constexpr uint16_t kTierValueVersion = 2;

// The value for `tokens` and `payload` in `format`.
PAGEDKV_EXPORT std::string EncodeTierValue(const TierValueFormat& format,
                                           std::span<const TokenId> tokens,
                                           std::span<const std::byte> payload);
// The same value written into `*out` (resized; a buffer of the right size is reused as is).
PAGEDKV_EXPORT void EncodeTierValueInto(const TierValueFormat& format,
                                        std::span<const TokenId> tokens,
                                        std::span<const std::byte> payload, std::string* out);

// The payload of `bytes` (a view into it), when the header matches `format`, the tokens equal
// `tokens`, the sizes add up and the checksum is right. DataLoss naming the first mismatch
// otherwise.
PAGEDKV_EXPORT absl::StatusOr<std::span<const std::byte>> DecodeTierValue(
    const TierValueFormat& format, std::span<const TokenId> tokens,
    std::span<const std::byte> bytes);

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_TIERS_TIER_VALUE_CODEC_H_
