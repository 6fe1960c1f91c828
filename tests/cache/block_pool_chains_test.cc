// Copyright 2026 The pagedkv Authors.
//
// Chain reachability in BlockPool (cache/block_pool_chains.cc), under every eviction policy:
// random multi-turn requests over shared documents; after every step the pool must hold exactly
// stored_blocks - evictions blocks, keep no evictable block whose chain is broken (checked by
// walking the links with the public API, independently of the pool's own lists), and announce
// exactly what it counts (one BlockRemoved per eviction). Fixed seeds, no sleeps.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/eviction_policy.h"
#include "pagedkv/cache/kv_cache_manager.h"

namespace pagedkv {
namespace {

constexpr int32_t kBs = 4;
constexpr int32_t kBlocks = 40;

// Reachable from its chain's root: no parent block, or a linked, reachable parent.
bool Reachable(const BlockPool& pool, BlockId b) {
  for (int depth = 0; depth <= kBlocks; ++depth) {
    if (!pool.IsCached(b)) return false;
    if (pool.IsLinkedTo(b, kNullBlock)) return true;
    const BlockId parent = pool.FindCached(*pool.ParentHash(b));
    if (parent == kNullBlock || !pool.IsLinkedTo(b, parent)) return false;
    b = parent;
  }
  return false;
}

class ChainsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ChainsTest, StoredMinusEvictionsIsThePoolAndNoBrokenChainIsKept) {
  std::mt19937 rng(17);
  auto made = KvCacheManager::Create(
      {.num_blocks = kBlocks, .block_size = kBs, .eviction_policy = GetParam()});
  ASSERT_TRUE(made.ok()) << made.status();
  KvCacheManager& m = **made;
  int64_t removed_events = 0, stored_events = 0;
  m.AddEventListener([&](const KvEvent& e) {
    removed_events += e.type == KvEventType::kBlockRemoved;
    stored_events += e.type == KvEventType::kBlockStored;
  });
  // Conversations: each turn repeats its conversation's history and adds tokens, so chains
  // grow and share prefixes; FIFO-like orders evict parents before children.
  std::vector<std::vector<TokenId>> history(6);
  for (auto& h : history) {
    for (int i = 0; i < 8; ++i) h.push_back(static_cast<TokenId>(rng() % 50));
  }
  std::vector<RequestId> running;
  int64_t broken_seen = 0;
  for (RequestId id = 1; id <= 600; ++id) {
    SCOPED_TRACE(absl::StrCat(GetParam(), " request ", id));
    std::vector<TokenId>& h = history[rng() % history.size()];
    if (h.size() > 60) h.resize(8);  // a new conversation on the same system prompt
    for (int i = 0; i < 1 + static_cast<int>(rng() % 9); ++i) {
      h.push_back(static_cast<TokenId>(rng() % 50));
    }
    auto req = m.NewRequest(id, h);
    ASSERT_TRUE(req.ok()) << req.status();
    auto hit = m.GetComputedBlocks(*req);
    ASSERT_TRUE(hit.ok()) << hit.status();
    if (m.AllocateSlots(*req, req->num_tokens() - hit->num_computed_tokens, *hit).ok()) {
      running.push_back(id);
    }
    while (running.size() > 3 || (!running.empty() && rng() % 2)) {
      const size_t k = rng() % running.size();
      ASSERT_TRUE(m.Free(running[k]).ok());
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(k));
    }
    ASSERT_TRUE(m.ValidateInvariants().ok()) << m.ValidateInvariants();
    const CacheStats s = m.stats();
    const BlockPool& pool = m.pool();
    ASSERT_EQ(s.stored_blocks - s.evictions, pool.NumCachedBlocks());
    ASSERT_EQ(removed_events, s.evictions);
    ASSERT_EQ(stored_events, s.stored_blocks);
    for (BlockId b = 0; b < kBlocks; ++b) {
      if (!pool.IsCached(b) || Reachable(pool, b)) continue;
      ++broken_seen;
      ASSERT_GT(pool.RefCount(b), 0) << "block " << b << " is unreachable yet kept evictable";
    }
  }
  for (RequestId id : running) ASSERT_TRUE(m.Free(id).ok());
  for (BlockId b = 0; b < kBlocks; ++b) {
    EXPECT_TRUE(!m.pool().IsCached(b) || Reachable(m.pool(), b)) << "block " << b;
  }
  EXPECT_GT(m.stats().evictions, 0);
  std::printf("%s: stored=%lld evictions=%lld unreachable_evictions=%lld held_unreachable=%lld\n",
              GetParam().c_str(), static_cast<long long>(m.stats().stored_blocks),
              static_cast<long long>(m.stats().evictions),
              static_cast<long long>(m.stats().unreachable_evictions),
              static_cast<long long>(broken_seen));
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, ChainsTest, ::testing::ValuesIn([] {
                           std::vector<std::string> names;
                           for (std::string_view n : EvictionPolicyNames()) names.emplace_back(n);
                           return names;
                         }()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace pagedkv
