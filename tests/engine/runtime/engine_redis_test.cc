// Copyright 2026 The pagedkv Authors.
//
// Engines sharing KV through a real redis-server (tests/redis_server.h): a second engine gets its
// prefix from Redis and computes only the rest, with the greedy tokens of a run without any
// cache; a killed server or a corrupted value is a miss, never an error or a wrong token.
#include <hiredis/hiredis.h>

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
#include "tests/redis_server.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::kNoRedisMessage;
using ::pagedkv::testing::RedisServer;

constexpr int kNewTokens = 12;

class EngineRedisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    redis_ = RedisServer::Start();
    if (!redis_) GTEST_SKIP() << kNoRedisMessage;
    weights_ = testing::TinyTierModel(43);
  }
  EngineOptions Options(bool remote = true) {
    EngineOptions o;
    o.backend = BackendKind::kCpu;
    o.block_size = 4;
    o.num_kv_blocks = 64;
    if (remote) {
      o.remote_cache_url = redis_->Url();
      o.remote_tier.report = [this](std::string_view line) { reports_.emplace_back(line); };
      o.remote_tier.now_ms = [this] { return now_ms_; };
    }
    return o;
  }
  std::unique_ptr<Engine> MakeEngine(const EngineOptions& o) {
    return testing::MakeTierEngine(weights_, o);
  }
  static std::vector<TokenId> Prompt(uint32_t seed, int n) {
    return testing::RandomPrompt(seed, n);
  }
  static GenerationRequest Request(const std::vector<TokenId>& prompt, std::string salt = "") {
    return {.prompt_tokens = prompt,
            .max_new_tokens = kNewTokens,
            .cache_salt = std::move(salt),
            .stop_at_eos = false};
  }
  static GenerationResult Run(Engine& engine, const GenerationRequest& r) {
    return testing::RunOne(engine, r);
  }
  std::vector<TokenId> Uncached(const std::vector<TokenId>& prompt) {
    EngineOptions o = Options(/*remote=*/false);
    o.enable_prefix_caching = false;
    return Run(*MakeEngine(o), Request(prompt)).output_tokens;
  }
  static TierStats Stats(const Engine& engine, const std::string& tier) {
    return testing::TierStatsNamed(engine, tier);
  }

  std::unique_ptr<RedisServer> redis_;
  std::shared_ptr<const ModelWeights> weights_;
  std::vector<std::string> reports_;
  int64_t now_ms_ = 0;
};

TEST_F(EngineRedisTest, ASecondEngineGetsThePrefixFromRedisAndComputesOnlyTheRest) {
  const std::vector<TokenId> prompt = Prompt(1, 30);  // 7 reusable blocks of 4
  const GenerationResult a = Run(*MakeEngine(Options()), Request(prompt));
  EXPECT_EQ(a.num_remote_hit_tokens, 0);
  auto second = MakeEngine(Options());
  const GenerationResult b = Run(*second, Request(prompt));
  EXPECT_EQ(b.num_prefix_hit_tokens, 28);
  EXPECT_EQ(b.num_remote_hit_tokens, 28);
  EXPECT_EQ(second->stats().num_computed_tokens, 2 + kNewTokens - 1);  // 30 - 28, then decode
  EXPECT_EQ(b.output_tokens, Uncached(prompt));
  EXPECT_EQ(b.output_tokens, a.output_tokens);
  EXPECT_EQ(Stats(*second, "remote").hit_blocks, 7);
  EXPECT_TRUE(reports_.empty());
}

// Quantized KV blocks go through Redis as their bytes: a second int8 engine gets the prefix and
// the first engine's tokens; an engine of another KV dtype (its fingerprint differs) finds none.
TEST_F(EngineRedisTest, QuantizedBlocksAreSharedOnlyWithTheSameDType) {
  const std::vector<TokenId> prompt = Prompt(23, 30);
  EngineOptions int8 = Options();
  int8.kv_dtype = DType::kInt8;
  const GenerationResult a = Run(*MakeEngine(int8), Request(prompt));
  EngineOptions fp8 = Options();
  fp8.kv_dtype = DType::kFp8E4M3;
  EXPECT_EQ(Run(*MakeEngine(fp8), Request(prompt)).num_remote_hit_tokens, 0);
  const GenerationResult b = Run(*MakeEngine(int8), Request(prompt));
  EXPECT_EQ(b.num_remote_hit_tokens, 28);
  EXPECT_EQ(b.output_tokens, a.output_tokens);
}

