// Copyright 2026 The pagedkv Authors.
//
// Host tier store / load bandwidth against memcpy of the same bytes, and the cost of a lookup
// whose first block misses (results: bench/RESULTS.md, "KV tiers").
//   build/bench/cache/host_tier_benchmark --benchmark_counters_tabular=true
// Value sizes: 64 KiB, 256 KiB, 2 MiB (one 16-token block of llama-3-8b BF16 KV is 2 MiB).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "bench/cache/tiers/tier_bench_chain.h"
#include "benchmark/benchmark.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/tiers/host_tier.h"

namespace pagedkv {
namespace {

constexpr int64_t kBlocks = 64;  // blocks stored / loaded per iteration (a chain)

std::unique_ptr<HostTier> MakeTier(int64_t value_bytes, int64_t capacity) {
  return HostTier::Create(
             {.capacity_blocks = capacity, .value_bytes = value_bytes, .block_size = 16})
      .value();
}

using Chain = bench::TierBenchChain;

// Stores a fresh chain of kBlocks into a full tier (every store evicts one block).
void BM_HostTierStore(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  auto tier = MakeTier(bytes, kBlocks);
  Chain chain(kBlocks, bytes, 1, 0);
  uint64_t next = 1;
  for (auto _ : state) {
    for (TierStoreItem& item : chain.items) item.block.hash = BlockHash::FromU64(next++);
    benchmark::DoNotOptimize(tier->Store(chain.items));
  }
  state.SetBytesProcessed(state.iterations() * kBlocks * bytes);
}

// Loads a held chain of kBlocks, copying each value out (as the engine copies it to the device).
void BM_HostTierLoad(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  auto tier = MakeTier(bytes, kBlocks);
  Chain chain(kBlocks, bytes, 1, 0);
  if (!tier->Store(chain.items).ok()) state.SkipWithError("store failed");
  std::vector<std::byte> out(static_cast<size_t>(bytes));
  for (auto _ : state) {
    auto n = tier->LoadPrefix(chain.blocks, [&](int64_t, std::span<const std::byte> v) {
      std::memcpy(out.data(), v.data(), v.size());
      benchmark::ClobberMemory();
      return true;
    });
    benchmark::DoNotOptimize(n);
  }
  state.SetBytesProcessed(state.iterations() * kBlocks * bytes);
}

// The floor of a store: memcpy of the same bytes from one source into kBlocks distinct buffers.
void BM_MemcpyStorePattern(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  std::vector<std::byte> src(static_cast<size_t>(bytes), std::byte{1});
  std::vector<std::vector<std::byte>> dst(kBlocks,
                                          std::vector<std::byte>(static_cast<size_t>(bytes)));
  for (auto _ : state) {
    for (auto& d : dst) {
      std::memcpy(d.data(), src.data(), src.size());
      benchmark::ClobberMemory();
    }
  }
  state.SetBytesProcessed(state.iterations() * kBlocks * bytes);
}

// The floor of a load: memcpy of the same bytes from kBlocks distinct buffers into one.
void BM_MemcpyLoadPattern(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  std::vector<std::vector<std::byte>> src(kBlocks,
                                          std::vector<std::byte>(static_cast<size_t>(bytes)));
  std::vector<std::byte> dst(static_cast<size_t>(bytes));
  for (auto _ : state) {
    for (const auto& s : src) {
      std::memcpy(dst.data(), s.data(), s.size());
      benchmark::ClobberMemory();
    }
  }
  state.SetBytesProcessed(state.iterations() * kBlocks * bytes);
}

// A lookup of a 64-block chain whose first block the tier does not hold (every block missing):
// the cost a request pays for a configured tier that has nothing for it.
void BM_HostTierLookupAllMissing(benchmark::State& state) {
  auto tier = MakeTier(1024, 4096);
  Chain held(kBlocks, 1024, 1);
  if (!tier->Store(held.items).ok()) state.SkipWithError("store failed");
  Chain missing(kBlocks, 1024, 1u << 20);
  for (auto _ : state) {
    auto n =
        tier->LoadPrefix(missing.blocks, [](int64_t, std::span<const std::byte>) { return true; });
    benchmark::DoNotOptimize(n);
  }
}

BENCHMARK(BM_HostTierStore)->Arg(64 << 10)->Arg(256 << 10)->Arg(2 << 20);
BENCHMARK(BM_HostTierLoad)->Arg(64 << 10)->Arg(256 << 10)->Arg(2 << 20);
BENCHMARK(BM_MemcpyStorePattern)->Arg(64 << 10)->Arg(256 << 10)->Arg(2 << 20);
BENCHMARK(BM_MemcpyLoadPattern)->Arg(64 << 10)->Arg(256 << 10)->Arg(2 << 20);
BENCHMARK(BM_HostTierLookupAllMissing);

}  // namespace
}  // namespace pagedkv
