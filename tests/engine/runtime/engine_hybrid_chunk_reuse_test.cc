// Copyright 2026 The pagedkv Authors.
//
// Shifted chunk reuse over KV cache groups (issue 40): random-weight Qwen2 directories mixing full
// and sliding-window (window 4) layers, hybrid_kv_cache on, chunk_reuse kReRotate. Where reuse is
// exact (the document reused at the position and after the prefix it was computed with, prefix
// caching off) the greedy ids and logits equal full recompute's and the all-full engine's; after
// a shift, layer 0's reused keys (context-free) equal fresh keys at the new positions in the
// layer's group: every document token in a full-attention group, the document's last `window`
// tokens in a sliding-window group (composition R(p1) R(p0)^T against a fresh R(p1)).
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/runner/model_runner.h"
#include "engine/runtime/engine_internal.h"
#include "engine/runtime/shift/shifted_chunk_reuse.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/model/model_source.h"
#include "pagedkv/runtime/engine.h"
#include "tests/engine/model/hf_test_model.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::HfTestModel;
using ::pagedkv::testing::HfTestSpec;
using ::pagedkv::testing::MakeHfTestModel;

constexpr int32_t kWindow = 4;
constexpr int32_t kDocLength = 13;

// Qwen2 with `types` ("s": sliding_attention at window kWindow, "f": full_attention).
std::shared_ptr<const ModelWeights> Qwen2(const std::string& types, uint64_t seed) {
  HfTestSpec spec;
  spec.arch = "Qwen2ForCausalLM";
  spec.layers = static_cast<int>(types.size());
  nlohmann::json layer_types = nlohmann::json::array();
  for (char t : types) {
    spec.layer_window.push_back(t == 's' ? kWindow : 0);
    layer_types.push_back(t == 's' ? "sliding_attention" : "full_attention");
  }
  spec.config_patch = {
      {"use_sliding_window", true}, {"sliding_window", kWindow}, {"layer_types", layer_types}};
  const HfTestModel model = MakeHfTestModel(spec, seed);
  absl::StatusOr<LoadedModel> loaded = LoadModel(model.Write("hybrid_chunk_" + types).string());
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return loaded.ok() ? loaded->weights : nullptr;
}

std::vector<TokenId> Span(int length, int mul, int add) {
  std::vector<TokenId> p(static_cast<size_t>(length));
  for (int t = 0; t < length; ++t) p[static_cast<size_t>(t)] = 3 + (t * mul + add) % 60;
  return p;
}

// `head` tokens, the document (marked as a chunk), `tail` tokens.
GenerationRequest WithDoc(const std::vector<TokenId>& head, const std::vector<TokenId>& tail,
                          int max_new_tokens) {
  GenerationRequest r;
  r.prompt_tokens = head;
  r.chunks = {{.offset = static_cast<int32_t>(head.size()), .length = kDocLength}};
  const std::vector<TokenId> doc = Span(kDocLength, 7, 1);
  r.prompt_tokens.insert(r.prompt_tokens.end(), doc.begin(), doc.end());
  r.prompt_tokens.insert(r.prompt_tokens.end(), tail.begin(), tail.end());
  r.max_new_tokens = max_new_tokens;
  r.stop_at_eos = false;
  return r;
}

// `kv_dtype` and `float_keys_memory` (ChunkReuseOptions) as given, the rest as in every test.
std::unique_ptr<Engine> MakeEngine(std::shared_ptr<const ModelWeights> weights, bool hybrid,
                                   bool reuse, int32_t block_size, DType kv_dtype = DType::kF32,
                                   int64_t float_keys_memory = 0) {
  EngineOptions o;
  o.kv_dtype = kv_dtype;
  o.chunk_reuse.float_keys_memory = float_keys_memory;
  o.backend = BackendKind::kCpu;
  o.block_size = block_size;
  o.num_kv_blocks = 96;
  o.return_logits = true;
  o.enable_prefix_caching = false;
  o.hybrid_kv_cache = hybrid ? HybridKvCacheMode::kOn : HybridKvCacheMode::kOff;
  o.chunk_reuse.mode = reuse ? ChunkReuseMode::kReRotate : ChunkReuseMode::kOff;
  absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Create(std::move(weights), o);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? std::move(e).value() : nullptr;
}

