// Copyright 2026 The pagedkv Authors.
//
// The replay tool's "cache mode" access pattern straight on BlockPool, in blocks per second (the
// replay tool needs >= 10 M blocks/s on one core). Per request:
//   1. longest cached prefix by hash (FindCached until the first miss);
//   2. for every block, last to first: Pin if cached, else Allocate (evicting) and Insert;
//   3. Unpin all blocks, tail first.
// Synthetic trace: 4000 requests; each shares a prefix (0-200 blocks) of one of 64 documents and
// adds 8-64 unique blocks; 64-bit hash ids as in Mooncake traces (BlockHash::FromU64). The pool
// holds 16384 blocks, so the trace evicts. The counter "blocks_per_s" uses thread CPU time.
#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/cache/bench_util.h"
#include "benchmark/benchmark.h"
#include "pagedkv/cache/block_pool.h"

namespace pagedkv {
namespace {

struct Trace {
  std::vector<std::vector<BlockHash>> requests;
  int64_t total_blocks = 0;
};

const Trace& SyntheticTrace() {
  static const Trace* trace = [] {
    auto* t = new Trace;
    std::mt19937_64 rng(11);
    uint64_t next_unique = uint64_t{1} << 40;
    for (int r = 0; r < 4000; ++r) {
      std::vector<BlockHash> hashes;
      const uint64_t doc = rng() % 64;
      const int shared = static_cast<int>(rng() % 201);
      for (int i = 0; i < shared; ++i) hashes.push_back(BlockHash::FromU64(doc * 1000 + i));
      const int unique = 8 + static_cast<int>(rng() % 57);
      for (int i = 0; i < unique; ++i) hashes.push_back(BlockHash::FromU64(next_unique++));
      t->total_blocks += static_cast<int64_t>(hashes.size());
      t->requests.push_back(std::move(hashes));
    }
    return t;
  }();
  return *trace;
}

void BM_ReplayCacheMode(benchmark::State& state) {
  const std::string policy = EvictionPolicyNames()[state.range(0)].data();
  const Trace& trace = SyntheticTrace();
  int64_t hits = 0;
  bool ok = true;
  std::vector<BlockId> tail_first;
  tail_first.reserve(512);
  const double ns = bench::MeasureCpuNs(state, [&] {
    auto pool = *BlockPool::Create(
        {.num_blocks = 16384, .block_size = 16, .store_tokens = false, .eviction_policy = policy});
    for (const std::vector<BlockHash>& h : trace.requests) {
      const size_t n = h.size();
      size_t hit = 0;
      while (hit < n && pool->FindCached(h[hit]) != kNullBlock) ++hit;
      hits += static_cast<int64_t>(hit);
      tail_first.clear();
      for (size_t i = n; i-- > 0;) {
        BlockId b = pool->FindCached(h[i]);
        if (b != kNullBlock) {
          ok &= pool->Pin(b).ok();
        } else {
          auto allocated = pool->Allocate();
          ok &= allocated.ok();
          b = *allocated;
          ok &= pool->Insert(
                        {.block = b, .hash = h[i], .parent_hash = i == 0 ? BlockHash{} : h[i - 1]})
                    .ok();
        }
        tail_first.push_back(b);
      }
      ok &= pool->Unpin(tail_first).ok();
    }
    benchmark::DoNotOptimize(hits);
  });
  if (!ok) state.SkipWithError("a pool operation failed");
  state.counters["blocks_per_s"] = static_cast<double>(trace.total_blocks) / (ns * 1e-9);
  state.counters["ns_per_block"] = ns / static_cast<double>(trace.total_blocks);
  state.counters["hit_rate"] =
      static_cast<double>(hits) / static_cast<double>(trace.total_blocks * state.iterations());
  state.SetLabel(policy);
}
BENCHMARK(BM_ReplayCacheMode)
    ->ArgName("policy")
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Arg(3)  // arc
    ->Arg(4)  // s3fifo
    ->Arg(5)  // wtinylfu
    ->Arg(6)  // chain
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pagedkv
