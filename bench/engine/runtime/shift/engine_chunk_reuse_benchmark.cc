// Copyright 2026 The pagedkv Authors.
//
// Shifted-position reuse inside the Engine (CPU backend, one thread): the prefill of a request
// whose prompt holds a document (a marked chunk) that another request computed at another
// position, with chunk reuse off (full recompute), plain re-rotation, and re-rotation + CacheBlend
// selective recompute at a few fractions (deviation layer 1).
//
// Each iteration runs one request (a head of `seq_len / 8` random tokens, a different one each
// time so the document's position changes, the document of `seq_len / 2` tokens, 8 tail tokens;
// one token generated: its prefill). Prefix caching is off so that only chunk reuse saves work.
// Counters: prefill tokens in the batch per request, the layer-token work against a full prefill
// (tokens that stop after the deviation layer count deviation_layer + 1 layers), and, measured
// once outside the timing over 8 heads, the mean KL(full || variant) of the first generated
// token's distribution and top-1 agreement (random tokens: a smoke measure of quality, the
// study-shift tool measures it properly).
//
// BM_EngineChunkFloatKeys: the same over int8 KV pages with ChunkReuseOptions::float_keys_memory
// off or on (float_keys 0 / 1): `reuse` requests move the document (from its float keys when
// kept), `register` requests bring a new document each time (computed, its float keys captured
// and kept): what keeping them costs in time, and the first token's KL against full recompute
// over the same int8 pages.
//
//   build/bench/engine/runtime/shift/engine_chunk_reuse_benchmark --benchmark_counters_tabular=true
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/engine/model/bench_models.h"
#include "benchmark/benchmark.h"
#include "engine/tools/study/next_token_metrics.h"
#include "pagedkv/runtime/engine.h"

