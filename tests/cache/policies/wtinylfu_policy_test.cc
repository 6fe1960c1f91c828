// Copyright 2026 The pagedkv Authors.
//
// "wtinylfu": blocks spilling from the window are admitted into the main cache only when the
// frequency sketch counts their hash more often than the main cache's LRU candidate; the sketch
// remembers evicted hashes.
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "pagedkv/cache/eviction_policy.h"

namespace pagedkv {
namespace {

BlockHash H(int id) { return BlockHash::FromU64(9000 + id); }

void InsertReleased(EvictionPolicy& p, BlockId block, int hash_id) {
  p.OnInsert(block, H(hash_id));
  p.OnRelease(block, H(hash_id));
}

std::vector<BlockId> Drain(EvictionPolicy& p, int n) {
  std::vector<BlockId> out;
  for (int i = 0; i < n; ++i) out.push_back(p.PickVictim());
  return out;
}

void Hit(EvictionPolicy& p, BlockId block, int hash_id, int times) {
  for (int i = 0; i < times; ++i) {
    p.OnAccess(block, H(hash_id));
    p.OnRelease(block, H(hash_id));
  }
}

// 100 blocks: the window's share is 1.
TEST(WTinyLfuPolicyTest, FrequentBlockWinsAdmissionOverNewcomers) {
  auto p = MakeWTinyLfuPolicy();
  p->Init(100);
  InsertReleased(*p, 0, 0);
  Hit(*p, 0, 0, 3);  // counted 4 times, still in the window
  for (BlockId b = 1; b < 6; ++b) InsertReleased(*p, b, b);
  // 0..4 spill on trial; 0 is admitted (nothing to duel), then 1..4 each lose to it.
  EXPECT_EQ(Drain(*p, 4), (std::vector<BlockId>{1, 2, 3, 4}));
  EXPECT_EQ(p->PickVictim(), 0);  // no trial left: the main cache's LRU before the window's
  EXPECT_EQ(p->PickVictim(), 5);
}

TEST(WTinyLfuPolicyTest, SketchRemembersEvictedHashes) {
  auto p = MakeWTinyLfuPolicy();
  p->Init(100);
  InsertReleased(*p, 0, 0);
  InsertReleased(*p, 1, 1);
  EXPECT_EQ(p->PickVictim(), 0);  // 0 spilled, admitted, then evicted as the main LRU
  InsertReleased(*p, 2, 2);
  InsertReleased(*p, 0, 0);  // hash 0 again: counted twice now
  InsertReleased(*p, 3, 3);
  // Spilled on trial: 1, 2, 0. 1 is admitted; 2 (once) loses to 1 (once); 0 (twice) beats 1.
  EXPECT_EQ(Drain(*p, 2), (std::vector<BlockId>{2, 1}));
  EXPECT_EQ(p->PickVictim(), 0);
  EXPECT_EQ(p->PickVictim(), 3);
}

TEST(WTinyLfuPolicyTest, TrialDuelsProtectedWhenProbationIsEmpty) {
  auto p = MakeWTinyLfuPolicy();
  p->Init(100);
  for (BlockId b = 0; b < 3; ++b) InsertReleased(*p, b, b);
  Hit(*p, 1, 1, 1);  // counted twice; release order now 0 2 1
  InsertReleased(*p, 3, 3);
  // 0 2 1 spill on trial: 0 is admitted; 2 ties with 0 and is evicted; 1 beats 0.
  EXPECT_EQ(Drain(*p, 2), (std::vector<BlockId>{2, 0}));
  Hit(*p, 1, 1, 1);  // a hit in probation: 1 moves to protected (counted 3 times)
  InsertReleased(*p, 4, 4);
  InsertReleased(*p, 5, 5);
  // 3 and 4 spill; with probation empty each duels protected 1 and loses; then protected's LRU
  // goes before the window's block.
  EXPECT_EQ(Drain(*p, 4), (std::vector<BlockId>{3, 4, 1, 5}));
}

}  // namespace
}  // namespace pagedkv
