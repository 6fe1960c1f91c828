// Copyright 2026 The pagedkv Authors.
//
// Speculative decoding by prompt lookup (EngineOptions.speculative) on the CPU backend:
// single-sequence greedy decode from BOS with K = 0 (plain) and K draft tokens per step, in the
// same run. Counters: generated tokens/s (wall), engine steps, draft tokens, acceptance rate.
//
//   build/bench/engine/runtime/speculative_benchmark --benchmark_counters_tabular=true
#include <cstdint>
#include <memory>
#include <string>

#include "bench/engine/model/bench_models.h"
#include "bench/engine/model/plain_decode_benchmark.h"
#include "benchmark/benchmark.h"
#include "pagedkv/runtime/engine.h"

namespace pagedkv::bench {
namespace {

void BM_SpeculativeDecode(benchmark::State& state, const std::string& model) {
  std::shared_ptr<const ModelWeights> w = BenchModel(model);
  if (w == nullptr) return state.SkipWithError("model not available");
  EngineOptions o;
  o.backend = BackendKind::kCpu;
  o.num_threads = 1;
  o.speculative.num_speculative_tokens = static_cast<int32_t>(state.range(0));
  GenerationRequest request;
  request.prompt_tokens = {1};
  request.max_new_tokens = DecodeLength(*w);
  request.stop_at_eos = false;
  EngineStats last;
  for (auto _ : state) {
    // A fresh engine per iteration: a warm prefix cache would serve the repeated prompt.
    auto engine = Engine::Create(w, o);
    if (!engine.ok()) return state.SkipWithError(std::string(engine.status().message()).c_str());
    auto out = (*engine)->Generate({request});
    if (!out.ok()) return state.SkipWithError(std::string(out.status().message()).c_str());
    benchmark::DoNotOptimize(out->data());
    last = (*engine)->stats();
  }
  state.counters["tokens_per_s"] = benchmark::Counter(
      static_cast<double>(request.max_new_tokens), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["steps"] = static_cast<double>(last.num_steps);
  state.counters["drafts"] = static_cast<double>(last.num_draft_tokens);
  state.counters["acceptance"] = last.num_draft_tokens > 0
                                     ? static_cast<double>(last.num_accepted_draft_tokens) /
                                           static_cast<double>(last.num_draft_tokens)
                                     : 0.0;
}

// K = 0 (plain decoding), 2, 4 and 8 draft tokens.
void DraftSweep(benchmark::internal::Benchmark* b) {
  b->ArgName("k")->Arg(0)->Arg(2)->Arg(4)->Arg(8)->UseRealTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK_CAPTURE(BM_SpeculativeDecode, aidreams260K, "aidreams260K")->Apply(DraftSweep);
BENCHMARK_CAPTURE(BM_SpeculativeDecode, tinystories656K, "tinystories656K")->Apply(DraftSweep);
BENCHMARK_CAPTURE(BM_SpeculativeDecode, random15M, "random15M")
    ->ArgName("k")
    ->Arg(0)
    ->Arg(4)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pagedkv::bench
