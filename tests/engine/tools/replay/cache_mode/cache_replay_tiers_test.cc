// Copyright 2026 The pagedkv Authors.
//
// Cache-mode replay's tiers (the engine's TierChain over the replay's pool of workload keys) and
// the host tier's store rule and threshold: against hand-derived hits, against a brute-force model
// of the rule, and against the engine's own path (TierChain over a KvCacheManager whose blocks are
// hashed from tokens, with HostTiers that hold real bytes).
#include <algorithm>
#include <cstring>
#include <list>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "cache/tiers/tier_chain.h"
#include "engine/tools/replay/cache_mode/cache_replay.h"
#include "engine/tools/replay/workload/block_expansion.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/tiers/host_tier.h"

namespace pagedkv::replay {
namespace {

using ::testing::HasSubstr;

constexpr int32_t kBlockSize = 4;
constexpr int32_t kVocab = 32000;

// Requests as lists of block contents: request r's block i holds the kBlockSize tokens of
// content prompts[r][i], so block i is the same block in two requests exactly when their first
// i + 1 contents agree.
using Prompts = std::vector<std::vector<uint64_t>>;

// The workload of `prompts`; with `extra_token`, each prompt ends with one more token of its
// own (never a full block; the engine then looks up every full block, see EngineTierHits).
Workload MakeWorkload(const Prompts& prompts, bool extra_token) {
  Workload w{.name = "hand-built"};
  for (size_t r = 0; r < prompts.size(); ++r) {
    ReplayRequest request{.arrival_ms = static_cast<double>(r), .output_length = 1};
    for (uint64_t c : prompts[r])
      request.segments.push_back({.content_id = c, .length = kBlockSize});
    if (extra_token) request.segments.push_back({.content_id = 1'000'000 + r, .length = 1});
    for (const Segment& s : request.segments) request.input_length += s.length;
    w.requests.push_back(std::move(request));
  }
  return w;
}

struct TierHitCounts {
  int64_t device = 0, host = 0, remote = 0, disk = 0;
  bool operator==(const TierHitCounts&) const = default;
};

void PrintTo(const TierHitCounts& c, std::ostream* os) {
  *os << "{device " << c.device << ", host " << c.host << ", disk " << c.disk << ", remote "
      << c.remote << "}";
}

struct TierSetup {
  int64_t pool_blocks = 4;
  int64_t host_blocks = 0;
  int64_t remote_blocks = 0;
  int64_t disk_blocks = 0;
  std::string tier_policy = "lru";
  TierStoreRule rule = TierStoreRule::kWriteThrough;
  int32_t threshold = 0;
};

// Cache-mode replay of `prompts` under engine rules. As in EngineTierHits, each prompt has one
// extra token (so every full block may hit) and the pool one more block (the one it holds).
TierHitCounts SimulatedTierHits(const Prompts& prompts, const TierSetup& s) {
  absl::StatusOr<ExpandedWorkload> e =
      ExpandWorkload(MakeWorkload(prompts, /*extra_token=*/true), {.block_size = kBlockSize});
  EXPECT_TRUE(e.ok()) << e.status();
  absl::StatusOr<CacheReplayResult> r =
      RunCacheReplay(*e, {.capacity_blocks = s.pool_blocks + 1,
                          .host_capacity_blocks = s.host_blocks,
                          .remote_capacity_blocks = s.remote_blocks,
                          .disk_capacity_blocks = s.disk_blocks,
                          .tier_policy = s.tier_policy,
                          .host_store = s.rule,
                          .host_store_threshold = s.threshold});
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  return {r->hit_blocks, r->host_hit_blocks, r->remote_hit_blocks, r->disk_hit_blocks};
}

// The rule written out on its own: an LRU pool (released blocks, tail first, are the eviction
// order), an unbounded host tier, pool prefix hits counted per block.
// REQUIRES: every prompt has at most pool_blocks blocks.
TierHitCounts ReferenceHostHits(const Prompts& prompts, int64_t pool_blocks, TierStoreRule rule,
                                int32_t k) {
  using Key = std::vector<uint64_t>;  // a block: the contents of its prefix
  std::list<Key> lru;                 // evictable pool blocks, least recently released first
  std::set<Key> pool, host;
  std::map<Key, int32_t> hits;
  std::vector<Key> evicted;
  TierHitCounts out;
  const bool write_through = rule == TierStoreRule::kWriteThrough;
  auto flush = [&] {
    for (const Key& b : evicted) host.insert(b);
    evicted.clear();
  };
  auto place = [&](const Key& b) {  // a block enters the pool (evicting the LRU one when full)
    if (static_cast<int64_t>(pool.size()) == pool_blocks) {
      const Key victim = lru.front();
      lru.pop_front();
      pool.erase(victim);
      if (!write_through && hits[victim] >= k) evicted.push_back(victim);
    }
    pool.insert(b);
  };
  for (const auto& prompt : prompts) {
    bool prefix = true;
    std::vector<Key> blocks;
    for (size_t i = 0; i < prompt.size(); ++i) {
      Key b(prompt.begin(), prompt.begin() + static_cast<ptrdiff_t>(i) + 1);
      blocks.push_back(b);
      if (prefix && pool.contains(b)) {
        lru.remove(b);  // pinned
        ++out.device;
        if (++hits[b] == k && write_through && k > 0) host.insert(b);
      } else if (prefix && host.contains(b)) {
        ++out.host;
        place(b);
      } else {
        if (prefix) flush();
        prefix = false;
        place(b);
        if (write_through && k == 0) host.insert(b);
      }
    }
    flush();
    for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) lru.push_back(*it);
  }
  return out;
}

// Two conversations A and B of two blocks each through a pool of two blocks, so each evicts
// the other: A A B A A B A.
const Prompts kAlternating = {{1, 2}, {1, 2}, {3, 4}, {1, 2}, {1, 2}, {3, 4}, {1, 2}};

// The threshold decides which blocks the host tier holds. Write-through, k = 0: every block, so
// the second B (request 5) and every later A load from it: 6 host hits. k = 1: A is stored at its
// first reuse (request 1), B is never reused and never stored: A's two returns hit (4). k = 2: A is
// stored at its second pool hit (request 4), so only its last return hits (2). Write-back gives
// the same counts: blocks reach the host tier when evicted, if they had k hits by then.
TEST(CacheReplayTiersTest, StoreThresholdChoosesWhatTheHostTierHolds) {
  for (TierStoreRule rule : {TierStoreRule::kWriteThrough, TierStoreRule::kWriteBack}) {
    for (int32_t k : {0, 1, 2, 3}) {
      SCOPED_TRACE(testing::Message() << TierStoreRuleName(rule) << " k=" << k);
      const TierHitCounts got = SimulatedTierHits(
          kAlternating, {.pool_blocks = 2, .host_blocks = 100, .rule = rule, .threshold = k});
      const int64_t expected_host[] = {6, 4, 2, 0};
      EXPECT_EQ(got.host, expected_host[k]);
      EXPECT_EQ(got.device, 4);  // requests 1 and 4 hit both blocks in the pool
      EXPECT_EQ(got, ReferenceHostHits(kAlternating, 2, rule, k));
    }
  }
}

// Random prompts from a small tree of contents: the simulation matches the brute-force rule.
TEST(CacheReplayTiersTest, HostTierMatchesTheRuleOnRandomWorkloads) {
  for (uint32_t seed : {1u, 2u, 3u, 4u, 5u}) {
    std::mt19937 rng(seed);
    Prompts prompts;
    for (int r = 0; r < 300; ++r) {
      std::vector<uint64_t> p;
      const int len = 1 + static_cast<int>(rng() % 5);
      for (int i = 0; i < len; ++i) p.push_back(1 + rng() % 3);
      prompts.push_back(std::move(p));
    }
    for (TierStoreRule rule : {TierStoreRule::kWriteThrough, TierStoreRule::kWriteBack}) {
      for (int32_t k : {0, 1, 2, 4}) {
        SCOPED_TRACE(testing::Message()
                     << "seed " << seed << " " << TierStoreRuleName(rule) << " k=" << k);
        EXPECT_EQ(
            SimulatedTierHits(
                prompts, {.pool_blocks = 6, .host_blocks = 1000, .rule = rule, .threshold = k}),
            ReferenceHostHits(prompts, 6, rule, k));
      }
    }
  }
}

TEST(CacheReplayTiersTest, NegativeThresholdIsRefused) {
  absl::StatusOr<ExpandedWorkload> e =
      ExpandWorkload(MakeWorkload(kAlternating, false),
                     {.block_size = kBlockSize, .cache_partial_tail = true});  // no tail block
  ASSERT_TRUE(e.ok());
  absl::StatusOr<CacheReplayResult> r = RunCacheReplay(
      *e, {.capacity_blocks = 2, .host_capacity_blocks = 10, .host_store_threshold = -1});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("--host-store-threshold must be >= 0"));
}

