// Copyright 2026 The pagedkv Authors.
//
// KV cache group names, checks and hash folding (include/pagedkv/cache/kv_cache_groups.h).
#include "pagedkv/cache/kv_cache_groups.h"

#include <array>
#include <cstddef>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pagedkv {

std::string_view KvCacheGroupKindName(KvCacheGroupKind kind) {
  switch (kind) {
    case KvCacheGroupKind::kFullAttention:
      return "full_attention";
    case KvCacheGroupKind::kSlidingWindow:
      return "sliding_window";
  }
  return "unknown";
}

absl::Status CheckKvCacheGroups(std::span<const KvCacheGroupSpec> groups) {
  if (groups.empty()) return absl::OkStatus();
  bool has_full = false;
  for (size_t g = 0; g < groups.size(); ++g) {
    const KvCacheGroupSpec& s = groups[g];
    if (s.num_layers <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("KV cache group ", g, ": num_layers must be > 0, got ", s.num_layers));
    }
    if (s.kind == KvCacheGroupKind::kSlidingWindow && s.sliding_window <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("KV cache group ", g, ": a sliding-window group needs sliding_window > 0, ",
                       "got ", s.sliding_window));
    }
    has_full |= s.kind == KvCacheGroupKind::kFullAttention;
  }
  if (!has_full) {
    return absl::InvalidArgumentError(
        "the KV cache groups have no full-attention group; a model of only sliding-window "
        "layers is not supported");
  }
  return absl::OkStatus();
}

BlockHash FoldGroupHash(const BlockHash& hash, int32_t g) {
  if (g == 0) return hash;
  static constexpr char kTag[] = "pagedkv-group-v1";
  std::array<std::byte, 16 + sizeof(kTag) - 1 + 4> bytes;
  std::byte* p = bytes.data();
  for (int k = 0; k < 8; ++k) *p++ = static_cast<std::byte>((hash.low >> (8 * k)) & 0xff);
  for (int k = 0; k < 8; ++k) *p++ = static_cast<std::byte>((hash.high >> (8 * k)) & 0xff);
  std::memcpy(p, kTag, sizeof(kTag) - 1);
  p += sizeof(kTag) - 1;
  const auto ug = static_cast<uint32_t>(g);
  for (int k = 0; k < 4; ++k) *p++ = static_cast<std::byte>((ug >> (8 * k)) & 0xff);
  return Xxh3Hash128(bytes);
}

}  // namespace pagedkv
