// Copyright 2026 The pagedkv Authors.
#include "pagedkv/events/prefix_router_index.h"

#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pagedkv {
namespace {

BlockHash H(uint64_t i) { return BlockHash{i, 0}; }

// The brute-force model: instance -> hash -> media it is held in ("" = no medium).
using Model = std::map<InstanceId, std::map<BlockHash, std::set<std::string>>>;

void ApplyToModel(Model& model, InstanceId id, const KvBatchEvent& e) {
  auto& blocks = model[id];
  const std::string medium = e.medium.value_or("");
  switch (e.type) {
    case KvEventType::kBlockStored:
      for (const BlockHash& h : e.block_hashes) blocks[h].insert(medium);
      break;
    case KvEventType::kBlockRemoved:
      for (const BlockHash& h : e.block_hashes) {
        if (!blocks.contains(h)) continue;
        if (e.medium.has_value()) {
          blocks[h].erase(medium);
        } else {
          blocks[h].clear();
        }
        if (blocks[h].empty()) blocks.erase(h);
      }
      break;
    case KvEventType::kAllBlocksCleared:
      blocks.clear();
      break;
  }
}

double Weight(const std::string& medium) {
  if (medium == "GPU") return 1.0;
  if (medium == "CPU") return 0.5;
  return 0.25;  // the test's unknown_medium_weight
}

std::vector<InstancePrefixMatch> ModelMatch(const Model& model,
                                            const std::vector<BlockHash>& hashes) {
  std::vector<InstancePrefixMatch> out;
  for (const auto& [id, blocks] : model) {
    InstancePrefixMatch m{.instance = id};
    for (const BlockHash& h : hashes) {
      const auto it = blocks.find(h);
      if (it == blocks.end()) break;
      double best = 0;
      for (const std::string& medium : it->second) best = std::max(best, Weight(medium));
      ++m.matched_blocks;
      m.weighted_blocks += best;
    }
    out.push_back(m);
  }
  return out;
}

KvBatchEvent RandomEvent(std::mt19937_64& rng) {
  static const std::vector<std::optional<std::string>> kMedia = {"GPU", "CPU", std::nullopt,
                                                                 "disk"};
  KvBatchEvent e{.type = rng() % 20 == 0 ? KvEventType::kAllBlocksCleared
                                         : (rng() % 3 ? KvEventType::kBlockStored
                                                      : KvEventType::kBlockRemoved)};
  if (e.type == KvEventType::kAllBlocksCleared) return e;
  // Chains over a small universe so prefixes overlap: start anywhere in 0..11, run up to 6.
  const uint64_t start = rng() % 12;
  const uint64_t len = 1 + rng() % 6;
  for (uint64_t i = start; i < start + len; ++i) e.block_hashes.push_back(H(i));
  e.medium = kMedia[rng() % kMedia.size()];
  e.block_size = 16;
  return e;
}

TEST(PrefixRouterIndexTest, RandomEventStreamsMatchTheBruteForceModel) {
  std::mt19937_64 rng(2026);
  auto index = PrefixRouterIndex::Create({.unknown_medium_weight = 0.25}).value();
  Model model;
  int nonzero = 0;
  for (int step = 0; step < 3000; ++step) {
    const InstanceId id = static_cast<InstanceId>(rng() % 5);
    if (rng() % 100 == 0) {
      EXPECT_EQ(index->RemoveInstance(id), model.erase(id) > 0);
    } else {
      KvEventBatch batch;
      for (int k = static_cast<int>(rng() % 3); k >= 0; --k)
        batch.events.push_back(RandomEvent(rng));
      index->Apply(id, batch);
      for (const KvBatchEvent& e : batch.events) ApplyToModel(model, id, e);
    }
    std::vector<BlockHash> query;
    const uint64_t len = rng() % 14;
    for (uint64_t i = 0; i < len; ++i) query.push_back(H(i));
    const std::vector<InstancePrefixMatch> got = index->Match(query);
    const std::vector<InstancePrefixMatch> want = ModelMatch(model, query);
    ASSERT_EQ(got.size(), want.size()) << "step " << step;
    for (size_t k = 0; k < got.size(); ++k) {
      ASSERT_EQ(got[k].instance, want[k].instance) << "step " << step;
      ASSERT_EQ(got[k].matched_blocks, want[k].matched_blocks) << "step " << step;
      ASSERT_DOUBLE_EQ(got[k].weighted_blocks, want[k].weighted_blocks) << "step " << step;
      if (got[k].matched_blocks > 0) ++nonzero;
    }
    for (const auto& [mid, blocks] : model) {
      ASSERT_EQ(index->NumBlocks(mid), static_cast<int64_t>(blocks.size()));
    }
  }
  EXPECT_GT(nonzero, 1000);  // the stream really exercised prefixes
}

TEST(PrefixRouterIndexTest, TiersAndRemoval) {
  auto index = PrefixRouterIndex::Create({}).value();
  index->Apply(0, KvEventBatch{.events = {{.type = KvEventType::kBlockStored,
                                           .block_hashes = {H(1), H(2), H(3)},
                                           .medium = "GPU"}}});
  index->Apply(1, KvEventBatch{.events = {{.type = KvEventType::kBlockStored,
                                           .block_hashes = {H(1), H(2), H(3), H(4)},
                                           .medium = "CPU"}}});
  const std::vector<BlockHash> q = {H(1), H(2), H(3), H(4), H(5)};
  std::vector<InstancePrefixMatch> m = index->Match(q);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].matched_blocks, 3);
  EXPECT_DOUBLE_EQ(m[0].weighted_blocks, 3.0);
  EXPECT_EQ(m[1].matched_blocks, 4);
  EXPECT_DOUBLE_EQ(m[1].weighted_blocks, 2.0);  // host blocks count half
  // A disk tier's blocks (DiskTier's events) count a quarter by default.
  index->Apply(2, KvEventBatch{.events = {{.type = KvEventType::kBlockStored,
                                           .block_hashes = {H(1), H(2), H(3), H(4)},
                                           .medium = kMediumDisk}}});
  EXPECT_DOUBLE_EQ(index->Match(q)[2].weighted_blocks, 1.0);
  index->RemoveInstance(2);
  // Removing block 2 from device memory breaks instance 0's prefix after block 1.
  index->Apply(0, KvEventBatch{.events = {{.type = KvEventType::kBlockRemoved,
                                           .block_hashes = {H(2)},
                                           .medium = "GPU"}}});
  EXPECT_EQ(index->Match(q)[0].matched_blocks, 1);
  EXPECT_TRUE(index->RemoveInstance(1));
  EXPECT_FALSE(index->RemoveInstance(1));
  EXPECT_EQ(index->Match(q).size(), 1u);
  EXPECT_EQ(index->NumDistinctHashes(), 2);  // H(1), H(3) on instance 0
  EXPECT_EQ(PrefixRouterIndex::Create({.medium_weights = {{"GPU", 1.5}}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      PrefixRouterIndex::Create({.medium_weights = {{"GPU", 1}, {"GPU", 0.5}}}).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(PrefixRouterIndexTest, PickInstanceWeighsPrefillAgainstLoad) {
  const std::vector<InstancePrefixMatch> m = {
      {.instance = 0, .matched_blocks = 0, .weighted_blocks = 0},
      {.instance = 1, .matched_blocks = 8, .weighted_blocks = 8},
      {.instance = 2, .matched_blocks = 8, .weighted_blocks = 4}};
  // Request of 10 blocks. Costs with unit weights: 10 + 0, 2 + 5, 6 + 0.
  EXPECT_EQ(PickInstance(m, std::vector<double>{0, 5, 0}, 10, {}), 2);
  // A busier instance 1 loses to the idle, uncached instance 0: 10 + 0 < 2 + 9.
  EXPECT_EQ(PickInstance(m, std::vector<double>{0, 9, 7}, 10, {}), 0);
  // Only the cache matters with load_weight 0.
  EXPECT_EQ(PickInstance(m, std::vector<double>{0, 50, 0}, 10, {.load_weight = 0}), 1);
  // Ties go to the smaller load, then the smaller id.
  EXPECT_EQ(PickInstance(m, std::vector<double>{3, 3, 3}, 0, {.prefill_weight = 0}), 0);
  EXPECT_EQ(PickInstance(m, std::vector<double>{3, 1, 3}, 0, {.prefill_weight = 0}), 1);
}

TEST(PrefixRouterIndexTest, PickInstanceBreaksTiesByFewerBlocksHeld) {
  // Three idle instances, none holding the request's blocks: equal cost and load.
  std::vector<InstancePrefixMatch> m = {{.instance = 0, .held_blocks = 40},
                                        {.instance = 1, .held_blocks = 12},
                                        {.instance = 2, .held_blocks = 12}};
  const std::vector<double> idle = {0, 0, 0};
  EXPECT_EQ(PickInstance(m, idle, 10, {}), 1);  // fewest held; then the smaller id
  // The load still comes before the blocks held.
  EXPECT_EQ(PickInstance(m, std::vector<double>{0, 2, 2}, 10, {}), 0);
  // And the cost before both.
  m[2].weighted_blocks = 1;
  EXPECT_EQ(PickInstance(m, idle, 10, {}), 2);
}

TEST(PrefixRouterIndexTest, MatchReportsEveryBlockEachInstanceHolds) {
  auto index = PrefixRouterIndex::Create({}).value();
  index->Apply(0, KvEventBatch{.events = {{.type = KvEventType::kBlockStored,
                                           .block_hashes = {H(1), H(2), H(3)},
                                           .medium = "GPU"}}});
  index->Apply(1, KvEventBatch{.events = {{.type = KvEventType::kBlockStored,
                                           .block_hashes = {H(9)},
                                           .medium = "GPU"}}});
  const std::vector<InstancePrefixMatch> m = index->Match(std::vector<BlockHash>{H(1)});
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].held_blocks, 3);
  EXPECT_EQ(m[1].held_blocks, 1);
  EXPECT_EQ(m[0].matched_blocks, 1);
  EXPECT_EQ(m[1].matched_blocks, 0);
}

}  // namespace
}  // namespace pagedkv
