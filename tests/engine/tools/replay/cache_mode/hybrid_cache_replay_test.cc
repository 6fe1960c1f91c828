// Copyright 2026 The pagedkv Authors.
//
// Cache-mode replay over KV cache groups (RunCacheReplay with CacheReplayOptions::groups,
// manager_replay.h; the presets' groups in hybrid_cache_replay.h): a conversation workload through
// KvCacheManager (several groups) holding less KV per request than the same model treated as all
// full attention at the same KV memory, tiers, and marked chunks counted over groups.
#include "engine/tools/replay/cache_mode/hybrid_cache_replay.h"

#include <sstream>

#include "engine/tools/replay/cache_mode/cache_replay.h"
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

// The KvGroupsRow of a replay over groups.
const KvGroupsRow& Row(const CacheReplayResult& r) {
  EXPECT_TRUE(r.kv_groups.has_value());
  return *r.kv_groups;
}

TEST(HybridCacheReplayTest, HybridHoldsLessKvThanAllFull) {
  const Workload w = GenerateConversationWorkload({.num_conversations = 30, .seed = 5});
  const ExpandedWorkload e = ExpandWorkload(w, {.block_size = 16}).value();
  const ModelPreset oss = FindModelPreset("gpt-oss-20b").value();
  CacheReplayOptions hybrid{.capacity_blocks = 2 * 2000, .groups = HybridGroupsFor(oss)};
  CacheReplayOptions full{.capacity_blocks = 2000, .groups = AllFullGroupsFor(oss)};
  for (const ReplayRequest& q : w.requests) {
    hybrid.output_tokens.push_back(q.output_length);
    full.output_tokens.push_back(q.output_length);
  }
  const CacheReplayResult h = RunCacheReplay(e, hybrid).value();
  const CacheReplayResult f = RunCacheReplay(e, full).value();
  EXPECT_EQ(h.requests, static_cast<int64_t>(w.requests.size()));
  EXPECT_EQ(Row(h).refused, 0);
  EXPECT_EQ(Row(f).refused, 0);
  EXPECT_EQ(Row(h).groups, "full x12 | window 128 x12");
  EXPECT_GT(f.hit_tokens, 0);
  EXPECT_GT(h.hit_tokens, 0);
  EXPECT_EQ(h.total_tokens, f.total_tokens);
  // After decoding, window layers hold a few blocks: well under the all-full model's KV.
  EXPECT_LT(Row(h).mean_decode_layer_blocks, 0.8 * Row(f).mean_decode_layer_blocks);
  EXPECT_LE(Row(h).mean_decode_layer_blocks, Row(h).mean_prefill_layer_blocks + 24 * 40);
}

// A small pool over an unbounded write-through host tier hits exactly as an unbounded pool does:
// every block a request computed is in the pool or the tier, and the engine's tier walk loads
// each group's blocks (full-attention prefixes, sliding-window windows) back.
TEST(HybridCacheReplayTest, AnUnboundedHostTierHitsLikeAnUnboundedPool) {
  const Workload w = GenerateConversationWorkload({.num_conversations = 30, .seed = 5});
  const ExpandedWorkload e = ExpandWorkload(w, {.block_size = 16}).value();
  const ModelPreset oss = FindModelPreset("gpt-oss-20b").value();
  for (const auto& groups : {HybridGroupsFor(oss), AllFullGroupsFor(oss)}) {
    SCOPED_TRACE(groups.size() > 1 ? "hybrid" : "all full");
    const CacheReplayOptions small{.capacity_blocks = 600, .groups = groups};
    CacheReplayOptions tiered = small;
    tiered.host_capacity_blocks = 1'000'000;
    CacheReplayOptions unbounded = small;
    unbounded.capacity_blocks = 1'000'000;
    const CacheReplayResult s = RunCacheReplay(e, small).value();
    const CacheReplayResult t = RunCacheReplay(e, tiered).value();
    const CacheReplayResult u = RunCacheReplay(e, unbounded).value();
    EXPECT_EQ(Row(t).refused, 0);
    EXPECT_GT(s.evictions, 0);  // the small pool alone loses blocks
    EXPECT_LT(s.hit_tokens, u.hit_tokens);
    EXPECT_EQ(t.hit_tokens, u.hit_tokens);
    EXPECT_GT(t.host_hit_tokens, 0);
    EXPECT_LE(t.host_hit_tokens, t.hit_tokens);
    EXPECT_EQ(t.remote_hit_tokens, 0);
    EXPECT_EQ(u.host_hit_tokens, 0);
  }
}

