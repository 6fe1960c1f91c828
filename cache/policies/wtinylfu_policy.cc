// Copyright 2026 The pagedkv Authors.
//
// "wtinylfu" eviction: W-TinyLFU (Einziger, Friedman and Manes, ACM TOS 2017; the policy of
// Caffeine, and TinyLFU is what Dynamo's block registry uses). Cached blocks are in one of three
// LRU segments: a window W (1% of the blocks), and a main cache split into probation P and
// protected R (80% of the main cache). A block enters W; a hit in P moves it to R (R's least
// recently released candidate drops back to P when R is over its share). Every insert and every hit
// counts the block's hash in a FrequencySketch (cache/policies/frequency_sketch.h), which remembers
// hashes that were evicted. Eviction (admission, in TinyLFU's terms): when W holds more than its
// share, its least recently released candidates spill into P on trial. A trial block duels P's
// least recently released candidate (R's when P has none): the one whose hash the sketch counts
// more often stays, the other is evicted; ties evict the trial block; with no main candidate to
// duel, it is admitted. With no trial block, the main cache's LRU candidate (P, then R) is evicted,
// then W's. Departures from Caffeine: fixed shares (no hill-climbing of the window size),
// candidates only (referenced blocks stay where they are), no doorkeeper. O(1) per call.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "cache/policies/block_lists.h"
#include "cache/policies/frequency_sketch.h"
#include "pagedkv/cache/eviction_policy.h"

namespace pagedkv {
namespace {

enum Segment : uint8_t { kWindow = 0, kProbation = 1, kProtected = 2, kNone = 3 };
// Candidate lists: one per segment, plus kTrial: window blocks that spilled into probation and
// still await TinyLFU's admission duel (counted in kProbation).
constexpr int32_t kTrial = 3;

class WTinyLfuPolicy final : public EvictionPolicy {
 public:
  std::string_view Name() const override { return "wtinylfu"; }

  void Init(int32_t num_blocks) override {
    candidates_.Init(num_blocks, /*num_lists=*/4);
    segment_.assign(num_blocks, kNone);
    hash_.assign(num_blocks, BlockHash{});
    std::fill(std::begin(resident_), std::end(resident_), 0);
    window_share_ = std::max(1, num_blocks / 100);
    protected_share_ = (num_blocks - window_share_) * 4 / 5;
    sketch_.Init(num_blocks);
  }

  void OnInsert(BlockId block, const BlockHash& hash) override {
    sketch_.Increment(hash);
    hash_[block] = hash;
    Move(block, kWindow);
  }

  void OnAccess(BlockId block, const BlockHash& hash) override {
    sketch_.Increment(hash);
    candidates_.Remove(block);
    if (segment_[block] != kProbation) return;
    Move(block, kProtected);
    if (resident_[kProtected] > protected_share_) {
      const BlockId demoted = candidates_.Front(kProtected);
      if (demoted != kNullBlock) {
        Move(demoted, kProbation);
        candidates_.PushBack(kProbation, demoted);
      }
    }
  }

  void OnRelease(BlockId block, const BlockHash&) override {
    candidates_.PushBack(segment_[block], block);
  }

  void OnRemove(BlockId block, const BlockHash&) override {
    candidates_.Remove(block);
    Move(block, kNone);
  }

  BlockId PickVictim() override {
    while (resident_[kWindow] > window_share_ && candidates_.Size(kWindow) > 0) {
      const BlockId spilled = candidates_.Front(kWindow);
      Move(spilled, kProbation);
      candidates_.PushBack(kTrial, spilled);
    }
    BlockId victim = kNullBlock;
    while (victim == kNullBlock) {
      const BlockId trial = candidates_.Front(kTrial);
      BlockId main = candidates_.Front(kProbation);
      if (main == kNullBlock) main = candidates_.Front(kProtected);
      if (trial == kNullBlock) {
        victim = main != kNullBlock ? main : candidates_.Front(kWindow);
      } else if (main == kNullBlock) {
        candidates_.PushBack(kProbation, trial);  // nothing to duel: admitted
      } else if (sketch_.Estimate(hash_[trial]) > sketch_.Estimate(hash_[main])) {
        candidates_.PushBack(kProbation, trial);
        victim = main;
      } else {
        victim = trial;
      }
    }
    OnRemove(victim, hash_[victim]);
    return victim;
  }

  void Clear() override { Init(static_cast<int32_t>(segment_.size())); }

 private:
  // Changes the segment `block` is counted in (kNone: not cached); candidate lists are untouched.
  void Move(BlockId block, Segment to) {
    if (segment_[block] != kNone) --resident_[segment_[block]];
    segment_[block] = to;
    if (to != kNone) ++resident_[to];
  }

  internal::BlockLists candidates_;  // per segment + kTrial; least recently released first
  std::vector<Segment> segment_;     // [num_blocks]
  std::vector<BlockHash> hash_;      // [num_blocks]
  int32_t resident_[3] = {0, 0, 0};  // cached blocks per segment (candidates or not)
  int32_t window_share_ = 1;
  int32_t protected_share_ = 0;
  internal::FrequencySketch sketch_;
};

}  // namespace

std::unique_ptr<EvictionPolicy> MakeWTinyLfuPolicy() { return std::make_unique<WTinyLfuPolicy>(); }

}  // namespace pagedkv
