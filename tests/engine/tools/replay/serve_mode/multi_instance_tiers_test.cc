// Copyright 2026 The pagedkv Authors.
//
// Multi-instance serve replay with KV tiers: a host tier per instance, one remote tier shared by
// all of them.
#include <string>
#include <vector>

#include "engine/tools/replay/serve_mode/multi_instance_replay.h"
#include "engine/tools/replay/workload/generators.h"
#include "gtest/gtest.h"
#include "tests/engine/tools/replay/serve_mode/serve_test_options.h"

namespace pagedkv::replay {
namespace {

using ::pagedkv::testing::SmallPoolServeOptions;

// Two requests with one prompt of 20 full blocks and a few tokens more, the second long after
// the first finished: round-robin sends them to instances 0 and 1.
Workload SamePromptTwice() {
  Workload w{.name = "same-prompt"};
  for (int r = 0; r < 2; ++r) {
    w.requests.push_back({.arrival_ms = r * 60'000.0,
                          .input_length = 20 * 16 + 5,
                          .output_length = 4,
                          .segments = {{.content_id = 42, .length = 20 * 16 + 5}}});
  }
  return w;
}

TEST(MultiInstanceTiersTest, PrefixComputedOnTheOtherInstanceHitsTheSharedRemoteTier) {
  ServeReplayOptions o = SmallPoolServeOptions();
  o.tiers = {.host_capacity_blocks = 100, .remote_capacity_blocks = 1000};
  auto shared = RunMultiInstanceReplay(SamePromptTwice(), o, {.num_instances = 2});
  ASSERT_TRUE(shared.ok()) << shared.status();
  ASSERT_EQ(shared->per_instance.size(), 2u);
  const InstanceSummary& first = shared->per_instance[0];
  const InstanceSummary& second = shared->per_instance[1];
  EXPECT_EQ(first.requests, 1);
  EXPECT_EQ(second.requests, 1);
  EXPECT_EQ(first.prefix_hit_tokens, 0);
  // Every full block of the second request comes from the shared tier (its host tier is empty).
  EXPECT_EQ(second.tiers.remote_hit_tokens, 20 * 16);
  EXPECT_EQ(second.tiers.host_hit_tokens, 0);
  EXPECT_EQ(second.prefix_hit_tokens, 20 * 16);
  EXPECT_EQ(second.tiers.remote_loaded_blocks, 20);
  EXPECT_GT(second.tiers.load_seconds, 0);
  EXPECT_EQ(shared->aggregate.remote_hit_tokens, 20 * 16);
  EXPECT_EQ(shared->shared_remote.resident_blocks, 20);
  const nlohmann::json j = MultiInstanceJson(*shared);
  EXPECT_EQ(j["per_instance"][1]["tiers"]["remote_hit_tokens"], 20 * 16);
  EXPECT_EQ(j["tiers"]["remote_shared"], true);
  EXPECT_EQ(j["tiers"]["remote_hit_tokens"], 20 * 16);

  o.tiers.remote_capacity_blocks = 0;  // host tiers only: each instance keeps its own blocks
  auto host_only = RunMultiInstanceReplay(SamePromptTwice(), o, {.num_instances = 2});
  ASSERT_TRUE(host_only.ok()) << host_only.status();
  EXPECT_EQ(host_only->per_instance[1].prefix_hit_tokens, 0);
  EXPECT_EQ(host_only->aggregate.remote_hit_tokens, 0);
  EXPECT_EQ(host_only->aggregate.host_hit_tokens, 0);
}

// One instance with tiers behaves exactly as single-instance serve mode with the same tiers
// (both walk the engine's TierChain; multi-instance mode through InstanceTiers).
TEST(MultiInstanceTiersTest, OneInstanceWithTiersMatchesSingleInstanceServeMode) {
  const Workload w = MakeBuiltinWorkload("conversation", {.num_requests = 120, .seed = 5}).value();
  ServeReplayOptions o = SmallPoolServeOptions();
  o.capacity_blocks = 600;
  for (TierStoreRule rule : {TierStoreRule::kWriteThrough, TierStoreRule::kWriteBack}) {
    SCOPED_TRACE(TierStoreRuleName(rule));
    o.tiers = {.host_capacity_blocks = 1500,
               .remote_capacity_blocks = 8000,
               .host_store = rule,
               .host_store_threshold = 1};
    const ServeReplayResult single = RunServeReplay(w, o).value();
    auto multi = RunMultiInstanceReplay(w, o, {.num_instances = 1});
    ASSERT_TRUE(multi.ok()) << multi.status();
    const ServeReplayResult& a = multi->aggregate;
    EXPECT_GT(single.host_hit_tokens + single.remote_hit_tokens, 0);
    EXPECT_EQ(a.prefix_hit_tokens, single.prefix_hit_tokens);
    EXPECT_EQ(a.host_hit_tokens, single.host_hit_tokens);
    EXPECT_EQ(a.remote_hit_tokens, single.remote_hit_tokens);
    EXPECT_EQ(a.host_loaded_blocks, single.host_loaded_blocks);
    EXPECT_EQ(a.remote_loaded_blocks, single.remote_loaded_blocks);
    EXPECT_DOUBLE_EQ(a.tier_load_seconds, single.tier_load_seconds);
    EXPECT_DOUBLE_EQ(a.simulated_seconds, single.simulated_seconds);
  }
}

// Four instances, round-robin: the shared remote tier turns other instances' work into hits,
// so the aggregate hit rate rises over host tiers alone; per-instance counts add up.
TEST(MultiInstanceTiersTest, SharedRemoteTierRaisesTheAggregateHitRate) {
  const Workload w = MakeBuiltinWorkload("conversation", {.num_requests = 300, .seed = 7}).value();
  ServeReplayOptions o = SmallPoolServeOptions();
  o.capacity_blocks = 400;
  o.tiers = {.host_capacity_blocks = 400};
  const MultiInstanceResult host_only = RunMultiInstanceReplay(w, o, {.num_instances = 4}).value();
  o.tiers.remote_capacity_blocks = 20000;
  const MultiInstanceResult shared = RunMultiInstanceReplay(w, o, {.num_instances = 4}).value();
  EXPECT_GT(shared.aggregate.prefix_hit_rate(), host_only.aggregate.prefix_hit_rate());
  EXPECT_GT(shared.aggregate.remote_hit_tokens, 0);
  int64_t host = 0, remote = 0;
  for (const InstanceSummary& s : shared.per_instance) {
    host += s.tiers.host_hit_tokens;
    remote += s.tiers.remote_hit_tokens;
  }
  EXPECT_EQ(host, shared.aggregate.host_hit_tokens);
  EXPECT_EQ(remote, shared.aggregate.remote_hit_tokens);
  EXPECT_EQ(shared.aggregate.finished + shared.aggregate.rejected, shared.aggregate.requests);
}

}  // namespace
}  // namespace pagedkv::replay