// A remote tier alone serves what the pool evicted, counted as remote hits.
TEST(HybridCacheReplayTest, ARemoteTierAloneCountsRemoteHits) {
  const Workload w = GenerateConversationWorkload({.num_conversations = 30, .seed = 5});
  const ExpandedWorkload e = ExpandWorkload(w, {.block_size = 16}).value();
  const ModelPreset oss = FindModelPreset("gpt-oss-20b").value();
  CacheReplayOptions o{.capacity_blocks = 600, .groups = HybridGroupsFor(oss)};
  const CacheReplayResult without = RunCacheReplay(e, o).value();
  o.remote_capacity_blocks = 1'000'000;
  const CacheReplayResult with = RunCacheReplay(e, o).value();
  EXPECT_GT(with.remote_hit_tokens, 0);
  EXPECT_EQ(with.host_hit_tokens, 0);
  EXPECT_GT(with.hit_tokens, without.hit_tokens);
  EXPECT_LE(with.remote_hit_tokens, with.hit_tokens);
}

// Marked chunks over groups: counted through the manager's chunk index (a copy per group); the
// same workload over one group counts the same chunks; belady and a negative decode_tokens are
// refused.
TEST(HybridCacheReplayTest, MarkedChunksAreCountedOverGroups) {
  const Workload w = MakeBuiltinWorkload("rag", {.num_requests = 40, .seed = 2}).value();
  const ExpandedWorkload e = ExpandWorkload(w, {.block_size = 16}).value();
  const ModelPreset oss = FindModelPreset("gpt-oss-20b").value();
  const CacheReplayResult h =
      RunCacheReplay(e, {.capacity_blocks = 8000, .groups = HybridGroupsFor(oss)}).value();
  const CacheReplayResult f =
      RunCacheReplay(e, {.capacity_blocks = 4000, .groups = AllFullGroupsFor(oss)}).value();
  EXPECT_TRUE(h.shifted_counted);
  EXPECT_GT(h.chunk_hits, 0);
  EXPECT_GT(h.shifted_hit_tokens, 0);
  EXPECT_EQ(h.chunks, f.chunks);
  EXPECT_FALSE(
      RunCacheReplay(
          e, {.capacity_blocks = 8000, .count_shifted = false, .groups = HybridGroupsFor(oss)})
          ->shifted_counted);
  EXPECT_EQ(RunCacheReplay(
                e, {.capacity_blocks = 800, .policy = "belady", .groups = HybridGroupsFor(oss)})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunCacheReplay(
                e, {.capacity_blocks = 800, .groups = HybridGroupsFor(oss), .decode_tokens = -1})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
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
  EXPECT_EQ(out.str().find("tiers:"), std::string::npos) << out.str();
  // Tiers (full-model blocks) give each row a line of tier hits.
  c.host_capacity_blocks = 500;
  std::ostringstream tiered;
  ASSERT_TRUE(RunCacheMode(c, w, tiered).ok());
  EXPECT_NE(tiered.str().find("hybrid    tiers:"), std::string::npos) << tiered.str();
  c.host_store = "write-sideways";
  EXPECT_EQ(RunCacheMode(c, w, out).code(), absl::StatusCode::kInvalidArgument);
  c.host_store = "write-through";
  c.host_capacity_blocks = 0;
  c.model = "llama-3-8b";
  EXPECT_EQ(RunCacheMode(c, w, out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(RunCacheReplay(ExpandedWorkload{}, {.capacity_blocks = 0, .groups = {{}}}).ok());
  // A workload marking chunks: shifted hits are counted over each row's groups, or not at all
  // with --no-shifted.
  c.model = "gpt-oss-20b";
  const Workload rag = MakeBuiltinWorkload("rag", {.num_requests = 12, .seed = 2}).value();
  std::ostringstream shifted;
  ASSERT_TRUE(RunCacheMode(c, rag, shifted).ok());
  EXPECT_NE(shifted.str().find("shifted"), std::string::npos) << shifted.str();
  c.count_shifted = false;
  std::ostringstream plain;
  EXPECT_TRUE(RunCacheMode(c, rag, plain).ok());
  EXPECT_EQ(plain.str().find("shifted"), std::string::npos) << plain.str();
  c.count_shifted = true;
  // Serve mode takes --hybrid-kv too (hybrid_serve_replay_test.cc), on one instance only.
  c.model = "gpt-oss-20b";
  c.mode = "serve";
  c.instances = 2;
  std::ostringstream err;
  EXPECT_EQ(RunReplay(c, out, err).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pagedkv::replay
