// Copyright 2026 The pagedkv Authors.
//
// BlockIndex against a brute-force map: random inserts, finds and erases on small tables (so probe
// runs are long and wrap around the end of the table), checking every key after every step.
#include "pagedkv/cache/block_index.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "pagedkv/cache/block_hash.h"

namespace pagedkv {
namespace {

// Keys of the blocks, as BlockPool keeps them in its metadata.
struct Keys {
  std::vector<BlockHash> of_block;
  const BlockHash& operator()(BlockId b) const { return of_block[static_cast<size_t>(b)]; }
};

TEST(BlockIndexTest, EmptyFindsNothing) {
  BlockIndex index(4);
  Keys keys{{BlockHash{1, 2}}};
  EXPECT_EQ(index.size(), 0);
  EXPECT_EQ(index.num_slots(), 16);
  EXPECT_EQ(index.Find(BlockHash{1, 2}, keys), kNullBlock);
  EXPECT_FALSE(index.Erase(BlockHash{1, 2}, 0));
}

TEST(BlockIndexTest, InsertRefusesAPresentKeyAndChangesNothing) {
  BlockIndex index(4);
  Keys keys{{BlockHash{7, 7}, BlockHash{7, 7}}};
  EXPECT_TRUE(index.Insert(keys(0), 0, keys));
  EXPECT_FALSE(index.Insert(keys(1), 1, keys));
  EXPECT_EQ(index.size(), 1);
  EXPECT_EQ(index.Find(BlockHash{7, 7}, keys), 0);
}

TEST(BlockIndexTest, EraseNeedsTheRightBlock) {
  BlockIndex index(4);
  Keys keys{{BlockHash{3, 4}, BlockHash{5, 6}}};
  ASSERT_TRUE(index.Insert(keys(0), 0, keys));
  EXPECT_FALSE(index.Erase(keys(0), 1));  // block 1 is not indexed under that key
  EXPECT_EQ(index.Find(keys(0), keys), 0);
  EXPECT_TRUE(index.Erase(keys(0), 0));
  EXPECT_EQ(index.Find(keys(0), keys), kNullBlock);
  EXPECT_EQ(index.size(), 0);
}

TEST(BlockIndexTest, SlotsArePowerOfTwoAtMostHalfFull) {
  for (int64_t n : {0, 1, 8, 9, 1000, 1 << 20}) {
    BlockIndex index(n);
    EXPECT_GE(index.num_slots(), 2 * n);
    EXPECT_EQ(index.num_slots() & (index.num_slots() - 1), 0) << n;
  }
}

// Differential test: the index against std::map after every operation, on tables filled to their
// limit (load 1/2) so that deletions shift long, wrapping probe runs.
TEST(BlockIndexTest, MatchesBruteForceUnderRandomChurn) {
  for (const int64_t capacity : {1, 5, 8, 33, 200}) {
    std::mt19937_64 rng(1234 + capacity);
    BlockIndex index(capacity);
    Keys keys{std::vector<BlockHash>(static_cast<size_t>(capacity))};
    std::map<BlockHash, BlockId> model;  // key -> block
    std::vector<bool> used(static_cast<size_t>(capacity), false);
    // A small key universe so inserts of present keys and finds of absent ones both happen.
    std::vector<BlockHash> universe;
    for (int i = 0; i < 3 * capacity + 4; ++i) universe.push_back({rng(), rng()});
    for (int step = 0; step < 4000; ++step) {
      const BlockHash key = universe[rng() % universe.size()];
      const int op = static_cast<int>(rng() % 3);
      if (op == 0) {
        BlockId free_block = kNullBlock;
        for (BlockId b = 0; b < capacity; ++b) {
          if (!used[static_cast<size_t>(b)]) free_block = b;
        }
        if (free_block == kNullBlock) continue;
        keys.of_block[static_cast<size_t>(free_block)] = key;
        const bool inserted = index.Insert(key, free_block, keys);
        EXPECT_EQ(inserted, !model.contains(key));
        if (inserted) {
          model[key] = free_block;
          used[static_cast<size_t>(free_block)] = true;
        }
      } else if (op == 1) {
        // An absent key is erased with a block that is not indexed at all.
        const auto it = model.find(key);
        const bool present = it != model.end();
        BlockId block = present ? it->second : kNullBlock;
        for (BlockId b = 0; !present && b < capacity; ++b) {
          if (!used[static_cast<size_t>(b)]) block = b;
        }
        if (block == kNullBlock) continue;
        EXPECT_EQ(index.Erase(key, block), present);
        if (present) {
          used[static_cast<size_t>(block)] = false;
          model.erase(it);
        }
      }
      ASSERT_EQ(index.size(), static_cast<int64_t>(model.size()));
      for (const BlockHash& k : universe) {
        const auto it = model.find(k);
        ASSERT_EQ(index.Find(k, keys), it == model.end() ? kNullBlock : it->second)
            << "capacity " << capacity << " step " << step;
      }
    }
    int64_t visited = 0;
    index.ForEach([&](BlockId b) {
      ++visited;
      EXPECT_TRUE(used[static_cast<size_t>(b)]);
    });
    EXPECT_EQ(visited, index.size());
    index.Clear();
    EXPECT_EQ(index.size(), 0);
    for (const BlockHash& k : universe) EXPECT_EQ(index.Find(k, keys), kNullBlock);
  }
}

}  // namespace
}  // namespace pagedkv
