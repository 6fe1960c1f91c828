// Copyright 2026 The pagedkv Authors.
//
// TierChain over a bare pool: what a pool of bare keys (PoolBlocks::kKeys, cache-mode replay's)
// changes against one of token chains, and that copies of shifted chunks never reach a tier.
// The walk's rules against the engine and replay are tested in
// tests/engine/tools/replay/cache_mode/cache_replay_tiers_test.cc.
#include "cache/tiers/tier_chain.h"

#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/cache_request.h"
#include "pagedkv/tiers/host_tier.h"

namespace pagedkv {
namespace {

constexpr int32_t kBlockSize = 2;

class NoBytesIo final : public BlockValueIo {
 public:
  int64_t value_bytes() const override { return 0; }
  absl::Status Read(BlockId, std::span<std::byte>) override { return absl::OkStatus(); }
  absl::Status Write(BlockId, std::span<const std::byte>) override { return absl::OkStatus(); }
};

std::unique_ptr<HostTier> Host(TierStoreRule rule = TierStoreRule::kWriteThrough) {
  return HostTier::Create({.capacity_blocks = 64, .store = {.rule = rule}, .name = "host"}).value();
}

// A request of four full blocks and one token more (so every full block may be onboarded).
CacheRequest FourBlocks() {
  const std::vector<TokenId> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  return CacheRequest::Create({.block_size = kBlockSize}, prompt).value();
}

// Caches request block i in a newly allocated pool block, left pinned.
BlockId CacheBlock(BlockPool& pool, const CacheRequest& r, int64_t i, BlockInsert extra = {}) {
  const BlockId b = pool.Allocate().value();
  extra.block = b;
  extra.hash = r.block_hashes()[i];
  extra.parent_hash = r.ParentHashOf(i);
  EXPECT_TRUE(pool.Insert(extra).value());
  return b;
}

// Blocks 0 and 1 cached in the pool (unlinked, without tokens, as replay caches them), blocks 2
// and 3 in the host tier (stored without tokens, as a chain over such a pool stores them).
struct KeysSetup {
  std::unique_ptr<BlockPool> pool =
      BlockPool::Create({.num_blocks = 8, .block_size = kBlockSize, .store_tokens = false}).value();
  CacheRequest request = FourBlocks();
  std::vector<std::unique_ptr<KvTier>> tiers;

  KeysSetup() {
    for (int64_t i : {0, 1}) EXPECT_TRUE(pool->Unpin(CacheBlock(*pool, request, i)).ok());
    std::unique_ptr<HostTier> host = Host();
    for (int64_t i : {2, 3}) {
      const TierStoreItem item{.block = {.hash = request.block_hashes()[i]}};
      EXPECT_TRUE(host->Store({&item, 1}).ok());
    }
    tiers.push_back(std::move(host));
  }

  // The request onboarded by a chain over this pool and these tiers (its pins released after).
  TierHits Onboard(TierChain::PoolBlocks blocks) {
    NoBytesIo io;
    TierChain chain(std::move(tiers), &io, pool.get(), blocks);
    const TierHits hits = chain.Onboard(request).value();
    EXPECT_TRUE(chain.ReleasePins().ok());
    return hits;
  }
};

TEST(TierChainTest, APoolOfKeysChecksParentHashesAndLoadsBlocksStoredWithoutTokens) {
  KeysSetup s;
  const TierHits hits = s.Onboard(TierChain::PoolBlocks::kKeys);
  EXPECT_EQ(hits.device_blocks, 2);
  EXPECT_EQ(hits.host_blocks, 2);
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_NE(s.pool->FindCached(s.request.block_hashes()[i]), kNullBlock) << "block " << i;
  }
}

TEST(TierChainTest, TokenChainsWantLinksAndTokens) {
  KeysSetup s;
  const TierHits hits = s.Onboard(TierChain::PoolBlocks::kTokenChains);
  // Block 1 is not linked to block 0, so the device run stops after block 0; block 1 is cached,
  // so nothing is loaded in its place.
  EXPECT_EQ(hits.device_blocks, 1);
  EXPECT_EQ(hits.host_blocks, 0);
}

TEST(TierChainTest, ChunkCopiesNeverReachATier) {
  for (TierStoreRule rule : {TierStoreRule::kWriteThrough, TierStoreRule::kWriteBack}) {
    SCOPED_TRACE(TierStoreRuleName(rule));
    auto pool = BlockPool::Create({.num_blocks = 2, .block_size = kBlockSize}).value();
    std::vector<std::unique_ptr<KvTier>> tiers;
    tiers.push_back(Host(rule));
    const KvTier* host = tiers[0].get();
    NoBytesIo io;
    TierChain chain(std::move(tiers), &io, pool.get());
    const CacheRequest r = FourBlocks();
    const BlockId prefix = CacheBlock(*pool, r, 0);
    const BlockId chunk = CacheBlock(*pool, r, 2, {.domain = BlockDomain::kChunk});
    ASSERT_TRUE(chain.FlushWriteThrough().ok());
    ASSERT_TRUE(pool->Unpin(std::vector<BlockId>{chunk, prefix}).ok());
    // Two more blocks evict both (write-back stores what is evicted).
    std::vector<BlockId> taken;
    ASSERT_TRUE(pool->Allocate(2, &taken).ok());
    ASSERT_TRUE(chain.FlushWriteThrough().ok());
    EXPECT_EQ(host->stats().stored_blocks, 1);
    EXPECT_TRUE(static_cast<const HostTier*>(host)->Contains(r.block_hashes()[0]));
    EXPECT_FALSE(static_cast<const HostTier*>(host)->Contains(r.block_hashes()[2]));
  }
}

}  // namespace
}  // namespace pagedkv
