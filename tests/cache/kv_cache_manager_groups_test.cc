// Copyright 2026 The pagedkv Authors.
//
// KvCacheManager (several groups): vLLM's hybrid hit rule on hand-made caches (holes made with
// Uncache), release of out-of-window blocks to the evictable set and their reuse, all-or-nothing
// failures, per-group hashes and event fields. The randomised differential test against a
// brute-force reference is kv_cache_manager_groups_random_test.cc.
#include <cstdint>
#include <memory>
#include <numeric>
#include <vector>

#include "cache/kv_cache_manager_internal.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/events/kv_event_codec.h"

namespace pagedkv {
namespace {

constexpr int kBs = 4;

KvCacheGroupSpec Full(int layers = 1) {
  return {.kind = KvCacheGroupKind::kFullAttention, .num_layers = layers};
}
KvCacheGroupSpec Window(int window, int layers = 1) {
  return {.kind = KvCacheGroupKind::kSlidingWindow, .sliding_window = window, .num_layers = layers};
}

std::vector<TokenId> Prompt(int n, int start = 1) {
  std::vector<TokenId> p(n);
  std::iota(p.begin(), p.end(), start);
  return p;
}

class KvCacheGroupsTest : public ::testing::Test {
 protected:
  void Make(std::vector<KvCacheGroupSpec> groups, int num_blocks = 256, bool events = false) {
    manager_ = KvCacheManager::Create({.num_blocks = num_blocks,
                                       .block_size = kBs,
                                       .collect_event_batches = events,
                                       .groups = std::move(groups)})
                   .value();
  }
  void TearDown() override {
    if (manager_ == nullptr) return;
    EXPECT_TRUE(manager_->ValidateInvariants().ok()) << manager_->ValidateInvariants();
  }
  // Runs a request over `prompt` to completion of its prompt and frees it: every group's full
  // blocks end cached and evictable.
  void Prime(RequestId id, const std::vector<TokenId>& prompt) {
    CacheRequest r = manager_->NewRequest(id, prompt).value();
    ComputedBlocks hit = manager_->GetComputedBlocks(r).value();
    ASSERT_TRUE(manager_->AllocateSlots(r, r.num_tokens() - hit.num_computed_tokens, hit).ok());
    ASSERT_TRUE(manager_->ValidateInvariants().ok()) << manager_->ValidateInvariants();
    ASSERT_TRUE(manager_->Free(id).ok());
  }
  // Drops group g's cached block i of `prompt` from the index.
  void Hole(const std::vector<TokenId>& prompt, int32_t g, int64_t i) {
    CacheRequest r = manager_->NewRequest(999, prompt).value();
    BlockPool& pool = KvCacheManagerInternal::MutablePool(*manager_);
    const BlockId b = pool.FindCached(FoldGroupHash(r.block_hashes()[i], g));
    ASSERT_NE(b, kNullBlock);
    ASSERT_TRUE(pool.Uncache(b).ok());
  }
  ComputedBlocks Hit(const std::vector<TokenId>& prompt) {
    CacheRequest r = manager_->NewRequest(1000, prompt).value();
    return manager_->GetComputedBlocks(r).value();
  }
  // Positions of group g's non-null hit blocks.
  static std::vector<int64_t> Real(const ComputedBlocks& hit, int32_t g) {
    std::vector<int64_t> out;
    for (size_t i = 0; i < hit.group(g).size(); ++i) {
      if (hit.group(g)[i] != kNullBlock) out.push_back(static_cast<int64_t>(i));
    }
    return out;
  }

