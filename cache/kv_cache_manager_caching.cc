// Copyright 2026 The pagedkv Authors.
//
// KvCacheManager's indexing (include/pagedkv/cache/kv_cache_manager.h): the blocks of a request
// that become full are offered to the pool's prefix index, per group. A full-attention group keeps
// a verified chain (each block linked to the canonical block before it); a sliding-window group
// indexes its blocks unlinked, since its chain has holes by design.
#include <algorithm>

#include "cache/debug_check.h"
#include "pagedkv/cache/kv_cache_manager.h"

namespace pagedkv {

void KvCacheManager::CacheFullBlocks(const CacheRequest& request, RequestState& state) {
  const int64_t full_now =
      std::min(state.num_tokens / options_.block_size, request.num_full_blocks());
  for (int32_t g = 0; g < num_groups(); ++g) {
    GroupState& group = state.groups[g];
    const int64_t full =
        std::min(full_now, std::max(group.num_cached_blocks, state.max_cached_blocks));
    for (int64_t i = group.num_cached_blocks; i < full; ++i) {
      if (!linked_chains()) {
        CacheUnlinked(request, group, g, i);
      } else if (!group.chain_broken) {
        CacheVerified(request, group, g, i);
      }
    }
    group.num_cached_blocks = std::max(group.num_cached_blocks, full);
  }
}

void KvCacheManager::CacheUnlinked(const CacheRequest& request, const GroupState& state, int32_t g,
                                   int64_t i) {
  const BlockId block = state.table[i];
  if (block == kNullBlock) return;  // released: outside the window
  // Index the block unless its hash is already present (Insert's false); then it is recorded as
  // a duplicate of the holder, which it replaces if the holder is evicted first.
  const BlockInsert insert{.block = block,
                           .hash = GroupBlockHash(request, g, i),
                           .parent_hash = GroupParentHash(request, g, i),
                           .tokens = request.BlockTokens(i),
                           .parent_block = kNullBlock,
                           .extra_digest = request.BlockExtraDigest(i),
                           .priority = request.BlockPriorityOf(i)};
  NoteBlockGroup(block, g);  // before Insert: its stored event reads it
  const absl::StatusOr<bool> indexed = pool_->Insert(insert);
  DebugCheckOk(indexed.status(), "the block is in this request's table and was never cached");
  if (indexed.ok() && !*indexed) {
    DebugCheckOk(pool_->AddDuplicate(insert).status(), "the block is used and uncached");
  }
}

void KvCacheManager::RelinkToOwnBlock(const CacheRequest& request, int32_t g, int64_t i,
                                      GroupState& state) const {
  // The verified block before block i left the cache; if this request's own copy of it was
  // promoted into its place (a duplicate), the chain continues from there.
  const BlockId own = state.table[i - 1];
  if (pool_->FindCached(GroupBlockHash(request, g, i - 1)) != own) return;
  state.last_canonical = own;
  state.last_canonical_generation = pool_->Generation(own);
}

void KvCacheManager::CacheVerified(const CacheRequest& request, GroupState& state, int32_t g,
                                   int64_t i) {
  const BlockId block = state.table[i];
  const BlockHash hash = GroupBlockHash(request, g, i);
  BlockId prev = kNullBlock;
  if (i > 0) {
    if (state.last_canonical == kNullBlock || !pool_->IsCached(state.last_canonical) ||
        pool_->Generation(state.last_canonical) != state.last_canonical_generation) {
      RelinkToOwnBlock(request, g, i, state);
    }
    prev = state.last_canonical;
    if (prev == kNullBlock || !pool_->IsCached(prev) ||
        pool_->Generation(prev) != state.last_canonical_generation) {
      // The verified block before this one left the cache: this block's context cannot be
      // linked any more, so neither it nor its successors are offered to the index.
      state.chain_broken = true;
      return;
    }
  }
  BlockId canonical = block;
  const BlockId holder = pool_->FindCached(hash);
  if (holder != kNullBlock && holder == prev) {
    // The block's hash collides with its own parent's: it cannot be indexed without dropping
    // the parent, so the chain ends here.
    state.chain_broken = true;
    return;
  }
  NoteBlockGroup(block, g);  // before Insert / AddDuplicate: their events read it
  if (holder != kNullBlock) {
    if (Verify(holder, request, g, i, prev)) {
      // Same content already cached (e.g. computed concurrently): this block is a duplicate that
      // keeps the hash reachable should the holder be evicted while this request runs.
      canonical = holder;
      DebugCheckOk(pool_
                       ->AddDuplicate({.block = block,
                                       .hash = hash,
                                       .parent_hash = GroupParentHash(request, g, i),
                                       .tokens = request.BlockTokens(i),
                                       .extra_digest = request.BlockExtraDigest(i)})
                       .status(),
                   "the block is used and uncached");
    } else {
      // A different block (hash collision, or a block whose parent changed) holds the hash:
      // replace it with this request's verified block.
      ++stats_.replaced_blocks;
      DebugCheckOk(pool_->Uncache(holder), "FindCached just returned the holder");
    }
  }
  if (canonical == block) {
    // The hash is free now (no holder, or the holder was uncached) and prev is cached under
    // parent_hash (checked above): the block is indexed.
    DebugCheckOk(pool_->Insert({.block = block,
                                .hash = hash,
                                .parent_hash = GroupParentHash(request, g, i),
                                .tokens = request.BlockTokens(i),
                                .parent_block = prev,
                                .extra_digest = request.BlockExtraDigest(i),
                                .priority = request.BlockPriorityOf(i)}),
                 "the block is in use, uncached, its hash free and its parent cached");
  }
  state.last_canonical = canonical;
  state.last_canonical_generation = pool_->Generation(canonical);
}

}  // namespace pagedkv
