// Copyright 2026 The pagedkv Authors.
//
// Shifted hits in serve-mode replay: the SimulatedChunkReuse provider on its own, the provider
// driven by the real Scheduler with pool invariants checked after every step, and
// RunServeReplay's counts on rag workloads (with reuse on and off, and with no chunk marked).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/tools/replay/serve_mode/cost_model.h"
#include "engine/tools/replay/serve_mode/serve_replay.h"
#include "engine/tools/replay/serve_mode/simulated_chunk_reuse.h"
#include "engine/tools/replay/workload/generators.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/chunk_index.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/runtime/scheduler.h"

namespace pagedkv::replay {
namespace {

using ::testing::HasSubstr;

std::vector<TokenId> Tokens(TokenId first, int n) {
  std::vector<TokenId> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = first + i;
  return t;
}

TEST(SimulatedChunkReuseTest, RegisterAcquireReleaseAndEviction) {
  auto pool = BlockPool::Create({.num_blocks = 6, .block_size = 4}).value();
  auto reuse = SimulatedChunkReuse::Create(ChunkIndex::Create(pool.get()).value(),
                                           {.model_fingerprint = "m"})
                   .value();
  const std::vector<TokenId> doc = Tokens(100, 10);  // 3 blocks
  auto registered = reuse->Register(doc, "", 0, /*position=*/8);
  ASSERT_TRUE(registered.ok()) << registered.status();
  EXPECT_TRUE(*registered);
  EXPECT_EQ(pool->NumEvictableBlocks(), 3);  // a copy in blocks of its own, released
  EXPECT_EQ(pool->NumUsedBlocks(), 0);
  EXPECT_FALSE(*reuse->Register(doc, "", 0, 20));  // already cached: no second copy
  EXPECT_EQ(reuse->stats().already_registered, 1);

  // Another salt, adapter or content is another chunk.
  EXPECT_FALSE(reuse->Acquire(doc, "other salt", 0).has_value());
  EXPECT_FALSE(reuse->Acquire(doc, "", 7).has_value());
  EXPECT_FALSE(reuse->Acquire(Tokens(101, 10), "", 0).has_value());

  std::optional<AcquiredChunk> hit = reuse->Acquire(doc, "", 0);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->position, 8);
  ASSERT_EQ(hit->slots.size(), doc.size());
  for (int64_t slot : hit->slots) EXPECT_EQ(pool->RefCount(static_cast<BlockId>(slot / 4)), 1);
  EXPECT_EQ(reuse->num_acquired(), 1);
  // Pinned: a pool that needs every block cannot take the chunk's.
  std::vector<BlockId> held;
  EXPECT_FALSE(pool->Allocate(4, &held).ok());
  ASSERT_TRUE(reuse->ReleaseAcquired().ok());
  EXPECT_EQ(reuse->num_acquired(), 0);
  EXPECT_EQ(pool->NumUsedBlocks(), 0);

