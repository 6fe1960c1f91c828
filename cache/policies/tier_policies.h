// Copyright 2026 The pagedkv Authors.
//
// The built-in TierPolicy constructors behind MakeTierPolicy (pagedkv/tiers/tier_policy.h).
// REQUIRES: capacity >= 1 (MakeTierPolicy checks it).
#ifndef PAGEDKV_CACHE_POLICIES_TIER_POLICIES_H_
#define PAGEDKV_CACHE_POLICIES_TIER_POLICIES_H_

#include <cstdint>
#include <memory>

#include "pagedkv/tiers/tier_policy.h"

namespace pagedkv {

std::unique_ptr<TierPolicy> NewTierLruPolicy(int64_t capacity);
std::unique_ptr<TierPolicy> NewTierArcPolicy(int64_t capacity);

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_POLICIES_TIER_POLICIES_H_
