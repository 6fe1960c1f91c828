// Copyright 2026 The pagedkv Authors.
//
// The Scheduler's side of shifted-position chunk reuse, with a fake ChunkReuseProvider: cached
// chunks become slot moves and count as computed, pins are released when a request cannot run,
// and bad chunk spans are rejected.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/runtime/scheduler.h"
#include "tests/engine/runtime/scheduler/scheduler_test_util.h"

namespace pagedkv {
namespace {

using testing::ExpectBatchConsistent;
using testing::Iota;
using testing::MakeManager;

SchedulerRequest Req(RequestId id, std::vector<TokenId> prompt, int32_t max_new_tokens) {
  SchedulerRequest r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.max_new_tokens = max_new_tokens;
  return r;
}

// A ChunkReuseProvider over a fixed set of chunks, counting pins.
class FakeChunkProvider : public ChunkReuseProvider {
 public:
  int32_t num_leading_tokens_to_compute() const override { return first_k; }
  bool blend_reused_tokens() const override { return blend; }
  std::optional<AcquiredChunk> Acquire(std::span<const TokenId> tokens, std::string_view,
                                       uint64_t) override {
    const std::vector<TokenId> key(tokens.begin(), tokens.end());
    auto it = chunks.find(key);
    if (it == chunks.end()) return std::nullopt;
    AcquiredChunk c = it->second;
    c.handle = ++acquired;
    return c;
  }
  void Release(int64_t) override { ++released; }

