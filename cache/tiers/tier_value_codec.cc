// Copyright 2026 The pagedkv Authors.
#include "cache/tiers/tier_value_codec.h"

#include <bit>
#include <cstring>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cache/tiers/tier_checksum.h"

namespace pagedkv {
namespace {

static_assert(std::endian::native == std::endian::little, "tier values are little-endian");

constexpr uint32_t kMagic = 0x42564B50;  // "PKVB"

struct Header {
  uint32_t magic;
  uint16_t version;
  uint8_t dtype;
  uint8_t layout;
  uint32_t block_size;
  uint32_t num_layers;
  uint32_t num_tokens;
  uint32_t reserved;
  uint64_t layout_digest;
  uint64_t payload_bytes;
  uint64_t checksum;
  uint64_t reserved_tail[2];  // 0: the tokens start 64 bytes in
};
static_assert(sizeof(Header) == kTierValueHeaderBytes);

absl::Status Mismatch(const char* what, uint64_t got, uint64_t want) {
  return absl::DataLossError(
      absl::StrCat("value header: ", what, " is ", got, ", expected ", want));
}

}  // namespace

std::string EncodeTierValue(const TierValueFormat& format, std::span<const TokenId> tokens,
                            std::span<const std::byte> payload) {
  std::string out;
  EncodeTierValueInto(format, tokens, payload, &out);
  return out;
}

void EncodeTierValueInto(const TierValueFormat& format, std::span<const TokenId> tokens,
                         std::span<const std::byte> payload, std::string* out) {
  Header h{.magic = kMagic,
           .version = kTierValueVersion,
           .dtype = format.dtype,
           .layout = format.layout,
           .block_size = static_cast<uint32_t>(format.block_size),
           .num_layers = static_cast<uint32_t>(format.num_layers),
           .num_tokens = static_cast<uint32_t>(tokens.size()),
           .reserved = 0,
           .layout_digest = format.layout_digest,
           .payload_bytes = payload.size(),
           .checksum = 0,
           .reserved_tail = {0, 0}};
  const auto head = std::as_bytes(std::span<const Header>(&h, 1)).first(offsetof(Header, checksum));
  h.checksum = TierValueChecksum(head, tokens, payload);
  out->resize(kTierValueHeaderBytes + tokens.size_bytes() + payload.size());
  std::memcpy(out->data(), &h, sizeof(h));
  std::memcpy(out->data() + sizeof(h), tokens.data(), tokens.size_bytes());
  if (!payload.empty()) {
    std::memcpy(out->data() + sizeof(h) + tokens.size_bytes(), payload.data(), payload.size());
  }
}

absl::StatusOr<std::span<const std::byte>> DecodeTierValue(const TierValueFormat& format,
                                                           std::span<const TokenId> tokens,
                                                           std::span<const std::byte> bytes) {
  if (bytes.size() < kTierValueHeaderBytes) {
    return absl::DataLossError(absl::StrCat("value of ", bytes.size(), " bytes has no header"));
  }
  Header h;
  std::memcpy(&h, bytes.data(), sizeof(h));
  if (h.magic != kMagic) return Mismatch("magic", h.magic, kMagic);
  if (h.version != kTierValueVersion) return Mismatch("version", h.version, kTierValueVersion);
  if (h.dtype != format.dtype) return Mismatch("dtype", h.dtype, format.dtype);
  if (h.layout != format.layout) return Mismatch("layout", h.layout, format.layout);
  if (h.block_size != static_cast<uint32_t>(format.block_size)) {
    return Mismatch("block size", h.block_size, static_cast<uint64_t>(format.block_size));
  }
  if (h.num_layers != static_cast<uint32_t>(format.num_layers)) {
    return Mismatch("layer count", h.num_layers, static_cast<uint64_t>(format.num_layers));
  }
  if (h.reserved_tail[0] != 0 || h.reserved_tail[1] != 0) {
    return absl::DataLossError("value header: its reserved bytes 48-63 are not 0");
  }
  if (h.layout_digest != format.layout_digest) {
    return Mismatch("layout digest", h.layout_digest, format.layout_digest);
  }
  if (h.num_tokens != tokens.size()) return Mismatch("token count", h.num_tokens, tokens.size());
  if (h.payload_bytes != static_cast<uint64_t>(format.value_bytes)) {
    return Mismatch("payload bytes", h.payload_bytes, static_cast<uint64_t>(format.value_bytes));
  }
  const size_t want = kTierValueHeaderBytes + tokens.size_bytes() + h.payload_bytes;
  if (bytes.size() != want) return Mismatch("value size", bytes.size(), want);
  const auto stored_tokens = bytes.subspan(kTierValueHeaderBytes, tokens.size_bytes());
  if (std::memcmp(stored_tokens.data(), tokens.data(), tokens.size_bytes()) != 0) {
    return absl::DataLossError("value holds other tokens than the block asked for");
  }
  const auto payload = bytes.subspan(kTierValueHeaderBytes + tokens.size_bytes());
  if (TierValueChecksum(bytes.first(offsetof(Header, checksum)), tokens, payload) != h.checksum) {
    return absl::DataLossError("value checksum mismatch (corrupted value)");
  }
  return payload;
}

}  // namespace pagedkv
