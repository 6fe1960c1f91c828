// Copyright 2026 The pagedkv Authors.
#include "pagedkv/cache/kv_cache_manager.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/cache/test_hashers.h"

namespace pagedkv {
namespace {

constexpr int32_t kBs = 4;

std::vector<TokenId> Iota(int n, int start = 0) {
  std::vector<TokenId> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + i;
  return v;
}

std::unique_ptr<KvCacheManager> MakeManager(int32_t num_blocks, KvCacheManagerOptions o = {}) {
  o.num_blocks = num_blocks;
  o.block_size = kBs;
  auto m = KvCacheManager::Create(std::move(o));
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

std::vector<BlockId> Table(const KvCacheManager& m, RequestId id) {
  auto t = m.GetBlockTable(id);
  if (!t.ok()) return {};
  return std::vector<BlockId>(t->begin(), t->end());
}

// Admits a request: lookup, then allocate its whole prompt. Returns the hit.
ComputedBlocks Admit(KvCacheManager& m, const CacheRequest& req) {
  auto hit = m.GetComputedBlocks(req);
  EXPECT_TRUE(hit.ok()) << hit.status();
  const absl::Status st = m.AllocateSlots(req, req.num_tokens() - hit->num_computed_tokens, *hit);
  EXPECT_TRUE(st.ok()) << st;
  return *hit;
}

struct Snapshot {
  int32_t available, cached, requests;
  std::vector<std::vector<BlockId>> tables;
  bool operator==(const Snapshot&) const = default;
};
Snapshot Snap(const KvCacheManager& m, std::vector<RequestId> ids) {
  Snapshot s{m.NumAvailableBlocks(), m.pool().NumCachedBlocks(), m.NumRequests(), {}};
  for (RequestId id : ids) s.tables.push_back(Table(m, id));
  return s;
}

TEST(KvCacheManagerTest, RejectsInvalidConfig) {
  EXPECT_EQ(KvCacheManager::Create({.num_blocks = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KvCacheManager::Create({.num_blocks = 4, .block_size = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KvCacheManager::Create({.num_blocks = 4, .vocab_size = -3}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KvCacheManager::Create({.num_blocks = 4, .eviction_policy = "x"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(KvCacheManagerTest, SecondRequestHitsTheSharedPrefix) {
  auto m = MakeManager(16);
  auto a = *m->NewRequest(1, Iota(10));
  EXPECT_EQ(Admit(*m, a).num_computed_tokens, 0);
  EXPECT_EQ(Table(*m, 1).size(), 3u);  // 10 tokens -> 3 blocks, 2 full (cached)
  EXPECT_EQ(m->pool().NumCachedBlocks(), 2);

  std::vector<TokenId> p = Iota(9);
  p.push_back(77);  // same first 9 tokens: 2 full blocks shared
  auto b = *m->NewRequest(2, p);
  const ComputedBlocks hit = Admit(*m, b);
  EXPECT_EQ(hit.num_computed_tokens, 8);
  EXPECT_EQ(hit.blocks, (std::vector<BlockId>{Table(*m, 1)[0], Table(*m, 1)[1]}));
  EXPECT_EQ(Table(*m, 2)[0], Table(*m, 1)[0]);
  EXPECT_NE(Table(*m, 2)[2], Table(*m, 1)[2]);
  EXPECT_EQ(m->pool().RefCount(Table(*m, 1)[0]), 2);
  const CacheStats s = m->stats();
  EXPECT_EQ(s.lookups, 2);
  EXPECT_EQ(s.queried_tokens, 20);
  EXPECT_EQ(s.hit_tokens, 8);
  EXPECT_EQ(s.hit_blocks, 2);
  EXPECT_DOUBLE_EQ(s.HitRate(), 0.4);
  EXPECT_NE(s.Summary().find("hit_rate=40.00%"), std::string::npos) << s.Summary();
  EXPECT_TRUE(m->ValidateInvariants().ok());
}

TEST(KvCacheManagerTest, NeverReturnsTheWholePrompt) {
  auto m = MakeManager(16);
  auto a = *m->NewRequest(1, Iota(8));
  Admit(*m, a);
  ASSERT_TRUE(m->Free(1).ok());
  auto again = *m->NewRequest(2, Iota(8));  // fully cached: 2 full blocks
  auto hit = m->GetComputedBlocks(again);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->num_computed_tokens, 4);  // the last block is recomputed
  auto one = *m->NewRequest(3, Iota(4));
  EXPECT_EQ(m->GetComputedBlocks(one)->num_computed_tokens, 0);
  auto empty = *m->NewRequest(4, {});
  EXPECT_EQ(m->GetComputedBlocks(empty)->num_computed_tokens, 0);
}

TEST(KvCacheManagerTest, FreedBlocksStayCachedAndAreReused) {
  auto m = MakeManager(4);
  auto a = *m->NewRequest(1, Iota(13));
  Admit(*m, a);
  const std::vector<BlockId> ta = Table(*m, 1);
  ASSERT_TRUE(m->Free(1).ok());
  EXPECT_EQ(m->NumAvailableBlocks(), 4);
  EXPECT_EQ(m->pool().NumEvictableBlocks(), 3);
  auto b = *m->NewRequest(2, Iota(13));
  const ComputedBlocks hit = Admit(*m, b);
  EXPECT_EQ(hit.num_computed_tokens, 12);
  EXPECT_EQ(Table(*m, 2), ta);
}

TEST(KvCacheManagerTest, DecodeCachesBlocksAsTheyFill) {
  auto m = MakeManager(8);
  std::vector<KvEvent> events;
  m->AddEventListener([&](const KvEvent& e) { events.push_back(e); });
  auto a = *m->NewRequest(1, Iota(6));
  Admit(*m, a);
  EXPECT_EQ(events.size(), 1u);  // block 0 only
  ASSERT_TRUE(a.AppendToken(100).ok());
  ASSERT_TRUE(m->AllocateSlots(a, 1).ok());
  EXPECT_EQ(events.size(), 1u);  // 7 tokens: block 1 not full yet
  ASSERT_TRUE(a.AppendToken(101).ok());
  ASSERT_TRUE(m->AllocateSlots(a, 1).ok());
  ASSERT_EQ(events.size(), 2u);  // 8 tokens: block 1 full and cached
  EXPECT_EQ(events[1].type, KvEventType::kBlockStored);
  EXPECT_EQ(events[1].hash, a.block_hashes()[1]);
  EXPECT_EQ(events[1].parent_hash, a.block_hashes()[0]);
  EXPECT_EQ(events[0].parent_hash, a.root_hash());
  EXPECT_EQ(events[1].token_count, kBs);
  EXPECT_EQ(std::vector<TokenId>(events[1].token_ids.begin(), events[1].token_ids.end()),
            (std::vector<TokenId>{4, 5, 100, 101}));
  ASSERT_TRUE(a.AppendToken(102).ok());
  ASSERT_TRUE(m->AllocateSlots(a, 1).ok());
  EXPECT_EQ(Table(*m, 1).size(), 3u);
  EXPECT_EQ(*m->NumAllocatedTokens(1), 9);
  // A new request continuing the decoded text hits both blocks.
  std::vector<TokenId> p = {0, 1, 2, 3, 4, 5, 100, 101, 102};
  auto b = *m->NewRequest(2, p);
  EXPECT_EQ(m->GetComputedBlocks(b)->num_computed_tokens, 8);
}

TEST(KvCacheManagerTest, ChunkedPrefillGrowsTheTable) {
  auto m = MakeManager(8);
  auto a = *m->NewRequest(1, Iota(14));
  auto hit = *m->GetComputedBlocks(a);
  ASSERT_TRUE(m->AllocateSlots(a, 5, hit).ok());
  EXPECT_EQ(Table(*m, 1).size(), 2u);
  EXPECT_EQ(m->pool().NumCachedBlocks(), 1);
  ASSERT_TRUE(m->AllocateSlots(a, 5).ok());
  EXPECT_EQ(Table(*m, 1).size(), 3u);
  EXPECT_EQ(m->pool().NumCachedBlocks(), 2);
  ASSERT_TRUE(m->AllocateSlots(a, 4).ok());
  EXPECT_EQ(Table(*m, 1).size(), 4u);
  EXPECT_EQ(m->pool().NumCachedBlocks(), 3);
  EXPECT_EQ(m->AllocateSlots(a, 1).code(), absl::StatusCode::kInvalidArgument);  // no token 14
  EXPECT_TRUE(m->ValidateInvariants().ok());
}

TEST(KvCacheManagerTest, ResourceExhaustedChangesNothing) {
  auto m = MakeManager(5);
  auto a = *m->NewRequest(1, Iota(12));
  Admit(*m, a);                              // 3 blocks used
  auto b = *m->NewRequest(2, Iota(12, 50));  // needs 3, only 2 left
  const Snapshot before = Snap(*m, {1, 2});
  const CacheStats stats_before = m->stats();
  auto hit = *m->GetComputedBlocks(b);
  EXPECT_EQ(m->AllocateSlots(b, 12, hit).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Snap(*m, {1, 2}), before);
  EXPECT_FALSE(m->HasRequest(2));
  EXPECT_EQ(m->stats().evictions, stats_before.evictions);
  EXPECT_EQ(*m->NumBlocksToAllocate(b, 12, hit), 3);
  // Growing an existing request past the pool also changes nothing.
  ASSERT_TRUE(a.AppendTokens(Iota(16, 200)).ok());
  EXPECT_EQ(m->AllocateSlots(a, 16).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Snap(*m, {1, 2}), before);
  EXPECT_EQ(*m->NumAllocatedTokens(1), 12);
  EXPECT_TRUE(m->ValidateInvariants().ok());
}

TEST(KvCacheManagerTest, HitBlocksThatAreEvictableCountAgainstAvailability) {
  auto m = MakeManager(4);
  auto a = *m->NewRequest(1, Iota(9));
  Admit(*m, a);  // 3 blocks, 2 cached
  ASSERT_TRUE(m->Free(1).ok());
  // 4 available (1 free + 2 evictable + 1 freed uncached)... request b hits 2 evictable blocks and
  // needs 3 more: 2 + 3 > 4.
  auto b = *m->NewRequest(2, Iota(20));
  auto hit = *m->GetComputedBlocks(b);
  EXPECT_EQ(hit.blocks.size(), 2u);
  EXPECT_EQ(*m->NumBlocksToAllocate(b, 12, hit), 5);
  const Snapshot before = Snap(*m, {2});
  EXPECT_EQ(m->AllocateSlots(b, 12, hit).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Snap(*m, {2}), before);
  ASSERT_TRUE(m->AllocateSlots(b, 8, hit).ok());  // 2 hits + 2 new = 4
  EXPECT_EQ(m->NumAvailableBlocks(), 0);
}

TEST(KvCacheManagerTest, EvictionMakesRoomAndUpdatesTheIndex) {
  auto m = MakeManager(4);
  std::vector<KvEvent> removed;
  m->AddEventListener([&](const KvEvent& e) {
    if (e.type == KvEventType::kBlockRemoved) removed.push_back(e);
  });
  auto a = *m->NewRequest(1, Iota(8));
  Admit(*m, a);
  ASSERT_TRUE(m->Free(1).ok());  // 2 evictable (tail first), 2 free
  auto b = *m->NewRequest(2, Iota(12, 100));
  Admit(*m, b);  // needs 3: 2 free + evicts a's tail block
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0].hash, a.block_hashes()[1]);
  EXPECT_EQ(m->stats().evictions, 1);
  EXPECT_EQ(m->pool().FindCached(a.block_hashes()[1]), kNullBlock);
  EXPECT_NE(m->pool().FindCached(a.block_hashes()[0]), kNullBlock);
}

TEST(KvCacheManagerTest, FreeErrors) {
  auto m = MakeManager(4);
  EXPECT_EQ(m->Free(9).code(), absl::StatusCode::kNotFound);
  auto a = *m->NewRequest(1, Iota(5));
  Admit(*m, a);
  ASSERT_TRUE(m->Free(1).ok());
  const absl::Status twice = m->Free(1);
  EXPECT_EQ(twice.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(twice.message().find("already freed"), std::string::npos);
  EXPECT_EQ(m->GetBlockTable(1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m->NumAllocatedTokens(1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(m->ValidateInvariants().ok());
}

TEST(KvCacheManagerTest, AllocateSlotsArgumentErrorsChangeNothing) {
  auto m = MakeManager(8);
  auto a = *m->NewRequest(1, Iota(9));
  auto hit_a = *m->GetComputedBlocks(a);
  ASSERT_TRUE(m->AllocateSlots(a, 9, hit_a).ok());
  auto b = *m->NewRequest(2, Iota(9));
  auto hit = *m->GetComputedBlocks(b);
  ASSERT_EQ(hit.blocks.size(), 2u);
  const Snapshot before = Snap(*m, {1, 2});
  EXPECT_EQ(m->AllocateSlots(b, -1, hit).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m->AllocateSlots(b, 2, hit).code(), absl::StatusCode::kInvalidArgument);  // 8 + 2 > 9
  // 8 + INT64_MAX overflows: refused, not wrapped to a negative token count.
  EXPECT_EQ(m->AllocateSlots(b, INT64_MAX, hit).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m->AllocateSlots(a, INT64_MAX).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m->NumBlocksToAllocate(a, INT64_MAX).status().code(),
            absl::StatusCode::kInvalidArgument);
  ComputedBlocks wrong_count = hit;
  wrong_count.num_computed_tokens = 7;
  EXPECT_EQ(m->AllocateSlots(b, 1, wrong_count).code(), absl::StatusCode::kInvalidArgument);
  ComputedBlocks swapped = hit;
  std::swap(swapped.blocks[0], swapped.blocks[1]);
  EXPECT_EQ(m->AllocateSlots(b, 1, swapped).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(m->AllocateSlots(a, 0, hit).code(),
            absl::StatusCode::kInvalidArgument);  // computed blocks on a later call
  auto other_bs = *CacheRequest::Create({.id = 2, .block_size = 8}, Iota(9));
  EXPECT_EQ(m->AllocateSlots(other_bs, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(m->GetComputedBlocks(other_bs).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Snap(*m, {1, 2}), before);
  ASSERT_TRUE(m->AllocateSlots(b, 1, hit).ok());
}

TEST(KvCacheManagerTest, StaleComputedBlocksAreRejected) {
  auto m = MakeManager(3);
  auto a = *m->NewRequest(1, Iota(9));
  Admit(*m, a);
  ASSERT_TRUE(m->Free(1).ok());
  auto b = *m->NewRequest(2, Iota(9));
  auto hit = *m->GetComputedBlocks(b);
  ASSERT_EQ(hit.blocks.size(), 2u);
  m->ResetPrefixCache();  // the hit is stale now
  EXPECT_EQ(m->AllocateSlots(b, 1, hit).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(m->HasRequest(2));
}

TEST(KvCacheManagerTest, SaltsAndAdaptersIsolate) {
  auto m = MakeManager(32);
  auto a = *m->NewRequest(1, Iota(12), {.cache_salt = "alice"});
  Admit(*m, a);
  EXPECT_EQ(
      m->GetComputedBlocks(*m->NewRequest(2, Iota(12), {.cache_salt = "bob"}))->num_computed_tokens,
      0);
  EXPECT_EQ(m->GetComputedBlocks(*m->NewRequest(3, Iota(12)))->num_computed_tokens, 0);
  EXPECT_EQ(
      m->GetComputedBlocks(*m->NewRequest(4, Iota(12), {.cache_salt = "alice", .adapter_id = 3}))
          ->num_computed_tokens,
      0);
  EXPECT_EQ(m->GetComputedBlocks(*m->NewRequest(5, Iota(12), {.cache_salt = "alice"}))
                ->num_computed_tokens,
            8);
}

TEST(KvCacheManagerTest, ModelFingerprintsIsolate) {
  auto m1 = MakeManager(8, {.model_fingerprint = "model-a"});
  auto m2 = MakeManager(8, {.model_fingerprint = "model-b"});
  auto a = *m1->NewRequest(1, Iota(9));
  auto b = *m2->NewRequest(1, Iota(9));
  EXPECT_NE(a.block_hashes()[0], b.block_hashes()[0]);
  EXPECT_EQ(a.root_hash(), RootHash("", "model-a"));
}

TEST(KvCacheManagerTest, VocabularyIsEnforced) {
  auto m = MakeManager(8, {.vocab_size = 32});
  EXPECT_EQ(m->NewRequest(1, {{1, 2, 32}}).status().code(), absl::StatusCode::kInvalidArgument);
  auto ok = m->NewRequest(1, {{1, 2, 31}});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->AppendToken(40).code(), absl::StatusCode::kInvalidArgument);
  // A request checked against another vocabulary is refused.
  auto foreign = *CacheRequest::Create({.id = 2, .block_size = kBs, .vocab_size = 64}, Iota(5));
  EXPECT_EQ(m->GetComputedBlocks(foreign).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(KvCacheManagerTest, PrefixCachingOff) {
  auto m = MakeManager(8, {.enable_prefix_caching = false});
  auto a = *m->NewRequest(1, Iota(9));
  Admit(*m, a);
  EXPECT_EQ(m->pool().NumCachedBlocks(), 0);
  ASSERT_TRUE(m->Free(1).ok());
  auto b = *m->NewRequest(2, Iota(9));
  EXPECT_EQ(m->GetComputedBlocks(b)->num_computed_tokens, 0);
  EXPECT_EQ(m->NumAvailableBlocks(), 8);
}

TEST(KvCacheManagerTest, ResetPrefixCacheKeepsRunningRequests) {
  auto m = MakeManager(8);
  int cleared = 0;
  m->AddEventListener(
      [&](const KvEvent& e) { cleared += e.type == KvEventType::kAllBlocksCleared; });
  auto a = *m->NewRequest(1, Iota(9));
  Admit(*m, a);
  m->ResetPrefixCache();
  EXPECT_EQ(cleared, 1);
  EXPECT_EQ(m->pool().NumCachedBlocks(), 0);
  EXPECT_EQ(Table(*m, 1).size(), 3u);
  EXPECT_EQ(m->GetComputedBlocks(*m->NewRequest(2, Iota(9)))->num_computed_tokens, 0);
  ASSERT_TRUE(m->Free(1).ok());
  EXPECT_EQ(m->NumAvailableBlocks(), 8);
  EXPECT_EQ(m->stats().resets, 1);
  EXPECT_TRUE(m->ValidateInvariants().ok());
}

// Two prompts whose first blocks collide under a 1-bit hasher. Verification must refuse the reuse;
// with verification off the (wrong) reuse happens, which is what the switch trades.
TEST(KvCacheManagerTest, VerificationRefusesCollidingBlocks) {
  auto hasher = std::make_shared<testing::CollidingHasher>(1);
  // Find two different first blocks with the same (1-bit) hash.
  auto first = *CacheRequest::Create({.block_size = kBs, .hasher = hasher}, Iota(5, 0));
  std::vector<TokenId> other;
  for (int start = 1;; ++start) {
    auto r = *CacheRequest::Create({.block_size = kBs, .hasher = hasher}, Iota(5, start * 10));
    if (r.block_hashes()[0] == first.block_hashes()[0]) {
      other = Iota(5, start * 10);
      break;
    }
  }
  for (bool verify : {true, false}) {
    auto m = MakeManager(8, {.verify_tokens = verify, .hasher = hasher});
    auto a = *m->NewRequest(1, Iota(5, 0));
    Admit(*m, a);
    auto b = *m->NewRequest(2, other);
    auto hit = *m->GetComputedBlocks(b);
    EXPECT_EQ(hit.num_computed_tokens, verify ? 0 : 4) << "verify=" << verify;
    EXPECT_EQ(m->stats().verification_failures, verify ? 1 : 0);
  }
}

// A block whose own tokens match but whose earlier context differs (its parent hash collided)
// must not be reused: verification follows chain links, not only the block's tokens.
TEST(KvCacheManagerTest, VerificationFollowsChainLinks) {
  auto hasher = std::make_shared<testing::CollidingHasher>(1);
  auto m = MakeManager(16, {.hasher = hasher});
  // Request A: [X0 | S | tail]; request B: [Y0 | S | tail] with hash(X0) == hash(Y0).
  const std::vector<TokenId> x0 = Iota(kBs, 0);
  std::vector<TokenId> y0;
  auto rx = *CacheRequest::Create({.block_size = kBs, .hasher = hasher}, x0);
  for (int start = 1;; ++start) {
    auto ry = *CacheRequest::Create({.block_size = kBs, .hasher = hasher}, Iota(kBs, 100 * start));
    if (ry.block_hashes()[0] == rx.block_hashes()[0]) {
      y0 = Iota(kBs, 100 * start);
      break;
    }
  }
  const std::vector<TokenId> s = {7, 7, 7, 7};
  auto concat = [&](const std::vector<TokenId>& head) {
    std::vector<TokenId> p = head;
    p.insert(p.end(), s.begin(), s.end());
    p.push_back(1);
    return p;
  };
  auto b = *m->NewRequest(2, concat(y0));
  Admit(*m, b);  // caches Y0 and S (S's hash = h(h(Y0), S) = h(h(X0), S))
  ASSERT_TRUE(m->Free(2).ok());
  m->ResetPrefixCache();
  auto b2 = *m->NewRequest(3, concat(y0));
  Admit(*m, b2);  // Y0 and S cached again, S linked to Y0
  ASSERT_TRUE(m->Free(3).ok());
  // Replace Y0 by X0 in the index (A computes X0: Y0 fails verification and is replaced).
  auto a = *m->NewRequest(1, x0);
  Admit(*m, a);
  ASSERT_TRUE(m->Free(1).ok());
  EXPECT_GE(m->stats().replaced_blocks, 1);
  // C = [X0 | S | ...]: X0 hits, S's hash hits a block with the right tokens whose context was Y0.
  auto c = *m->NewRequest(4, concat(x0));
  EXPECT_EQ(m->GetComputedBlocks(c)->num_computed_tokens, kBs);
}

TEST(KvCacheManagerTest, NoCacheFromTokenKeepsLaterBlocksOutOfTheIndex) {
  auto m = MakeManager(4);
  auto a = *m->NewRequest(1, Iota(14));
  ASSERT_TRUE(m->AllocateSlots(a, 6).ok());
  EXPECT_EQ(m->pool().NumCachedBlocks(), 1);
  // A failed call's option does not stick.
  EXPECT_EQ(m->AllocateSlots(a, 9, {}, {.no_cache_from_token = 0}).code(),
            absl::StatusCode::kInvalidArgument);
  // Tokens 6.. are "re-rotated": block 1 (tokens 4..7) and later are never cached.
  ASSERT_TRUE(m->AllocateSlots(a, 8, {}, {.no_cache_from_token = 6}).ok());
  EXPECT_EQ(m->pool().NumCachedBlocks(), 1);
  ASSERT_TRUE(a.AppendToken(3).ok());
  ASSERT_TRUE(a.AppendToken(3).ok());
  ASSERT_TRUE(m->AllocateSlots(a, 2).ok());  // block 3 fills: still not cached (sticky)
  EXPECT_EQ(m->pool().NumCachedBlocks(), 1);
  EXPECT_TRUE(m->ValidateInvariants().ok());
  ASSERT_TRUE(m->Free(1).ok());
  auto b = *m->NewRequest(2, Iota(14));
  EXPECT_EQ(m->GetComputedBlocks(b)->num_computed_tokens, kBs);
}

}  // namespace
}  // namespace pagedkv
