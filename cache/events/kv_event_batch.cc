// Copyright 2026 The pagedkv Authors.
//
// KvEventBatcher: per-block events into vLLM-shaped batches. Invariant: events_ holds the
// pending events in the order the pool emitted them; only the last one is ever extended, so
// merging never reorders a stored event past a removed one or a reset.
#include "pagedkv/events/kv_event_batch.h"

#include <chrono>
#include <string>
#include <utility>

namespace pagedkv {

double WallClockSeconds() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return std::chrono::duration<double>(now).count();
}

KvEventBatcher::KvEventBatcher(KvEventBatcherOptions options) : options_(std::move(options)) {}

void KvEventBatcher::Add(const KvEvent& event) {
  // Chunk-domain blocks are no prefix of any request: a prefix router must not index them.
  if (event.domain == BlockDomain::kChunk) return;
  switch (event.type) {
    case KvEventType::kBlockStored:
      AddStored(event);
      return;
    case KvEventType::kBlockRemoved:
      AddRemoved(event);
      return;
    case KvEventType::kAllBlocksCleared:
      events_.push_back(KvBatchEvent{.type = KvEventType::kAllBlocksCleared});
      return;
  }
}

std::optional<int32_t> KvEventBatcher::GroupOf(const KvEvent& event) const {
  return event.group_idx >= 0 ? std::optional<int32_t>(event.group_idx) : options_.group_idx;
}

void KvEventBatcher::AddStored(const KvEvent& event) {
  const std::string medium = event.medium.empty() ? options_.medium : std::string(event.medium);
  const std::optional<int32_t> group = GroupOf(event);
  if (!events_.empty()) {
    KvBatchEvent& last = events_.back();
    if (last.type == KvEventType::kBlockStored && last.block_size == event.token_count &&
        last.medium == medium && last.group_idx == group && !last.block_hashes.empty() &&
        last.block_hashes.back() == event.parent_hash) {
      last.block_hashes.push_back(event.hash);
      last.token_ids.insert(last.token_ids.end(), event.token_ids.begin(), event.token_ids.end());
      return;
    }
  }
  KvBatchEvent stored{.type = KvEventType::kBlockStored,
                      .block_hashes = {event.hash},
                      .token_ids = {event.token_ids.begin(), event.token_ids.end()},
                      .block_size = event.token_count,
                      .medium = medium,
                      .group_idx = group};
  if (!event.kv_cache_spec_kind.empty()) {
    stored.kv_cache_spec_kind = std::string(event.kv_cache_spec_kind);
  }
  if (event.kv_cache_spec_sliding_window > 0) {
    stored.kv_cache_spec_sliding_window = event.kv_cache_spec_sliding_window;
  }
  if (!roots_.contains(event.parent_hash)) stored.parent_block_hash = event.parent_hash;
  events_.push_back(std::move(stored));
}

void KvEventBatcher::AddRemoved(const KvEvent& event) {
  const std::string medium = event.medium.empty() ? options_.medium : std::string(event.medium);
  const std::optional<int32_t> group = GroupOf(event);
  if (options_.merge_removed && !events_.empty()) {
    KvBatchEvent& last = events_.back();
    if (last.type == KvEventType::kBlockRemoved && last.medium == medium &&
        last.group_idx == group) {
      last.block_hashes.push_back(event.hash);
      return;
    }
  }
  events_.push_back(KvBatchEvent{.type = KvEventType::kBlockRemoved,
                                 .block_hashes = {event.hash},
                                 .medium = medium,
                                 .group_idx = group});
}

KvEventBatch KvEventBatcher::Take(double timestamp) {
  KvEventBatch batch{.timestamp = timestamp,
                     .events = std::move(events_),
                     .data_parallel_rank = options_.data_parallel_rank};
  events_.clear();
  return batch;
}

}  // namespace pagedkv
