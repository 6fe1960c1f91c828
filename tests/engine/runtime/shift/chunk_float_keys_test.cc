// Copyright 2026 The pagedkv Authors.
//
// Chunk float keys (ShiftedChunkReuseOptions::float_keys_bytes): the ChunkFloatKeys store (least
// recently used eviction within its byte budget, lookups that check the copy), and
// ShiftedChunkReuse handing a recording mover each move of a token whose float key is kept, with
// that key, and every other move as before; copies made without keys or evicted, bad keys and bad
// options.
#include "engine/runtime/shift/chunk_float_keys.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "engine/runtime/shift/shifted_chunk_reuse.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/chunk_index.h"
#include "tests/engine/runtime/shift/recording_mover.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::MoverLog;
using ::pagedkv::testing::RecordingMover;

std::shared_ptr<const ChunkKeys> Keys(int32_t position, int32_t tokens, float value) {
  auto keys = std::make_shared<ChunkKeys>(
      ChunkKeys{.position = position, .num_tokens = tokens, .num_layers = 1, .width = 2});
  keys->keys.assign(static_cast<size_t>(tokens) * 2, value);
  return keys;
}

TEST(ChunkFloatKeysTest, EvictsTheLeastRecentlyUsedWithinItsBudget) {
  ChunkFloatKeys store(3 * 4 * 2 * sizeof(float));  // three entries of 4 tokens
  const BlockHash a = BlockHash::FromU64(1), b = BlockHash::FromU64(2), c = BlockHash::FromU64(3),
                  d = BlockHash::FromU64(4);
  store.Put(a, Keys(0, 4, 1.0f));
  store.Put(b, Keys(5, 4, 2.0f));
  store.Put(c, Keys(9, 4, 3.0f));
  EXPECT_EQ(store.bytes(), store.capacity_bytes());
  ASSERT_NE(store.Find(a, 0, 4), nullptr);  // a is now the most recently used
  EXPECT_EQ(store.Find(a, 1, 4), nullptr);  // another copy's position
  EXPECT_EQ(store.Find(a, 0, 3), nullptr);  // another copy's length
  store.Put(d, Keys(0, 4, 4.0f));           // evicts b
  EXPECT_EQ(store.Find(b, 5, 4), nullptr);
  EXPECT_EQ(store.Find(a, 0, 4)->keys[0], 1.0f);
  EXPECT_EQ(store.stats().evicted, 1);
  store.Put(a, Keys(7, 4, 5.0f));  // a new copy replaces the entry
  EXPECT_EQ(store.Find(a, 0, 4), nullptr);
  EXPECT_EQ(store.Find(a, 7, 4)->keys[0], 5.0f);
  EXPECT_EQ(store.size(), 3);
  store.Put(c, Keys(0, 13, 6.0f));  // larger than the budget: not kept, and c's old entry goes
  EXPECT_EQ(store.stats().too_large, 1);
  EXPECT_EQ(store.Find(c, 9, 4), nullptr);
  EXPECT_EQ(store.size(), 2);
  EXPECT_EQ(store.bytes(), 2 * 4 * 2 * static_cast<int64_t>(sizeof(float)));
  store.Erase(a);
  store.Erase(a);
  EXPECT_EQ(store.size(), 1);
}

// Keys of 2 layers, width 2, for `n` tokens: layer l, token j, element e holds 100l + 10j + e.
std::vector<float> LayerKeys(int32_t n) {
  std::vector<float> keys;
  for (int32_t l = 0; l < 2; ++l) {
    for (int32_t j = 0; j < n; ++j) {
      for (int32_t e = 0; e < 2; ++e) keys.push_back(100.0f * l + 10.0f * j + e);
    }
  }
  return keys;
}

class FloatKeysReuseTest : public ::testing::Test {
 protected:
  FloatKeysReuseTest() {
    pool_ = BlockPool::Create({.num_blocks = 8, .block_size = 4}).value();
    reuse_ = ShiftedChunkReuse::Create(ChunkIndex::Create(pool_.get()).value(),
                                       std::make_unique<RecordingMover>(&log_),
                                       {.float_keys_bytes = 1 << 20})
                 .value();
  }
  absl::StatusOr<bool> Register(int32_t position, bool with_keys) {
    const std::vector<std::vector<float>> groups = {LayerKeys(6)};
    ChunkFloatKeysInput keys;
    if (with_keys) keys = {.width = 2, .groups = groups};
    return reuse_->Register(doc_, "", 0, position, slots_, {}, keys);
  }

  MoverLog log_;
  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<ShiftedChunkReuse> reuse_;
  const std::vector<TokenId> doc_ = {100, 101, 102, 103, 104, 105};
  const std::vector<int64_t> slots_ = {24, 25, 26, 27, 28, 29};
};

