// Copyright 2026 The pagedkv Authors.
//
// SmolLM2-135M-Instruct (GGUF Q4_1, fp32 at load unless native; scripts/fetch_models.sh) on the
// CPU engine; every benchmark skips when the file is not fetched. Wall-clock times (the engine's
// worker threads are not on the calling thread's CPU clock):
//   BM_SmolLm2Load: LoadModel (mmap, parse, dequantize every tensor, the tokenizer) and the
//     process's peak resident memory afterwards.
//   BM_SmolLm2Decode: one sequence, a 5-token prompt, 64 greedy tokens: decode tokens/s, with
//     fp32 weights (native:0) and with the file's Q4_1 / Q8_0 blocks kept (native:1).
//   BM_SmolLm2Concurrent: 32 sequences (16-token prompts, 32 new tokens each) queued at once:
//     aggregate generated tokens/s.
//   BM_SmolLm2SharedPrefixTtft: a 2,000-token shared prefix; 3 requests, one after another,
//     each adding 16 tokens of its own and generating 1, prefix caching off and on: mean TTFT.
//
//   build/bench/engine/model/smollm2_benchmark --benchmark_counters_tabular=true
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "engine/model/formats/model_files.h"
#include "pagedkv/model/model_source.h"
#include "pagedkv/runtime/engine.h"

