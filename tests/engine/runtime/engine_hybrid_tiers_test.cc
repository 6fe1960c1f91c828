// Copyright 2026 The pagedkv Authors.
//
// KV tiers over KV cache groups (issue 40): an engine with a sliding-window model and
// hybrid_kv_cache on keeps its host tier. A prompt whose blocks the device lost (prefix cache
// reset, or evicted by other prompts under write-back) comes back from the host tier in every
// group: the full-attention group's prefix and the window group's last blocks before the hit, and
// the greedy ids equal those of the all-full engine without any cache.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/model/model_source.h"
#include "pagedkv/runtime/engine.h"
#include "pagedkv/tiers/kv_tier.h"
#include "pagedkv/types.h"
#include "tests/engine/model/hf_test_model.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::HfTestModel;
using ::pagedkv::testing::HfTestSpec;
using ::pagedkv::testing::MakeHfTestModel;

constexpr int kBlockSize = 4;
constexpr int kPromptTokens = 30;  // 7 full blocks may hit (one token is always computed)

// Qwen2 layers sliding (window 4), full, sliding, full.
std::shared_ptr<const ModelWeights> SlidingFullModel() {
  HfTestSpec spec;
  spec.arch = "Qwen2ForCausalLM";
  spec.layers = 4;
  spec.layer_window = {4, 0, 4, 0};
  spec.config_patch = {
      {"use_sliding_window", true},
      {"sliding_window", 4},
      {"layer_types",
       {"sliding_attention", "full_attention", "sliding_attention", "full_attention"}}};
  const HfTestModel model = MakeHfTestModel(spec, 67);
  absl::StatusOr<LoadedModel> loaded = LoadModel(model.Write("hybrid_tiers").string());
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return loaded.ok() ? loaded->weights : nullptr;
}

std::vector<TokenId> Prompt(int mul, int add) {
  std::vector<TokenId> p(kPromptTokens);
  for (int t = 0; t < kPromptTokens; ++t) p[static_cast<size_t>(t)] = 3 + (t * mul + add) % 50;
  return p;
}

EngineOptions Options(HybridKvCacheMode hybrid) {
  EngineOptions o;
  o.backend = BackendKind::kCpu;
  o.block_size = kBlockSize;
  o.num_kv_blocks = 64;
  o.hybrid_kv_cache = hybrid;
  return o;
}

std::unique_ptr<Engine> MakeEngine(std::shared_ptr<const ModelWeights> weights,
                                   const EngineOptions& options) {
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(std::move(weights), options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(engine).value() : nullptr;
}

GenerationResult Generate1(Engine& engine, const std::vector<TokenId>& prompt) {
  GenerationRequest r{.prompt_tokens = prompt, .max_new_tokens = 8};
  r.stop_at_eos = false;
  absl::StatusOr<std::vector<GenerationResult>> out = engine.Generate({r});
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? (*out)[0] : GenerationResult{};
}

TierStats HostStats(const Engine& engine) {
  for (const auto& [name, stats] : engine.tier_stats()) {
    if (name == "host") return stats;
  }
  ADD_FAILURE() << "no host tier";
  return {};
}

TEST(EngineHybridTiersTest, ADeviceResetPrefixComesBackFromTheHostTierInEveryGroup) {
  std::shared_ptr<const ModelWeights> weights = SlidingFullModel();
  ASSERT_NE(weights, nullptr);
  EngineOptions o = Options(HybridKvCacheMode::kOn);
  o.host_tier = {.capacity_blocks = 128};
  std::unique_ptr<Engine> engine = MakeEngine(weights, o);
  ASSERT_NE(engine, nullptr);
  ASSERT_EQ(engine->kv_cache_manager().num_groups(), 2) << engine->kv_cache_layout().reason;
  const std::vector<TokenId> prompt = Prompt(7, 2);
  const GenerationResult first = Generate1(*engine, prompt);
  EXPECT_EQ(first.num_prefix_hit_tokens, 0);
  engine->kv_cache_manager().ResetPrefixCache();  // the device forgets; the host tier keeps
  const GenerationResult second = Generate1(*engine, prompt);
  EXPECT_EQ(second.num_prefix_hit_tokens, 28);
  EXPECT_EQ(second.num_host_hit_tokens, 28);
  // 7 full-attention blocks and the window group's one block before the hit (window 4).
  EXPECT_EQ(HostStats(*engine).hit_blocks, 8);
  EXPECT_EQ(second.output_tokens, first.output_tokens);
  EngineOptions plain = Options(HybridKvCacheMode::kOff);
  plain.enable_prefix_caching = false;
  EXPECT_EQ(second.output_tokens, Generate1(*MakeEngine(weights, plain), prompt).output_tokens);
  EXPECT_TRUE(engine->kv_cache_manager().ValidateInvariants().ok());
}

TEST(EngineHybridTiersTest, WriteBackStoresEachGroupsEvictedBlocks) {
  std::shared_ptr<const ModelWeights> weights = SlidingFullModel();
  ASSERT_NE(weights, nullptr);
  EngineOptions o = Options(HybridKvCacheMode::kOn);
  o.num_kv_blocks = 24;
  o.host_tier = {.capacity_blocks = 256, .store = {.rule = TierStoreRule::kWriteBack}};
  std::unique_ptr<Engine> engine = MakeEngine(weights, o);
  ASSERT_NE(engine, nullptr);
  const std::vector<TokenId> prompt = Prompt(7, 2);
  const GenerationResult first = Generate1(*engine, prompt);
  EXPECT_EQ(HostStats(*engine).stored_blocks, 0);
  // Other prompts fill the 24-block pool, evicting the first prompt's blocks of both groups.
  for (int k = 0; k < 3; ++k) Generate1(*engine, Prompt(11 + 2 * k, 5 + k));
  EXPECT_GT(HostStats(*engine).stored_blocks, 0);
  const GenerationResult again = Generate1(*engine, prompt);
  EXPECT_EQ(again.num_prefix_hit_tokens, 28);
  EXPECT_GT(again.num_host_hit_tokens, 0);
  EXPECT_EQ(again.output_tokens, first.output_tokens);
  EXPECT_TRUE(engine->kv_cache_manager().ValidateInvariants().ok());
}

}  // namespace
}  // namespace pagedkv
