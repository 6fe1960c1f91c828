// Copyright 2026 The pagedkv Authors.
//
// Block hashing: byte layouts documented in include/pagedkv/cache/block_hash.h.
#include "pagedkv/cache/block_hash.h"

#define XXH_INLINE_ALL  // header-only xxHash: no library to link or install
#include <xxhash.h>

#include <bit>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"

namespace pagedkv {
namespace {

static_assert(std::endian::native == std::endian::little ||
              std::endian::native == std::endian::big);

// Writes `v` little-endian at `p`; returns the next write position.
std::byte* PutU64(std::byte* p, uint64_t v) {
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(p, &v, sizeof(v));
  } else {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
  }
  return p + 8;
}

std::byte* PutTokens(std::byte* p, std::span<const TokenId> tokens) {
  if constexpr (std::endian::native == std::endian::little) {
    if (!tokens.empty()) std::memcpy(p, tokens.data(), tokens.size_bytes());
    return p + tokens.size_bytes();
  } else {
    for (TokenId t : tokens) {
      const auto u = static_cast<uint32_t>(t);
      for (int i = 0; i < 4; ++i) *p++ = static_cast<std::byte>(u >> (8 * i));
    }
    return p;
  }
}

constexpr char kRootTag[] = "pagedkv-root-v1";  // 15 bytes, no terminator hashed

}  // namespace

std::string BlockHash::ToString() const { return absl::StrFormat("%016x%016x", high, low); }

BlockHash Xxh3Hash128(std::span<const std::byte> bytes) {
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return BlockHash{h.low64, h.high64};
}

BlockHash Xxh3BlockHasher::Hash(std::span<const std::byte> bytes) const {
  return Xxh3Hash128(bytes);
}

const BlockHasher& DefaultBlockHasher() {
  static const Xxh3BlockHasher* const hasher = new Xxh3BlockHasher();
  return *hasher;
}

BlockHash RootHash(std::string_view cache_salt, std::string_view model_fingerprint) {
  std::vector<std::byte> buf(sizeof(kRootTag) - 1 + 8 + model_fingerprint.size() + 8 +
                             cache_salt.size());
  std::byte* p = buf.data();
  std::memcpy(p, kRootTag, sizeof(kRootTag) - 1);
  p += sizeof(kRootTag) - 1;
  p = PutU64(p, model_fingerprint.size());
  if (!model_fingerprint.empty())
    std::memcpy(p, model_fingerprint.data(), model_fingerprint.size());
  p += model_fingerprint.size();
  p = PutU64(p, cache_salt.size());
  if (!cache_salt.empty()) std::memcpy(p, cache_salt.data(), cache_salt.size());
  return Xxh3Hash128(buf);
}

BlockHash ExtraKeysDigest(const BlockExtraKeys& extra) {
  if (extra.multimodal.empty()) return BlockHash{extra.adapter_id, 0};
  constexpr char kTag[] = "pagedkv-extra-v1";
  std::vector<std::byte> buf(sizeof(kTag) - 1 + 8 + 16 * extra.multimodal.size());
  std::memcpy(buf.data(), kTag, sizeof(kTag) - 1);
  std::byte* p = PutU64(buf.data() + sizeof(kTag) - 1, extra.adapter_id);
  for (const BlockHash& mm : extra.multimodal) {
    p = PutU64(p, mm.low);
    p = PutU64(p, mm.high);
  }
  BlockHash digest = Xxh3Hash128(buf);
  digest.high |= uint64_t{1} << 63;
  return digest;
}

BlockHash HashBlock(const BlockHasher& hasher, const BlockHash& parent,
                    std::span<const TokenId> tokens, const BlockExtraKeys& extra) {
  const size_t size =
      16 + tokens.size_bytes() + (extra.adapter_id != 0 ? 8 : 0) + 16 * extra.multimodal.size();
  constexpr size_t kStackBytes = 1024;
  alignas(16) std::byte stack[kStackBytes];
  std::vector<std::byte> heap;
  std::byte* buf = stack;
  if (size > kStackBytes) {
    heap.resize(size);
    buf = heap.data();
  }
  std::byte* p = PutU64(buf, parent.low);
  p = PutU64(p, parent.high);
  p = PutTokens(p, tokens);
  if (extra.adapter_id != 0) p = PutU64(p, extra.adapter_id);
  for (const BlockHash& mm : extra.multimodal) {
    p = PutU64(p, mm.low);
    p = PutU64(p, mm.high);
  }
  return hasher.Hash(std::span<const std::byte>(buf, size));
}

}  // namespace pagedkv
