// Copyright 2026 The pagedkv Authors.
#include "engine/replay/cache_replay.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <memory>
#include <span>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/replay/belady_policy.h"
#include "engine/shift/chunk_reuse_tracker.h"
#include "pagedkv/block_pool.h"
#include "pagedkv/eviction_policy.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv::replay {
namespace {

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// How many blocks ahead the replay loop prefetches index slots (enough to cover a DRAM miss
// with a few blocks' work in between).
constexpr int64_t kPrefetchDistance = 8;

double Ratio(int64_t a, int64_t b) { return b > 0 ? static_cast<double>(a) / b : 0.0; }

// Tokens of the first `hits` blocks of request r.
int64_t PrefixTokens(const ExpandedWorkload& w, size_t r, int64_t hits) {
  if (hits == 0) return 0;
  const int64_t n = w.request_begin[r + 1] - w.request_begin[r];
  return (hits - 1) * w.block_size + (hits == n ? w.last_block_tokens[r] : w.block_size);
}

// Counts request r's marked chunks through `tracker` once its prefix hit covers
// `prefix_tokens` tokens. One tracker call per chunk, so its stats tell each chunk's outcome.
absl::Status CountChunks(const ExpandedWorkload& w, size_t r, int64_t prefix_tokens,
                         ChunkReuseTracker& tracker, CacheReplayResult& res) {
  const int64_t bs = w.block_size;
  for (int64_t c = w.chunk_begin[r]; c < w.chunk_begin[r + 1]; ++c) {
    const TrackedChunk& chunk = w.chunks[static_cast<size_t>(c)];
    const ChunkReuseStats before = tracker.stats();
    PAGEDKV_RETURN_IF_ERROR(tracker.OnRequest({&chunk, 1}, prefix_tokens));
    const ChunkReuseStats& after = tracker.stats();
    ++res.chunks;
    res.chunks_in_prefix += after.prefix_covered - before.prefix_covered;
    res.chunks_registered += after.registered - before.registered;
    res.chunk_register_failures += after.register_failures - before.register_failures;
    if (after.hits == before.hits) continue;
    ++res.chunk_hits;
    res.chunk_hits_moved += after.shifted_hits - before.shifted_hits;
    res.shifted_hit_tokens += after.hit_tokens - before.hit_tokens;
    res.shifted_hit_tokens_moved += after.shifted_hit_tokens - before.shifted_hit_tokens;
    // Served tokens [start, end): full blocks of the request's grid wholly inside them.
    const int64_t start = std::max(prefix_tokens, chunk.position);
    const int64_t end = chunk.position + chunk.length;
    res.shifted_hit_blocks += std::max<int64_t>(0, end / bs - NumBlocksFor(start, bs));
  }
  return absl::OkStatus();
}

}  // namespace

double CacheReplayResult::block_hit_rate() const { return Ratio(hit_blocks, blocks); }
double CacheReplayResult::token_hit_rate() const { return Ratio(hit_tokens, total_tokens); }
double CacheReplayResult::infinite_cache_block_hit_rate() const {
  return Ratio(infinite_hit_blocks, blocks);
}
double CacheReplayResult::infinite_cache_token_hit_rate() const {
  return Ratio(infinite_hit_tokens, total_tokens);
}
double CacheReplayResult::shifted_hit_rate() const {
  return Ratio(shifted_hit_tokens, total_tokens);
}
double CacheReplayResult::prefix_plus_shifted_token_hit_rate() const {
  return Ratio(hit_tokens + shifted_hit_tokens, total_tokens);
}
double CacheReplayResult::blocks_per_second() const {
  return seconds > 0 ? static_cast<double>(blocks) / seconds : 0.0;
}

std::vector<std::string> CacheReplayPolicyNames() {
  std::vector<std::string> names;
  for (std::string_view n : EvictionPolicyNames()) names.emplace_back(n);
  names.emplace_back("belady");
  return names;
}