TEST_F(FloatKeysReuseTest, MovesOfKeptTokensGoFromTheirFloatKeys) {
  ASSERT_TRUE(*Register(/*position=*/3, true));
  EXPECT_EQ(reuse_->float_keys()->size(), 1);
  std::optional<AcquiredChunk> chunk = reuse_->Acquire(doc_, "", 0);
  ASSERT_TRUE(chunk.has_value());
  const std::vector<int64_t>& s = chunk->slots;
  const std::vector<KvSlotMove> moves = {
      {.src_slot = s[0], .dst_slot = 1, .old_position = 3, .new_position = 9},
      {.src_slot = s[2], .dst_slot = 2, .old_position = 99, .new_position = 11},  // not its key
      {.src_slot = s[5], .dst_slot = 3, .old_position = 8, .new_position = 14},
      {.src_slot = 40, .dst_slot = 4, .old_position = 2, .new_position = 5}};  // no chunk's
  ASSERT_TRUE(reuse_->RunMoves(moves).ok());
  ASSERT_EQ(log_.key_moves.size(), 2u);
  EXPECT_EQ(log_.key_moves[0].dst_slot, 1);
  EXPECT_EQ(log_.key_moves[1].dst_slot, 3);
  // [layers, moves, width]: tokens 0 and 5 of layers 0 and 1.
  EXPECT_EQ(log_.keys, (std::vector<float>{0, 1, 50, 51, 100, 101, 150, 151}));
  ASSERT_EQ(log_.moves.size(), 2u);
  EXPECT_EQ(log_.moves[0].dst_slot, 2);
  EXPECT_EQ(log_.moves[1].dst_slot, 4);
  EXPECT_EQ(reuse_->stats().float_key_moves, 2);
  EXPECT_EQ(reuse_->num_acquired(), 0);

  // The same chunk acquired twice, one released unused: the other still moves from float keys.
  chunk = reuse_->Acquire(doc_, "", 0);
  std::optional<AcquiredChunk> unused = reuse_->Acquire(doc_, "", 0);
  ASSERT_TRUE(chunk.has_value() && unused.has_value());
  reuse_->Release(unused->handle);
  ASSERT_TRUE(reuse_->RunMoves(moves).ok());
  EXPECT_EQ(log_.key_moves.size(), 4u);
  EXPECT_EQ(log_.moves.size(), 4u);

  // A chunk released unused leaves no source behind: its slots move from their rounded keys.
  chunk = reuse_->Acquire(doc_, "", 0);
  ASSERT_TRUE(chunk.has_value());
  reuse_->Release(chunk->handle);
  ASSERT_TRUE(reuse_->RunMoves(moves).ok());
  EXPECT_EQ(log_.key_moves.size(), 4u);
  EXPECT_EQ(log_.moves.size(), 8u);
}

TEST_F(FloatKeysReuseTest, ACopyMadeWithoutKeysDropsTheOldOnes) {
  ASSERT_TRUE(*Register(3, true));
  EXPECT_FALSE(*Register(3, false));  // already registered: the kept keys stay
  EXPECT_EQ(reuse_->float_keys()->size(), 1);
  std::vector<BlockId> all;  // evict the chunk, then register it again without keys
  ASSERT_TRUE(pool_->Allocate(8, &all).ok());
  ASSERT_TRUE(pool_->Unpin(all).ok());
  ASSERT_TRUE(*Register(3, false));
  EXPECT_EQ(reuse_->float_keys()->size(), 0);
  std::optional<AcquiredChunk> chunk = reuse_->Acquire(doc_, "", 0);
  ASSERT_TRUE(chunk.has_value());
  const std::vector<KvSlotMove> moves = {
      {.src_slot = chunk->slots[0], .dst_slot = 1, .old_position = 3, .new_position = 9}};
  ASSERT_TRUE(reuse_->RunMoves(moves).ok());
  EXPECT_TRUE(log_.key_moves.empty());
  EXPECT_EQ(log_.moves.size(), 1u);
}

TEST_F(FloatKeysReuseTest, AnEvictedCopyTakesItsFloatKeysWithIt) {
  ASSERT_TRUE(*Register(3, true));
  EXPECT_GT(reuse_->float_keys()->bytes(), 0);
  std::vector<BlockId> all;  // the pool evicts the chunk's copy: its keys go at once
  ASSERT_TRUE(pool_->Allocate(8, &all).ok());
  EXPECT_EQ(reuse_->float_keys()->size(), 0);
  EXPECT_EQ(reuse_->float_keys()->bytes(), 0);
  ASSERT_TRUE(pool_->Unpin(all).ok());
  ASSERT_TRUE(*Register(3, true));
  EXPECT_EQ(reuse_->float_keys()->size(), 1);
  pool_->ResetPrefixCache();
  EXPECT_EQ(reuse_->float_keys()->size(), 0);
}

TEST_F(FloatKeysReuseTest, BadKeysAndOptionsAreInvalidArgument) {
  const std::vector<std::vector<float>> short_keys = {std::vector<float>(10, 0.0f)};
  const std::vector<std::vector<float>> two_groups = {LayerKeys(6), LayerKeys(6)};
  for (const ChunkFloatKeysInput& keys :
       {ChunkFloatKeysInput{.width = 2, .groups = short_keys},
        ChunkFloatKeysInput{.width = 2, .groups = two_groups},
        ChunkFloatKeysInput{.width = 0, .groups = std::span(two_groups).first(1)}}) {
    const absl::StatusOr<bool> r = reuse_->Register(doc_, "", 0, 3, slots_, {}, keys);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(reuse_->index().size(), 0);
  EXPECT_TRUE(log_.copy_src.empty());
  EXPECT_EQ(reuse_->float_keys()->size(), 0);
  const auto create = [&](int64_t bytes, bool mover) {
    auto pool = BlockPool::Create({.num_blocks = 2, .block_size = 4}).value();
    return ShiftedChunkReuse::Create(ChunkIndex::Create(pool.get()).value(),
                                     mover ? std::make_unique<RecordingMover>(&log_) : nullptr,
                                     {.float_keys_bytes = bytes})
        .status()
        .code();
  };
  EXPECT_EQ(create(-1, true), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create(1024, false), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(create(0, false), absl::StatusCode::kOk);
}

}  // namespace
}  // namespace pagedkv
