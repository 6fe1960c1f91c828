// Copyright 2026 The pagedkv Authors.
//
// The engine with a host KV tier: a prefix the device pool lost comes back from the tier, counts
// as a hit of the tier, and gives the same greedy tokens as a run without any cache.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/model/model_weights.h"
#include "pagedkv/runtime/engine.h"
#include "tests/engine/runtime/tier_engine_test_util.h"

namespace pagedkv {
namespace {

using ::testing::HasSubstr;

constexpr int kBlockSize = 4;
constexpr int kNewTokens = 12;

class EngineTiersTest : public ::testing::Test {
 protected:
  EngineTiersTest() : weights_(testing::TinyTierModel(41)) {}
  static EngineOptions Options() {
    EngineOptions o;
    o.backend = BackendKind::kCpu;
    o.block_size = kBlockSize;
    o.num_kv_blocks = 64;
    return o;
  }
  std::unique_ptr<Engine> MakeEngine(const EngineOptions& o) {
    return testing::MakeTierEngine(weights_, o);
  }
  static std::vector<TokenId> Prompt(uint32_t seed, int n) {
    return testing::RandomPrompt(seed, n);
  }
  static GenerationResult Run(Engine& engine, const std::vector<TokenId>& prompt) {
    return testing::RunOne(
        engine, {.prompt_tokens = prompt, .max_new_tokens = kNewTokens, .stop_at_eos = false});
  }
  // Greedy tokens of `prompt` on an engine without prefix caching.
  std::vector<TokenId> Uncached(const std::vector<TokenId>& prompt) {
    EngineOptions o = Options();
    o.enable_prefix_caching = false;
    return Run(*MakeEngine(o), prompt).output_tokens;
  }
  static TierStats HostStats(const Engine& engine) {
    return testing::TierStatsNamed(engine, "host");
  }

