// Copyright 2026 The pagedkv Authors.
//
// Serve-mode replay over a KvCacheManager (several groups) (`--mode serve --hybrid-kv`): one
// full-attention group gives exactly the plain replay, a windowed model holds less KV per running
// request and runs more requests than the same model all full at the same KV memory, the host
// tier runs over groups, the mode's flag path reports both, and shifted reuse of marked chunks
// runs over several groups (a copy per group) as over one.
#include <cstdint>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/tools/replay/cache_mode/hybrid_cache_replay.h"
#include "engine/tools/replay/replay_modes.h"
#include "engine/tools/replay/serve_mode/serve_replay.h"
#include "engine/tools/replay/workload/generators.h"
#include "gtest/gtest.h"
#include "tests/engine/tools/replay/serve_mode/serve_test_options.h"

namespace pagedkv::replay {
namespace {

using ::pagedkv::testing::SmallServeOptions;

TEST(HybridServeReplayTest, OneFullGroupEqualsThePlainReplay) {
  const Workload w = GenerateConversationWorkload({.num_conversations = 12, .seed = 5});
  ServeReplayOptions plain = SmallServeOptions();
  plain.capacity_blocks = 400;
  ServeReplayOptions hybrid = plain;
  hybrid.hybrid_groups = AllFullGroupsFor(plain.model);
  const ServeReplayResult p = RunServeReplay(w, plain).value();
  const ServeReplayResult h = RunServeReplay(w, hybrid).value();
  EXPECT_TRUE(h.hybrid);
  EXPECT_EQ(h.steps, p.steps);
  EXPECT_EQ(h.finished, p.finished);
  EXPECT_EQ(h.rejected, p.rejected);
  EXPECT_EQ(h.preemptions, p.preemptions);
  EXPECT_EQ(h.prefix_hit_tokens, p.prefix_hit_tokens);
  EXPECT_EQ(h.evictions, p.evictions);
  EXPECT_DOUBLE_EQ(h.simulated_seconds, p.simulated_seconds);
  EXPECT_DOUBLE_EQ(h.mean_used_blocks, p.mean_used_blocks);
  EXPECT_GT(p.prefix_hit_tokens, 0);
}

TEST(HybridServeReplayTest, WindowedModelRunsMoreRequestsInTheSameMemory) {
  const Workload w = GenerateConversationWorkload({.num_conversations = 16, .seed = 3});
  ServeReplayOptions o = SmallServeOptions();
  o.model = FindModelPreset("gpt-oss-20b").value();
  constexpr int64_t kFullModelBlocks = 600;
  ServeReplayOptions hybrid = o, full = o;
  hybrid.hybrid_groups = HybridGroupsFor(o.model);
  hybrid.capacity_blocks =
      kFullModelBlocks * o.model.num_layers / LayersPerPage(hybrid.hybrid_groups);
  full.hybrid_groups = AllFullGroupsFor(o.model);
  full.capacity_blocks = kFullModelBlocks;
  const ServeReplayResult h = RunServeReplay(w, hybrid).value();
  const ServeReplayResult f = RunServeReplay(w, full).value();
  EXPECT_EQ(h.finished + h.rejected, h.requests);
  EXPECT_EQ(f.finished + f.rejected, f.requests);
  EXPECT_LE(h.rejected, f.rejected);
  // KV per running request in full-model blocks: pages * layers per page / layers.
  const double h_kv = h.mean_used_blocks / h.mean_running * LayersPerPage(hybrid.hybrid_groups) /
                      o.model.num_layers;
  const double f_kv = f.mean_used_blocks / f.mean_running;
  EXPECT_LT(h_kv, f_kv);
  EXPECT_GE(h.mean_running, f.mean_running);
  EXPECT_LE(h.preemptions, f.preemptions);
}

// Tiers over KV cache groups (issue 40): one full group with a host tier is the plain replay with
// it, and a windowed model's blocks come back from the host tier.
TEST(HybridServeReplayTest, HostTierRunsOverGroups) {
  const Workload w = GenerateConversationWorkload({.num_conversations = 16, .seed = 7});
  ServeReplayOptions plain = SmallServeOptions();
  plain.capacity_blocks = 300;
  plain.tiers.host_capacity_blocks = 4000;
  ServeReplayOptions one_group = plain;
  one_group.hybrid_groups = AllFullGroupsFor(plain.model);
  const ServeReplayResult p = RunServeReplay(w, plain).value();
  const ServeReplayResult g = RunServeReplay(w, one_group).value();
  EXPECT_TRUE(g.tiers_enabled);
  EXPECT_GT(p.host_hit_tokens, 0);
  EXPECT_EQ(g.host_hit_tokens, p.host_hit_tokens);
  EXPECT_EQ(g.prefix_hit_tokens, p.prefix_hit_tokens);
  EXPECT_EQ(g.steps, p.steps);
  EXPECT_DOUBLE_EQ(g.simulated_seconds, p.simulated_seconds);

  ServeReplayOptions hybrid = plain;
  hybrid.model = FindModelPreset("gpt-oss-20b").value();
  hybrid.hybrid_groups = HybridGroupsFor(hybrid.model);
  ServeReplayOptions no_tier = hybrid;
  no_tier.tiers.host_capacity_blocks = 0;
  const ServeReplayResult h = RunServeReplay(w, hybrid).value();
  const ServeReplayResult n = RunServeReplay(w, no_tier).value();
  EXPECT_GT(h.host_hit_tokens, 0);
  EXPECT_GT(h.prefix_hit_tokens, n.prefix_hit_tokens);
  EXPECT_EQ(h.finished + h.rejected, h.requests);
}

TEST(HybridServeReplayTest, ShiftedReuseRunsOverGroups) {
  const Workload w = MakeBuiltinWorkload("rag", {.num_requests = 12, .seed = 2}).value();
  ServeReplayOptions o = SmallServeOptions();
  o.model = FindModelPreset("gpt-oss-20b").value();
  o.capacity_blocks = 4000;
  // Several groups: chunks are reused (a copy per group).
  o.hybrid_groups = HybridGroupsFor(o.model);
  const absl::StatusOr<ServeReplayResult> hybrid = RunServeReplay(w, o);
  ASSERT_TRUE(hybrid.ok()) << hybrid.status();
  EXPECT_TRUE(hybrid->shifted_counted);
  EXPECT_GT(hybrid->chunk_hits, 0);
  EXPECT_GT(hybrid->shifted_hit_tokens, 0);
  EXPECT_EQ(hybrid->finished + hybrid->rejected, hybrid->requests);
  // One group reuses chunks as the plain replay does; the same chunks are marked.
  o.hybrid_groups = AllFullGroupsFor(o.model);
  const absl::StatusOr<ServeReplayResult> one = RunServeReplay(w, o);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_TRUE(one->shifted_counted);
  EXPECT_EQ(one->chunks, hybrid->chunks);
  // Without shifted reuse nothing is counted.
  o.count_shifted = false;
  const absl::StatusOr<ServeReplayResult> off = RunServeReplay(w, o);
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->shifted_counted);
}

TEST(HybridServeReplayTest, ServeModeFlagReportsBothModels) {
  const Workload w = GenerateConversationWorkload({.num_conversations = 8, .seed = 3});
  ReplayConfig c;
  c.mode = "serve";
  c.hybrid_kv = true;
  c.model = "gpt-oss-20b";
  c.gpu = "H100";
  c.capacity_blocks = 800;
  c.progress = false;
  std::ostringstream out;
  const absl::Status status = RunServeMode(c, w, out);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_NE(out.str().find("hybrid"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("all_full"), std::string::npos) << out.str();
  c.json = true;
  std::ostringstream json;
  ASSERT_TRUE(RunServeMode(c, w, json).ok());
  const auto j = nlohmann::json::parse(json.str());
  EXPECT_TRUE(j["hybrid_kv"].get<bool>());
  EXPECT_EQ(j["all_full"]["pages"], 800);
  EXPECT_EQ(j["hybrid"]["pages"], 1600);
  EXPECT_TRUE(j["hybrid"].contains("kv_blocks_per_running_request"));
  EXPECT_EQ(j["hybrid"]["kv_cache_groups"], "full x12 | window 128 x12");
  EXPECT_EQ(j["all_full"]["kv_cache_groups"], "full x24");
  // A host tier (in full-model blocks, pages per layout as the device capacity).
  c.json = false;
  c.host_capacity_blocks = 2000;
  std::ostringstream tiers;
  ASSERT_TRUE(RunServeMode(c, w, tiers).ok());
  // Each run reports through the plain serve table: its tier line, its groups.
  const std::string text = tiers.str();
  const size_t first_tiers = text.find("tiers (host / disk / remote blocks)");
  ASSERT_NE(first_tiers, std::string::npos) << text;
  EXPECT_NE(text.find("tiers (host / disk / remote blocks)", first_tiers + 1), std::string::npos)
      << text;
  EXPECT_NE(text.find("full x12 | window 128 x12: 1600 pages"), std::string::npos) << text;
  c.host_capacity_blocks = 0;
  // Refused: a model without windows, several instances.
  c.model = "llama-3-8b";
  EXPECT_EQ(RunServeMode(c, w, out).code(), absl::StatusCode::kInvalidArgument);
  c.model = "gpt-oss-20b";
  c.instances = 2;
  EXPECT_EQ(RunServeMode(c, w, out).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagedkv::replay
