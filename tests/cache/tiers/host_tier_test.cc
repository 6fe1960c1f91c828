// Copyright 2026 The pagedkv Authors.
#include "pagedkv/tiers/host_tier.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/events/kv_events.h"

namespace pagedkv {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kValueBytes = 8;

struct Block {
  BlockHash hash;
  std::vector<TokenId> tokens;
  std::vector<std::byte> value;
  TierBlock tier() const { return {.hash = hash, .tokens = tokens}; }
  TierStoreItem item() const { return {.block = tier(), .value = value}; }
};

Block MakeBlock(uint64_t id) {
  Block b{.hash = BlockHash::FromU64(id), .tokens = {static_cast<TokenId>(id), 7}};
  for (int64_t i = 0; i < kValueBytes; ++i) b.value.push_back(static_cast<std::byte>(id * 3 + i));
  return b;
}

absl::Status StoreAll(HostTier& tier, const std::vector<TierStoreItem>& items) {
  return tier.Store(items);
}

std::unique_ptr<HostTier> MakeTier(HostTierOptions o) {
  o.value_bytes = kValueBytes;
  o.block_size = 2;
  return HostTier::Create(o).value();
}

// Loads `blocks` and returns the ids of the values it got (the first byte / 3).
std::vector<int> Load(HostTier& tier, const std::vector<Block>& blocks) {
  std::vector<TierBlock> query;
  for (const Block& b : blocks) query.push_back(b.tier());
  std::vector<int> got;
  absl::StatusOr<int64_t> n = tier.LoadPrefix(query, [&](int64_t i, std::span<const std::byte> v) {
    EXPECT_EQ(v.size(), static_cast<size_t>(kValueBytes));
    EXPECT_TRUE(std::equal(v.begin(), v.end(), blocks[static_cast<size_t>(i)].value.begin()));
    got.push_back(static_cast<int>(v[0]) / 3);
    return true;
  });
  EXPECT_TRUE(n.ok());
  EXPECT_EQ(*n, static_cast<int64_t>(got.size()));
  return got;
}

TEST(HostTierTest, LoadsTheLeadingRunItHolds) {
  auto tier = MakeTier({.capacity_blocks = 8});
  const std::vector<Block> chain = {MakeBlock(1), MakeBlock(2), MakeBlock(3)};
  ASSERT_TRUE(StoreAll(*tier, {chain[0].item(), chain[2].item()}).ok());
  EXPECT_THAT(Load(*tier, chain), ElementsAre(1));
  ASSERT_TRUE(StoreAll(*tier, {chain[1].item()}).ok());
  EXPECT_THAT(Load(*tier, chain), ElementsAre(1, 2, 3));
  const TierStats s = tier->stats();
  EXPECT_EQ(s.lookups, 2);
  EXPECT_EQ(s.queried_blocks, 5);
  EXPECT_EQ(s.hit_blocks, 4);
  EXPECT_EQ(s.loaded_bytes, 4 * kValueBytes);
  EXPECT_EQ(s.stored_blocks, 3);
  EXPECT_EQ(s.resident_bytes, 3 * kValueBytes);
}

TEST(HostTierTest, ASinkThatStopsEndsTheWalkWithoutAHit) {
  auto tier = MakeTier({.capacity_blocks = 8});
  const std::vector<Block> chain = {MakeBlock(1), MakeBlock(2)};
  ASSERT_TRUE(StoreAll(*tier, {chain[0].item(), chain[1].item()}).ok());
  const std::vector<TierBlock> query = {chain[0].tier(), chain[1].tier()};
  absl::StatusOr<int64_t> n =
      tier->LoadPrefix(query, [](int64_t i, std::span<const std::byte>) { return i == 0; });
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(tier->stats().hit_blocks, 1);
  absl::StatusOr<int64_t> err =
      tier->LoadPrefix(query, [](int64_t, std::span<const std::byte>) -> absl::StatusOr<bool> {
        return absl::InternalError("device copy failed");
      });
  EXPECT_EQ(err.status().message(), "device copy failed");
}

TEST(HostTierTest, AFullTierEvictsByCapacityInBlocksOrBytes) {
  for (HostTierOptions o : {HostTierOptions{.capacity_blocks = 2},
                            HostTierOptions{.capacity_bytes = 2 * kValueBytes + 5}}) {
    auto tier = MakeTier(o);
    EXPECT_EQ(tier->capacity_blocks(), 2);
    for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(StoreAll(*tier, {MakeBlock(id).item()}).ok());
    EXPECT_FALSE(tier->Contains(BlockHash::FromU64(1)));
    EXPECT_TRUE(tier->Contains(BlockHash::FromU64(3)));
    EXPECT_EQ(tier->stats().evictions, 1);
    EXPECT_EQ(tier->stats().resident_blocks, 2);
  }
}

TEST(HostTierTest, WrongTokensAreAMissAndDropTheEntry) {
  auto tier = MakeTier({.capacity_blocks = 4});
  Block b = MakeBlock(5);
  ASSERT_TRUE(StoreAll(*tier, {b.item()}).ok());
  Block other = b;
  other.tokens = {9, 9};
  EXPECT_TRUE(Load(*tier, {other}).empty());
  EXPECT_EQ(tier->stats().faults, 1);
  EXPECT_FALSE(tier->Contains(b.hash));
}

TEST(HostTierTest, BadItemsAreRejectedWithNothingStored) {
  auto tier = MakeTier({.capacity_blocks = 4});
  Block short_value = MakeBlock(2);
  short_value.value.pop_back();
  absl::Status st = StoreAll(*tier, {MakeBlock(1).item(), short_value.item()});
  EXPECT_TRUE(absl::IsInvalidArgument(st));
  EXPECT_THAT(st.message(), HasSubstr("8-byte values"));
  Block long_block = MakeBlock(3);
  long_block.tokens.push_back(1);
  EXPECT_THAT(StoreAll(*tier, {long_block.item()}).message(), HasSubstr("block size is 2"));
  EXPECT_EQ(tier->stats().resident_blocks, 0);
}

TEST(HostTierTest, EventsCarryTheTiersMedium) {
  auto tier = MakeTier({.capacity_blocks = 1});
  std::vector<std::string> seen;
  tier->AddEventListener([&](const KvEvent& e) {
    seen.push_back(std::string(KvEventTypeName(e.type)) + ":" + std::string(e.medium));
  });
  ASSERT_TRUE(StoreAll(*tier, {MakeBlock(1).item(), MakeBlock(2).item()}).ok());
  EXPECT_THAT(seen, ElementsAre("stored:CPU", "removed:CPU", "stored:CPU"));
}

TEST(HostTierTest, BadOptionsAreInvalidArgument) {
  EXPECT_THAT(HostTier::Create({}).status().message(), HasSubstr("set capacity_blocks"));
  EXPECT_THAT(HostTier::Create({.capacity_bytes = 100}).status().message(),
              HasSubstr("needs value_bytes"));
  EXPECT_THAT(HostTier::Create({.capacity_bytes = 4, .value_bytes = 8}).status().message(),
              HasSubstr("holds no block"));
  EXPECT_THAT(HostTier::Create({.capacity_blocks = 4, .policy = "fifo"}).status().message(),
              HasSubstr("\"lru\" or \"arc\""));
  EXPECT_FALSE(HostTier::Create({.capacity_blocks = -1}).ok());
}

}  // namespace
}  // namespace pagedkv
