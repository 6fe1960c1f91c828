// Copyright 2026 The pagedkv Authors.
//
// CPU kernel throughput (one core): GFLOP/s for Linear / LM head, GB/s for the memory-bound ops,
// with a plain memcpy of comparable size in the same run as the floor (BM_Memcpy).
//   ./build/bench/kernels/kernels_benchmark --benchmark_min_time=0.2s
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/kernels/plain_rerotate.h"
#include "benchmark/benchmark.h"
#include "kernels/cpu/simd/simd_kernels.h"
#include "pagedkv/kernels/cpu_ops.h"
#include "pagedkv/kernels/dtype_convert.h"
#include "pagedkv/kernels/kv_quant.h"
#include "pagedkv/kernels/rope_table.h"

namespace pagedkv {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  std::vector<char> src(bytes, 1), dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * bytes);  // read + write
}
BENCHMARK(BM_Memcpy)->Arg(1 << 20)->Arg(16 << 20)->Arg(64 << 20);

// Args: m, n, k. Reports GFLOP/s and the bytes of W streamed.
void BM_Linear(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const auto x = Random(m * k, 1);
  const auto w = Random(n * k, 2);
  std::vector<float> y(m * n);
  const LinearArgs args{.x = x.data(), .w = w.data(), .y = y.data(), .m = m, .n = n, .k = k};
  for (auto _ : state) {
    benchmark::DoNotOptimize(cpu::Linear(args));
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * n * k * 4);
}
BENCHMARK(BM_Linear)
    ->Args({1, 768, 768})     // decode projection (GEMV)
    ->Args({16, 768, 768})    // small batch
    ->Args({128, 768, 768})   // prefill chunk
    ->Args({128, 2048, 768})  // MLP up
    ->Args({1, 32000, 288});  // LM head of a llama2.c 15M model

void BM_EmbeddingGather(benchmark::State& state) {
  const int64_t vocab = 32000, dim = state.range(0), tokens = 256;
  const auto table = Random(vocab * dim, 3);
  std::vector<int32_t> ids(tokens);
  std::mt19937 rng(4);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % vocab);
  std::vector<float> out(tokens * dim);
  const EmbeddingGatherArgs args{.table = table.data(),
                                 .token_ids = ids.data(),
                                 .out = out.data(),
                                 .num_tokens = tokens,
                                 .vocab_size = vocab,
                                 .dim = dim};
  for (auto _ : state) benchmark::DoNotOptimize(cpu::EmbeddingGather(args));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * tokens * dim * 4);
}
BENCHMARK(BM_EmbeddingGather)->Arg(288)->Arg(4096);

void BM_RmsNorm(benchmark::State& state) {
  const int64_t rows = 64, dim = state.range(0);
  const auto x = Random(rows * dim, 5);
  const auto w = Random(dim, 6);
  std::vector<float> out(rows * dim);
  const RmsNormArgs args{
      .x = x.data(), .weight = w.data(), .out = out.data(), .num_rows = rows, .dim = dim};
  for (auto _ : state) benchmark::DoNotOptimize(cpu::RmsNorm(args));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * rows * dim * 4);
}
BENCHMARK(BM_RmsNorm)->Arg(768)->Arg(4096);

void BM_SwiGlu(benchmark::State& state) {
  const int64_t rows = 64, dim = state.range(0);
  const auto gate = Random(rows * dim, 7);
  const auto up = Random(rows * dim, 8);
  std::vector<float> out(rows * dim);
  const SwiGluArgs args{
      .gate = gate.data(), .up = up.data(), .out = out.data(), .num_rows = rows, .dim = dim};
  for (auto _ : state) benchmark::DoNotOptimize(cpu::SwiGlu(args));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 3 * rows * dim * 4);
}
BENCHMARK(BM_SwiGlu)->Arg(2048)->Arg(11008);

constexpr int32_t kKvHeads = 8;
constexpr int32_t kHeadDim = 128;
constexpr int32_t kBlockSize = 16;

struct KvFixture {
  KvFixture(DType dtype, int32_t num_blocks)
      : k(static_cast<size_t>(num_blocks) * kBlockSize * kKvHeads * kHeadDim), v(k.size()) {
    layout = PagedKvLayout{.k = k.data(),
                           .v = v.data(),
                           .dtype = dtype,
                           .num_blocks = num_blocks,
                           .block_size = kBlockSize,
                           .num_kv_heads = kKvHeads,
                           .head_dim = kHeadDim};
  }
  std::vector<float> k, v;  // fp32-sized, enough for every dtype
  PagedKvLayout layout;
};

RopeTable MakeTable() {
  RopeConfig config;
  config.head_dim = kHeadDim;
  return *RopeTable::Create(config, 8192);
}

