// Copyright 2026 The pagedkv Authors.
//
// Shifted-position reuse on the CPU backend, aidreams260K's shape (random weights, so it runs
// anywhere): a prompt B (48 tokens) ‖ document C (64 tokens, cached at position 16) ‖ tail (8).
//   BM_Prefill/full       - the whole prompt computed (the reference)
//   BM_Prefill/rerotated  - C re-rotated from the cache, the rest computed
//   BM_Prefill/firstk     - as rerotated, first 4 tokens of C recomputed (EPIC)
//   BM_Prefill/selective  - as rerotated, 15% of C recomputed by layer-1 deviation (CacheBlend)
//   BM_ReRotateChunk      - only the K/V move of C (every layer), in GB/s of K+V read and written
//   BM_CopyFloor          - memcpy of the same bytes (the floor the move is compared with)
// Run: build/bench/engine/tools/study/shifted_prefill_benchmark
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "engine/model/runner/model_runner.h"
#include "engine/runtime/shift/rerotate_slots.h"
#include "engine/tools/study/shifted_prefill.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/chunk_index.h"
#include "pagedkv/model/model_weights.h"

namespace pagedkv {
namespace {

constexpr int32_t kBlockSize = 16;
constexpr int32_t kNumBlocks = 64;
constexpr int32_t kDocLen = 64, kPrefix = 48, kTail = 8, kDocPos = 16;

struct Setup {
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<BlockPool> pool;
  std::unique_ptr<ChunkIndex> index;
  std::unique_ptr<ShiftedPrefill> prefill;
  std::vector<TokenId> target;
  std::vector<BlockId> table;
  std::vector<ChunkSpan> span;

  Setup() {
    const ModelConfig config{.dim = 64,
                             .hidden_dim = 172,
                             .n_layers = 4,
                             .n_heads = 4,
                             .n_kv_heads = 4,
                             .vocab_size = 512,
                             .seq_len = 128};
    auto weights = std::make_shared<const ModelWeights>(ModelWeights::Random(config).value());
    runner = ModelRunner::Create(weights, {.backend = BackendKind::kCpu,
                                           .num_blocks = kNumBlocks,
                                           .block_size = kBlockSize,
                                           .num_threads = 1})
                 .value();
    pool = BlockPool::Create({.num_blocks = kNumBlocks, .block_size = kBlockSize}).value();
    index = ChunkIndex::Create(pool.get()).value();
    prefill = ShiftedPrefill::Create(runner.get(), pool.get(), index.get()).value();
    std::mt19937 rng(7);
    auto tokens = [&rng](int n) {
      std::vector<TokenId> t(static_cast<size_t>(n));
      for (TokenId& x : t) x = static_cast<TokenId>(3 + rng() % 500);
      return t;
    };
    const std::vector<TokenId> doc = tokens(kDocLen);
    std::vector<TokenId> donor = tokens(kDocPos);
    donor.insert(donor.end(), doc.begin(), doc.end());
    target = tokens(kPrefix);
    target.insert(target.end(), doc.begin(), doc.end());
    const std::vector<TokenId> tail = tokens(kTail);
    target.insert(target.end(), tail.begin(), tail.end());
    std::vector<BlockId> donor_table;
    (void)pool->Allocate((static_cast<int32_t>(donor.size()) + kBlockSize - 1) / kBlockSize,
                         &donor_table);
    const std::vector<ChunkSpan> donor_span = {{.begin = kDocPos, .length = kDocLen}};
    (void)prefill->Run({.tokens = donor, .chunks = donor_span, .block_table = donor_table}, {});
    (void)pool->Unpin(std::vector<BlockId>(donor_table.rbegin(), donor_table.rend()));
    (void)pool->Allocate((static_cast<int32_t>(target.size()) + kBlockSize - 1) / kBlockSize,
                         &table);
    span = {{.begin = kPrefix, .length = kDocLen}};
  }
};

void BM_Prefill(benchmark::State& state) {
  Setup s;
  ShiftedReuseOptions options{.register_chunks = false};
  switch (state.range(0)) {
    case 0:
      options.enable_reuse = false;
      state.SetLabel("full");
      break;
    case 1:
      state.SetLabel("rerotated");
      break;
    case 2:
      options.recompute_first = 4;
      state.SetLabel("firstk");
      break;
    default:
      options.recompute_fraction = 0.15;
      state.SetLabel("selective");
      break;
  }
  for (auto _ : state) {
    auto result =
        s.prefill->Run({.tokens = s.target, .chunks = s.span, .block_table = s.table}, options);
    if (!result.ok()) state.SkipWithError(std::string(result.status().message()).c_str());
    benchmark::DoNotOptimize(result);
  }
  state.counters["prompt_tokens/s"] = benchmark::Counter(
      static_cast<double>(s.target.size()) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Prefill)->DenseRange(0, 3)->Unit(benchmark::kMicrosecond);

// Bytes of K+V read and written for the chunk over every layer.
int64_t ChunkBytes(const ModelRunner& runner) {
  return 2 /*K,V*/ * 2 /*read+write*/ * int64_t{kDocLen} * runner.config().kv_dim() *
         static_cast<int64_t>(sizeof(float)) * runner.config().n_layers;
}

void BM_ReRotateChunk(benchmark::State& state) {
  Setup s;
  std::vector<int64_t> src, dst;
  std::vector<int32_t> old_pos, new_pos;
  for (int32_t i = 0; i < kDocLen; ++i) {
    src.push_back(int64_t{kNumBlocks - 8} * kBlockSize + i);  // any disjoint slots
    dst.push_back(int64_t{kNumBlocks - 4} * kBlockSize + i);
    old_pos.push_back(kDocPos + i);
    new_pos.push_back(kPrefix + i);
  }
  for (auto _ : state) {
    absl::Status st = ReRotateSlots(
        *s.runner, {.src = src, .dst = dst, .old_positions = old_pos, .new_positions = new_pos});
    if (!st.ok()) state.SkipWithError(std::string(st.message()).c_str());
  }
  state.SetBytesProcessed(ChunkBytes(*s.runner) * state.iterations());
}
BENCHMARK(BM_ReRotateChunk)->Unit(benchmark::kMicrosecond);

void BM_CopyFloor(benchmark::State& state) {
  Setup s;
  const size_t bytes = static_cast<size_t>(ChunkBytes(*s.runner) / 2);  // bytes copied
  std::vector<char> a(bytes, 1), b(bytes);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(2 * bytes) * state.iterations());
}
BENCHMARK(BM_CopyFloor)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace pagedkv
