// Copyright 2026 The pagedkv Authors.
#include "engine/runtime/shift/chunk_reuse_tracker.h"

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/cache/block_pool.h"

namespace pagedkv {
namespace {

TEST(ChunkReuseTrackerTest, CountsShiftedHitsPastThePrefixHit) {
  auto pool = BlockPool::Create({.num_blocks = 64, .block_size = 16}).value();
  auto tracker = ChunkReuseTracker::Create(pool.get()).value();
  const BlockHash doc = BlockHash::FromU64(7), other = BlockHash::FromU64(8);
  // First request: both documents miss and are registered (2 + 1 blocks).
  const std::vector<TrackedChunk> first = {{.key = doc, .position = 10, .length = 20},
                                           {.key = other, .position = 30, .length = 5}};
  ASSERT_TRUE(tracker->OnRequest(first, 0).ok());
  EXPECT_EQ(tracker->stats().registered, 2);
  EXPECT_EQ(tracker->stats().hits, 0);
  EXPECT_EQ(pool->NumEvictableBlocks(), 3);
  // Second request: doc at another position (shifted), other at the same position.
  const std::vector<TrackedChunk> second = {{.key = doc, .position = 50, .length = 20},
                                            {.key = other, .position = 30, .length = 5}};
  ASSERT_TRUE(tracker->OnRequest(second, 32).ok());
  EXPECT_EQ(tracker->stats().hits, 2);
  EXPECT_EQ(tracker->stats().shifted_hits, 1);
  EXPECT_EQ(tracker->stats().shifted_hit_tokens, 20);
  EXPECT_EQ(tracker->stats().hit_tokens, 20 + 3);  // other: 2 of its 5 tokens were prefix hits
  // Third request: the prefix hit covers the whole document.
  const std::vector<TrackedChunk> third = {{.key = doc, .position = 0, .length = 20}};
  ASSERT_TRUE(tracker->OnRequest(third, 32).ok());
  EXPECT_EQ(tracker->stats().prefix_covered, 1);
  EXPECT_EQ(tracker->stats().lookups, 4);
  EXPECT_EQ(pool->NumUsedBlocks(), 0);  // nothing stays pinned
  EXPECT_TRUE(tracker->index().ValidateInvariants().ok());
}

TEST(ChunkReuseTrackerTest, EvictedChunksMissAndFullPoolsFailToRegister) {
  auto pool = BlockPool::Create({.num_blocks = 4, .block_size = 16}).value();
  auto tracker = ChunkReuseTracker::Create(pool.get()).value();
  const std::vector<TrackedChunk> doc = {{.key = BlockHash::FromU64(1), .length = 32}};
  ASSERT_TRUE(tracker->OnRequest(doc, 0).ok());
  EXPECT_EQ(tracker->stats().registered, 1);
  // Prefix traffic takes every block: the chunk's copy is evicted.
  std::vector<BlockId> held;
  ASSERT_TRUE(pool->Allocate(4, &held).ok());
  EXPECT_EQ(tracker->index().size(), 0);
  ASSERT_TRUE(tracker->OnRequest(doc, 0).ok());
  EXPECT_EQ(tracker->stats().hits, 0);
  EXPECT_EQ(tracker->stats().register_failures, 1);
  ASSERT_TRUE(pool->Unpin(held).ok());
  ASSERT_TRUE(tracker->OnRequest(doc, 0).ok());
  EXPECT_EQ(tracker->stats().registered, 2);
  EXPECT_TRUE(tracker->index().ValidateInvariants().ok());
}

TEST(ChunkReuseTrackerTest, BadInputCountsNothing) {
  auto pool = BlockPool::Create({.num_blocks = 4, .block_size = 16}).value();
  auto tracker = ChunkReuseTracker::Create(pool.get()).value();
  const std::vector<TrackedChunk> bad = {{.key = BlockHash::FromU64(1), .length = 0}};
  EXPECT_EQ(tracker->OnRequest(bad, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tracker->OnRequest({}, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tracker->stats().requests, 0);
  EXPECT_EQ(ChunkReuseTracker::Create(nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ChunkReuseTrackerTest, BeforeUnpinSeesEachChunksBlocksAndNextUse) {
  auto pool = BlockPool::Create({.num_blocks = 8, .block_size = 16}).value();
  struct Call {
    std::vector<BlockId> blocks;
    int64_t next_use;
    std::vector<int32_t> ref_counts;  // while the hook runs: still pinned
  };
  std::vector<Call> calls;
  BlockPool* raw = pool.get();
  auto tracker =
      ChunkReuseTracker::Create(
          pool.get(), {.before_unpin =
                           [&calls, raw](std::span<const BlockId> blocks, int64_t next_use) {
                             Call c{{blocks.begin(), blocks.end()}, next_use, {}};
                             for (BlockId b : blocks) c.ref_counts.push_back(raw->RefCount(b));
                             calls.push_back(std::move(c));
                           }})
          .value();
  const BlockHash doc = BlockHash::FromU64(3);
  // Registration: a copy of 2 blocks, reported with next use 5 while pinned.
  ASSERT_TRUE(
      tracker->OnRequest(std::vector<TrackedChunk>{{.key = doc, .length = 20, .next_use = 5}}, 0)
          .ok());
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].blocks.size(), 2u);
  EXPECT_EQ(calls[0].next_use, 5);
  EXPECT_EQ(calls[0].ref_counts, (std::vector<int32_t>{1, 1}));
  // A hit at another position: the same blocks, the new next use.
  ASSERT_TRUE(
      tracker->OnRequest(std::vector<TrackedChunk>{{.key = doc, .position = 40, .length = 20}}, 0)
          .ok());
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].blocks, calls[0].blocks);
  EXPECT_EQ(calls[1].next_use, kChunkNeverUsed);
  // Covered by the prefix hit, or no room to register: no call.
  ASSERT_TRUE(tracker->OnRequest(std::vector<TrackedChunk>{{.key = doc, .length = 20}}, 20).ok());
  std::vector<BlockId> held;
  ASSERT_TRUE(pool->Allocate(8, &held).ok());  // evicts the copy, takes every block
  ASSERT_TRUE(
      tracker->OnRequest(std::vector<TrackedChunk>{{.key = BlockHash::FromU64(4), .length = 5}}, 0)
          .ok());
  EXPECT_EQ(tracker->stats().register_failures, 1);
  EXPECT_EQ(calls.size(), 2u);
  ASSERT_TRUE(pool->Unpin(held).ok());
  EXPECT_TRUE(tracker->index().ValidateInvariants().ok());
}

}  // namespace
}  // namespace pagedkv
