// Copyright 2026 The pagedkv Authors.
//
// A randomised differential test of the disk tier against an in-memory model of it (an LRU list
// of block ids with the same capacity): stores, prefix lookups, flushes, files
// removed behind the tier's back, and restarts (the test stamps file times in the model's order
// first, so the rebuilt order is exact).
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <list>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "pagedkv/tiers/disk_tier.h"
#include "tests/cache/tiers/disk_tier_test_util.h"

namespace pagedkv::testing_disk {
namespace {

// The model: ids from least to most recently used. A phantom is an id the tier still indexes
// but whose file was removed behind its back: it holds its place until a lookup finds it gone.
class LruModel {
 public:
  explicit LruModel(size_t capacity) : capacity_(capacity) {}
  // Stores `id` unless held (a phantom is held too: the tier skips it).
  void Store(uint64_t id) {
    if (Find(id) != ids_.end()) return;
    ids_.push_back({id, false});
    if (ids_.size() > capacity_) ids_.pop_front();
  }
  // The blocks of `chain` a lookup returns, updating recency; a phantom ends the walk and goes.
  int64_t Lookup(const std::vector<Block>& chain) {
    int64_t hits = 0;
    for (const Block& b : chain) {
      auto it = Find(b.hash.low);
      if (it == ids_.end()) break;
      const bool phantom = it->phantom;
      ids_.erase(it);
      if (phantom) break;
      ids_.push_back({b.hash.low, false});
      ++hits;
    }
    return hits;
  }
  void RemoveFile(uint64_t id) {
    auto it = Find(id);
    if (it != ids_.end()) it->phantom = true;
  }
  // After a restart the tier indexes the files only.
  void Restart() {
    std::erase_if(ids_, [](const Entry& e) { return e.phantom; });
  }
  // Ids with files, least recent first.
  std::vector<uint64_t> Files() const {
    std::vector<uint64_t> out;
    for (const Entry& e : ids_) {
      if (!e.phantom) out.push_back(e.id);
    }
    return out;
  }
  size_t size() const { return ids_.size(); }

 private:
  struct Entry {
    uint64_t id;
    bool phantom;
  };
  std::list<Entry>::iterator Find(uint64_t id) {
    return std::find_if(ids_.begin(), ids_.end(), [id](const Entry& e) { return e.id == id; });
  }
  size_t capacity_;
  std::list<Entry> ids_;
};

// Gives the files distinct modification times in the model's recency order, so the restarted
// tier rebuilds exactly that order (real stores may share a timestamp tick).
void StampRecency(const DiskTier& tier, const LruModel& model) {
  int64_t second = 1'000'000;
  for (uint64_t id : model.Files()) {
    const struct timespec times[2] = {{second, 0}, {second, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, tier.PathOf(MakeBlock(id).hash).c_str(), times, 0), 0);
    ++second;
  }
}

std::vector<Block> RandomChain(std::mt19937_64& rng, uint64_t num_ids, uint64_t max_len) {
  const uint64_t first = rng() % num_ids;
  const uint64_t end = std::min(num_ids, first + 1 + rng() % max_len);
  std::vector<Block> chain;
  for (uint64_t id = first; id < end; ++id) chain.push_back(MakeBlock(id));
  return chain;
}

TEST(DiskTierRandomTest, MatchesAnLruModel) {
  constexpr int kCapacity = 12;
  constexpr uint64_t kIds = 40;
  TempDir dir;
  std::mt19937_64 rng(20261204);
  std::unique_ptr<DiskTier> tier = DiskTier::Create(Options(dir.path(), kCapacity)).value();
  LruModel model(kCapacity);
  int64_t hits = 0, evictions = 0;
  for (int step = 0; step < 3000; ++step) {
    const int op = static_cast<int>(rng() % 100);
    if (op < 45) {
      for (const Block& b : RandomChain(rng, kIds, 3)) {
        ASSERT_TRUE(StoreBlocks(*tier, {b}).ok());
        model.Store(b.hash.low);
      }
    } else if (op < 90) {
      const std::vector<Block> chain = RandomChain(rng, kIds, 4);
      const int64_t got = Load(*tier, chain);
      ASSERT_EQ(got, model.Lookup(chain)) << "step " << step;
      hits += got;
    } else if (op < 95) {
      tier->Flush();
      ASSERT_EQ(tier->stats().resident_blocks, static_cast<int64_t>(model.size()));
      ASSERT_EQ(CountFiles(*tier), static_cast<int64_t>(model.Files().size())) << "step " << step;
    } else if (op < 98) {  // a file removed behind the tier's back (another process evicted it)
      tier->Flush();
      const uint64_t id = rng() % kIds;
      std::filesystem::remove(tier->PathOf(MakeBlock(id).hash));
      model.RemoveFile(id);
    } else {
      tier->Flush();
      StampRecency(*tier, model);
      evictions += tier->stats().evictions;
      tier.reset();
      tier = DiskTier::Create(Options(dir.path(), kCapacity)).value();
      tier->Flush();
      model.Restart();
    }
  }
  tier->Flush();
  EXPECT_EQ(tier->stats().faults, 0);
  EXPECT_GT(evictions + tier->stats().evictions, 100);  // the test exercised what it checks
  EXPECT_GT(hits, 500);
}

}  // namespace
}  // namespace pagedkv::testing_disk