// Block values that the engine's TierChain moves: 8 bytes per block, the block's first token and
// its index in the pool are irrelevant; what a tier hands back must be what was stored.
class ByteIo final : public BlockValueIo {
 public:
  explicit ByteIo(int64_t blocks) : bytes_(static_cast<size_t>(blocks) * kValueBytes) {}
  int64_t value_bytes() const override { return kValueBytes; }
  absl::Status Read(BlockId block, std::span<std::byte> out) override {
    std::memcpy(out.data(), &bytes_[static_cast<size_t>(block) * kValueBytes], kValueBytes);
    return absl::OkStatus();
  }
  absl::Status Write(BlockId block, std::span<const std::byte> value) override {
    std::memcpy(&bytes_[static_cast<size_t>(block) * kValueBytes], value.data(), kValueBytes);
    return absl::OkStatus();
  }
  // The "model" computes block `block` of chain hash `hash`: its value is the hash's low bytes.
  void Compute(BlockId block, const BlockHash& hash) {
    std::memcpy(&bytes_[static_cast<size_t>(block) * kValueBytes], &hash, kValueBytes);
  }
  bool Holds(BlockId block, const BlockHash& hash) const {
    return std::memcmp(&bytes_[static_cast<size_t>(block) * kValueBytes], &hash, kValueBytes) == 0;
  }
  static constexpr int64_t kValueBytes = 8;

