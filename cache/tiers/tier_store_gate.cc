// Copyright 2026 The pagedkv Authors.
#include "cache/tiers/tier_store_gate.h"

namespace pagedkv {

int32_t TierStoreGate::NoteHit(const BlockHash& hash) {
  if (hits_.size() >= max_tracked_ && !hits_.contains(hash)) hits_.clear();
  int32_t& hits = hits_[hash];
  if (hits < INT32_MAX) ++hits;
  return hits;
}

int32_t TierStoreGate::Hits(const BlockHash& hash) const {
  const auto it = hits_.find(hash);
  return it == hits_.end() ? 0 : it->second;
}

}  // namespace pagedkv
