// Copyright 2026 The pagedkv Authors.
//
// DiskTierOptions::read_threads: LoadPrefix reads batches of values at once, on helper threads,
// and answers exactly as one thread reading one value at a time would.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/tiers/disk_tier.h"
#include "tests/cache/tiers/disk_tier_test_util.h"

namespace pagedkv::testing_disk {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::vector<Block> Range(uint64_t first, uint64_t end) {
  std::vector<Block> out;
  for (uint64_t id = first; id < end; ++id) out.push_back(MakeBlock(id));
  return out;
}

class DiskTierReadAheadTest : public ::testing::TestWithParam<int32_t> {
 protected:
  std::unique_ptr<DiskTier> Open(int64_t capacity_blocks) {
    DiskTierOptions o = Options(dir_.path(), capacity_blocks);
    o.read_threads = GetParam();
    absl::StatusOr<std::unique_ptr<DiskTier>> tier = DiskTier::Create(o);
    EXPECT_TRUE(tier.ok()) << tier.status();
    return tier.ok() ? std::move(*tier) : nullptr;
  }
  TempDir dir_;
};

// A long chain loads whole, every value its block's own (Load checks the bytes), and counts one
// query and one hit per block.
TEST_P(DiskTierReadAheadTest, LoadsALongChainWhole) {
  std::unique_ptr<DiskTier> tier = Open(100);
  const std::vector<Block> chain = Range(0, 70);
  ASSERT_TRUE(StoreBlocks(*tier, chain).ok());
  tier->Flush();
  EXPECT_EQ(Load(*tier, chain), 70);
  EXPECT_EQ(Load(*tier, chain), 70);
  const TierStats s = tier->stats();
  EXPECT_EQ(s.queried_blocks, 140);
  EXPECT_EQ(s.hit_blocks, 140);
  EXPECT_EQ(s.loaded_bytes, 140 * kValueBytes);
}

// Values read ahead of a miss are neither counted nor settled: a damaged file after the miss
// stays until a lookup reaches it.
TEST_P(DiskTierReadAheadTest, StopsAtTheFirstMissAndSettlesNothingBeyondIt) {
  std::unique_ptr<DiskTier> tier = Open(100);
  const std::vector<Block> chain = Range(0, 40);
  ASSERT_TRUE(StoreBlocks(*tier, chain).ok());
  tier->Flush();
  fs::remove(tier->PathOf(chain[7].hash));
  {
    std::fstream f(tier->PathOf(chain[9].hash), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(FileBytes() - 3);
    f.put('\x55');  // caught by the checksum
  }
  EXPECT_EQ(Load(*tier, chain), 7);
  tier->Flush();
  EXPECT_EQ(tier->stats().queried_blocks, 8);  // 0..6 hit, 7 missing
  EXPECT_EQ(tier->disk_stats().vanished, 1);
  EXPECT_EQ(tier->disk_stats().corrupt_values, 0);
  EXPECT_TRUE(fs::exists(tier->PathOf(chain[9].hash)));
  const std::vector<Block> from_8(chain.begin() + 8, chain.end());
  EXPECT_EQ(Load(*tier, from_8), 1);  // 8, then 9 is bad
  tier->Flush();
  EXPECT_EQ(tier->disk_stats().corrupt_values, 1);
  EXPECT_FALSE(fs::exists(tier->PathOf(chain[9].hash)));
  EXPECT_EQ(tier->stats().hit_blocks, 8);
}

// A sink that stops the walk (or fails) ends it there, whatever was read ahead.
TEST_P(DiskTierReadAheadTest, TheSinkEndsTheWalk) {
  std::unique_ptr<DiskTier> tier = Open(100);
  const std::vector<Block> chain = Range(0, 30);
  ASSERT_TRUE(StoreBlocks(*tier, chain).ok());
  tier->Flush();
  std::vector<TierBlock> query;
  for (const Block& b : chain) query.push_back(b.tier());
  std::vector<int64_t> seen;
  absl::StatusOr<int64_t> n = tier->LoadPrefix(query, [&](int64_t i, std::span<const std::byte>) {
    seen.push_back(i);
    return i < 11;
  });
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 11);
  EXPECT_EQ(seen.size(), 12u);
  EXPECT_EQ(tier->stats().hit_blocks, 11);
  EXPECT_EQ(tier->stats().queried_blocks, 12);
  n = tier->LoadPrefix(query, [&](int64_t i, std::span<const std::byte>) -> absl::StatusOr<bool> {
    if (i == 5) return absl::InternalError("device copy failed");
    return true;
  });
  EXPECT_THAT(n.status().message(), HasSubstr("device copy failed"));
  EXPECT_EQ(tier->stats().hit_blocks, 16);
}

// Values still queued for the writer (not yet in files) come from the queue, batched as well.
TEST_P(DiskTierReadAheadTest, QueuedValuesAndFilesMix) {
  std::unique_ptr<DiskTier> tier = Open(100);
  ASSERT_TRUE(StoreBlocks(*tier, Range(0, 20)).ok());
  tier->Flush();
  ASSERT_TRUE(StoreBlocks(*tier, Range(20, 40)).ok());  // maybe queued, maybe written
  EXPECT_EQ(Load(*tier, Range(0, 40)), 40);
  tier->Flush();
  EXPECT_EQ(tier->stats().faults, 0);
}

INSTANTIATE_TEST_SUITE_P(ReadThreads, DiskTierReadAheadTest, ::testing::Values(1, 2, 3, 8));

TEST(DiskTierReadThreadsTest, OutOfRangeIsRefused) {
  TempDir dir;
  for (int32_t bad : {0, -1, kMaxDiskReadThreads + 1}) {
    DiskTierOptions o = Options(dir.path(), 8);
    o.read_threads = bad;
    EXPECT_THAT(DiskTier::Create(o).status().message(), HasSubstr("read_threads")) << bad;
  }
}

}  // namespace
}  // namespace pagedkv::testing_disk
