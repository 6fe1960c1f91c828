// Copyright 2026 The pagedkv Authors.
//
// Shifted hits with the clairvoyant belady policy in cache-mode replay: chunk copies are ranked by
// the next request marking the same chunk. Checked against a brute-force reference of the
// documented rules, on a hand-made workload where belady keeps a document that LRU evicts, and
// against LRU on small rag workloads.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <list>
#include <map>
#include <utility>
#include <vector>

#include "engine/tools/replay/cache_mode/cache_replay.h"
#include "engine/tools/replay/workload/block_expansion.h"
#include "engine/tools/replay/workload/generators.h"
#include "gtest/gtest.h"
#include "tests/engine/tools/replay/shifted_reference_util.h"

namespace pagedkv::replay {
namespace {

using shifted_reference::ShiftedCounts;
using shifted_reference::SmallRag;

// Brute force: a cache of `capacity` entries (prefix block keys and chunk-copy blocks). Every
// entry gets, when it is released, the next request index that needs it (scanning the workload:
// the next request holding the prefix key, or marking a chunk with the same tokens), or "never".
// Eviction takes the released entry with the largest next use, the earliest released first among
// equals. The per-request walk is the one of the LRU reference in shifted_replay_test.cc, except
// that the cached copy of a chunk covered by the prefix hit is pinned and released (refreshed),
// and that when a copy loses a block its other unpinned blocks are freed (as ChunkIndex does) and
// its pinned ones are released again as "never used, ever" (ranked above every next use) before
// and after each chunk.
ShiftedCounts BeladyReference(const Workload& workload, const ExpandedWorkload& w,
                              int64_t capacity) {
  using Key = std::pair<uint64_t, uint64_t>;
  constexpr int64_t kNever = std::numeric_limits<int32_t>::max();
  const size_t n = w.num_requests();
  std::vector<std::vector<Key>> request_keys(n);
  std::vector<std::vector<std::vector<TokenId>>> request_chunks(n);
  for (size_t r = 0; r < n; ++r) {
    for (const BlockHash& h : w.RequestKeys(r)) request_keys[r].push_back({h.low, h.high});
    const std::vector<TokenId> prompt = MaterializePrompt(workload.requests[r], 32000);
    for (const ChunkSpan& c : workload.requests[r].chunks) {
      request_chunks[r].emplace_back(prompt.begin() + c.token_offset,
                                     prompt.begin() + c.token_offset + c.length);
    }
  }
  auto next_key_use = [&](const Key& k, size_t r) {
    for (size_t q = r + 1; q < n; ++q) {
      if (std::find(request_keys[q].begin(), request_keys[q].end(), k) != request_keys[q].end()) {
        return static_cast<int64_t>(q);
      }
    }
    return kNever;
  };
  auto next_chunk_use = [&](const std::vector<TokenId>& tokens, size_t r) {
    for (size_t q = r + 1; q < n; ++q) {
      for (const auto& t : request_chunks[q]) {
        if (t == tokens) return static_cast<int64_t>(q);
      }
    }
    return kNever;
  };

  ShiftedCounts res;
  std::map<Key, int> refs;  // cached entry -> pin count
  struct Released {
    Key key;
    int64_t next_use;
  };
  std::list<Released> released;  // in release order
  struct Chunk {
    int64_t position;
    std::vector<Key> blocks;
  };
  std::map<std::vector<TokenId>, Chunk> chunks;
  std::map<Key, std::vector<Key>> copy_of;  // copy block -> all blocks of its copy
  std::vector<Key> orphans;                 // blocks of copies that lost a block
  uint64_t serial = 0;
  auto evict_for = [&](int64_t count) {
    const int64_t need = static_cast<int64_t>(refs.size()) + count - capacity;
    if (need > static_cast<int64_t>(released.size())) return false;
    while (static_cast<int64_t>(refs.size()) + count > capacity) {
      auto victim = released.begin();
      for (auto it = released.begin(); it != released.end(); ++it) {
        if (it->next_use > victim->next_use) victim = it;  // strict: earliest among equals
      }
      const Key k = victim->key;
      refs.erase(k);
      released.erase(victim);
      ++res.evictions;
      if (auto c = copy_of.find(k); c != copy_of.end()) {
        const std::vector<Key> siblings = c->second;
        for (const Key& s : siblings) {
          copy_of.erase(s);
          if (s == k || !refs.contains(s)) continue;
          if (refs[s] == 0) {  // unpinned: the chunk index frees it at once
            refs.erase(s);
            released.remove_if([&](const Released& e) { return e.key == s; });
            ++res.evictions;  // the pool counts every block that leaves its index
          } else {
            orphans.push_back(s);
          }
        }
      }
    }
    return true;
  };
  auto release = [&](const std::vector<Key>& keys, auto next_use_of) {  // tail first
    for (auto it = keys.rbegin(); it != keys.rend(); ++it) {
      if (--refs[*it] == 0) released.push_back({*it, next_use_of(*it)});
    }
  };
  auto pin = [&](const Key& k) {
    if (refs[k]++ == 0) {
      released.remove_if([&](const Released& e) { return e.key == k; });
    }
  };
  auto retire = [&] {  // orphans are never used again: ranked first for eviction
    for (const Key& k : orphans) {
      if (!refs.contains(k) || refs[k] != 0) continue;
      pin(k);
      release({k}, [](const Key&) { return std::numeric_limits<int64_t>::max(); });
    }
    orphans.clear();
  };
  for (size_t r = 0; r < n; ++r) {
    std::vector<Key> pinned;
    bool prefix = true, full = false;
    int64_t hits = 0;
    for (const Key& k : request_keys[r]) {
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
    // The replay hands the tracker one chunk at a time; it retires orphans before and after.
    for (size_t ci = 0; ci < workload.requests[r].chunks.size(); retire(), ++ci) {
      retire();
      const ChunkSpan& c = workload.requests[r].chunks[ci];
      const int64_t covered = std::clamp<int64_t>(prefix_tokens - c.token_offset, 0, c.length);
      const std::vector<TokenId>& tokens = request_chunks[r][ci];
      const int64_t next = next_chunk_use(tokens, r);
      auto it = chunks.find(tokens);
      const bool cached =
          it != chunks.end() && std::all_of(it->second.blocks.begin(), it->second.blocks.end(),
                                            [&](const Key& k) { return refs.contains(k); });
      if (covered == c.length) {  // not needed; a cached copy is refreshed
        if (cached) {
          for (const Key& k : it->second.blocks) pin(k);
          release(it->second.blocks, [next](const Key&) { return next; });
        }
        continue;
      }
      if (cached) {
        ++res.chunk_hits;
        res.shifted_hit_tokens += c.length - covered;
        res.chunk_hits_moved += it->second.position != c.token_offset;
        for (const Key& k : it->second.blocks) pin(k);
        release(it->second.blocks, [next](const Key&) { return next; });
        continue;
      }
      const int64_t count = (c.length + w.block_size - 1) / w.block_size;
      if (!evict_for(count)) {
        ++res.chunk_register_failures;
        continue;
      }
      Chunk copy{.position = c.token_offset, .blocks = {}};
      for (int64_t i = 0; i < count; ++i) {
        const Key k{~uint64_t{0}, serial++};
        refs[k] = 1;
        copy.blocks.push_back(k);
      }
      release(copy.blocks, [next](const Key&) { return next; });
      for (const Key& k : copy.blocks) copy_of[k] = copy.blocks;
      chunks[tokens] = std::move(copy);
      ++res.chunks_registered;
    }
    release(pinned, [&](const Key& k) { return next_key_use(k, r); });
  }
  return res;
}

ReplayRequest Request(std::vector<Segment> segments, std::vector<ChunkSpan> chunks) {
  ReplayRequest r;
  for (const Segment& s : segments) r.input_length += s.length;
  r.output_length = 1;
  r.segments = std::move(segments);
  r.chunks = std::move(chunks);
  return r;
}

// Block size 4, capacity 8. Request 0: instruction X (4) + document D (8) at 4; request 1: Y (4)
// + E (8) at 4; request 2: Z (4) + W (4) + D (8) at 8.
//  - Request 0 caches its 3 prefix blocks and a 2-block copy of D (5 of 8 blocks).
//  - Request 1 caches 3 prefix blocks (8 of 8), then E's copy needs 2 evictions. LRU takes D's
//    copy (released first). Belady keeps it (needed by request 2) and takes two of request 0's
//    prefix blocks (never needed again).
//  - Request 2 needs 4 new prefix blocks. LRU evicts request 0's 3 blocks and E's tail (E's copy
//    is then invalid), then D misses and its new copy evicts 2 more: 2 + 4 + 2 = 8 evictions.
//    Belady evicts the never-needed blocks in release order (request 0's last prefix block, E's
//    copy, request 1's tail), and D is a hit moved from position 4 to 8: 8 tokens, 2 + 4 = 6
//    evictions.
TEST(BeladyShiftedTest, HandMadeWorkloadKeepsTheDocumentNeededNext) {
  Workload w;
  w.requests.push_back(
      Request({{1, 4}, {10, 8}}, {{.content_id = 10, .token_offset = 4, .length = 8}}));
  w.requests.push_back(
      Request({{2, 4}, {11, 8}}, {{.content_id = 11, .token_offset = 4, .length = 8}}));
  w.requests.push_back(
      Request({{3, 4}, {4, 4}, {10, 8}}, {{.content_id = 10, .token_offset = 8, .length = 8}}));
  auto e = ExpandWorkload(w, {.block_size = 4, .compute_next_use = true});
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->chunks.size(), 3u);
  EXPECT_EQ(e->chunks[0].next_use, 2);  // D: next marked by request 2
  EXPECT_EQ(e->chunks[1].next_use, kNeverUsed);
  EXPECT_EQ(e->chunks[2].next_use, kNeverUsed);

  auto lru = RunCacheReplay(*e, {.capacity_blocks = 8, .policy = "lru"});
  auto belady = RunCacheReplay(*e, {.capacity_blocks = 8, .policy = "belady"});
  ASSERT_TRUE(lru.ok() && belady.ok());
  EXPECT_TRUE(belady->shifted_counted);
  EXPECT_EQ(lru->chunk_hits, 0);
  EXPECT_EQ(lru->chunks_registered, 3);
  // Evicting a copy's block frees the copy's other block, which counts too (every block that
  // leaves the index is an eviction): 6 + 2.
  EXPECT_EQ(lru->evictions, 8);
  EXPECT_EQ(belady->chunk_hits, 1);
  EXPECT_EQ(belady->chunk_hits_moved, 1);
  EXPECT_EQ(belady->shifted_hit_tokens, 8);
  EXPECT_EQ(belady->shifted_hit_tokens_moved, 8);
  EXPECT_EQ(belady->chunks_registered, 2);
  EXPECT_EQ(belady->evictions, 6);  // 5, and E's copy's other block freed with it
  EXPECT_EQ(belady->hit_blocks, 0);
  EXPECT_DOUBLE_EQ(belady->prefix_plus_shifted_token_hit_rate(), 8.0 / 40.0);

  const ShiftedCounts want = BeladyReference(w, *e, 8);
  EXPECT_EQ(want.evictions, 6);
  EXPECT_EQ(want.shifted_hit_tokens, 8);
}

TEST(BeladyShiftedTest, MatchesBruteForceReference) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const Workload workload = SmallRag(seed, 100);
    for (int32_t bs : {4, 16}) {
      // The reference models the block rules before issue 29 (no hit cap, no tail block).
      auto e = ExpandWorkload(
          workload, {.block_size = bs, .compute_next_use = true, .cache_partial_tail = true});
      ASSERT_TRUE(e.ok()) << e.status();
      for (int64_t cap : {int64_t{6}, int64_t{20}, int64_t{80}, int64_t{300}}) {
        SCOPED_TRACE(testing::Message() << "seed " << seed << " bs " << bs << " cap " << cap);
        auto got = RunCacheReplay(*e, {.capacity_blocks = cap, .policy = "belady"});
        ASSERT_TRUE(got.ok()) << got.status();
        const ShiftedCounts want = BeladyReference(workload, *e, cap);
        ASSERT_TRUE(got->shifted_counted);
        EXPECT_EQ(got->hit_blocks, want.hit_blocks);
        EXPECT_EQ(got->evictions, want.evictions);
        EXPECT_EQ(got->chunk_hits, want.chunk_hits);
        EXPECT_EQ(got->chunk_hits_moved, want.chunk_hits_moved);
        EXPECT_EQ(got->shifted_hit_tokens, want.shifted_hit_tokens);
        EXPECT_EQ(got->chunks_registered, want.chunks_registered);
        EXPECT_EQ(got->chunk_register_failures, want.chunk_register_failures);
      }
    }
  }
}

// Belady is a reference, not a proven optimum here (prefix chains and multi-block chunk copies
// are not Belady's unit-size pages), so this compares it with LRU on small rag workloads over
// a range of capacities: prefix + shifted hits.
TEST(BeladyShiftedTest, AtLeastLruOnSmallRagWorkloads) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const Workload workload = SmallRag(seed, 300);
    auto e = ExpandWorkload(workload, {.block_size = 16, .compute_next_use = true});
    ASSERT_TRUE(e.ok()) << e.status();
    for (int64_t cap : {int64_t{10}, int64_t{30}, int64_t{100}, int64_t{300}}) {
      SCOPED_TRACE(testing::Message() << "seed " << seed << " cap " << cap);
      auto lru = RunCacheReplay(*e, {.capacity_blocks = cap, .policy = "lru"});
      auto belady = RunCacheReplay(*e, {.capacity_blocks = cap, .policy = "belady"});
      ASSERT_TRUE(lru.ok() && belady.ok());
      EXPECT_GE(belady->prefix_plus_shifted_token_hit_rate(),
                lru->prefix_plus_shifted_token_hit_rate());
    }
  }
}

}  // namespace
}  // namespace pagedkv::replay
