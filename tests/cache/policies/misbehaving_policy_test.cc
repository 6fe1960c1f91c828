// Copyright 2026 The pagedkv Authors.
//
// KvCacheManager over an eviction policy that, when armed, picks a wrong victim after a random
// number of good picks: a block that is used, free, already picked, or outside the pool. Random
// admissions (with prefix hits), growth and frees run against it; every armed AllocateSlots that
// must evict is refused with Internal naming the policy, and a brute-force snapshot of the pool
// and the manager (every block's reference count and hash, the free and evictable counts, every
// request's table and tokens, the counters) is unchanged after it. The same call then succeeds
// unarmed, which shows the policy got its good picks back.
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/cache/eviction_policy.h"
#include "pagedkv/cache/kv_cache_manager.h"

namespace pagedkv {
namespace {

constexpr int32_t kBlocks = 24;
constexpr int32_t kBlockSize = 4;

// Least recently released first (a plain vector), with armed faults.
class FaultyPolicy final : public EvictionPolicy {
 public:
  explicit FaultyPolicy(uint32_t seed) : rng_(seed) {}
  std::string_view Name() const override { return "faulty"; }
  void Init(int32_t num_blocks) override {
    num_blocks_ = num_blocks;
    order_.clear();
  }
  void OnInsert(BlockId, const BlockHash&) override {}
  void OnAccess(BlockId b, const BlockHash&) override { Erase(b); }
  void OnRelease(BlockId b, const BlockHash&) override { order_.push_back(b); }
  void OnRemove(BlockId b, const BlockHash&) override { Erase(b); }
  void Clear() override { order_.clear(); }
  BlockId PickVictim() override {
    if (good_picks_left_ == 0 || order_.empty()) return WrongVictim();
    if (good_picks_left_ > 0) --good_picks_left_;
    last_ = order_.front();
    order_.erase(order_.begin());
    return last_;
  }

  // The next PickVictim calls: `good` correct picks, then one wrong one.
  void ArmAfter(int32_t good) { good_picks_left_ = good; }
  void Disarm() { good_picks_left_ = -1; }
  int64_t num_faults() const { return num_faults_; }

 private:
  void Erase(BlockId b) {
    order_.erase(std::remove(order_.begin(), order_.end(), b), order_.end());
  }
  bool IsCandidate(BlockId b) const {
    return std::find(order_.begin(), order_.end(), b) != order_.end();
  }
  BlockId WrongVictim() {
    ++num_faults_;
    good_picks_left_ = -1;
    switch (std::uniform_int_distribution<int>(0, 3)(rng_)) {
      case 0:
        return num_blocks_ + std::uniform_int_distribution<int>(0, 5)(rng_);
      case 1:
        return -1 - std::uniform_int_distribution<int>(0, 5)(rng_);
      case 2:
        // Picked already (in this call, or evicted and not released since).
        if (last_ != kNullBlock && !IsCandidate(last_)) return last_;
        [[fallthrough]];
      default: {
        // Any block that is not a candidate: used, free, or cached and pinned.
        std::vector<BlockId> others;
        for (BlockId b = 0; b < num_blocks_; ++b) {
          if (!IsCandidate(b)) others.push_back(b);
        }
        if (others.empty()) return num_blocks_;
        return others[std::uniform_int_distribution<size_t>(0, others.size() - 1)(rng_)];
      }
    }
  }

  std::mt19937 rng_;
  int32_t num_blocks_ = 0;
  std::vector<BlockId> order_;    // candidates, least recently released first
  int32_t good_picks_left_ = -1;  // < 0: disarmed
  BlockId last_ = kNullBlock;
  int64_t num_faults_ = 0;
};

// Everything a caller can observe of the pool and the manager.
struct Snapshot {
  std::vector<int32_t> refs;
  std::vector<std::optional<BlockHash>> hashes;
  int32_t num_free = 0, num_evictable = 0, num_requests = 0;
  std::map<RequestId, std::vector<BlockId>> tables;
  std::map<RequestId, int64_t> tokens;
  int64_t evictions = 0, stored = 0, hit_tokens = 0, lookups = 0;
  bool operator==(const Snapshot&) const = default;
};

Snapshot Take(const KvCacheManager& manager, const std::vector<RequestId>& ids) {
  Snapshot s;
  const BlockPool& pool = manager.pool();
  for (BlockId b = 0; b < pool.num_blocks(); ++b) {
    s.refs.push_back(pool.RefCount(b));
    s.hashes.push_back(pool.CachedHash(b));
  }
  s.num_free = pool.NumFreeBlocks();
  s.num_evictable = pool.NumEvictableBlocks();
  s.num_requests = manager.NumRequests();
  for (RequestId id : ids) {
    if (!manager.HasRequest(id)) continue;
    auto table = manager.GetBlockTable(id);
    s.tables[id].assign(table->begin(), table->end());
    s.tokens[id] = *manager.NumAllocatedTokens(id);
  }
  const CacheStats stats = manager.stats();
  s.evictions = stats.evictions;
  s.stored = stats.stored_blocks;
  s.hit_tokens = stats.hit_tokens;
  s.lookups = stats.lookups;
  return s;
}

struct Live {
  CacheRequest request;
  int64_t allocated = 0;
};

class MisbehavingPolicyTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(MisbehavingPolicyTest, WrongVictimsAreRefusedAndChangeNothing) {
  const uint32_t seed = GetParam();
  std::mt19937 rng(seed);
  auto owned = std::make_unique<FaultyPolicy>(seed + 100);
  FaultyPolicy* policy = owned.get();
  auto manager =
      KvCacheManager::Create({.num_blocks = kBlocks, .block_size = kBlockSize}, std::move(owned))
          .value();
  // Three documents, so prompts share prefixes and cached blocks get hit and evicted.
  std::vector<std::vector<TokenId>> docs(3);
  for (auto& doc : docs) {
    for (int i = 0; i < 24; ++i) doc.push_back(std::uniform_int_distribution<TokenId>(0, 99)(rng));
  }
  std::map<RequestId, Live> live;
  std::vector<RequestId> ids;
  RequestId next_id = 1;
  int64_t refused = 0;

