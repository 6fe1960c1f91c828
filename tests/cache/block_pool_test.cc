// Copyright 2026 The pagedkv Authors.
#include "pagedkv/cache/block_pool.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pagedkv {
namespace {

BlockHash H(uint64_t id) { return BlockHash::FromU64(id); }

std::unique_ptr<BlockPool> MakePool(int32_t num_blocks, int32_t block_size = 2,
                                    std::string policy = "lru") {
  auto pool = BlockPool::Create(
      {.num_blocks = num_blocks, .block_size = block_size, .eviction_policy = policy});
  EXPECT_TRUE(pool.ok()) << pool.status();
  return *std::move(pool);
}

// Allocates a block and caches it under `hash` with parent `parent`.
BlockId AllocCached(BlockPool& pool, uint64_t hash, uint64_t parent = 0) {
  auto b = pool.Allocate();
  EXPECT_TRUE(b.ok()) << b.status();
  auto inserted = pool.Insert({.block = *b, .hash = H(hash), .parent_hash = H(parent)});
  EXPECT_TRUE(inserted.ok() && *inserted);
  return *b;
}

struct Snapshot {
  int32_t free, evictable, used, cached;
  std::vector<int32_t> refs;
  bool operator==(const Snapshot&) const = default;
};
Snapshot Snap(const BlockPool& p) {
  Snapshot s{p.NumFreeBlocks(), p.NumEvictableBlocks(), p.NumUsedBlocks(), p.NumCachedBlocks(), {}};
  for (BlockId b = 0; b < p.num_blocks(); ++b) s.refs.push_back(p.RefCount(b));
  return s;
}

TEST(BlockPoolTest, RejectsInvalidConfig) {
  EXPECT_EQ(BlockPool::Create({.num_blocks = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BlockPool::Create({.num_blocks = 4, .block_size = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BlockPool::Create({.num_blocks = 4, .eviction_policy = "random"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BlockPoolTest, AllocateAndFreeUncachedBlocks) {
  auto pool = MakePool(3);
  std::vector<BlockId> got;
  ASSERT_TRUE(pool->Allocate(3, &got).ok());
  EXPECT_EQ(got, (std::vector<BlockId>{0, 1, 2}));
  EXPECT_EQ(pool->NumUsedBlocks(), 3);
  EXPECT_EQ(pool->Allocate().status().code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(pool->Unpin(got).ok());
  EXPECT_EQ(pool->NumFreeBlocks(), 3);
  EXPECT_EQ(pool->NumEvictableBlocks(), 0);
  EXPECT_TRUE(pool->ValidateInvariants().ok());
}

TEST(BlockPoolTest, AllocateManyIsAllOrNothing) {
  auto pool = MakePool(4);
  AllocCached(*pool, 1);
  const Snapshot before = Snap(*pool);
  std::vector<BlockId> got;
  EXPECT_EQ(pool->Allocate(4, &got).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(Snap(*pool), before);
  EXPECT_EQ(pool->Allocate(-1, &got).code(), absl::StatusCode::kInvalidArgument);
}

TEST(BlockPoolTest, ReleasedCachedBlocksStayFindableUntilEvicted) {
  auto pool = MakePool(2);
  const BlockId a = AllocCached(*pool, 10);
  ASSERT_TRUE(pool->Unpin(a).ok());
  EXPECT_EQ(pool->NumEvictableBlocks(), 1);
  EXPECT_EQ(pool->FindCached(H(10)), a);
  // The free block goes first; the cached one is evicted only when nothing else is left.
  auto b = pool->Allocate();
  ASSERT_TRUE(b.ok());
  EXPECT_NE(*b, a);
  EXPECT_EQ(pool->FindCached(H(10)), a);
  auto c = pool->Allocate();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, a);
  EXPECT_EQ(pool->FindCached(H(10)), kNullBlock);
  EXPECT_FALSE(pool->IsCached(a));
  EXPECT_EQ(pool->stats().evictions, 1);
  EXPECT_TRUE(pool->ValidateInvariants().ok());
}

TEST(BlockPoolTest, PinEvictableBlockTakesItOffTheEvictableSet) {
  auto pool = MakePool(2);
  const BlockId a = AllocCached(*pool, 10);
  ASSERT_TRUE(pool->Unpin(a).ok());
  ASSERT_TRUE(pool->Pin(a).ok());
  EXPECT_EQ(pool->RefCount(a), 1);
  EXPECT_EQ(pool->NumEvictableBlocks(), 0);
  ASSERT_TRUE(pool->Allocate().ok());
  EXPECT_EQ(pool->Allocate().status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pool->FindCached(H(10)), a);
}

TEST(BlockPoolTest, PinAndUnpinErrorsChangeNothing) {
  auto pool = MakePool(3);
  const BlockId a = AllocCached(*pool, 1);
  const Snapshot before = Snap(*pool);
  EXPECT_EQ(pool->Pin(7).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool->Pin(-1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool->Pin(2).code(), absl::StatusCode::kFailedPrecondition);  // free block
  EXPECT_EQ(pool->Unpin(2).code(), absl::StatusCode::kFailedPrecondition);
  // Repeated entry would drop `a` below zero: nothing changes.
  const std::vector<BlockId> twice = {a, a};
  EXPECT_EQ(pool->Unpin(twice).code(), absl::StatusCode::kFailedPrecondition);
  const std::vector<BlockId> bad_range = {a, 9};
  EXPECT_EQ(pool->Unpin(bad_range).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Snap(*pool), before);
  ASSERT_TRUE(pool->Unpin(a).ok());
  EXPECT_EQ(pool->Unpin(a).code(), absl::StatusCode::kFailedPrecondition);  // double free
  EXPECT_TRUE(pool->ValidateInvariants().ok());
}

TEST(BlockPoolTest, UnpinListQueuesInCallOrderSoTailIsEvictedFirst) {
  auto pool = MakePool(4);
  std::vector<BlockId> chain;
  for (uint64_t i = 1; i <= 4; ++i) chain.push_back(AllocCached(*pool, i, i - 1));
  std::vector<BlockId> tail_first(chain.rbegin(), chain.rend());
  ASSERT_TRUE(pool->Unpin(tail_first).ok());
  // Evictions go 4, 3, 2, 1: the chain's tail first.
  for (int i = 3; i >= 0; --i) {
    auto b = pool->Allocate();
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(*b, chain[i]);
    EXPECT_EQ(pool->FindCached(H(i + 1)), kNullBlock);
  }
}

TEST(BlockPoolTest, SharedBlockIsQueuedOnceWhenLastReferenceGoes) {
  auto pool = MakePool(2);
  const BlockId a = AllocCached(*pool, 1);
  ASSERT_TRUE(pool->Pin(a).ok());
  const std::vector<BlockId> both = {a, a};
  ASSERT_TRUE(pool->Unpin(both).ok());
  EXPECT_EQ(pool->NumEvictableBlocks(), 1);
  EXPECT_TRUE(pool->ValidateInvariants().ok());
}

TEST(BlockPoolTest, InsertDuplicateHashLeavesBlockUncached) {
  auto pool = MakePool(3);
  const BlockId a = AllocCached(*pool, 5);
  auto b = pool->Allocate();
  ASSERT_TRUE(b.ok());
  auto inserted = pool->Insert({.block = *b, .hash = H(5), .parent_hash = H(0)});
  ASSERT_TRUE(inserted.ok());
  EXPECT_FALSE(*inserted);
  EXPECT_FALSE(pool->IsCached(*b));
  EXPECT_EQ(pool->FindCached(H(5)), a);
  ASSERT_TRUE(pool->Unpin(*b).ok());
  EXPECT_EQ(pool->NumFreeBlocks(), 2);  // uncached: back to free, not evictable
}

TEST(BlockPoolTest, InsertErrorsChangeNothing) {
  auto pool = MakePool(3, /*block_size=*/2);
  const BlockId a = AllocCached(*pool, 5);
  auto b = pool->Allocate();
  ASSERT_TRUE(b.ok());
  const Snapshot before = Snap(*pool);
  const std::vector<TokenId> three = {1, 2, 3};
  EXPECT_EQ(pool->Insert({.block = 9, .hash = H(6), .parent_hash = H(0)}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool->Insert({.block = 2, .hash = H(6), .parent_hash = H(0)}).status().code(),
            absl::StatusCode::kFailedPrecondition);  // free
  EXPECT_EQ(pool->Insert({.block = a, .hash = H(6), .parent_hash = H(0)}).status().code(),
            absl::StatusCode::kFailedPrecondition);  // already cached
  EXPECT_EQ(pool->Insert({.block = *b, .hash = H(6), .parent_hash = H(5), .tokens = three})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);  // token count
  EXPECT_EQ(
      pool->Insert(
              {.block = *b, .hash = H(6), .parent_hash = H(4), .tokens = {}, .parent_block = a})
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);  // parent hash mismatch
  EXPECT_EQ(Snap(*pool), before);
  EXPECT_EQ(pool->FindCached(H(6)), kNullBlock);
}

TEST(BlockPoolTest, TokensAndLinks) {
  auto pool = MakePool(4, /*block_size=*/2);
  const std::vector<TokenId> t0 = {1, 2}, t1 = {3, 4};
  auto a = pool->Allocate();
  auto b = pool->Allocate();
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(*pool->Insert({.block = *a, .hash = H(1), .parent_hash = H(0), .tokens = t0}));
  ASSERT_TRUE(*pool->Insert(
      {.block = *b, .hash = H(2), .parent_hash = H(1), .tokens = t1, .parent_block = *a}));
  EXPECT_TRUE(pool->TokensMatch(*a, t0));
  EXPECT_FALSE(pool->TokensMatch(*a, t1));
  EXPECT_EQ(std::vector<TokenId>(pool->CachedTokens(*b).begin(), pool->CachedTokens(*b).end()), t1);
  EXPECT_EQ(pool->ParentHash(*b), H(1));
  EXPECT_TRUE(pool->IsLinkedTo(*a, kNullBlock));
  EXPECT_TRUE(pool->IsLinkedTo(*b, *a));
  EXPECT_FALSE(pool->IsLinkedTo(*b, kNullBlock));
  // Re-caching the parent (a new generation) breaks the link.
  const uint32_t gen = pool->Generation(*a);
  ASSERT_TRUE(pool->Uncache(*a).ok());
  EXPECT_FALSE(pool->IsLinkedTo(*b, *a));
  ASSERT_TRUE(*pool->Insert({.block = *a, .hash = H(1), .parent_hash = H(0), .tokens = t0}));
  EXPECT_EQ(pool->Generation(*a), gen + 1);
  EXPECT_FALSE(pool->IsLinkedTo(*b, *a));
}

TEST(BlockPoolTest, WithoutStoredTokensEverythingMatches) {
  auto pool = *BlockPool::Create({.num_blocks = 2, .block_size = 2, .store_tokens = false});
  auto a = pool->Allocate();
  const std::vector<TokenId> t0 = {1, 2}, t1 = {3, 4};
  ASSERT_TRUE(*pool->Insert({.block = *a, .hash = H(1), .parent_hash = H(0), .tokens = t0}));
  EXPECT_TRUE(pool->TokensMatch(*a, t1));
  EXPECT_TRUE(pool->CachedTokens(*a).empty());
}

TEST(BlockPoolTest, UncacheAndReset) {
  auto pool = MakePool(4);
  const BlockId used = AllocCached(*pool, 1);
  const BlockId idle = AllocCached(*pool, 2, 1);
  ASSERT_TRUE(pool->Unpin(idle).ok());
  EXPECT_EQ(pool->Uncache(3).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(pool->Uncache(idle).ok());
  EXPECT_EQ(pool->NumFreeBlocks(), 3);
  EXPECT_EQ(pool->NumEvictableBlocks(), 0);
  const BlockId idle2 = AllocCached(*pool, 3, 1);
  ASSERT_TRUE(pool->Unpin(idle2).ok());
  pool->ResetPrefixCache();
  EXPECT_EQ(pool->NumCachedBlocks(), 0);
  EXPECT_EQ(pool->NumFreeBlocks(), 3);
  EXPECT_EQ(pool->RefCount(used), 1);
  EXPECT_FALSE(pool->IsCached(used));
  EXPECT_EQ(pool->FindCached(H(1)), kNullBlock);
  EXPECT_EQ(pool->stats().resets, 1);
  ASSERT_TRUE(pool->Unpin(used).ok());
  EXPECT_EQ(pool->NumFreeBlocks(), 4);
  EXPECT_TRUE(pool->ValidateInvariants().ok());
}

TEST(BlockPoolTest, EventsDescribeEveryIndexChange) {
  auto pool = MakePool(1, /*block_size=*/2);
  std::vector<std::string> log;
  std::vector<TokenId> seen_tokens;
  const int id = pool->AddEventListener([&](const KvEvent& e) {
    log.push_back(e.ToString());
    if (e.type == KvEventType::kBlockStored) {
      seen_tokens.assign(e.token_ids.begin(), e.token_ids.end());
    }
  });
  const std::vector<TokenId> t = {7, 8};
  auto a = pool->Allocate();
  ASSERT_TRUE(*pool->Insert({.block = *a, .hash = H(1), .parent_hash = H(0), .tokens = t}));
  ASSERT_TRUE(pool->Unpin(*a).ok());
  ASSERT_TRUE(pool->Allocate().ok());  // evicts
  pool->ResetPrefixCache();
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0],
            "stored hash=" + H(1).ToString() + " parent=" + H(0).ToString() + " tokens=2 block=0");
  EXPECT_EQ(log[1],
            "removed hash=" + H(1).ToString() + " parent=" + H(0).ToString() + " tokens=2 block=0");
  EXPECT_EQ(log[2], "cleared");
  EXPECT_EQ(seen_tokens, t);
  EXPECT_TRUE(pool->RemoveEventListener(id));
  EXPECT_FALSE(pool->RemoveEventListener(id));
  pool->ResetPrefixCache();
  EXPECT_EQ(log.size(), 3u);
}

// A policy that evicts the most recently released block (to show plugging works).
class MruPolicy final : public EvictionPolicy {
 public:
  std::string_view Name() const override { return "mru"; }
  void Init(int32_t) override { stack_.clear(); }
  void OnInsert(BlockId, const BlockHash&) override {}
  void OnAccess(BlockId b, const BlockHash&) override { Erase(b); }
  void OnRelease(BlockId b, const BlockHash&) override { stack_.push_back(b); }
  void OnRemove(BlockId b, const BlockHash&) override { Erase(b); }
  BlockId PickVictim() override {
    const BlockId b = stack_.back();
    stack_.pop_back();
    return b;
  }
  void Clear() override { stack_.clear(); }

 private:
  void Erase(BlockId b) {
    stack_.erase(std::remove(stack_.begin(), stack_.end(), b), stack_.end());
  }
  std::vector<BlockId> stack_;
};

TEST(BlockPoolTest, PluggedPolicyChoosesVictims) {
  auto pool = *BlockPool::Create({.num_blocks = 3}, std::make_unique<MruPolicy>());
  EXPECT_EQ(pool->policy().Name(), "mru");
  const BlockId a = AllocCached(*pool, 1), b = AllocCached(*pool, 2), c = AllocCached(*pool, 3);
  for (BlockId x : {a, b, c}) ASSERT_TRUE(pool->Unpin(x).ok());
  EXPECT_EQ(*pool->Allocate(), c);
  EXPECT_EQ(*pool->Allocate(), b);
}

// A broken policy must not corrupt the pool silently.
class BrokenPolicy final : public EvictionPolicy {
 public:
  std::string_view Name() const override { return "broken"; }
  void Init(int32_t) override {}
  void OnInsert(BlockId, const BlockHash&) override {}
  void OnAccess(BlockId, const BlockHash&) override {}
  void OnRelease(BlockId, const BlockHash&) override {}
  void OnRemove(BlockId, const BlockHash&) override {}
  BlockId PickVictim() override { return 12345; }
  void Clear() override {}
};

TEST(BlockPoolTest, MisbehavingPolicyIsReportedAsInternal) {
  auto pool = *BlockPool::Create({.num_blocks = 1}, std::make_unique<BrokenPolicy>());
  const BlockId a = AllocCached(*pool, 1);
  ASSERT_TRUE(pool->Unpin(a).ok());
  EXPECT_EQ(pool->Allocate().status().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace pagedkv

namespace pagedkv {
namespace {

TEST(BlockPoolMemoryTest, EstimateCoversTheBookkeeping) {
  const int64_t small =
      BlockPool::EstimateBytes({.num_blocks = 1000, .block_size = 16, .store_tokens = false});
  EXPECT_GE(small, 1000 * 64);
  EXPECT_EQ(BlockPool::EstimateBytes({.num_blocks = 2000, .block_size = 16, .store_tokens = false}),
            2 * small);
  EXPECT_GT(BlockPool::EstimateBytes({.num_blocks = 1000, .block_size = 16, .store_tokens = true}),
            small + 1000 * 16 * 4 - 1);
  EXPECT_EQ(BlockPool::EstimateBytes({.num_blocks = 0, .block_size = 16}), 0);
}

#if !defined(__SANITIZE_ADDRESS__)
// Far more bookkeeping than any machine holds: ResourceExhausted, not bad_alloc. (Skipped under
// AddressSanitizer, whose allocator aborts on such requests instead of failing them.)
TEST(BlockPoolMemoryTest, UnallocatablePoolIsResourceExhausted) {
  auto pool = BlockPool::Create({.num_blocks = INT32_MAX, .block_size = 1 << 20});
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(pool.status().message().find("use fewer blocks"), std::string::npos);
}
#endif

}  // namespace
}  // namespace pagedkv
