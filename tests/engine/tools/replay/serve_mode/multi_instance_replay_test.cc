// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/serve_mode/multi_instance_replay.h"

#include <string>
#include <vector>

#include "engine/tools/replay/workload/generators.h"
#include "gtest/gtest.h"
#include "tests/engine/tools/replay/serve_mode/serve_test_options.h"

namespace pagedkv::replay {
namespace {

using ::pagedkv::testing::SmallPoolServeOptions;

Workload Conversations(int requests) {
  return MakeBuiltinWorkload("conversation", {.num_requests = requests, .seed = 5}).value();
}

TEST(MultiInstanceReplayTest, OneInstanceMatchesSingleInstanceServeMode) {
  const Workload w = Conversations(150);
  const ServeReplayOptions o = SmallPoolServeOptions();
  const ServeReplayResult single = RunServeReplay(w, o).value();
  for (const std::string& router : RouterNames()) {
    auto multi = RunMultiInstanceReplay(w, o, {.num_instances = 1, .router = router});
    ASSERT_TRUE(multi.ok()) << multi.status();
    const ServeReplayResult& a = multi->aggregate;
    EXPECT_EQ(a.finished, single.finished) << router;
    EXPECT_EQ(a.admitted_tokens, single.admitted_tokens) << router;
    EXPECT_EQ(a.prefix_hit_tokens, single.prefix_hit_tokens) << router;
    EXPECT_EQ(a.steps, single.steps) << router;
    EXPECT_DOUBLE_EQ(a.ttft_p99_s, single.ttft_p99_s) << router;
    EXPECT_DOUBLE_EQ(a.simulated_seconds, single.simulated_seconds) << router;
  }
}

TEST(MultiInstanceReplayTest, PrefixAwareRoutingKeepsConversationsTogether) {
  const Workload w = Conversations(400);
  const ServeReplayOptions o = SmallPoolServeOptions();
  auto run = [&](const std::string& router) {
    auto r = RunMultiInstanceReplay(w, o, {.num_instances = 4, .router = router});
    EXPECT_TRUE(r.ok()) << r.status();
    return *std::move(r);
  };
  const MultiInstanceResult rr = run("round-robin");
  const MultiInstanceResult ll = run("least-loaded");
  const MultiInstanceResult pa = run("prefix-aware");
  const MultiInstanceResult oracle = run("oracle");
  for (const MultiInstanceResult* r : {&rr, &ll, &pa, &oracle}) {
    EXPECT_EQ(r->aggregate.finished + r->aggregate.rejected, r->aggregate.requests);
    ASSERT_EQ(r->per_instance.size(), 4u);
    int64_t routed = 0, hits = 0;
    for (const InstanceSummary& s : r->per_instance) {
      routed += s.requests;
      hits += s.prefix_hit_tokens;
    }
    EXPECT_EQ(routed, r->aggregate.requests);
    EXPECT_EQ(hits, r->aggregate.prefix_hit_tokens);
  }
  // Round-robin scatters the turns of a conversation over the instances; the prefix-aware
  // router, fed only by the encoded events, keeps them where their history is cached.
  EXPECT_GT(pa.aggregate.prefix_hit_rate(), 1.2 * rr.aggregate.prefix_hit_rate());
  EXPECT_GE(pa.aggregate.prefix_hit_rate(), 0.95 * oracle.aggregate.prefix_hit_rate());
  EXPECT_GT(pa.event_batches, 0);
  EXPECT_GT(pa.event_bytes, 0);
  EXPECT_EQ(rr.event_batches, 0);
  // Round-robin spreads requests evenly.
  for (const InstanceSummary& s : rr.per_instance) {
    EXPECT_NEAR(static_cast<double>(s.requests), rr.aggregate.requests / 4.0, 1.0);
  }
}

TEST(MultiInstanceReplayTest, PrefixAwareIsTheSameForEveryEventEncoding) {
  const Workload w = Conversations(200);
  const ServeReplayOptions o = SmallPoolServeOptions();
  MultiInstanceOptions m{.num_instances = 3, .router = "prefix-aware"};
  const MultiInstanceResult map_u64 = RunMultiInstanceReplay(w, o, m).value();
  m.codec = {.encoding = KvEventEncoding::kAllArray, .hash_format = KvBlockHashFormat::kBytes};
  const MultiInstanceResult array_bytes = RunMultiInstanceReplay(w, o, m).value();
  EXPECT_EQ(map_u64.aggregate.prefix_hit_tokens, array_bytes.aggregate.prefix_hit_tokens);
  EXPECT_EQ(map_u64.event_batches, array_bytes.event_batches);
  EXPECT_NE(map_u64.event_bytes, array_bytes.event_bytes);
}

TEST(MultiInstanceReplayTest, EventsOverZeroMqRouteLikeInProcess) {
  const Workload w = Conversations(120);
  const ServeReplayOptions o = SmallPoolServeOptions();
  MultiInstanceOptions m{.num_instances = 3, .router = "prefix-aware"};
  const MultiInstanceResult inproc = RunMultiInstanceReplay(w, o, m).value();
  m.transport = "zmq";
  auto zmq = RunMultiInstanceReplay(w, o, m);
  ASSERT_TRUE(zmq.ok()) << zmq.status();
  EXPECT_EQ(zmq->aggregate.prefix_hit_tokens, inproc.aggregate.prefix_hit_tokens);
  EXPECT_EQ(zmq->event_batches, inproc.event_batches);
  EXPECT_EQ(zmq->event_bytes, inproc.event_bytes);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(zmq->per_instance[i].requests, inproc.per_instance[i].requests);
  }
  m.transport = "carrier-pigeon";
  EXPECT_EQ(RunMultiInstanceReplay(w, o, m).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MultiInstanceReplayTest, BadOptionsAreClearErrors) {
  const Workload w = Conversations(20);
  const ServeReplayOptions o = SmallPoolServeOptions();
  EXPECT_EQ(RunMultiInstanceReplay(w, o, {.router = "random"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunMultiInstanceReplay(w, o, {.num_instances = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  ServeReplayOptions belady = o;
  belady.policy = "belady";
  EXPECT_EQ(RunMultiInstanceReplay(w, belady, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MultiInstanceReplayTest, JsonHasTheAggregateAndPerInstanceFields) {
  const Workload w = Conversations(60);
  const MultiInstanceResult r =
      RunMultiInstanceReplay(w, SmallPoolServeOptions(),
                             {.num_instances = 2, .router = "least-loaded"})
          .value();
  const nlohmann::json j = MultiInstanceJson(r);
  for (const char* key : {"prefix_hit_rate", "ttft_p50_s", "ttft_p99_s", "ttft_mean_s",
                          "output_tokens_per_second", "router", "num_instances", "per_instance"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["router"], "least-loaded");
  ASSERT_EQ(j["per_instance"].size(), 2u);
  EXPECT_TRUE(j["per_instance"][0].contains("prefix_hit_rate"));
  EXPECT_NE(FormatMultiInstanceTable(r).find("instance"), std::string::npos);
}

}  // namespace
}  // namespace pagedkv::replay