// Arg: dtype. KV write of 1024 tokens (K rotated) into shuffled slots.
void BM_ReshapeAndCache(benchmark::State& state) {
  const DType dtype = static_cast<DType>(state.range(0));
  const int64_t tokens = 1024;
  KvFixture fx(dtype, 128);
  const RopeTable table = MakeTable();
  const auto k = Random(tokens * kKvHeads * kHeadDim, 9);
  const auto v = Random(tokens * kKvHeads * kHeadDim, 10);
  std::vector<int32_t> pos(tokens);
  std::iota(pos.begin(), pos.end(), 0);
  std::vector<int64_t> slots(tokens);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937(11));
  const ReshapeAndCacheArgs args{.k = k.data(),
                                 .v = v.data(),
                                 .positions = pos.data(),
                                 .slot_mapping = slots.data(),
                                 .num_tokens = tokens,
                                 .rope = table.View(),
                                 .cache = fx.layout};
  for (auto _ : state) benchmark::DoNotOptimize(cpu::ReshapeAndCache(args));
  const int64_t elems = tokens * kKvHeads * kHeadDim * 2;
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * elems *
                          (4 + DTypeSize(dtype)));
  state.SetLabel(DTypeName(dtype));
}
BENCHMARK(BM_ReshapeAndCache)->Arg(0)->Arg(1)->Arg(2);

// Args: dtype, mode, impl (0: the pre-tile scalar floor of plain_rerotate.h, 1: cpu::ReRotate),
// tokens. Re-rotates `tokens` cached tokens out of place (K rotated, V copied): 1024 tokens (16 MiB
// of K and V traffic) are memory-bound, 32 (512 KiB) stay in L2 and show the compute.
void BM_ReRotate(benchmark::State& state) {
  const DType dtype = static_cast<DType>(state.range(0));
  const auto mode = static_cast<ReRotateMode>(state.range(1));
  const int64_t tokens = state.range(3);
  KvFixture fx(dtype, 128);
  const RopeTable table = MakeTable();
  std::vector<int64_t> src(tokens), dst(tokens);
  std::vector<int32_t> old_pos(tokens), new_pos(tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    src[t] = t;
    dst[t] = tokens + t;
    old_pos[t] = static_cast<int32_t>(t);
    new_pos[t] = static_cast<int32_t>(t + 300);
  }
  const ReRotateArgs args{.src_slots = src.data(),
                          .dst_slots = dst.data(),
                          .old_positions = old_pos.data(),
                          .new_positions = new_pos.data(),
                          .num_tokens = tokens,
                          .mode = mode,
                          .rope = table.View(),
                          .cache = fx.layout};
  const bool plain = state.range(2) == 0;
  for (auto _ : state) {
    if (plain) {
      bench::PlainReRotate(args);
    } else {
      benchmark::DoNotOptimize(cpu::ReRotate(args));
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * tokens * kKvHeads * kHeadDim *
                          DTypeSize(dtype) * 4);  // read + write of K and V
  state.SetLabel(std::string(DTypeName(dtype)) +
                 (mode == ReRotateMode::kDelta ? "/delta" : "/compose") +
                 (plain ? "/plain" : "/pagedkv"));
}
BENCHMARK(BM_ReRotate)->ArgNames({"dtype", "mode", "impl", "tokens"})->Apply([](auto* b) {
  for (int64_t tokens : {32, 1024}) {
    for (auto [dtype, mode] : {std::pair{0, 0}, std::pair{2, 0}, std::pair{2, 1}}) {
      b->Args({dtype, mode, 0, tokens});
      b->Args({dtype, mode, 1, tokens});
    }
  }
});

// One decode token for each of `seqs` sequences of kv_len cached keys, in shuffled blocks of
// kBlockSize (seed), with random queries (seed + 1) of nq heads of head_dim hd.
struct DecodeBatch {
  DecodeBatch(int32_t seqs, int32_t kv_len, int32_t nq, int32_t hd, uint32_t seed)
      : blocks_per_seq((kv_len + kBlockSize - 1) / kBlockSize),
        num_q_heads(nq),
        head_dim(hd),
        tables(static_cast<size_t>(seqs) * blocks_per_seq),
        qsl(static_cast<size_t>(seqs) + 1),
        lens(static_cast<size_t>(seqs), kv_len),
        pos(static_cast<size_t>(seqs), kv_len - 1),
        q(Random(static_cast<size_t>(seqs) * nq * hd, seed + 1)),
        out(q.size()) {
    std::iota(tables.begin(), tables.end(), 0);
    std::shuffle(tables.begin(), tables.end(), std::mt19937(seed));
    std::iota(qsl.begin(), qsl.end(), 0);
  }
  int32_t num_blocks() const { return static_cast<int32_t>(tables.size()); }
  PagedAttentionArgs Args(const PagedKvLayout& layout) {
    const auto seqs = static_cast<int64_t>(lens.size());
    return {.q = q.data(),
            .out = out.data(),
            .positions = pos.data(),
            .query_start_loc = qsl.data(),
            .kv_lens = lens.data(),
            .block_tables = tables.data(),
            .num_tokens = seqs,
            .num_seqs = static_cast<int32_t>(seqs),
            .num_q_heads = num_q_heads,
            .max_blocks_per_seq = blocks_per_seq,
            .cache = layout};
  }

  int32_t blocks_per_seq, num_q_heads, head_dim;
  std::vector<int32_t> tables, qsl, lens, pos;
  std::vector<float> q, out;
};

// Args: dtype, kv_len. Decode attention: 4 sequences, 32 query heads (GQA 4), one token each.
void BM_PagedAttentionDecode(benchmark::State& state) {
  const DType dtype = static_cast<DType>(state.range(0));
  const int32_t kv_len = static_cast<int32_t>(state.range(1));
  const int32_t seqs = 4;
  DecodeBatch batch(seqs, kv_len, /*nq=*/32, kHeadDim, 13);
  KvFixture fx(dtype, batch.num_blocks());
  const int64_t rows = fx.layout.NumSlots() * kKvHeads;
  const auto fill = Random(static_cast<size_t>(rows * kHeadDim), 12);
  for (int64_t r = 0; r < rows; ++r) {  // row r at r * RowUnits (quantized rows whole)
    const float* x = fill.data() + r * kHeadDim;
    StoreKvRow(fx.layout.k, dtype, r * fx.layout.RowUnits(), kHeadDim, x);
    StoreKvRow(fx.layout.v, dtype, r * fx.layout.RowUnits(), kHeadDim, x + kHeadDim / 2);
  }
  const PagedAttentionArgs args = batch.Args(fx.layout);
  for (auto _ : state) benchmark::DoNotOptimize(cpu::PagedAttention(args));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * seqs * kv_len * kKvHeads *
                          KvRowBytes(dtype, kHeadDim) * 2);  // K and V read once
  state.SetLabel(DTypeName(dtype));
}
// Every KV dtype at 2,048 keys (issue 41: 8-bit pages at least as fast as bf16).
BENCHMARK(BM_PagedAttentionDecode)->ArgNames({"dtype", "kv_len"})->Apply([](auto* b) {
  b->Args({0, 1024})->Args({2, 1024})->Args({2, 4096});
  for (int dtype = 0; dtype <= 8; ++dtype) b->Args({dtype, 2048});
});