  std::shared_ptr<const ModelWeights> weights_;
};

TEST_F(EngineTiersTest, APrefixTheDeviceLostComesBackFromTheHostTierWithTheSameTokens) {
  for (const char* policy : {"lru", "arc"}) {
    SCOPED_TRACE(policy);
    EngineOptions o = Options();
    o.host_tier = {.capacity_blocks = 32, .policy = policy};
    auto engine = MakeEngine(o);
    const std::vector<TokenId> prompt = Prompt(5, 30);  // 7 full blocks reusable
    const GenerationResult first = Run(*engine, prompt);
    EXPECT_EQ(first.num_prefix_hit_tokens, 0);
    engine->kv_cache_manager().ResetPrefixCache();  // the device forgets; the host tier keeps
    const GenerationResult second = Run(*engine, prompt);
    EXPECT_EQ(second.num_prefix_hit_tokens, 28);
    EXPECT_EQ(second.num_host_hit_tokens, 28);
    EXPECT_EQ(second.output_tokens, Uncached(prompt));
    EXPECT_EQ(first.output_tokens, second.output_tokens);
    const TierStats s = HostStats(*engine);
    EXPECT_EQ(s.hit_blocks, 7);
    EXPECT_GT(s.stored_blocks, 7);  // the prompt's blocks and the generated ones
    EXPECT_EQ(engine->stats().num_host_hit_tokens, 28);
  }
}

// Quantized KV pages go to the host tier as their bytes (scales included) and come back the
// same: the second run's tokens equal the first's on the same dtype, for every quantized dtype
// the tiny model's head size (8) holds.
TEST_F(EngineTiersTest, QuantizedBlocksComeBackFromTheHostTierBitForBit) {
  for (DType dtype : {DType::kInt8, DType::kFp8E4M3, DType::kFp8E5M2}) {
    SCOPED_TRACE(DTypeName(dtype));
    EngineOptions o = Options();
    o.kv_dtype = dtype;
    o.host_tier = {.capacity_blocks = 32};
    auto engine = MakeEngine(o);
    EXPECT_EQ(engine->kv_pool().dtype, dtype);
    EXPECT_EQ(engine->kv_cache_layout().dtype, dtype);
    const std::vector<TokenId> prompt = Prompt(15, 30);
    const GenerationResult first = Run(*engine, prompt);
    engine->kv_cache_manager().ResetPrefixCache();
    const GenerationResult second = Run(*engine, prompt);
    EXPECT_EQ(second.num_host_hit_tokens, 28);
    EXPECT_EQ(second.output_tokens, first.output_tokens);
    // A cold run on the same dtype computes the same tokens as the one served from the tier.
    o.host_tier = {};
    o.enable_prefix_caching = false;
    EXPECT_EQ(Run(*MakeEngine(o), prompt).output_tokens, second.output_tokens);
  }
}

// K and V in different dtypes: blocks go to the host tier as both sides' bytes and come back the
// same; a cold run computes the same tokens; the fingerprint differs from either one-dtype
// cache's, so their tier values never mix.
TEST_F(EngineTiersTest, MixedKAndVDTypesComeBackFromTheHostTierBitForBit) {
  EngineOptions o = Options();
  o.kv_dtype = DType::kBF16;
  o.kv_dtype_v = DType::kInt8;
  o.host_tier = {.capacity_blocks = 32};
  auto engine = MakeEngine(o);
  EXPECT_EQ(engine->kv_pool().v_dtype, DType::kInt8);
  EXPECT_EQ(engine->kv_cache_layout().v_dtype, DType::kInt8);
  const std::vector<TokenId> prompt = Prompt(25, 30);
  const GenerationResult first = Run(*engine, prompt);
  engine->kv_cache_manager().ResetPrefixCache();
  const GenerationResult second = Run(*engine, prompt);
  EXPECT_EQ(second.num_host_hit_tokens, 28);
  EXPECT_EQ(second.output_tokens, first.output_tokens);
  EngineOptions cold = o;
  cold.host_tier = {};
  cold.enable_prefix_caching = false;
  EXPECT_EQ(Run(*MakeEngine(cold), prompt).output_tokens, second.output_tokens);
  EngineOptions one = cold;
  one.kv_dtype_v = std::nullopt;
  const std::string mixed = engine->kv_cache_fingerprint();
  EXPECT_NE(MakeEngine(one)->kv_cache_fingerprint(), mixed);
  one.kv_dtype = DType::kInt8;
  EXPECT_NE(MakeEngine(one)->kv_cache_fingerprint(), mixed);
  one.kv_dtype_v = DType::kInt8;  // V's dtype named but equal to K's: one dtype
  EXPECT_EQ(MakeEngine(one)->kv_pool().v_dtype, DType::kInt8);
}

TEST_F(EngineTiersTest, ABlockDTypeTheHeadSizeCannotHoldIsRefused) {
  EngineOptions o = Options();
  o.kv_dtype = DType::kQ8_0;  // head_dim 8 < one 32-value block
  absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Create(weights_, o);
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(e.status().message(), HasSubstr("--kv-cache-dtype"));
}

TEST_F(EngineTiersTest, WriteBackStoresBlocksOnlyWhenTheDeviceEvictsThem) {
  EngineOptions o = Options();
  o.num_kv_blocks = 16;
  o.host_tier = {.capacity_blocks = 64, .store = {.rule = TierStoreRule::kWriteBack}};
  auto engine = MakeEngine(o);
  const std::vector<TokenId> prompt = Prompt(6, 30);
  const GenerationResult first = Run(*engine, prompt);
  EXPECT_EQ(HostStats(*engine).stored_blocks, 0);
  // Two other prompts fill the 16-block pool, evicting the first prompt's blocks.
  Run(*engine, Prompt(7, 30));
  Run(*engine, Prompt(8, 30));
  EXPECT_GT(HostStats(*engine).stored_blocks, 0);
  const GenerationResult again = Run(*engine, prompt);
  EXPECT_GT(again.num_host_hit_tokens, 0);
  EXPECT_EQ(again.num_prefix_hit_tokens, 28);
  EXPECT_EQ(again.output_tokens, first.output_tokens);
  EXPECT_EQ(again.output_tokens, Uncached(prompt));
}

TEST_F(EngineTiersTest, AStoreThresholdWaitsForReuse) {
  EngineOptions o = Options();
  o.host_tier = {.capacity_blocks = 64, .store = {.threshold = 1}};
  auto engine = MakeEngine(o);
  const std::vector<TokenId> prompt = Prompt(9, 22);  // 5 reusable blocks
  const GenerationResult first = Run(*engine, prompt);
  EXPECT_EQ(HostStats(*engine).stored_blocks, 0);  // computed once: not reused yet
  const GenerationResult second = Run(*engine, prompt);
  EXPECT_EQ(second.num_prefix_hit_tokens, 20);  // device hit: reused once
  EXPECT_EQ(second.num_device_hit_tokens, 20);
  EXPECT_EQ(second.num_host_hit_tokens, 0);
  EXPECT_EQ(HostStats(*engine).stored_blocks, 5);
  engine->kv_cache_manager().ResetPrefixCache();
  const GenerationResult third = Run(*engine, prompt);
  EXPECT_EQ(third.num_host_hit_tokens, 20);
  EXPECT_EQ(third.num_device_hit_tokens, 0);
  EXPECT_EQ(third.num_prefix_hit_tokens, 20);
  EXPECT_EQ(third.output_tokens, first.output_tokens);
}

TEST_F(EngineTiersTest, AFullHostTierEvictsAndStaysCorrect) {
  EngineOptions o = Options();
  o.host_tier = {.capacity_blocks = 3};
  auto engine = MakeEngine(o);
  const std::vector<TokenId> prompt = Prompt(10, 30);
  const GenerationResult first = Run(*engine, prompt);
  const TierStats s = HostStats(*engine);
  EXPECT_EQ(s.resident_blocks, 3);
  EXPECT_GT(s.evictions, 0);
  engine->kv_cache_manager().ResetPrefixCache();
  const GenerationResult second = Run(*engine, prompt);
  // The oldest blocks (the chain's head) were evicted: nothing along the chain is found.
  EXPECT_EQ(second.num_host_hit_tokens, 0);
  EXPECT_EQ(second.output_tokens, first.output_tokens);
}

TEST_F(EngineTiersTest, SaltsIsolateInTheHostTier) {
  EngineOptions o = Options();
  o.host_tier = {.capacity_blocks = 64};
  auto engine = MakeEngine(o);
  const std::vector<TokenId> prompt = Prompt(11, 30);
  GenerationRequest r{.prompt_tokens = prompt, .max_new_tokens = 4, .cache_salt = "tenant-a"};
  ASSERT_TRUE(engine->Generate({r}).ok());
  engine->kv_cache_manager().ResetPrefixCache();
  r.cache_salt = "tenant-b";
  absl::StatusOr<std::vector<GenerationResult>> other = engine->Generate({r});
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*other)[0].num_prefix_hit_tokens, 0);
  r.cache_salt = "tenant-a";
  engine->kv_cache_manager().ResetPrefixCache();
  absl::StatusOr<std::vector<GenerationResult>> same = engine->Generate({r});
  ASSERT_TRUE(same.ok());
  EXPECT_EQ((*same)[0].num_host_hit_tokens, 28);
}

