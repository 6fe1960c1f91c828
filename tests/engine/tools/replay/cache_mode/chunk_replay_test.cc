// Copyright 2026 The pagedkv Authors.
//
// ChunkReplay: cache-mode replay's chunk counting over the engine's ShiftedChunkReuse - chunks
// inside the prefix hit, hits at the same and another position past it, registrations, and bad
// input counting nothing.
#include "engine/tools/replay/cache_mode/chunk_replay.h"

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/cache/block_pool.h"

namespace pagedkv::replay {
namespace {

TEST(ChunkReplayTest, CountsShiftedHitsPastThePrefixHit) {
  auto pool = BlockPool::Create({.num_blocks = 64, .block_size = 16}).value();
  auto chunks = ChunkReplay::Create(pool.get(), /*belady=*/nullptr).value();
  const BlockHash doc = BlockHash::FromU64(7), other = BlockHash::FromU64(8);
  CacheReplayResult r;
  // First request: both documents miss and are registered (2 + 1 blocks).
  const std::vector<TrackedChunk> first = {{.key = doc, .position = 10, .length = 20},
                                           {.key = other, .position = 30, .length = 5}};
  ASSERT_TRUE(chunks->CountRequest(first, 0, 16, r).ok());
  EXPECT_EQ(r.chunks_registered, 2);
  EXPECT_EQ(r.chunk_hits, 0);
  EXPECT_EQ(pool->NumEvictableBlocks(), 3);
  // Second request: doc at another position (moved), other at the same position.
  const std::vector<TrackedChunk> second = {{.key = doc, .position = 50, .length = 20},
                                            {.key = other, .position = 30, .length = 5}};
  ASSERT_TRUE(chunks->CountRequest(second, 32, 16, r).ok());
  EXPECT_EQ(r.chunk_hits, 2);
  EXPECT_EQ(r.chunk_hits_moved, 1);
  EXPECT_EQ(r.shifted_hit_tokens_moved, 20);
  EXPECT_EQ(r.shifted_hit_tokens, 20 + 3);  // other: 2 of its 5 tokens were prefix hits
  // Third request: the prefix hit covers the whole document.
  const std::vector<TrackedChunk> third = {{.key = doc, .position = 0, .length = 20}};
  ASSERT_TRUE(chunks->CountRequest(third, 32, 16, r).ok());
  EXPECT_EQ(r.chunks_in_prefix, 1);
  EXPECT_EQ(r.chunks, 5);
  EXPECT_EQ(pool->NumUsedBlocks(), 0);  // nothing stays pinned
  EXPECT_TRUE(chunks->reuse().index().ValidateInvariants().ok());
}

TEST(ChunkReplayTest, BadInputCountsNothing) {
  auto pool = BlockPool::Create({.num_blocks = 4, .block_size = 16}).value();
  auto chunks = ChunkReplay::Create(pool.get(), /*belady=*/nullptr).value();
  CacheReplayResult r;
  const std::vector<TrackedChunk> bad = {{.key = BlockHash::FromU64(2), .length = 8},
                                         {.key = BlockHash::FromU64(1), .length = 0}};
  EXPECT_EQ(chunks->CountRequest(bad, 0, 16, r).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(chunks->CountRequest({}, -1, 16, r).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.chunks, 0);
  EXPECT_EQ(chunks->reuse().index().size(), 0);
  EXPECT_EQ(ChunkReplay::Create(nullptr, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagedkv::replay
