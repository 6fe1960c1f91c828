// Copyright 2026 The pagedkv Authors.
#include "pagedkv/cache/chunk_index.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/types.h"

namespace pagedkv {
namespace {

constexpr int32_t kBlockSize = 4;

std::unique_ptr<BlockPool> MakePool(int32_t num_blocks) {
  return BlockPool::Create({.num_blocks = num_blocks, .block_size = kBlockSize}).value();
}

std::vector<TokenId> Tokens(int n, TokenId first) {
  std::vector<TokenId> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = first + i;
  return t;
}

TEST(ChunkKeyTest, CoversEveryPartAndOnlyContent) {
  const std::vector<TokenId> doc = Tokens(10, 5);
  const ChunkKeyParts base{
      .cache_salt = "s", .adapter_id = 3, .rope_fingerprint = "rope/a", .model_fingerprint = "m"};
  const BlockHash key = ChunkKey(doc, base);
  EXPECT_EQ(key, ChunkKey(doc, base));
  ChunkKeyParts p = base;
  p.cache_salt = "t";
  EXPECT_NE(key, ChunkKey(doc, p));
  p = base;
  p.adapter_id = 4;
  EXPECT_NE(key, ChunkKey(doc, p));
  p = base;
  p.rope_fingerprint = "rope/b";
  EXPECT_NE(key, ChunkKey(doc, p));
  p = base;
  p.model_fingerprint = "n";
  EXPECT_NE(key, ChunkKey(doc, p));
  std::vector<TokenId> other = doc;
  other.back() += 1;
  EXPECT_NE(key, ChunkKey(other, base));
  // Length-prefixed strings: moving a byte from the salt to the fingerprint changes the key.
  EXPECT_NE(ChunkKey(doc, {.cache_salt = "ab", .rope_fingerprint = "c"}),
            ChunkKey(doc, {.cache_salt = "a", .rope_fingerprint = "bc"}));
}

TEST(ChunkIndexTest, CreateRejectsNullPool) {
  EXPECT_EQ(ChunkIndex::Create(nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ChunkIndexTest, InsertFindAcquireReleaseUnaligned) {
  auto pool = MakePool(16);
  auto index = ChunkIndex::Create(pool.get()).value();
  std::vector<BlockId> blocks;
  ASSERT_TRUE(pool->Allocate(3, &blocks).ok());
  const std::vector<TokenId> doc = Tokens(9, 100);  // offset 2 + 9 tokens = 11 slots: 3 blocks
  const BlockHash key = ChunkKey(doc, {});
  ASSERT_TRUE(
      index
          ->Insert({.key = key, .tokens = doc, .position = 30, .blocks = blocks, .start_offset = 2})
          .value());
  EXPECT_FALSE(
      index
          ->Insert({.key = key, .tokens = doc, .position = 30, .blocks = blocks, .start_offset = 2})
          .value());  // already registered
  EXPECT_TRUE(index->ValidateInvariants().ok());
  // The caller releases its blocks: they stay cached (evictable), held by the pool's order.
  std::vector<BlockId> tail_first(blocks.rbegin(), blocks.rend());
  ASSERT_TRUE(pool->Unpin(tail_first).ok());
  EXPECT_EQ(pool->NumEvictableBlocks(), 3);

  std::optional<ChunkLocation> hit = index->Find(key, doc);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->position, 30);
  EXPECT_EQ(hit->num_tokens, 9);
  EXPECT_EQ(hit->SlotOf(0, kBlockSize), int64_t{blocks[0]} * kBlockSize + 2);
  EXPECT_EQ(hit->SlotOf(2, kBlockSize), int64_t{blocks[1]} * kBlockSize + 0);
  EXPECT_EQ(hit->SlotOf(8, kBlockSize), int64_t{blocks[2]} * kBlockSize + 2);
  EXPECT_EQ(hit->PositionOf(8), 38);
  ASSERT_TRUE(index->Acquire(*hit).ok());
  for (BlockId b : blocks) EXPECT_EQ(pool->RefCount(b), 1);
  EXPECT_EQ(pool->NumEvictableBlocks(), 0);
  ASSERT_TRUE(index->Release(*hit).ok());
  for (BlockId b : blocks) EXPECT_EQ(pool->RefCount(b), 0);
  EXPECT_EQ(index->Release(*hit).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(index->stats().hits, 1);
  EXPECT_EQ(index->stats().hit_tokens, 9);

  // Verification: same key, different tokens (a forced collision) is not a hit.
  std::vector<TokenId> other = doc;
  other[3] = 7;
  EXPECT_FALSE(index->Find(key, other).has_value());
  EXPECT_FALSE(index->Find(key, Tokens(8, 100)).has_value());
  EXPECT_TRUE(index->ValidateInvariants().ok());
}

TEST(ChunkIndexTest, InsertCopyTakesFillsAndReleasesItsOwnBlocks) {
  auto pool = MakePool(4);
  auto index = ChunkIndex::Create(pool.get()).value();
  const std::vector<TokenId> doc = Tokens(6, 100);  // 2 blocks
  const BlockHash key = ChunkKey(doc, {});
  std::vector<BlockId> filled;
  const auto fill = [&](std::span<const BlockId> blocks) {
    filled.assign(blocks.begin(), blocks.end());
    for (BlockId b : blocks) EXPECT_EQ(pool->RefCount(b), 1);  // held while the KV is written
    return absl::OkStatus();
  };
  EXPECT_EQ(index->InsertCopy({.key = key, .tokens = doc, .position = 7}, fill).value(),
            ChunkCopyResult::kInserted);
  ASSERT_EQ(filled.size(), 2u);
  EXPECT_EQ(pool->NumUsedBlocks(), 0);  // unpinned: evictable in the pool's order
  EXPECT_EQ(pool->NumCachedBlocks(), 2);
  const std::optional<ChunkLocation> hit = index->Find(key, doc);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->blocks, filled);
  EXPECT_EQ(hit->start_offset, 0);
  EXPECT_EQ(hit->position, 7);
  filled.clear();
  EXPECT_EQ(index->InsertCopy({.key = key, .tokens = doc, .position = 7}, fill).value(),
            ChunkCopyResult::kAlreadyRegistered);
  EXPECT_TRUE(filled.empty());
  // Five blocks from a pool of four: no room, fill never called, nothing changed.
  const std::vector<TokenId> big = Tokens(20, 500);
  EXPECT_EQ(index->InsertCopy({.key = ChunkKey(big, {}), .tokens = big}, fill).value(),
            ChunkCopyResult::kNoRoom);
  EXPECT_TRUE(filled.empty());
  EXPECT_EQ(index->size(), 1);
  EXPECT_TRUE(index->ValidateInvariants().ok());
  EXPECT_TRUE(pool->ValidateInvariants().ok());
}

TEST(ChunkIndexTest, FailedInsertCopyRegistersNothingAndHoldsNothing) {
  auto pool = MakePool(4);
  auto index = ChunkIndex::Create(pool.get()).value();
  const std::vector<TokenId> doc = Tokens(5, 1);
  const auto fail = [](std::span<const BlockId>) { return absl::DataLossError("copy failed"); };
  EXPECT_EQ(index->InsertCopy({.key = ChunkKey(doc, {}), .tokens = doc}, fail).status().code(),
            absl::StatusCode::kDataLoss);
  const auto ok = [](std::span<const BlockId>) { return absl::OkStatus(); };
  EXPECT_EQ(index->InsertCopy({.key = ChunkKey(doc, {}), .tokens = {}}, ok).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(index->InsertCopy({.key = ChunkKey(doc, {}), .tokens = doc, .position = -1}, ok)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(index->size(), 0);
  EXPECT_EQ(pool->NumUsedBlocks(), 0);
  EXPECT_EQ(pool->NumCachedBlocks(), 0);
  EXPECT_TRUE(pool->ValidateInvariants().ok());
}

// The front door the engine and serve replay use: an index over a KvCacheManager's own pool.
TEST(ChunkIndexTest, AttachedToAManagerSharesItsPool) {
  auto manager = KvCacheManager::Create({.num_blocks = 8, .block_size = kBlockSize}).value();
  auto index = manager->AttachChunkIndex().value();
  EXPECT_EQ(&index->pool(), &manager->pool());
  const std::vector<TokenId> doc = Tokens(8, 40);
  const auto ok = [](std::span<const BlockId>) { return absl::OkStatus(); };
  EXPECT_EQ(index->InsertCopy({.key = ChunkKey(doc, {}), .tokens = doc}, ok).value(),
            ChunkCopyResult::kInserted);
  EXPECT_EQ(manager->pool().NumCachedBlocks(), 2);
  EXPECT_EQ(manager->NumAvailableBlocks(), 8);  // the copy is evictable
  manager->ResetPrefixCache();                  // the manager's reset drops the chunk too
  EXPECT_EQ(index->size(), 0);
  EXPECT_TRUE(manager->ValidateInvariants().ok());
}

TEST(ChunkIndexTest, BadInsertChangesNothing) {
  auto pool = MakePool(8);
  auto index = ChunkIndex::Create(pool.get()).value();
  std::vector<BlockId> blocks;
  ASSERT_TRUE(pool->Allocate(2, &blocks).ok());
  const std::vector<TokenId> doc = Tokens(6, 1);
  const BlockHash key = ChunkKey(doc, {});
  const std::vector<BlockId> one = {blocks[0]};
  const std::vector<BlockId> repeated = {blocks[0], blocks[0]};
  const std::vector<BlockId> out_of_range = {blocks[0], 99};
  const std::vector<BlockId> free_block = {blocks[0], pool->num_blocks() - 1};
  ASSERT_EQ(pool->RefCount(pool->num_blocks() - 1), 0);
  EXPECT_EQ(
      index->Insert({.key = key, .tokens = {}, .position = 0, .blocks = blocks, .start_offset = 0})
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      index
          ->Insert({.key = key, .tokens = doc, .position = -1, .blocks = blocks, .start_offset = 0})
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(index
                ->Insert({.key = key,
                          .tokens = doc,
                          .position = 0,
                          .blocks = blocks,
                          .start_offset = kBlockSize})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      index->Insert({.key = key, .tokens = doc, .position = 0, .blocks = one, .start_offset = 0})
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      index->Insert({.key = key, .tokens = doc, .position = 0, .blocks = blocks, .start_offset = 3})
          .status()
          .code(),  // 3 + 6 needs 3 blocks
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      index
          ->Insert(
              {.key = key, .tokens = doc, .position = 0, .blocks = repeated, .start_offset = 0})
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      index
          ->Insert(
              {.key = key, .tokens = doc, .position = 0, .blocks = out_of_range, .start_offset = 0})
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      index
          ->Insert(
              {.key = key, .tokens = doc, .position = 0, .blocks = free_block, .start_offset = 0})
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(index->size(), 0);
  EXPECT_EQ(pool->NumCachedBlocks(), 0);
  EXPECT_EQ(pool->RefCount(blocks[0]), 1);
  EXPECT_TRUE(index->ValidateInvariants().ok());
  EXPECT_EQ(index->Erase(key).code(), absl::StatusCode::kNotFound);
}

TEST(ChunkIndexTest, EvictedChunkIsNeverReturnedNorAcquired) {
  auto pool = MakePool(4);
  auto index = ChunkIndex::Create(pool.get()).value();
  std::vector<BlockId> blocks;
  ASSERT_TRUE(pool->Allocate(2, &blocks).ok());
  const std::vector<TokenId> doc = Tokens(8, 1);
  const BlockHash key = ChunkKey(doc, {});
  ASSERT_TRUE(
      index->Insert({.key = key, .tokens = doc, .position = 0, .blocks = blocks, .start_offset = 0})
          .ok());
  std::vector<BlockId> tail_first(blocks.rbegin(), blocks.rend());
  ASSERT_TRUE(pool->Unpin(tail_first).ok());
  const std::optional<ChunkLocation> hit = index->Find(key, doc);
  ASSERT_TRUE(hit.has_value());
  // Someone else needs every block before the hit is acquired: the pool evicts the chunk's blocks.
  std::vector<BlockId> others;
  ASSERT_TRUE(pool->Allocate(4, &others).ok());
  EXPECT_EQ(index->size(), 0);
  EXPECT_EQ(index->stats().invalidations, 1);
  EXPECT_FALSE(index->Find(key, doc).has_value());
  EXPECT_EQ(index->Acquire(*hit).code(), absl::StatusCode::kFailedPrecondition);
  for (BlockId b : others) EXPECT_EQ(pool->RefCount(b), 1);  // Acquire pinned nothing
  EXPECT_TRUE(index->ValidateInvariants().ok());
}

TEST(ChunkIndexTest, AcquiredChunkIsNotEvictedMidUse) {
  auto pool = MakePool(4);
  auto index = ChunkIndex::Create(pool.get()).value();
  std::vector<BlockId> blocks;
  ASSERT_TRUE(pool->Allocate(2, &blocks).ok());
  const std::vector<TokenId> doc = Tokens(5, 1);
  const BlockHash key = ChunkKey(doc, {});
  ASSERT_TRUE(
      index->Insert({.key = key, .tokens = doc, .position = 0, .blocks = blocks, .start_offset = 1})
          .ok());
  std::vector<BlockId> tail_first(blocks.rbegin(), blocks.rend());
  ASSERT_TRUE(pool->Unpin(tail_first).ok());
  const std::optional<ChunkLocation> hit = index->Find(key, doc);
  ASSERT_TRUE(hit.has_value());
  ASSERT_TRUE(index->Acquire(*hit).ok());
  std::vector<BlockId> others;
  EXPECT_EQ(pool->Allocate(3, &others).code(), absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(pool->Allocate(2, &others).ok());  // only the two free blocks
  EXPECT_TRUE(index->Find(key, doc).has_value());
  ASSERT_TRUE(index->Release(*hit).ok());
  ASSERT_TRUE(pool->Allocate(1, &others).ok());  // now evicts a chunk block
  EXPECT_FALSE(index->Find(key, doc).has_value());
  EXPECT_TRUE(index->ValidateInvariants().ok());
}

// A prompt's prefix-cached blocks also serve as a chunk (the chunk was computed in place):
// one reference count per block, one eviction order, and evicting a shared block drops the chunk.
TEST(ChunkIndexTest, ChunksAndPrefixesShareBlocks) {
  auto pool = MakePool(6);
  auto index = ChunkIndex::Create(pool.get()).value();
  // A "request" computes 3 full blocks and caches them as a prefix chain.
  std::vector<BlockId> table;
  ASSERT_TRUE(pool->Allocate(3, &table).ok());
  const std::vector<TokenId> prompt = Tokens(12, 10);
  BlockHash parent = RootHash("", "m");
  std::vector<BlockHash> hashes;
  for (int i = 0; i < 3; ++i) {
    const std::span<const TokenId> block_tokens =
        std::span<const TokenId>(prompt).subspan(static_cast<size_t>(i * kBlockSize), kBlockSize);
    const BlockHash h = HashBlock(DefaultBlockHasher(), parent, block_tokens);
    ASSERT_TRUE(
        pool->Insert({.block = table[static_cast<size_t>(i)],
                      .hash = h,
                      .parent_hash = parent,
                      .tokens = block_tokens,
                      .parent_block = i == 0 ? kNullBlock : table[static_cast<size_t>(i - 1)]})
            .value());
    hashes.push_back(h);
    parent = h;
  }
  // Tokens 2..9 of the prompt are a document: a chunk over the same (already cached) blocks.
  const std::vector<TokenId> doc(prompt.begin() + 2, prompt.begin() + 10);
  const BlockHash key = ChunkKey(doc, {});
  ASSERT_TRUE(
      index->Insert({.key = key, .tokens = doc, .position = 2, .blocks = table, .start_offset = 2})
          .value());
  EXPECT_EQ(pool->NumCachedBlocks(), 3);                    // shared, not re-cached
  for (BlockId b : table) EXPECT_EQ(pool->RefCount(b), 1);  // the index adds no references
  for (BlockId b : table) EXPECT_EQ(index->NumChunksUsing(b), 1);
  // The request finishes; a prefix hit and a chunk hit pin the same blocks: counts add up.
  std::vector<BlockId> tail_first(table.rbegin(), table.rend());
  ASSERT_TRUE(pool->Unpin(tail_first).ok());
  EXPECT_EQ(pool->NumEvictableBlocks(), 3);
  ASSERT_EQ(pool->FindCached(hashes[0]), table[0]);
  ASSERT_TRUE(pool->Pin(table[0]).ok());  // prefix hit on block 0
  const std::optional<ChunkLocation> hit = index->Find(key, doc);
  ASSERT_TRUE(hit.has_value());
  ASSERT_TRUE(index->Acquire(*hit).ok());
  EXPECT_EQ(pool->RefCount(table[0]), 2);
  EXPECT_EQ(pool->RefCount(table[1]), 1);
  ASSERT_TRUE(index->Release(*hit).ok());
  EXPECT_EQ(pool->RefCount(table[0]), 1);
  EXPECT_EQ(pool->NumEvictableBlocks(), 2);
  EXPECT_TRUE(index->ValidateInvariants().ok());
  // Pressure: 3 free blocks plus the 2 evictable ones. LRU evicts in release order (the chunk's
  // Release queued its tail first), so the first eviction takes the tail block and drops the chunk.
  std::vector<BlockId> others;
  ASSERT_TRUE(pool->Allocate(4, &others).ok());
  EXPECT_FALSE(pool->IsCached(table[2]));
  EXPECT_TRUE(pool->IsCached(table[1]));
  EXPECT_TRUE(pool->IsCached(table[0]));  // still pinned by the prefix hit
  EXPECT_EQ(index->size(), 0);
  EXPECT_FALSE(index->Find(key, doc).has_value());
  for (BlockId b : table) EXPECT_EQ(index->NumChunksUsing(b), 0);
  EXPECT_TRUE(index->ValidateInvariants().ok());
}

// When the pool evicts one block of a chunk's own copy, the copy's other blocks can no longer be
// reached: the index frees them at once instead of leaving them cached until evicted in turn.
// Blocks that are held, shared with the prefix cache or used by another chunk are left alone.
TEST(ChunkIndexTest, PartlyEvictedCopyFreesItsOtherBlocks) {
  auto pool = MakePool(8);
  auto index = ChunkIndex::Create(pool.get()).value();
  // Chunk A: its own copy in 3 uncached blocks. Chunk B: 2 blocks, one of them held by the caller.
  std::vector<BlockId> a_blocks, b_blocks;
  ASSERT_TRUE(pool->Allocate(3, &a_blocks).ok());
  ASSERT_TRUE(pool->Allocate(2, &b_blocks).ok());
  const std::vector<TokenId> doc_a = Tokens(12, 1), doc_b = Tokens(8, 100);
  const BlockHash key_a = ChunkKey(doc_a, {}), key_b = ChunkKey(doc_b, {});
  ASSERT_TRUE(
      index
          ->Insert(
              {.key = key_a, .tokens = doc_a, .position = 0, .blocks = a_blocks, .start_offset = 0})
          .value());
  ASSERT_TRUE(
      index
          ->Insert(
              {.key = key_b, .tokens = doc_b, .position = 0, .blocks = b_blocks, .start_offset = 0})
          .value());
  ASSERT_TRUE(pool->Unpin(std::vector<BlockId>(a_blocks.rbegin(), a_blocks.rend())).ok());
  ASSERT_TRUE(pool->Unpin(b_blocks[1]).ok());  // b_blocks[0] stays held
  ASSERT_EQ(pool->NumCachedBlocks(), 5);
  ASSERT_EQ(pool->NumFreeBlocks(), 3);
  // Four allocations: three free blocks, then one eviction (LRU: A's tail, released first).
  std::vector<BlockId> others;
  ASSERT_TRUE(pool->Allocate(4, &others).ok());
  // One eviction to make room, and the two orphaned copies uncached: every block that left
  // the index counts (stored_blocks - evictions = cached blocks).
  EXPECT_EQ(pool->stats().evictions, 3);
  EXPECT_FALSE(index->Contains(key_a));
  EXPECT_EQ(index->stats().orphans_freed, 2);
  for (BlockId b : a_blocks) EXPECT_FALSE(pool->IsCached(b));
  EXPECT_EQ(pool->NumFreeBlocks(), 2);  // A's two other blocks, free again
  EXPECT_TRUE(index->Contains(key_b));
  // Chunk B loses its unheld block: its held block stays cached (someone holds it).
  ASSERT_TRUE(pool->Allocate(2, &others).ok());
  ASSERT_TRUE(pool->Allocate(1, &others).ok());  // evicts b_blocks[1]
  EXPECT_FALSE(index->Contains(key_b));
  EXPECT_TRUE(pool->IsCached(b_blocks[0]));
  EXPECT_EQ(index->stats().orphans_freed, 2);
  EXPECT_TRUE(index->ValidateInvariants().ok());
  EXPECT_TRUE(pool->ValidateInvariants().ok());
}

TEST(ChunkIndexTest, ResetPrefixCacheDropsEveryChunk) {
  auto pool = MakePool(8);
  auto index = ChunkIndex::Create(pool.get()).value();
  std::vector<BlockId> blocks;
  ASSERT_TRUE(pool->Allocate(2, &blocks).ok());
  const std::vector<TokenId> a = Tokens(4, 1), b = Tokens(4, 50);
  ASSERT_TRUE(index
                  ->Insert({.key = ChunkKey(a, {}),
                            .tokens = a,
                            .position = 0,
                            .blocks = {&blocks[0], 1},
                            .start_offset = 0})
                  .ok());
  ASSERT_TRUE(index
                  ->Insert({.key = ChunkKey(b, {}),
                            .tokens = b,
                            .position = 9,
                            .blocks = {&blocks[1], 1},
                            .start_offset = 0})
                  .ok());
  EXPECT_EQ(index->size(), 2);
  pool->ResetPrefixCache();
  EXPECT_EQ(index->size(), 0);
  EXPECT_TRUE(index->ValidateInvariants().ok());
  // The blocks are still held and uncached: they can be registered again.
  EXPECT_TRUE(index
                  ->Insert({.key = ChunkKey(a, {}),
                            .tokens = a,
                            .position = 0,
                            .blocks = {&blocks[0], 1},
                            .start_offset = 0})
                  .value());
}

TEST(ChunkIndexTest, TheDropListenerLearnsEveryForgottenChunk) {
  auto pool = MakePool(4);
  auto index = ChunkIndex::Create(pool.get()).value();
  std::vector<BlockHash> dropped;
  index->SetDropListener([&](const BlockHash& key) { dropped.push_back(key); });
  const std::vector<TokenId> a = Tokens(4, 1), b = Tokens(4, 50), c = Tokens(4, 90);
  auto copy = [&](const std::vector<TokenId>& doc) {
    return index->InsertCopy({.key = ChunkKey(doc, {}), .tokens = doc, .position = 0},
                             [](std::span<const BlockId>) { return absl::OkStatus(); });
  };
  ASSERT_EQ(copy(a).value(), ChunkCopyResult::kInserted);
  ASSERT_EQ(copy(b).value(), ChunkCopyResult::kInserted);
  EXPECT_TRUE(dropped.empty());
  ASSERT_TRUE(index->Erase(ChunkKey(a, {})).ok());
  EXPECT_EQ(dropped, std::vector<BlockHash>{ChunkKey(a, {})});
  std::vector<BlockId> others;  // every block taken: b's copy is evicted
  ASSERT_TRUE(pool->Allocate(4, &others).ok());
  EXPECT_EQ(index->size(), 0);
  ASSERT_EQ(dropped.size(), 2u);
  EXPECT_EQ(dropped[1], ChunkKey(b, {}));
  ASSERT_TRUE(pool->Unpin(others).ok());
  ASSERT_EQ(copy(c).value(), ChunkCopyResult::kInserted);
  pool->ResetPrefixCache();  // reset
  ASSERT_EQ(dropped.size(), 3u);
  EXPECT_EQ(dropped[2], ChunkKey(c, {}));
  index->SetDropListener({});  // nobody told
  ASSERT_EQ(copy(c).value(), ChunkCopyResult::kInserted);
  ASSERT_TRUE(index->Erase(ChunkKey(c, {})).ok());
  EXPECT_EQ(dropped.size(), 3u);
}

// Randomised differential test: a brute-force model says a chunk is findable iff every one of its
// blocks is still cached under the generation it had at registration.
TEST(ChunkIndexTest, RandomOperationsMatchBruteForce) {
  std::mt19937 rng(1234);
  auto pool = MakePool(24);
  auto index = ChunkIndex::Create(pool.get()).value();
  struct Model {
    std::vector<TokenId> tokens;
    std::vector<BlockId> blocks;
    std::vector<uint32_t> generations;
    int acquired = 0;
  };
  std::map<std::pair<int, int>, Model> chunks;  // by (document id, length)
  std::vector<std::vector<BlockId>> held;
  const int kSteps = 3000;
  for (int step = 0; step < kSteps; ++step) {
    const int op = static_cast<int>(rng() % 5);
    if (op == 0) {  // register a new document in freshly allocated blocks
      const int doc = static_cast<int>(rng() % 40);
      const int n = 1 + static_cast<int>(rng() % 10);
      const int offset = static_cast<int>(rng() % kBlockSize);
      const std::vector<TokenId> tokens = Tokens(n, doc * 100);
      std::vector<BlockId> blocks;
      const int need = (offset + n + kBlockSize - 1) / kBlockSize;
      if (!pool->Allocate(need, &blocks).ok()) continue;
      const BlockHash key = ChunkKey(tokens, {});
      bool was_valid = false;
      if (const auto it = chunks.find({doc, n}); it != chunks.end()) {
        was_valid = true;
        for (size_t j = 0; j < it->second.blocks.size(); ++j) {
          was_valid = was_valid && pool->IsCached(it->second.blocks[j]) &&
                      pool->Generation(it->second.blocks[j]) == it->second.generations[j];
        }
      }
      const absl::StatusOr<bool> inserted = index->Insert(
          {.key = key, .tokens = tokens, .position = 5, .blocks = blocks, .start_offset = offset});
      ASSERT_TRUE(inserted.ok()) << inserted.status();
      EXPECT_EQ(*inserted, !was_valid);
      if (*inserted) {
        Model m{tokens, blocks, {}, 0};
        for (BlockId b : blocks) m.generations.push_back(pool->Generation(b));
        chunks[{doc, n}] = m;
      }
      held.push_back(blocks);
    } else if (op == 1 && !held.empty()) {  // a holder releases its blocks
      const size_t i = rng() % held.size();
      std::vector<BlockId> tail_first(held[i].rbegin(), held[i].rend());
      ASSERT_TRUE(pool->Unpin(tail_first).ok());
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (op == 2) {  // unrelated allocations (may evict)
      std::vector<BlockId> blocks;
      if (pool->Allocate(1 + static_cast<int>(rng() % 3), &blocks).ok()) held.push_back(blocks);
    } else if (op == 3 && !chunks.empty()) {  // lookup + acquire/release
      auto it = chunks.begin();
      std::advance(it, static_cast<std::ptrdiff_t>(rng() % chunks.size()));
      const Model& m = it->second;
      bool expect_valid = true;
      for (size_t j = 0; j < m.blocks.size(); ++j) {
        expect_valid = expect_valid && pool->IsCached(m.blocks[j]) &&
                       pool->Generation(m.blocks[j]) == m.generations[j];
      }
      const std::optional<ChunkLocation> hit = index->Find(ChunkKey(m.tokens, {}), m.tokens);
      ASSERT_EQ(hit.has_value(), expect_valid) << "step " << step;
      if (hit) {
        EXPECT_EQ(hit->blocks, m.blocks);
        ASSERT_TRUE(index->Acquire(*hit).ok());
        held.push_back(hit->blocks);  // released later like any holder
      }
    } else if (op == 4 && !chunks.empty() && rng() % 4 == 0) {
      auto it = chunks.begin();
      std::advance(it, static_cast<std::ptrdiff_t>(rng() % chunks.size()));
      const absl::Status erased = index->Erase(ChunkKey(it->second.tokens, {}));
      EXPECT_TRUE(erased.ok() || erased.code() == absl::StatusCode::kNotFound);
      chunks.erase(it);
    }
    if (step % 50 == 0) {
      ASSERT_TRUE(index->ValidateInvariants().ok()) << "step " << step;
    }
  }
  ASSERT_TRUE(index->ValidateInvariants().ok());
  EXPECT_GT(index->stats().hits, 0);
  EXPECT_GT(index->stats().invalidations, 0);
}

}  // namespace
}  // namespace pagedkv
