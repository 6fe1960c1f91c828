// Copyright 2026 The pagedkv Authors.
//
// TierPolicy ("lru", "arc") against brute-force models written from the algorithms' definitions
// (vectors searched linearly), under random Hit / Insert / Erase sequences, plus hand-checked
// cases.
#include "pagedkv/tiers/tier_policy.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cache/policies/tier_policies.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/block_hash.h"

namespace pagedkv {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

BlockHash H(uint64_t id) { return BlockHash::FromU64(id); }

// A list with the most recent entry at index 0.
struct ModelList {
  std::vector<BlockHash> items;
  bool Has(const BlockHash& h) const {
    return std::find(items.begin(), items.end(), h) != items.end();
  }
  void Remove(const BlockHash& h) { items.erase(std::find(items.begin(), items.end(), h)); }
  void PushFront(const BlockHash& h) { items.insert(items.begin(), h); }
  BlockHash PopBack() {
    BlockHash h = items.back();
    items.pop_back();
    return h;
  }
  int64_t size() const { return static_cast<int64_t>(items.size()); }
};

struct LruModel {
  int64_t c;
  ModelList l;
  void Hit(const BlockHash& h) {
    l.Remove(h);
    l.PushFront(h);
  }
  std::vector<BlockHash> Insert(const BlockHash& h) {
    std::vector<BlockHash> out;
    while (l.size() >= c) out.push_back(l.PopBack());
    l.PushFront(h);
    return out;
  }
  bool Erase(const BlockHash& h) {
    if (!l.Has(h)) return false;
    l.Remove(h);
    return true;
  }
  std::vector<BlockHash> Resident() const { return l.items; }
};

// ARC as in Megiddo and Modha's Fig. 4, with the tier's two documented departures (Replace only
// when T1 + T2 is full; T1 when T2 is empty).
struct ArcModel {
  int64_t c;
  int64_t p = 0;
  ModelList t1, t2, b1, b2;
  void Hit(const BlockHash& h) {
    if (t1.Has(h))
      t1.Remove(h);
    else
      t2.Remove(h);
    t2.PushFront(h);
  }
  void Replace(bool in_b2, std::vector<BlockHash>* out) {
    if (t1.size() + t2.size() < c) return;
    if (t1.size() > 0 && (t1.size() > p || (in_b2 && t1.size() == p) || t2.size() == 0)) {
      BlockHash v = t1.PopBack();
      out->push_back(v);
      b1.PushFront(v);
    } else {
      BlockHash v = t2.PopBack();
      out->push_back(v);
      b2.PushFront(v);
    }
  }
  std::vector<BlockHash> Insert(const BlockHash& h) {
    std::vector<BlockHash> out;
    if (b1.Has(h)) {
      p = std::min(c, p + std::max<int64_t>(1, b2.size() / b1.size()));
      b1.Remove(h);
      Replace(false, &out);
      t2.PushFront(h);
      return out;
    }
    if (b2.Has(h)) {
      p = std::max<int64_t>(0, p - std::max<int64_t>(1, b1.size() / b2.size()));
      b2.Remove(h);
      Replace(true, &out);
      t2.PushFront(h);
      return out;
    }
    const int64_t l1 = t1.size() + b1.size();
    const int64_t total = l1 + t2.size() + b2.size();
    if (l1 >= c) {
      if (b1.size() > 0) {
        b1.PopBack();
        Replace(false, &out);
      } else {
        out.push_back(t1.PopBack());
      }
    } else if (total >= c) {
      if (total >= 2 * c && b2.size() > 0) b2.PopBack();
      Replace(false, &out);
    }
    t1.PushFront(h);
    return out;
  }
  bool Erase(const BlockHash& h) {
    if (t1.Has(h)) {
      t1.Remove(h);
      return true;
    }
    if (t2.Has(h)) {
      t2.Remove(h);
      return true;
    }
    return false;
  }
  std::vector<BlockHash> Resident() const {
    std::vector<BlockHash> out = t1.items;
    out.insert(out.end(), t2.items.begin(), t2.items.end());
    return out;
  }
};

template <typename Model>
void RunRandomOps(const std::string& name, int64_t capacity, uint64_t seed) {
  SCOPED_TRACE(name + " capacity " + std::to_string(capacity) + " seed " + std::to_string(seed));
  std::unique_ptr<TierPolicy> policy = MakeTierPolicy(name, capacity).value();
  Model model{capacity};
  std::mt19937_64 rng(seed);
  // Keys drawn from a small hot set and a larger cold set, so hits, ghosts and scans all occur.
  const uint64_t universe = static_cast<uint64_t>(capacity) * 4;
  for (int step = 0; step < 4000; ++step) {
    const uint64_t id = (rng() % 3 == 0) ? rng() % (universe / 4 + 1) : rng() % universe;
    const BlockHash h = H(id);
    const int op = static_cast<int>(rng() % 10);
    const bool resident = policy->Contains(h);
    const std::vector<BlockHash> model_resident = model.Resident();
    ASSERT_EQ(resident, std::count(model_resident.begin(), model_resident.end(), h) == 1);
    if (op == 0) {
      ASSERT_EQ(policy->Erase(h), model.Erase(h));
    } else if (resident) {
      policy->Hit(h);
      model.Hit(h);
    } else {
      ASSERT_EQ(policy->Insert(h), model.Insert(h)) << "step " << step;
    }
    ASSERT_LE(policy->size(), capacity);
    ASSERT_EQ(policy->size(), static_cast<int64_t>(model.Resident().size()));
  }
  EXPECT_THAT(policy->Resident(), UnorderedElementsAreArray(model.Resident()));
}

TEST(TierPolicyTest, LruMatchesTheBruteForceModelUnderRandomOperations) {
  for (int64_t capacity : {1, 2, 5, 16, 64}) {
    for (uint64_t seed : {1u, 2u, 3u}) RunRandomOps<LruModel>("lru", capacity, seed);
  }
}

TEST(TierPolicyTest, ArcMatchesTheBruteForceModelUnderRandomOperations) {
  for (int64_t capacity : {1, 2, 5, 16, 64}) {
    for (uint64_t seed : {1u, 2u, 3u}) RunRandomOps<ArcModel>("arc", capacity, seed);
  }
}

// EvictOne drops what Insert would: two policies run the same random operations, and whenever a
// never-seen hash arrives at a full policy, one Inserts it while the other first calls EvictOne;
// the victim and every later result must be the same.
void RunEvictOneLockstep(const std::string& name, int64_t capacity, uint64_t seed) {
  SCOPED_TRACE(name + " capacity " + std::to_string(capacity) + " seed " + std::to_string(seed));
  std::unique_ptr<EvictingTierPolicy> inserts = MakeEvictingTierPolicy(name, capacity).value();
  std::unique_ptr<EvictingTierPolicy> evicts = MakeEvictingTierPolicy(name, capacity).value();
  EXPECT_EQ(evicts->EvictOne(), std::nullopt);  // nothing resident
  std::mt19937_64 rng(seed);
  const uint64_t universe = static_cast<uint64_t>(capacity) * 4;
  uint64_t fresh = universe;  // ids above the universe are never seen again
  int64_t compared = 0;
  for (int step = 0; step < 4000; ++step) {
    const int op = static_cast<int>(rng() % 10);
    const BlockHash h = H(op < 3 ? fresh++ : rng() % universe);
    if (op < 3 && inserts->size() == capacity) {
      const std::optional<BlockHash> peeked = evicts->Victim();
      const std::optional<BlockHash> victim = evicts->EvictOne();
      ASSERT_TRUE(victim.has_value());
      ASSERT_EQ(peeked, victim);
      ASSERT_EQ(inserts->Insert(h), std::vector<BlockHash>{*victim}) << "step " << step;
      ASSERT_TRUE(evicts->Insert(h).empty());
      ++compared;
    } else if (op == 9) {
      ASSERT_EQ(inserts->Erase(h), evicts->Erase(h));
    } else if (inserts->Contains(h)) {
      inserts->Hit(h);
      evicts->Hit(h);
    } else {
      ASSERT_EQ(inserts->Insert(h), evicts->Insert(h)) << "step " << step;
    }
    ASSERT_THAT(evicts->Resident(), UnorderedElementsAreArray(inserts->Resident()));
  }
  EXPECT_GT(compared, 100);
  while (evicts->size() > 0) ASSERT_TRUE(evicts->EvictOne().has_value());
  EXPECT_EQ(evicts->EvictOne(), std::nullopt);
}

TEST(TierPolicyTest, EvictOneDropsWhatInsertWouldDrop) {
  for (const char* name : {"lru", "arc"}) {
    for (int64_t capacity : {1, 2, 5, 16}) {
      for (uint64_t seed : {1u, 2u}) RunEvictOneLockstep(name, capacity, seed);
    }
  }
}

// Entries the caller may not evict are passed over and keep their place.
TEST(TierPolicyTest, EvictOneSkipsWhatTheCallerKeeps) {
  for (const char* name : {"lru", "arc"}) {
    SCOPED_TRACE(name);
    std::unique_ptr<EvictingTierPolicy> policy = MakeEvictingTierPolicy(name, 8).value();
    for (uint64_t id = 1; id <= 4; ++id) policy->Insert(H(id));
    const auto odd = [](const BlockHash& h) { return h == H(1) || h == H(3); };
    const auto even = [](const BlockHash& h) { return h == H(2) || h == H(4); };
    EXPECT_EQ(policy->Victim(even), H(2));    // a look, nothing dropped
    EXPECT_EQ(policy->EvictOne(even), H(2));  // the oldest of those allowed
    EXPECT_EQ(policy->EvictOne(even), H(4));
    EXPECT_EQ(policy->EvictOne(even), std::nullopt);
    EXPECT_THAT(policy->Resident(), UnorderedElementsAreArray({H(1), H(3)}));
    EXPECT_EQ(policy->EvictOne(odd), H(1));  // 1 kept its place as the oldest
    EXPECT_EQ(policy->EvictOne(), H(3));
  }
}

TEST(TierPolicyTest, LruDropsTheLeastRecentlyUsed) {
  std::unique_ptr<TierPolicy> lru = MakeTierPolicy("lru", 2).value();
  EXPECT_TRUE(lru->Insert(H(1)).empty());
  EXPECT_TRUE(lru->Insert(H(2)).empty());
  lru->Hit(H(1));
  EXPECT_EQ(lru->Insert(H(3)), std::vector<BlockHash>{H(2)});
  EXPECT_THAT(lru->Resident(), UnorderedElementsAreArray({H(1), H(3)}));
}

// A hot set hit twice survives a one-pass scan of cold blocks under ARC (they stay in T1 and
// push each other out), while LRU loses it.
TEST(TierPolicyTest, ArcKeepsAFrequentlyUsedSetThroughAScan) {
  for (const char* name : {"lru", "arc"}) {
    std::unique_ptr<TierPolicy> policy = MakeTierPolicy(name, 4).value();
    for (uint64_t id : {1, 2}) {
      policy->Insert(H(id));
      policy->Hit(H(id));
    }
    for (uint64_t id = 100; id < 110; ++id) policy->Insert(H(id));
    const bool kept = policy->Contains(H(1)) && policy->Contains(H(2));
    EXPECT_EQ(kept, std::string(name) == "arc") << name;
  }
}

TEST(TierPolicyTest, BadNamesAndCapacitiesAreInvalidArgument) {
  EXPECT_THAT(MakeTierPolicy("mru", 4).status().message(), HasSubstr("\"lru\" or \"arc\""));
  EXPECT_THAT(MakeTierPolicy("lru", 0).status().message(), HasSubstr(">= 1"));
}

}  // namespace
}  // namespace pagedkv