TEST_F(EngineRedisTest, RemoteHitsAreKeptInTheHostTier) {
  const std::vector<TokenId> prompt = Prompt(2, 30);
  Run(*MakeEngine(Options()), Request(prompt));
  EngineOptions o = Options();
  o.host_tier = {.capacity_blocks = 32};
  auto engine = MakeEngine(o);
  EXPECT_EQ(Run(*engine, Request(prompt)).num_remote_hit_tokens, 28);
  engine->kv_cache_manager().ResetPrefixCache();
  const GenerationResult again = Run(*engine, Request(prompt));
  EXPECT_EQ(again.num_host_hit_tokens, 28);
  EXPECT_EQ(again.num_remote_hit_tokens, 0);
  EXPECT_EQ(again.output_tokens, Uncached(prompt));
}

TEST_F(EngineRedisTest, RedisKilledMidRunGenerationGoesOnWithTheSameOutput) {
  const std::vector<TokenId> prompt = Prompt(3, 30);
  const std::vector<TokenId> want = Uncached(prompt);
  Run(*MakeEngine(Options()), Request(prompt));  // the prefix is in Redis now
  auto engine = MakeEngine(Options());
  ASSERT_TRUE(engine->AddRequest(Request(Prompt(4, 30))).ok());
  ASSERT_TRUE(engine->Step().ok());  // one step with the server up
  redis_->Stop();                    // killed mid-run
  const GenerationResult r = Run(*engine, Request(prompt));
  EXPECT_EQ(r.num_remote_hit_tokens, 0);
  EXPECT_EQ(r.output_tokens, want);
  const TierStats s = Stats(*engine, "remote");
  EXPECT_GT(s.faults, 0);
  EXPECT_EQ(s.incidents, 1);
  EXPECT_EQ(reports_.size(), 1u);  // reported once for the whole incident
}

TEST_F(EngineRedisTest, ACorruptedValueIsAMissWithTheRightOutput) {
  const std::vector<TokenId> prompt = Prompt(5, 30);
  Run(*MakeEngine(Options()), Request(prompt));
  // Flip one payload byte of every stored block.
  redisContext* raw = redisConnect("127.0.0.1", redis_->port());
  ASSERT_NE(raw, nullptr);
  auto* keys = static_cast<redisReply*>(redisCommand(raw, "KEYS pagedkv:*"));
  ASSERT_NE(keys, nullptr);
  ASSERT_GT(keys->elements, 0u);
  for (size_t i = 0; i < keys->elements; ++i) {
    const std::string key(keys->element[i]->str, keys->element[i]->len);
    auto* v = static_cast<redisReply*>(redisCommand(raw, "GET %b", key.data(), key.size()));
    std::string value(v->str, v->len);
    freeReplyObject(v);
    value[value.size() / 2 + 40] ^= 0x20;
    freeReplyObject(
        redisCommand(raw, "SET %b %b", key.data(), key.size(), value.data(), value.size()));
  }
  freeReplyObject(keys);
  redisFree(raw);
  auto engine = MakeEngine(Options());
  const GenerationResult r = Run(*engine, Request(prompt));
  EXPECT_EQ(r.num_remote_hit_tokens, 0);
  EXPECT_EQ(r.output_tokens, Uncached(prompt));
  EXPECT_GE(Stats(*engine, "remote").faults, 1);
}

TEST_F(EngineRedisTest, SaltsIsolateAcrossEngines) {
  const std::vector<TokenId> prompt = Prompt(6, 30);
  Run(*MakeEngine(Options()), Request(prompt, "tenant-a"));
  EXPECT_EQ(Run(*MakeEngine(Options()), Request(prompt, "tenant-b")).num_prefix_hit_tokens, 0);
  EXPECT_EQ(Run(*MakeEngine(Options()), Request(prompt)).num_prefix_hit_tokens, 0);
  EXPECT_EQ(Run(*MakeEngine(Options()), Request(prompt, "tenant-a")).num_remote_hit_tokens, 28);
}

