// Copyright 2026 The pagedkv Authors.
//
// BlockLifecycleObserver: optional hooks a BlockPool calls when a block enters the prefix index,
// is hit (pinned while cached), becomes unreferenced while cached, and is evicted. The metrics
// of pagedkv/cache/cache_metrics.h (block lifetime, idle time before eviction, reuse gap) are built
// on it; a pool without an observer pays one predictable branch per hook.
//
// Example:
//   pagedkv::BlockLifecycleMetrics metrics(pool.num_blocks());
//   pool.SetLifecycleObserver(&metrics);  // not owned; must outlive its use
//
// Calls come from the thread driving the pool (the pool is not thread-safe).
#ifndef PAGEDKV_CACHE_BLOCK_LIFECYCLE_OBSERVER_H_
#define PAGEDKV_CACHE_BLOCK_LIFECYCLE_OBSERVER_H_

#include "pagedkv/export.h"
#include "pagedkv/types.h"

namespace pagedkv {

class PAGEDKV_EXPORT BlockLifecycleObserver {
 public:
  virtual ~BlockLifecycleObserver() = default;
  // `block` was indexed (BlockPool::Insert returned true).
  virtual void OnStored(BlockId block) = 0;
  // Cached `block` was pinned (a prefix hit or another reader).
  virtual void OnHit(BlockId block) = 0;
  // Cached `block`'s reference count dropped to zero: it is evictable now.
  virtual void OnReleased(BlockId block) = 0;
  // Cached `block` is evicted to make room for an allocation (not Uncache / ResetPrefixCache).
  virtual void OnEvicted(BlockId block) = 0;
};

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_BLOCK_LIFECYCLE_OBSERVER_H_
