// Copyright 2026 The pagedkv Authors.
//
// ShiftedChunkReuse: the one chunk-reuse provider of the engine and serve-mode replay. Without a
// mover (replay): register, acquire, release and eviction on a bare pool, bad calls changing
// nothing, and the provider under the real Scheduler with pool invariants checked after every
// step. With a recording ChunkKvMover: the mover gets the slot moves and the chunk copies (into
// the blocks the index allocated), its errors pass through, and the pins, pool state and stats
// are the same as without one. At the hash level (TouchKey, RegisterKey; cache-mode replay):
// hits at the same and another position, evicted chunks missing, full pools refusing copies, bad
// calls changing nothing, and BeforeUnpin seeing each chunk's blocks while they are pinned.
#include "engine/runtime/shift/shifted_chunk_reuse.h"

#include <climits>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "engine/runtime/shift/chunk_kv_mover.h"
#include "gtest/gtest.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/chunk_index.h"
#include "pagedkv/cache/kv_cache_groups.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/runtime/scheduler.h"
#include "tests/engine/runtime/shift/recording_mover.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::MoverLog;
using ::pagedkv::testing::RecordingMover;

std::vector<TokenId> Tokens(TokenId first, int n) {
  std::vector<TokenId> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = first + i;
  return t;
}

TEST(ShiftedChunkReuseTest, RegisterAcquireReleaseAndEviction) {
  auto pool = BlockPool::Create({.num_blocks = 6, .block_size = 4}).value();
  auto reuse = ShiftedChunkReuse::Create(ChunkIndex::Create(pool.get()).value(), nullptr,
                                         {.model_fingerprint = "m"})
                   .value();
  const std::vector<TokenId> doc = Tokens(100, 10);  // 3 blocks
  auto registered = reuse->Register(doc, "", 0, /*position=*/8, {});
  ASSERT_TRUE(registered.ok()) << registered.status();
  EXPECT_TRUE(*registered);
  EXPECT_EQ(pool->NumEvictableBlocks(), 3);  // a copy in blocks of its own, released
  EXPECT_EQ(pool->NumUsedBlocks(), 0);
  EXPECT_FALSE(*reuse->Register(doc, "", 0, 20, {}));  // already cached: no second copy
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
  ASSERT_TRUE(reuse->RunMoves({}).ok());
  EXPECT_EQ(reuse->num_acquired(), 0);
  EXPECT_EQ(pool->NumUsedBlocks(), 0);

  // Released: evictable like any cached block; an evicted chunk is never acquired.
  ASSERT_TRUE(pool->Allocate(6, &held).ok());
  EXPECT_FALSE(reuse->Acquire(doc, "", 0).has_value());
  EXPECT_EQ(reuse->index().size(), 0);
  // No room: not registered, nothing changes.
  auto full = reuse->Register(doc, "", 0, 0, {});
  ASSERT_TRUE(full.ok());
  EXPECT_FALSE(*full);
  EXPECT_EQ(reuse->stats().register_failures, 1);
  EXPECT_EQ(pool->NumUsedBlocks(), 6);
  ASSERT_TRUE(pool->Unpin(held).ok());
  EXPECT_TRUE(reuse->index().ValidateInvariants().ok());
}

