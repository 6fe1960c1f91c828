// Copyright 2026 The pagedkv Authors.
//
// ChunkPins: acquiring pins a cached chunk's blocks and hands out its slots and position;
// releasing by handle, all at once, or by destruction unpins them exactly once.
#include "engine/runtime/shift/chunk_pins.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/chunk_index.h"

namespace pagedkv {
namespace {

constexpr int32_t kBlockSize = 4;

struct Fixture {
  std::unique_ptr<BlockPool> pool =
      BlockPool::Create({.num_blocks = 8, .block_size = kBlockSize}).value();
  std::unique_ptr<ChunkIndex> index = ChunkIndex::Create(pool.get()).value();
  std::vector<TokenId> doc = {5, 6, 7, 8, 9, 10};
  BlockHash key = ChunkKey(doc, {});
  std::vector<BlockId> blocks;

  // Registers `doc` at position 40 from slot offset 2 of two blocks, then unpins them.
  Fixture() {
    EXPECT_TRUE(pool->Allocate(2, &blocks).ok());
    EXPECT_TRUE(
        index
            ->Insert(
                {.key = key, .tokens = doc, .position = 40, .blocks = blocks, .start_offset = 2})
            .value());
    EXPECT_TRUE(pool->Unpin(std::vector<BlockId>(blocks.rbegin(), blocks.rend())).ok());
  }
};

TEST(ChunkPinsTest, AcquireFillsSlotsAndPinsUntilReleased) {
  Fixture f;
  ChunkPins pins(f.index.get());
  const std::optional<AcquiredChunk> chunk = pins.Acquire(f.key, f.doc);
  ASSERT_TRUE(chunk.has_value());
  EXPECT_EQ(chunk->position, 40);
  ASSERT_EQ(chunk->slots.size(), f.doc.size());
  EXPECT_EQ(chunk->slots[0], int64_t{f.blocks[0]} * kBlockSize + 2);
  EXPECT_EQ(chunk->slots[2], int64_t{f.blocks[1]} * kBlockSize + 0);
  for (BlockId b : f.blocks) EXPECT_EQ(f.pool->RefCount(b), 1);
  EXPECT_EQ(pins.size(), 1);
  EXPECT_FALSE(pins.Release(chunk->handle + 1));  // unknown handle: nothing happens
  EXPECT_TRUE(pins.Release(chunk->handle));
  EXPECT_FALSE(pins.Release(chunk->handle));  // once only
  for (BlockId b : f.blocks) EXPECT_EQ(f.pool->RefCount(b), 0);
  EXPECT_EQ(pins.size(), 0);
}

TEST(ChunkPinsTest, MissingChunkIsNotAcquired) {
  Fixture f;
  ChunkPins pins(f.index.get());
  const std::vector<TokenId> other = {1, 2, 3};
  EXPECT_FALSE(pins.Acquire(ChunkKey(other, {}), other).has_value());
  EXPECT_EQ(pins.size(), 0);
}

TEST(ChunkPinsTest, ReleaseAllAndDestructionUnpinEverything) {
  Fixture f;
  {
    ChunkPins pins(f.index.get());
    ASSERT_TRUE(pins.Acquire(f.key, f.doc).has_value());
    ASSERT_TRUE(pins.Acquire(f.key, f.doc).has_value());  // two readers: two pins
    for (BlockId b : f.blocks) EXPECT_EQ(f.pool->RefCount(b), 2);
    EXPECT_TRUE(pins.ReleaseAll().ok());
    for (BlockId b : f.blocks) EXPECT_EQ(f.pool->RefCount(b), 0);
    ASSERT_TRUE(pins.Acquire(f.key, f.doc).has_value());
  }  // destroyed with one chunk pinned
  for (BlockId b : f.blocks) EXPECT_EQ(f.pool->RefCount(b), 0);
  EXPECT_TRUE(f.pool->ValidateInvariants().ok());
}

}  // namespace
}  // namespace pagedkv
