// Copyright 2026 The pagedkv Authors.
//
// The engine over a KvCacheManager of several KV cache groups (issue 31,
// EngineOptions::hybrid_kv_cache): random-weight Qwen2 directories mixing full and sliding-window
// layers run with hybrid on and off give EQUAL greedy ids (block sizes 4 and 16, whole and chunked
// prefill, three concurrent requests, a prefix hit on a later request), and those ids match the
// masked float64 reference (tests/engine/model/hf_test_model.h). The hybrid engine holds fewer
// layer-blocks for a long request, buys more blocks with the same memory, refuses CacheBlend
// when on, and falls back to all-full under auto (tiers: engine_hybrid_tiers_test.cc; chunk
// reuse: engine_hybrid_chunk_reuse_test.cc).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/runner/backend.h"
#include "engine/model/runner/model_runner.h"
#include "engine/runtime/kv_groups.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/events/kv_event_batch.h"
#include "pagedkv/events/kv_events.h"
#include "pagedkv/model/model_source.h"
#include "pagedkv/runtime/engine.h"
#include "pagedkv/types.h"
#include "tests/engine/model/hf_reference_check.h"
#include "tests/engine/model/hf_test_model.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::ExpectGreedyMatchesReference;
using ::pagedkv::testing::HfTestModel;
using ::pagedkv::testing::HfTestSpec;
using ::pagedkv::testing::MakeHfTestModel;

constexpr int kNewTokens = 8;

// Qwen2 with `types` ("s": sliding_attention at window 4, "f": full_attention).
HfTestModel Qwen2(const std::string& types, uint64_t seed) {
  HfTestSpec spec;
  spec.arch = "Qwen2ForCausalLM";
  spec.layers = static_cast<int>(types.size());
  nlohmann::json layer_types = nlohmann::json::array();
  for (char t : types) {
    spec.layer_window.push_back(t == 's' ? 4 : 0);
    layer_types.push_back(t == 's' ? "sliding_attention" : "full_attention");
  }
  spec.config_patch = {
      {"use_sliding_window", true}, {"sliding_window", 4}, {"layer_types", layer_types}};
  return MakeHfTestModel(spec, seed);
}

std::shared_ptr<const ModelWeights> Load(const HfTestModel& model, const std::string& name) {
  absl::StatusOr<LoadedModel> loaded = LoadModel(model.Write("hybrid_" + name).string());
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return loaded.ok() ? loaded->weights : nullptr;
}

std::vector<TokenId> Prompt(int length, int mul, int add, int vocab) {
  std::vector<TokenId> p(static_cast<size_t>(length));
  for (int t = 0; t < length; ++t) p[static_cast<size_t>(t)] = (t * mul + add) % vocab;
  return p;
}

// Generated ids of `prompts` run together, then of `later` (a prefix hit on prompts[0]).
struct RunResult {
  std::vector<std::vector<TokenId>> outputs;
  int32_t later_hit_tokens = 0;
  bool hybrid = false;
  int64_t preemptions = 0;
};

