// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/serve_mode/serve_replay.h"

#include "engine/tools/replay/replay_modes.h"
#include "engine/tools/replay/serve_mode/cost_model.h"
#include "engine/tools/replay/workload/generators.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/tools/replay/serve_mode/serve_test_options.h"

namespace pagedkv::replay {
namespace {

using ::pagedkv::testing::SmallServeOptions;
using ::testing::HasSubstr;

TEST(CostModelTest, PresetsAndKvBytesPerToken) {
  auto llama = FindModelPreset("Llama-3-8B");  // case-insensitive
  ASSERT_TRUE(llama.ok());
  EXPECT_EQ(llama->KvBytesPerToken(), 2 * 32 * 8 * 128 * 2);
  auto h200 = FindGpuPreset("h200");
  ASSERT_TRUE(h200.ok());
  EXPECT_EQ(h200->name, "H200");
  auto bad = FindGpuPreset("TPU");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("H100, H200, A100"));
  EXPECT_FALSE(FindModelPreset("gpt-5").ok());
}

// --kv-cache-dtype with --kv-cache-dtype-v: a token's K rows in one dtype, its V rows in the other
// (llama-3-8b: 32 layers x 8 KV heads of 128 values; q8_0 rows 136 bytes, q4_0 72).
TEST(CostModelTest, KAndVDTypesEachCountTheirRows) {
  absl::StatusOr<ModelPreset> mixed = ReplayModelPreset("llama-3-8b", "q8_0", "q4_0");
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(mixed->KvBytesPerToken(), 32 * 8 * (136 + 72));
  absl::StatusOr<int64_t> blocks = GibToBlocks(1.0, "llama-3-8b", 16, "q8_0", "q4_0");
  ASSERT_TRUE(blocks.ok());
  EXPECT_EQ(*blocks, (int64_t{1} << 30) / (16 * 32 * 8 * (136 + 72)));
  absl::StatusOr<ModelPreset> bad = ReplayModelPreset("llama-3-8b", "", "q3_k");
  EXPECT_THAT(bad.status().message(), HasSubstr("--kv-cache-dtype-v"));
}

TEST(CostModelTest, StepTimeIsTheRooflineMaximum) {
  const GpuPreset gpu{
      .name = "toy", .peak_flops = 1e12, .memory_bandwidth = 1e9, .memory_bytes = 1e10};
  const ModelPreset model{.name = "toy",
                          .num_parameters = 1e6,
                          .num_layers = 2,
                          .num_q_heads = 2,
                          .num_kv_heads = 1,
                          .head_dim = 4};
  RooflineCostModel cost(gpu, model,
                         {.compute_efficiency = 1, .memory_efficiency = 1, .step_overhead_s = 0});
  StepWork work;
  work.AddSequence(/*num_computed_tokens=*/10, /*num_new_tokens=*/3);  // positions 10, 11, 12
  EXPECT_EQ(work.num_tokens, 3);
  EXPECT_DOUBLE_EQ(work.attention_context, 11 + 12 + 13);
  EXPECT_EQ(work.kv_tokens_read, 13);
  const double flops = 2 * 1e6 * 3 + 4.0 * 2 * 2 * 4 * 36;
  EXPECT_DOUBLE_EQ(cost.StepFlops(work), flops);
  const double bytes = 2e6 + 2.0 * 2 * 1 * 4 * 2 * (13 + 3);
  EXPECT_DOUBLE_EQ(cost.StepBytes(work), bytes);
  EXPECT_DOUBLE_EQ(cost.StepSeconds(work), std::max(flops / 1e12, bytes / 1e9));
  EXPECT_EQ(cost.StepSeconds(StepWork{}), 0);
}

TEST(ServeReplayTest, RunsEveryRequestAndCountsPrefixHits) {
  auto w = MakeBuiltinWorkload("system-prompt", {.num_requests = 120, .seed = 3});
  ASSERT_TRUE(w.ok());
  ServeReplayOptions o = SmallServeOptions();
  auto r = RunServeReplay(*w, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->requests, 120);
  EXPECT_EQ(r->finished, 120);
  EXPECT_EQ(r->rejected, 0);
  int64_t want_out = 0, want_prompt = 0;
  for (const ReplayRequest& q : w->requests) {
    want_out += std::max<int64_t>(1, q.output_length);
    want_prompt += q.input_length;
  }
  EXPECT_EQ(r->output_tokens, want_out);
  EXPECT_EQ(r->prompt_tokens, want_prompt);
  EXPECT_GT(r->prefix_hit_rate(), 0.2);  // shared system prompts hit
  EXPECT_GT(r->ttft_p50_s, 0);
  EXPECT_LE(r->ttft_p50_s, r->ttft_p99_s);
  EXPECT_GT(r->output_tokens_per_second(), 0);
  EXPECT_GT(r->steps, 0);
  // Every uncached prompt token and every decode token is computed at least once.
  EXPECT_GE(r->computed_tokens, r->admitted_tokens - r->prefix_hit_tokens);

  auto again = RunServeReplay(*w, o);  // deterministic simulation
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->steps, r->steps);
  EXPECT_EQ(again->prefix_hit_tokens, r->prefix_hit_tokens);
  EXPECT_DOUBLE_EQ(again->simulated_seconds, r->simulated_seconds);
}