// Args: dtype. The attention's row decode alone (DecodeKvRowForAttention on this CPU's target):
// 4,096 stored rows of head_dim 128, each decoded to fp32, as AttendGroup does for every key and
// value it reads. Reports decoded values per second ("items/s").
void BM_KvRowDecode(benchmark::State& state) {
  const auto dtype = static_cast<DType>(state.range(0));
  constexpr int32_t kRows = 4096;
  const int64_t units = KvRowUnits(dtype, kHeadDim);
  std::vector<unsigned char> rows(static_cast<size_t>(kRows * units * DTypeSize(dtype)));
  const auto fill = Random(static_cast<size_t>(kRows) * kHeadDim, 14);
  for (int32_t r = 0; r < kRows; ++r) {
    StoreKvRow(rows.data(), dtype, r * units, kHeadDim, fill.data() + int64_t{r} * kHeadDim);
  }
  std::vector<float> out(kHeadDim);
  for (auto _ : state) {
    for (int32_t r = 0; r < kRows; ++r) {
      cpu::simd::DecodeKvRowForAttention(rows.data(), dtype, r * units, kHeadDim, out.data());
      benchmark::DoNotOptimize(out.data());
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kRows * kHeadDim);
  state.SetLabel(DTypeName(dtype));
}
BENCHMARK(BM_KvRowDecode)->ArgName("dtype")->DenseRange(1, 8);

// Times attention of `batch` over random fp32 pages of kv_heads heads (seed) and reports keys x
// query heads per second ("key_heads/s").
void RunF32Attention(benchmark::State& state, DecodeBatch& batch, int32_t kv_heads, uint32_t seed) {
  const int32_t hd = batch.head_dim;
  auto k = Random(static_cast<size_t>(batch.num_blocks()) * kBlockSize * kv_heads * hd, seed);
  auto v = Random(k.size(), seed + 1);
  const PagedAttentionArgs args = batch.Args({.k = k.data(),
                                              .v = v.data(),
                                              .dtype = DType::kF32,
                                              .num_blocks = batch.num_blocks(),
                                              .block_size = kBlockSize,
                                              .num_kv_heads = kv_heads,
                                              .head_dim = hd});
  for (auto _ : state) benchmark::DoNotOptimize(cpu::PagedAttention(args));
  double key_heads = 0;
  for (int32_t len : batch.lens) key_heads += static_cast<double>(len) * batch.num_q_heads;
  state.counters["key_heads/s"] =
      benchmark::Counter(key_heads, benchmark::Counter::kIsIterationInvariantRate);
}

// A decode step of the small models: one query token for each of 32 sequences of kv_len cached
// keys, fp32 pages in shuffled blocks of 16. Args: head_dim, KV heads, query heads, kv_len
// (aidreams260K: 16, 4, 4; TinyStories-656K: 16, 4, 8). Reports keys x heads per second.
void BM_PagedAttentionSmallHeads(benchmark::State& state) {
  const auto hd = static_cast<int32_t>(state.range(0));
  const auto kv_heads = static_cast<int32_t>(state.range(1));
  const auto nq = static_cast<int32_t>(state.range(2));
  const auto kv_len = static_cast<int32_t>(state.range(3));
  const int32_t seqs = 32;
  DecodeBatch batch(seqs, kv_len, nq, hd, 18);
  RunF32Attention(state, batch, kv_heads, 16);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * seqs * kv_len * kv_heads * hd *
                          2 * 4);
}
BENCHMARK(BM_PagedAttentionSmallHeads)
    ->Args({16, 4, 4, 48})
    ->Args({16, 4, 8, 48})
    ->Args({16, 4, 8, 256})
    ->Args({64, 8, 8, 256})
    ->Args({64, 3, 9, 1024});  // SmolLM2-135M, 32 sequences of their own blocks

