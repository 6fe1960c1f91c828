// Copyright 2026 The pagedkv Authors.
//
// TierBenchChain: a chain of blocks for the tier benchmarks (host, disk, Redis): 16 tokens and the
// same value per block, hashes {first + i, high}, as TierBlock and TierStoreItem lists.
#ifndef PAGEDKV_BENCH_CACHE_TIERS_TIER_BENCH_CHAIN_H_
#define PAGEDKV_BENCH_CACHE_TIERS_TIER_BENCH_CHAIN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "pagedkv/cache/block_hash.h"
#include "pagedkv/tiers/kv_tier.h"
#include "pagedkv/types.h"

namespace pagedkv::bench {

struct TierBenchChain {
  std::vector<TokenId> tokens = std::vector<TokenId>(16, 7);
  std::vector<std::byte> value;
  std::vector<TierStoreItem> items;
  std::vector<TierBlock> blocks;
  // `blocks` blocks of `value_bytes` bytes; block i's hash is {first + i, high}.
  TierBenchChain(int64_t blocks_in_chain, int64_t value_bytes, uint64_t first, uint64_t high = 0)
      : value(static_cast<size_t>(value_bytes)) {
    for (size_t i = 0; i < value.size(); ++i) value[i] = static_cast<std::byte>(i * 31);
    for (int64_t i = 0; i < blocks_in_chain; ++i) {
      blocks.push_back(
          {.hash = BlockHash{first + static_cast<uint64_t>(i), high}, .tokens = tokens});
      items.push_back({.block = blocks.back(), .value = value});
    }
  }
};

}  // namespace pagedkv::bench

#endif  // PAGEDKV_BENCH_CACHE_TIERS_TIER_BENCH_CHAIN_H_
