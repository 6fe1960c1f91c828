// Copyright 2026 The pagedkv Authors.
//
// KvCacheManager / BlockPool benchmarks, each against its floor in the same run:
//   BM_FlatHashMapProbe_128k        floor: one bare absl::flat_hash_map<BlockHash, BlockId> probe
//   per
//                                   block of a 128k-token prompt (8192 blocks of 16 tokens);
//   BM_PrefixLookup_128k/verify:V   GetComputedBlocks on the fully cached prompt, ns per block and
//                                   ratio "x_probe" to the floor (V = token verification on/off);
//   BM_PoolAllocateFree_2k          BlockPool::Allocate(2048) + Unpin (tail first), ns per block;
//   BM_ManagerAllocateFree_2k/cache:C  KvCacheManager::AllocateSlots for a 2048-block request +
//   Free
//                                   (C = prefix caching on: every block is indexed and, in steady
//                                   state, each allocation evicts an older request's block).
//   BM_ManagerAllocateFreeMetrics_2k/metrics:M  the same with caching on, M = block residency
//                                   histograms (collect_block_metrics) off / on.
// All ns counters are thread CPU time.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "bench/cache/bench_util.h"
#include "benchmark/benchmark.h"
#include "pagedkv/cache/kv_cache_manager.h"

namespace pagedkv {
namespace {

constexpr int kBlockSize = 16;
constexpr int kPromptBlocks = 8192;  // 128k tokens

std::vector<TokenId> RandomTokens(int n, uint32_t seed) {
  std::vector<TokenId> p(n);
  std::mt19937 rng(seed);
  for (TokenId& t : p) t = static_cast<TokenId>(rng() % 32000);
  return p;
}

double g_probe_ns_per_block = 0;

void BM_FlatHashMapProbe_128k(benchmark::State& state) {
  // +1 token: the lookup may then return all 8192 full blocks (it never returns the whole prompt).
  auto req = *CacheRequest::Create({.block_size = kBlockSize},
                                   RandomTokens(kPromptBlocks * kBlockSize + 1, 1));
  absl::flat_hash_map<BlockHash, BlockId, BlockHashMix> map;
  map.reserve(2 * kPromptBlocks);
  for (int i = 0; i < kPromptBlocks; ++i) map[req.block_hashes()[i]] = i;
  const double ns = bench::MeasureCpuNs(state, [&] {
    int64_t sum = 0;
    for (const BlockHash& h : req.block_hashes()) {
      const auto it = map.find(h);
      if (it == map.end()) break;
      sum += it->second;
    }
    benchmark::DoNotOptimize(sum);
  });
  g_probe_ns_per_block = ns / kPromptBlocks;
  state.counters["ns_per_block"] = g_probe_ns_per_block;
}
BENCHMARK(BM_FlatHashMapProbe_128k);

void BM_PrefixLookup_128k(benchmark::State& state) {
  const bool verify = state.range(0) != 0;
  auto manager = *KvCacheManager::Create(
      {.num_blocks = 2 * kPromptBlocks, .block_size = kBlockSize, .verify_tokens = verify});
  auto req = *manager->NewRequest(1, RandomTokens(kPromptBlocks * kBlockSize + 1, 1));
  auto first = *manager->GetComputedBlocks(req);
  if (!manager->AllocateSlots(req, req.num_tokens(), first).ok() || !manager->Free(1).ok()) {
    state.SkipWithError("setup failed");
    return;
  }
  int64_t hit_blocks = 0;
  const double ns = bench::MeasureCpuNs(state, [&] {
    auto hit = manager->GetComputedBlocks(req);
    hit_blocks = static_cast<int64_t>(hit->blocks.size());
    benchmark::DoNotOptimize(hit->blocks.data());
  });
  if (hit_blocks != kPromptBlocks) {
    state.SkipWithError("prompt is not fully cached");
    return;
  }
  state.counters["ns_per_block"] = ns / kPromptBlocks;
  if (g_probe_ns_per_block > 0) {
    state.counters["x_probe"] = ns / kPromptBlocks / g_probe_ns_per_block;
  }
}
BENCHMARK(BM_PrefixLookup_128k)->ArgName("verify")->Arg(1)->Arg(0);

constexpr int kRequestBlocks = 2048;

void BM_PoolAllocateFree_2k(benchmark::State& state) {
  auto pool = *BlockPool::Create({.num_blocks = 2 * kRequestBlocks, .block_size = kBlockSize});
  std::vector<BlockId> table;
  table.reserve(kRequestBlocks);
  const double ns = bench::MeasureCpuNs(state, [&] {
    table.clear();
    (void)pool->Allocate(kRequestBlocks, &table);
    std::reverse(table.begin(), table.end());
    (void)pool->Unpin(table);
  });
  state.counters["ns_per_block"] = ns / kRequestBlocks;
}
BENCHMARK(BM_PoolAllocateFree_2k);

// AllocateSlots + Free of 2k-block requests with distinct salts (no hits), on `manager`.
void RunAllocateFree(benchmark::State& state, KvCacheManager& manager) {
  // Distinct salts: no request hits another's blocks, so every block is allocated and indexed.
  std::vector<CacheRequest> reqs;
  const std::vector<TokenId> tokens = RandomTokens(kRequestBlocks * kBlockSize, 2);
  for (int i = 0; i < 8; ++i) {
    reqs.push_back(*manager.NewRequest(i, tokens, {.cache_salt = std::to_string(i)}));
  }
  size_t next = 0;
  bool ok = true;
  const double ns = bench::MeasureCpuNs(state, [&] {
    const CacheRequest& r = reqs[next++ % reqs.size()];
    ok &= manager.AllocateSlots(r, r.num_tokens()).ok();
    ok &= manager.Free(r.id()).ok();
  });
  if (!ok) state.SkipWithError("allocation failed");
  state.counters["ns_per_block"] = ns / kRequestBlocks;
  state.counters["evictions_per_iter"] =
      static_cast<double>(manager.stats().evictions) / static_cast<double>(state.iterations());
}

void BM_ManagerAllocateFree_2k(benchmark::State& state) {
  const bool cache = state.range(0) != 0;
  auto manager = *KvCacheManager::Create(
      {.num_blocks = 2 * kRequestBlocks, .block_size = kBlockSize, .enable_prefix_caching = cache});
  RunAllocateFree(state, *manager);
}
BENCHMARK(BM_ManagerAllocateFree_2k)->ArgName("cache")->Arg(0)->Arg(1);

// The same with prefix caching on, without and with the block residency histograms
// (collect_block_metrics: a steady-clock read per store, release and eviction).
void BM_ManagerAllocateFreeMetrics_2k(benchmark::State& state) {
  auto manager = *KvCacheManager::Create({.num_blocks = 2 * kRequestBlocks,
                                          .block_size = kBlockSize,
                                          .collect_block_metrics = state.range(0) != 0});
  RunAllocateFree(state, *manager);
}
BENCHMARK(BM_ManagerAllocateFreeMetrics_2k)->ArgName("metrics")->Arg(0)->Arg(1);

}  // namespace
}  // namespace pagedkv
