// Copyright 2026 The pagedkv Authors.
//
// Scheduler over a KvCacheManager of several KV cache groups (issues #31, #40): a windowed model
// keeps more long requests running than an all-full one in the same pool, preemption and resume
// work, prefix hits follow the hybrid rule, a one-group (full attention) hybrid scheduler behaves
// exactly as the plain one on a random workload, and what the hybrid manager lacks is refused with
// a status.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/runtime/scheduler.h"
#include "tests/engine/runtime/scheduler/scheduler_test_util.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::Describe;
using ::pagedkv::testing::ExpectBatchConsistent;
using ::pagedkv::testing::Iota;

constexpr KvCacheGroupSpec kFull{.kind = KvCacheGroupKind::kFullAttention, .num_layers = 1};

KvCacheGroupSpec Window(int32_t w) {
  return {.kind = KvCacheGroupKind::kSlidingWindow, .sliding_window = w, .num_layers = 1};
}

std::unique_ptr<KvCacheManager> MakeHybrid(int32_t num_blocks, int32_t block_size,
                                           std::vector<KvCacheGroupSpec> groups,
                                           bool enable_priorities = false) {
  auto m = KvCacheManager::Create({.num_blocks = num_blocks,
                                   .block_size = block_size,
                                   .model_fingerprint = "scheduler-test",
                                   .enable_priorities = enable_priorities,
                                   .groups = std::move(groups)});
  EXPECT_TRUE(m.ok()) << m.status();
  return std::move(m).value();
}

std::unique_ptr<Scheduler> MakeScheduler(const SchedulerOptions& options, KvCacheManager& cache) {
  auto s = Scheduler::Create(options, cache);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(s).value();
}

// Token sampled for request `id` as its `n`-th output: deterministic, never an EOS.
TokenId SampleFor(RequestId id, int32_t n) { return static_cast<TokenId>((id * 31 + n) % 97 + 1); }

struct RunResult {
  int32_t max_running = 0;
  int64_t steps = 0;
  int64_t preemptions = 0;
  int64_t finished = 0;
};

// Groups 1.. of the batch (issue 31): each sequence's table is the manager's, and every scheduled
// token's slot comes from a non-null entry of it.
void ExpectGroupTablesConsistent(const ScheduledBatch& batch, const KvCacheManager& m) {
  ASSERT_EQ(batch.num_kv_cache_groups(), m.num_groups());
  const int32_t bs = batch.block_size;
  for (int32_t g = 1; g < m.num_groups(); ++g) {
    const std::vector<int64_t>& slots = batch.group_slot_mapping[static_cast<size_t>(g - 1)];
    ASSERT_EQ(slots.size(), batch.token_ids.size());
    for (int32_t i = 0; i < batch.num_sequences(); ++i) {
      const ScheduledSequence& seq = batch.sequences[static_cast<size_t>(i)];
      const std::span<const BlockId> table = batch.GroupBlockTable(g, i);
      absl::StatusOr<std::span<const BlockId>> held = m.GetBlockTable(seq.request_id, g);
      ASSERT_TRUE(held.ok()) << held.status();
      EXPECT_TRUE(std::equal(table.begin(), table.end(), held->begin(), held->end()));
      for (int32_t t = seq.query_start; t < seq.query_start + seq.num_scheduled_tokens; ++t) {
        const int32_t pos = batch.positions[static_cast<size_t>(t)];
        const BlockId block = table[static_cast<size_t>(pos / bs)];
        ASSERT_NE(block, kNullBlock) << "group " << g << " token " << t;
        EXPECT_EQ(slots[static_cast<size_t>(t)], int64_t{block} * bs + pos % bs);
      }
    }
  }
}

