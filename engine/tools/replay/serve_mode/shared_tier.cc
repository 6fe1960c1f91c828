// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/serve_mode/shared_tier.h"

namespace pagedkv::replay {

absl::StatusOr<int64_t> SharedTierView::LoadPrefix(std::span<const TierBlock> blocks,
                                                   TierValueSink sink) {
  const TierStats before = shared_->stats();
  absl::StatusOr<int64_t> taken = shared_->LoadPrefix(blocks, sink);
  AddSince(before);
  return taken;
}

absl::Status SharedTierView::Store(std::span<const TierStoreItem> items) {
  const TierStats before = shared_->stats();
  absl::Status stored = shared_->Store(items);
  AddSince(before);
  return stored;
}

void SharedTierView::AddSince(const TierStats& before) {
  const TierStats now = shared_->stats();
  own_.lookups += now.lookups - before.lookups;
  own_.queried_blocks += now.queried_blocks - before.queried_blocks;
  own_.hit_blocks += now.hit_blocks - before.hit_blocks;
  own_.loaded_bytes += now.loaded_bytes - before.loaded_bytes;
  own_.stored_blocks += now.stored_blocks - before.stored_blocks;
  own_.stored_bytes += now.stored_bytes - before.stored_bytes;
  own_.store_skipped += now.store_skipped - before.store_skipped;
  own_.evictions += now.evictions - before.evictions;
  own_.faults += now.faults - before.faults;
  own_.incidents += now.incidents - before.incidents;
}

TierStats SharedTierView::stats() const {
  TierStats s = own_;
  const TierStats shared = shared_->stats();
  s.resident_blocks = shared.resident_blocks;
  s.resident_bytes = shared.resident_bytes;
  s.shared_resident_bytes = shared.resident_bytes;  // every instance's
  return s;
}

}  // namespace pagedkv::replay
