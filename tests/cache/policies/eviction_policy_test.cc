// Copyright 2026 The pagedkv Authors.
#include "pagedkv/cache/eviction_policy.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"

namespace pagedkv {
namespace {

BlockHash H(BlockId b) { return BlockHash::FromU64(1000 + b); }

std::vector<BlockId> DrainVictims(EvictionPolicy& p, int n) {
  std::vector<BlockId> out;
  for (int i = 0; i < n; ++i) out.push_back(p.PickVictim());
  return out;
}

TEST(EvictionPolicyTest, FactoryByName) {
  for (std::string_view name : EvictionPolicyNames()) {
    auto p = MakeEvictionPolicy(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_EQ((*p)->Name(), name);
  }
  auto bad = MakeEvictionPolicy("mru");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("lru, lfu, fifo, arc, s3fifo, wtinylfu, chain"),
            std::string::npos)
      << bad.status();
}

TEST(EvictionPolicyTest, LruEvictsLeastRecentlyReleased) {
  auto p = MakeLruPolicy();
  p->Init(8);
  for (BlockId b : {0, 1, 2, 3, 4}) p->OnInsert(b, H(b));
  for (BlockId b : {3, 1, 4, 0, 2}) p->OnRelease(b, H(b));
  p->OnAccess(4, H(4));   // pinned again: no longer a candidate
  p->OnRelease(4, H(4));  // released again: most recent
  p->OnRemove(0, H(0));   // dropped from the index
  EXPECT_EQ(DrainVictims(*p, 4), (std::vector<BlockId>{3, 1, 2, 4}));
}

TEST(EvictionPolicyTest, LruPeekVictimForeseesTheNextPicks) {
  auto p = MakeLruPolicy();
  p->Init(16);
  EXPECT_EQ(p->PeekVictim(0), kNullBlock);  // no candidate yet
  for (BlockId b = 0; b < 10; ++b) p->OnInsert(b, H(b));
  for (BlockId b : {7, 2, 9, 4, 0, 5, 1}) p->OnRelease(b, H(b));
  p->OnAccess(9, H(9));
  const std::vector<BlockId> order = {7, 2, 4, 0, 5, 1};
  // Up to its depth the peek names the upcoming victims in order; past the candidates, none.
  std::vector<BlockId> peeked;
  for (int32_t ahead = 0; ahead < 8; ++ahead) {
    const BlockId b = p->PeekVictim(ahead);
    if (b == kNullBlock) break;
    peeked.push_back(b);
  }
  ASSERT_GE(peeked.size(), 2u);
  EXPECT_EQ(peeked, std::vector<BlockId>(order.begin(), order.begin() + peeked.size()));
  EXPECT_EQ(p->PeekVictim(-1), kNullBlock);
  // Peeking changes nothing, and after each pick the peek moves on.
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(p->PeekVictim(0), order[i]);
    EXPECT_EQ(p->PeekVictim(1), i + 1 < order.size() ? order[i + 1] : kNullBlock);
    EXPECT_EQ(p->PickVictim(), order[i]);
  }
  EXPECT_EQ(p->PeekVictim(0), kNullBlock);
}

// Large pools: the LRU keeps a cursor kLookahead (3) candidates past the head, advanced one link
// per pick and placed again when its block is picked or pinned; picks stay in LRU order.
TEST(EvictionPolicyTest, LruCursorRunsThreeAheadInLargePools) {
  auto p = MakeLruPolicy();
  p->Init(kVictimPrefetchMinBlocks);
  for (BlockId b = 0; b < 20; ++b) {
    p->OnInsert(b, H(b));
    p->OnRelease(b, H(b));
  }
  for (BlockId b = 0; b < 10; ++b) {
    ASSERT_EQ(p->PickVictim(), b);
    EXPECT_EQ(p->PeekVictim(0), b + 1);
    EXPECT_EQ(p->PeekVictim(3), b + 4);
  }
  ASSERT_EQ(p->PeekVictim(3), 13);
  p->OnAccess(13, H(13));  // the cursor's block is pinned: placed again on the next pick
  EXPECT_EQ(p->PickVictim(), 10);
  EXPECT_EQ(p->PeekVictim(3), 15);  // head 11, then 12, (13 gone) 14, 15
  p->OnAccess(12, H(12));           // a candidate before the cursor: the cursor stays put
  EXPECT_EQ(p->PickVictim(), 11);
  EXPECT_EQ(p->PeekVictim(3), 16);
  std::vector<BlockId> rest = DrainVictims(*p, 6);
  EXPECT_EQ(rest, (std::vector<BlockId>{14, 15, 16, 17, 18, 19}));
  EXPECT_EQ(p->PeekVictim(0), kNullBlock);
  EXPECT_EQ(p->PeekVictim(3), kNullBlock);
  EXPECT_EQ(p->PeekVictim(2), kNullBlock);  // not a depth it tracks
}

TEST(EvictionPolicyTest, PoliciesWithoutPeekSayNull) {
  for (std::string_view name : {"lfu", "fifo"}) {
    auto p = MakeEvictionPolicy(name);
    ASSERT_TRUE(p.ok());
    (*p)->Init(4);
    (*p)->OnInsert(1, H(1));
    (*p)->OnRelease(1, H(1));
    EXPECT_EQ((*p)->PeekVictim(0), kNullBlock) << name;
  }
}

TEST(EvictionPolicyTest, LfuEvictsFewestAccessesThenLeastRecentlyReleased) {
  auto p = MakeLfuPolicy();
  p->Init(8);
  for (BlockId b : {0, 1, 2, 3}) p->OnInsert(b, H(b));
  p->OnAccess(2, H(2));  // 2: 2 accesses
  p->OnAccess(2, H(2));  // 2: 3
  p->OnAccess(0, H(0));  // 0: 2
  for (BlockId b : {2, 0, 3, 1}) p->OnRelease(b, H(b));
  // Frequencies: 3->1, 1->1 (3 released first), 0->2, 2->3.
  EXPECT_EQ(DrainVictims(*p, 4), (std::vector<BlockId>{3, 1, 0, 2}));
}

TEST(EvictionPolicyTest, LfuAccessWhileCandidateMovesIt) {
  auto p = MakeLfuPolicy();
  p->Init(4);
  for (BlockId b : {0, 1}) p->OnInsert(b, H(b));
  p->OnRelease(0, H(0));
  p->OnRelease(1, H(1));
  p->OnAccess(0, H(0));  // hit: leaves the candidates with frequency 2
  p->OnRelease(0, H(0));
  EXPECT_EQ(p->PickVictim(), 1);
  EXPECT_EQ(p->PickVictim(), 0);
}

TEST(EvictionPolicyTest, FifoEvictsEarliestInsertedRegardlessOfUse) {
  auto p = MakeFifoPolicy();
  p->Init(8);
  for (BlockId b : {5, 2, 7, 1}) p->OnInsert(b, H(b));
  p->OnAccess(5, H(5));
  for (BlockId b : {1, 7, 2, 5}) p->OnRelease(b, H(b));
  p->OnRemove(7, H(7));
  EXPECT_EQ(DrainVictims(*p, 3), (std::vector<BlockId>{5, 2, 1}));
}

TEST(EvictionPolicyTest, ClearForgetsEveryCandidate) {
  for (std::string_view name : EvictionPolicyNames()) {
    auto p = *MakeEvictionPolicy(name);
    p->Init(4);
    for (BlockId b : {0, 1, 2}) {
      p->OnInsert(b, H(b));
      p->OnRelease(b, H(b));
    }
    p->Clear();
    p->OnInsert(3, H(3));
    p->OnRelease(3, H(3));
    EXPECT_EQ(p->PickVictim(), 3) << name;
  }
}

// The contract every policy keeps, against a brute-force model of the pool's calls: a random mix
// of inserts (new and returning hashes, so ghosts and sketches get hits; under random parents),
// pins, releases, removals,
// picks and clears; every pick is a current candidate and is then forgotten.
TEST(EvictionPolicyTest, RandomCallsOnlyEverPickCandidates) {
  constexpr int kBlocks = 64;
  for (std::string_view name : EvictionPolicyNames()) {
    SCOPED_TRACE(std::string(name));
    auto p = *MakeEvictionPolicy(name);
    p->Init(kBlocks);
    std::mt19937 rng(17);
    std::vector<int> refs(kBlocks, -1);  // -1: not cached; else the reference count
    std::vector<int> hash_of(kBlocks, 0);
    absl::flat_hash_set<BlockId> candidates;
    for (int step = 0; step < 20000; ++step) {
      const BlockId b = static_cast<BlockId>(rng() % kBlocks);
      const int op = static_cast<int>(rng() % 100);
      if (refs[b] < 0 && op < 40) {
        hash_of[b] = static_cast<int>(rng() % 200);  // hashes come back
        // Under a cached parent (linked or by hash only) or a root, as the pool passes it.
        const BlockId up = static_cast<BlockId>(rng() % kBlocks);
        const bool linked = rng() % 2 == 0;
        if (up != b && refs[up] >= 0) {
          p->OnInsertInChain(b, H(hash_of[b]), H(hash_of[up]), linked ? up : kNullBlock);
        } else {
          p->OnInsertInChain(b, H(hash_of[b]), BlockHash{}, kNullBlock);
        }
        refs[b] = 1;
      } else if (refs[b] >= 0 && op < 55) {
        if (refs[b]++ == 0) candidates.erase(b);
        p->OnAccess(b, H(hash_of[b]));
      } else if (refs[b] > 0 && op < 85) {
        if (--refs[b] == 0) {
          candidates.insert(b);
          p->OnRelease(b, H(hash_of[b]));
        }
      } else if (refs[b] >= 0 && op < 88) {
        candidates.erase(b);
        refs[b] = -1;
        p->OnRemove(b, H(hash_of[b]));
      } else if (!candidates.empty() && op < 99) {
        const BlockId victim = p->PickVictim();
        ASSERT_TRUE(candidates.erase(victim)) << "step " << step << " picked " << victim;
        refs[victim] = -1;
      } else if (op == 99 && step % 7 == 0) {
        p->Clear();
        candidates.clear();
        std::fill(refs.begin(), refs.end(), -1);
      }
    }
    while (!candidates.empty()) ASSERT_TRUE(candidates.erase(p->PickVictim()));
  }
}

}  // namespace
}  // namespace pagedkv