namespace pagedkv::bench {
namespace {

const LoadedModel* LoadSmolLm2(WeightStorage storage) {
  const std::optional<std::string> path = model_internal::FindSmolLm2Gguf();
  if (!path.has_value()) return nullptr;
  absl::StatusOr<LoadedModel> m = LoadModel(*path, {.weights = storage});
  return m.ok() ? new LoadedModel(std::move(m).value()) : nullptr;
}

// The model with fp32 weights, or (native) with its Q4_1 / Q8_0 blocks kept; loaded once each.
const LoadedModel* SmolLm2(bool native = false) {
  static const LoadedModel* f32 = LoadSmolLm2(WeightStorage::kF32);
  if (!native) return f32;
  static const LoadedModel* blocks = LoadSmolLm2(WeightStorage::kNative);
  return blocks;
}

std::unique_ptr<Engine> MakeEngine(int32_t threads, int32_t blocks, bool caching = true,
                                   bool native = false) {
  EngineOptions o;
  o.backend = BackendKind::kCpu;
  o.num_threads = threads;
  o.num_kv_blocks = blocks;
  o.enable_prefix_caching = caching;
  absl::StatusOr<std::unique_ptr<Engine>> e =
      Engine::Create(SmolLm2(native)->weights, o, SmolLm2(native)->tokenizer);
  return e.ok() ? std::move(e).value() : nullptr;
}

std::vector<TokenId> RandomTokens(int n, std::mt19937& rng) {
  std::vector<TokenId> t(static_cast<size_t>(n));
  for (TokenId& x : t) x = static_cast<TokenId>(17 + rng() % (49152 - 17));  // no control tokens
  return t;
}

void BM_SmolLm2Load(benchmark::State& state) {
  const std::optional<std::string> path = model_internal::FindSmolLm2Gguf();
  if (!path.has_value()) return state.SkipWithError(model_internal::kSmolLm2Missing);
  for (auto _ : state) {
    absl::StatusOr<LoadedModel> m = LoadModel(*path);
    if (!m.ok()) return state.SkipWithError(std::string(m.status().message()).c_str());
    benchmark::DoNotOptimize(m->weights.get());
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  state.counters["peak_rss_MB"] = static_cast<double>(usage.ru_maxrss) / 1024.0;
}

void BM_SmolLm2Decode(benchmark::State& state) {
  if (SmolLm2() == nullptr) return state.SkipWithError(model_internal::kSmolLm2Missing);
  constexpr int kNew = 64;
  const bool native = state.range(1) != 0;
  if (SmolLm2(native) == nullptr) return state.SkipWithError(model_internal::kSmolLm2Missing);
  std::unique_ptr<Engine> engine =
      MakeEngine(static_cast<int32_t>(state.range(0)), 16, /*caching=*/true, native);
  if (engine == nullptr) return state.SkipWithError("engine");
  GenerationRequest r{.prompt_text = "The capital of France is", .max_new_tokens = kNew};
  r.stop_at_eos = false;
  for (auto _ : state) {
    auto out = engine->Generate({r});
    if (!out.ok()) return state.SkipWithError(std::string(out.status().message()).c_str());
    benchmark::DoNotOptimize(out->data());
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(kNew, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_SmolLm2Concurrent(benchmark::State& state) {
  if (SmolLm2() == nullptr) return state.SkipWithError(model_internal::kSmolLm2Missing);
  constexpr int kRequests = 32, kPrompt = 16, kNew = 32;
  std::mt19937 rng(3);
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < kRequests; ++i) {
    requests.push_back({.prompt_tokens = RandomTokens(kPrompt, rng), .max_new_tokens = kNew});
    requests.back().stop_at_eos = false;
  }
  for (auto _ : state) {
    state.PauseTiming();
    std::unique_ptr<Engine> engine = MakeEngine(static_cast<int32_t>(state.range(0)), 128);
    if (engine == nullptr) return state.SkipWithError("engine");
    state.ResumeTiming();
    auto out = engine->Generate(requests);
    if (!out.ok()) return state.SkipWithError(std::string(out.status().message()).c_str());
  }
  state.counters["gen_tokens_per_s"] =
      benchmark::Counter(kRequests * kNew, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_SmolLm2SharedPrefixTtft(benchmark::State& state) {
  if (SmolLm2() == nullptr) return state.SkipWithError(model_internal::kSmolLm2Missing);
  constexpr int kPrefix = 2000, kOwn = 16, kRequests = 3;
  std::mt19937 rng(4);
  const std::vector<TokenId> prefix = RandomTokens(kPrefix, rng);
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < kRequests; ++i) {
    GenerationRequest r{.prompt_tokens = prefix, .max_new_tokens = 1};
    const std::vector<TokenId> own = RandomTokens(kOwn, rng);
    r.prompt_tokens.insert(r.prompt_tokens.end(), own.begin(), own.end());
    r.stop_at_eos = false;
    requests.push_back(std::move(r));
  }
  double ttft_first = 0, ttft_later = 0;
  EngineStats last;
  for (auto _ : state) {
    std::unique_ptr<Engine> engine =
        MakeEngine(0, 2 * (kPrefix + kOwn) / 16 + 8, state.range(0) != 0);
    if (engine == nullptr) return state.SkipWithError("engine");
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kRequests; ++i) {
      auto out = engine->Generate({requests[static_cast<size_t>(i)]});
      if (!out.ok()) return state.SkipWithError(std::string(out.status().message()).c_str());
      (i == 0 ? ttft_first : ttft_later) += out->at(0).time_to_first_token_s;
    }
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    last = engine->stats();
  }
  const auto iters = static_cast<double>(state.iterations());
  state.counters["ttft_first_ms"] = 1e3 * ttft_first / iters;
  state.counters["ttft_later_ms"] = 1e3 * ttft_later / iters / (kRequests - 1);
  state.counters["prefill_tokens_computed"] = static_cast<double>(last.num_computed_tokens);
  state.counters["prefix_hit_tokens"] = static_cast<double>(last.num_prefix_hit_tokens);
}

// Decode at a 2,048-token context (issue 41): the prompt's KV is cached once, then each iteration
// decodes kNew tokens after it; decode_tokens_per_s counts the steps after the first token
// (latency - TTFT). Args: threads (0: all), KV dtype (pagedkv/dtype.h value), V's dtype when it
// differs (-1: K's).
void BM_SmolLm2DecodeLongContext(benchmark::State& state) {
  if (SmolLm2(true) == nullptr) return state.SkipWithError(model_internal::kSmolLm2Missing);
  constexpr int kContext = 2048, kNew = 48;
  EngineOptions o;
  o.backend = BackendKind::kCpu;
  o.num_threads = static_cast<int32_t>(state.range(0));
  o.kv_dtype = static_cast<DType>(state.range(1));
  if (state.range(2) >= 0) o.kv_dtype_v = static_cast<DType>(state.range(2));
  o.num_kv_blocks = 2 * (kContext + kNew) / 16 + 8;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(SmolLm2(true)->weights, o, SmolLm2(true)->tokenizer);
  if (!engine.ok()) return state.SkipWithError(std::string(engine.status().message()).c_str());
  std::mt19937 rng(5);
  GenerationRequest r{.prompt_tokens = RandomTokens(kContext, rng), .max_new_tokens = kNew};
  r.stop_at_eos = false;
  if (!(*engine)->Generate({r}).ok()) return state.SkipWithError("warm-up");
  double decode_seconds = 0;
  for (auto _ : state) {
    auto out = (*engine)->Generate({r});
    if (!out.ok()) return state.SkipWithError(std::string(out.status().message()).c_str());
    decode_seconds += out->at(0).latency_s - out->at(0).time_to_first_token_s;
  }
  state.counters["decode_tokens_per_s"] =
      static_cast<double>(state.iterations()) * (kNew - 1) / decode_seconds;
  state.SetLabel(KvDTypesName(o.kv_dtype, o.KvDTypeV()));
}

BENCHMARK(BM_SmolLm2Load)->Iterations(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SmolLm2DecodeLongContext)
    ->ArgNames({"threads", "dtype", "v_dtype"})
    ->ArgsProduct({{1, 2}, {0, 2, 3, 4, 6, 7}, {-1}})
    ->Args({1, 6, 7})  // q8_0 keys, q4_0 values
    ->Args({2, 6, 7})
    ->Iterations(3)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SmolLm2Decode)
    ->ArgNames({"threads", "native"})
    ->Args({1, 0})
    ->Args({0, 0})
    ->Args({1, 1})
    ->Args({0, 1})
    ->Iterations(2)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SmolLm2Concurrent)
    ->ArgName("threads")
    ->Arg(0)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SmolLm2SharedPrefixTtft)
    ->ArgName("caching")
    ->Arg(0)
    ->Arg(1)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pagedkv::bench
