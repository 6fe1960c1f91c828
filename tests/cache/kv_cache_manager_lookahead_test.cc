// Copyright 2026 The pagedkv Authors.
//
// KvCacheManager's lookahead slots (AllocateOptions::num_lookahead_tokens) and TruncateRequest:
// the speculative-decoding calls. The randomised differential test covers them too.
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"

namespace pagedkv {
namespace {

constexpr int32_t kBs = 4;

std::vector<TokenId> Iota(int n, int start = 0) {
  std::vector<TokenId> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + i;
  return v;
}

class LookaheadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    manager_ = *KvCacheManager::Create({.num_blocks = 8, .block_size = kBs});
  }
  void TearDown() override {
    for (RequestId id : {1, 2, 3}) {
      if (manager_->HasRequest(id)) {
        EXPECT_TRUE(manager_->Free(id).ok());
      }
    }
    EXPECT_EQ(manager_->pool().NumUsedBlocks(), 0);
    EXPECT_TRUE(manager_->ValidateInvariants().ok()) << manager_->ValidateInvariants();
  }
  std::vector<BlockId> Table(RequestId id) const {
    auto t = manager_->GetBlockTable(id);
    return t.ok() ? std::vector<BlockId>(t->begin(), t->end()) : std::vector<BlockId>{};
  }
  // A new request whose whole prompt gets slots, plus `lookahead` slots.
  CacheRequest Admit(RequestId id, std::vector<TokenId> prompt, int64_t lookahead = 0) {
    CacheRequest req = *manager_->NewRequest(id, prompt);
    const ComputedBlocks hit = *manager_->GetComputedBlocks(req);
    EXPECT_TRUE(manager_
                    ->AllocateSlots(req, req.num_tokens() - hit.num_computed_tokens, hit,
                                    {.num_lookahead_tokens = lookahead})
                    .ok());
    return req;
  }

  std::unique_ptr<KvCacheManager> manager_;
};

TEST_F(LookaheadTest, LookaheadSlotsAreReservedButNeverCached) {
  CacheRequest req = Admit(1, Iota(6), /*lookahead=*/5);  // 11 slots -> 3 blocks
  EXPECT_EQ(Table(1).size(), 3u);
  EXPECT_EQ(*manager_->NumAllocatedTokens(1), 6);
  EXPECT_EQ(*manager_->NumLookaheadTokens(1), 5);
  EXPECT_EQ(manager_->pool().NumCachedBlocks(), 1);  // only block 0 holds 4 request tokens
  EXPECT_TRUE(manager_->ValidateInvariants().ok());
}

TEST_F(LookaheadTest, AcceptedDraftsKeepTheirSlotsAndGetCached) {
  CacheRequest req = Admit(1, Iota(6), /*lookahead=*/5);
  const std::vector<BlockId> before = Table(1);
  // Three drafts accepted + the bonus token: 4 tokens, then 2 lookahead slots for the next step.
  ASSERT_TRUE(req.AppendTokens(Iota(4, 6)).ok());
  ASSERT_TRUE(manager_->AllocateSlots(req, 4, {}, {.num_lookahead_tokens = 2}).ok());
  EXPECT_EQ(Table(1), before);  // 10 + 2 slots fit in the same 3 blocks
  EXPECT_EQ(manager_->pool().NumCachedBlocks(), 2);
  EXPECT_EQ(manager_->pool().FindCached(req.block_hashes()[1]), before[1]);
}

TEST_F(LookaheadTest, ASmallerReservationReleasesTheTail) {
  CacheRequest req = Admit(1, Iota(6), /*lookahead=*/10);  // 16 slots -> 4 blocks
  EXPECT_EQ(Table(1).size(), 4u);
  const int32_t available = manager_->NumAvailableBlocks();
  ASSERT_TRUE(req.AppendToken(9).ok());
  ASSERT_TRUE(manager_->AllocateSlots(req, 1).ok());  // plain decode: 7 slots -> 2 blocks
  EXPECT_EQ(Table(1).size(), 2u);
  EXPECT_EQ(manager_->NumAvailableBlocks(), available + 2);
  EXPECT_EQ(*manager_->NumLookaheadTokens(1), 0);
}

