// Copyright 2026 The pagedkv Authors.
//
// "s3fifo": blocks used once leave from the small queue S; blocks hit while in S move to the main
// queue M; hashes evicted from S are ghosts, and a ghost that comes back goes straight to M.
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "pagedkv/cache/eviction_policy.h"

namespace pagedkv {
namespace {

BlockHash H(int id) { return BlockHash::FromU64(7000 + id); }

void InsertReleased(EvictionPolicy& p, BlockId block, int hash_id) {
  p.OnInsert(block, H(hash_id));
  p.OnRelease(block, H(hash_id));
}

std::vector<BlockId> Drain(EvictionPolicy& p, int n) {
  std::vector<BlockId> out;
  for (int i = 0; i < n; ++i) out.push_back(p.PickVictim());
  return out;
}

// 20 blocks: S's share is 2.
TEST(S3FifoPolicyTest, OneHitWondersLeaveBeforeReusedBlocks) {
  auto p = MakeS3FifoPolicy();
  p->Init(20);
  for (BlockId b = 0; b < 5; ++b) InsertReleased(*p, b, b);
  for (BlockId b : {0, 1}) {  // reused: pinned and released again (they keep their place in S)
    p->OnAccess(b, H(b));
    p->OnRelease(b, H(b));
  }
  for (BlockId b = 5; b < 10; ++b) InsertReleased(*p, b, b);
  // S = [0 1 2 ... 9]: 0 and 1 move to M, the blocks used once are evicted until S is under its
  // share; then M gives block 0 (its hit was spent on the move). LRU would give 2 3 4 0 1 5 ...
  EXPECT_EQ(Drain(*p, 8), (std::vector<BlockId>{2, 3, 4, 5, 6, 7, 8, 0}));
}

TEST(S3FifoPolicyTest, GhostComesBackIntoMain) {
  auto p = MakeS3FifoPolicy();
  p->Init(20);
  for (BlockId b = 0; b < 4; ++b) InsertReleased(*p, b, b);
  EXPECT_EQ(p->PickVictim(), 0);  // hash 0 -> ghost
  InsertReleased(*p, 0, 0);       // a ghost: joins M
  InsertReleased(*p, 4, 4);       // new: joins S = [1 2 3 4]
  EXPECT_EQ(Drain(*p, 4), (std::vector<BlockId>{1, 2, 3, 0}));
}

TEST(S3FifoPolicyTest, NewHashDoesNotSkipTheSmallQueue) {
  auto p = MakeS3FifoPolicy();
  p->Init(20);
  for (BlockId b = 0; b < 4; ++b) InsertReleased(*p, b, b);
  EXPECT_EQ(p->PickVictim(), 0);
  InsertReleased(*p, 0, 99);  // not a ghost: joins S behind 1 2 3
  InsertReleased(*p, 4, 4);
  EXPECT_EQ(Drain(*p, 4), (std::vector<BlockId>{1, 2, 3, 0}));  // S drains in order
  EXPECT_EQ(p->PickVictim(), 4);
}

TEST(S3FifoPolicyTest, MainGivesHitBlocksAnotherRound) {
  auto p = MakeS3FifoPolicy();
  p->Init(20);
  for (BlockId b = 0; b < 3; ++b) InsertReleased(*p, b, b);
  EXPECT_EQ(Drain(*p, 3), (std::vector<BlockId>{0, 1, 2}));
  for (BlockId b = 0; b < 3; ++b) InsertReleased(*p, b, b);  // ghosts: M = [0 1 2]
  p->OnAccess(0, H(0));                                      // a hit in M
  p->OnRelease(0, H(0));
  EXPECT_EQ(Drain(*p, 3), (std::vector<BlockId>{1, 2, 0}));  // 0 went round once
}

TEST(S3FifoPolicyTest, PinnedBlocksAreSkipped) {
  auto p = MakeS3FifoPolicy();
  p->Init(20);
  for (BlockId b = 0; b < 4; ++b) InsertReleased(*p, b, b);
  p->OnAccess(0, H(0));  // pinned now
  EXPECT_EQ(p->PickVictim(), 1);
  p->OnRemove(2, H(2));
  EXPECT_EQ(p->PickVictim(), 3);
  p->OnRelease(0, H(0));
  EXPECT_EQ(p->PickVictim(), 0);
}

}  // namespace
}  // namespace pagedkv
