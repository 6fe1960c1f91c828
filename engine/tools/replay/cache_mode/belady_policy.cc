// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/cache_mode/belady_policy.h"

#include <algorithm>
#include <cassert>
#include <limits>

namespace pagedkv::replay {

void BeladyPolicy::Init(int32_t num_blocks) {
  next_use_.assign(static_cast<size_t>(num_blocks), std::numeric_limits<int64_t>::max());
  version_.assign(static_cast<size_t>(num_blocks), 0);
  candidate_.assign(static_cast<size_t>(num_blocks), 0);
  heap_.clear();
  next_order_ = 0;
  num_candidates_ = 0;
}

void BeladyPolicy::OnInsert(BlockId /*block*/, const BlockHash& /*hash*/) {}

void BeladyPolicy::Invalidate(BlockId block) {
  if (candidate_[block]) {
    candidate_[block] = 0;
    --num_candidates_;
  }
  ++version_[block];
}

void BeladyPolicy::OnAccess(BlockId block, const BlockHash& /*hash*/) { Invalidate(block); }

void BeladyPolicy::OnRemove(BlockId block, const BlockHash& /*hash*/) {
  Invalidate(block);
  next_use_[block] = std::numeric_limits<int64_t>::max();
}

void BeladyPolicy::OnRelease(BlockId block, const BlockHash& /*hash*/) {
  Invalidate(block);
  candidate_[block] = 1;
  ++num_candidates_;
  heap_.push_back({next_use_[block], next_order_++, block, version_[block]});
  std::push_heap(heap_.begin(), heap_.end(), Less);
  // Stale entries accumulate when candidates are pinned again; rebuild when they dominate.
  if (heap_.size() > 1024 && heap_.size() > 4 * static_cast<size_t>(num_candidates_)) Compact();
}

void BeladyPolicy::Compact() {
  std::erase_if(heap_, [this](const Entry& e) { return e.version != version_[e.block]; });
  std::make_heap(heap_.begin(), heap_.end(), Less);
}

BlockId BeladyPolicy::PickVictim() {
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), Less);
    const Entry e = heap_.back();
    heap_.pop_back();
    if (e.version != version_[e.block]) continue;
    Invalidate(e.block);
    next_use_[e.block] = std::numeric_limits<int64_t>::max();
    return e.block;
  }
  assert(false && "PickVictim called with no candidate");
  return kNullBlock;
}

void BeladyPolicy::Clear() {
  const auto n = static_cast<int32_t>(next_use_.size());
  Init(n);
}

}  // namespace pagedkv::replay