  // Runs AllocateSlots, armed with probability 1/2; checks a refusal changed nothing and that the
  // same call then succeeds unarmed. Returns the final status.
  auto allocate = [&](const CacheRequest& request, int64_t n,
                      const ComputedBlocks& computed) -> absl::Status {
    const bool armed = rng() % 2 == 0;
    if (armed) policy->ArmAfter(std::uniform_int_distribution<int32_t>(0, 3)(rng));
    const Snapshot before = Take(*manager, ids);
    absl::Status status = manager->AllocateSlots(request, n, computed);
    policy->Disarm();
    if (status.code() == absl::StatusCode::kInternal) {
      EXPECT_TRUE(armed) << status;
      EXPECT_NE(status.message().find("eviction policy \"faulty\""), std::string::npos) << status;
      EXPECT_TRUE(Take(*manager, ids) == before) << "a refused AllocateSlots changed state";
      EXPECT_TRUE(manager->ValidateInvariants().ok());
      ++refused;
      status = manager->AllocateSlots(request, n, computed);
      EXPECT_TRUE(status.ok()) << "unarmed retry: " << status;
    }
    return status;
  };

  for (int step = 0; step < 3000 && !HasFailure(); ++step) {
    const int op = std::uniform_int_distribution<int>(0, 9)(rng);
    if (op < 4 || live.empty()) {  // admit
      const auto& doc = docs[rng() % docs.size()];
      const auto len = std::uniform_int_distribution<size_t>(5, doc.size())(rng);
      const std::vector<TokenId> prompt(doc.begin(), doc.begin() + static_cast<ptrdiff_t>(len));
      CacheRequest request = manager->NewRequest(next_id, prompt).value();
      const ComputedBlocks computed = manager->GetComputedBlocks(request).value();
      const int64_t n = static_cast<int64_t>(len) - computed.num_computed_tokens;
      const int64_t first = std::uniform_int_distribution<int64_t>(1, n)(rng);
      absl::Status status = allocate(request, first, computed);
      if (status.ok()) {
        ids.push_back(next_id);
        live.emplace(next_id, Live{std::move(request), computed.num_computed_tokens + first});
      } else {
        EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
      }
      ++next_id;
    } else if (op < 7) {  // grow: the rest of the prompt, or one decode token
      auto it = std::next(live.begin(), static_cast<ptrdiff_t>(rng() % live.size()));
      Live& l = it->second;
      if (l.allocated == l.request.num_tokens()) {
        ASSERT_TRUE(l.request.AppendToken(static_cast<TokenId>(rng() % 100)).ok());
      }
      const int64_t n = l.request.num_tokens() - l.allocated;
      absl::Status status = allocate(l.request, n, {});
      if (status.ok()) {
        l.allocated += n;
      } else {
        EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
      }
    } else {  // free
      auto it = std::next(live.begin(), static_cast<ptrdiff_t>(rng() % live.size()));
      ASSERT_TRUE(manager->Free(it->first).ok());
      live.erase(it);
    }
    ASSERT_TRUE(manager->ValidateInvariants().ok()) << "step " << step;
  }
  // The faults must actually have been exercised for the test to mean anything.
  EXPECT_GT(refused, 20) << "faults injected: " << policy->num_faults();
  for (const auto& [id, l] : live) ASSERT_TRUE(manager->Free(id).ok());
  EXPECT_EQ(manager->pool().NumUsedBlocks(), 0);
}

INSTANTIATE_TEST_SUITE_P(Seeds, MisbehavingPolicyTest, ::testing::Values(1u, 2u, 3u));

}  // namespace
}  // namespace pagedkv
