// Copyright 2026 The pagedkv Authors.
//
// Mutable access to a KvCacheManager's BlockPool. Who may use it: cache/ itself (TierChain::Create
// attaches the tier glue with it) and tests that shape the cache. Not part of the public API, and
// no production file outside cache/ may name it: what shares the pool attaches through the
// manager's front doors instead (KvCacheManager::AttachChunkIndex, TierChain::Create in
// cache/tiers/tier_chain.h, AddEventListener). The CTest layering_front_doors
// (tests/layering/check_front_doors.py) enforces that. A user of this pool must never take or
// unpin a block that is in a request's table, which the manager cannot check.
//
// Example (a test):
//   BlockPool& pool = pagedkv::KvCacheManagerInternal::MutablePool(*manager);
//   PAGEDKV_RETURN_IF_ERROR(pool.Uncache(block));
#ifndef PAGEDKV_CACHE_KV_CACHE_MANAGER_INTERNAL_H_
#define PAGEDKV_CACHE_KV_CACHE_MANAGER_INTERNAL_H_

#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/export.h"

namespace pagedkv {

class PAGEDKV_EXPORT KvCacheManagerInternal {
 public:
  static BlockPool& MutablePool(KvCacheManager& manager) { return *manager.pool_; }
  // Records that `block` holds group g's KV (before the pool's stored event for it), for a block
  // a tier loads into the pool.
  static void NoteBlockGroup(KvCacheManager& manager, BlockId block, int32_t g) {
    manager.NoteBlockGroup(block, g);
  }
};

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_KV_CACHE_MANAGER_INTERNAL_H_
