// Copyright 2026 The pagedkv Authors.
#include "pagedkv/cache/block_hash.h"

#include <xxhash.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"

namespace pagedkv {
namespace {

// Little-endian byte writers, independent of the library's.
void Put64(std::vector<unsigned char>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}
void Put32(std::vector<unsigned char>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}
BlockHash RawXxh3(const std::vector<unsigned char>& bytes) {
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return BlockHash{h.low64, h.high64};
}

TEST(BlockHashTest, ValueSemanticsAndToString) {
  const BlockHash a{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  EXPECT_EQ(a.ToString(), "fedcba98765432100123456789abcdef");
  EXPECT_EQ(a, (BlockHash{0x0123456789abcdefULL, 0xfedcba9876543210ULL}));
  EXPECT_NE(a, (BlockHash{0x0123456789abcdefULL, 0}));
  EXPECT_LT((BlockHash{4, 1}), (BlockHash{5, 0}));  // lexicographic (low, high)
  EXPECT_LT((BlockHash{4, 1}), (BlockHash{4, 2}));
  EXPECT_EQ(BlockHash::FromU64(42), (BlockHash{42, 0}));
}

TEST(BlockHashTest, MixSpreadsSequentialIds) {
  // Sequential ids must not collide in the low 7 bits (absl's control byte) or the rest.
  absl::flat_hash_set<size_t> full;
  absl::flat_hash_set<size_t> low7_of_first_128;
  for (uint64_t i = 0; i < 4096; ++i) full.insert(BlockHashMix{}(BlockHash::FromU64(i)));
  for (uint64_t i = 0; i < 128; ++i) {
    low7_of_first_128.insert(BlockHashMix{}(BlockHash::FromU64(i)) & 127);
  }
  EXPECT_EQ(full.size(), 4096u);
  EXPECT_GT(low7_of_first_128.size(), 64u);  // a random function covers ~81 of 128 values
}

TEST(BlockHashTest, EmptyRootIsTheDocumentedConstant) {
  std::vector<unsigned char> bytes;
  for (char c : std::string("pagedkv-root-v1")) bytes.push_back(static_cast<unsigned char>(c));
  Put64(bytes, 0);
  Put64(bytes, 0);
  EXPECT_EQ(RootHash("", ""), RawXxh3(bytes));
  EXPECT_EQ(RootHash("", ""), kEmptyRootHash);
  EXPECT_EQ(kEmptyRootHash.ToString(), "09dfb966edc9237e9b8b3963b8aa7fac");
}

TEST(BlockHashTest, RootFollowsDocumentedLayout) {
  std::vector<unsigned char> bytes;
  for (char c : std::string("pagedkv-root-v1")) bytes.push_back(static_cast<unsigned char>(c));
  Put64(bytes, 5);
  for (char c : std::string("model")) bytes.push_back(static_cast<unsigned char>(c));
  Put64(bytes, 4);
  for (char c : std::string("salt")) bytes.push_back(static_cast<unsigned char>(c));
  EXPECT_EQ(RootHash("salt", "model"), RawXxh3(bytes));
}

TEST(BlockHashTest, RootSeparatesSaltsAndModels) {
  absl::flat_hash_set<BlockHash> roots = {
      RootHash("", ""),   RootHash("a", ""),  RootHash("", "a"),
      RootHash("ab", ""), RootHash("a", "b"), RootHash("", "ab"),
  };
  EXPECT_EQ(roots.size(), 6u);
  EXPECT_EQ(RootHash("a", "b"), RootHash("a", "b"));
}

TEST(BlockHashTest, HashBlockFollowsDocumentedLayout) {
  const BlockHash parent{0x1111, 0x2222};
  const std::vector<TokenId> tokens = {1, -2, 300000, 4};
  std::vector<unsigned char> bytes;
  Put64(bytes, parent.low);
  Put64(bytes, parent.high);
  for (TokenId t : tokens) Put32(bytes, static_cast<uint32_t>(t));
  EXPECT_EQ(HashBlock(DefaultBlockHasher(), parent, tokens), RawXxh3(bytes));

  const BlockHash mm[2] = {{7, 8}, {9, 10}};
  std::vector<unsigned char> with_extra = bytes;
  Put64(with_extra, 99);
  for (const BlockHash& h : mm) {
    Put64(with_extra, h.low);
    Put64(with_extra, h.high);
  }
  EXPECT_EQ(HashBlock(DefaultBlockHasher(), parent, tokens,
                      {.adapter_id = 99, .multimodal = std::span<const BlockHash>(mm)}),
            RawXxh3(with_extra));
}

TEST(BlockHashTest, EveryInputChangesTheHash) {
  const BlockHash parent = RootHash("", "m");
  const std::vector<TokenId> tokens = {1, 2, 3, 4};
  const std::vector<TokenId> other = {1, 2, 3, 5};
  const BlockHash mm[1] = {{1, 2}};
  const Xxh3BlockHasher hasher;
  absl::flat_hash_set<BlockHash> hashes = {
      HashBlock(hasher, parent, tokens),
      HashBlock(hasher, parent, other),
      HashBlock(hasher, RootHash("x", "m"), tokens),
      HashBlock(hasher, parent, tokens, {.adapter_id = 1}),
      HashBlock(hasher, parent, tokens, {.adapter_id = 2}),
      HashBlock(hasher, parent, tokens, {.multimodal = std::span<const BlockHash>(mm)}),
  };
  EXPECT_EQ(hashes.size(), 6u);
}

TEST(BlockHashTest, LargeBlocksUseTheHeapPathConsistently) {
  std::vector<TokenId> tokens(1000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<TokenId>(i * 7);
  std::vector<unsigned char> bytes;
  Put64(bytes, 3);
  Put64(bytes, 4);
  for (TokenId t : tokens) Put32(bytes, static_cast<uint32_t>(t));
  EXPECT_EQ(HashBlock(DefaultBlockHasher(), BlockHash{3, 4}, tokens), RawXxh3(bytes));
}

}  // namespace
}  // namespace pagedkv
