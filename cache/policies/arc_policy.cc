// Copyright 2026 The pagedkv Authors.
//
// "arc" eviction: Adaptive Replacement Cache (Megiddo and Modha, FAST 2003) over the pool's cached
// blocks, with c = num_blocks. The adaptive core (p and REPLACE's choice) is internal::ArcTarget,
// shared with the tier policy "arc" (cache/policies/tier_arc_policy.cc).
//   T1 - cached blocks not hit since they entered the index;  B1 - hashes evicted from T1;
//   T2 - cached blocks hit at least once (or whose hash came back from a ghost list); B2 - from T2.
// A block enters T1, or T2 when its hash is a ghost (a B1 ghost raises p, a B2 ghost lowers it);
// a hit moves a T1 block to T2. Departure from the paper, for a pool whose referenced blocks cannot
// be evicted: REPLACE counts all cached blocks of T1/T2 but picks among candidates only (the least
// recently released of the chosen list; the other list's when the chosen one has none), and it runs
// when the pool needs a block, not on every miss. Ghost lists keep |T1| + |B1| <= c and
// |T1| + |T2| + |B1| + |B2| <= 2c. Every call is O(1) (amortised for the ghost maps).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "cache/policies/arc_target.h"
#include "cache/policies/block_lists.h"
#include "cache/policies/ghost_list.h"
#include "pagedkv/cache/eviction_policy.h"

namespace pagedkv {
namespace {

enum Segment : uint8_t { kT1 = 0, kT2 = 1, kNone = 2 };

class ArcPolicy final : public EvictionPolicy {
 public:
  std::string_view Name() const override { return "arc"; }

  void Init(int32_t num_blocks) override {
    candidates_.Init(num_blocks, /*num_lists=*/2);
    segment_.assign(num_blocks, kNone);
    hash_.assign(num_blocks, BlockHash{});
    resident_[kT1] = resident_[kT2] = 0;
    b1_.Clear();
    b2_.Clear();
    target_.Reset(num_blocks);
    after_b2_hit_ = false;
  }

  void OnInsert(BlockId block, const BlockHash& hash) override {
    hash_[block] = hash;
    Segment segment = kT1;
    if (b1_.Contains(hash)) {
      target_.OnGhostHitB1(b1_.Size(), b2_.Size());
      b1_.Erase(hash);
      segment = kT2;
    } else if (b2_.Contains(hash)) {
      target_.OnGhostHitB2(b1_.Size(), b2_.Size());
      b2_.Erase(hash);
      segment = kT2;
      after_b2_hit_ = true;
    }
    segment_[block] = segment;
    ++resident_[segment];
    TrimGhosts();
  }

  void OnAccess(BlockId block, const BlockHash&) override {
    candidates_.Remove(block);
    if (segment_[block] == kT1) {
      --resident_[kT1];
      ++resident_[kT2];
      segment_[block] = kT2;
    }
  }

  void OnRelease(BlockId block, const BlockHash&) override {
    candidates_.PushBack(segment_[block], block);
  }

  void OnRemove(BlockId block, const BlockHash&) override {
    candidates_.Remove(block);
    --resident_[segment_[block]];
    segment_[block] = kNone;
  }

  BlockId PickVictim() override {
    bool from_t1 = target_.ReplaceFromT1(resident_[kT1], resident_[kT2], after_b2_hit_);
    if (candidates_.Size(from_t1 ? kT1 : kT2) == 0) from_t1 = !from_t1;
    const Segment segment = from_t1 ? kT1 : kT2;
    const BlockId victim = candidates_.Front(segment);
    OnRemove(victim, hash_[victim]);
    (from_t1 ? b1_ : b2_).Add(hash_[victim]);
    after_b2_hit_ = false;
    TrimGhosts();
    return victim;
  }

  void Clear() override { Init(static_cast<int32_t>(segment_.size())); }

 private:
  void TrimGhosts() {
    const int64_t c = target_.c();
    b1_.TrimTo(std::max<int64_t>(0, c - resident_[kT1]));
    b2_.TrimTo(std::max<int64_t>(0, 2 * c - resident_[kT1] - resident_[kT2] - b1_.Size()));
  }

  internal::BlockLists candidates_;  // lists kT1, kT2: candidates, least recently released first
  std::vector<Segment> segment_;     // [num_blocks] kNone when not cached
  std::vector<BlockHash> hash_;      // [num_blocks] hash of the cached block (for its ghost)
  int64_t resident_[2] = {0, 0};     // cached blocks of T1, T2 (candidates or not)
  internal::GhostList b1_, b2_;
  internal::ArcTarget target_;
  bool after_b2_hit_ = false;  // the last insert was a B2 ghost (REPLACE's tie rule)
};

}  // namespace

std::unique_ptr<EvictionPolicy> MakeArcPolicy() { return std::make_unique<ArcPolicy>(); }

}  // namespace pagedkv
