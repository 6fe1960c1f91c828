// Copyright 2026 The pagedkv Authors.
//
// Fuzz target: random operation sequences on a BlockPool (allocate, insert, pin, unpin, uncache,
// find), with ValidateInvariants after every step. Failed calls must change nothing that the
// invariants see, and no sequence may crash.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/eviction_policy.h"

namespace {

pagedkv::BlockHash HashOf(uint8_t n) { return pagedkv::BlockHash{n * 0x9e3779b97f4a7c15ull, n}; }

void Step(FuzzedDataProvider& in, pagedkv::BlockPool& pool, std::vector<pagedkv::BlockId>& held) {
  const int32_t block_size = pool.block_size();
  const auto block = [&] { return in.ConsumeIntegralInRange<pagedkv::BlockId>(-1, 17); };
  switch (in.ConsumeIntegralInRange(0, 7)) {
    case 0:
      if (auto b = pool.Allocate(); b.ok()) held.push_back(*b);
      break;
    case 1: {
      std::vector<pagedkv::BlockId> out;
      if (pool.Allocate(in.ConsumeIntegralInRange(-1, 20), &out).ok()) {
        held.insert(held.end(), out.begin(), out.end());
      }
      break;
    }
    case 2: {
      const std::vector<pagedkv::TokenId> tokens(in.ConsumeBool() ? block_size : 0,
                                                 in.ConsumeIntegral<uint8_t>());
      const int32_t cached = pool.NumCachedBlocks();
      const absl::StatusOr<bool> inserted =
          pool.Insert({.block = block(),
                       .hash = HashOf(in.ConsumeIntegral<uint8_t>()),
                       .parent_hash = HashOf(in.ConsumeIntegral<uint8_t>()),
                       .tokens = tokens,
                       .parent_block = in.ConsumeBool() ? block() : pagedkv::kNullBlock});
      // A refused insert caches nothing; an accepted one caches at most one more block.
      if (!inserted.ok() && pool.NumCachedBlocks() != cached) std::abort();
      if (inserted.ok() && pool.NumCachedBlocks() > cached + 1) std::abort();
      break;
    }
    case 3:
      if (pagedkv::BlockId b = block(); pool.Pin(b).ok()) held.push_back(b);
      break;
    case 4:
      if (!held.empty()) {
        const size_t i = in.ConsumeIntegralInRange<size_t>(0, held.size() - 1);
        if (pool.Unpin(held[i]).ok()) held.erase(held.begin() + static_cast<ptrdiff_t>(i));
      } else if (pool.Unpin(block()).ok()) {
        std::abort();  // nothing is held: no unpin may succeed
      }
      break;
    case 5: {
      const int32_t cached = pool.NumCachedBlocks();
      if (!pool.Uncache(block()).ok() && pool.NumCachedBlocks() != cached) std::abort();
      break;
    }
    case 6: {
      const pagedkv::BlockId found = pool.FindCached(HashOf(in.ConsumeIntegral<uint8_t>()));
      if (found != pagedkv::kNullBlock && !pool.IsCached(found)) std::abort();
      break;
    }
    default:
      if (pool.Unpin(held).ok()) held.clear();
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const std::vector<std::string_view> policies = pagedkv::EvictionPolicyNames();
  pagedkv::BlockPoolOptions options;
  options.num_blocks = in.ConsumeIntegralInRange(1, 16);
  options.block_size = in.ConsumeIntegralInRange(1, 4);
  options.store_tokens = in.ConsumeBool();
  options.eviction_policy =
      std::string(policies[in.ConsumeIntegralInRange<size_t>(0, policies.size() - 1)]);
  auto pool = pagedkv::BlockPool::Create(options);
  if (!pool.ok()) std::abort();
  std::vector<pagedkv::BlockId> held;
  while (in.remaining_bytes() > 0) {
    Step(in, **pool, held);
    if (!(*pool)->ValidateInvariants().ok()) std::abort();
  }
  return 0;
}