TEST(ShiftedChunkReuseTest, ReleaseUnpinsOneChunkAndBadCallsChangeNothing) {
  auto pool = BlockPool::Create({.num_blocks = 8, .block_size = 4}).value();
  auto reuse =
      ShiftedChunkReuse::Create(ChunkIndex::Create(pool.get()).value(), nullptr, {}).value();
  const std::vector<TokenId> doc = Tokens(5, 4);
  ASSERT_TRUE(*reuse->Register(doc, "", 0, 0, {}));
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

  EXPECT_EQ(reuse->Register({}, "", 0, 0, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reuse->Register(Tokens(50, 3), "", 0, -1, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reuse->index().size(), 1);
  EXPECT_EQ(pool->NumUsedBlocks(), 1);
  reuse.reset();  // the destructor releases b
  EXPECT_EQ(pool->NumUsedBlocks(), 0);

  EXPECT_EQ(ShiftedChunkReuse::Create(nullptr, nullptr, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      ShiftedChunkReuse::Create(ChunkIndex::Create(pool.get()).value(), nullptr, {.first_k = -1})
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
}

// The provider under the real scheduler: random requests that share documents at varying
// positions; after every step the pool and the chunk index are consistent, every chunk being
// moved is pinned, and at the end no block is held.
// Over one group and over a full and a sliding-window group (a copy per group; the window
// group's moves are the chunk tail's, in its own pinned copy).
TEST(ShiftedChunkReuseTest, UnderTheSchedulerPoolStaysConsistent) {
  const std::vector<KvCacheGroupSpec> hybrid = {
      {.kind = KvCacheGroupKind::kFullAttention},
      {.kind = KvCacheGroupKind::kSlidingWindow, .sliding_window = 6}};
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const std::vector<KvCacheGroupSpec> groups =
        seed > 4 ? hybrid : std::vector<KvCacheGroupSpec>{};
    auto manager =
        KvCacheManager::Create({.num_blocks = 48, .block_size = 4, .groups = groups}).value();
    auto scheduler =
        Scheduler::Create({.max_num_batched_tokens = 40, .max_num_seqs = 4}, *manager).value();
    auto reuse =
        ShiftedChunkReuse::Create(manager->AttachChunkIndex().value(), nullptr,
                                  {.first_k = static_cast<int32_t>(seed % 2), .groups = groups})
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
      ASSERT_EQ(batch.group_slot_moves.size(), groups.empty() ? 0u : groups.size() - 1);
      for (const std::vector<KvSlotMove>& moves : batch.group_slot_moves) {
        EXPECT_LE(moves.size(), batch.slot_moves.size());
        for (const KvSlotMove& m : moves) {
          EXPECT_GE(manager->pool().RefCount(static_cast<BlockId>(m.src_slot / 4)), 1);
        }
      }
      // No mover: nothing moves.
      ASSERT_TRUE(reuse->RunMoves(batch.slot_moves, batch.group_slot_moves).ok());
      std::vector<SampledToken> sampled;
      for (const ScheduledSequence& s : batch.sequences) {
        const SchedulerRequest& r = requests.at(s.request_id);
        for (const PromptChunk& c : r.chunks) {
          const int32_t end = c.offset + c.length;
          if (end <= s.num_computed_tokens || end > s.seq_len()) continue;
          auto done =
              reuse->Register(std::span<const TokenId>(r.prompt).subspan(
                                  static_cast<size_t>(c.offset), static_cast<size_t>(c.length)),
                              "", 0, c.offset, {});
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

// The same calls on two pools, one provider with a mover and one without: the mover sees the
// moves and the copies (destination: the blocks the index allocated, in order), and the pins,
// the pool's blocks and the stats come out the same.
TEST(ShiftedChunkReuseTest, AMoverGetsTheKvWorkAndChangesNoBookkeeping) {
  MoverLog log;
  auto pool_a = BlockPool::Create({.num_blocks = 6, .block_size = 4}).value();
  auto pool_b = BlockPool::Create({.num_blocks = 6, .block_size = 4}).value();
  auto with = ShiftedChunkReuse::Create(ChunkIndex::Create(pool_a.get()).value(),
                                        std::make_unique<RecordingMover>(&log), {})
                  .value();
  auto without =
      ShiftedChunkReuse::Create(ChunkIndex::Create(pool_b.get()).value(), nullptr, {}).value();
  EXPECT_TRUE(with->has_mover());
  EXPECT_FALSE(without->has_mover());
  const std::vector<TokenId> doc = Tokens(100, 6);              // 2 blocks
  const std::vector<int64_t> slots = {40, 41, 42, 43, 44, 45};  // where it was computed
  for (ShiftedChunkReuse* reuse : {with.get(), without.get()}) {
    const std::span<const int64_t> s =
        reuse->has_mover() ? std::span<const int64_t>(slots) : std::span<const int64_t>();
    ASSERT_TRUE(*reuse->Register(doc, "", 0, /*position=*/3, s));
    EXPECT_FALSE(*reuse->Register(doc, "", 0, 9, s));  // already registered
    std::optional<AcquiredChunk> used = reuse->Acquire(doc, "", 0);
    std::optional<AcquiredChunk> unused = reuse->Acquire(doc, "", 0);
    ASSERT_TRUE(used.has_value() && unused.has_value());
    EXPECT_EQ(used->position, 3);
    reuse->Release(unused->handle);
    const std::vector<KvSlotMove> moves = {
        {.src_slot = used->slots[0], .dst_slot = 7, .old_position = 3, .new_position = 20}};
    ASSERT_TRUE(reuse->RunMoves(moves).ok());
    ASSERT_TRUE(reuse->RunMoves({}).ok());  // an empty step: the mover is not called
    EXPECT_EQ(reuse->num_acquired(), 0);
  }
  EXPECT_EQ(log.move_calls, 1);
  ASSERT_EQ(log.moves.size(), 1u);
  EXPECT_EQ(log.moves[0].dst_slot, 7);
  EXPECT_EQ(log.moves[0].new_position, 20);
  EXPECT_EQ(log.copy_src, slots);
  ASSERT_EQ(log.copy_dst.size(), slots.size());
  EXPECT_EQ(log.copy_positions, std::vector<int32_t>{3});
  // The copy went to the chunk's own blocks: the ones Acquire hands out.
  std::optional<AcquiredChunk> chunk = with->Acquire(doc, "", 0);
  ASSERT_TRUE(chunk.has_value());
  EXPECT_EQ(chunk->slots, log.copy_dst);
  ASSERT_TRUE(with->RunMoves({}).ok());
  ASSERT_TRUE(without->Acquire(doc, "", 0).has_value());
  ASSERT_TRUE(without->RunMoves({}).ok());

  const ShiftedChunkReuseStats& a = with->stats();
  const ShiftedChunkReuseStats& b = without->stats();
  EXPECT_EQ(a.acquired, b.acquired);
  EXPECT_EQ(a.acquired, 3);
  EXPECT_EQ(a.released_unused, b.released_unused);
  EXPECT_EQ(a.registered, b.registered);
  EXPECT_EQ(a.registered_tokens, b.registered_tokens);
  EXPECT_EQ(a.already_registered, b.already_registered);
  EXPECT_EQ(a.register_failures, b.register_failures);
  EXPECT_EQ(pool_a->NumEvictableBlocks(), pool_b->NumEvictableBlocks());
  EXPECT_EQ(pool_a->NumUsedBlocks(), 0);
  EXPECT_EQ(pool_b->NumUsedBlocks(), 0);
  for (BlockId block = 0; block < 6; ++block) {
    EXPECT_EQ(pool_a->RefCount(block), pool_b->RefCount(block));
  }
  EXPECT_TRUE(with->index().ValidateInvariants().ok());
  EXPECT_TRUE(without->index().ValidateInvariants().ok());
}

// The mover's errors pass through: RunMoves still releases every chunk, a failed copy leaves
// nothing registered and no block held.
TEST(ShiftedChunkReuseTest, MoverErrorsPassThroughAndLeaveNothingHeld) {
  MoverLog log;
  auto pool = BlockPool::Create({.num_blocks = 6, .block_size = 4}).value();
  auto reuse = ShiftedChunkReuse::Create(ChunkIndex::Create(pool.get()).value(),
                                         std::make_unique<RecordingMover>(&log), {})
                   .value();
  const std::vector<TokenId> doc = Tokens(7, 4);
  const std::vector<int64_t> slots = {0, 1, 2, 3};
  log.copy_error = absl::InternalError("copy failed");
  EXPECT_EQ(reuse->Register(doc, "", 0, 0, slots).status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(reuse->index().size(), 0);
  EXPECT_EQ(pool->NumUsedBlocks(), 0);
  EXPECT_EQ(reuse->stats().registered, 0);

  log.copy_error = absl::OkStatus();
  ASSERT_TRUE(*reuse->Register(doc, "", 0, 0, slots));
  std::optional<AcquiredChunk> chunk = reuse->Acquire(doc, "", 0);
  ASSERT_TRUE(chunk.has_value());
  log.move_error = absl::InternalError("move failed");
  const std::vector<KvSlotMove> moves = {{.src_slot = chunk->slots[0], .dst_slot = 20}};
  EXPECT_EQ(reuse->RunMoves(moves).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(reuse->num_acquired(), 0);
  EXPECT_EQ(pool->NumUsedBlocks(), 0);
}

TEST(ShiftedChunkReuseTest, OptionsAndSlotsThatDoNotFitAreInvalidArgument) {
  MoverLog log;
  auto pool = BlockPool::Create({.num_blocks = 6, .block_size = 4}).value();
  auto index = [&pool] { return ChunkIndex::Create(pool.get()).value(); };
  auto mover = [&log] { return std::make_unique<RecordingMover>(&log); };
  // CacheBlend needs KV to recompute: a mover.
  EXPECT_EQ(
      ShiftedChunkReuse::Create(index(), nullptr, {.recompute_fraction = 0.5}).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ShiftedChunkReuse::Create(index(), mover(), {.recompute_fraction = 0.5}).ok());
  EXPECT_EQ(
      ShiftedChunkReuse::Create(index(), mover(), {.recompute_fraction = 1.5}).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ShiftedChunkReuse::Create(index(), mover(), {.deviation_layer = -1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto reuse = ShiftedChunkReuse::Create(index(), mover(), {}).value();
  EXPECT_FALSE(reuse->blend_reused_tokens());
  const std::vector<TokenId> doc = Tokens(7, 4);
  const std::vector<int64_t> three = {0, 1, 2};
  // With a mover every token needs its slot; nothing changes on error.
  EXPECT_EQ(reuse->Register(doc, "", 0, 0, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reuse->Register(doc, "", 0, 0, three).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reuse->index().size(), 0);
  EXPECT_TRUE(log.copy_src.empty());
  // Without one, slots may be left out, or given in full, but not in part.
  auto bare = ShiftedChunkReuse::Create(index(), nullptr, {}).value();
  EXPECT_EQ(bare->Register(doc, "", 0, 0, three).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(*bare->Register(doc, "", 0, 0, std::vector<int64_t>{0, 1, 2, 3}));
}

// A hash-level reuse (cache-mode replay's) over a bare pool of `num_blocks` 16-token blocks.
struct KeyedReuse {
  std::unique_ptr<BlockPool> pool;
  std::unique_ptr<ShiftedChunkReuse> reuse;
};
KeyedReuse MakeKeyedReuse(int32_t num_blocks) {
  KeyedReuse k;
  k.pool = BlockPool::Create({.num_blocks = num_blocks, .block_size = 16}).value();
  auto index = ChunkIndex::Create(k.pool.get(), {.verify_tokens = false}).value();
  k.reuse = ShiftedChunkReuse::Create(std::move(index), nullptr, {}).value();
  return k;
}

// Over a full and a sliding-window group (window 4): a copy per group, the window group's of the
// chunk's last 4 tokens; Acquire lists both groups' slots; RunMoves hands each group's moves to
// the mover with its group; a group whose copy was evicted misses the chunk until Register
// copies that group again; bad group slots and options are InvalidArgument.
TEST(ShiftedChunkReuseTest, OverGroupsEachGroupGetsItsCopy) {
  MoverLog log;
  const std::vector<KvCacheGroupSpec> groups = {
      {.kind = KvCacheGroupKind::kFullAttention},
      {.kind = KvCacheGroupKind::kSlidingWindow, .sliding_window = 4}};
  auto pool = BlockPool::Create({.num_blocks = 8, .block_size = 4}).value();
  auto reuse = ShiftedChunkReuse::Create(ChunkIndex::Create(pool.get()).value(),
                                         std::make_unique<RecordingMover>(&log), {.groups = groups})
                   .value();
  EXPECT_EQ(reuse->num_groups(), 2);
  const std::vector<TokenId> doc = Tokens(100, 10);
  std::vector<int64_t> slots0;  // where group 0's KV was computed
  for (int64_t slot = 40; slot < 50; ++slot) slots0.push_back(slot);
  std::vector<std::vector<int64_t>> slots1 = {std::vector<int64_t>(10, kNoChunkSlot)};
  for (int i = 6; i < 10; ++i) slots1[0][static_cast<size_t>(i)] = 60 + i;
  // Group slots are required with a mover; a tail slot must be valid.
  EXPECT_EQ(reuse->Register(doc, "", 0, 3, slots0).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<std::vector<int64_t>> bad = slots1;
  bad[0][9] = -1;
  EXPECT_EQ(reuse->Register(doc, "", 0, 3, slots0, bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reuse->index().size(), 0);
  EXPECT_TRUE(log.copy_groups.empty());
  ASSERT_TRUE(*reuse->Register(doc, "", 0, /*position=*/3, slots0, slots1));
  EXPECT_EQ(log.copy_groups, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(log.copy_positions, (std::vector<int32_t>{3, 9}));  // the window copy: tokens 6..9
  EXPECT_EQ(log.copy_src.size(), 14u);
  EXPECT_EQ(reuse->index().size(), 2);
  EXPECT_EQ(pool->NumEvictableBlocks(), 3 + 1);

  std::optional<AcquiredChunk> hit = reuse->Acquire(doc, "", 0);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->position, 3);
  ASSERT_EQ(hit->group_slots.size(), 1u);
  ASSERT_EQ(hit->group_positions, (std::vector<int32_t>{3}));
  ASSERT_EQ(hit->group_slots[0].size(), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(hit->group_slots[0][static_cast<size_t>(i)] == kNoChunkSlot, i < 6) << i;
  }
  EXPECT_EQ(pool->NumUsedBlocks(), 4);  // both copies pinned
  const std::vector<KvSlotMove> moves0 = {{.src_slot = hit->slots[0], .dst_slot = 7}};
  const std::vector<std::vector<KvSlotMove>> moves1 = {
      {{.src_slot = hit->group_slots[0][9], .dst_slot = 8}}};
  ASSERT_TRUE(reuse->RunMoves(moves0, moves1).ok());
  EXPECT_EQ(log.move_groups, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(pool->NumUsedBlocks(), 0);
  const std::vector<std::vector<KvSlotMove>> too_many(2);
  EXPECT_EQ(reuse->RunMoves({}, too_many).code(), absl::StatusCode::kInvalidArgument);

  // Evict the window group's copy (one block, the least recently used after group 0's): the
  // chunk misses; registering it again copies that group only.
  const BlockId window_block = static_cast<BlockId>(hit->group_slots[0][9] / 4);
  std::vector<BlockId> held;
  while (pool->IsCached(window_block)) ASSERT_TRUE(pool->Allocate(1, &held).ok());
  EXPECT_FALSE(reuse->Acquire(doc, "", 0).has_value());
  ASSERT_TRUE(pool->Unpin(held).ok());
  ASSERT_TRUE(*reuse->Register(doc, "", 0, 20, slots0, slots1));
  EXPECT_EQ(log.copy_groups, (std::vector<int32_t>{0, 1, 1}));
  std::optional<AcquiredChunk> again = reuse->Acquire(doc, "", 0);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->group_positions, (std::vector<int32_t>{20}));
  ASSERT_TRUE(reuse->RunMoves({}).ok());
  EXPECT_TRUE(reuse->index().ValidateInvariants().ok());

  // Options: blending over groups, a window group 0.
  EXPECT_EQ(ShiftedChunkReuse::Create(ChunkIndex::Create(pool.get()).value(),
                                      std::make_unique<RecordingMover>(&log),
                                      {.recompute_fraction = 0.5, .groups = groups})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ShiftedChunkReuse::Create(ChunkIndex::Create(pool.get()).value(), nullptr,
                                      {.groups = {groups[1], groups[0]}})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

// Hash level over two groups: TouchKey hits only when every group's copy is cached.
TEST(ShiftedChunkReuseKeyTest, OverGroupsEveryGroupMustHoldItsCopy) {
  const std::vector<KvCacheGroupSpec> groups = {
      {.kind = KvCacheGroupKind::kFullAttention},
      {.kind = KvCacheGroupKind::kSlidingWindow, .sliding_window = 4}};
  auto pool = BlockPool::Create({.num_blocks = 8, .block_size = 4}).value();
  auto reuse =
      ShiftedChunkReuse::Create(ChunkIndex::Create(pool.get(), {.verify_tokens = false}).value(),
                                nullptr, {.groups = groups})
          .value();
  const BlockHash key = BlockHash::FromU64(77);
  EXPECT_FALSE(reuse->TouchKey(key, 10).value().has_value());
  EXPECT_EQ(reuse->RegisterKey(key, 10, 5).value(), ChunkCopyResult::kInserted);
  EXPECT_EQ(pool->NumEvictableBlocks(), 3 + 1);  // 10 tokens, then the last 4
  int calls = 0;
  EXPECT_EQ(reuse->TouchKey(key, 10, [&](std::span<const BlockId>) { ++calls; }).value(), 5);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(reuse->RegisterKey(key, 10, 9).value(), ChunkCopyResult::kAlreadyRegistered);
  EXPECT_EQ(pool->NumUsedBlocks(), 0);
  std::vector<BlockId> held;
  ASSERT_TRUE(pool->Allocate(5, &held).ok());  // 4 free, then the LRU copy block
  EXPECT_FALSE(reuse->TouchKey(key, 10).value().has_value());
  ASSERT_TRUE(pool->Unpin(held).ok());
  EXPECT_TRUE(reuse->index().ValidateInvariants().ok());
}

TEST(ShiftedChunkReuseKeyTest, TouchFindsCopiesAtTheirPositionAndPinsNothing) {
  KeyedReuse k = MakeKeyedReuse(64);
  const BlockHash doc = BlockHash::FromU64(7), other = BlockHash::FromU64(8);
  EXPECT_EQ(k.reuse->TouchKey(doc, 20).value(), std::nullopt);
  EXPECT_EQ(k.reuse->RegisterKey(doc, 20, 10).value(), ChunkCopyResult::kInserted);
  EXPECT_EQ(k.reuse->RegisterKey(other, 5, 30).value(), ChunkCopyResult::kInserted);
  EXPECT_EQ(k.reuse->RegisterKey(other, 5, 99).value(), ChunkCopyResult::kAlreadyRegistered);
  EXPECT_EQ(k.pool->NumEvictableBlocks(), 3);  // 2 + 1 blocks, none held
  EXPECT_EQ(k.reuse->TouchKey(doc, 20).value(), 10);
  EXPECT_EQ(k.reuse->TouchKey(other, 5).value(), 30);
  EXPECT_EQ(k.reuse->TouchKey(other, 6).value(), std::nullopt);  // another length: not it
  EXPECT_EQ(k.reuse->stats().acquired, 2);
  EXPECT_EQ(k.reuse->stats().registered, 2);
  EXPECT_EQ(k.reuse->stats().registered_tokens, 25);
  EXPECT_EQ(k.reuse->stats().already_registered, 1);
  EXPECT_EQ(k.pool->NumUsedBlocks(), 0);  // nothing stays pinned
  EXPECT_TRUE(k.reuse->index().ValidateInvariants().ok());
}

TEST(ShiftedChunkReuseKeyTest, EvictedChunksMissAndFullPoolsFailToRegister) {
  KeyedReuse k = MakeKeyedReuse(4);
  const BlockHash doc = BlockHash::FromU64(1);
  ASSERT_EQ(k.reuse->RegisterKey(doc, 32, 0).value(), ChunkCopyResult::kInserted);
  // Prefix traffic takes every block: the chunk's copy is evicted.
  std::vector<BlockId> held;
  ASSERT_TRUE(k.pool->Allocate(4, &held).ok());
  EXPECT_EQ(k.reuse->index().size(), 0);
  EXPECT_EQ(k.reuse->TouchKey(doc, 32).value(), std::nullopt);
  EXPECT_EQ(k.reuse->RegisterKey(doc, 32, 0).value(), ChunkCopyResult::kNoRoom);
  EXPECT_EQ(k.reuse->stats().register_failures, 1);
  ASSERT_TRUE(k.pool->Unpin(held).ok());
  EXPECT_EQ(k.reuse->RegisterKey(doc, 32, 0).value(), ChunkCopyResult::kInserted);
  EXPECT_EQ(k.reuse->stats().registered, 2);
  EXPECT_TRUE(k.reuse->index().ValidateInvariants().ok());
}

TEST(ShiftedChunkReuseKeyTest, BadKeyedCallsChangeNothing) {
  KeyedReuse k = MakeKeyedReuse(4);
  const BlockHash doc = BlockHash::FromU64(1);
  EXPECT_EQ(k.reuse->TouchKey(doc, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(k.reuse->TouchKey(doc, kMaxKeyedChunkTokens + 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(k.reuse->RegisterKey(doc, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(k.reuse->RegisterKey(doc, 8, -1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(k.reuse->RegisterKey(doc, 8, INT32_MAX - 4).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(k.reuse->index().size(), 0);
  EXPECT_EQ(k.pool->NumFreeBlocks(), 4);
  EXPECT_EQ(k.reuse->stats().registered + k.reuse->stats().register_failures, 0);
}

TEST(ShiftedChunkReuseKeyTest, BeforeUnpinSeesEachChunksBlocksWhilePinned) {
  KeyedReuse k = MakeKeyedReuse(8);
  struct Call {
    std::vector<BlockId> blocks;
    std::vector<int32_t> ref_counts;  // while the callback runs: still pinned
  };
  std::vector<Call> calls;
  BlockPool* raw = k.pool.get();
  const BeforeUnpin record = [&calls, raw](std::span<const BlockId> blocks) {
    Call c{{blocks.begin(), blocks.end()}, {}};
    for (BlockId b : blocks) c.ref_counts.push_back(raw->RefCount(b));
    calls.push_back(std::move(c));
  };
  const BlockHash doc = BlockHash::FromU64(3);
  // Registration: a copy of 2 blocks, seen while pinned.
  ASSERT_EQ(k.reuse->RegisterKey(doc, 20, 0, record).value(), ChunkCopyResult::kInserted);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].blocks.size(), 2u);
  EXPECT_EQ(calls[0].ref_counts, (std::vector<int32_t>{1, 1}));
  // A hit: the same blocks, pinned again.
  ASSERT_EQ(k.reuse->TouchKey(doc, 20, record).value(), 0);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].blocks, calls[0].blocks);
  EXPECT_EQ(calls[1].ref_counts, (std::vector<int32_t>{1, 1}));
  // A miss, or no room to register: no call.
  std::vector<BlockId> held;
  ASSERT_TRUE(k.pool->Allocate(8, &held).ok());  // evicts the copy, takes every block
  EXPECT_EQ(k.reuse->TouchKey(doc, 20, record).value(), std::nullopt);
  EXPECT_EQ(k.reuse->RegisterKey(BlockHash::FromU64(4), 5, 0, record).value(),
            ChunkCopyResult::kNoRoom);
  EXPECT_EQ(calls.size(), 2u);
  ASSERT_TRUE(k.pool->Unpin(held).ok());
  EXPECT_TRUE(k.reuse->index().ValidateInvariants().ok());
}

}  // namespace
}  // namespace pagedkv
