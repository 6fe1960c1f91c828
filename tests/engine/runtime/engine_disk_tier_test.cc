// Copyright 2026 The pagedkv Authors.
//
// The engine with a disk KV tier: what one engine stored, a new engine on the same folder (a
// restart) loads as a prefix hit of the disk tier, with the tokens of a run without any cache;
// another model never reads it; the host tier sits above the disk tier.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/events/kv_events.h"
#include "pagedkv/model/model_weights.h"
#include "pagedkv/runtime/engine.h"
#include "tests/engine/runtime/tier_engine_test_util.h"

namespace pagedkv {
namespace {

using ::testing::HasSubstr;

constexpr int kBlockSize = 4;

class EngineDiskTierTest : public ::testing::Test {
 protected:
  EngineDiskTierTest() {
    std::string pattern = std::filesystem::temp_directory_path() / "pagedkv-engine-disk-XXXXXX";
    dir_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : "";
    weights_ = testing::TinyTierModel(41);
  }
  ~EngineDiskTierTest() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  EngineOptions Options() const {
    EngineOptions o;
    o.backend = BackendKind::kCpu;
    o.block_size = kBlockSize;
    o.num_kv_blocks = 64;
    o.disk_tier = {.directory = dir_, .capacity_bytes = int64_t{16} << 20};
    return o;
  }
  std::unique_ptr<Engine> MakeEngine(const EngineOptions& o,
                                     std::shared_ptr<const ModelWeights> weights = nullptr) {
    return testing::MakeTierEngine(weights != nullptr ? weights : weights_, o);
  }
  static std::vector<TokenId> Prompt(uint32_t seed, int n) {
    return testing::RandomPrompt(seed, n);
  }
  static GenerationResult Run(Engine& engine, const std::vector<TokenId>& prompt) {
    return testing::RunOne(engine,
                           {.prompt_tokens = prompt, .max_new_tokens = 12, .stop_at_eos = false});
  }
  std::vector<TokenId> Uncached(const std::vector<TokenId>& prompt) {
    EngineOptions o = Options();
    o.disk_tier = {};
    o.enable_prefix_caching = false;
    return Run(*MakeEngine(o), prompt).output_tokens;
  }
  static TierStats StatsOf(const Engine& engine, const std::string& tier) {
    return testing::TierStatsNamed(engine, tier);
  }