// What a run of `second` after `first` gave.
struct PairRun {
  std::vector<TokenId> ids;
  std::vector<float> logits;  // every sampling row of `second`
  int32_t shifted_hit_tokens = 0;
};

PairRun RunPair(Engine& engine, const GenerationRequest& first, const GenerationRequest& second) {
  PairRun run;
  EXPECT_TRUE(engine.Generate({first}).ok());
  absl::StatusOr<RequestId> id = engine.AddRequest(second);
  EXPECT_TRUE(id.ok()) << id.status();
  while (engine.HasUnfinishedRequests()) {
    absl::StatusOr<StepOutput> step = engine.Step();
    EXPECT_TRUE(step.ok()) << step.status();
    if (!step.ok()) break;
    EXPECT_TRUE(engine.kv_cache_manager().ValidateInvariants().ok());
    run.logits.insert(run.logits.end(), step->logits.begin(), step->logits.end());
    for (const GenerationResult& r : step->finished) {
      run.ids = r.output_tokens;
      run.shifted_hit_tokens = r.num_shifted_hit_tokens;
    }
  }
  EXPECT_EQ(engine.kv_cache_manager().NumRequests(), 0);
  return run;
}

void ExpectSameRun(const PairRun& got, const PairRun& want, const std::string& what) {
  EXPECT_EQ(got.ids, want.ids) << what;
  ASSERT_EQ(got.logits.size(), want.logits.size()) << what;
  for (size_t i = 0; i < got.logits.size(); ++i) {
    ASSERT_NEAR(got.logits[i], want.logits[i], 1e-4) << what << " logit " << i;
  }
}

TEST(EngineHybridChunkReuseTest, ExactReuseGivesTheIdsOfFullRecompute) {
  for (const std::string types : {"sfsf", "fsfs"}) {
    std::shared_ptr<const ModelWeights> weights = Qwen2(types, 71);
    ASSERT_NE(weights, nullptr);
    for (const int32_t block_size : {4, 16}) {
      SCOPED_TRACE(::testing::Message() << types << " block_size " << block_size);
      const std::vector<TokenId> head = Span(6, 5, 2);
      const GenerationRequest a = WithDoc(head, Span(3, 3, 9), 2);
      const GenerationRequest b = WithDoc(head, Span(7, 11, 4), 6);
      auto reuse = MakeEngine(weights, /*hybrid=*/true, /*reuse=*/true, block_size);
      auto recompute = MakeEngine(weights, /*hybrid=*/true, /*reuse=*/false, block_size);
      auto all_full = MakeEngine(weights, /*hybrid=*/false, /*reuse=*/true, block_size);
      ASSERT_TRUE(reuse && recompute && all_full);
      ASSERT_TRUE(reuse->kv_cache_layout().hybrid) << reuse->kv_cache_layout().reason;
      const PairRun by_reuse = RunPair(*reuse, a, b);
      EXPECT_EQ(by_reuse.shifted_hit_tokens, kDocLength);
      const ShiftedChunkReuse* provider = EngineInternal::ChunkReuse(*reuse);
      ASSERT_NE(provider, nullptr);
      EXPECT_EQ(provider->num_groups(), 2);
      EXPECT_TRUE(provider->index().ValidateInvariants().ok());
      ExpectSameRun(by_reuse, RunPair(*recompute, a, b), "against recompute");
      const PairRun by_all_full = RunPair(*all_full, a, b);
      EXPECT_EQ(by_all_full.shifted_hit_tokens, kDocLength);
      ExpectSameRun(by_reuse, by_all_full, "against all-full reuse");
    }
  }
}

// Layer 0's K of request `id` at positions [begin, begin + n) in the layer's group's slots.
std::vector<float> Layer0Keys(Engine& engine, RequestId id, int32_t begin, int32_t n) {
  const int32_t g = engine.kv_cache_layout().layer_group[0];
  absl::StatusOr<std::span<const BlockId>> table = engine.kv_cache_manager().GetBlockTable(id, g);
  EXPECT_TRUE(table.ok()) << table.status();
  const int32_t bs = engine.kv_cache_manager().block_size();
  std::vector<int64_t> slots;
  for (int32_t p = begin; p < begin + n; ++p) {
    slots.push_back(int64_t{(*table)[static_cast<size_t>(p / bs)]} * bs + p % bs);
  }
  std::vector<float> k, v;
  EXPECT_TRUE(EngineInternal::Runner(engine).ReadKv(0, slots, &k, &v).ok());
  return k;
}

