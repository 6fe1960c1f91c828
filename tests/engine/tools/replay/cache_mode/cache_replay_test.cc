// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/cache_mode/cache_replay.h"

#include <list>
#include <map>
#include <random>

#include "absl/container/flat_hash_map.h"
#include "engine/tools/replay/workload/generators.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagedkv::replay {
namespace {

using ::testing::HasSubstr;

// Brute-force LRU prefix cache with the semantics RunCacheReplay documents: per request, pin hits,
// insert misses (a free slot, else evict the least recently released unpinned block), then release
// tail first. With the engine rules (w.engine_rules), the last block of a whole-block prompt is
// never a hit, and a partial tail takes one more slot (evicting when none is free) until release.
CacheReplayResult ReferenceLru(const ExpandedWorkload& w, int64_t capacity) {
  CacheReplayResult res;
  std::map<std::pair<uint64_t, uint64_t>, int> refs;   // cached key -> pin count
  std::list<std::pair<uint64_t, uint64_t>> released;   // unpinned cached keys, oldest first
  std::map<std::pair<uint64_t, uint64_t>, bool> ever;  // keys of earlier requests
  for (size_t r = 0; r < w.num_requests(); ++r) {
    auto keys = w.RequestKeys(r);
    std::vector<std::pair<uint64_t, uint64_t>> pinned;
    bool prefix = true, inf_prefix = true, full = false;
    int64_t hits = 0, inf_hits = 0;
    const int64_t n = static_cast<int64_t>(keys.size());
    const bool capped = w.engine_rules && n > 0 && w.input_tokens[r] == n * w.block_size;
    for (int64_t i = 0; i < n; ++i) {
      const BlockHash& h = keys[static_cast<size_t>(i)];
      const auto k = std::make_pair(h.low, h.high);
      if (capped && i + 1 == n && prefix) {
        prefix = false;
        if (refs.contains(k)) {
          ++res.hit_capped_blocks;
          if (refs[k]++ == 0) released.remove(k);
          pinned.push_back(k);
          inf_prefix = inf_prefix && ever.contains(k);
          continue;
        }
      }
      inf_prefix = inf_prefix && ever.contains(k);
      inf_hits += inf_prefix;
      if (refs.contains(k)) {
        if (refs[k]++ == 0) released.remove(k);
        pinned.push_back(k);
        if (prefix) {
          ++hits;
        } else {
          ++res.miss_after_miss;
        }
        continue;
      }
      prefix = false;
      ++(ever.contains(k) ? res.miss_evicted : res.miss_never_seen);
      if (!full && static_cast<int64_t>(refs.size()) >= capacity) {
        if (released.empty()) {
          full = true;
        } else {
          refs.erase(released.front());
          released.pop_front();
          ++res.evictions;
        }
      }
      if (full) {
        ++res.over_capacity_blocks;
        continue;
      }
      refs[k] = 1;
      pinned.push_back(k);
    }
    if (w.engine_rules && w.input_tokens[r] % w.block_size != 0 && !full) {
      // The uncached tail slot: free when refs leave room, else the oldest released block.
      if (static_cast<int64_t>(refs.size()) >= capacity && !released.empty()) {
        refs.erase(released.front());
        released.pop_front();
        ++res.evictions;
      }
    }
    for (auto it = pinned.rbegin(); it != pinned.rend(); ++it) {
      if (--refs[*it] == 0) released.push_back(*it);
    }
    for (const BlockHash& h : keys) ever[{h.low, h.high}] = true;
    res.hit_blocks += hits;
    res.infinite_hit_blocks += inf_hits;
  }
  return res;
}

Workload RandomTraceWorkload(uint64_t seed, int requests) {
  // Trace-like requests whose hash ids form a random prefix tree, so prefixes are shared.
  std::mt19937_64 rng(seed);
  Workload w;
  w.trace_block_size = 4;
  std::vector<std::vector<uint64_t>> prompts;
  uint64_t next_id = 0;
  for (int i = 0; i < requests; ++i) {
    std::vector<uint64_t> ids;
    if (!prompts.empty() && rng() % 4 != 0) {
      const auto& base = prompts[rng() % prompts.size()];
      ids.assign(base.begin(), base.begin() + static_cast<int64_t>(rng() % (base.size() + 1)));
    }
    const int extra = 1 + static_cast<int>(rng() % 6);
    for (int k = 0; k < extra; ++k) ids.push_back(next_id++);
    prompts.push_back(ids);
    ReplayRequest r;
    r.input_length = static_cast<int64_t>(ids.size() - 1) * 4 + 1 + static_cast<int64_t>(rng() % 4);
    for (size_t k = 0; k < ids.size(); ++k) {
      r.segments.push_back(
          {.content_id = ids[k],
           .length = static_cast<int32_t>(k + 1 < ids.size() ? 4 : r.input_length - 4 * k)});
    }
    w.requests.push_back(r);
  }
  return w;
}

TEST(CacheReplayTest, LruMatchesBruteForceReference) {
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    Workload w = RandomTraceWorkload(seed, 150);
    for (const auto& [bs, partial_tail] : {std::pair{4, true}, {2, true}, {4, false}, {2, false}}) {
      auto e = ExpandWorkload(
          w, {.block_size = bs, .compute_next_use = false, .cache_partial_tail = partial_tail});
      ASSERT_TRUE(e.ok()) << e.status();
      for (int64_t cap : {3, 8, 20, 60, 400}) {
        auto got = RunCacheReplay(*e, {.capacity_blocks = cap, .policy = "lru"});
        ASSERT_TRUE(got.ok()) << got.status();
        const CacheReplayResult want = ReferenceLru(*e, cap);
        SCOPED_TRACE(testing::Message() << "seed " << seed << " bs " << bs << " cap " << cap
                                        << " partial tail " << partial_tail);
        EXPECT_EQ(got->hit_capped_blocks, want.hit_capped_blocks);
        EXPECT_EQ(got->hit_blocks, want.hit_blocks);
        EXPECT_EQ(got->infinite_hit_blocks, want.infinite_hit_blocks);
        EXPECT_EQ(got->evictions, want.evictions);
        EXPECT_EQ(got->miss_never_seen, want.miss_never_seen);
        EXPECT_EQ(got->miss_evicted, want.miss_evicted);
        EXPECT_EQ(got->miss_after_miss, want.miss_after_miss);
        EXPECT_EQ(got->over_capacity_blocks, want.over_capacity_blocks);
        EXPECT_EQ(got->hit_blocks + got->miss_never_seen + got->miss_evicted +
                      got->miss_after_miss + got->hit_capped_blocks,
                  got->blocks);
      }
    }
  }
}

TEST(CacheReplayTest, TokenHitRateWeighsTheLastPartialBlockByItsTokens) {
  Workload w;
  w.trace_block_size = 512;
  for (int i = 0; i < 2; ++i) {
    w.requests.push_back(
        {.input_length = 1000,
         .output_length = 1,
         .segments = {{.content_id = 1, .length = 512}, {.content_id = 2, .length = 488}}});
  }
  // The model before issue 29: the partial hash id is a block.
  auto e = ExpandWorkload(w, {.block_size = 512, .cache_partial_tail = true});
  ASSERT_TRUE(e.ok());
  auto r = RunCacheReplay(*e, {.capacity_blocks = 10, .policy = "lru"});
  ASSERT_TRUE(r.ok());
  // vLLM's rules (default): only the full block is one, and it hits the second time.
  auto engine = ExpandWorkload(w, {.block_size = 512});
  ASSERT_TRUE(engine.ok());
  auto v = RunCacheReplay(*engine, {.capacity_blocks = 10, .policy = "lru"});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->blocks, 2);
  EXPECT_EQ(v->hit_blocks, 1);
  EXPECT_EQ(v->hit_tokens, 512);
  EXPECT_EQ(v->not_full_block_tokens, 2 * 488);
  EXPECT_EQ(r->blocks, 4);
  EXPECT_EQ(r->hit_blocks, 2);
  EXPECT_EQ(r->hit_tokens, 1000);
  EXPECT_DOUBLE_EQ(r->block_hit_rate(), 0.5);
  EXPECT_DOUBLE_EQ(r->token_hit_rate(), 0.5);
  EXPECT_EQ(r->miss_never_seen, 2);

  // At block size 16 the 1000-token prompt has 62 full blocks and 8 tokens in none.
  auto small = ExpandWorkload(w, {.block_size = 16});
  ASSERT_TRUE(small.ok());
  auto s = RunCacheReplay(*small, {.capacity_blocks = 1000, .policy = "lru"});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->hit_blocks, 62);
  EXPECT_EQ(s->hit_tokens, 62 * 16);
  EXPECT_EQ(s->not_full_block_tokens, 16);
}

TEST(CacheReplayTest, UnboundedCapacityReachesTheInfiniteCacheRate) {
  auto w = MakeBuiltinWorkload("mixed", {.num_requests = 300, .seed = 8});
  ASSERT_TRUE(w.ok());
  auto e = ExpandWorkload(*w, {.block_size = 16});
  ASSERT_TRUE(e.ok());
  for (const std::string& policy : CacheReplayPolicyNames()) {
    // Prefix blocks only: chunk copies (shifted hits) would compete for the same capacity. One
    // block more for a request's uncached partial tail (engine rules).
    auto r = RunCacheReplay(
        *e, {.capacity_blocks = e->distinct_blocks + 1, .policy = policy, .count_shifted = false});
    ASSERT_TRUE(r.ok()) << policy << ": " << r.status();
    EXPECT_EQ(r->hit_blocks, r->infinite_hit_blocks) << policy;
    EXPECT_EQ(r->hit_tokens, r->infinite_hit_tokens) << policy;
    EXPECT_EQ(r->evictions, 0) << policy;
    EXPECT_GT(r->block_hit_rate(), 0.2) << policy;
  }
}

TEST(CacheReplayTest, BeladyIsNeverWorseThanLru) {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    Workload w = RandomTraceWorkload(100 + seed, 200);
    auto e = ExpandWorkload(w, {.block_size = 4});
    ASSERT_TRUE(e.ok());
    for (int64_t cap : {4, 10, 25, 60, 150}) {
      auto lru = RunCacheReplay(*e, {.capacity_blocks = cap, .policy = "lru"});
      auto belady = RunCacheReplay(*e, {.capacity_blocks = cap, .policy = "belady"});
      ASSERT_TRUE(lru.ok() && belady.ok());
      EXPECT_GE(belady->hit_blocks, lru->hit_blocks) << "seed " << seed << " cap " << cap;
    }
  }
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    auto w = MakeBuiltinWorkload("mixed", {.num_requests = 400, .seed = seed});
    ASSERT_TRUE(w.ok());
    auto e = ExpandWorkload(*w, {.block_size = 16});
    ASSERT_TRUE(e.ok());
    for (double f : {0.02, 0.1, 0.3}) {
      const auto cap = static_cast<int64_t>(f * static_cast<double>(e->distinct_blocks)) + 1;
      auto lru = RunCacheReplay(*e, {.capacity_blocks = cap, .policy = "lru"});
      auto belady = RunCacheReplay(*e, {.capacity_blocks = cap, .policy = "belady"});
      ASSERT_TRUE(lru.ok() && belady.ok());
      EXPECT_GE(belady->hit_blocks, lru->hit_blocks) << "seed " << seed << " cap " << cap;
    }
  }
}

// Whether every request's blocks (its partial tail included) fit a pool of `capacity` blocks.
bool EveryRequestFits(const ExpandedWorkload& e, int64_t capacity) {
  for (size_t r = 0; r < e.num_requests(); ++r) {
    if (NumBlocksFor(e.input_tokens[r], e.block_size) > capacity) return false;
  }
  return true;
}

// With a tier that holds every distinct block, a block is lost only when it was never seen, so
// device + host + remote hits equal the infinite cache's, whatever the pool's size, the tiers'
// policy or the host store rule - as long as every request fits the pool: as in the engine, a
// tier load leaves room for the rest of its request (TierChain), or loads nothing.
TEST(CacheReplayTest, TiersThatHoldEverythingReachTheInfiniteCacheRate) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    Workload w = RandomTraceWorkload(300 + seed, 250);
    auto e = ExpandWorkload(w, {.block_size = 4, .compute_next_use = false});
    ASSERT_TRUE(e.ok());
    const int64_t all = e->distinct_blocks;
    ASSERT_TRUE(EveryRequestFits(*e, 30));  // so the equality below is checked at 30
    for (int64_t cap : {8, 30}) {
      for (const char* tier_policy : {"lru", "arc"}) {
        for (TierStoreRule rule : {TierStoreRule::kWriteThrough, TierStoreRule::kWriteBack}) {
          for (auto [host, remote] : {std::pair<int64_t, int64_t>{all, 0}, {0, all}, {5, all}}) {
            SCOPED_TRACE(testing::Message()
                         << "seed " << seed << " cap " << cap << " " << tier_policy << " host "
                         << host << " remote " << remote << " " << TierStoreRuleName(rule));
            auto r = RunCacheReplay(*e, {.capacity_blocks = cap,
                                         .policy = "lru",
                                         .host_capacity_blocks = host,
                                         .remote_capacity_blocks = remote,
                                         .tier_policy = tier_policy,
                                         .host_store = rule});
            ASSERT_TRUE(r.ok()) << r.status();
            const int64_t tiered = r->hit_blocks + r->host_hit_blocks + r->remote_hit_blocks;
            if (!EveryRequestFits(*e, cap)) {
              EXPECT_LE(tiered, r->infinite_hit_blocks);
              continue;
            }
            EXPECT_EQ(tiered, r->infinite_hit_blocks);
            EXPECT_EQ(r->hit_tokens + r->host_hit_tokens + r->remote_hit_tokens,
                      r->infinite_hit_tokens);
            if (host == 0) {
              EXPECT_EQ(r->host_hit_blocks, 0);
            }
            EXPECT_GT(r->host_hit_blocks + r->remote_hit_blocks, 0);
          }
        }
      }
    }
  }
}

TEST(CacheReplayTest, SmallTiersAddHitsBelowTheInfiniteCache) {
  auto w = MakeBuiltinWorkload("mixed", {.num_requests = 400, .seed = 3});
  ASSERT_TRUE(w.ok());
  auto e = ExpandWorkload(*w, {.block_size = 16, .compute_next_use = false});
  ASSERT_TRUE(e.ok());
  const int64_t cap = e->distinct_blocks / 50 + 1;
  auto device = RunCacheReplay(*e, {.capacity_blocks = cap, .count_shifted = false});
  auto tiered = RunCacheReplay(*e, {.capacity_blocks = cap,
                                    .count_shifted = false,
                                    .host_capacity_blocks = 4 * cap,
                                    .remote_capacity_blocks = 16 * cap});
  ASSERT_TRUE(device.ok() && tiered.ok());
  EXPECT_EQ(device->host_hit_blocks + device->remote_hit_blocks, 0);
  EXPECT_GT(tiered->tiered_block_hit_rate(), device->block_hit_rate());
  EXPECT_LE(tiered->tiered_block_hit_rate(), tiered->infinite_cache_block_hit_rate());
  EXPECT_GT(tiered->host_hit_blocks, 0);
  EXPECT_GT(tiered->remote_hit_blocks, 0);
  auto bad =
      RunCacheReplay(*e, {.capacity_blocks = cap, .host_capacity_blocks = 8, .tier_policy = "mru"});
  EXPECT_THAT(bad.status().message(), HasSubstr("\"lru\" or \"arc\""));
}

// --pin-system-prompts: system prompts cached at priority 90 outlive user messages, which the
// system-prompt workload rarely reuses, so a mid-sized pool hits more; Belady ignores priorities.
TEST(CacheReplayTest, PinnedSystemPromptsRaiseTheHitRate) {
  auto plain = MakeBuiltinWorkload("system-prompt", {.num_requests = 600, .seed = 1});
  auto pinned = MakeBuiltinWorkload("system-prompt",
                                    {.num_requests = 600, .seed = 1, .pin_system_prompts = true});
  ASSERT_TRUE(plain.ok() && pinned.ok());
  ASSERT_FALSE(pinned->requests[0].priority_spans.empty());
  auto e_plain = ExpandWorkload(*plain, {.block_size = 16});
  auto e_pinned = ExpandWorkload(*pinned, {.block_size = 16});
  ASSERT_TRUE(e_plain.ok() && e_pinned.ok());
  EXPECT_TRUE(e_plain->priorities.empty());
  ASSERT_EQ(e_pinned->priorities.size(), e_pinned->keys.size());
  for (const char* policy : {"lru", "belady"}) {
    auto a = RunCacheReplay(*e_plain, {.capacity_blocks = 2048, .policy = policy});
    auto b = RunCacheReplay(*e_pinned, {.capacity_blocks = 2048, .policy = policy});
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    SCOPED_TRACE(policy);
    if (std::string(policy) == "belady") {
      EXPECT_EQ(b->hit_blocks, a->hit_blocks);
    } else {
      EXPECT_GT(b->hit_blocks, a->hit_blocks);
    }
  }
}

TEST(CacheReplayTest, PrioritySpansCoverWholeBlocksOnly) {
  Workload w;
  w.requests.push_back(
      {.input_length = 40,
       .output_length = 1,
       .segments = {{.content_id = 1, .length = 40}},
       .priority_spans = {{.begin_token = 0, .end_token = 20, .priority = {.priority = 90}}}});
  auto e = ExpandWorkload(w, {.block_size = 16});
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->keys.size(), 2u);  // [0, 16) inside the span, [16, 32) not
  EXPECT_EQ(e->priorities, (std::vector<int8_t>{90, 35}));
  w.requests[0].priority_spans[0].end_token = 0;  // empty span
  EXPECT_THAT(ExpandWorkload(w, {.block_size = 16}).status().message(),
              HasSubstr("priority span 0"));
}

TEST(CacheReplayTest, BadCapacityAndUnknownPolicyAreClearErrors) {
  Workload w = RandomTraceWorkload(1, 10);
  auto e = ExpandWorkload(w, {.block_size = 4, .compute_next_use = false});
  ASSERT_TRUE(e.ok());
  auto zero = RunCacheReplay(*e, {.capacity_blocks = 0});
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(zero.status().message(), HasSubstr("capacity"));
  auto bad = RunCacheReplay(*e, {.capacity_blocks = 10, .policy = "mru"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("lru, lfu, fifo, arc, s3fifo, wtinylfu, chain, belady"));
  auto no_future = RunCacheReplay(*e, {.capacity_blocks = 10, .policy = "belady"});
  ASSERT_FALSE(no_future.ok());
  EXPECT_THAT(no_future.status().message(), HasSubstr("compute_next_use"));
}

}  // namespace
}  // namespace pagedkv::replay
