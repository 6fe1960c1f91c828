// Copyright 2026 The pagedkv Authors.
//
// "arc": blocks hit once sit in T1, blocks hit again in T2, and ghost hits move the target size of
// T1 (p): a B1 ghost raises it (recency wins more room), a B2 ghost lowers it.
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "pagedkv/cache/eviction_policy.h"

namespace pagedkv {
namespace {

BlockHash H(int id) { return BlockHash::FromU64(5000 + id); }

void InsertReleased(EvictionPolicy& p, BlockId block, int hash_id) {
  p.OnInsert(block, H(hash_id));
  p.OnRelease(block, H(hash_id));
}

TEST(ArcPolicyTest, WithoutGhostHitsEvictsT1InReleaseOrder) {
  auto p = MakeArcPolicy();
  p->Init(4);
  for (BlockId b = 0; b < 4; ++b) InsertReleased(*p, b, b);
  EXPECT_EQ(p->PickVictim(), 0);  // p = 0: T1 first
  InsertReleased(*p, 0, 10);      // a new hash: T1 again
  EXPECT_EQ(p->PickVictim(), 1);
  EXPECT_EQ(p->PickVictim(), 2);
  EXPECT_EQ(p->PickVictim(), 3);
  EXPECT_EQ(p->PickVictim(), 0);
}

TEST(ArcPolicyTest, B1GhostHitRaisesTargetAndProtectsTheReturningBlock) {
  auto p = MakeArcPolicy();
  p->Init(4);
  for (BlockId b = 0; b < 4; ++b) InsertReleased(*p, b, b);
  EXPECT_EQ(p->PickVictim(), 0);  // hash 0 -> B1
  InsertReleased(*p, 0, 0);       // B1 ghost: p = 1, block 0 enters T2
  // T1 = {1, 2, 3} is over p = 1: T1 gives two blocks; then T1 = {3} is at p, so T2 gives block 0
  // although it was released last (LRU would take 3 first).
  EXPECT_EQ(p->PickVictim(), 1);
  EXPECT_EQ(p->PickVictim(), 2);
  EXPECT_EQ(p->PickVictim(), 0);
  EXPECT_EQ(p->PickVictim(), 3);
}

TEST(ArcPolicyTest, B2GhostHitLowersTarget) {
  auto p = MakeArcPolicy();
  p->Init(4);
  for (BlockId b : {0, 1}) {
    p->OnInsert(b, H(b));
    p->OnAccess(b, H(b));  // hit: T2
    p->OnRelease(b, H(b));
  }
  InsertReleased(*p, 2, 2);
  InsertReleased(*p, 3, 3);
  EXPECT_EQ(p->PickVictim(), 2);  // T1 over p = 0; hash 2 -> B1
  InsertReleased(*p, 2, 2);       // B1 ghost: p = 1, T2 = {0, 1, 2}
  EXPECT_EQ(p->PickVictim(), 0);  // T1 = {3} is at p: T2's oldest; hash 0 -> B2
  InsertReleased(*p, 0, 0);       // B2 ghost: p = 0, T2 = {1, 2, 0}
  EXPECT_EQ(p->PickVictim(), 3);  // T1 = {3} is over p = 0 now: T1 gives it
  EXPECT_EQ(p->PickVictim(), 1);
}

TEST(ArcPolicyTest, PinnedBlocksAreNeverPickedAndTheOtherListGives) {
  auto p = MakeArcPolicy();
  p->Init(4);
  for (BlockId b : {0, 1}) {
    p->OnInsert(b, H(b));
    p->OnAccess(b, H(b));
    p->OnRelease(b, H(b));
  }
  p->OnInsert(2, H(2));           // T1, still referenced
  EXPECT_EQ(p->PickVictim(), 0);  // T1 is over p but has no candidate: T2 gives
  p->OnRelease(2, H(2));
  p->OnRemove(1, H(1));  // removed, not ghosted
  EXPECT_EQ(p->PickVictim(), 2);
  InsertReleased(*p, 1, 1);  // hash 1 is no ghost: T1
  EXPECT_EQ(p->PickVictim(), 1);
}

}  // namespace
}  // namespace pagedkv
