// Copyright 2026 The pagedkv Authors.
//
// Helpers for the disk tier's tests: a fresh temporary folder per test, blocks with known values,
// and a load that checks every value it gets.
#ifndef PAGEDKV_TESTS_CACHE_TIERS_DISK_TIER_TEST_UTIL_H_
#define PAGEDKV_TESTS_CACHE_TIERS_DISK_TIER_TEST_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/tiers/disk_tier.h"

namespace pagedkv::testing_disk {

inline constexpr int32_t kBlockSize = 4;
inline constexpr int64_t kValueBytes = 1000;

inline TierValueFormat Format() {
  return {.dtype = 1,
          .layout = 1,
          .block_size = kBlockSize,
          .num_layers = 2,
          .value_bytes = kValueBytes,
          .layout_digest = 42};
}

// Bytes of one file for Format() (header 64 + tokens + value).
inline int64_t FileBytes() { return 64 + 4 * kBlockSize + kValueBytes; }

struct Block {
  BlockHash hash;
  std::vector<TokenId> tokens;
  std::vector<std::byte> value;
  TierBlock tier() const { return {.hash = hash, .tokens = tokens}; }
  TierStoreItem item() const { return {.block = tier(), .value = value}; }
};

// Block `id`: its hash, tokens and value all derive from id.
inline Block MakeBlock(uint64_t id) {
  Block b{.hash = BlockHash{.low = id, .high = id * 0x9E3779B97F4A7C15ULL}};  // low: the id
  for (int32_t t = 0; t < kBlockSize; ++t) b.tokens.push_back(static_cast<TokenId>(id * 10 + t));
  for (int64_t i = 0; i < kValueBytes; ++i) {
    b.value.push_back(static_cast<std::byte>((id * 31 + static_cast<uint64_t>(i)) & 0xFF));
  }
  return b;
}

// A temporary folder removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "pagedkv-disk-XXXXXX");
    path_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : "";
    EXPECT_FALSE(path_.empty());
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline DiskTierOptions Options(const std::string& dir, int64_t capacity_blocks,
                               std::string fingerprint = "model-a") {
  return {.directory = dir,
          .capacity_bytes = capacity_blocks * FileBytes(),
          .model_fingerprint = std::move(fingerprint),
          .format = Format(),
          .report = [](std::string_view) {}};
}

// Loads `blocks` in order and returns how many came back; every value must be the block's own.
inline int64_t Load(DiskTier& tier, const std::vector<Block>& blocks) {
  std::vector<TierBlock> query;
  for (const Block& b : blocks) query.push_back(b.tier());
  absl::StatusOr<int64_t> n = tier.LoadPrefix(query, [&](int64_t i, std::span<const std::byte> v) {
    const Block& want = blocks[static_cast<size_t>(i)];
    EXPECT_TRUE(std::equal(v.begin(), v.end(), want.value.begin(), want.value.end()))
        << "wrong value for block " << i;
    return true;
  });
  EXPECT_TRUE(n.ok()) << n.status();
  return n.value_or(-1);
}

inline absl::Status StoreBlocks(DiskTier& tier, const std::vector<Block>& blocks) {
  std::vector<TierStoreItem> items;
  for (const Block& b : blocks) items.push_back(b.item());
  return tier.Store(items);
}

// Value files under the tier's model folder.
inline int64_t CountFiles(const DiskTier& tier) {
  int64_t n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(tier.model_directory(), ec)) {
    if (e.is_regular_file() && e.path().extension() == ".kv") ++n;
  }
  return n;
}

}  // namespace pagedkv::testing_disk

#endif  // PAGEDKV_TESTS_CACHE_TIERS_DISK_TIER_TEST_UTIL_H_
