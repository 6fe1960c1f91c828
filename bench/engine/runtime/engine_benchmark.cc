// Copyright 2026 The pagedkv Authors.
//
// Engine benchmarks (CPU backend; `threads` is EngineOptions::num_threads, 0 = all cores; the
// engine benchmarks time wall clock, since CPU time of the calling thread misses the workers):
//   BM_PlainDecode / BM_EngineDecode: single-sequence greedy decode from BOS, the whole engine
//     (scheduler, prefix cache, paged runner) against the plain contiguous-KV implementation of
//     the same model in the same run.
//   BM_EngineConcurrent: aggregate tokens/s of 32 concurrent requests (continuous batching).
//   BM_EngineSharedPrefixTtft: requests sharing a long system prompt, arriving one after another,
//     with prefix caching off and on: mean time to first token and prefill tokens computed.
//
//   build/bench/engine/runtime/engine_benchmark --benchmark_counters_tabular=true
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/engine/model/bench_models.h"
#include "bench/engine/model/plain_decode_benchmark.h"
#include "benchmark/benchmark.h"
#include "pagedkv/runtime/engine.h"

namespace pagedkv::bench {
namespace {

EngineOptions CpuOptions(int32_t num_threads) {
  EngineOptions o;
  o.backend = BackendKind::kCpu;
  o.num_threads = num_threads;
  return o;
}

std::vector<TokenId> RandomTokens(int n, int vocab, std::mt19937& rng) {
  std::vector<TokenId> t(static_cast<size_t>(n));
  for (TokenId& x : t) x = static_cast<TokenId>(3 + rng() % static_cast<uint32_t>(vocab - 3));
  return t;
}

void BM_EngineDecode(benchmark::State& state, const std::string& model) {
  std::shared_ptr<const ModelWeights> w = BenchModel(model);
  if (w == nullptr) return state.SkipWithError("model not available");
  const int n = DecodeLength(*w);
  auto engine = Engine::Create(w, CpuOptions(static_cast<int32_t>(state.range(0))));
  if (!engine.ok()) return state.SkipWithError(std::string(engine.status().message()).c_str());
  GenerationRequest request;
  request.prompt_tokens = {1};
  request.max_new_tokens = n;  // n forward passes: positions 0 .. n-1
  request.stop_at_eos = false;
  for (auto _ : state) {
    auto out = (*engine)->Generate({request});
    if (!out.ok()) return state.SkipWithError(std::string(out.status().message()).c_str());
    benchmark::DoNotOptimize(out->data());
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}

// 32 requests with distinct 16-token prompts, 64 new tokens each, all queued at once.
void BM_EngineConcurrent(benchmark::State& state, const std::string& model) {
  std::shared_ptr<const ModelWeights> w = BenchModel(model);
  if (w == nullptr) return state.SkipWithError("model not available");
  const int num_requests = static_cast<int>(state.range(0));
  constexpr int kPrompt = 16, kNew = 64;
  std::mt19937 rng(3);
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < num_requests; ++i) {
    GenerationRequest r;
    r.prompt_tokens = RandomTokens(kPrompt, w->config().vocab_size, rng);
    r.max_new_tokens = kNew;
    r.stop_at_eos = false;
    requests.push_back(r);
  }
  double max_batch = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto engine = Engine::Create(w, CpuOptions(static_cast<int32_t>(state.range(1))));
    if (!engine.ok()) return state.SkipWithError(std::string(engine.status().message()).c_str());
    state.ResumeTiming();
    auto out = (*engine)->Generate(requests);
    if (!out.ok()) return state.SkipWithError(std::string(out.status().message()).c_str());
    for (int32_t s : (*engine)->stats().step_num_seqs) max_batch = std::max<double>(max_batch, s);
  }
  state.counters["gen_tokens_per_s"] = benchmark::Counter(
      static_cast<double>(num_requests) * kNew, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["max_batch_seqs"] = max_batch;
}

// A 96-token system prompt (64 for the 128-context model) shared by 32 requests, each adding 8
// tokens of its own and generating 1; requests arrive one after another (each runs alone), so
// with caching on every request after the first reuses the system prompt's full blocks.
void BM_EngineSharedPrefixTtft(benchmark::State& state, const std::string& model) {
  std::shared_ptr<const ModelWeights> w = BenchModel(model);
  if (w == nullptr) return state.SkipWithError("model not available");
  const bool caching = state.range(0) != 0;
  const int system_len = w->config().seq_len >= 256 ? 192 : 96;
  constexpr int kRequests = 32, kOwn = 8;
  std::mt19937 rng(4);
  const std::vector<TokenId> system = RandomTokens(system_len, w->config().vocab_size, rng);
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < kRequests; ++i) {
    GenerationRequest r;
    r.prompt_tokens = system;
    const std::vector<TokenId> own = RandomTokens(kOwn, w->config().vocab_size, rng);
    r.prompt_tokens.insert(r.prompt_tokens.end(), own.begin(), own.end());
    r.max_new_tokens = 1;
    r.stop_at_eos = false;
    requests.push_back(r);
  }
  EngineStats last;
  double ttft_sum = 0;
  int64_t ttft_count = 0;
  for (auto _ : state) {
    EngineOptions options = CpuOptions(1);
    options.enable_prefix_caching = caching;
    auto engine = Engine::Create(w, options);
    if (!engine.ok()) return state.SkipWithError(std::string(engine.status().message()).c_str());
    const auto start = std::chrono::steady_clock::now();
    for (const GenerationRequest& r : requests) {
      auto out = (*engine)->Generate({r});
      if (!out.ok()) return state.SkipWithError(std::string(out.status().message()).c_str());
      ttft_sum += out->at(0).time_to_first_token_s;
      ++ttft_count;
    }
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    last = (*engine)->stats();
  }
  const double prompt_tokens = static_cast<double>(last.num_prompt_tokens);
  state.counters["ttft_ms"] = 1e3 * ttft_sum / static_cast<double>(ttft_count);
  // max_new_tokens = 1: the sampled token is never run through the model, so every computed
  // token is a prefill token.
  state.counters["prefill_tokens_computed"] = static_cast<double>(last.num_computed_tokens);
  state.counters["prompt_tokens"] = prompt_tokens;
  state.counters["hit_fraction"] =
      prompt_tokens > 0 ? static_cast<double>(last.num_prefix_hit_tokens) / prompt_tokens : 0.0;
}

BENCHMARK_CAPTURE(BM_PlainDecode, aidreams260K, "aidreams260K")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EngineDecode, aidreams260K, "aidreams260K")
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(0)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlainDecode, tinystories656K, "tinystories656K")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EngineDecode, tinystories656K, "tinystories656K")
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(0)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EngineConcurrent, tinystories656K, "tinystories656K")
    ->ArgNames({"requests", "threads"})
    ->Args({32, 1})
    ->Args({32, 0})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlainDecode, random15M, "random15M")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EngineDecode, random15M, "random15M")
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(0)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlainDecode, random656K, "random656K")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EngineDecode, random656K, "random656K")
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(0)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EngineConcurrent, random656K, "random656K")
    ->ArgNames({"requests", "threads"})
    ->Args({32, 1})
    ->Args({32, 0})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EngineConcurrent, aidreams260K, "aidreams260K")
    ->ArgNames({"requests", "threads"})
    ->Args({32, 1})
    ->Args({32, 0})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EngineConcurrent, random15M, "random15M")
    ->ArgNames({"requests", "threads"})
    ->Args({32, 1})
    ->Args({32, 0})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EngineSharedPrefixTtft, aidreams260K, "aidreams260K")
    ->ArgName("caching")
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EngineSharedPrefixTtft, tinystories656K, "tinystories656K")
    ->ArgName("caching")
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EngineSharedPrefixTtft, random15M, "random15M")
    ->ArgName("caching")
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pagedkv::bench