  std::string dir_;
  std::shared_ptr<const ModelWeights> weights_;
};

TEST_F(EngineDiskTierTest, ARestartedEngineLoadsThePrefixFromDisk) {
  const std::vector<TokenId> prompt = Prompt(5, 30);  // 7 full blocks reusable
  std::vector<TokenId> first_tokens;
  {
    auto engine = MakeEngine(Options());
    const GenerationResult first = Run(*engine, prompt);
    EXPECT_EQ(first.num_prefix_hit_tokens, 0);
    first_tokens = first.output_tokens;
  }  // the engine and its disk tier go: the files stay
  EngineOptions o = Options();
  o.disk_tier.read_threads = 4;  // the 7 blocks read at once: the same answer
  auto engine = MakeEngine(o);
  const GenerationResult second = Run(*engine, prompt);
  EXPECT_EQ(second.num_prefix_hit_tokens, 28);
  EXPECT_EQ(second.num_disk_hit_tokens, 28);
  EXPECT_EQ(second.num_device_hit_tokens, 0);
  EXPECT_EQ(second.output_tokens, first_tokens);
  EXPECT_EQ(second.output_tokens, Uncached(prompt));
  EXPECT_EQ(StatsOf(*engine, "disk").hit_blocks, 7);
  EXPECT_EQ(engine->stats().num_disk_hit_tokens, 28);
}

TEST_F(EngineDiskTierTest, QuantizedBlocksComeBackFromDiskAfterARestart) {
  const std::vector<TokenId> prompt = Prompt(9, 26);
  for (DType dtype : {DType::kInt8, DType::kFp8E4M3}) {
    SCOPED_TRACE(DTypeName(dtype));
    EngineOptions o = Options();
    o.kv_dtype = dtype;
    std::vector<TokenId> first;
    { first = Run(*MakeEngine(o), prompt).output_tokens; }
    auto engine = MakeEngine(o);
    const GenerationResult second = Run(*engine, prompt);
    EXPECT_EQ(second.num_disk_hit_tokens, 24);
    EXPECT_EQ(second.output_tokens, first);
  }
}

TEST_F(EngineDiskTierTest, AnotherModelNeverReadsTheFiles) {
  const std::vector<TokenId> prompt = Prompt(5, 30);
  Run(*MakeEngine(Options()), prompt);
  auto other = MakeEngine(Options(), testing::TinyTierModel(77));
  const GenerationResult r = Run(*other, prompt);
  EXPECT_EQ(r.num_prefix_hit_tokens, 0);
  EXPECT_EQ(StatsOf(*other, "disk").hit_blocks, 0);
  EXPECT_EQ(StatsOf(*other, "disk").faults, 0);
}

TEST_F(EngineDiskTierTest, TheHostTierSitsAboveTheDiskTier) {
  EngineOptions o = Options();
  o.host_tier = {.capacity_blocks = 32};
  const std::vector<TokenId> prompt = Prompt(5, 30);
  Run(*MakeEngine(o), prompt);
  auto engine = MakeEngine(o);  // a new host tier (empty), the same folder
  const GenerationResult from_disk = Run(*engine, prompt);
  EXPECT_EQ(from_disk.num_disk_hit_tokens, 28);
  EXPECT_EQ(from_disk.num_host_hit_tokens, 0);
  engine->kv_cache_manager().ResetPrefixCache();
  const GenerationResult from_host = Run(*engine, prompt);  // disk hits were kept in host memory
  EXPECT_EQ(from_host.num_host_hit_tokens, 28);
  EXPECT_EQ(from_host.num_disk_hit_tokens, 0);
  EXPECT_EQ(from_host.output_tokens, from_disk.output_tokens);
}

// A named save keeps a prompt's blocks through eviction by other prompts and a restart with a
// disk budget of one block.
TEST_F(EngineDiskTierTest, ANamedSaveOutlivesEvictionAndRestarts) {
  const std::vector<TokenId> prompt = Prompt(5, 30);
  std::vector<TokenId> first_tokens;
  int64_t file_bytes = 0;
  {
    auto engine = MakeEngine(Options());
    first_tokens = Run(*engine, prompt).output_tokens;
    const TierStats disk = StatsOf(*engine, "disk");
    file_bytes = disk.resident_bytes / disk.resident_blocks;
    absl::StatusOr<int64_t> saved = engine->SavePrefix("story", prompt);
    ASSERT_TRUE(saved.ok()) << saved.status();
    EXPECT_EQ(*saved, 28);
    EXPECT_TRUE(engine->HasSavedPrefix("story"));
    EXPECT_FALSE(engine->HasSavedPrefix("other"));
    EXPECT_EQ(engine->SavePrefix("../up", prompt).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  EngineOptions tiny = Options();
  tiny.disk_tier.capacity_bytes = 2 * file_bytes;
  auto engine = MakeEngine(tiny);
  for (uint32_t seed : {6u, 7u, 8u}) Run(*engine, Prompt(seed, 30));  // the budget turns over
  const GenerationResult again = Run(*engine, prompt);
  EXPECT_EQ(again.num_disk_hit_tokens, 28);
  EXPECT_EQ(again.output_tokens, first_tokens);
  EngineOptions no_disk = Options();
  no_disk.disk_tier = {};
  EXPECT_EQ(MakeEngine(no_disk)->SavePrefix("story", prompt).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// The engine's event listeners hear the disk tier with medium "DISK" (vLLM's offloading
// connector's name): its stores, and on a restarted engine the blocks a lookup read from disk.
TEST_F(EngineDiskTierTest, EventsCarryTheDiskMedium) {
  const std::vector<TokenId> prompt = Prompt(5, 30);
  for (int run = 0; run < 2; ++run) {
    auto engine = MakeEngine(Options());
    int64_t disk_stored = 0;
    engine->AddEventListener([&](const KvEvent& e) {
      if (e.medium == "DISK" && e.type == KvEventType::kBlockStored) ++disk_stored;
    });
    Run(*engine, prompt);
    // Run 0: the blocks queued for disk; run 1: the 7 the lookup found there, and the generated
    // tokens' blocks if they were stored before the start scan indexed the earlier copies.
    EXPECT_GE(disk_stored, 7) << "run " << run;
    EXPECT_EQ(StatsOf(*engine, "disk").hit_blocks, run == 0 ? 0 : 7);
  }
}

TEST_F(EngineDiskTierTest, BadDiskOptionsAreInvalidArgument) {
  EngineOptions o = Options();
  o.disk_tier.capacity_bytes = 10;
  absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Create(weights_, o);
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(e.status().message(), HasSubstr("capacity_bytes"));
  o = Options();
  o.disk_tier.read_threads = 0;
  EXPECT_THAT(Engine::Create(weights_, o).status().message(), HasSubstr("read_threads"));
  o = Options();
  o.enable_prefix_caching = false;
  EXPECT_THAT(Engine::Create(weights_, o).status().message(), HasSubstr("disk_tier"));
}

}  // namespace
}  // namespace pagedkv
