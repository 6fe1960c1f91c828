// Copyright 2026 The pagedkv Authors.
//
// KvCacheManager benchmarks over KV cache groups: the KV memory one long request holds on a
// gpt-oss-style model (24 layers, half of them with a 128-token sliding window, blocks of 16
// tokens) against the same model treated as all full attention, in the same run:
//   BM_HybridKvBlocks_8k/hybrid:0   all full: one group of 24 layers (the floor to compare with);
//   BM_HybridKvBlocks_8k/hybrid:1   12 full layers + 12 window layers.
// Each iteration admits an 8,192-token prompt, allocates it in one chunk, decodes 32 tokens one
// AllocateSlots at a time and frees the request. Counters:
//   layer_blocks  blocks held after the last decode step, weighted by layers per group
//                 (sum over groups of held blocks * num_layers: proportional to KV bytes);
//   kv_ratio      layer_blocks / the all-full model's (target <= 0.55; after 8,224 tokens: 12*514 +
//                 12*8 vs 24*514 = 0.508);
//   ns_per_step   thread CPU ns per decode AllocateSlots (releases included).
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/cache/bench_util.h"
#include "benchmark/benchmark.h"
#include "pagedkv/cache/kv_cache_manager.h"

namespace pagedkv {
namespace {

constexpr int kBlockSize = 16;
constexpr int kPromptTokens = 8192;
constexpr int kDecodeSteps = 32;

std::vector<KvCacheGroupSpec> Groups(bool hybrid) {
  if (!hybrid) return {{.kind = KvCacheGroupKind::kFullAttention, .num_layers = 24}};
  return {{.kind = KvCacheGroupKind::kFullAttention, .num_layers = 12},
          {.kind = KvCacheGroupKind::kSlidingWindow, .sliding_window = 128, .num_layers = 12}};
}

struct Run {
  int64_t layer_blocks = 0;
  double decode_ns = 0;
  bool ok = true;
};

// One request: prompt, decode, free; returns the layer-weighted blocks held at the end.
Run OneRequest(KvCacheManager& m, const std::vector<TokenId>& prompt, RequestId id) {
  Run run;
  // A salt per request: no hits and no duplicates of an earlier request's cached blocks.
  CacheRequest r = *m.NewRequest(id, prompt, {.cache_salt = std::to_string(id)});
  run.ok &= m.AllocateSlots(r, r.num_tokens()).ok();
  const double start = bench::ThreadCpuNs();
  for (int s = 0; s < kDecodeSteps; ++s) {
    run.ok &= r.AppendToken(static_cast<TokenId>(s)).ok();
    run.ok &= m.AllocateSlots(r, 1).ok();
  }
  run.decode_ns = bench::ThreadCpuNs() - start;
  run.layer_blocks = m.NumHeldLayerBlocks(id).value_or(-1);
  run.ok &= m.Free(id).ok();
  return run;
}

std::unique_ptr<KvCacheManager> Make(bool hybrid) {
  return *KvCacheManager::Create(
      {.num_blocks = 4096, .block_size = kBlockSize, .groups = Groups(hybrid)});
}

void BM_HybridKvBlocks_8k(benchmark::State& state) {
  const bool hybrid = state.range(0) != 0;
  std::vector<TokenId> prompt(kPromptTokens);
  std::mt19937 rng(7);
  for (TokenId& t : prompt) t = static_cast<TokenId>(rng() % 32000);
  auto floor_manager = Make(false);
  const Run floor = OneRequest(*floor_manager, prompt, 1);
  auto manager = Make(hybrid);
  Run last;
  double decode_ns = 0;
  RequestId id = 1;
  for (auto _ : state) {
    last = OneRequest(*manager, prompt, id++);
    decode_ns += last.decode_ns;
    benchmark::DoNotOptimize(last.layer_blocks);
  }
  if (!last.ok || !floor.ok) {
    state.SkipWithError("allocation failed");
    return;
  }
  state.counters["layer_blocks"] = static_cast<double>(last.layer_blocks);
  state.counters["kv_ratio"] =
      static_cast<double>(last.layer_blocks) / static_cast<double>(floor.layer_blocks);
  state.counters["ns_per_step"] =
      decode_ns / static_cast<double>(state.iterations()) / kDecodeSteps;
}
BENCHMARK(BM_HybridKvBlocks_8k)->ArgName("hybrid")->Arg(0)->Arg(1);

}  // namespace
}  // namespace pagedkv
