// Copyright 2026 The pagedkv Authors.
//
// HybridKvCacheManager's events (include/pagedkv/hybrid_kv_cache_manager.h): the pool's
// per-block events become vLLM-shaped batch events stamped with the block's KV cache group.
// Invariant: pending_events_ holds the events in the order the pool emitted them; only the last
// one is ever extended.
#include <string>
#include <utility>

#include "pagedkv/hybrid_kv_cache_manager.h"

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

void HybridKvCacheManager::OnPoolEvent(const KvEvent& event) {
  if (event.domain == BlockDomain::kChunk) return;
  if (event.type == KvEventType::kAllBlocksCleared) {
    pending_events_.push_back(KvBatchEvent{.type = KvEventType::kAllBlocksCleared});
    return;
  }
  const int32_t g = BlockGroup(event.block);
  KvBatchEvent* last = pending_events_.empty() ? nullptr : &pending_events_.back();
  const bool same_group = last != nullptr && last->type == event.type && last->group_idx == g;
  if (event.type == KvEventType::kBlockRemoved) {
    if (same_group) {
      last->block_hashes.push_back(event.hash);
      return;
    }
    pending_events_.push_back(KvBatchEvent{.type = KvEventType::kBlockRemoved,
                                           .block_hashes = {event.hash},
                                           .medium = kMediumGpu,
                                           .group_idx = g});
    return;
  }
  if (same_group && last->block_size == event.token_count &&
      last->block_hashes.back() == event.parent_hash) {
    last->block_hashes.push_back(event.hash);
    last->token_ids.insert(last->token_ids.end(), event.token_ids.begin(), event.token_ids.end());
    return;
  }
  KvBatchEvent stored{.type = KvEventType::kBlockStored,
                      .block_hashes = {event.hash},
                      .token_ids = {event.token_ids.begin(), event.token_ids.end()},
                      .block_size = event.token_count,
                      .medium = kMediumGpu,
                      .group_idx = g};
  if (!roots_.contains(event.parent_hash)) stored.parent_block_hash = event.parent_hash;
  if (g >= 0 && g < num_groups()) {
    const KvCacheGroupSpec& spec = options_.groups[g];
    stored.kv_cache_spec_kind = std::string(KvCacheGroupKindName(spec.kind));
    if (spec.kind == KvCacheGroupKind::kSlidingWindow) {
      stored.kv_cache_spec_sliding_window = spec.sliding_window;
    }
  }
  pending_events_.push_back(std::move(stored));
}

KvEventBatch HybridKvCacheManager::TakeEventBatch(double timestamp) {
  KvEventBatch batch{.timestamp = timestamp,
                     .events = std::move(pending_events_),
                     .data_parallel_rank = options_.data_parallel_rank};
  pending_events_.clear();
  return batch;
}

}  // namespace pagedkv
