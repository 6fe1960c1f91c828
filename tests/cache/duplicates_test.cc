// Copyright 2026 The pagedkv Authors.
//
// Duplicate blocks (BlockPool::AddDuplicate): a used copy of an indexed block takes its place when
// the indexed one is evicted, so the prefix stays reachable while any request holds its KV; and
// the KvCacheManager records the copies two requests compute in the same step.
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/kv_cache_manager.h"

namespace pagedkv {
namespace {

BlockHash H(uint64_t id) { return BlockHash::FromU64(id); }

class PoolDuplicatesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pool_ = *BlockPool::Create({.num_blocks = 4, .block_size = 2});
    pool_->AddEventListener([this](const KvEvent& e) { events_.push_back(e); });
  }
  BlockId Alloc() { return *pool_->Allocate(); }
  // Indexes `block` under `hash` with parent `parent_block` (kNullBlock: none).
  void Cache(BlockId block, uint64_t hash, uint64_t parent, BlockId parent_block = kNullBlock) {
    const std::vector<TokenId> t{static_cast<TokenId>(hash), 0};
    ASSERT_TRUE(*pool_->Insert({.block = block,
                                .hash = H(hash),
                                .parent_hash = H(parent),
                                .tokens = t,
                                .parent_block = parent_block}));
  }
  absl::StatusOr<bool> Dup(BlockId block, uint64_t hash, uint64_t parent, TokenId first) {
    const std::vector<TokenId> t{first, 0};
    return pool_->AddDuplicate(
        {.block = block, .hash = H(hash), .parent_hash = H(parent), .tokens = t});
  }
  // Fills the pool's free blocks and evicts every evictable one; returns what was allocated.
  std::vector<BlockId> EvictAll() {
    std::vector<BlockId> taken;
    EXPECT_TRUE(pool_->Allocate(pool_->NumAvailableBlocks(), &taken).ok());
    return taken;
  }

  std::unique_ptr<BlockPool> pool_;
  std::vector<KvEvent> events_;
};

TEST_F(PoolDuplicatesTest, UsedDuplicateTakesTheEvictedHoldersPlace) {
  const BlockId a = Alloc(), b = Alloc();
  Cache(a, 10, 0);
  ASSERT_TRUE(*Dup(b, 10, 0, 10));
  EXPECT_EQ(pool_->NumDuplicateBlocks(), 1);
  EXPECT_FALSE(pool_->IsCached(b));
  ASSERT_TRUE(pool_->Unpin(a).ok());  // a is evictable, b still used
  events_.clear();
  EvictAll();
  EXPECT_EQ(pool_->FindCached(H(10)), b);
  EXPECT_EQ(pool_->NumDuplicateBlocks(), 0);
  EXPECT_EQ(pool_->stats().promoted_duplicates, 1);
  // A promotion enters the index (and is announced), so it counts as a store:
  // stored_blocks - evictions stays the number of cached blocks.
  EXPECT_EQ(pool_->stats().stored_blocks, 2);
  EXPECT_EQ(pool_->stats().stored_blocks - pool_->stats().evictions, pool_->NumCachedBlocks());
  const std::vector<TokenId> want{10, 0};
  EXPECT_TRUE(std::ranges::equal(pool_->CachedTokens(b), want));
  EXPECT_EQ(*pool_->ParentHash(b), H(0));
  ASSERT_EQ(events_.size(), 2u);  // the router sees the hash leave and come back
  EXPECT_EQ(events_[0].type, KvEventType::kBlockRemoved);
  EXPECT_EQ(events_[1].type, KvEventType::kBlockStored);
  EXPECT_EQ(events_[1].block, b);
  EXPECT_TRUE(pool_->ValidateInvariants().ok());
}

TEST_F(PoolDuplicatesTest, ChildrenOfTheEvictedHolderStayLinked) {
  const BlockId parent = Alloc(), copy = Alloc(), child = Alloc();
  Cache(parent, 10, 0);
  Cache(child, 11, 10, parent);
  ASSERT_TRUE(*Dup(copy, 10, 0, 10));
  EXPECT_TRUE(pool_->IsLinkedTo(child, parent));
  ASSERT_TRUE(pool_->Unpin(parent).ok());
  EvictAll();  // only `parent` was evictable
  ASSERT_EQ(pool_->FindCached(H(10)), copy);
  EXPECT_TRUE(pool_->IsLinkedTo(child, copy));
  EXPECT_FALSE(pool_->IsLinkedTo(child, parent));
  EXPECT_TRUE(pool_->MatchesChain(child, H(10), std::vector<TokenId>{11, 0}, {}, copy));
}

TEST_F(PoolDuplicatesTest, EarliestDuplicateIsPromotedAndInheritsTheOthers) {
  const BlockId a = Alloc(), b = Alloc(), c = Alloc();
  Cache(a, 10, 0);
  ASSERT_TRUE(*Dup(b, 10, 0, 10));
  ASSERT_TRUE(*Dup(c, 10, 0, 10));
  ASSERT_TRUE(pool_->Unpin(a).ok());
  EvictAll();
  ASSERT_EQ(pool_->FindCached(H(10)), b);
  EXPECT_EQ(pool_->NumDuplicateBlocks(), 1);  // c is now b's duplicate
  ASSERT_TRUE(pool_->Unpin(b).ok());
  EvictAll();
  EXPECT_EQ(pool_->FindCached(H(10)), c);
  EXPECT_EQ(pool_->stats().promoted_duplicates, 2);
  EXPECT_TRUE(pool_->ValidateInvariants().ok());
}