// Runs every request to completion, checking each batch and the manager after each step.
RunResult RunToCompletion(Scheduler& s, KvCacheManager& m) {
  RunResult out;
  ScheduledBatch batch;
  std::vector<SampledToken> sampled;
  while (s.HasUnfinishedRequests() && out.steps < 10000) {
    EXPECT_TRUE(s.Schedule(&batch).ok());
    ExpectBatchConsistent(batch);
    ExpectGroupTablesConsistent(batch, m);
    EXPECT_TRUE(m.ValidateInvariants().ok()) << m.ValidateInvariants();
    out.max_running = std::max(out.max_running, s.num_running());
    sampled.clear();
    for (const ScheduledSequence& seq : batch.sequences) {
      if (!seq.samples) continue;
      sampled.push_back({.request_id = seq.request_id,
                         .token = SampleFor(seq.request_id,
                                            s.GetRequestInfo(seq.request_id)->num_output_tokens)});
    }
    auto outputs = s.UpdateFromOutput(sampled);
    EXPECT_TRUE(outputs.ok()) << outputs.status();
    for (const RequestOutput& o : *outputs) out.finished += o.finished() ? 1 : 0;
    ++out.steps;
  }
  out.preemptions = s.stats().num_preemptions;
  EXPECT_FALSE(s.HasUnfinishedRequests());
  EXPECT_EQ(m.NumRequests(), 0);
  EXPECT_EQ(m.pool().NumUsedBlocks(), 0);
  return out;
}

// Six requests of 200 prompt tokens and 60 outputs each, distinct prompts.
void AddLongRequests(Scheduler& s) {
  for (RequestId id = 1; id <= 6; ++id) {
    ASSERT_TRUE(
        s.AddRequest({.id = id, .prompt = Iota(200, 1000 * id), .max_new_tokens = 60}).ok());
  }
}

TEST(SchedulerHybridTest, WindowedModelKeepsMoreLongRequestsRunning) {
  constexpr int32_t kBlocks = 100;
  const SchedulerOptions options{.max_num_batched_tokens = 512};
  auto all_full = MakeHybrid(kBlocks, 16, {kFull, kFull});
  auto windowed = MakeHybrid(kBlocks, 16, {kFull, Window(32)});
  auto s_full = MakeScheduler(options, *all_full);
  auto s_window = MakeScheduler(options, *windowed);
  AddLongRequests(*s_full);
  AddLongRequests(*s_window);
  const RunResult full = RunToCompletion(*s_full, *all_full);
  const RunResult window = RunToCompletion(*s_window, *windowed);
  EXPECT_EQ(full.finished, 6);
  EXPECT_EQ(window.finished, 6);
  // All-full: 2 x 17 blocks per request at its end, so at most 2 fit in 100 blocks together
  // with a third's prefill; windowed: 17 + about 4 per decoding request.
  EXPECT_GT(window.max_running, full.max_running);
  EXPECT_LT(window.steps, full.steps);
}

TEST(SchedulerHybridTest, PreemptionAndResume) {
  // Small prefill chunks admit every request at once; their full-attention blocks then outgrow
  // the pool.
  auto m = MakeHybrid(48, 16, {kFull, Window(32)});
  auto s = MakeScheduler({.max_num_batched_tokens = 256, .long_prefill_token_threshold = 32}, *m);
  AddLongRequests(*s);
  const RunResult r = RunToCompletion(*s, *m);
  EXPECT_EQ(r.finished, 6);
  EXPECT_GT(r.preemptions, 0);
}