  int32_t first_k = 0;
  bool blend = false;
  std::map<std::vector<TokenId>, AcquiredChunk> chunks;
  int64_t acquired = 0;
  int64_t released = 0;
};

AcquiredChunk FakeChunk(int32_t n, int32_t position) {
  AcquiredChunk c;
  for (int32_t i = 0; i < n; ++i) c.slots.push_back(1000 + i);
  c.position = position;
  return c;
}

TEST(SchedulerTest, CachedChunkIsMovedAndCountsAsComputed) {
  auto cache = MakeManager(16, 4);
  std::unique_ptr<Scheduler> scheduler_owner = Scheduler::Create({}, *cache).value();
  Scheduler& scheduler = *scheduler_owner;
  FakeChunkProvider provider;
  provider.chunks[Iota(9, 106)] = FakeChunk(9, 40);
  scheduler.SetChunkReuseProvider(&provider);
  SchedulerRequest r = Req(1, Iota(20, 100), 2);
  r.chunks = {{.offset = 6, .length = 9}};
  ASSERT_TRUE(scheduler.AddRequest(r).ok());

  // Step 1: only the tokens before the chunk.
  ScheduledBatch batch;
  ASSERT_TRUE(scheduler.Schedule(&batch).ok());
  ASSERT_EQ(batch.num_sequences(), 1);
  EXPECT_EQ(batch.sequences[0].num_scheduled_tokens, 6);
  EXPECT_FALSE(batch.sequences[0].samples);
  EXPECT_TRUE(batch.slot_moves.empty());
  ExpectBatchConsistent(batch);
  ASSERT_TRUE(scheduler.UpdateFromOutput({}).ok());

  // Step 2: the chunk is moved, the rest computed.
  ASSERT_TRUE(scheduler.Schedule(&batch).ok());
  ASSERT_EQ(batch.num_sequences(), 1);
  const ScheduledSequence& s = batch.sequences[0];
  EXPECT_EQ(s.num_computed_tokens, 15);
  EXPECT_EQ(s.num_scheduled_tokens, 5);
  EXPECT_EQ(s.num_shifted_hit_tokens, 9);
  EXPECT_TRUE(s.samples);
  ExpectBatchConsistent(batch);
  const auto table = batch.BlockTable(0);
  ASSERT_EQ(batch.slot_moves.size(), 9u);
  for (int32_t i = 0; i < 9; ++i) {
    const KvSlotMove& m = batch.slot_moves[static_cast<size_t>(i)];
    const int32_t pos = 6 + i;
    EXPECT_EQ(m.src_slot, 1000 + i);
    EXPECT_EQ(m.dst_slot, int64_t{table[static_cast<size_t>(pos / 4)]} * 4 + pos % 4);
    EXPECT_EQ(m.old_position, 40 + i);
    EXPECT_EQ(m.new_position, pos);
  }
  EXPECT_EQ(batch.stats.num_shifted_hit_tokens, 9);
  EXPECT_EQ(scheduler.stats().num_shifted_hit_tokens, 9);
  EXPECT_EQ(provider.acquired, 1);
  EXPECT_EQ(provider.released, 0);  // the owner releases after running the moves
  // Only the block before the chunk's first block is offered to the prefix index.
  EXPECT_EQ(cache->pool().NumCachedBlocks(), 1);
  EXPECT_TRUE(cache->ValidateInvariants().ok());
}

TEST(SchedulerTest, ChunkIsReleasedWhenItsRequestCannotBeScheduled) {
  auto cache = MakeManager(6, 4);
  std::unique_ptr<Scheduler> scheduler_owner = Scheduler::Create({}, *cache).value();
  Scheduler& scheduler = *scheduler_owner;
  FakeChunkProvider provider;
  provider.chunks[Iota(9, 106)] = FakeChunk(9, 40);
  scheduler.SetChunkReuseProvider(&provider);
  ASSERT_TRUE(scheduler.AddRequest(Req(2, Iota(8, 300), 4)).ok());
  SchedulerRequest r = Req(1, Iota(20, 100), 1);
  r.chunks = {{.offset = 6, .length = 9}};
  ASSERT_TRUE(scheduler.AddRequest(r).ok());
  ScheduledBatch batch;
  ASSERT_TRUE(scheduler.Schedule(&batch).ok());
  ASSERT_EQ(batch.num_sequences(), 2);
  ASSERT_TRUE(scheduler.UpdateFromOutput({{{.request_id = 2, .token = 5}}}).ok());
  // Request 1 needs 3 more blocks for the chunk and the rest; only 1 is left: it preempts
  // itself, and the chunk it acquired is released.
  ASSERT_TRUE(scheduler.Schedule(&batch).ok());
  EXPECT_EQ(batch.preempted_request_ids, std::vector<RequestId>{1});
  EXPECT_TRUE(batch.slot_moves.empty());
  EXPECT_EQ(provider.acquired, 1);
  EXPECT_EQ(provider.released, 1);
  EXPECT_TRUE(cache->ValidateInvariants().ok());
}

TEST(SchedulerTest, BadChunksAreRejected) {
  auto cache = MakeManager(16, 4);
  std::unique_ptr<Scheduler> scheduler_owner = Scheduler::Create({}, *cache).value();
  Scheduler& scheduler = *scheduler_owner;
  SchedulerRequest r = Req(1, Iota(10, 100), 2);
  r.chunks = {{.offset = 8, .length = 3}};
  EXPECT_EQ(scheduler.AddRequest(r).code(), absl::StatusCode::kInvalidArgument);
  r.chunks = {{.offset = 2, .length = 3}, {.offset = 4, .length = 1}};
  EXPECT_EQ(scheduler.AddRequest(r).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(scheduler.HasUnfinishedRequests());
}

TEST(SchedulerTest, BlendSchedulesTheReusedTokensFirstAndCountsThemInTheBudget) {
  auto cache = MakeManager(16, 4);
  std::unique_ptr<Scheduler> scheduler_owner = Scheduler::Create({}, *cache).value();
  Scheduler& scheduler = *scheduler_owner;
  FakeChunkProvider provider;
  provider.blend = true;
  provider.chunks[Iota(9, 106)] = FakeChunk(9, 40);
  scheduler.SetChunkReuseProvider(&provider);
  SchedulerRequest r = Req(1, Iota(20, 100), 2);
  r.chunks = {{.offset = 6, .length = 9}};
  ASSERT_TRUE(scheduler.AddRequest(r).ok());
  ScheduledBatch batch;
  ASSERT_TRUE(scheduler.Schedule(&batch).ok());
  EXPECT_EQ(batch.sequences[0].num_scheduled_tokens, 6);
  EXPECT_EQ(batch.stats.num_blend_tokens, 0);
  ASSERT_TRUE(scheduler.UpdateFromOutput({}).ok());

  // Step 2: the chunk's tokens are moved AND scheduled (first), then the rest of the prompt.
  ASSERT_TRUE(scheduler.Schedule(&batch).ok());
  ASSERT_EQ(batch.num_sequences(), 1);
  const ScheduledSequence& s = batch.sequences[0];
  EXPECT_EQ(s.num_computed_tokens, 6);
  EXPECT_EQ(s.num_scheduled_tokens, 14);
  EXPECT_EQ(s.num_blend_tokens, 9);
  EXPECT_EQ(s.num_shifted_hit_tokens, 9);
  EXPECT_TRUE(s.samples);
  ExpectBatchConsistent(batch);
  EXPECT_EQ(batch.positions[0], 6);
  EXPECT_EQ(std::vector<TokenId>(batch.token_ids.begin(), batch.token_ids.begin() + 9),
            Iota(9, 106));
  ASSERT_EQ(batch.slot_moves.size(), 9u);
  for (int32_t i = 0; i < 9; ++i) {
    EXPECT_EQ(batch.slot_moves[static_cast<size_t>(i)].dst_slot,
              batch.slot_mapping[static_cast<size_t>(i)]);
    EXPECT_EQ(batch.slot_moves[static_cast<size_t>(i)].new_position, 6 + i);
  }
  EXPECT_EQ(batch.stats.num_blend_tokens, 9);
  EXPECT_EQ(batch.stats.num_scheduled_tokens, 14);
  EXPECT_EQ(batch.stats.num_shifted_hit_tokens, 9);
  EXPECT_TRUE(cache->ValidateInvariants().ok());
}

TEST(SchedulerTest, BlendSplitsAChunkOverStepsByTheBudget) {
  auto cache = MakeManager(16, 4);
  std::unique_ptr<Scheduler> scheduler_owner =
      Scheduler::Create({.max_num_batched_tokens = 4}, *cache).value();
  Scheduler& scheduler = *scheduler_owner;
  FakeChunkProvider provider;
  provider.blend = true;
  provider.chunks[Iota(9, 106)] = FakeChunk(9, 40);
  scheduler.SetChunkReuseProvider(&provider);
  SchedulerRequest r = Req(1, Iota(20, 100), 1);
  r.chunks = {{.offset = 6, .length = 9}};
  ASSERT_TRUE(scheduler.AddRequest(r).ok());
  ScheduledBatch batch;
  std::vector<int32_t> blend, scheduled;
  std::vector<int64_t> moved_from;
  while (scheduler.HasUnfinishedRequests()) {
    ASSERT_TRUE(scheduler.Schedule(&batch).ok());
    ExpectBatchConsistent(batch);
    ASSERT_EQ(batch.num_sequences(), 1);
    EXPECT_LE(batch.num_tokens(), 4);
    blend.push_back(batch.sequences[0].num_blend_tokens);
    scheduled.push_back(batch.sequences[0].num_scheduled_tokens);
    for (const KvSlotMove& m : batch.slot_moves) moved_from.push_back(m.src_slot);
    std::vector<SampledToken> sampled;
    if (batch.sequences[0].samples) sampled.push_back({.request_id = 1, .token = 5});
    ASSERT_TRUE(scheduler.UpdateFromOutput(sampled).ok());
  }
  // 6 tokens before the chunk (4 + 2), the chunk in parts of 4, 4, 1 (each step re-acquires it
  // and starts inside it), then the 5 tokens after it (3 with the last part, then 2).
  EXPECT_EQ(blend, (std::vector<int32_t>{0, 0, 4, 4, 1, 0}));
  EXPECT_EQ(scheduled, (std::vector<int32_t>{4, 2, 4, 4, 4, 2}));
  std::vector<int64_t> want_from;
  for (int i = 0; i < 9; ++i) want_from.push_back(1000 + i);
  EXPECT_EQ(moved_from, want_from);
  EXPECT_EQ(provider.acquired, 3);
  EXPECT_EQ(scheduler.stats().num_shifted_hit_tokens, 9);
}

}  // namespace
}  // namespace pagedkv
