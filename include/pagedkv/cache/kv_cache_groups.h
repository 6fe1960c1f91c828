// Copyright 2026 The pagedkv Authors.
//
// KV cache groups: the layers of a model that share one attention kind and window, in the shape
// of vLLM's KVCacheGroupSpec. A KvCacheManager holds one block table per group for each request,
// all drawn from one BlockPool of one page size. A model whose layers all use full attention has
// one group (the common case); gpt-oss and Gemma 3 mix full-attention and sliding-window groups.
//
// Hashes: group 0 uses a request's chain hashes unchanged; group g > 0 folds g into each of them
// (FoldGroupHash), so two groups never share a block.
//
// Example (gpt-oss-20b: 12 full layers, 12 layers with a 128-token window):
//   std::vector<pagedkv::KvCacheGroupSpec> groups = {
//       {.kind = pagedkv::KvCacheGroupKind::kFullAttention, .num_layers = 12},
//       {.kind = pagedkv::KvCacheGroupKind::kSlidingWindow, .sliding_window = 128,
//        .num_layers = 12}};
//   PAGEDKV_RETURN_IF_ERROR(pagedkv::CheckKvCacheGroups(groups));
#ifndef PAGEDKV_CACHE_KV_CACHE_GROUPS_H_
#define PAGEDKV_CACHE_KV_CACHE_GROUPS_H_

#include <cstdint>
#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/cache/cache_request.h"
#include "pagedkv/export.h"

namespace pagedkv {

enum class KvCacheGroupKind : uint8_t {
  kFullAttention,  // every token attends to all earlier ones: all blocks are kept
  kSlidingWindow,  // a token attends to the previous `sliding_window` tokens (itself included)
};

// vLLM's KVCacheSpecKind value: "full_attention" or "sliding_window".
PAGEDKV_EXPORT std::string_view KvCacheGroupKindName(KvCacheGroupKind kind);

// One KV cache group: layers with the same attention kind and window.
struct PAGEDKV_EXPORT KvCacheGroupSpec {
  KvCacheGroupKind kind = KvCacheGroupKind::kFullAttention;
  int32_t sliding_window = 0;  // kSlidingWindow: window in tokens (> 0); ignored otherwise
  int32_t num_layers = 1;      // layers in the group (> 0); weights the KV memory reports
};

// OK for an empty list (one full-attention group) or groups with layers > 0, windows > 0 for
// sliding-window groups and at least one full-attention group; InvalidArgument naming the
// group otherwise (a model of only sliding-window layers is not supported).
PAGEDKV_EXPORT absl::Status CheckKvCacheGroups(std::span<const KvCacheGroupSpec> groups);

// Group g's hash of a group-0 hash: `hash` for g == 0, else XXH3-128(hash.low ‖ hash.high ‖
// "pagedkv-group-v1" ‖ u32 g), little-endian.
PAGEDKV_EXPORT BlockHash FoldGroupHash(const BlockHash& hash, int32_t g);

// Group g's hash of block i of `request` and of its parent (block i's hash and parent hash,
// folded for g > 0). REQUIRES: 0 <= i < request.num_full_blocks().
// Inline: the one-group lookup calls them per block.
inline BlockHash GroupBlockHash(const CacheRequest& request, int32_t g, int64_t i) {
  const BlockHash& hash = request.block_hashes()[i];
  return g == 0 ? hash : FoldGroupHash(hash, g);
}
inline BlockHash GroupParentHash(const CacheRequest& request, int32_t g, int64_t i) {
  return g == 0 ? request.ParentHashOf(i) : FoldGroupHash(request.ParentHashOf(i), g);
}

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_KV_CACHE_GROUPS_H_