 private:
  std::vector<std::byte> bytes_;
};

// The same prompts through the engine's path, one request at a time: TierChain::Onboard, the
// scheduler's GetComputedBlocks + AllocateSlots, ReleasePins, the model (every block's value),
// FlushWriteThrough, Free. Each prompt has one extra token so that the engine, which leaves one
// token to compute, looks up every full block as cache mode does; the pool has one block more
// for it. Checks that every block of every request ends with its own value.
TierHitCounts EngineTierHits(const Prompts& prompts, const TierSetup& s) {
  const Workload w = MakeWorkload(prompts, /*extra_token=*/true);
  absl::StatusOr<std::unique_ptr<KvCacheManager>> manager =
      KvCacheManager::Create({.num_blocks = static_cast<int32_t>(s.pool_blocks + 1),
                              .block_size = kBlockSize,
                              .vocab_size = kVocab});
  EXPECT_TRUE(manager.ok()) << manager.status();
  if (!manager.ok()) return {};
  ByteIo io((*manager)->num_blocks());
  std::vector<std::unique_ptr<KvTier>> tiers;
  // A disk tier is a HostTier named "disk" here: the chain orders and counts tiers by name.
  const std::pair<int64_t, const char*> wanted[] = {
      {s.host_blocks, "host"}, {s.disk_blocks, "disk"}, {s.remote_blocks, "remote"}};
  for (const auto& [capacity, name] : wanted) {
    if (capacity == 0) continue;
    HostTierOptions o{.capacity_blocks = capacity,
                      .value_bytes = ByteIo::kValueBytes,
                      .policy = s.tier_policy,
                      .name = name};
    if (std::string(name) == "host") o.store = {.rule = s.rule, .threshold = s.threshold};
    absl::StatusOr<std::unique_ptr<HostTier>> tier = HostTier::Create(std::move(o));
    EXPECT_TRUE(tier.ok()) << tier.status();
    tiers.push_back(*std::move(tier));
  }
  // As the engine attaches its tiers: through the manager's front door.
  absl::StatusOr<std::unique_ptr<TierChain>> attached =
      TierChain::Create(std::move(tiers), &io, manager->get());
  EXPECT_TRUE(attached.ok()) << attached.status();
  if (!attached.ok()) return {};
  TierChain& chain = **attached;
  TierHitCounts out;
  for (size_t r = 0; r < w.requests.size(); ++r) {
    const std::vector<TokenId> prompt = MaterializePrompt(w.requests[r], kVocab);
    absl::StatusOr<CacheRequest> request = (*manager)->NewRequest(r, prompt);
    EXPECT_TRUE(request.ok()) << request.status();
    absl::StatusOr<TierHits> hits = chain.Onboard(*request);
    EXPECT_TRUE(hits.ok()) << hits.status();
    absl::StatusOr<ComputedBlocks> computed = (*manager)->GetComputedBlocks(*request);
    EXPECT_TRUE(computed.ok()) << computed.status();
    EXPECT_TRUE((*manager)
                    ->AllocateSlots(*request, request->num_tokens() - computed->num_computed_tokens,
                                    *computed)
                    .ok());
    EXPECT_TRUE(chain.ReleasePins().ok());
    absl::StatusOr<std::span<const BlockId>> table = (*manager)->GetBlockTable(r);
    EXPECT_TRUE(table.ok());
    const auto hashes = request->block_hashes();
    const auto loaded = static_cast<size_t>(computed->blocks.size());
    for (size_t i = 0; i < hashes.size(); ++i) {
      if (i < loaded) {
        EXPECT_TRUE(io.Holds((*table)[i], hashes[i])) << "request " << r << " block " << i;
      } else {
        io.Compute((*table)[i], hashes[i]);
      }
    }
    EXPECT_TRUE(chain.FlushWriteThrough().ok());
    EXPECT_TRUE((*manager)->Free(r).ok());
    out.device += hits->device_blocks;
    out.host += hits->host_blocks;
    out.remote += hits->remote_blocks;
    out.disk += hits->disk_blocks;
  }
  return out;
}