  std::unique_ptr<KvCacheManager> manager_;
};

TEST_F(KvCacheGroupsTest, CreateRejectsBadGroups) {
  EXPECT_TRUE(KvCacheManager::Create({.num_blocks = 8, .groups = {}}).ok());  // one full group
  EXPECT_FALSE(KvCacheManager::Create({.num_blocks = 8, .groups = {Window(8)}}).ok());
  EXPECT_FALSE(KvCacheManager::Create({.num_blocks = 8, .groups = {Full(), Window(0)}}).ok());
  EXPECT_FALSE(KvCacheManager::Create({.num_blocks = 8, .groups = {Full(0)}}).ok());
  EXPECT_FALSE(KvCacheManager::Create({.num_blocks = 0, .groups = {Full()}}).ok());
}

// Window 6 with blocks of 4: a hit needs the last cdiv(5, 4) = 2 blocks before it.
TEST_F(KvCacheGroupsTest, WindowNotAMultipleOfBlockSize) {
  Make({Full(), Window(6)});
  const std::vector<TokenId> p = Prompt(41);  // at most 40 tokens = 10 blocks hit
  Prime(1, p);
  ComputedBlocks hit = Hit(p);
  EXPECT_EQ(hit.num_computed_tokens, 40);
  EXPECT_EQ(Real(hit, 1), (std::vector<int64_t>{8, 9}));
  EXPECT_EQ(hit.group(0).size(), 10u);
  Hole(p, 1, 9);  // the window at 10 is broken: the next one ends at 9
  hit = Hit(p);
  EXPECT_EQ(hit.num_computed_tokens, 36);
  EXPECT_EQ(Real(hit, 1), (std::vector<int64_t>{7, 8}));
  Hole(p, 1, 7);  // 9 and 7 gone: blocks 5, 6 are the rightmost pair
  hit = Hit(p);
  EXPECT_EQ(hit.num_computed_tokens, 28);
  EXPECT_EQ(Real(hit, 1), (std::vector<int64_t>{5, 6}));
}

TEST_F(KvCacheGroupsTest, FullAttentionHoleCapsEveryGroup) {
  Make({Full(), Window(6)});
  const std::vector<TokenId> p = Prompt(41);
  Prime(1, p);
  Hole(p, 0, 5);
  const ComputedBlocks hit = Hit(p);
  EXPECT_EQ(hit.num_computed_tokens, 20);
  EXPECT_EQ(Real(hit, 1), (std::vector<int64_t>{3, 4}));
}

// No full window anywhere: only a run from block 0 shorter than the window counts.
TEST_F(KvCacheGroupsTest, ShortRunFromTheStart) {
  Make({Full(), Window(13)});                 // needs 3 blocks
  const std::vector<TokenId> p = Prompt(17);  // 4 blocks at most
  Prime(1, p);
  Hole(p, 1, 2);
  ComputedBlocks hit = Hit(p);
  EXPECT_EQ(hit.num_computed_tokens, 8);
  EXPECT_EQ(Real(hit, 1), (std::vector<int64_t>{0, 1}));
  Hole(p, 1, 0);
  hit = Hit(p);
  EXPECT_EQ(hit.num_computed_tokens, 0);
}

// Two window groups cut each other back until they agree (the coordinator's loop).
TEST_F(KvCacheGroupsTest, CutBackIteratesUntilAllAgree) {
  Make({Full(), Window(6), Window(10)});  // need 2 and 3 blocks
  const std::vector<TokenId> p = Prompt(41);
  Prime(1, p);
  Hole(p, 1, 9);  // group 1: 10 -> 9
  Hole(p, 2, 6);  // group 2 at 9: blocks 6..8 broken -> 3..5, hit 6
  Hole(p, 1, 4);  // group 1 at 6: 4..5 broken -> 2..3, hit 4; group 2 at 4: 1..3 -> 4
  const ComputedBlocks hit = Hit(p);
  EXPECT_EQ(hit.num_computed_tokens, 16);
  EXPECT_EQ(Real(hit, 1), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Real(hit, 2), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(hit.group(0).size(), 4u);
}

TEST_F(KvCacheGroupsTest, HitNeverCoversTheWholePrompt) {
  Make({Full(), Window(6)});
  const std::vector<TokenId> p = Prompt(40);  // exactly 10 blocks: at most 9 hit
  Prime(1, p);
  EXPECT_EQ(Hit(p).num_computed_tokens, 36);
}

TEST_F(KvCacheGroupsTest, GroupHashesNeverShareBlocksAndGroupZeroMatchesPlainManager) {
  Make({Full(), Window(8)}, 256, /*events=*/true);
  const std::vector<TokenId> p = Prompt(16);
  auto plain = KvCacheManager::Create({.num_blocks = 16, .block_size = kBs}).value();
  const CacheRequest plain_req = plain->NewRequest(1, p).value();
  const CacheRequest r = manager_->NewRequest(1, p).value();
  ASSERT_EQ(r.block_hashes().size(), plain_req.block_hashes().size());
  for (size_t i = 0; i < r.block_hashes().size(); ++i) {
    EXPECT_EQ(r.block_hashes()[i], plain_req.block_hashes()[i]);
  }
  ASSERT_TRUE(manager_->AllocateSlots(r, 16).ok());
  const auto t0 = manager_->GetBlockTable(1, 0).value();
  const auto t1 = manager_->GetBlockTable(1, 1).value();
  for (size_t i = 0; i < t0.size(); ++i) {
    EXPECT_NE(t0[i], t1[i]);
    EXPECT_EQ(manager_->BlockGroup(t0[i]), 0);
    EXPECT_EQ(manager_->BlockGroup(t1[i]), 1);
    EXPECT_EQ(manager_->pool().CachedHash(t0[i]), r.block_hashes()[i]);
  }
  ASSERT_TRUE(manager_->Free(1).ok());
}

TEST_F(KvCacheGroupsTest, OutOfWindowBlocksBecomeEvictableAndAreReused) {
  Make({Full(), Window(8)});  // needs 2 blocks
  std::vector<TokenId> p = Prompt(32);
  CacheRequest a = manager_->NewRequest(1, p).value();
  ASSERT_TRUE(manager_->AllocateSlots(a, 32).ok());
  EXPECT_EQ(manager_->pool().NumEvictableBlocks(), 0);
  ASSERT_TRUE(a.AppendToken(7).ok());
  const AllocationPlan plan = manager_->PlanAllocation(a, 1).value();
  EXPECT_EQ(plan.per_group, (std::vector<int32_t>{1, 1}));
  EXPECT_EQ(plan.released, (std::vector<int32_t>{0, 6}));  // token 32 attends to 25..32
  ASSERT_TRUE(manager_->AllocateSlots(a, 1).ok());
  EXPECT_EQ(manager_->pool().NumEvictableBlocks(), 6);
  const auto t1 = manager_->GetBlockTable(1, 1).value();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t1[i], kNullBlock);
  EXPECT_NE(t1[6], kNullBlock);
  EXPECT_EQ(manager_->NumHeldBlocks(1).value(), 9 + 3);
  ASSERT_TRUE(manager_->ValidateInvariants().ok()) << manager_->ValidateInvariants();
  // A request sharing the first 24 tokens hits 6 blocks; its window blocks 4 and 5 are the
  // released (evictable) ones.
  std::vector<TokenId> q(p.begin(), p.begin() + 24);
  q.push_back(99);
  CacheRequest b = manager_->NewRequest(2, q).value();
  const ComputedBlocks hit = manager_->GetComputedBlocks(b).value();
  EXPECT_EQ(hit.num_computed_tokens, 24);
  EXPECT_EQ(Real(hit, 1), (std::vector<int64_t>{4, 5}));
  const AllocationPlan plan_b = manager_->PlanAllocation(b, 1, hit).value();
  EXPECT_EQ(plan_b.per_group, (std::vector<int32_t>{1, 3}));  // a new block + 2 evictable hits
  ASSERT_TRUE(manager_->AllocateSlots(b, 1, hit).ok());
  EXPECT_EQ(manager_->pool().NumEvictableBlocks(), 4);
  EXPECT_EQ(manager_->GetBlockTable(2, 1).value()[4], hit.group(1)[4]);
  EXPECT_EQ(manager_->stats().hit_tokens, 24);
  ASSERT_TRUE(manager_->Free(1).ok());
  ASSERT_TRUE(manager_->Free(2).ok());
  EXPECT_EQ(manager_->pool().NumUsedBlocks(), 0);
}

TEST_F(KvCacheGroupsTest, FailedAllocationChangesNothing) {
  Make({Full(), Window(8)}, /*num_blocks=*/10);
  CacheRequest a = manager_->NewRequest(1, Prompt(24)).value();
  const int32_t available = manager_->NumAvailableBlocks();
  EXPECT_EQ(manager_->AllocateSlots(a, 24).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(manager_->NumAvailableBlocks(), available);
  EXPECT_FALSE(manager_->HasRequest(1));
  EXPECT_EQ(manager_->stats().stored_blocks, 0);
  ASSERT_TRUE(manager_->AllocateSlots(a, 16).ok());  // 4 + 4 blocks
  CacheRequest b = manager_->NewRequest(2, Prompt(8, 500)).value();
  ASSERT_TRUE(manager_->AllocateSlots(b, 4).ok());  // 1 + 1: the pool is full
  // a's next 4 tokens need 2 blocks; computed = 16 releases its window blocks 0 and 1 first
  // (token 16 attends to 9..16), so this succeeds.
  ASSERT_TRUE(manager_->AllocateSlots(a, 4).ok());
  EXPECT_EQ(manager_->GetBlockTable(1, 1).value()[1], kNullBlock);
  // b's next 4 tokens need 2 blocks and release none: refused, nothing changed.
  const std::vector<BlockId> t0(manager_->GetBlockTable(2, 0).value().begin(),
                                manager_->GetBlockTable(2, 0).value().end());
  EXPECT_EQ(manager_->AllocateSlots(b, 4).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(std::vector<BlockId>(manager_->GetBlockTable(2, 0).value().begin(),
                                 manager_->GetBlockTable(2, 0).value().end()),
            t0);
  EXPECT_EQ(manager_->NumAllocatedTokens(2).value(), 4);
  EXPECT_EQ(manager_->AllocateSlots(b, 100).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->AllocateSlots(b, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->Free(3).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(manager_->GetBlockTable(2, 2).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(manager_->Free(1).ok());
  ASSERT_TRUE(manager_->Free(2).ok());
}

TEST_F(KvCacheGroupsTest, RequestsOfAnotherBlockSizeOrVocabularyAreRefused) {
  manager_ =
      KvCacheManager::Create(
          {.num_blocks = 32, .block_size = kBs, .vocab_size = 1000, .groups = {Full(), Window(8)}})
          .value();
  const std::vector<TokenId> prompt = Prompt(12);
  const int32_t available = manager_->NumAvailableBlocks();
  CacheRequest other_size =
      CacheRequest::Create({.id = 1, .block_size = kBs * 2, .vocab_size = 1000}, prompt).value();
  CacheRequest unchecked = CacheRequest::Create({.id = 2, .block_size = kBs}, prompt).value();
  for (const CacheRequest* r : {&other_size, &unchecked}) {
    const absl::Status s = manager_->AllocateSlots(*r, 12);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), ::testing::HasSubstr("create it with NewRequest"));
    EXPECT_EQ(manager_->GetComputedBlocks(*r).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_FALSE(manager_->HasRequest(r->id()));
  }
  EXPECT_THAT(manager_->AllocateSlots(unchecked, 12).message(),
              ::testing::HasSubstr("vocabulary size 0 but the manager uses 1000"));
  EXPECT_EQ(manager_->NumAvailableBlocks(), available);
}

TEST_F(KvCacheGroupsTest, StaleOrMalformedComputedBlocksAreRefused) {
  Make({Full(), Window(8)});
  const std::vector<TokenId> p = Prompt(17);
  Prime(1, p);
  CacheRequest r = manager_->NewRequest(2, p).value();
  ComputedBlocks hit = manager_->GetComputedBlocks(r).value();
  ASSERT_EQ(hit.num_computed_tokens, 16);
  ComputedBlocks bad = hit;
  bad.blocks.pop_back();
  EXPECT_EQ(manager_->AllocateSlots(r, 1, bad).code(), absl::StatusCode::kInvalidArgument);
  bad = hit;
  bad.other_groups[0][0] = hit.blocks[0];  // must be null (before the window)
  EXPECT_EQ(manager_->AllocateSlots(r, 1, bad).code(), absl::StatusCode::kInvalidArgument);
  Hole(p, 0, 3);
  EXPECT_EQ(manager_->AllocateSlots(r, 1, hit).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(manager_->HasRequest(2));
  EXPECT_EQ(manager_->pool().NumUsedBlocks(), 0);
}

TEST_F(KvCacheGroupsTest, EventsCarryGroupFields) {
  Make({Full(), Window(8)}, /*num_blocks=*/8, /*events=*/true);
  const std::vector<TokenId> p = Prompt(12);
  CacheRequest r = manager_->NewRequest(1, p).value();
  ASSERT_TRUE(manager_->AllocateSlots(r, 12).ok());
  KvEventBatch batch = manager_->TakeEventBatch(1.0);
  ASSERT_EQ(batch.events.size(), 2u);  // one stored event per group's chain
  const KvBatchEvent& e0 = batch.events[0];
  EXPECT_EQ(e0.type, KvEventType::kBlockStored);
  EXPECT_EQ(e0.group_idx, 0);
  EXPECT_EQ(e0.kv_cache_spec_kind, "full_attention");
  EXPECT_EQ(e0.kv_cache_spec_sliding_window, std::nullopt);
  EXPECT_EQ(e0.parent_block_hash, std::nullopt);
  EXPECT_EQ(e0.block_hashes,
            std::vector<BlockHash>(r.block_hashes().begin(), r.block_hashes().end()));
  EXPECT_EQ(e0.token_ids, p);
  const KvBatchEvent& e1 = batch.events[1];
  EXPECT_EQ(e1.group_idx, 1);
  EXPECT_EQ(e1.kv_cache_spec_kind, "sliding_window");
  EXPECT_EQ(e1.kv_cache_spec_sliding_window, 8);
  EXPECT_EQ(e1.parent_block_hash, std::nullopt);
  ASSERT_EQ(e1.block_hashes.size(), 3u);
  EXPECT_EQ(e1.block_hashes[2], FoldGroupHash(r.block_hashes()[2], 1));
  ASSERT_TRUE(manager_->Free(1).ok());
  // A new 8-block request evicts all 6 cached blocks: removed events name their groups.
  CacheRequest s = manager_->NewRequest(2, Prompt(16, 100)).value();
  ASSERT_TRUE(manager_->AllocateSlots(s, 13).ok());
  batch = manager_->TakeEventBatch(2.0);
  int removed_group0 = 0;
  int removed_group1 = 0;
  for (const KvBatchEvent& e : batch.events) {
    if (e.type != KvEventType::kBlockRemoved) continue;
    (e.group_idx == 0 ? removed_group0 : removed_group1) += static_cast<int>(e.block_hashes.size());
  }
  EXPECT_EQ(removed_group0 + removed_group1, 6);
  EXPECT_EQ(removed_group0, 3);
  ASSERT_TRUE(manager_->Free(2).ok());
}

// The group fields travel on the wire in vLLM 0.33's layout and come back unchanged.
TEST_F(KvCacheGroupsTest, GroupFieldsSurviveTheVllmWireFormat) {
  Make({Full(), Window(8)}, /*num_blocks=*/16, /*events=*/true);
  CacheRequest r = manager_->NewRequest(1, Prompt(12)).value();
  ASSERT_TRUE(manager_->AllocateSlots(r, 12).ok());
  const KvEventBatch batch = manager_->TakeEventBatch(3.0);
  const std::string wire = EncodeKvEventBatch(
      batch, {.encoding = KvEventEncoding::kVllm, .hash_format = KvBlockHashFormat::kBytes});
  const KvEventBatch back = DecodeKvEventBatch(wire).value();
  ASSERT_EQ(back.events.size(), 2u);
  EXPECT_EQ(back.events[1].group_idx, 1);
  EXPECT_EQ(back.events[1].kv_cache_spec_kind, "sliding_window");
  EXPECT_EQ(back.events[1].kv_cache_spec_sliding_window, 8);
  EXPECT_EQ(back.events[0].kv_cache_spec_kind, "full_attention");
  EXPECT_EQ(back.events[0].block_hashes, batch.events[0].block_hashes);
  ASSERT_TRUE(manager_->Free(1).ok());
}

TEST_F(KvCacheGroupsTest, LayerWeightedBlocksOfALongRequest) {
  // gpt-oss-style: 12 full layers, 12 layers with a 128-token window, blocks of 16.
  manager_ = KvCacheManager::Create(
                 {.num_blocks = 2048, .block_size = 16, .groups = {Full(12), Window(128, 12)}})
                 .value();
  CacheRequest r = manager_->NewRequest(1, Prompt(8192)).value();
  ASSERT_TRUE(manager_->AllocateSlots(r, 8192).ok());
  ASSERT_TRUE(r.AppendToken(1).ok());
  ASSERT_TRUE(manager_->AllocateSlots(r, 1).ok());
  EXPECT_EQ(manager_->NumHeldBlocks(1).value(), 513 + 9);
  EXPECT_EQ(manager_->NumHeldLayerBlocks(1).value(), 12 * 513 + 12 * 9);
  ASSERT_TRUE(manager_->Free(1).ok());
}

}  // namespace
}  // namespace pagedkv
