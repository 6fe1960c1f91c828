// Copyright 2026 The pagedkv Authors.
#include "pagedkv/events/kv_event_batch.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"

namespace pagedkv {
namespace {

constexpr int32_t kBs = 4;

std::vector<TokenId> Tokens(int n, int start) {
  std::vector<TokenId> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + i;
  return v;
}

std::unique_ptr<KvCacheManager> MakeManager(int32_t num_blocks) {
  auto m = KvCacheManager::Create({.num_blocks = num_blocks,
                                   .block_size = kBs,
                                   .collect_event_batches = true,
                                   .data_parallel_rank = 3});
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

CacheRequest Admit(KvCacheManager& m, RequestId id, const std::vector<TokenId>& prompt) {
  CacheRequest req = m.NewRequest(id, prompt).value();
  ComputedBlocks hit = m.GetComputedBlocks(req).value();
  EXPECT_TRUE(m.AllocateSlots(req, req.num_tokens() - hit.num_computed_tokens, hit).ok());
  return req;
}

TEST(KvEventBatchTest, OneStoredEventPerRequestWithoutParentForTheFirstBlock) {
  auto m = MakeManager(16);
  const CacheRequest a = Admit(*m, 1, Tokens(13, 0));  // 3 full blocks
  KvEventBatch batch = m->TakeEventBatch(12.5);
  EXPECT_EQ(batch.timestamp, 12.5);
  EXPECT_EQ(batch.data_parallel_rank, 3);
  ASSERT_EQ(batch.events.size(), 1u);
  const KvBatchEvent& e = batch.events[0];
  EXPECT_EQ(e.type, KvEventType::kBlockStored);
  EXPECT_EQ(e.block_hashes,
            std::vector<BlockHash>(a.block_hashes().begin(), a.block_hashes().begin() + 3));
  EXPECT_FALSE(e.parent_block_hash.has_value());
  EXPECT_EQ(e.token_ids, Tokens(12, 0));
  EXPECT_EQ(e.block_size, kBs);
  EXPECT_EQ(e.medium, kMediumGpu);
  EXPECT_TRUE(m->TakeEventBatch(13).events.empty());

  // A second request sharing two blocks stores only its own, with the shared block as parent.
  std::vector<TokenId> p = Tokens(8, 0);
  for (TokenId t : Tokens(9, 100)) p.push_back(t);
  const CacheRequest b = Admit(*m, 2, p);
  batch = m->TakeEventBatch(14);
  ASSERT_EQ(batch.events.size(), 1u);
  EXPECT_EQ(batch.events[0].parent_block_hash, a.block_hashes()[1]);
  EXPECT_EQ(batch.events[0].block_hashes,
            std::vector<BlockHash>(b.block_hashes().begin() + 2, b.block_hashes().begin() + 4));
}

TEST(KvEventBatchTest, EvictionsBecomeRemovedAndResetCleared) {
  auto m = MakeManager(4);
  const CacheRequest a = Admit(*m, 1, Tokens(16, 0));  // 4 blocks, all full
  ASSERT_TRUE(m->Free(1).ok());
  m->TakeEventBatch(0);          // drop the stores
  Admit(*m, 2, Tokens(8, 500));  // evicts the two tail blocks of request 1
  KvEventBatch batch = m->TakeEventBatch(1);
  ASSERT_EQ(batch.events.size(), 2u);
  EXPECT_EQ(batch.events[0].type, KvEventType::kBlockRemoved);
  EXPECT_EQ(batch.events[0].block_hashes,
            (std::vector<BlockHash>{a.block_hashes()[3], a.block_hashes()[2]}));
  EXPECT_EQ(batch.events[1].type, KvEventType::kBlockStored);
  m->ResetPrefixCache();
  batch = m->TakeEventBatch(2);
  ASSERT_EQ(batch.events.size(), 1u);
  EXPECT_EQ(batch.events[0].type, KvEventType::kAllBlocksCleared);
}

TEST(KvEventBatchTest, OffByDefault) {
  auto m = KvCacheManager::Create({.num_blocks = 8, .block_size = kBs}).value();
  Admit(*m, 1, Tokens(9, 0));
  EXPECT_TRUE(m->TakeEventBatch(0).events.empty());
}

// Expands batches back into per-block events: the reference the batcher must agree with.
struct FlatEvent {
  KvEventType type;
  BlockHash hash;
  std::optional<BlockHash> parent;  // stored only
  bool operator==(const FlatEvent&) const = default;
};

std::vector<FlatEvent> Expand(const KvEventBatch& batch) {
  std::vector<FlatEvent> out;
  for (const KvBatchEvent& e : batch.events) {
    if (e.type == KvEventType::kAllBlocksCleared) {
      out.push_back({e.type, {}, {}});
      continue;
    }
    std::optional<BlockHash> parent = e.parent_block_hash;
    for (const BlockHash& h : e.block_hashes) {
      out.push_back({e.type, h, e.type == KvEventType::kBlockStored ? parent : std::nullopt});
      parent = h;
    }
    if (e.type == KvEventType::kBlockStored) {
      EXPECT_EQ(e.token_ids.size(), e.block_hashes.size() * kBs);
    }
  }
  return out;
}

TEST(KvEventBatchTest, RandomStepsExpandToTheCallbackStream) {
  std::mt19937_64 rng(1234);
  auto m = MakeManager(24);
  std::vector<FlatEvent> callbacks;
  std::vector<BlockHash> roots;
  m->AddEventListener([&](const KvEvent& e) {
    std::optional<BlockHash> parent;
    if (e.type == KvEventType::kBlockStored &&
        std::find(roots.begin(), roots.end(), e.parent_hash) == roots.end()) {
      parent = e.parent_hash;
    }
    callbacks.push_back(
        {e.type, e.type == KvEventType::kAllBlocksCleared ? BlockHash{} : e.hash, parent});
  });
  std::vector<FlatEvent> batched;
  std::vector<RequestId> live;
  RequestId next = 1;
  for (int step = 0; step < 400; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 6) {
      // Prompts share one of four prefixes, under one of two salts.
      const int n = 1 + static_cast<int>(rng() % 20);
      std::vector<TokenId> prompt = Tokens(8, static_cast<int>(rng() % 4) * 1000);
      for (int i = 0; i < n; ++i) prompt.push_back(static_cast<TokenId>(rng() % 3));
      auto req = m->NewRequest(next, prompt, {.cache_salt = rng() % 2 ? "a" : "b"}).value();
      if (std::find(roots.begin(), roots.end(), req.root_hash()) == roots.end()) {
        roots.push_back(req.root_hash());
      }
      const ComputedBlocks hit = m->GetComputedBlocks(req).value();
      if (m->AllocateSlots(req, req.num_tokens() - hit.num_computed_tokens, hit).ok()) {
        live.push_back(next);
      }
      ++next;
    } else if (op < 9 && !live.empty()) {
      const size_t k = rng() % live.size();
      ASSERT_TRUE(m->Free(live[k]).ok());
      live.erase(live.begin() + static_cast<ptrdiff_t>(k));
    } else if (op == 9 && rng() % 8 == 0) {
      m->ResetPrefixCache();
    }
    if (rng() % 3 == 0) {
      for (const FlatEvent& e : Expand(m->TakeEventBatch(step))) batched.push_back(e);
    }
  }
  for (const FlatEvent& e : Expand(m->TakeEventBatch(1e9))) batched.push_back(e);
  EXPECT_GT(callbacks.size(), 100u);
  EXPECT_EQ(batched, callbacks);
}

}  // namespace
}  // namespace pagedkv