TEST_F(EngineRedisTest, TheEngineListenerGetsTheRemoteTiersStoredAndRemovedEvents) {
  const std::vector<TokenId> prompt = Prompt(7, 30);  // 7 reusable blocks
  auto engine = MakeEngine(Options());
  std::vector<BlockHash> stored, removed;
  engine->AddEventListener([&](const KvEvent& e) {
    if (e.medium != "EXTERNAL") return;
    if (e.type == KvEventType::kBlockStored) stored.push_back(e.hash);
    if (e.type == KvEventType::kBlockRemoved) removed.push_back(e.hash);
  });
  Run(*engine, Request(prompt));
  const size_t written = stored.size();
  EXPECT_EQ(static_cast<int64_t>(written), Stats(*engine, "remote").stored_blocks);
  EXPECT_GE(written, 7u);  // the prompt's blocks, then the generated ones
  EXPECT_TRUE(removed.empty());
  // The server loses everything; the engine learns it at its next lookup of those keys.
  redisContext* raw = redisConnect("127.0.0.1", redis_->port());
  ASSERT_NE(raw, nullptr);
  freeReplyObject(redisCommand(raw, "FLUSHALL"));
  redisFree(raw);
  engine->kv_cache_manager().ResetPrefixCache();
  const GenerationResult again = Run(*engine, Request(prompt));
  EXPECT_EQ(again.num_remote_hit_tokens, 0);
  EXPECT_EQ(again.output_tokens, Uncached(prompt));
  EXPECT_EQ(removed, std::vector<BlockHash>(stored.begin(), stored.begin() + 7));
  // Written again: the prompt's blocks are announced again (the generated ones never left).
  EXPECT_EQ(stored.size(), written + 7);
}

TEST_F(EngineRedisTest, ARequestReadmittedAfterPreemptionLoadsFromRedis) {
  // Four 30-token prompts with 24 new tokens each on a 16-block pool: preempted again and again.
  std::vector<GenerationRequest> requests;
  for (uint32_t seed : {31u, 32u, 33u, 34u}) {
    GenerationRequest r = Request(Prompt(seed, 30));
    r.max_new_tokens = 24;
    requests.push_back(r);
  }
  EngineOptions o = Options();
  o.num_kv_blocks = 16;
  auto engine = MakeEngine(o);
  absl::StatusOr<std::vector<GenerationResult>> got = engine->Generate(requests);
  ASSERT_TRUE(got.ok()) << got.status();
  EngineOptions plain = Options(/*remote=*/false);
  plain.enable_prefix_caching = false;
  absl::StatusOr<std::vector<GenerationResult>> want = MakeEngine(plain)->Generate(requests);
  ASSERT_TRUE(want.ok()) << want.status();
  const EngineStats& s = engine->stats();
  EXPECT_GT(s.num_preemptions, 0);
  EXPECT_GT(s.num_readmission_remote_hit_tokens, 0);
  EXPECT_EQ(s.num_remote_hit_tokens, 0);  // distinct prompts: nothing at first admissions
  int64_t remote = 0;
  for (size_t i = 0; i < got->size(); ++i) {
    EXPECT_EQ((*got)[i].output_tokens, (*want)[i].output_tokens) << i;
    remote += (*got)[i].num_readmission_remote_hit_tokens;
  }
  EXPECT_EQ(remote, s.num_readmission_remote_hit_tokens);
  EXPECT_LE(remote, Stats(*engine, "remote").hit_blocks * 4);
}

TEST_F(EngineRedisTest, ABadUrlIsInvalidArgument) {
  EngineOptions o = Options();
  o.remote_cache_url = "redis://host:notaport";
  EXPECT_TRUE(absl::IsInvalidArgument(Engine::Create(weights_, o).status()));
}

}  // namespace
}  // namespace pagedkv