// Runs `r` until it samples its first token (its prompt's KV written, nothing released since);
// returns its id.
RequestId RunPrompt(Engine& engine, const GenerationRequest& r) {
  absl::StatusOr<RequestId> id = engine.AddRequest(r);
  EXPECT_TRUE(id.ok()) << id.status();
  for (int step = 0; step < 16; ++step) {
    absl::StatusOr<StepOutput> out = engine.Step();
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok() || !out->tokens.empty()) break;
  }
  return *id;
}

// Layer 0's K of a document moved on `reuse` (computed at 5 by a first request, reused at 11)
// and computed fresh at 11 on `fresh`, over the tokens layer 0's group keeps: a window group
// (`windowed`) only the document's last kWindow.
std::pair<std::vector<float>, std::vector<float>> MovedAndFreshKeys(Engine& reuse, Engine& fresh,
                                                                    bool windowed) {
  const GenerationRequest a = WithDoc(Span(5, 5, 2), Span(3, 3, 9), 2);
  const GenerationRequest b = WithDoc(Span(11, 9, 6), Span(3, 13, 1), 4);
  const int32_t first = windowed ? kDocLength - kWindow : 0;
  EXPECT_TRUE(reuse.Generate({a}).ok());
  const RequestId moved = RunPrompt(reuse, b);
  const RequestId computed = RunPrompt(fresh, b);
  return {Layer0Keys(reuse, moved, 11 + first, kDocLength - first),
          Layer0Keys(fresh, computed, 11 + first, kDocLength - first)};
}

TEST(EngineHybridChunkReuseTest, ShiftedLayer0KeysEqualFreshOnesInTheirGroup) {
  for (const std::string types : {"fsfs", "sfsf"}) {
    SCOPED_TRACE(types);
    std::shared_ptr<const ModelWeights> weights = Qwen2(types, 73);
    ASSERT_NE(weights, nullptr);
    auto reuse = MakeEngine(weights, true, true, 4);
    auto fresh = MakeEngine(weights, true, false, 4);
    ASSERT_TRUE(reuse && fresh);
    // A window group keeps (and moves) only the document's last kWindow tokens.
    const auto [k_moved, k_fresh] = MovedAndFreshKeys(*reuse, *fresh, types[0] == 's');
    ASSERT_EQ(k_moved.size(), k_fresh.size());
    ASSERT_FALSE(k_moved.empty());
    for (size_t i = 0; i < k_moved.size(); ++i) {
      ASSERT_NEAR(k_moved[i], k_fresh[i], 1e-4 * (1 + std::fabs(k_fresh[i]))) << i;
    }
    EXPECT_EQ(reuse->stats().num_shifted_hit_tokens, kDocLength);
  }
}

// An int8 cache over a full and a window group with float keys kept: each group's copy moves
// from its own float keys (a window group's: the document's last kWindow tokens), so layer 0's
// moved keys are the fresh ones but for the rare fp32 rounding of the rotation.
TEST(EngineHybridChunkReuseTest, FloatKeysMoveEachGroupsCopyWithOneRounding) {
  for (const std::string types : {"fsfs", "sfsf"}) {
    SCOPED_TRACE(types);
    std::shared_ptr<const ModelWeights> weights = Qwen2(types, 74);
    ASSERT_NE(weights, nullptr);
    auto reuse = MakeEngine(weights, true, true, 4, DType::kInt8, 1 << 20);
    auto fresh = MakeEngine(weights, true, false, 4, DType::kInt8);
    ASSERT_TRUE(reuse && fresh);
    const auto [k_moved, k_fresh] = MovedAndFreshKeys(*reuse, *fresh, types[0] == 's');
    ASSERT_EQ(k_moved.size(), k_fresh.size());
    ASSERT_FALSE(k_moved.empty());
    double equal = 0;
    for (size_t i = 0; i < k_moved.size(); ++i) equal += k_moved[i] == k_fresh[i];
    EXPECT_GE(equal / static_cast<double>(k_moved.size()), 0.97);
    EXPECT_EQ(EngineInternal::ChunkReuse(*reuse)->stats().float_key_moves, kDocLength + kWindow);
    EXPECT_EQ(reuse->stats().num_float_key_moves, kDocLength + kWindow);
  }
}

}  // namespace
}  // namespace pagedkv
