// Copyright 2026 The pagedkv Authors.
#include "cache/tiers/tier_store_gate.h"

#include "gtest/gtest.h"

namespace pagedkv {
namespace {

BlockHash Hash(uint64_t n) { return BlockHash{.low = n, .high = ~n}; }

TEST(TierStoreGateTest, RulesFollowTheStoreOptions) {
  const TierStoreOptions through0{.rule = TierStoreRule::kWriteThrough, .threshold = 0};
  const TierStoreOptions through2{.rule = TierStoreRule::kWriteThrough, .threshold = 2};
  const TierStoreOptions back0{.rule = TierStoreRule::kWriteBack, .threshold = 0};
  const TierStoreOptions back2{.rule = TierStoreRule::kWriteBack, .threshold = 2};
  EXPECT_TRUE(TierStoreGate::StoresWhenCached(through0));
  EXPECT_FALSE(TierStoreGate::StoresWhenCached(through2));
  EXPECT_FALSE(TierStoreGate::StoresWhenCached(back0));
  for (int32_t hits = 0; hits < 5; ++hits) {
    EXPECT_FALSE(TierStoreGate::StoresAtHit(through0, hits));
    EXPECT_EQ(TierStoreGate::StoresAtHit(through2, hits), hits == 2);  // once, at the k-th hit
    EXPECT_FALSE(TierStoreGate::StoresAtHit(back2, hits));
    EXPECT_TRUE(TierStoreGate::StoresWhenEvicted(back0, hits));
    EXPECT_EQ(TierStoreGate::StoresWhenEvicted(back2, hits), hits >= 2);
    EXPECT_FALSE(TierStoreGate::StoresWhenEvicted(through0, hits));
  }
}

TEST(TierStoreGateTest, CountsHitsAndForgetsEverythingWhenFull) {
  TierStoreGate gate(/*max_tracked=*/3);
  EXPECT_EQ(gate.Hits(Hash(1)), 0);
  EXPECT_EQ(gate.NoteHit(Hash(1)), 1);
  EXPECT_EQ(gate.NoteHit(Hash(1)), 2);
  EXPECT_EQ(gate.NoteHit(Hash(2)), 1);
  EXPECT_EQ(gate.NoteHit(Hash(3)), 1);
  EXPECT_EQ(gate.tracked(), 3u);
  EXPECT_EQ(gate.NoteHit(Hash(1)), 3);  // already tracked: nothing is forgotten
  EXPECT_EQ(gate.NoteHit(Hash(4)), 1);  // a fourth hash: the counts restart
  EXPECT_EQ(gate.tracked(), 1u);
  EXPECT_EQ(gate.Hits(Hash(1)), 0);
}

}  // namespace
}  // namespace pagedkv