TEST(SchedulerHybridTest, PrefixHitUnderHybridRuleIsCounted) {
  auto m = MakeHybrid(64, 16, {kFull, Window(32)});
  auto s = MakeScheduler({.max_num_batched_tokens = 512}, *m);
  const std::vector<TokenId> prompt = Iota(96, 7);
  ASSERT_TRUE(s->AddRequest({.id = 1, .prompt = prompt, .max_new_tokens = 4}).ok());
  RunToCompletion(*s, *m);
  // Same 96 tokens and 20 more: the full group holds blocks 0..5 and the window group the two
  // blocks before token 96 (released blocks stay cached), so the hit is 96 tokens.
  std::vector<TokenId> longer = prompt;
  const std::vector<TokenId> tail = Iota(20, 500);
  longer.insert(longer.end(), tail.begin(), tail.end());
  ASSERT_TRUE(s->AddRequest({.id = 2, .prompt = longer, .max_new_tokens = 2}).ok());
  ScheduledBatch batch;
  ASSERT_TRUE(s->Schedule(&batch).ok());
  EXPECT_EQ(Describe(batch), "id=2 c=96 s=20 sample new hit=96");
  EXPECT_EQ(s->GetRequestInfo(2)->num_prefix_hit_tokens, 96);
  EXPECT_EQ(s->stats().num_prefix_hit_tokens, 96);
  EXPECT_EQ(m->stats().hit_tokens, 96);
}

TEST(SchedulerHybridTest, CacheAwareProbeFollowsHybridRule) {
  auto m = MakeHybrid(64, 16, {kFull, Window(32)});
  auto s =
      MakeScheduler({.max_num_batched_tokens = 64, .max_num_seqs = 1, .cache_aware = true}, *m);
  const std::vector<TokenId> prompt = Iota(64, 7);
  ASSERT_TRUE(s->AddRequest({.id = 1, .prompt = prompt, .max_new_tokens = 1}).ok());
  RunToCompletion(*s, *m);
  // Request 2 has no hit, request 3 shares request 1's prompt: 3 is admitted first.
  ASSERT_TRUE(s->AddRequest({.id = 2, .prompt = Iota(40, 900), .max_new_tokens = 1}).ok());
  std::vector<TokenId> p3 = prompt;
  p3.push_back(3);
  ASSERT_TRUE(s->AddRequest({.id = 3, .prompt = p3, .max_new_tokens = 1}).ok());
  ScheduledBatch batch;
  ASSERT_TRUE(s->Schedule(&batch).ok());
  EXPECT_EQ(Describe(batch), "id=3 c=64 s=1 sample new hit=64");
}

// Random workload (fixed seed) with shared prefixes, driven identically through a plain
// KvCacheManager and a one-group (full attention) hybrid manager: every batch is the same.
TEST(SchedulerHybridTest, OneFullGroupEqualsPlainScheduler) {
  for (const bool cache_aware : {false, true}) {
    SCOPED_TRACE(cache_aware ? "cache_aware" : "fcfs");
    std::mt19937_64 rng(20260531);
    auto plain = ::pagedkv::testing::MakeManager(24, 8);
    auto hybrid = MakeHybrid(24, 8, {kFull});
    const SchedulerOptions options{.max_num_batched_tokens = 48,
                                   .max_num_seqs = 6,
                                   .long_prefill_token_threshold = 24,
                                   .cache_aware = cache_aware};
    auto sp = Scheduler::Create(options, *plain).value();
    auto sh = MakeScheduler(options, *hybrid);
    std::vector<std::vector<TokenId>> heads;
    for (int i = 0; i < 3; ++i) heads.push_back(Iota(8 + 8 * i, 100 * (i + 1)));
    RequestId next_id = 1;
    ScheduledBatch bp, bh;
    std::vector<SampledToken> sampled;
    for (int step = 0; step < 400; ++step) {
      if (rng() % 3 == 0 && next_id <= 60) {
        std::vector<TokenId> prompt = heads[rng() % heads.size()];
        const int extra = 1 + static_cast<int>(rng() % 40);
        for (int k = 0; k < extra; ++k) prompt.push_back(static_cast<TokenId>(rng() % 50));
        const SchedulerRequest req{.id = next_id++,
                                   .prompt = prompt,
                                   .max_new_tokens = 1 + static_cast<int32_t>(rng() % 30),
                                   .eos_token = 3};
        ASSERT_EQ(sp->AddRequest(req).ok(), sh->AddRequest(req).ok());
      }
      ASSERT_TRUE(sp->Schedule(&bp).ok());
      ASSERT_TRUE(sh->Schedule(&bh).ok());
      ASSERT_EQ(Describe(bp), Describe(bh)) << "step " << step;
      ASSERT_EQ(bp.token_ids, bh.token_ids);
      ASSERT_EQ(bp.positions, bh.positions);
      ASSERT_EQ(bp.slot_mapping, bh.slot_mapping);
      ASSERT_EQ(bp.block_table_ids, bh.block_table_ids);
      ASSERT_EQ(bp.preempted_request_ids, bh.preempted_request_ids);
      ASSERT_EQ(bp.finished_request_ids, bh.finished_request_ids);
      ASSERT_EQ(bp.stats.num_used_blocks, bh.stats.num_used_blocks);
      sampled.clear();
      for (const ScheduledSequence& seq : bp.sequences) {
        if (seq.samples) sampled.push_back({seq.request_id, static_cast<TokenId>(rng() % 50)});
      }
      ASSERT_TRUE(sp->UpdateFromOutput(sampled).ok());
      ASSERT_TRUE(sh->UpdateFromOutput(sampled).ok());
      ASSERT_TRUE(hybrid->ValidateInvariants().ok());
    }
    EXPECT_EQ(sp->stats().num_prefix_hit_tokens, sh->stats().num_prefix_hit_tokens);
    EXPECT_GT(sh->stats().num_prefix_hit_tokens, 0);
    EXPECT_GT(sh->stats().num_preemptions, 0);
    EXPECT_EQ(sp->stats().num_preemptions, sh->stats().num_preemptions);
  }
}