// A disk tier between the host and the remote tier: with a host tier too small to keep A while B
// runs, A's returns load from the disk tier (every block of it is stored write-through), and the
// remote tier below it is never reached.
TEST(CacheReplayTiersTest, TheDiskTierSitsBetweenHostAndRemote) {
  const TierSetup s{.pool_blocks = 2, .host_blocks = 1, .remote_blocks = 100, .disk_blocks = 100};
  const TierHitCounts hits = SimulatedTierHits(kAlternating, s);
  EXPECT_EQ(hits, EngineTierHits(kAlternating, s));
  EXPECT_GT(hits.disk, 0);
  EXPECT_EQ(hits.remote, 0);
  TierSetup no_disk = s;
  no_disk.disk_blocks = 0;
  EXPECT_EQ(SimulatedTierHits(kAlternating, no_disk).remote, hits.disk);  // the same blocks
}

TEST(CacheReplayTiersTest, TierChainCreateNeedsAnIoAndAManager) {
  auto manager = KvCacheManager::Create({.num_blocks = 4, .block_size = kBlockSize}).value();
  ByteIo io(4);
  EXPECT_EQ(TierChain::Create({}, nullptr, manager.get()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TierChain::Create({}, &io, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(TierChain::Create({}, &io, manager.get()).ok());
}

TEST(CacheReplayTiersTest, EngineTierChainGivesTheHandDerivedHits) {
  for (TierStoreRule rule : {TierStoreRule::kWriteThrough, TierStoreRule::kWriteBack}) {
    for (int32_t k : {0, 1, 2}) {
      SCOPED_TRACE(testing::Message() << TierStoreRuleName(rule) << " k=" << k);
      const TierSetup s{.pool_blocks = 2, .host_blocks = 100, .rule = rule, .threshold = k};
      EXPECT_EQ(EngineTierHits(kAlternating, s), SimulatedTierHits(kAlternating, s));
    }
  }
}

// Differential: random prompts, small tiers that evict, both store rules, both tier policies
// and several thresholds; the simulated tiers and the engine's TierChain over real HostTiers
// count the same device, host, disk and remote hits.
TEST(CacheReplayTiersTest, SimulatedTiersAgreeWithTheEngineTierChain) {
  for (uint32_t seed : {11u, 12u, 13u}) {
    std::mt19937 rng(seed);
    Prompts prompts;
    for (int r = 0; r < 200; ++r) {
      std::vector<uint64_t> p;
      const int len = 1 + static_cast<int>(rng() % 6);
      for (int i = 0; i < len; ++i) p.push_back(1 + rng() % 3);
      prompts.push_back(std::move(p));
    }
    for (const char* policy : {"lru", "arc"}) {
      for (TierStoreRule rule : {TierStoreRule::kWriteThrough, TierStoreRule::kWriteBack}) {
        for (int32_t k : {0, 1, 3}) {
          for (const auto& [remote, disk] : {std::pair{0, 0}, {12, 0}, {0, 10}, {12, 10}}) {
            SCOPED_TRACE(testing::Message()
                         << "seed " << seed << " " << policy << " " << TierStoreRuleName(rule)
                         << " k=" << k << " remote " << remote << " disk " << disk);
            const TierSetup s{.pool_blocks = 6,
                              .host_blocks = 8,
                              .remote_blocks = remote,
                              .disk_blocks = disk,
                              .tier_policy = policy,
                              .rule = rule,
                              .threshold = k};
            const TierHitCounts sim = SimulatedTierHits(prompts, s);
            EXPECT_EQ(sim, EngineTierHits(prompts, s));
            EXPECT_GT(sim.device, 0);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace pagedkv::replay