absl::StatusOr<CacheReplayResult> RunCacheReplay(const ExpandedWorkload& w,
                                                 const CacheReplayOptions& options) {
  if (options.capacity_blocks <= 0 || options.capacity_blocks >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cache capacity must be between 1 and 2^31 - 1 blocks (got %d)", options.capacity_blocks));
  }
  std::unique_ptr<EvictionPolicy> policy;
  BeladyPolicy* belady = nullptr;
  if (options.policy == "belady") {
    if (w.next_use.size() != w.keys.size()) {
      return absl::InvalidArgumentError(
          "the belady policy needs the workload expanded with compute_next_use");
    }
    auto p = std::make_unique<BeladyPolicy>();
    belady = p.get();
    policy = std::move(p);
  } else {
    auto p = MakeEvictionPolicy(options.policy);
    if (!p.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("unknown eviction policy \"%s\"; expected one of: %s", options.policy,
                          absl::StrJoin(CacheReplayPolicyNames(), ", ")));
    }
    policy = *std::move(p);
  }
  PAGEDKV_ASSIGN_OR_RETURN(
      std::unique_ptr<BlockPool> pool,
      BlockPool::Create({.num_blocks = static_cast<int32_t>(options.capacity_blocks),
                         .block_size = w.block_size,
                         .store_tokens = false},
                        std::move(policy)));

  std::unique_ptr<ChunkReuseTracker> tracker;
  if (options.count_shifted && w.has_chunks()) {
    ChunkReuseTrackerOptions tracker_options;
    if (belady != nullptr) {
      // Chunk copies are next needed when the next request marks the same chunk.
      tracker_options.before_unpin = [belady](std::span<const BlockId> blocks, int64_t next_use) {
        for (BlockId b : blocks) belady->SetNextUse(b, next_use);
      };
      tracker_options.refresh_covered_chunks = true;
      tracker_options.retire_orphaned_blocks = true;
    }
    PAGEDKV_ASSIGN_OR_RETURN(tracker,
                             ChunkReuseTracker::Create(pool.get(), std::move(tracker_options)));
  }

  CacheReplayResult res;
  res.shifted_counted = tracker != nullptr;
  res.policy = options.policy;
  res.capacity_blocks = options.capacity_blocks;
  res.requests = static_cast<int64_t>(w.num_requests());
  res.blocks = w.num_blocks();
  res.total_tokens = w.total_tokens;
  res.not_full_block_tokens = w.partial_tokens;
  std::vector<BlockId> table;
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = ThreadCpuSeconds();
  for (size_t r = 0; r < w.num_requests(); ++r) {
    const int64_t begin = w.request_begin[r];
    const int64_t end = w.request_begin[r + 1];
    table.clear();
    int64_t hits = 0;
    int64_t infinite_hits = 0;
    bool prefix = true;
    bool infinite_prefix = true;
    bool pool_full = false;
    BlockHash parent{};
    for (int64_t i = begin; i < end; ++i) {
      const BlockHash& key = w.keys[i];
      // Keys are known ahead: start loading the index slots of a later block.
      if (i + kPrefetchDistance < w.num_blocks())
        pool->PrefetchIndex(w.keys[i + kPrefetchDistance]);
      infinite_prefix = infinite_prefix && w.seen_before[i];
      infinite_hits += infinite_prefix;
      // A block no earlier request had cannot be cached: skip the lookup.
      BlockId block = w.seen_before[i] ? pool->FindCached(key) : kNullBlock;
      if (block != kNullBlock) {
        PAGEDKV_RETURN_IF_ERROR(pool->Pin(block));
        if (prefix) {
          ++hits;
        } else {
          ++res.miss_after_miss;
        }
      } else {
        prefix = false;
        if (w.seen_before[i]) {
          ++res.miss_evicted;
        } else {
          ++res.miss_never_seen;
        }
        if (pool_full) {
          ++res.over_capacity_blocks;
        } else if (auto allocated = pool->Allocate(); allocated.ok()) {
          block = *allocated;
          PAGEDKV_RETURN_IF_ERROR(
              pool->Insert({.block = block, .hash = key, .parent_hash = parent}).status());
        } else {
          pool_full = true;  // every block is pinned by this request
          ++res.over_capacity_blocks;
        }
      }
      if (block != kNullBlock) {
        if (belady != nullptr) belady->SetNextUse(block, w.next_use[i]);
        table.push_back(block);
      }
      parent = key;
    }
    res.hit_blocks += hits;
    const int64_t hit_tokens = PrefixTokens(w, r, hits);
    res.hit_tokens += hit_tokens;
    if (tracker != nullptr) PAGEDKV_RETURN_IF_ERROR(CountChunks(w, r, hit_tokens, *tracker, res));
    res.infinite_hit_blocks += infinite_hits;
    res.infinite_hit_tokens += PrefixTokens(w, r, infinite_hits);
    std::reverse(table.begin(), table.end());
    PAGEDKV_RETURN_IF_ERROR(pool->Unpin(table));
    if (options.progress && (r & 1023) == 1023) options.progress(end);
  }
  res.seconds = ThreadCpuSeconds() - cpu_start;
  res.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  res.evictions = pool->stats().evictions;
  if (options.progress) options.progress(w.num_blocks());
  return res;
}

}  // namespace pagedkv::replay
