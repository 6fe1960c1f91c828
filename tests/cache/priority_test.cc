// Copyright 2026 The pagedkv Authors.
//
// Eviction priorities and retention: lowest priority first, the policy's order among equals,
// expired retention back to the default, the cap on high-priority blocks, raising on a hit, and
// prompt spans (a system prompt kept while other traffic churns).
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/kv_cache_manager.h"

namespace pagedkv {
namespace {

BlockHash H(uint64_t id) { return BlockHash::FromU64(id); }

class PoolPriorityTest : public ::testing::Test {
 protected:
  std::unique_ptr<BlockPool> Make(int32_t blocks, double cap = 1.0) {
    auto pool = BlockPool::Create({.num_blocks = blocks,
                                   .block_size = 2,
                                   .enable_priorities = true,
                                   .max_high_priority_fraction = cap,
                                   .clock = [this] { return now_; }});
    EXPECT_TRUE(pool.ok()) << pool.status();
    return *std::move(pool);
  }
  // Allocates, caches under `hash` at `priority`, and releases (evictable).
  BlockId CacheAndRelease(BlockPool& pool, uint64_t hash, CachePriority priority = {}) {
    const BlockId b = *pool.Allocate();
    EXPECT_TRUE(*pool.Insert({.block = b, .hash = H(hash), .priority = priority}));
    EXPECT_TRUE(pool.Unpin(b).ok());
    return b;
  }
  // The hash the next eviction drops.
  BlockHash NextVictimHash(BlockPool& pool) {
    std::vector<BlockHash> before;
    for (BlockId b = 0; b < pool.num_blocks(); ++b) {
      if (pool.IsCached(b)) before.push_back(*pool.CachedHash(b));
    }
    const BlockId taken = *pool.Allocate();
    for (const BlockHash& h : before) {
      if (pool.FindCached(h) == kNullBlock) return h;
    }
    ADD_FAILURE() << "nothing was evicted for block " << taken;
    return {};
  }

