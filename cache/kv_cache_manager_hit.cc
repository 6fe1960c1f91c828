// Copyright 2026 The pagedkv Authors.
//
// KvCacheManager's prefix lookup (include/pagedkv/cache/kv_cache_manager.h): one group's verified
// chain walk, and for several groups the coordinator that cuts the hit back until every group
// agrees, as vLLM's HybridKVCacheCoordinator.find_longest_cache_hit does. ProbeCachedBlocks
// applies the same rules to the hash index alone.
#include <algorithm>
#include <span>
#include <vector>

#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

// At least one token is left to compute, and only full blocks hit.
int64_t MaxHitBlocks(const CacheRequest& request, int32_t block_size) {
  if (request.num_tokens() == 0) return 0;
  return std::min<int64_t>((request.num_tokens() - 1) / block_size, request.num_full_blocks());
}

// Blocks before the hit point a sliding-window group must hold: cdiv(window - 1, block_size).
int64_t WindowBlocks(const KvCacheGroupSpec& spec, int64_t bs) {
  return (spec.sliding_window - 1 + bs - 1) / bs;
}

}  // namespace

int64_t KvCacheManager::ProbeRun(std::span<const BlockHash> hashes, int64_t max_blocks,
                                 BlockId* out) const {
  // Group 0 (the only one of a plain manager): the request's hashes as they are.
  int64_t found = 0;
  for (; found < max_blocks; ++found) {
    const BlockId block = pool_->FindCached(hashes[found]);
    if (block == kNullBlock) break;
    out[found] = block;
  }
  return found;
}

int64_t KvCacheManager::ProbeGroupRun(const CacheRequest& request, int32_t g, int64_t max_blocks,
                                      BlockId* out) const {
  int64_t found = 0;
  for (; found < max_blocks; ++found) {
    const BlockId block = pool_->FindCached(GroupBlockHash(request, g, found));
    if (block == kNullBlock) break;
    out[found] = block;
  }
  return found;
}

absl::StatusOr<ComputedBlocks> KvCacheManager::GetComputedBlocks(const CacheRequest& request) {
  PAGEDKV_RETURN_IF_ERROR(CheckRequest(request));
  ComputedBlocks result;
  ++stats_.lookups;
  stats_.queried_tokens += request.num_tokens();
  stats_.queried_blocks += request.num_full_blocks();
  if (num_groups() > 1) result.other_groups.resize(num_groups() - 1);
  if (!options_.enable_prefix_caching || request.num_tokens() == 0) return result;
  const int64_t max_blocks = MaxHitBlocks(request, options_.block_size);
  if (num_groups() > 1) {
    CoordinatedHit(request, max_blocks, result);
  } else {
    result.blocks = FullAttentionHit(request, 0, max_blocks);
  }
  result.num_computed_tokens = static_cast<int64_t>(result.blocks.size()) * options_.block_size;
  stats_.hit_blocks += static_cast<int64_t>(result.blocks.size());
  stats_.hit_tokens += result.num_computed_tokens;
  return result;
}

std::vector<BlockId> KvCacheManager::FullAttentionHit(const CacheRequest& request, int32_t g,
                                                      int64_t max_blocks) {
  // Two passes: probe every hash first, then verify, so the loads of independent blocks overlap.
  std::vector<BlockId> blocks(max_blocks);
  const int64_t found = g == 0 ? ProbeRun(request.block_hashes(), max_blocks, blocks.data())
                               : ProbeGroupRun(request, g, max_blocks, blocks.data());
  blocks.resize(found);
  if (!options_.verify_tokens) return blocks;
  // One group (linked chains): the pool's check inline, with the request's own parent hashes.
  const bool linked = linked_chains();
  BlockId prev = kNullBlock;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const auto k = static_cast<int64_t>(i);
    const bool verified =
        linked ? pool_->MatchesChain(blocks[i], request.ParentHashOf(k), request.BlockTokens(k),
                                     request.BlockExtraDigest(k), prev)
               : Verify(blocks[i], request, g, k, prev);
    if (!verified) {
      ++stats_.verification_failures;
      blocks.resize(i);
      break;
    }
    prev = blocks[i];
  }
  return blocks;
}

std::vector<BlockId> KvCacheManager::SlidingWindowHit(const CacheRequest& request, int32_t g,
                                                      int64_t max_blocks) const {
  const int64_t need = WindowBlocks(groups_[g], options_.block_size);
  std::vector<BlockId> hit(max_blocks, kNullBlock);
  if (need == 0) return hit;
  int64_t run = 0;  // cached blocks in a row ending at block i + run - 1
  for (int64_t i = max_blocks - 1; i >= 0; --i) {
    const BlockId b = pool_->FindCached(GroupBlockHash(request, g, i));
    if (b == kNullBlock || (options_.verify_tokens && !Verify(b, request, g, i, kNullBlock))) {
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

int64_t KvCacheManager::CoordinatedHit(const CacheRequest& request, int64_t max_blocks,
                                       ComputedBlocks& result) {
  std::vector<std::vector<BlockId>> lists(groups_.size());
  int64_t hit = max_blocks;
  for (int32_t g = 0; g < num_groups(); ++g) {
    if (IsSlidingWindow(g)) continue;
    lists[g] = FullAttentionHit(request, g, hit);
    hit = static_cast<int64_t>(lists[g].size());
  }
  // Each sliding-window group may cut the hit back; then every group is asked again, until no
  // group cuts (the hit only shrinks, so this ends).
  for (bool cut = true; cut;) {
    cut = false;
    for (int32_t g = 0; g < num_groups(); ++g) {
      if (!IsSlidingWindow(g)) continue;
      lists[g] = SlidingWindowHit(request, g, hit);
      if (static_cast<int64_t>(lists[g].size()) < hit) {
        hit = static_cast<int64_t>(lists[g].size());
        cut = true;
      }
    }
  }
  for (std::vector<BlockId>& list : lists) list.resize(hit);
  result.blocks = std::move(lists[0]);
  for (int32_t g = 1; g < num_groups(); ++g) result.other_groups[g - 1] = std::move(lists[g]);
  return hit;
}

int64_t KvCacheManager::SlidingWindowProbe(const CacheRequest& request, int32_t g,
                                           int64_t max_blocks) const {
  const int64_t need = WindowBlocks(groups_[g], options_.block_size);
  if (need == 0) return max_blocks;
  int64_t run = 0;
  for (int64_t i = max_blocks - 1; i >= 0; --i) {
    if (pool_->FindCached(GroupBlockHash(request, g, i)) == kNullBlock) {
      run = 0;
      continue;
    }
    if (++run >= need) return i + run;
  }
  return run;
}

int64_t KvCacheManager::ProbeCachedBlocks(const CacheRequest& request) const {
  int64_t hit = MaxHitBlocks(request, options_.block_size);
  for (int32_t g = 0; g < num_groups(); ++g) {
    if (IsSlidingWindow(g)) continue;
    int64_t n = 0;
    while (n < hit && pool_->FindCached(GroupBlockHash(request, g, n)) != kNullBlock) ++n;
    hit = n;
  }
  for (bool cut = true; cut && num_groups() > 1;) {
    cut = false;
    for (int32_t g = 0; g < num_groups(); ++g) {
      if (!IsSlidingWindow(g)) continue;
      const int64_t n = SlidingWindowProbe(request, g, hit);
      if (n < hit) {
        hit = n;
        cut = true;
      }
    }
  }
  return hit;
}

}  // namespace pagedkv