class NoChunks final : public ChunkReuseProvider {
 public:
  int32_t num_leading_tokens_to_compute() const override { return 0; }
  std::optional<AcquiredChunk> Acquire(std::span<const TokenId>, std::string_view,
                                       uint64_t) override {
    return std::nullopt;
  }
  void Release(int64_t) override {}
};

// A provider whose one chunk lives at fixed slots: group 0's `slots` from 1000 on, group 1's
// (a window of 4) only for the chunk's last 4 tokens, from 2000 on; `with_groups` false lists
// group 0's only (a provider unaware of groups: the scheduler does not use its chunk).
class FixedChunk final : public ChunkReuseProvider {
 public:
  explicit FixedChunk(bool with_groups) : with_groups_(with_groups) {}
  int32_t num_leading_tokens_to_compute() const override { return 0; }
  std::optional<AcquiredChunk> Acquire(std::span<const TokenId> tokens, std::string_view,
                                       uint64_t) override {
    const auto n = static_cast<int64_t>(tokens.size());
    AcquiredChunk chunk{.handle = ++acquired, .position = 40};
    for (int64_t i = 0; i < n; ++i) chunk.slots.push_back(1000 + i);
    if (with_groups_) {
      chunk.group_slots.emplace_back();
      for (int64_t i = 0; i < n; ++i) {
        chunk.group_slots[0].push_back(i < n - 4 ? kNoChunkSlot : 2000 + i);
      }
      chunk.group_positions = {40};
    }
    return chunk;
  }
  void Release(int64_t) override { ++released; }
  int64_t acquired = 0;
  int64_t released = 0;

 private:
  bool with_groups_;
};

