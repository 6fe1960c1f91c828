// Copyright 2026 The pagedkv Authors.
//
// Mutable access to a HybridKvCacheManager's BlockPool, for tests only, that shape the cache (e.g.
// Uncache chosen blocks to make holes). Not part of the public API: production code listens to
// the pool through HybridKvCacheManager::AddEventListener, and no file outside cache/ may name
// this (the CTest layering_front_doors). Never take or pin a block that is in a request's table.
//
// Example:
//   BlockPool& pool = pagedkv::HybridKvCacheManagerInternal::MutablePool(*manager);
//   PAGEDKV_RETURN_IF_ERROR(pool.Uncache(block));
#ifndef PAGEDKV_CACHE_HYBRID_KV_CACHE_MANAGER_INTERNAL_H_
#define PAGEDKV_CACHE_HYBRID_KV_CACHE_MANAGER_INTERNAL_H_

#include "pagedkv/block_pool.h"
#include "pagedkv/hybrid_kv_cache_manager.h"

namespace pagedkv {

class HybridKvCacheManagerInternal {
 public:
  static BlockPool& MutablePool(HybridKvCacheManager& manager) { return *manager.pool_; }
};

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_HYBRID_KV_CACHE_MANAGER_INTERNAL_H_
