// Copyright 2026 The pagedkv Authors.
//
// Shifted hits in serve-mode replay: RunServeReplay's counts on rag workloads (with reuse on and
// off, and with no chunk marked). The provider itself (ShiftedChunkReuse, with no mover here) is
// tested in tests/engine/runtime/shift/shifted_chunk_reuse_test.cc.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tools/replay/serve_mode/cost_model.h"
#include "engine/tools/replay/serve_mode/serve_replay.h"
#include "engine/tools/replay/workload/generators.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagedkv::replay {
namespace {

using ::testing::HasSubstr;

ServeReplayOptions RagServeOptions() {
  ServeReplayOptions o;
  o.gpu = *FindGpuPreset("H100");
  o.model = *FindModelPreset("llama-3-8b");
  o.capacity_blocks = 4000;
  o.scheduler.max_num_batched_tokens = 4096;
  o.scheduler.max_num_seqs = 64;
  o.vocab_size = 32000;
  return o;
}

Workload SmallRag(uint64_t seed) {
  return GenerateRagWorkload({.num_requests = 150,
                              .num_documents = 20,
                              .document_tokens = {64, 400},
                              .documents_per_request = {1, 4},
                              .instruction_tokens = 40,
                              .question_tokens = {8, 64},
                              .output_tokens = {4, 32},
                              .requests_per_s = 40,
                              .seed = seed});
}

TEST(ServeShiftedTest, CountsShiftedHitsOnlyWithReuseOn) {
  for (uint64_t seed : {3, 4}) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    const Workload w = SmallRag(seed);
    ServeReplayOptions o = RagServeOptions();
    auto on = RunServeReplay(w, o);
    ASSERT_TRUE(on.ok()) << on.status();
    o.count_shifted = false;
    auto off = RunServeReplay(w, o);
    ASSERT_TRUE(off.ok()) << off.status();

    EXPECT_TRUE(on->shifted_counted);
    EXPECT_GT(on->shifted_hit_tokens, 0);
    EXPECT_GT(on->shifted_hit_tokens_moved, 0);
    EXPECT_GT(on->chunk_hits_moved, 0);
    EXPECT_GT(on->chunks_registered, 0);
    EXPECT_EQ(on->finished, on->requests);
    EXPECT_LE(on->chunk_hits + on->chunks_in_prefix, on->chunks);
    EXPECT_LE(on->prefix_hit_tokens + on->shifted_hit_tokens, on->admitted_tokens);
    EXPECT_DOUBLE_EQ(on->prefix_plus_shifted_token_hit_rate(),
                     on->prefix_hit_rate() + on->shifted_hit_rate());
    // The re-rotation pass covers the reused tokens plus each registered copy.
    EXPECT_GE(on->rerotated_tokens, on->shifted_hit_tokens);
    EXPECT_GT(on->rerotation_seconds, 0);

    EXPECT_FALSE(off->shifted_counted);
    EXPECT_EQ(off->shifted_hit_tokens, 0);
    EXPECT_EQ(off->chunks_registered, 0);
    EXPECT_EQ(off->rerotated_tokens, 0);
    EXPECT_EQ(off->finished, off->requests);

    // With no preemption, every admitted token is computed once or reused (prefix or shifted),
    // and each output token but the last of each request is computed as a decode token.
    for (const ServeReplayResult* r : {&*on, &*off}) {
      ASSERT_EQ(r->preemptions, 0);
      EXPECT_EQ(r->computed_tokens, r->admitted_tokens - r->prefix_hit_tokens -
                                        r->shifted_hit_tokens + r->output_tokens - r->finished);
    }
  }
}

TEST(ServeShiftedTest, PrefixHitsUnchangedWhenNoChunkIsMarked) {
  Workload unmarked = SmallRag(5);
  for (ReplayRequest& r : unmarked.requests) r.chunks.clear();
  Workload marked = SmallRag(5);
  ServeReplayOptions o = RagServeOptions();
  auto plain = RunServeReplay(unmarked, o);
  o.count_shifted = false;
  auto off = RunServeReplay(marked, o);
  ASSERT_TRUE(plain.ok() && off.ok());
  EXPECT_FALSE(plain->shifted_counted);
  for (const ServeReplayResult* r : {&*plain, &*off}) {
    EXPECT_EQ(r->prefix_hit_tokens, plain->prefix_hit_tokens);
    EXPECT_EQ(r->admitted_tokens, plain->admitted_tokens);
    EXPECT_EQ(r->computed_tokens, plain->computed_tokens);
    EXPECT_EQ(r->steps, plain->steps);
    EXPECT_EQ(r->evictions, plain->evictions);
    EXPECT_DOUBLE_EQ(r->simulated_seconds, plain->simulated_seconds);
  }
}