TEST(ServeReplayTest, SmallPoolPreemptsOrRejectsButFinishes) {
  auto w = MakeBuiltinWorkload("conversation", {.num_requests = 60, .seed = 4});
  ASSERT_TRUE(w.ok());
  ServeReplayOptions o = SmallServeOptions();
  o.capacity_blocks = 300;  // 4800 tokens: long conversations do not fit
  auto r = RunServeReplay(*w, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->finished + r->rejected, r->requests);
  EXPECT_EQ(r->capacity_blocks, 300);
}

// Tiers below a small pool: their hits add to the prefix hits (attributed per tier), their loads
// are charged on the links (a slower link costs more simulated time), and every block is released
// at the end (Finish checks the pool).
TEST(ServeReplayTest, TiersAddPrefixHitsAndChargeTheirLoads) {
  auto w = MakeBuiltinWorkload("conversation", {.num_requests = 80, .seed = 5});
  ASSERT_TRUE(w.ok());
  ServeReplayOptions o = SmallServeOptions();
  o.capacity_blocks = 600;
  auto device = RunServeReplay(*w, o);
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_FALSE(device->tiers_enabled);
  o.tiers = {.host_capacity_blocks = 2000, .remote_capacity_blocks = 20000};
  auto tiered = RunServeReplay(*w, o);
  ASSERT_TRUE(tiered.ok()) << tiered.status();
  EXPECT_TRUE(tiered->tiers_enabled);
  EXPECT_GT(tiered->host_hit_tokens + tiered->remote_hit_tokens, 0);
  EXPECT_LE(tiered->host_hit_tokens + tiered->remote_hit_tokens, tiered->prefix_hit_tokens);
  EXPECT_GT(tiered->prefix_hit_rate(), device->prefix_hit_rate());
  EXPECT_GT(tiered->tier_load_seconds, 0);
  EXPECT_GT(tiered->host_loaded_blocks, 0);
  EXPECT_EQ(tiered->finished + tiered->rejected, tiered->requests);
  o.tiers.host_link = *FindLinkPreset("pcie4");
  o.tiers.remote_link = *FindLinkPreset("25gbe");
  auto slow = RunServeReplay(*w, o);
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_EQ(slow->host_loaded_blocks + slow->remote_loaded_blocks > 0, true);
  EXPECT_GT(
      slow->tier_load_seconds /
          std::max<int64_t>(1, slow->host_loaded_blocks + slow->remote_loaded_blocks),
      tiered->tier_load_seconds / (tiered->host_loaded_blocks + tiered->remote_loaded_blocks));
  EXPECT_FALSE(FindLinkPreset("carrier-pigeon").ok());
}

// A disk tier below a small host tier: its hits are attributed to it, its loads are charged at
// the disk's bandwidth (a SATA SSD costs more simulated time per block than NVMe), and the JSON
// report carries it.
TEST(ServeReplayTest, ADiskTierAddsHitsChargedAtItsBandwidth) {
  auto w = MakeBuiltinWorkload("conversation", {.num_requests = 80, .seed = 5});
  ASSERT_TRUE(w.ok());
  ServeReplayOptions o = SmallServeOptions();
  o.capacity_blocks = 600;
  o.tiers = {.host_capacity_blocks = 200};
  auto host_only = RunServeReplay(*w, o);
  o.tiers.disk_capacity_blocks = 20000;
  auto nvme = RunServeReplay(*w, o);
  o.tiers.disk_link = *FindLinkPreset("sata-ssd");
  auto sata = RunServeReplay(*w, o);
  ASSERT_TRUE(host_only.ok() && nvme.ok() && sata.ok());
  EXPECT_GT(nvme->disk_hit_tokens, 0);
  EXPECT_GT(nvme->disk_loaded_blocks, 0);
  EXPECT_GT(nvme->prefix_hit_rate(), host_only->prefix_hit_rate());
  EXPECT_EQ(host_only->disk_hit_tokens, 0);
  EXPECT_GT(sata->tier_load_seconds / std::max<int64_t>(1, sata->disk_loaded_blocks),
            nvme->tier_load_seconds / nvme->disk_loaded_blocks);
  EXPECT_EQ(ServeResultJson(*nvme)["tiers"]["disk_capacity_blocks"], 20000);
  EXPECT_EQ(ServeResultJson(*nvme)["tiers"]["disk_hit_tokens"], nvme->disk_hit_tokens);
}