  double now_ = 0;
};

TEST_F(PoolPriorityTest, LowestPriorityGoesFirstThenLeastRecentlyReleased) {
  auto pool = Make(4);
  CacheAndRelease(*pool, 1, {.priority = 80});
  CacheAndRelease(*pool, 2);
  CacheAndRelease(*pool, 3, {.priority = 10});
  CacheAndRelease(*pool, 4);
  EXPECT_EQ(NextVictimHash(*pool), H(3));  // the lowest, though released after 1 and 2
  EXPECT_EQ(NextVictimHash(*pool), H(2));  // default level: LRU
  EXPECT_EQ(NextVictimHash(*pool), H(4));
  EXPECT_EQ(NextVictimHash(*pool), H(1));  // the high one last
  EXPECT_TRUE(pool->ValidateInvariants().ok());
}

TEST_F(PoolPriorityTest, ExpiredRetentionFallsBackToTheDefault) {
  auto pool = Make(4);
  const BlockId kept = CacheAndRelease(*pool, 1, {.priority = 90, .retention_seconds = 10});
  CacheAndRelease(*pool, 2);
  CacheAndRelease(*pool, 3);
  CacheAndRelease(*pool, 4);
  EXPECT_EQ(pool->Priority(kept), 90);
  now_ = 11;
  // The pick sees the retention over: block 1 rejoins the default level as its most recently
  // released block, and block 2 (the default level's least recent) goes.
  EXPECT_EQ(NextVictimHash(*pool), H(2));
  EXPECT_EQ(pool->Priority(kept), kDefaultCachePriority);
  // A default block released now is more recent than block 1, so block 1 goes before it.
  BlockId fresh = kNullBlock;
  for (BlockId b = 0; b < pool->num_blocks(); ++b) {
    if (!pool->IsCached(b) && pool->RefCount(b) == 1) fresh = b;
  }
  ASSERT_NE(fresh, kNullBlock);
  ASSERT_TRUE(*pool->Insert({.block = fresh, .hash = H(5)}));
  ASSERT_TRUE(pool->Unpin(fresh).ok());
  EXPECT_EQ(NextVictimHash(*pool), H(3));
  EXPECT_EQ(NextVictimHash(*pool), H(4));
  EXPECT_EQ(NextVictimHash(*pool), H(1));
}

TEST_F(PoolPriorityTest, CapLimitsHighPriorityBlocks) {
  auto pool = Make(4, /*cap=*/0.25);  // one block may be above the default
  const BlockId first = CacheAndRelease(*pool, 1, {.priority = 90});
  const BlockId second = CacheAndRelease(*pool, 2, {.priority = 90});
  EXPECT_EQ(pool->Priority(first), 90);
  EXPECT_EQ(pool->Priority(second), kDefaultCachePriority);
}

TEST_F(PoolPriorityTest, RaiseMovesUpNeverDownAndRenewsRetention) {
  auto pool = Make(2);
  const BlockId b = CacheAndRelease(*pool, 1);
  ASSERT_TRUE(pool->RaisePriority(b, {.priority = 70, .retention_seconds = 5}).ok());
  EXPECT_EQ(pool->Priority(b), 70);
  ASSERT_TRUE(pool->RaisePriority(b, {.priority = 20}).ok());
  EXPECT_EQ(pool->Priority(b), 70);
  now_ = 4;
  ASSERT_TRUE(pool->RaisePriority(b, {.priority = 70, .retention_seconds = 5}).ok());  // to 9
  CacheAndRelease(*pool, 2);
  now_ = 6;
  EXPECT_EQ(NextVictimHash(*pool), H(2));  // still 70 at t=6
  EXPECT_EQ(pool->RaisePriority(b, {.priority = 101}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool->RaisePriority(b, {.retention_seconds = 0}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(PoolPriorityTest, BadOptionsAndInsertsAreRefused) {
  EXPECT_EQ(BlockPool::Create({.num_blocks = 2, .enable_priorities = true}, MakeLruPolicy())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BlockPool::Create(
                {.num_blocks = 2, .enable_priorities = true, .max_high_priority_fraction = 0})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  auto pool = Make(2);
  const BlockId b = *pool->Allocate();
  EXPECT_EQ(pool->Insert({.block = b, .hash = H(1), .priority = {.priority = -1}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(pool->IsCached(b));
}

TEST_F(PoolPriorityTest, PromotedDuplicateKeepsTheHoldersPriority) {
  auto pool = Make(3);
  const BlockId a = *pool->Allocate(), copy = *pool->Allocate();
  ASSERT_TRUE(*pool->Insert({.block = a, .hash = H(1), .priority = {.priority = 60}}));
  ASSERT_TRUE(*pool->AddDuplicate({.block = copy, .hash = H(1)}));
  ASSERT_TRUE(pool->Unpin(a).ok());
  std::vector<BlockId> all;
  ASSERT_TRUE(pool->Allocate(pool->NumAvailableBlocks(), &all).ok());
  ASSERT_EQ(pool->FindCached(H(1)), copy);
  EXPECT_EQ(pool->Priority(copy), 60);
}

// A system prompt cached at priority 90 survives traffic that evicts everything else.
TEST(ManagerPriorityTest, SystemPromptSpanOutlivesOtherTraffic) {
  for (bool enable : {true, false}) {
    SCOPED_TRACE(enable ? "priorities on" : "priorities off");
    auto m =
        *KvCacheManager::Create({.num_blocks = 8, .block_size = 4, .enable_priorities = enable});
    std::vector<TokenId> prompt{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    RequestCacheKeys keys;
    keys.priority_spans.push_back({.begin_token = 0, .end_token = 8, .priority = {.priority = 90}});
    auto first = *m->NewRequest(1, prompt, keys);
    ASSERT_TRUE(m->AllocateSlots(first, 12).ok());
    ASSERT_TRUE(m->Free(1).ok());
    for (RequestId id = 2; id < 6; ++id) {  // each fills the pool and is freed
      std::vector<TokenId> other(32, static_cast<TokenId>(100 + id));
      auto r = *m->NewRequest(id, other);
      ASSERT_TRUE(m->AllocateSlots(r, 24).ok());
      ASSERT_TRUE(m->Free(id).ok());
    }
    auto again = *m->NewRequest(9, prompt);
    EXPECT_EQ(m->GetComputedBlocks(again)->num_computed_tokens, enable ? 8 : 0);
    EXPECT_TRUE(m->ValidateInvariants().ok());
  }
}

TEST(ManagerPriorityTest, AHitRaisesTheCachedBlocks) {
  auto m = *KvCacheManager::Create({.num_blocks = 8, .block_size = 4, .enable_priorities = true});
  const std::vector<TokenId> prompt{1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto low = *m->NewRequest(1, prompt);
  ASSERT_TRUE(m->AllocateSlots(low, 9).ok());
  const BlockId first_block = (*m->GetBlockTable(1))[0];
  EXPECT_EQ(m->pool().Priority(first_block), kDefaultCachePriority);
  auto high = *m->NewRequest(2, prompt, {.priority = {.priority = 75}});
  const ComputedBlocks hit = *m->GetComputedBlocks(high);
  ASSERT_EQ(hit.num_computed_tokens, 8);
  ASSERT_TRUE(m->AllocateSlots(high, 1, hit).ok());
  EXPECT_EQ(m->pool().Priority(first_block), 75);
}

TEST(ManagerPriorityTest, BadPrioritiesAreRefusedByNewRequest) {
  auto m = *KvCacheManager::Create({.num_blocks = 4, .block_size = 4, .enable_priorities = true});
  const std::vector<TokenId> prompt{1, 2, 3};
  EXPECT_EQ(m->NewRequest(1, prompt, {.priority = {.priority = 200}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  RequestCacheKeys overlapping;
  overlapping.priority_spans = {{.begin_token = 0, .end_token = 8},
                                {.begin_token = 4, .end_token = 12}};
  EXPECT_EQ(m->NewRequest(1, prompt, overlapping).status().code(),
            absl::StatusCode::kInvalidArgument);
  RequestCacheKeys empty_span;
  empty_span.priority_spans = {{.begin_token = 5, .end_token = 5}};
  EXPECT_EQ(m->NewRequest(1, prompt, empty_span).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagedkv
