// Copyright 2026 The pagedkv Authors.
//
// Shifted hits in cache-mode replay: counted against a brute-force reference of the documented
// rules (an LRU pool shared by prefix blocks and chunk copies; chunks identified by their
// materialised tokens), with an unbounded cache and with eviction.
#include <algorithm>
#include <list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/tools/replay/cache_mode/cache_replay.h"
#include "engine/tools/replay/report.h"
#include "engine/tools/replay/workload/block_expansion.h"
#include "engine/tools/replay/workload/generators.h"
#include "gtest/gtest.h"
#include "tests/engine/tools/replay/shifted_reference_util.h"

namespace pagedkv::replay {
namespace {

using shifted_reference::ShiftedCounts;
using shifted_reference::SmallRag;

// Brute force: an LRU cache of `capacity` entries holding prefix block keys and chunk-copy
// blocks (unique ids). Per request: the prefix walk (pin hits, insert misses evicting the least
// recently released entry), then each marked chunk in order: inside the prefix hit -> nothing;
// registered with every block still cached -> a hit (its blocks are pinned and released tail
// first); else a copy of ceil(length / block_size) new blocks (all or nothing), released tail
// first and registered. Then the request's blocks are released tail first. When a copy block is
// evicted, the copy's other unpinned blocks are freed (the chunk index drops the chunk, and its
// remaining copy blocks can no longer be reached).
ShiftedCounts Reference(const Workload& workload, const ExpandedWorkload& w, int64_t capacity) {
  using Key = std::pair<uint64_t, uint64_t>;
  ShiftedCounts res;
  std::map<Key, int> refs;  // cached entry -> pin count
  std::list<Key> released;  // unpinned cached entries, least recently released first
  struct Chunk {
    int64_t position;
    std::vector<Key> blocks;
  };
  std::map<std::vector<TokenId>, Chunk> chunks;  // chunk tokens -> registered copy
  uint64_t serial = 0;
  std::map<Key, std::vector<Key>> copy_of;  // copy block -> all blocks of its copy
  auto free_orphans = [&](const Key& evicted) {
    const auto it = copy_of.find(evicted);
    if (it == copy_of.end()) return;
    for (const Key& k : it->second) {
      const auto ref = refs.find(k);
      if (k == evicted || ref == refs.end() || ref->second != 0) continue;
      released.remove(k);
      refs.erase(ref);
      ++res.evictions;  // the pool counts every block that leaves its index
    }
  };
  auto evict_for = [&](int64_t n) {  // makes room for n new entries; false when impossible
    const int64_t need = static_cast<int64_t>(refs.size()) + n - capacity;
    if (need > static_cast<int64_t>(released.size())) return false;
    while (static_cast<int64_t>(refs.size()) + n > capacity) {
      const Key victim = released.front();
      refs.erase(victim);
      released.pop_front();
      ++res.evictions;
      free_orphans(victim);
    }
    return true;
  };
  auto release = [&](const std::vector<Key>& keys) {  // tail first
    for (auto it = keys.rbegin(); it != keys.rend(); ++it) {
      if (--refs[*it] == 0) released.push_back(*it);
    }
  };
  auto pin = [&](const Key& k) {
    if (refs[k]++ == 0) released.remove(k);
  };
  for (size_t r = 0; r < w.num_requests(); ++r) {
    std::vector<Key> pinned;
    bool prefix = true, full = false;
    int64_t hits = 0;
    for (const BlockHash& h : w.RequestKeys(r)) {
      const Key k{h.low, h.high};
      if (refs.contains(k)) {
        pin(k);
        pinned.push_back(k);
        hits += prefix;
        continue;
      }
      prefix = false;
      if (full || !evict_for(1)) {
        full = true;
        continue;
      }
      refs[k] = 1;
      pinned.push_back(k);
    }
    res.hit_blocks += hits;
    const int64_t prefix_tokens = hits * w.block_size;
    const std::vector<TokenId> prompt = MaterializePrompt(workload.requests[r], 32000);
    for (const ChunkSpan& c : workload.requests[r].chunks) {
      const int64_t covered = std::clamp<int64_t>(prefix_tokens - c.token_offset, 0, c.length);
      if (covered == c.length) {
        ++res.chunks_in_prefix;
        continue;
      }
      const std::vector<TokenId> tokens(prompt.begin() + c.token_offset,
                                        prompt.begin() + c.token_offset + c.length);
      auto it = chunks.find(tokens);
      if (it != chunks.end() && std::all_of(it->second.blocks.begin(), it->second.blocks.end(),
                                            [&](const Key& k) { return refs.contains(k); })) {
        ++res.chunk_hits;
        res.shifted_hit_tokens += c.length - covered;
        if (it->second.position != c.token_offset) {
          ++res.chunk_hits_moved;
          res.shifted_hit_tokens_moved += c.length - covered;
        }
        for (const Key& k : it->second.blocks) pin(k);
        release(it->second.blocks);
        continue;
      }
      const int64_t n = (c.length + w.block_size - 1) / w.block_size;
      if (!evict_for(n)) {
        ++res.chunk_register_failures;
        continue;
      }
      Chunk copy{.position = c.token_offset, .blocks = {}};
      for (int64_t i = 0; i < n; ++i) {
        const Key k{~uint64_t{0}, serial++};
        refs[k] = 1;
        copy.blocks.push_back(k);
      }
      release(copy.blocks);
      for (const Key& k : copy.blocks) copy_of[k] = copy.blocks;
      chunks[tokens] = std::move(copy);
      ++res.chunks_registered;
    }
    release(pinned);
  }
  return res;
}

TEST(ShiftedReplayTest, MatchesBruteForceReferenceUnboundedAndWithEviction) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const Workload workload = SmallRag(seed, 120);
    for (int32_t bs : {4, 16}) {
      // The reference models the block rules before issue 29 (no hit cap, no tail block).
      auto e = ExpandWorkload(
          workload, {.block_size = bs, .compute_next_use = false, .cache_partial_tail = true});
      ASSERT_TRUE(e.ok()) << e.status();
      ASSERT_TRUE(e->has_chunks());
      for (int64_t cap : {int64_t{6}, int64_t{20}, int64_t{80}, int64_t{300}, int64_t{1} << 20}) {
        SCOPED_TRACE(testing::Message() << "seed " << seed << " bs " << bs << " cap " << cap);
        auto got = RunCacheReplay(*e, {.capacity_blocks = cap, .policy = "lru"});
        ASSERT_TRUE(got.ok()) << got.status();
        const ShiftedCounts want = Reference(workload, *e, cap);
        ASSERT_TRUE(got->shifted_counted);
        EXPECT_EQ(got->hit_blocks, want.hit_blocks);
        EXPECT_EQ(got->evictions, want.evictions);
        EXPECT_EQ(got->chunk_hits, want.chunk_hits);
        EXPECT_EQ(got->chunk_hits_moved, want.chunk_hits_moved);
        EXPECT_EQ(got->shifted_hit_tokens, want.shifted_hit_tokens);
        EXPECT_EQ(got->shifted_hit_tokens_moved, want.shifted_hit_tokens_moved);
        EXPECT_EQ(got->chunks_in_prefix, want.chunks_in_prefix);
        EXPECT_EQ(got->chunks_registered, want.chunks_registered);
        EXPECT_EQ(got->chunk_register_failures, want.chunk_register_failures);
        EXPECT_EQ(got->chunks, got->chunks_in_prefix + got->chunk_hits + got->chunks_registered +
                                   got->chunk_register_failures);
        EXPECT_LE(got->hit_tokens + got->shifted_hit_tokens, got->total_tokens);
        if (cap == int64_t{1} << 20) {
          EXPECT_EQ(got->evictions, 0);
          EXPECT_GT(got->chunk_hits_moved, 0);
        }
      }
    }
  }
}

TEST(ShiftedReplayTest, ADocumentAtAnotherPositionIsAMovedHit) {
  // Request 0: instruction A (8) + doc D (20) at 8. Request 1: instruction B (8) + D at 8 (same
  // position, different prefix). Request 2: B (8) + E (4) + D (20) at 12 (moved).
  Workload w;
  auto req = [](std::vector<Segment> segs, std::vector<ChunkSpan> chunks) {
    ReplayRequest r;
    for (const Segment& s : segs) r.input_length += s.length;
    r.output_length = 1;
    r.segments = std::move(segs);
    r.chunks = std::move(chunks);
    return r;
  };
  w.requests.push_back(
      req({{1, 8}, {9, 20}}, {{.content_id = 9, .token_offset = 8, .length = 20}}));
  w.requests.push_back(
      req({{2, 8}, {9, 20}}, {{.content_id = 9, .token_offset = 8, .length = 20}}));
  w.requests.push_back(
      req({{2, 8}, {3, 4}, {9, 20}}, {{.content_id = 9, .token_offset = 12, .length = 20}}));
  auto e = ExpandWorkload(w, {.block_size = 4, .compute_next_use = false});
  ASSERT_TRUE(e.ok()) << e.status();
  auto r = RunCacheReplay(*e, {.capacity_blocks = 1000, .policy = "lru"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->hit_blocks, 2);  // request 2 reuses B's two blocks
  EXPECT_EQ(r->chunk_hits, 2);
  EXPECT_EQ(r->chunk_hits_moved, 1);
  EXPECT_EQ(r->shifted_hit_tokens, 40);
  EXPECT_EQ(r->shifted_hit_tokens_moved, 20);
  EXPECT_EQ(r->shifted_hit_tokens_same_position(), 20);
  EXPECT_EQ(r->shifted_hit_blocks, 5 + 5);  // [8, 28) and [12, 32) at block size 4
  EXPECT_EQ(r->chunks_registered, 1);
  EXPECT_DOUBLE_EQ(r->shifted_hit_rate(), 40.0 / 88.0);
  EXPECT_DOUBLE_EQ(r->prefix_plus_shifted_token_hit_rate(), 48.0 / 88.0);

  // A pool too small to hold a copy beside a request's own blocks: no hit, honest eviction.
  auto tiny = RunCacheReplay(*e, {.capacity_blocks = 8, .policy = "lru"});
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  EXPECT_EQ(tiny->chunk_hits, 0);
  EXPECT_GT(tiny->evictions, 0);
}

TEST(ShiftedReplayTest, DeterministicAndSwitchable) {
  auto w = MakeBuiltinWorkload("rag", {.num_requests = 200, .seed = 3});
  ASSERT_TRUE(w.ok());
  auto e = ExpandWorkload(*w, {.block_size = 16});
  ASSERT_TRUE(e.ok());
  for (const std::string policy : {"lru", "lfu", "fifo"}) {
    auto a = RunCacheReplay(*e, {.capacity_blocks = 3000, .policy = policy});
    auto b = RunCacheReplay(*e, {.capacity_blocks = 3000, .policy = policy});
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_TRUE(a->shifted_counted) << policy;
    EXPECT_GT(a->shifted_hit_tokens, 0) << policy;
    EXPECT_EQ(a->shifted_hit_tokens, b->shifted_hit_tokens) << policy;
    EXPECT_EQ(a->shifted_hit_tokens_moved, b->shifted_hit_tokens_moved) << policy;
    EXPECT_EQ(a->hit_blocks, b->hit_blocks) << policy;
    EXPECT_EQ(a->evictions, b->evictions) << policy;
  }
  // Off: no chunk copies in the pool, the same prefix numbers as a workload whose chunks are not
  // marked.
  Workload unmarked = *w;
  for (ReplayRequest& r : unmarked.requests) r.chunks.clear();
  auto u = ExpandWorkload(unmarked, {.block_size = 16});
  ASSERT_TRUE(u.ok());
  ASSERT_FALSE(u->has_chunks());
  for (const std::string policy : {"lru", "belady"}) {
    auto off =
        RunCacheReplay(*e, {.capacity_blocks = 3000, .policy = policy, .count_shifted = false});
    auto plain = RunCacheReplay(*u, {.capacity_blocks = 3000, .policy = policy});
    ASSERT_TRUE(off.ok() && plain.ok());
    EXPECT_FALSE(off->shifted_counted) << policy;
    EXPECT_FALSE(plain->shifted_counted) << policy;
    EXPECT_EQ(off->hit_blocks, plain->hit_blocks) << policy;
    EXPECT_EQ(off->evictions, plain->evictions) << policy;
    EXPECT_EQ(off->shifted_hit_tokens, 0) << policy;
  }
}

TEST(ShiftedReplayTest, ReportHasShiftedFieldsOnlyWhenCounted) {
  auto w = MakeBuiltinWorkload("rag", {.num_requests = 100, .seed = 5});
  ASSERT_TRUE(w.ok());
  auto e = ExpandWorkload(*w, {.block_size = 16});
  ASSERT_TRUE(e.ok());
  auto lru = RunCacheReplay(*e, {.capacity_blocks = 2000, .policy = "lru"});
  auto off = RunCacheReplay(*e, {.capacity_blocks = 2000, .policy = "lru", .count_shifted = false});
  ASSERT_TRUE(lru.ok() && off.ok());
  const nlohmann::json j = CacheResultJson(*lru);
  for (const char* key : {"shifted_counted", "shifted_hit_tokens", "shifted_hit_tokens_moved",
                          "shifted_hit_tokens_same_position", "shifted_hit_blocks",
                          "shifted_hit_rate", "prefix_plus_shifted_token_hit_rate", "chunks"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["shifted_hit_tokens"].get<int64_t>(), lru->shifted_hit_tokens);
  EXPECT_DOUBLE_EQ(j["prefix_plus_shifted_token_hit_rate"].get<double>(),
                   j["token_hit_rate"].get<double>() + j["shifted_hit_rate"].get<double>());
  const nlohmann::json jb = CacheResultJson(*off);
  EXPECT_FALSE(jb["shifted_counted"].get<bool>());
  EXPECT_FALSE(jb.contains("shifted_hit_tokens"));
  const std::string table = FormatCacheTable({*lru, *off});
  EXPECT_NE(table.find("pfx+shift"), std::string::npos);
  EXPECT_NE(table.find(" -"), std::string::npos);
  // A workload without chunks: the table has no shifted columns.
  Workload unmarked = *w;
  for (ReplayRequest& r : unmarked.requests) r.chunks.clear();
  auto u = ExpandWorkload(unmarked, {.block_size = 16});
  ASSERT_TRUE(u.ok());
  auto plain = RunCacheReplay(*u, {.capacity_blocks = 2000, .policy = "lru"});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(FormatCacheTable({*plain}).find("shifted"), std::string::npos);
  EXPECT_FALSE(CacheResultJson(*plain).contains("shifted_hit_rate"));
}

}  // namespace
}  // namespace pagedkv::replay
