// Copyright 2026 The pagedkv Authors.
//
// Two `pagedkv generate` processes pointed at one redis-server: the second gets its prefix from
// Redis (tier_hit_tokens.remote), computes only the rest, and prints the greedy tokens of a run
// without any cache. Needs the shared aidreams260K model (skips without it) and redis-server.
#include <cstdio>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/redis_server.h"
#include "tests/shared_data.h"

namespace pagedkv {
namespace {

// The stdout of `command` (exit status must be 0).
std::string RunCommand(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  EXPECT_EQ(pclose(pipe), 0) << command;
  return out;
}

TEST(GenerateRemoteCacheTest, TheSecondProcessGetsItsPrefixFromRedis) {
  const auto data = pagedkv::testing::SharedDataDir();
  if (!data) GTEST_SKIP() << pagedkv::testing::kNoSharedDataMessage;
  const std::filesystem::path model = *data / "aidreams260K";
  if (!std::filesystem::exists(model / "aidreams260K.bin")) GTEST_SKIP() << "no aidreams260K";
  auto redis = pagedkv::testing::RedisServer::Start();
  if (!redis) GTEST_SKIP() << pagedkv::testing::kNoRedisMessage;
  const std::string base =
      std::string(PAGEDKV_CLI) + " generate --model " + (model / "aidreams260K.bin").string() +
      " --tokenizer " + (model / "tok512.bin").string() +
      " --prompt 'The old lighthouse keeper climbed the stairs every night to watch the sea "
      "and count the ships' -n 24 --json";
  const nlohmann::json plain = nlohmann::json::parse(RunCommand(base + " --no-prefix-caching"));
  const std::string shared = base + " --remote-cache " + redis->Url();
  const nlohmann::json first = nlohmann::json::parse(RunCommand(shared));
  const nlohmann::json second = nlohmann::json::parse(RunCommand(shared));
  const int64_t prompt_tokens = first["prompt_tokens"];
  const int64_t reusable = (prompt_tokens - 1) / 16 * 16;
  ASSERT_GT(reusable, 0);
  EXPECT_EQ(first["tier_hit_tokens"]["remote"], 0);
  EXPECT_EQ(second["tier_hit_tokens"]["remote"], reusable);
  EXPECT_EQ(second["prefix_cache_hit_tokens"], reusable);
  EXPECT_EQ(second["computed_tokens"], prompt_tokens - reusable + 23);
  EXPECT_EQ(second["outputs"][0]["output_ids"], plain["outputs"][0]["output_ids"]);
  EXPECT_EQ(first["outputs"][0]["output_ids"], plain["outputs"][0]["output_ids"]);
}

}  // namespace
}  // namespace pagedkv
