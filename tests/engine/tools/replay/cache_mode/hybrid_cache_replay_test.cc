// Copyright 2026 The pagedkv Authors.
//
// Hybrid cache-mode replay (engine/tools/replay/cache_mode/hybrid_cache_replay.h): the presets'
// groups, and a conversation workload through KvCacheManager (several groups) holding less KV per
// request than the same model treated as all full attention, at the same KV memory.
#include "engine/tools/replay/cache_mode/hybrid_cache_replay.h"

#include <sstream>

#include "engine/tools/replay/replay_modes.h"
#include "engine/tools/replay/workload/generators.h"
#include "gtest/gtest.h"

namespace pagedkv::replay {
namespace {

TEST(HybridCacheReplayTest, PresetGroups) {
  const ModelPreset oss = FindModelPreset("gpt-oss-20b").value();
  ASSERT_EQ(oss.layer_windows.size(), 24u);
  EXPECT_EQ(oss.layer_windows[0], 128);
  EXPECT_EQ(oss.layer_windows[1], 0);
  const auto g = HybridGroupsFor(oss);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].kind, KvCacheGroupKind::kFullAttention);
  EXPECT_EQ(g[0].num_layers, 12);
  EXPECT_EQ(g[1].sliding_window, 128);
  EXPECT_EQ(LayersPerPage(g), 12);
  const ModelPreset gemma = FindModelPreset("gemma-3-27b").value();
  const auto h = HybridGroupsFor(gemma);
  ASSERT_EQ(h.size(), 7u);  // 10 full layers; 52 window layers in groups of 10, 10, ..., 2
  EXPECT_EQ(h[0].num_layers, 10);
  EXPECT_EQ(h[6].num_layers, 2);
  EXPECT_EQ(h[6].sliding_window, 1024);
  EXPECT_EQ(AllFullGroupsFor(gemma)[0].num_layers, 62);
}

TEST(HybridCacheReplayTest, HybridHoldsLessKvThanAllFull) {
  const Workload w = GenerateConversationWorkload({.num_conversations = 30, .seed = 5});
  const ExpandedWorkload e = ExpandWorkload(w, {.block_size = 16}).value();
  const ModelPreset oss = FindModelPreset("gpt-oss-20b").value();
  HybridReplayOptions hybrid{.capacity_blocks = 2 * 2000, .groups = HybridGroupsFor(oss)};
  HybridReplayOptions full{.capacity_blocks = 2000, .groups = AllFullGroupsFor(oss)};
  for (const ReplayRequest& q : w.requests) {
    hybrid.output_tokens.push_back(q.output_length);
    full.output_tokens.push_back(q.output_length);
  }
  const HybridReplayResult h = RunHybridCacheReplay(e, hybrid).value();
  const HybridReplayResult f = RunHybridCacheReplay(e, full).value();
  EXPECT_EQ(h.requests, static_cast<int64_t>(w.requests.size()));
  EXPECT_EQ(h.refused, 0);
  EXPECT_EQ(f.refused, 0);
  EXPECT_GT(f.hit_tokens, 0);
  EXPECT_GT(h.hit_tokens, 0);
  EXPECT_EQ(h.queried_tokens, f.queried_tokens);
  // After decoding, window layers hold a few blocks: well under the all-full model's KV.
  EXPECT_LT(h.mean_decode_layer_blocks, 0.8 * f.mean_decode_layer_blocks);
  EXPECT_LE(h.mean_decode_layer_blocks, h.mean_prefill_layer_blocks + 24 * 40);
}

TEST(HybridCacheReplayTest, CacheModeFlagReportsBothModels) {
  const Workload w = GenerateConversationWorkload({.num_conversations = 10, .seed = 3});
  ReplayConfig c;
  c.hybrid_kv = true;
  c.model = "gpt-oss-20b";
  c.capacity_blocks = 1000;
  c.progress = false;
  std::ostringstream out;
  ASSERT_TRUE(RunCacheMode(c, w, out).ok());
  EXPECT_NE(out.str().find("hybrid / all-full"), std::string::npos) << out.str();
  c.model = "llama-3-8b";
  EXPECT_EQ(RunCacheMode(c, w, out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(RunHybridCacheReplay(ExpandedWorkload{}, {.capacity_blocks = 0}).ok());
  // Serve mode takes --hybrid-kv too (hybrid_serve_replay_test.cc), on one instance only.
  c.model = "gpt-oss-20b";
  c.mode = "serve";
  c.instances = 2;
  std::ostringstream err;
  EXPECT_EQ(RunReplay(c, out, err).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagedkv::replay
