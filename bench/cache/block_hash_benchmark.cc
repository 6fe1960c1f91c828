// Copyright 2026 The pagedkv Authors.
//
// Chain hashing of a 128k-token prompt in 16-token blocks, against raw XXH3-128 in the same run:
//   BM_RawXxh3_WholePrompt     one XXH3_128bits call over the prompt's 512 KiB of token bytes;
//   BM_RawXxh3_BlockChain      the bare chain: XXH3_128bits(parent ‖ 16 tokens) per block, written
//                              inline with no abstraction (the floor for a chained construction);
//   BM_HashBlockChain          pagedkv::HashBlock through the BlockHasher interface;
//   BM_CacheRequestCreate      CacheRequest::Create: copy + vocabulary check + chain hashing.
// Ratios are reported as counters ("x_whole", "x_chain") against the two raw floors measured in the
// same process (each floor runs first, so the ratios use this run's numbers). All ns counters are
// thread CPU time per prompt / block, so other processes on the machine do not skew them.
#include <xxhash.h>

#include <cstring>
#include <random>
#include <vector>

#include "bench/cache/bench_util.h"
#include "benchmark/benchmark.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/cache/cache_request.h"

namespace pagedkv {
namespace {

constexpr int kTokens = 128 * 1024;
constexpr int kBlockSize = 16;
constexpr int kBlocks = kTokens / kBlockSize;

const std::vector<TokenId>& Prompt() {
  static const std::vector<TokenId>* prompt = [] {
    auto* p = new std::vector<TokenId>(kTokens);
    std::mt19937 rng(7);
    for (TokenId& t : *p) t = static_cast<TokenId>(rng() % 32000);
    return p;
  }();
  return *prompt;
}

double g_whole_ns = 0;  // per prompt, from BM_RawXxh3_WholePrompt
double g_chain_ns = 0;  // per prompt, from BM_RawXxh3_BlockChain

void ReportRatios(benchmark::State& state, double ns_per_prompt) {
  state.counters["ns_per_block"] = ns_per_prompt / kBlocks;
  if (g_whole_ns > 0) state.counters["x_whole"] = ns_per_prompt / g_whole_ns;
  if (g_chain_ns > 0) state.counters["x_chain"] = ns_per_prompt / g_chain_ns;
}

void BM_RawXxh3_WholePrompt(benchmark::State& state) {
  const std::vector<TokenId>& p = Prompt();
  g_whole_ns = bench::MeasureCpuNs(state, [&] {
    XXH128_hash_t h = XXH3_128bits(p.data(), p.size() * sizeof(TokenId));
    benchmark::DoNotOptimize(h);
  });
  state.SetBytesProcessed(state.iterations() * kTokens * sizeof(TokenId));
  ReportRatios(state, g_whole_ns);
}
BENCHMARK(BM_RawXxh3_WholePrompt);

void BM_RawXxh3_BlockChain(benchmark::State& state) {
  const std::vector<TokenId>& p = Prompt();
  g_chain_ns = bench::MeasureCpuNs(state, [&] {
    XXH128_hash_t parent{0, 0};
    unsigned char buf[16 + kBlockSize * sizeof(TokenId)];
    for (int b = 0; b < kBlocks; ++b) {
      std::memcpy(buf, &parent.low64, 8);
      std::memcpy(buf + 8, &parent.high64, 8);
      std::memcpy(buf + 16, p.data() + b * kBlockSize, kBlockSize * sizeof(TokenId));
      parent = XXH3_128bits(buf, sizeof(buf));
    }
    benchmark::DoNotOptimize(parent);
  });
  state.SetBytesProcessed(state.iterations() * kTokens * sizeof(TokenId));
  ReportRatios(state, g_chain_ns);
}
BENCHMARK(BM_RawXxh3_BlockChain);

void BM_HashBlockChain(benchmark::State& state) {
  const std::vector<TokenId>& p = Prompt();
  std::vector<BlockHash> out(kBlocks);
  const BlockHasher& hasher = DefaultBlockHasher();
  const double ns = bench::MeasureCpuNs(state, [&] {
    BlockHash parent = kEmptyRootHash;
    for (int b = 0; b < kBlocks; ++b) {
      parent = HashBlock(hasher, parent,
                         std::span<const TokenId>(p.data() + b * kBlockSize, kBlockSize));
      out[b] = parent;
    }
    benchmark::DoNotOptimize(out.data());
  });
  state.SetBytesProcessed(state.iterations() * kTokens * sizeof(TokenId));
  ReportRatios(state, ns);
}
BENCHMARK(BM_HashBlockChain);

void BM_CacheRequestCreate(benchmark::State& state) {
  const std::vector<TokenId>& p = Prompt();
  const double ns = bench::MeasureCpuNs(state, [&] {
    auto req = CacheRequest::Create({.block_size = kBlockSize, .vocab_size = 32000}, p);
    benchmark::DoNotOptimize(req->block_hashes().data());
  });
  state.SetBytesProcessed(state.iterations() * kTokens * sizeof(TokenId));
  ReportRatios(state, ns);
}
BENCHMARK(BM_CacheRequestCreate);

// Appending a 128k-token generation one token at a time (decode): hashing stays incremental.
void BM_CacheRequestAppendOneByOne(benchmark::State& state) {
  const std::vector<TokenId>& p = Prompt();
  const double ns = bench::MeasureCpuNs(state, [&] {
    auto req = CacheRequest::Create({.block_size = kBlockSize}, {});
    for (TokenId t : p) (void)req->AppendToken(t);
    benchmark::DoNotOptimize(req->block_hashes().data());
  });
  ReportRatios(state, ns);
}
BENCHMARK(BM_CacheRequestAppendOneByOne);

}  // namespace
}  // namespace pagedkv
