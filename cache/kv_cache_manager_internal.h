// Copyright 2026 The pagedkv Authors.
//
// Mutable access to a KvCacheManager's BlockPool, for indexes inside pagedkv that share its
// blocks and eviction order (the Engine's ChunkIndex, replay's simulated chunk reuse). Not part
// of the public API: such an index must never take a block that is in a request's table, which
// the manager cannot check.
//
// Example:
//   BlockPool& pool = pagedkv::KvCacheManagerInternal::MutablePool(*manager);
//   auto index = pagedkv::ChunkIndex::Create(&pool, {});
#ifndef PAGEDKV_CACHE_KV_CACHE_MANAGER_INTERNAL_H_
#define PAGEDKV_CACHE_KV_CACHE_MANAGER_INTERNAL_H_

#include "pagedkv/block_pool.h"
#include "pagedkv/export.h"
#include "pagedkv/kv_cache_manager.h"

namespace pagedkv {

class PAGEDKV_EXPORT KvCacheManagerInternal {
 public:
  static BlockPool& MutablePool(KvCacheManager& manager) { return *manager.pool_; }
};

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_KV_CACHE_MANAGER_INTERNAL_H_