TEST_F(LookaheadTest, BadLookaheadChangesNothing) {
  CacheRequest req = Admit(1, Iota(6));
  const std::vector<BlockId> before = Table(1);
  ASSERT_TRUE(req.AppendToken(9).ok());
  EXPECT_EQ(manager_->AllocateSlots(req, 1, {}, {.num_lookahead_tokens = -1}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->AllocateSlots(req, 1, {}, {.num_lookahead_tokens = INT64_MAX}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->AllocateSlots(req, 1, {}, {.num_lookahead_tokens = 8 * kBs}).code(),
            absl::StatusCode::kResourceExhausted);  // more than the whole pool
  CacheRequest other = Admit(2, Iota(20, 100));     // 5 of the 8 blocks
  EXPECT_EQ(manager_->AllocateSlots(req, 1, {}, {.num_lookahead_tokens = 12}).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(*manager_->NumBlocksToAllocate(req, 1, {}, {.num_lookahead_tokens = 12}), 3);
  EXPECT_EQ(Table(1), before);
  EXPECT_EQ(*manager_->NumAllocatedTokens(1), 6);
  EXPECT_EQ(*manager_->NumLookaheadTokens(1), 0);
}

TEST_F(LookaheadTest, TruncateUncachesBlocksWithRejectedTokens) {
  CacheRequest req = Admit(1, Iota(6));
  // Drafts appended as tokens (the naive way): block 1 and 2 become full and are cached.
  ASSERT_TRUE(req.AppendTokens(Iota(6, 50)).ok());
  ASSERT_TRUE(manager_->AllocateSlots(req, 6).ok());
  ASSERT_EQ(manager_->pool().NumCachedBlocks(), 3);
  const std::vector<BlockId> before = Table(1);
  ASSERT_TRUE(manager_->TruncateRequest(req, 6).ok());  // keep tokens 0..5
  EXPECT_EQ(req.num_tokens(), 6);
  EXPECT_EQ(req.num_full_blocks(), 1);
  EXPECT_EQ(*manager_->NumAllocatedTokens(1), 6);
  EXPECT_EQ(Table(1), (std::vector<BlockId>{before[0], before[1]}));
  EXPECT_EQ(manager_->pool().NumCachedBlocks(), 1);  // blocks 1 and 2 held rejected tokens
  EXPECT_FALSE(manager_->pool().IsCached(before[1]));
  // The request goes on with other tokens; its rewritten block is cached under the new hash.
  ASSERT_TRUE(req.AppendTokens(Iota(2, 6)).ok());
  ASSERT_TRUE(manager_->AllocateSlots(req, 2).ok());
  EXPECT_EQ(manager_->pool().FindCached(req.block_hashes()[1]), before[1]);
  CacheRequest same = *manager_->NewRequest(2, Iota(9));
  EXPECT_EQ(manager_->GetComputedBlocks(same)->num_computed_tokens, 8);
}

TEST_F(LookaheadTest, TruncateKeepsBlocksOtherRequestsHold) {
  CacheRequest a = Admit(1, Iota(8));
  std::vector<TokenId> p = Iota(8);
  p.push_back(100);
  CacheRequest b = Admit(2, p);  // hits both blocks of a
  const std::vector<BlockId> table_b = Table(2);
  // Token 6 sits in a block shared with a: its slots cannot be rewritten.
  EXPECT_EQ(manager_->TruncateRequest(b, 6).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(b.num_tokens(), 9);
  EXPECT_EQ(Table(2), table_b);
  // At the block boundary the shared block is released, and stays cached for a.
  ASSERT_TRUE(manager_->TruncateRequest(b, 4).ok());
  EXPECT_EQ(Table(2), (std::vector<BlockId>{table_b[0]}));
  EXPECT_TRUE(manager_->pool().IsCached(table_b[1]));
  EXPECT_EQ(manager_->pool().NumCachedBlocks(), 2);
}

TEST_F(LookaheadTest, TruncateDropsTheLookaheadAndChecksItsArguments) {
  CacheRequest req = Admit(1, Iota(6), /*lookahead=*/9);
  EXPECT_EQ(manager_->TruncateRequest(req, 7).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->TruncateRequest(req, -1).code(), absl::StatusCode::kInvalidArgument);
  CacheRequest unknown = *manager_->NewRequest(3, Iota(3));
  EXPECT_EQ(manager_->TruncateRequest(unknown, 1).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Table(1).size(), 4u);
  ASSERT_TRUE(manager_->TruncateRequest(req, 6).ok());  // nothing rejected but the reservation
  EXPECT_EQ(Table(1).size(), 2u);
  EXPECT_EQ(*manager_->NumLookaheadTokens(1), 0);
  EXPECT_EQ(manager_->pool().NumCachedBlocks(), 1);
}

TEST(CacheRequestTruncateTest, DropsTokensAndHashes) {
  CacheRequest req = *CacheRequest::Create({.id = 1, .block_size = kBs}, Iota(6));
  ASSERT_TRUE(req.AppendTokens(Iota(6, 6)).ok());
  const BlockHash first = req.block_hashes()[0];
  EXPECT_EQ(req.Truncate(13).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(req.Truncate(5).ok());
  EXPECT_EQ(req.num_tokens(), 5);
  EXPECT_EQ(req.num_prompt_tokens(), 5);
  ASSERT_EQ(req.num_full_blocks(), 1);
  EXPECT_EQ(req.block_hashes()[0], first);
  ASSERT_TRUE(req.AppendTokens(Iota(3, 5)).ok());  // the same tokens again: the same hashes
  CacheRequest fresh = *CacheRequest::Create({.id = 2, .block_size = kBs}, Iota(8));
  EXPECT_EQ(req.block_hashes()[1], fresh.block_hashes()[1]);
}

}  // namespace
}  // namespace pagedkv
