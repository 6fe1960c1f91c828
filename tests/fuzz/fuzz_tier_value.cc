// Copyright 2026 The pagedkv Authors.
//
// Fuzz target: decoding tier values (what the disk and Redis tiers read back from files and
// servers they do not control). Byte 0 picks the mode:
//   even: the rest is a value read as is; decoding must not crash, and a value that decodes must
//         be exactly what encoding its tokens and payload gives;
//   odd:  the rest seeds a valid value (tokens, payload) and the position of one flipped bit;
//         decoding the damaged value must fail (the header checks or the checksum catch it).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "cache/tiers/tier_value_codec.h"

namespace {

constexpr int32_t kBlockSize = 4;
constexpr int64_t kPayloadBytes = 96;

pagedkv::TierValueFormat Format() {
  return {.dtype = 2,
          .layout = 1,
          .block_size = kBlockSize,
          .num_layers = 3,
          .value_bytes = kPayloadBytes,
          .layout_digest = 0x5EED};
}

void DecodeAsIs(std::span<const std::byte> bytes) {
  std::vector<pagedkv::TokenId> tokens(kBlockSize, 0);
  if (bytes.size() >= pagedkv::kTierValueHeaderBytes + sizeof(tokens[0]) * kBlockSize) {
    std::memcpy(tokens.data(), bytes.data() + pagedkv::kTierValueHeaderBytes,
                sizeof(tokens[0]) * kBlockSize);
  }
  auto payload = pagedkv::DecodeTierValue(Format(), tokens, bytes);
  if (!payload.ok()) return;
  const std::string again = pagedkv::EncodeTierValue(Format(), tokens, *payload);
  if (again.size() != bytes.size() || std::memcmp(again.data(), bytes.data(), bytes.size()) != 0) {
    std::abort();
  }
}

void DecodeFlipped(std::span<const std::byte> seed) {
  std::vector<pagedkv::TokenId> tokens(kBlockSize);
  std::vector<std::byte> payload(kPayloadBytes);
  for (size_t i = 0; i < payload.size(); ++i)
    payload[i] = seed.empty() ? std::byte{0} : seed[i % seed.size()];
  for (int32_t t = 0; t < kBlockSize; ++t) tokens[t] = static_cast<pagedkv::TokenId>(payload[t]);
  std::string value = pagedkv::EncodeTierValue(Format(), tokens, payload);
  const uint32_t bit =
      seed.size() >= 2 ? (static_cast<uint32_t>(seed[0]) << 8 | static_cast<uint32_t>(seed[1])) : 0;
  value[(bit / 8) % value.size()] ^= static_cast<char>(1 << (bit % 8));
  if (pagedkv::DecodeTierValue(Format(), tokens, std::as_bytes(std::span<const char>(value)))
          .ok()) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto rest = std::as_bytes(std::span<const uint8_t>(data + 1, size - 1));
  if (data[0] % 2 == 0) {
    DecodeAsIs(rest);
  } else {
    DecodeFlipped(rest);
  }
  return 0;
}
