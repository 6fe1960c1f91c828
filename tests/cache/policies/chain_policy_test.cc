// Copyright 2026 The pagedkv Authors.
//
// "chain": candidates that were never hit and never had a child (a chain's dead end) are evicted
// first; evicting one makes its unhit, childless parent a dead end too (a few levels up); a hit or
// a new child brings a dead end back; everything else follows S3-FIFO.
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "pagedkv/cache/eviction_policy.h"

namespace pagedkv {
namespace {

BlockHash H(int id) { return BlockHash::FromU64(11000 + id); }

// Inserts blocks first..last as one chain (block b under hash b), each the child of the one
// before (the first one's parent is `parent`, kNullBlock for a root), then releases them tail first
// as a request does.
void InsertChain(EvictionPolicy& p, BlockId first, BlockId last, BlockId parent) {
  for (BlockId b = first; b <= last; ++b) {
    const BlockId up = b == first ? parent : b - 1;
    p.OnInsertInChain(b, H(b), up == kNullBlock ? BlockHash{} : H(up), kNullBlock);
  }
  for (BlockId b = last; b >= first; --b) p.OnRelease(b, H(b));
}

std::vector<BlockId> Drain(EvictionPolicy& p, int n) {
  std::vector<BlockId> out;
  for (int i = 0; i < n; ++i) out.push_back(p.PickVictim());
  return out;
}

TEST(ChainPolicyTest, DeadEndsGoFirstAndDeathClimbsAFewLevels) {
  auto p = MakeChainPolicy();
  p->Init(100);
  InsertChain(*p, 0, 5, kNullBlock);  // chain 0..5: 5 is its dead end
  InsertChain(*p, 10, 11, kNullBlock);
  // 5 and 11 are dead ends (released in that order); evicting 5 makes 4 one, then 3, then 2
  // (3 levels above the first); 1 and 0 are left to S3-FIFO. S3-FIFO alone would take them all in
  // release order: 5 4 3 2 1 0 11 10.
  EXPECT_EQ(Drain(*p, 6), (std::vector<BlockId>{5, 11, 4, 10, 3, 2}));
  EXPECT_EQ(p->PickVictim(), 1);  // S3-FIFO: the first released of the rest (tail first)
}

TEST(ChainPolicyTest, HitBlocksAndParentsAreNotDeadEnds) {
  auto p = MakeChainPolicy();
  p->Init(100);
  InsertChain(*p, 0, 2, kNullBlock);
  p->OnAccess(2, H(2));  // the chain end is hit: not a dead end any more
  p->OnRelease(2, H(2));
  InsertChain(*p, 3, 3, kNullBlock);  // a dead end
  EXPECT_EQ(p->PickVictim(), 3);
  // 0..2 are S3-FIFO's: the small queue keeps its order (0, 1 queued before 2's hit moved it).
  EXPECT_EQ(Drain(*p, 2), (std::vector<BlockId>{1, 0}));
  EXPECT_EQ(p->PickVictim(), 2);
}

TEST(ChainPolicyTest, ChildRevivesItsDeadParent) {
  auto p = MakeChainPolicy();
  p->Init(100);
  InsertChain(*p, 0, 1, kNullBlock);  // 1 is a dead end
  p->OnAccess(1, H(1));               // the next turn hits 0..1 and extends the chain
  p->OnAccess(0, H(0));
  p->OnInsertInChain(2, H(2), H(1), kNullBlock);
  for (BlockId b : {2, 1, 0}) p->OnRelease(b, H(b));
  EXPECT_EQ(p->PickVictim(), 2);  // the new dead end; 0 and 1 were hit
  InsertChain(*p, 3, 3, kNullBlock);
  EXPECT_EQ(p->PickVictim(), 3);
}

TEST(ChainPolicyTest, LinkedParentBlockIsUsedWithoutAHashLookup) {
  auto p = MakeChainPolicy();
  p->Init(10);
  p->OnInsertInChain(0, H(0), BlockHash{}, kNullBlock);
  p->OnInsertInChain(1, H(1), H(99), /*parent_block=*/0);  // linked: the hash is not consulted
  p->OnRelease(1, H(1));
  p->OnRelease(0, H(0));
  EXPECT_EQ(Drain(*p, 2), (std::vector<BlockId>{1, 0}));  // 0 had a child: not a dead end
}

}  // namespace
}  // namespace pagedkv
