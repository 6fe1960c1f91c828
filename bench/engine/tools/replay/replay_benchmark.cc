// Copyright 2026 The pagedkv Authors.
//
// Cache-mode replay speed: blocks per second through the real BlockPool on the Mooncake
// conversation trace at block size 16 (~9 M blocks; a generated conversation workload when
// ../shared/data is absent), against the floor of a bare hash-map probe-and-insert over the same
// keys. Also trace parsing and block expansion.
//
//   ./build/bench/engine/tools/replay/replay_benchmark --benchmark_filter=CacheReplay
#include <filesystem>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "benchmark/benchmark.h"
#include "engine/tools/replay/cache_mode/cache_replay.h"
#include "engine/tools/replay/workload/block_expansion.h"
#include "engine/tools/replay/workload/generators.h"
#include "engine/tools/replay/workload/mooncake_trace.h"

namespace pagedkv::replay {
namespace {

std::string TracePath() {
  const std::filesystem::path p =
      std::filesystem::path(PAGEDKV_SHARED_DATA_DIR) / "traces/conversation_trace.jsonl.gz";
  std::error_code ec;
  return std::filesystem::exists(p, ec) ? p.string() : std::string();
}

const Workload& TheWorkload() {
  static const Workload* w = [] {
    const std::string path = TracePath();
    if (!path.empty()) {
      auto t = LoadMooncakeTrace(path, {.trace_block_size = 512});
      if (t.ok()) return new Workload(*std::move(t));
    }
    return new Workload(GenerateConversationWorkload({.num_conversations = 20000}));
  }();
  return *w;
}

const ExpandedWorkload& TheExpanded() {
  static const ExpandedWorkload* e =
      new ExpandedWorkload(*ExpandWorkload(TheWorkload(), {.block_size = 16}));
  return *e;
}

void BM_CacheReplay(benchmark::State& state, const char* policy) {
  const ExpandedWorkload& e = TheExpanded();
  CacheReplayResult last;
  for (auto _ : state) {
    auto r = RunCacheReplay(e, {.capacity_blocks = state.range(0), .policy = policy});
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    last = *r;
    benchmark::DoNotOptimize(last.hit_blocks);
  }
  state.SetItemsProcessed(state.iterations() * e.num_blocks());
  state.counters["block_hit_rate"] = last.block_hit_rate();
  state.counters["blocks"] = static_cast<double>(e.num_blocks());
  state.SetLabel(TheWorkload().name);
}
BENCHMARK_CAPTURE(BM_CacheReplay, lru, "lru")
    ->Arg(10'000)
    ->Arg(100'000)
    ->Arg(1'000'000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_CacheReplay, lfu, "lfu")->Arg(100'000)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CacheReplay, fifo, "fifo")->Arg(100'000)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CacheReplay, belady, "belady")->Arg(100'000)->Unit(benchmark::kMillisecond);

// Floor: the least any hash-level cache must do per block - probe a flat hash map and, on a
// miss, insert the key and erase an old one (FIFO ring) once the map holds `capacity` keys.
void BM_HashMapFloor(benchmark::State& state) {
  const ExpandedWorkload& e = TheExpanded();
  const auto capacity = static_cast<size_t>(state.range(0));
  int64_t hits = 0;
  for (auto _ : state) {
    absl::flat_hash_map<BlockHash, int32_t, BlockHashMix> map;
    map.reserve(capacity);
    std::vector<BlockHash> ring(capacity);
    size_t head = 0;
    hits = 0;
    for (const BlockHash& k : e.keys) {
      if (map.contains(k)) {
        ++hits;
        continue;
      }
      if (map.size() == capacity) map.erase(ring[head]);
      map.emplace(k, 0);
      ring[head] = k;
      head = head + 1 == capacity ? 0 : head + 1;
    }
    benchmark::DoNotOptimize(hits);
  }
  state.SetItemsProcessed(state.iterations() * e.num_blocks());
}
BENCHMARK(BM_HashMapFloor)
    ->Arg(10'000)
    ->Arg(100'000)
    ->Arg(1'000'000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_ExpandWorkload(benchmark::State& state) {
  const Workload& w = TheWorkload();
  int64_t blocks = 0;
  for (auto _ : state) {
    auto e = ExpandWorkload(w, {.block_size = 16, .compute_next_use = state.range(0) != 0});
    blocks = e->num_blocks();
    benchmark::DoNotOptimize(e->keys.data());
  }
  state.SetItemsProcessed(state.iterations() * blocks);
}
BENCHMARK(BM_ExpandWorkload)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_ParseTrace(benchmark::State& state) {
  const std::string path = TracePath();
  if (path.empty()) {
    state.SkipWithError("../shared/data/traces/conversation_trace.jsonl.gz not found");
    return;
  }
  const std::string text = *ReadMaybeGzippedFile(path);
  for (auto _ : state) {
    auto w = ParseMooncakeTrace(text, {.trace_block_size = 512});
    benchmark::DoNotOptimize(w->requests.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_ParseTrace)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pagedkv::replay