// SmolLM2-135M's decode step (head_dim 64, 3 KV heads, 9 query heads, fp32 pages, blocks of 16)
// for `seqs` sequences in `prefixes` groups: each group's sequences share `prefix` keys (the same
// blocks: forks of one prompt, a shared system prompt) and hold `own` keys each. One thread.
// Args: seqs, prefixes, prefix, own. Reports keys x query heads per second.
void BM_PagedAttentionSharedPrefix(benchmark::State& state) {
  const auto seqs = static_cast<int32_t>(state.range(0));
  const auto prefixes = static_cast<int32_t>(state.range(1));
  const auto prefix = static_cast<int32_t>(state.range(2));
  const auto own = static_cast<int32_t>(state.range(3));
  const int32_t kv_heads = 3, nq = 9, hd = 64;
  DecodeBatch batch(seqs, prefix + own, nq, hd, 19);
  const int32_t prefix_blocks = prefix / kBlockSize;  // REQUIRES: prefix a multiple of 16
  for (int32_t s = 0; s < seqs; ++s) {  // group g's prefix lives in sequence g's first blocks
    const int32_t g = s % prefixes;
    std::copy_n(batch.tables.begin() + int64_t{g} * batch.blocks_per_seq, prefix_blocks,
                batch.tables.begin() + int64_t{s} * batch.blocks_per_seq);
  }
  RunF32Attention(state, batch, kv_heads, 20);
}
BENCHMARK(BM_PagedAttentionSharedPrefix)
    ->ArgNames({"seqs", "prefixes", "prefix", "own"})
    ->Args({8, 1, 992, 40})     // n = 8 samples of a 1,000-token prompt
    ->Args({4, 1, 992, 40})     // half of them: what each of two threads gets
    ->Args({32, 4, 512, 96})    // vLLM's prefix-repetition load at concurrency 32
    ->Args({32, 32, 512, 96});  // the same lengths, nothing shared

// Arg: 0 greedy, 1 temperature + top-p on flat logits (nucleus ~90% of the vocabulary: the
// worst case, a full sort), 2 top-p on peaked logits (x64: the nucleus is a few hundred tokens).
// 8 rows of a 32000 vocabulary.
void BM_Sample(benchmark::State& state) {
  const int64_t rows = 8, vocab = 32000;
  auto logits = Random(rows * vocab, 15);
  if (state.range(0) == 2) {
    for (float& x : logits) x *= 64.0f;
  }
  std::vector<SamplingParams> params(rows);
  for (int64_t r = 0; r < rows; ++r) {
    if (state.range(0) >= 1) params[r] = {.temperature = 0.8f, .top_p = 0.9f, .seed = 1};
  }
  std::vector<int32_t> out(rows);
  const SampleArgs args{.logits = logits.data(),
                        .params = params.data(),
                        .out_tokens = out.data(),
                        .num_seqs = rows,
                        .vocab_size = vocab};
  for (auto _ : state) benchmark::DoNotOptimize(cpu::Sample(args));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * rows * vocab * 4);
  state.SetLabel(state.range(0) == 0 ? "greedy"
                                     : (state.range(0) == 1 ? "top-p flat" : "top-p peaked"));
}
BENCHMARK(BM_Sample)->Arg(0)->Arg(1)->Arg(2);

}  // namespace
}  // namespace pagedkv