  // Released: evictable like any cached block; an evicted chunk is never acquired.
  ASSERT_TRUE(pool->Allocate(6, &held).ok());
  EXPECT_FALSE(reuse->Acquire(doc, "", 0).has_value());
  EXPECT_EQ(reuse->index().size(), 0);
  // No room: not registered, nothing changes.
  auto full = reuse->Register(doc, "", 0, 0);
  ASSERT_TRUE(full.ok());
  EXPECT_FALSE(*full);
  EXPECT_EQ(reuse->stats().register_failures, 1);
  EXPECT_EQ(pool->NumUsedBlocks(), 6);
  ASSERT_TRUE(pool->Unpin(held).ok());
  EXPECT_TRUE(reuse->index().ValidateInvariants().ok());
}

TEST(SimulatedChunkReuseTest, ReleaseUnpinsOneChunkAndBadCallsChangeNothing) {
  auto pool = BlockPool::Create({.num_blocks = 8, .block_size = 4}).value();
  auto reuse = SimulatedChunkReuse::Create(ChunkIndex::Create(pool.get()).value(), {}).value();
  const std::vector<TokenId> doc = Tokens(5, 4);
  ASSERT_TRUE(*reuse->Register(doc, "", 0, 0));
  std::optional<AcquiredChunk> a = reuse->Acquire(doc, "", 0);
  std::optional<AcquiredChunk> b = reuse->Acquire(doc, "", 0);
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_NE(a->handle, b->handle);
  const auto block = static_cast<BlockId>(a->slots[0] / 4);
  EXPECT_EQ(pool->RefCount(block), 2);
  reuse->Release(a->handle);
  reuse->Release(a->handle);  // unknown now: ignored
  EXPECT_EQ(pool->RefCount(block), 1);
  EXPECT_EQ(reuse->stats().released_unused, 1);

  EXPECT_EQ(reuse->Register({}, "", 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reuse->Register(Tokens(50, 3), "", 0, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reuse->index().size(), 1);
  EXPECT_EQ(pool->NumUsedBlocks(), 1);
  reuse.reset();  // the destructor releases b
  EXPECT_EQ(pool->NumUsedBlocks(), 0);

  EXPECT_EQ(SimulatedChunkReuse::Create(nullptr, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SimulatedChunkReuse::Create(ChunkIndex::Create(pool.get()).value(), {.first_k = -1})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// The provider under the real scheduler: random requests that share documents at varying
// positions; after every step the pool and the chunk index are consistent, every chunk being
// moved is pinned, and at the end no block is held.
TEST(SimulatedChunkReuseTest, UnderTheSchedulerPoolStaysConsistent) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    auto manager = KvCacheManager::Create({.num_blocks = 48, .block_size = 4}).value();
    auto scheduler =
        Scheduler::Create({.max_num_batched_tokens = 40, .max_num_seqs = 4}, *manager).value();
    auto reuse = SimulatedChunkReuse::Create(manager->AttachChunkIndex().value(),
                                             {.first_k = static_cast<int32_t>(seed % 2)})
                     .value();
    scheduler->SetChunkReuseProvider(reuse.get());
    uint64_t state = seed;
    auto next = [&state](int n) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      return static_cast<int>((state >> 33) % static_cast<uint64_t>(n));
    };
    absl::flat_hash_map<RequestId, SchedulerRequest> requests;
    for (RequestId id = 0; id < 30; ++id) {
      SchedulerRequest r{.id = id, .max_new_tokens = 1 + next(4)};
      const int head = 1 + next(6);
      r.prompt = Tokens(1000 + static_cast<TokenId>(id) * 10, head);
      const int doc = next(3);
      const int doc_len = 5 + doc * 3;
      r.chunks.push_back({.offset = head, .length = doc_len});
      const std::vector<TokenId> d = Tokens(100 * (doc + 1), doc_len);
      r.prompt.insert(r.prompt.end(), d.begin(), d.end());
      r.prompt.push_back(7);
      requests[id] = r;
      ASSERT_TRUE(scheduler->AddRequest(r).ok());
    }
    int64_t shifted = 0;
    ScheduledBatch batch;
    for (int step = 0; scheduler->HasUnfinishedRequests(); ++step) {
      ASSERT_LT(step, 2000);
      ASSERT_TRUE(scheduler->Schedule(&batch).ok());
      for (const KvSlotMove& m : batch.slot_moves) {
        EXPECT_GE(manager->pool().RefCount(static_cast<BlockId>(m.src_slot / 4)), 1);
      }
      shifted += static_cast<int64_t>(batch.slot_moves.size());
      ASSERT_TRUE(reuse->ReleaseAcquired().ok());
      std::vector<SampledToken> sampled;
      for (const ScheduledSequence& s : batch.sequences) {
        const SchedulerRequest& r = requests.at(s.request_id);
        for (const PromptChunk& c : r.chunks) {
          const int32_t end = c.offset + c.length;
          if (end <= s.num_computed_tokens || end > s.seq_len()) continue;
          auto done =
              reuse->Register(std::span<const TokenId>(r.prompt).subspan(
                                  static_cast<size_t>(c.offset), static_cast<size_t>(c.length)),
                              "", 0, c.offset);
          ASSERT_TRUE(done.ok()) << done.status();
        }
        if (s.samples) sampled.push_back({.request_id = s.request_id, .token = 3});
      }
      ASSERT_TRUE(scheduler->UpdateFromOutput(sampled).ok());
      ASSERT_TRUE(manager->ValidateInvariants().ok());
      ASSERT_TRUE(reuse->index().ValidateInvariants().ok());
    }
    EXPECT_GT(shifted, 0);
    EXPECT_EQ(shifted, scheduler->stats().num_shifted_hit_tokens);
    EXPECT_EQ(manager->pool().NumUsedBlocks(), 0);
    EXPECT_EQ(reuse->num_acquired(), 0);
  }
}

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
