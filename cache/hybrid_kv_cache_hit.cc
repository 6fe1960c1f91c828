// Copyright 2026 The pagedkv Authors.
//
// HybridKvCacheManager's prefix lookup (include/pagedkv/hybrid_kv_cache_manager.h): each group's
// longest hit, and the coordinator loop that cuts the hit back until every group agrees, as
// vLLM's HybridKVCacheCoordinator.find_longest_cache_hit does.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <vector>

#include "pagedkv/hybrid_kv_cache_manager.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {

BlockHash HybridKvCacheManager::FoldGroupHash(const BlockHash& hash, int32_t g) {
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

bool HybridKvCacheManager::Verify(BlockId block, const CacheRequest& request, int32_t g,
                                  int64_t i) const {
  // Inserted with no parent block, so MatchesChain compares the stored parent hash, tokens and
  // extra keys (no chain link: a sliding-window group's chain has holes).
  return pool_->CachedHash(block) == FoldGroupHash(request.block_hashes()[i], g) &&
         pool_->MatchesChain(block, FoldGroupHash(request.ParentHashOf(i), g),
                             request.BlockTokens(i), request.BlockExtraDigest(i), kNullBlock);
}

std::vector<BlockId> HybridKvCacheManager::FullAttentionHit(const CacheRequest& request, int32_t g,
                                                            int64_t max_blocks) const {
  std::vector<BlockId> hit;
  for (int64_t i = 0; i < max_blocks; ++i) {
    const BlockId b = pool_->FindCached(FoldGroupHash(request.block_hashes()[i], g));
    if (b == kNullBlock || !Verify(b, request, g, i)) break;
    hit.push_back(b);
  }
  return hit;
}

std::vector<BlockId> HybridKvCacheManager::SlidingWindowHit(const CacheRequest& request, int32_t g,
                                                            int64_t max_blocks) const {
  const int64_t bs = options_.block_size;
  // A token at the hit point attends to window - 1 earlier tokens: these blocks must be cached.
  const int64_t need = (options_.groups[g].sliding_window - 1 + bs - 1) / bs;
  std::vector<BlockId> hit(max_blocks, kNullBlock);
  if (need == 0) return hit;
  int64_t run = 0;  // cached blocks in a row ending at block i + run - 1
  for (int64_t i = max_blocks - 1; i >= 0; --i) {
    const BlockId b = pool_->FindCached(FoldGroupHash(request.block_hashes()[i], g));
    if (b == kNullBlock || !Verify(b, request, g, i)) {
      run = 0;
      continue;
    }
    hit[i] = b;
    if (++run >= need) {
      hit.resize(i + run);
      std::fill(hit.begin(), hit.begin() + i, kNullBlock);
      return hit;
    }
  }
  // No full window anywhere: only a run starting at block 0 (shorter than the window) is a hit.
  hit.resize(run);
  return hit;
}

absl::StatusOr<HybridComputedBlocks> HybridKvCacheManager::GetComputedBlocks(
    const CacheRequest& request) {
  PAGEDKV_RETURN_IF_ERROR(CheckRequest(request));
  ++stats_.lookups;
  stats_.queried_tokens += request.num_tokens();
  stats_.queried_blocks += request.num_full_blocks();
  HybridComputedBlocks result;
  result.blocks.resize(options_.groups.size());
  if (!options_.enable_prefix_caching || request.num_tokens() == 0) return result;
  // The last token is always recomputed, so the step produces logits.
  int64_t hit = std::min<int64_t>((request.num_tokens() - 1) / options_.block_size,
                                  request.num_full_blocks());
  for (int32_t g = 0; g < num_groups(); ++g) {
    if (options_.groups[g].kind != KvCacheGroupKind::kFullAttention) continue;
    result.blocks[g] = FullAttentionHit(request, g, hit);
    hit = static_cast<int64_t>(result.blocks[g].size());
  }
  // Each sliding-window group may cut the hit back; then every group is asked again, until no
  // group cuts (the hit only shrinks, so this ends).
  for (bool cut = true; cut;) {
    cut = false;
    for (int32_t g = 0; g < num_groups(); ++g) {
      if (options_.groups[g].kind != KvCacheGroupKind::kSlidingWindow) continue;
      result.blocks[g] = SlidingWindowHit(request, g, hit);
      if (static_cast<int64_t>(result.blocks[g].size()) < hit) {
        hit = static_cast<int64_t>(result.blocks[g].size());
        cut = true;
      }
    }
  }
  for (int32_t g = 0; g < num_groups(); ++g) {
    if (options_.groups[g].kind == KvCacheGroupKind::kFullAttention) result.blocks[g].resize(hit);
  }
  result.num_computed_tokens = hit * options_.block_size;
  stats_.hit_tokens += result.num_computed_tokens;
  stats_.hit_blocks += hit;
  return result;
}

}  // namespace pagedkv
