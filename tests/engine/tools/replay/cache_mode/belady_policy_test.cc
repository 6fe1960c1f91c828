// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/cache_mode/belady_policy.h"

#include "gtest/gtest.h"
#include "pagedkv/cache/block_pool.h"

namespace pagedkv::replay {
namespace {

TEST(BeladyPolicyTest, EvictsTheBlockUsedFarthestInTheFuture) {
  BeladyPolicy p;
  p.Init(4);
  const BlockHash h{};
  for (BlockId b = 0; b < 4; ++b) p.OnInsert(b, h);
  p.SetNextUse(0, 5);
  p.SetNextUse(1, 50);
  p.SetNextUse(2, 7);
  p.SetNextUse(3, 50);
  for (BlockId b : {3, 2, 1, 0}) p.OnRelease(b, h);
  EXPECT_EQ(p.num_candidates(), 4);
  EXPECT_EQ(p.PickVictim(), 3);  // next use 50, released before block 1
  EXPECT_EQ(p.PickVictim(), 1);
  EXPECT_EQ(p.PickVictim(), 2);
  EXPECT_EQ(p.PickVictim(), 0);
  EXPECT_EQ(p.num_candidates(), 0);
}

TEST(BeladyPolicyTest, PinnedAndRemovedBlocksAreNoCandidates) {
  BeladyPolicy p;
  p.Init(3);
  const BlockHash h{};
  p.SetNextUse(0, 100);
  p.SetNextUse(1, 10);
  p.SetNextUse(2, 1000);
  for (BlockId b : {0, 1, 2}) p.OnRelease(b, h);
  p.OnAccess(2, h);  // pinned again: not a candidate
  p.OnRemove(0, h);  // left the index
  EXPECT_EQ(p.num_candidates(), 1);
  EXPECT_EQ(p.PickVictim(), 1);
  p.SetNextUse(2, 3);
  p.OnRelease(2, h);  // released again with a new next use
  EXPECT_EQ(p.PickVictim(), 2);
}

TEST(BeladyPolicyTest, BlocksWithoutANextUseGoFirst) {
  BeladyPolicy p;
  p.Init(2);
  const BlockHash h{};
  p.SetNextUse(0, 1);
  p.OnRelease(0, h);
  p.OnRelease(1, h);  // no SetNextUse: never used again
  EXPECT_EQ(p.PickVictim(), 1);
}

TEST(BeladyPolicyTest, DrivesARealBlockPool) {
  auto policy = std::make_unique<BeladyPolicy>();
  BeladyPolicy* belady = policy.get();
  auto pool = BlockPool::Create({.num_blocks = 2, .block_size = 4, .store_tokens = false},
                                std::move(policy));
  ASSERT_TRUE(pool.ok()) << pool.status();
  std::vector<BlockId> blocks;
  for (uint64_t id : {1, 2}) {
    auto b = (*pool)->Allocate();
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE(
        (*pool)
            ->Insert({.block = *b, .hash = BlockHash::FromU64(id), .parent_hash = BlockHash{}})
            .ok());
    belady->SetNextUse(*b, id == 1 ? 9 : 3);
    blocks.push_back(*b);
  }
  ASSERT_TRUE((*pool)->Unpin(blocks).ok());
  auto c = (*pool)->Allocate();  // evicts hash 1 (next use 9 > 3)
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*pool)->FindCached(BlockHash::FromU64(1)), kNullBlock);
  EXPECT_NE((*pool)->FindCached(BlockHash::FromU64(2)), kNullBlock);
  EXPECT_EQ(belady->Name(), "belady");
  EXPECT_TRUE((*pool)->ValidateInvariants().ok());
}

}  // namespace
}  // namespace pagedkv::replay