TEST_F(EngineTiersTest, EventsCarryTheMediumOfTheirTier) {
  EngineOptions o = Options();
  o.host_tier = {.capacity_blocks = 64};
  auto engine = MakeEngine(o);
  int device = 0, host = 0;
  const int id = engine->AddEventListener([&](const KvEvent& e) {
    if (e.type != KvEventType::kBlockStored) return;
    if (e.medium.empty()) ++device;
    if (e.medium == "CPU") ++host;
  });
  Run(*engine, Prompt(12, 22));
  EXPECT_GT(device, 0);
  EXPECT_EQ(host, device);  // write-through: every cached block also went to the host tier
  EXPECT_TRUE(engine->RemoveEventListener(id));
  EXPECT_FALSE(engine->RemoveEventListener(id));
}

// Four distinct 30-token prompts with 24 new tokens each on a 16-block (64-slot) pool: at most
// one request of up to 54 tokens fits, so the others are preempted again and again, and their
// blocks are evicted by the one that runs. Re-admitted, each looks its prompt and generated tokens
// up again: what the device lost comes back from the host tier instead of being recomputed.
TEST_F(EngineTiersTest, ARequestReadmittedAfterPreemptionLoadsFromTheHostTier) {
  std::vector<GenerationRequest> requests;
  for (uint32_t seed : {21u, 22u, 23u, 24u}) {
    requests.push_back(
        {.prompt_tokens = Prompt(seed, 30), .max_new_tokens = 24, .stop_at_eos = false});
  }
  const auto run = [&](const EngineOptions& o, EngineStats* stats) {
    auto engine = MakeEngine(o);
    absl::StatusOr<std::vector<GenerationResult>> out = engine->Generate(requests);
    EXPECT_TRUE(out.ok()) << out.status();
    *stats = engine->stats();
    std::vector<TierStats> tiers;
    for (const auto& [name, s] : engine->tier_stats()) tiers.push_back(s);
    return std::make_pair(out.ok() ? *out : std::vector<GenerationResult>{}, tiers);
  };
  EngineOptions uncached = Options();
  uncached.enable_prefix_caching = false;
  EngineStats uncached_stats;
  const auto [want, no_tiers] = run(uncached, &uncached_stats);
  EngineOptions device_only = Options();
  device_only.num_kv_blocks = 16;
  EngineStats device_stats;
  const auto [device_out, none] = run(device_only, &device_stats);
  EngineOptions tiered = device_only;
  tiered.host_tier = {.capacity_blocks = 256};
  EngineStats tiered_stats;
  const auto [got, host] = run(tiered, &tiered_stats);
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(host.size(), 1u);
  EXPECT_GT(tiered_stats.num_preemptions, 0);
  int64_t host_tokens = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i].output_tokens, want[i].output_tokens);
    EXPECT_EQ(device_out[i].output_tokens, want[i].output_tokens);
    EXPECT_EQ(got[i].num_prefix_hit_tokens, 0);  // distinct prompts: no first-admission hit
    EXPECT_EQ(got[i].num_readmission_device_hit_tokens + got[i].num_readmission_host_hit_tokens +
                  got[i].num_readmission_remote_hit_tokens,
              got[i].num_readmission_hit_tokens);
    EXPECT_EQ(got[i].num_readmission_remote_hit_tokens, 0);
    EXPECT_EQ(device_out[i].num_readmission_host_hit_tokens, 0);
    host_tokens += got[i].num_readmission_host_hit_tokens;
  }
  // Loaded from the host tier after preemption (no first admission hit anything), so fewer tokens
  // were recomputed than with the device pool alone.
  EXPECT_GT(host[0].hit_blocks, 0);
  EXPECT_GT(tiered_stats.num_readmission_host_hit_tokens, 0);
  EXPECT_EQ(tiered_stats.num_readmission_host_hit_tokens, host_tokens);
  EXPECT_EQ(tiered_stats.num_host_hit_tokens, 0);
  EXPECT_LE(tiered_stats.num_readmission_host_hit_tokens, host[0].hit_blocks * kBlockSize);
  EXPECT_GT(tiered_stats.num_readmissions, 0);
  EXPECT_LE(tiered_stats.num_readmission_hit_tokens, tiered_stats.num_readmission_tokens);
  EXPECT_LT(tiered_stats.num_computed_tokens, device_stats.num_computed_tokens);
}

TEST_F(EngineTiersTest, BadTierOptionsAreInvalidArgument) {
  EngineOptions o = Options();
  o.host_tier = {.capacity_blocks = 8, .policy = "clock"};
  EXPECT_THAT(Engine::Create(weights_, o).status().message(), HasSubstr("\"lru\" or \"arc\""));
  o.host_tier = {.capacity_blocks = 8};
  o.enable_prefix_caching = false;
  EXPECT_THAT(Engine::Create(weights_, o).status().message(), HasSubstr("enable_prefix_caching"));
}

}  // namespace
}  // namespace pagedkv
