// Copyright 2026 The pagedkv Authors.
//
// ArcTarget: the adaptive core of ARC (Megiddo and Modha, FAST 2003), shared by the tier policy
// (cache/policies/tier_arc_policy.cc, hash-keyed) and the block-pool policy
// (cache/policies/arc_policy.cc, over block ids). It holds p, the target size of T1 (recency) in
// [0, c]; a hit in ghost list B1 raises it by max(1, |B2| / |B1|), a hit in B2 lowers it by max(1,
// |B1| / |B2|); REPLACE takes T1's oldest entry when T1 is over target (or exactly at it after a B2
// hit), T2's otherwise.
//
// Example:
//   internal::ArcTarget target(/*c=*/capacity);
//   target.OnGhostHitB1(b1_size, b2_size);
//   if (target.ReplaceFromT1(t1_size, t2_size, /*after_b2_hit=*/false)) { ... evict from T1 ... }
#ifndef PAGEDKV_CACHE_POLICIES_ARC_TARGET_H_
#define PAGEDKV_CACHE_POLICIES_ARC_TARGET_H_

#include <algorithm>
#include <cstdint>

namespace pagedkv::internal {

class ArcTarget {
 public:
  // REQUIRES: c >= 0.
  explicit ArcTarget(int64_t c = 0) : c_(c) {}

  int64_t c() const { return c_; }
  int64_t p() const { return p_; }
  void Reset(int64_t c) {
    c_ = c;
    p_ = 0;
  }

  // A ghost of B1 came back: favour recency. REQUIRES: b1 >= 1.
  void OnGhostHitB1(int64_t b1, int64_t b2) {
    p_ = std::min(c_, p_ + std::max<int64_t>(1, b2 / b1));
  }
  // A ghost of B2 came back: favour frequency. REQUIRES: b2 >= 1.
  void OnGhostHitB2(int64_t b1, int64_t b2) {
    p_ = std::max<int64_t>(0, p_ - std::max<int64_t>(1, b1 / b2));
  }

  // The paper's REPLACE choice: true to take T1's oldest entry, false for T2's. T1 is taken when it
  // is over target (or at it right after a B2 hit), or when T2 has nothing to give.
  bool ReplaceFromT1(int64_t t1, int64_t t2, bool after_b2_hit) const {
    return t1 > 0 && (t1 > p_ || (after_b2_hit && t1 == p_) || t2 == 0);
  }

 private:
  int64_t c_;
  int64_t p_ = 0;
};

}  // namespace pagedkv::internal

#endif  // PAGEDKV_CACHE_POLICIES_ARC_TARGET_H_