// Chunk reuse over a full and a window-4 group: group 0 moves every reused token, group 1 the
// chunk's last 4, each into its own table's slots; a chunk without group slots is released and
// its tokens computed.
TEST(SchedulerHybridTest, ChunkReuseMovesEveryGroupsTokens) {
  for (const bool with_groups : {true, false}) {
    SCOPED_TRACE(with_groups ? "with group slots" : "group 0 only");
    auto m = MakeHybrid(32, 4, {kFull, Window(4)});
    auto s = MakeScheduler({.max_num_batched_tokens = 256}, *m);
    SchedulerRequest request{.id = 1, .prompt = Iota(20, 1), .max_new_tokens = 2};
    request.chunks = {{.offset = 3, .length = 10}};
    ASSERT_TRUE(s->AddRequest(std::move(request)).ok());
    FixedChunk provider(with_groups);
    s->SetChunkReuseProvider(&provider);
    ScheduledBatch batch;
    ASSERT_TRUE(s->Schedule(&batch).ok());  // tokens 0..2, then the chunk
    ASSERT_TRUE(s->UpdateFromOutput({}).ok());
    ASSERT_TRUE(s->Schedule(&batch).ok());
    ASSERT_EQ(batch.group_slot_moves.size(), 1u);
    if (!with_groups) {
      EXPECT_TRUE(batch.slot_moves.empty());
      EXPECT_TRUE(batch.group_slot_moves[0].empty());
      EXPECT_EQ(provider.released, provider.acquired);
      continue;
    }
    ASSERT_EQ(batch.slot_moves.size(), 10u);
    const std::vector<KvSlotMove>& moves = batch.group_slot_moves[0];
    ASSERT_EQ(moves.size(), 4u);
    const std::span<const BlockId> table = m->GetBlockTable(1, 1).value();
    for (int i = 0; i < 4; ++i) {
      const KvSlotMove& move = moves[static_cast<size_t>(i)];
      const int32_t pos = 3 + 6 + i;
      EXPECT_EQ(move.src_slot, 2000 + 6 + i);
      EXPECT_EQ(move.old_position, 40 + 6 + i);
      EXPECT_EQ(move.new_position, pos);
      EXPECT_EQ(move.dst_slot, int64_t{table[static_cast<size_t>(pos / 4)]} * 4 + pos % 4);
    }
    EXPECT_TRUE(m->ValidateInvariants().ok()) << m->ValidateInvariants();
  }
}

TEST(SchedulerHybridTest, PrioritiesDraftsAndAChunkProviderWork) {
  auto m = MakeHybrid(16, 16, {kFull, Window(32)}, /*enable_priorities=*/true);
  auto s = MakeScheduler({.max_num_batched_tokens = 256}, *m);
  // A request that could never fit the pool in both groups (17 + 4 blocks > 16).
  absl::Status st = s->AddRequest({.id = 2, .prompt = Iota(200, 1), .max_new_tokens = 60});
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  // Cache priorities are taken.
  SchedulerRequest request{.id = 3, .prompt = Iota(20, 1), .max_new_tokens = 8};
  request.cache_priority = {.priority = 80};
  ASSERT_TRUE(s->AddRequest(std::move(request)).ok());
  ScheduledBatch batch;
  ASSERT_TRUE(s->Schedule(&batch).ok());
  ASSERT_TRUE(s->UpdateFromOutput(std::vector<SampledToken>{{3, 5}}).ok());
  // Draft tokens get lookahead slots in every group.
  const std::vector<TokenId> drafts = {6, 7};
  ASSERT_TRUE(s->SetDraftTokens(3, drafts).ok());
  // A chunk reuse provider (with no chunk to give) schedules as without one.
  NoChunks provider;
  s->SetChunkReuseProvider(&provider);
  ASSERT_TRUE(s->Schedule(&batch).ok());
  ASSERT_EQ(batch.num_sequences(), 1);
  EXPECT_EQ(batch.slot_mapping.size(), 3u);  // the sampled token and two drafts
  ASSERT_EQ(batch.group_slot_mapping.size(), 1u);
  EXPECT_EQ(batch.group_slot_mapping[0].size(), 3u);
  for (const int64_t slot : batch.group_slot_mapping[0]) EXPECT_GE(slot, 0);
  EXPECT_EQ(m->NumLookaheadTokens(3).value(), 2);
  EXPECT_TRUE(m->ValidateInvariants().ok()) << m->ValidateInvariants();
}

}  // namespace
}  // namespace pagedkv