TEST_F(PoolDuplicatesTest, ReleasedDuplicateIsFreedAndForgotten) {
  const BlockId a = Alloc(), b = Alloc();
  Cache(a, 10, 0);
  ASSERT_TRUE(*Dup(b, 10, 0, 10));
  ASSERT_TRUE(pool_->Unpin(b).ok());
  EXPECT_EQ(pool_->NumDuplicateBlocks(), 0);
  EXPECT_EQ(pool_->NumFreeBlocks(), 3);
  ASSERT_TRUE(pool_->Unpin(a).ok());
  EvictAll();
  EXPECT_EQ(pool_->FindCached(H(10)), kNullBlock);
  EXPECT_EQ(pool_->stats().promoted_duplicates, 0);
}

TEST_F(PoolDuplicatesTest, UncacheAndResetForgetDuplicates) {
  const BlockId a = Alloc(), b = Alloc();
  Cache(a, 10, 0);
  ASSERT_TRUE(*Dup(b, 10, 0, 10));
  ASSERT_TRUE(pool_->Uncache(a).ok());  // the holder was wrong: so is its copy
  EXPECT_EQ(pool_->NumDuplicateBlocks(), 0);
  Cache(a, 20, 0);
  ASSERT_TRUE(*Dup(b, 20, 0, 20));
  pool_->ResetPrefixCache();
  EXPECT_EQ(pool_->NumDuplicateBlocks(), 0);
  EXPECT_TRUE(pool_->ValidateInvariants().ok());
}

TEST_F(PoolDuplicatesTest, InsertingADuplicateForgetsItAsOne) {
  const BlockId a = Alloc(), b = Alloc();
  Cache(a, 10, 0);
  ASSERT_TRUE(*Dup(b, 10, 0, 10));
  Cache(b, 30, 0);
  EXPECT_EQ(pool_->NumDuplicateBlocks(), 0);
  EXPECT_TRUE(pool_->ValidateInvariants().ok());
}

TEST_F(PoolDuplicatesTest, DifferentContentIsNotADuplicate) {
  const BlockId a = Alloc(), b = Alloc();
  Cache(a, 10, 0);
  EXPECT_FALSE(*Dup(b, 10, 0, 99));  // same hash, other tokens (a collision)
  EXPECT_FALSE(*Dup(b, 10, 7, 10));  // other parent hash
  EXPECT_FALSE(*Dup(b, 12, 0, 12));  // nothing cached under the hash
  EXPECT_EQ(pool_->NumDuplicateBlocks(), 0);
}

TEST_F(PoolDuplicatesTest, BadCallsChangeNothing) {
  const BlockId a = Alloc(), b = Alloc();
  Cache(a, 10, 0);
  EXPECT_EQ(Dup(a, 10, 0, 10).status().code(), absl::StatusCode::kFailedPrecondition);  // cached
  EXPECT_EQ(Dup(3, 10, 0, 10).status().code(), absl::StatusCode::kFailedPrecondition);  // free
  EXPECT_EQ(Dup(9, 10, 0, 10).status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<TokenId> three{10, 0, 0};
  EXPECT_EQ(pool_->AddDuplicate({.block = b, .hash = H(10), .parent_hash = H(0), .tokens = three})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(*Dup(b, 10, 0, 10));
  EXPECT_EQ(Dup(b, 10, 0, 10).status().code(), absl::StatusCode::kFailedPrecondition);  // twice
  EXPECT_EQ(pool_->NumDuplicateBlocks(), 1);
  EXPECT_TRUE(pool_->ValidateInvariants().ok());
}

// vLLM's scenario: two identical 49-token prompts miss together (block size 16: 3 full blocks
// each), the first is freed and evicted while the second runs; a third identical prompt must
// still hit the 48 tokens the second one holds.
void IdenticalPromptsKeepThePrefix(bool verify_tokens) {
  SCOPED_TRACE(verify_tokens ? "verified" : "hash only");
  auto m =
      *KvCacheManager::Create({.num_blocks = 8, .block_size = 16, .verify_tokens = verify_tokens});
  std::vector<TokenId> prompt(49);
  for (int i = 0; i < 49; ++i) prompt[i] = 100 + i;
  auto a = *m->NewRequest(1, prompt);
  auto b = *m->NewRequest(2, prompt);
  const ComputedBlocks miss_a = *m->GetComputedBlocks(a);
  const ComputedBlocks miss_b = *m->GetComputedBlocks(b);  // same step: neither is cached yet
  ASSERT_EQ(miss_a.num_computed_tokens, 0);
  ASSERT_EQ(miss_b.num_computed_tokens, 0);
  ASSERT_TRUE(m->AllocateSlots(a, 49, miss_a).ok());
  ASSERT_TRUE(m->AllocateSlots(b, 49, miss_b).ok());
  EXPECT_EQ(m->pool().NumDuplicateBlocks(), 3);
  ASSERT_TRUE(m->Free(1).ok());
  // Evict a's three cached blocks: allocate everything that is free or evictable.
  auto filler = *m->NewRequest(3, std::vector<TokenId>(16 * m->NumAvailableBlocks(), 7));
  ASSERT_TRUE(m->AllocateSlots(filler, filler.num_tokens()).ok());
  ASSERT_TRUE(m->Free(3).ok());
  EXPECT_EQ(m->stats().promoted_duplicates, 3);
  auto c = *m->NewRequest(4, prompt);
  EXPECT_EQ(m->GetComputedBlocks(c)->num_computed_tokens, 48);
  EXPECT_TRUE(m->ValidateInvariants().ok());
}

TEST(ManagerDuplicatesTest, IdenticalPromptsKeepThePrefixWhenTheIndexedOneIsEvicted) {
  IdenticalPromptsKeepThePrefix(/*verify_tokens=*/true);
  IdenticalPromptsKeepThePrefix(/*verify_tokens=*/false);
}

}  // namespace
}  // namespace pagedkv