TEST(ServeShiftedTest, SmallPoolsStayConsistentAndDeterministic) {
  const Workload w = SmallRag(6);
  ServeReplayOptions o = RagServeOptions();
  for (int64_t cap : {int64_t{150}, int64_t{400}}) {
    SCOPED_TRACE(testing::Message() << "capacity " << cap);
    o.capacity_blocks = cap;        // chunk copies compete with running requests and evict
    auto a = RunServeReplay(w, o);  // checks the pool's invariants and held blocks at the end
    ASSERT_TRUE(a.ok()) << a.status();
    auto b = RunServeReplay(w, o);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(a->finished + a->rejected, a->requests);
    EXPECT_GT(a->evictions, 0);
    EXPECT_EQ(a->shifted_hit_tokens, b->shifted_hit_tokens);
    EXPECT_EQ(a->chunks_registered, b->chunks_registered);
    EXPECT_EQ(a->chunk_register_failures, b->chunk_register_failures);
    EXPECT_DOUBLE_EQ(a->simulated_seconds, b->simulated_seconds);
  }
}

TEST(ServeShiftedTest, CostModelChargesRerotationNotPrefill) {
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
  // K and V of a token: 2 * 2 layers * 1 head * 4 * 2 bytes = 32 bytes; 10 tokens read and
  // written = 640 bytes; 3 * 2 * 1 * 4 * 10 = 240 FLOPs: memory-bound at 1 GB/s.
  EXPECT_DOUBLE_EQ(cost.RerotationSeconds(10), 2.0 * 32 * 10 / 1e9);
  EXPECT_EQ(cost.RerotationSeconds(0), 0);
  StepWork work;
  work.AddSequence(/*num_computed_tokens=*/10, /*num_new_tokens=*/1);
  const double plain = cost.StepSeconds(work);
  work.num_rerotated_tokens = 10;
  EXPECT_DOUBLE_EQ(cost.StepSeconds(work), plain + cost.RerotationSeconds(10));
  StepWork moves_only;
  moves_only.num_rerotated_tokens = 10;
  EXPECT_DOUBLE_EQ(cost.StepSeconds(moves_only), cost.RerotationSeconds(10));
}

TEST(ServeShiftedTest, ReportAndJsonNameTheShiftedFieldsLikeCacheMode) {
  const Workload w = SmallRag(7);
  ServeReplayOptions o = RagServeOptions();
  auto on = RunServeReplay(w, o);
  ASSERT_TRUE(on.ok()) << on.status();
  o.count_shifted = false;
  auto off = RunServeReplay(w, o);
  ASSERT_TRUE(off.ok()) << off.status();
  const nlohmann::json j = ServeResultJson(*on);
  for (const char* key :
       {"shifted_counted", "shifted_hit_tokens", "shifted_hit_tokens_moved",
        "shifted_hit_tokens_same_position", "shifted_hit_blocks", "shifted_hit_rate",
        "prefix_plus_shifted_token_hit_rate", "chunks", "rerotated_tokens", "rerotation_seconds"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["shifted_hit_tokens"].get<int64_t>(), on->shifted_hit_tokens);
  EXPECT_EQ(j["chunks"]["hits_moved"].get<int64_t>(), on->chunk_hits_moved);
  const nlohmann::json jo = ServeResultJson(*off);
  EXPECT_FALSE(jo["shifted_counted"].get<bool>());
  EXPECT_FALSE(jo.contains("shifted_hit_rate"));
  EXPECT_THAT(FormatServeTable(*on), HasSubstr("shifted hit rate"));
  EXPECT_EQ(FormatServeTable(*off).find("shifted"), std::string::npos);
  EXPECT_THAT(FormatShiftedEffect(*on, *off), HasSubstr("without shifted reuse"));
  EXPECT_EQ(WithoutShiftedJson(*off)["ttft_mean_s"].get<double>(), off->ttft_mean_s);

  o.count_shifted = true;
  o.chunk_first_k = -1;
  auto bad = RunServeReplay(w, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("chunk_first_k"));
}

}  // namespace
}  // namespace pagedkv::replay