namespace pagedkv::bench {
namespace {

constexpr int kHeads = 8;
constexpr int kTail = 8;
constexpr int32_t kDeviationLayer = 1;

std::vector<TokenId> RandomTokens(int n, int vocab, std::mt19937& rng) {
  std::vector<TokenId> t(static_cast<size_t>(n));
  for (TokenId& x : t) x = static_cast<TokenId>(3 + rng() % static_cast<uint32_t>(vocab - 3));
  return t;
}

// fraction_percent < 0: chunk reuse off; 0: plain re-rotation; > 0: CacheBlend at that percent.
// float_keys: int8 pages, with the chunks' float keys kept (64 MiB) when true.
EngineOptions Options(int64_t fraction_percent, std::optional<bool> float_keys = std::nullopt) {
  EngineOptions o;
  o.backend = BackendKind::kCpu;
  o.num_threads = 1;
  o.enable_prefix_caching = false;
  o.return_logits = true;
  if (fraction_percent >= 0) {
    o.chunk_reuse.mode = ChunkReuseMode::kReRotate;
    o.chunk_reuse.recompute_fraction = static_cast<double>(fraction_percent) / 100.0;
    o.chunk_reuse.deviation_layer = kDeviationLayer;
  }
  if (float_keys.has_value()) {
    o.kv_dtype = DType::kInt8;
    if (fraction_percent >= 0 && *float_keys) o.chunk_reuse.float_keys_memory = int64_t{64} << 20;
  }
  return o;
}

struct Workload {
  GenerationRequest first;                  // computes and registers the document
  std::vector<GenerationRequest> requests;  // reuse it at other positions
};

Workload MakeWorkload(const ModelConfig& c) {
  std::mt19937 rng(11);
  const int doc_len = c.seq_len / 2, head_len = c.seq_len / 8;
  const std::vector<TokenId> doc = RandomTokens(doc_len, c.vocab_size, rng);
  auto with_head = [&](int head) {
    GenerationRequest r;
    r.prompt_tokens = {1};
    const std::vector<TokenId> h = RandomTokens(head, c.vocab_size, rng);
    r.prompt_tokens.insert(r.prompt_tokens.end(), h.begin(), h.end());
    r.chunks = {{.offset = static_cast<int32_t>(r.prompt_tokens.size()), .length = doc_len}};
    r.prompt_tokens.insert(r.prompt_tokens.end(), doc.begin(), doc.end());
    const std::vector<TokenId> t = RandomTokens(kTail, c.vocab_size, rng);
    r.prompt_tokens.insert(r.prompt_tokens.end(), t.begin(), t.end());
    r.max_new_tokens = 1;
    r.stop_at_eos = false;
    return r;
  };
  Workload w;
  w.first = with_head(3);
  for (int i = 0; i < kHeads; ++i) w.requests.push_back(with_head(head_len - i));
  return w;
}

// Request `i` of a register run: the workload's i-th request with a new random document.
GenerationRequest WithNewDocument(const GenerationRequest& r, int vocab, std::mt19937& rng) {
  GenerationRequest out = r;
  const PromptChunk& chunk = r.chunks[0];
  const std::vector<TokenId> doc = RandomTokens(chunk.length, vocab, rng);
  std::copy(doc.begin(), doc.end(), out.prompt_tokens.begin() + chunk.offset);
  return out;
}

// The first generated token's logits of each request (after `first`), on a fresh engine.
std::vector<std::vector<float>> FirstTokenLogits(std::shared_ptr<const ModelWeights> w,
                                                 const EngineOptions& options,
                                                 const Workload& workload) {
  auto engine = Engine::Create(w, options);
  std::vector<std::vector<float>> rows;
  if (!engine.ok() || !(*engine)->Generate({workload.first}).ok()) return rows;
  for (const GenerationRequest& r : workload.requests) {
    if (!(*engine)->AddRequest(r).ok()) return {};
    while ((*engine)->HasUnfinishedRequests()) {
      auto step = (*engine)->Step();
      if (!step.ok()) return {};
      if (!step->tokens.empty()) rows.push_back(step->logits);
    }
  }
  return rows;
}

// The counters kl_first_token and top1_agree: the first token of each request under `approx`
// against `exact`, measured outside the timing.
void AddQualityCounters(std::shared_ptr<const ModelWeights> w, const EngineOptions& exact_options,
                        const EngineOptions& approx_options, const Workload& workload,
                        benchmark::State& state) {
  const auto exact = FirstTokenLogits(w, exact_options, workload);
  const auto approx = FirstTokenLogits(w, approx_options, workload);
  NextTokenMetrics metrics;
  for (size_t i = 0; i < exact.size() && i < approx.size(); ++i) {
    if (!metrics.Add(exact[i], approx[i], w->config().vocab_size, {}).ok()) {
      return state.SkipWithError("metrics failed");
    }
  }
  state.counters["kl_first_token"] = metrics.MeanKl();
  state.counters["top1_agree"] = metrics.Top1Agreement();
}

void BM_EngineChunkReusePrefill(benchmark::State& state, const std::string& model) {
  std::shared_ptr<const ModelWeights> w = BenchModel(model);
  if (w == nullptr) return state.SkipWithError("model not available");
  const int64_t percent = state.range(0);
  const Workload workload = MakeWorkload(w->config());
  auto engine = Engine::Create(w, Options(percent));
  if (!engine.ok()) return state.SkipWithError(std::string(engine.status().message()).c_str());
  if (!(*engine)->Generate({workload.first}).ok()) return state.SkipWithError("first failed");
  const EngineStats before = (*engine)->stats();
  size_t next = 0;
  int64_t runs = 0;
  for (auto _ : state) {
    auto out = (*engine)->Generate({workload.requests[next]});
    if (!out.ok()) return state.SkipWithError(std::string(out.status().message()).c_str());
    benchmark::DoNotOptimize(out->data());
    next = (next + 1) % workload.requests.size();
    ++runs;
  }
  const EngineStats& s = (*engine)->stats();
  const double n = static_cast<double>(runs);
  const double layers = w->config().n_layers;
  const double computed = static_cast<double>(s.num_computed_tokens - before.num_computed_tokens);
  const double prompt = static_cast<double>(s.num_prompt_tokens - before.num_prompt_tokens);
  const double partial =
      static_cast<double>(s.num_blend_partial_tokens - before.num_blend_partial_tokens);
  state.counters["prefill_tokens"] = computed / n;
  state.counters["shifted_hits"] =
      static_cast<double>(s.num_shifted_hit_tokens - before.num_shifted_hit_tokens) / n;
  state.counters["blend_full"] =
      static_cast<double>(s.num_blend_recomputed_tokens - before.num_blend_recomputed_tokens) / n;
  state.counters["work_fraction"] =
      (computed * layers - partial * (layers - kDeviationLayer - 1)) / (prompt * layers);

  AddQualityCounters(w, Options(-1), Options(percent), workload, state);
}

void BM_EngineChunkFloatKeys(benchmark::State& state, const std::string& model) {
  std::shared_ptr<const ModelWeights> w = BenchModel(model);
  if (w == nullptr) return state.SkipWithError("model not available");
  const bool float_keys = state.range(0) != 0, register_runs = state.range(1) != 0;
  const Workload workload = MakeWorkload(w->config());
  auto engine = Engine::Create(w, Options(0, float_keys));
  if (!engine.ok()) return state.SkipWithError(std::string(engine.status().message()).c_str());
  if (!(*engine)->Generate({workload.first}).ok()) return state.SkipWithError("first failed");
  std::mt19937 rng(23);
  size_t next = 0;
  for (auto _ : state) {
    GenerationRequest r = workload.requests[next];
    if (register_runs) {
      state.PauseTiming();
      r = WithNewDocument(r, w->config().vocab_size, rng);
      state.ResumeTiming();
    }
    auto out = (*engine)->Generate({r});
    if (!out.ok()) return state.SkipWithError(std::string(out.status().message()).c_str());
    benchmark::DoNotOptimize(out->data());
    next = (next + 1) % workload.requests.size();
  }
  state.counters["shifted_hits"] =
      benchmark::Counter(static_cast<double>((*engine)->stats().num_shifted_hit_tokens),
                         benchmark::Counter::kAvgIterations);
  AddQualityCounters(w, Options(-1, false), Options(0, float_keys), workload, state);
}

BENCHMARK_CAPTURE(BM_EngineChunkReusePrefill, aidreams260K, "aidreams260K")
    ->ArgName("blend_pct")
    ->Arg(-1)
    ->Arg(0)
    ->Arg(15)
    ->Arg(50)
    ->Arg(100)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EngineChunkReusePrefill, tinystories656K, "tinystories656K")
    ->ArgName("blend_pct")
    ->Arg(-1)
    ->Arg(0)
    ->Arg(15)
    ->Arg(50)
    ->Arg(100)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EngineChunkReusePrefill, random15M, "random15M")
    ->ArgName("blend_pct")
    ->Arg(-1)
    ->Arg(0)
    ->Arg(15)
    ->Arg(50)
    ->Arg(100)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EngineChunkFloatKeys, tinystories656K, "tinystories656K")
    ->ArgNames({"float_keys", "register"})
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EngineChunkFloatKeys, random15M, "random15M")
    ->ArgNames({"float_keys", "register"})
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pagedkv::bench