RunResult RunEngine(std::shared_ptr<const ModelWeights> weights, HybridKvCacheMode mode,
                    int32_t block_size, int32_t chunk,
                    const std::vector<std::vector<TokenId>>& prompts,
                    const std::vector<TokenId>& later, BackendKind backend = BackendKind::kCpu,
                    int32_t num_kv_blocks = 96) {
  EngineOptions options;
  options.backend = backend;
  options.block_size = block_size;
  options.num_kv_blocks = num_kv_blocks;
  options.scheduler.long_prefill_token_threshold = chunk;
  options.hybrid_kv_cache = mode;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(std::move(weights), options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  RunResult result;
  if (!engine.ok()) return result;
  result.hybrid = (*engine)->kv_cache_layout().hybrid;
  std::vector<GenerationRequest> requests;
  for (const std::vector<TokenId>& p : prompts) {
    GenerationRequest r{.prompt_tokens = p, .max_new_tokens = kNewTokens};
    r.stop_at_eos = false;
    requests.push_back(std::move(r));
  }
  absl::StatusOr<std::vector<GenerationResult>> out = (*engine)->Generate(std::move(requests));
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return result;
  for (const GenerationResult& r : *out) result.outputs.push_back(r.output_tokens);
  GenerationRequest r{.prompt_tokens = later, .max_new_tokens = kNewTokens};
  r.stop_at_eos = false;
  out = (*engine)->Generate({r});
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return result;
  result.outputs.push_back((*out)[0].output_tokens);
  result.later_hit_tokens = (*out)[0].num_prefix_hit_tokens;
  result.preemptions = (*engine)->stats().num_preemptions;
  const KvCacheManager& h = (*engine)->kv_cache_manager();
  EXPECT_TRUE(h.ValidateInvariants().ok()) << h.ValidateInvariants();
  EXPECT_EQ(h.NumRequests(), 0);
  return result;
}

TEST(EngineHybridKvTest, HybridGivesTheSameGreedyIdsAsAllFull) {
  // "sfsf": 2 groups of 2 layers (2 page arrays); "sfs": 3 groups of 1 layer.
  for (const std::string types : {"sfsf", "sfs"}) {
    const HfTestModel model = Qwen2(types, 47);
    std::shared_ptr<const ModelWeights> weights = Load(model, types);
    ASSERT_NE(weights, nullptr);
    const int vocab = model.spec.vocab;
    const std::vector<std::vector<TokenId>> prompts = {
        Prompt(22, 29, 3, vocab), Prompt(13, 17, 5, vocab), Prompt(30, 7, 11, vocab)};
    std::vector<TokenId> later(prompts[0].begin(), prompts[0].begin() + 16);
    for (int t = 0; t < 9; ++t) later.push_back((t * 13 + 1) % vocab);
    for (int32_t block_size : {4, 16}) {
      for (int32_t chunk : {0, 5}) {
        const std::string trace =
            types + " block_size " + std::to_string(block_size) + " chunk " + std::to_string(chunk);
        const RunResult on =
            RunEngine(weights, HybridKvCacheMode::kOn, block_size, chunk, prompts, later);
        const RunResult off =
            RunEngine(weights, HybridKvCacheMode::kOff, block_size, chunk, prompts, later);
        EXPECT_TRUE(on.hybrid) << trace;
        EXPECT_FALSE(off.hybrid) << trace;
        ASSERT_EQ(on.outputs.size(), 4u) << trace;
        EXPECT_EQ(on.outputs, off.outputs) << trace;
        EXPECT_EQ(on.later_hit_tokens, 16) << trace;
        EXPECT_EQ(off.later_hit_tokens, 16) << trace;
        int checked = 0;
        for (size_t i = 0; i < on.outputs.size(); ++i) {
          const std::vector<TokenId>& prompt = i < prompts.size() ? prompts[i] : later;
          checked += ExpectGreedyMatchesReference(model, prompt, on.outputs[i], trace);
        }
        EXPECT_GE(checked, 2 * kNewTokens) << trace << ": too many near-ties";
      }
    }
  }
}

// The CUDA backend (skipped without a device): hybrid on gives hybrid off's ids.
TEST(EngineHybridKvTest, CudaHybridMatchesAllFull) {
  if (!CudaBackendAvailable()) GTEST_SKIP() << "no CUDA device";
  const HfTestModel model = Qwen2("sfsf", 47);
  std::shared_ptr<const ModelWeights> weights = Load(model, "cuda");
  ASSERT_NE(weights, nullptr);
  const int vocab = model.spec.vocab;
  const std::vector<std::vector<TokenId>> prompts = {Prompt(22, 29, 3, vocab),
                                                     Prompt(30, 7, 11, vocab)};
  std::vector<TokenId> later(prompts[0].begin(), prompts[0].begin() + 16);
  for (int t = 0; t < 9; ++t) later.push_back((t * 13 + 1) % vocab);
  for (int32_t block_size : {4, 16}) {
    const RunResult cuda = RunEngine(weights, HybridKvCacheMode::kOn, block_size, 5, prompts, later,
                                     BackendKind::kCuda);
    const RunResult off = RunEngine(weights, HybridKvCacheMode::kOff, block_size, 5, prompts, later,
                                    BackendKind::kCuda);
    EXPECT_TRUE(cuda.hybrid);
    EXPECT_EQ(cuda.outputs, off.outputs) << "block_size " << block_size;
  }
}

// A pool too small for the three requests at once: preemption (recompute) over the hybrid manager
// keeps the ids.
TEST(EngineHybridKvTest, PreemptionKeepsTheIds) {
  const HfTestModel model = Qwen2("sfs", 61);
  std::shared_ptr<const ModelWeights> weights = Load(model, "preempt");
  ASSERT_NE(weights, nullptr);
  const int vocab = model.spec.vocab;
  const std::vector<std::vector<TokenId>> prompts = {
      Prompt(22, 29, 3, vocab), Prompt(26, 17, 5, vocab), Prompt(30, 7, 11, vocab)};
  const std::vector<TokenId> later = Prompt(12, 5, 2, vocab);
  const RunResult on = RunEngine(weights, HybridKvCacheMode::kOn, 4, 5, prompts, later,
                                 BackendKind::kCpu, /*num_kv_blocks=*/30);
  const RunResult off = RunEngine(weights, HybridKvCacheMode::kOff, 4, 5, prompts, later);
  EXPECT_TRUE(on.hybrid);
  EXPECT_GT(on.preemptions, 0);
  EXPECT_EQ(on.outputs, off.outputs);
}

TEST(EngineHybridKvTest, ModelRunnerChecksLayerGroups) {
  const HfTestModel model = Qwen2("sfsf", 67);
  std::shared_ptr<const ModelWeights> weights = Load(model, "runner");
  ASSERT_NE(weights, nullptr);
  absl::StatusOr<std::unique_ptr<ModelRunner>> runner = ModelRunner::Create(
      weights, {.backend = BackendKind::kCpu, .num_blocks = 8, .layer_kv_group = {1, 0, 1, 0}});
  ASSERT_TRUE(runner.ok()) << runner.status();
  EXPECT_EQ((*runner)->num_kv_groups(), 2);
  EXPECT_EQ((*runner)->num_kv_page_arrays(), 2);
  EXPECT_EQ((*runner)->kv_layout(0).k, (*runner)->kv_layout(1).k);  // both index 0 of a group
  EXPECT_NE((*runner)->kv_layout(0).k, (*runner)->kv_layout(2).k);
  for (const std::vector<int32_t>& bad :
       std::vector<std::vector<int32_t>>{{0, 0, 0}, {0, 2, 0, 2}, {0, -1, 0, 1}}) {
    runner = ModelRunner::Create(
        weights, {.backend = BackendKind::kCpu, .num_blocks = 8, .layer_kv_group = bad});
    EXPECT_EQ(runner.status().code(), absl::StatusCode::kInvalidArgument) << bad.size();
  }
}

TEST(EngineHybridKvTest, HoldsFewerLayerBlocksAndBuysMoreBlocks) {
  const HfTestModel model = Qwen2("sfsf", 53);
  std::shared_ptr<const ModelWeights> weights = Load(model, "held");
  ASSERT_NE(weights, nullptr);
  EngineOptions options;
  options.backend = BackendKind::kCpu;
  options.block_size = 4;
  options.kv_cache_memory = int64_t{1} << 20;
  options.hybrid_kv_cache = HybridKvCacheMode::kOn;
  absl::StatusOr<std::unique_ptr<Engine>> hybrid = Engine::Create(weights, options);
  ASSERT_TRUE(hybrid.ok()) << hybrid.status();
  options.hybrid_kv_cache = HybridKvCacheMode::kOff;
  absl::StatusOr<std::unique_ptr<Engine>> full = Engine::Create(weights, options);
  ASSERT_TRUE(full.ok()) << full.status();
  // The same bytes: a hybrid block holds 2 layers' pages, a full one 4.
  EXPECT_EQ((*hybrid)->kv_cache_layout().layers_per_block, 2);
  EXPECT_EQ((*hybrid)->kv_pool().num_blocks, 2 * (*full)->kv_pool().num_blocks);
  EXPECT_EQ((*hybrid)->kv_pool().bytes, (*full)->kv_pool().bytes);

  GenerationRequest r{.prompt_tokens = Prompt(40, 29, 3, model.spec.vocab), .max_new_tokens = 8};
  r.stop_at_eos = false;
  absl::StatusOr<RequestId> id = (*hybrid)->AddRequest(r);
  ASSERT_TRUE(id.ok()) << id.status();
  KvCacheManager* cache = &(*hybrid)->kv_cache_manager();
  ASSERT_EQ(cache->num_groups(), 2);
  int64_t held = 0, tokens = 0;
  for (int step = 0; step < 4; ++step) {  // the prompt, then 3 decode steps
    ASSERT_TRUE((*hybrid)->Step().ok());
    ASSERT_TRUE(cache->HasRequest(*id));
    absl::StatusOr<int64_t> layer_blocks = cache->NumHeldLayerBlocks(*id);
    absl::StatusOr<int64_t> allocated = cache->NumAllocatedTokens(*id);
    ASSERT_TRUE(layer_blocks.ok() && allocated.ok());
    held = *layer_blocks;
    tokens = *allocated;
  }
  // All-full: every one of the 4 layers keeps every block of the request's tokens.
  const int64_t all_full = 4 * NumBlocksFor(tokens, 4);
  RecordProperty("tokens", static_cast<int>(tokens));
  RecordProperty("hybrid_layer_blocks", static_cast<int>(held));
  RecordProperty("all_full_layer_blocks", static_cast<int>(all_full));
  EXPECT_LT(held, all_full) << "tokens " << tokens;
  EXPECT_LE(held, 2 * NumBlocksFor(tokens, 4) + 2 * 3) << "window groups keep about 2 blocks";
}

// Speculative decoding, cache priorities and block metrics run over several KV cache groups
// (issue #40) and keep the all-full engine's greedy ids: drafts get lookahead slots in every
// group.
TEST(EngineHybridKvTest, SpeculationPrioritiesAndMetricsRunOverGroups) {
  const HfTestModel model = Qwen2("sfsf", 61);
  std::shared_ptr<const ModelWeights> weights = Load(model, "features");
  ASSERT_NE(weights, nullptr);
  // Repeating prompts, so prompt lookup finds n-grams to propose.
  std::vector<TokenId> repeating;
  for (int r = 0; r < 6; ++r) {
    for (int t = 0; t < 5; ++t) repeating.push_back((t * 7 + 3) % model.spec.vocab);
  }
  std::vector<std::vector<TokenId>> outputs[2];
  int64_t drafts[2] = {0, 0};
  for (int on = 0; on < 2; ++on) {
    EngineOptions options;
    options.backend = BackendKind::kCpu;
    options.block_size = 4;
    options.num_kv_blocks = 96;
    options.speculative.num_speculative_tokens = 3;
    options.enable_cache_priorities = true;
    options.collect_block_metrics = true;
    options.hybrid_kv_cache = on ? HybridKvCacheMode::kOn : HybridKvCacheMode::kOff;
    absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(weights, options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    EXPECT_EQ((*engine)->kv_cache_layout().hybrid, on == 1);
    std::vector<GenerationRequest> requests;
    for (int i = 0; i < 2; ++i) {
      GenerationRequest r{.prompt_tokens = repeating, .max_new_tokens = 12};
      r.prompt_tokens.push_back(i + 1);
      r.stop_at_eos = false;
      r.cache_priority = {.priority = 80};
      requests.push_back(std::move(r));
    }
    absl::StatusOr<std::vector<GenerationResult>> out = (*engine)->Generate(std::move(requests));
    ASSERT_TRUE(out.ok()) << out.status();
    for (const GenerationResult& r : *out) outputs[on].push_back(r.output_tokens);
    drafts[on] = (*engine)->stats().num_draft_tokens;
    const KvCacheManager& cache = (*engine)->kv_cache_manager();
    EXPECT_TRUE(cache.ValidateInvariants().ok()) << cache.ValidateInvariants();
    EXPECT_NE(cache.block_metrics(), nullptr);
  }
  EXPECT_EQ(outputs[1], outputs[0]);
  EXPECT_GT(drafts[1], 0) << "no drafts were proposed: the test proves nothing";
}

TEST(EngineHybridKvTest, OnRefusesIncompatibleOptionsAndAutoFallsBack) {
  const HfTestModel model = Qwen2("sfsf", 59);
  std::shared_ptr<const ModelWeights> weights = Load(model, "refuse");
  ASSERT_NE(weights, nullptr);
  struct Case {
    std::string name;
    void (*set)(EngineOptions&);
  };
  const Case cases[] = {
      {"chunk_reuse.recompute_fraction",
       [](EngineOptions& o) {
         o.chunk_reuse.mode = ChunkReuseMode::kReRotate;
         o.chunk_reuse.recompute_fraction = 0.5;
       }},
  };
  for (const Case& c : cases) {
    EngineOptions options;
    options.backend = BackendKind::kCpu;
    options.num_kv_blocks = 32;
    c.set(options);
    options.hybrid_kv_cache = HybridKvCacheMode::kOn;
    absl::StatusOr<std::unique_ptr<Engine>> on = Engine::Create(weights, options);
    ASSERT_FALSE(on.ok()) << c.name;
    EXPECT_EQ(on.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(on.status().message().find(c.name), std::string::npos) << on.status();
    options.hybrid_kv_cache = HybridKvCacheMode::kAuto;
    absl::StatusOr<std::unique_ptr<Engine>> fallback = Engine::Create(weights, options);
    ASSERT_TRUE(fallback.ok()) << c.name << ": " << fallback.status();
    EXPECT_FALSE((*fallback)->kv_cache_layout().hybrid) << c.name;
    EXPECT_EQ((*fallback)->kv_cache_manager().num_groups(), 1);
    EXPECT_NE((*fallback)->kv_cache_layout().reason.find(c.name), std::string::npos)
        << (*fallback)->kv_cache_layout().reason;
    EXPECT_EQ((*fallback)->kv_cache_manager().num_blocks(), 32) << c.name;
  }
  EngineOptions options;
  options.backend = BackendKind::kCpu;
  options.num_kv_blocks = 32;
  options.hybrid_kv_cache = HybridKvCacheMode::kAuto;
  absl::StatusOr<std::unique_ptr<Engine>> automatic = Engine::Create(weights, options);
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  EXPECT_TRUE((*automatic)->kv_cache_layout().hybrid) << (*automatic)->kv_cache_layout().reason;
  std::string text;
  ASSERT_TRUE((*automatic)->WriteKvCachePrometheus(&text).ok());
  EXPECT_NE(text.find("pagedkv_kv_cache_groups 2"), std::string::npos) << text;
}

TEST(EngineHybridKvTest, LayoutsOfLayerWindows) {
  ModelConfig c;
  c.n_layers = 6;
  c.layer_window = {0, 8, 0, 8, 16, 16};
  absl::StatusOr<KvCacheLayout> layout = engine_internal::HybridKvCacheLayout(c);
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->groups.size(), 3u);  // full, window 8, window 16: 2 layers each
  EXPECT_EQ(layout->groups[0].kind, KvCacheGroupKind::kFullAttention);
  EXPECT_EQ(layout->groups[1].sliding_window, 8);
  EXPECT_EQ(layout->groups[2].sliding_window, 16);
  EXPECT_EQ(layout->layer_group, (std::vector<int32_t>{0, 1, 0, 1, 2, 2}));
  EXPECT_EQ(layout->layers_per_block, 2);
  c.n_layers = 5;
  c.layer_window = {0, 0, 0, 8, 8};  // 3 full, 2 windowed: groups of 2 do not fit 3
  EXPECT_FALSE(engine_internal::HybridKvCacheLayout(c).ok());
  c.layer_window = {8, 8, 8, 8, 8};  // no full-attention layer
  EXPECT_FALSE(engine_internal::HybridKvCacheLayout(c).ok());
  c.layer_window = {};
  EXPECT_FALSE(engine_internal::HybridKvCacheLayout(c).ok());
  EngineOptions on;
  on.hybrid_kv_cache = HybridKvCacheMode::kOn;
  absl::StatusOr<KvCacheLayout> refused = engine_internal::ChooseKvCacheLayout(on, c);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<KvCacheLayout> automatic = engine_internal::ChooseKvCacheLayout({}, c);
  ASSERT_TRUE(automatic.ok());
  EXPECT_FALSE(automatic->hybrid);
  EXPECT_EQ(automatic->layers_per_block, 5);
}

// The engine's KV events name each block's group, as vLLM 0.33's BlockStored does: a router that
// reads them can tell the full-attention chain from the window group's folded hashes.
TEST(EngineHybridKvTest, EventsCarryEachBlocksGroup) {
  const HfTestModel model = Qwen2("sfsf", 53);
  EngineOptions options;
  options.backend = BackendKind::kCpu;
  options.block_size = 4;
  options.num_kv_blocks = 64;
  options.hybrid_kv_cache = HybridKvCacheMode::kOn;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(Load(model, "events"), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  KvEventBatcher batcher;
  const int listener = (*engine)->AddEventListener([&](const KvEvent& e) { batcher.Add(e); });
  GenerationRequest r{.prompt_tokens = Prompt(24, 7, 2, model.spec.vocab), .max_new_tokens = 2};
  r.stop_at_eos = false;
  ASSERT_TRUE((*engine)->Generate({r}).ok());
  EXPECT_TRUE((*engine)->RemoveEventListener(listener));
  int64_t full_blocks = 0, window_blocks = 0;
  for (const KvBatchEvent& e : batcher.Take(1.0).events) {
    if (e.type != KvEventType::kBlockStored) continue;
    ASSERT_TRUE(e.group_idx.has_value() && e.kv_cache_spec_kind.has_value());
    if (*e.kv_cache_spec_kind == "full_attention") {
      EXPECT_EQ(e.kv_cache_spec_sliding_window, std::nullopt);
      full_blocks += static_cast<int64_t>(e.block_hashes.size());
    } else {
      EXPECT_EQ(*e.kv_cache_spec_kind, "sliding_window");
      EXPECT_EQ(e.kv_cache_spec_sliding_window, 4);
      EXPECT_NE(*e.group_idx, 0);
      window_blocks += static_cast<int64_t>(e.block_hashes.size());
    }
  }
  EXPECT_EQ(full_blocks, 6) << "24 prompt tokens: 6 full blocks cached in the full group";
  EXPECT_EQ(window_blocks, 6) << "and under the window group's folded hashes";
}

}  // namespace
}  // namespace pagedkv