// The host tier's store threshold in serve mode (the engine's TierChain decides): a threshold no
// block reaches leaves the host tier empty (no host hits; with a remote tier, its hits would
// still be copied into the host tier, as the engine does), and a threshold of 1 is reported.
TEST(ServeReplayTest, HostStoreThresholdLimitsWhatTheHostTierHolds) {
  auto w = MakeBuiltinWorkload("conversation", {.num_requests = 80, .seed = 5});
  ASSERT_TRUE(w.ok());
  ServeReplayOptions o = SmallServeOptions();
  o.capacity_blocks = 600;
  o.tiers = {.host_capacity_blocks = 2000};
  for (TierStoreRule rule : {TierStoreRule::kWriteThrough, TierStoreRule::kWriteBack}) {
    SCOPED_TRACE(TierStoreRuleName(rule));
    o.tiers.host_store = rule;
    o.tiers.host_store_threshold = 0;
    auto all = RunServeReplay(*w, o);
    o.tiers.host_store_threshold = 1;
    auto reused = RunServeReplay(*w, o);
    o.tiers.host_store_threshold = 1000000;
    auto none = RunServeReplay(*w, o);
    ASSERT_TRUE(all.ok() && reused.ok() && none.ok());
    EXPECT_GT(all->host_hit_tokens, 0);
    EXPECT_EQ(none->host_hit_tokens, 0);
    EXPECT_LT(none->prefix_hit_tokens, all->prefix_hit_tokens);
    EXPECT_EQ(reused->host_store.threshold, 1);
    EXPECT_EQ(ServeResultJson(*reused)["tiers"]["host_store_threshold"], 1);
  }
  o.tiers.host_store_threshold = -1;
  auto bad = RunServeReplay(*w, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("--host-store-threshold must be >= 0"));
}

// A request that can never fit, arriving after the others have finished, is rejected; the replay
// goes on to the next arrival and ends normally.
TEST(ServeReplayTest, RequestThatCannotFitIsRejectedWheneverItArrives) {
  Workload w{.name = "late-giant"};
  auto request = [](double arrival_ms, int32_t tokens, uint64_t content) {
    return ReplayRequest{.arrival_ms = arrival_ms,
                         .input_length = tokens,
                         .output_length = 4,
                         .segments = {{.content_id = content, .length = tokens}}};
  };
  w.requests = {request(0, 40, 1), request(60000, 100000, 2), request(120000, 40, 3),
                request(180000, 100000, 4)};
  ServeReplayOptions o = SmallServeOptions();
  o.capacity_blocks = 64;  // 1024 tokens
  auto r = RunServeReplay(w, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->finished, 2);
  EXPECT_EQ(r->rejected, 2);
}

TEST(ServeReplayTest, BadOptionsAreClearErrors) {
  auto w = MakeBuiltinWorkload("rag", {.num_requests = 5});
  ASSERT_TRUE(w.ok());
  ServeReplayOptions o = SmallServeOptions();
  o.policy = "belady";
  auto belady = RunServeReplay(*w, o);
  ASSERT_FALSE(belady.ok());
  EXPECT_THAT(belady.status().message(), HasSubstr("cache mode only"));

  o = SmallServeOptions();
  o.model = *FindModelPreset("llama-3-70b");
  o.gpu = *FindGpuPreset("A100");
  auto too_big = RunServeReplay(*w, o);
  ASSERT_FALSE(too_big.ok());
  EXPECT_THAT(too_big.status().message(), HasSubstr("does not fit"));

  o = SmallServeOptions();
  o.policy = "random";
  EXPECT_FALSE(RunServeReplay(*w, o).ok());
}

TEST(ServeReplayTest, KvCapacityFollowsMemoryMinusWeights) {
  auto blocks = KvCapacityBlocks(*FindGpuPreset("H200"), *FindModelPreset("llama-3-8b"), 0.9, 16);
  ASSERT_TRUE(blocks.ok());
  const double want = (141e9 * 0.9 - 8.03e9 * 2) / (131072.0 * 16);
  EXPECT_EQ(*blocks, static_cast<int64_t>(want));
  EXPECT_FALSE(
      KvCapacityBlocks(*FindGpuPreset("H200"), *FindModelPreset("llama-3-8b"), 0, 16).ok());
}

}  // namespace
}  // namespace pagedkv::replay
