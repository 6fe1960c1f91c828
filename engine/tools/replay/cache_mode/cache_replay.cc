// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/cache_mode/cache_replay.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <memory>
#include <span>
#include <thread>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cache/tiers/tier_store_gate.h"
#include "engine/runtime/shift/chunk_reuse_tracker.h"
#include "engine/tools/replay/cache_mode/belady_policy.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/eviction_policy.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/tiers/host_tier.h"
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

// The eviction policy of a replay; `belady` points into `policy` when it is the clairvoyant one.
struct ReplayPolicy {
  std::unique_ptr<EvictionPolicy> policy;
  BeladyPolicy* belady = nullptr;
};

absl::StatusOr<ReplayPolicy> MakeReplayPolicy(const ExpandedWorkload& w, const std::string& name) {
  ReplayPolicy made;
  if (name == "belady") {
    if (w.next_use.size() != w.keys.size()) {
      return absl::InvalidArgumentError(
          "the belady policy needs the workload expanded with compute_next_use");
    }
    auto belady = std::make_unique<BeladyPolicy>();
    made.belady = belady.get();
    made.policy = std::move(belady);
    return made;
  }
  absl::StatusOr<std::unique_ptr<EvictionPolicy>> policy = MakeEvictionPolicy(name);
  if (!policy.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("unknown eviction policy \"%s\"; expected one of: %s", name,
                        absl::StrJoin(CacheReplayPolicyNames(), ", ")));
  }
  made.policy = *std::move(policy);
  return made;
}

// The tracker of marked chunks, or null when shifted hits are not counted.
absl::StatusOr<std::unique_ptr<ChunkReuseTracker>> MakeChunkTracker(
    const ExpandedWorkload& w, const CacheReplayOptions& options, BlockPool* pool,
    BeladyPolicy* belady) {
  if (!options.count_shifted || !w.has_chunks()) return nullptr;
  ChunkReuseTrackerOptions tracker_options;
  if (belady != nullptr) {
    // Chunk copies are next needed when the next request marks the same chunk.
    tracker_options.before_unpin = [belady](std::span<const BlockId> blocks, int64_t next_use) {
      for (BlockId b : blocks) belady->SetNextUse(b, next_use);
    };
    tracker_options.refresh_covered_chunks = true;
    tracker_options.retire_orphaned_blocks = true;
  }
  return ChunkReuseTracker::Create(pool, std::move(tracker_options));
}

// The simulated tiers of a replay (either may be null).
struct ReplayTiers {
  std::unique_ptr<HostTier> host;
  std::unique_ptr<HostTier> remote;
  TierStoreOptions host_store;  // the host tier's rule and threshold
  TierStoreGate gate;           // pool prefix hits per block, for the threshold
};

absl::StatusOr<std::unique_ptr<HostTier>> MakeSimulatedTier(int64_t capacity,
                                                            const std::string& policy,
                                                            const char* name) {
  if (capacity <= 0) return nullptr;
  return HostTier::Create({.capacity_blocks = capacity, .policy = policy, .name = name});
}

// Whether `tier` holds `key` (a hit updates its policy).
bool TierHas(HostTier* tier, const BlockHash& key) {
  if (tier == nullptr) return false;
  const TierBlock block{.hash = key};
  absl::StatusOr<int64_t> n =
      tier->LoadPrefix({&block, 1}, [](int64_t, std::span<const std::byte>) { return true; });
  return n.ok() && *n == 1;
}

absl::Status StoreKey(HostTier* tier, const BlockHash& key) {
  if (tier == nullptr) return absl::OkStatus();
  const TierStoreItem item{.block = {.hash = key}};
  return tier->Store({&item, 1});
}

// One request's walk along its block chain.
struct RequestWalk {
  int64_t hits = 0;             // leading blocks found cached (in the pool)
  int64_t prefix_tokens = 0;    // tokens of the leading hit blocks, in any tier
  int64_t infinite_hits = 0;    // leading blocks an infinite cache would have
  bool prefix = true;           // no miss yet
  bool infinite_prefix = true;  // no never-seen block yet
  bool pool_full = false;       // every block is pinned by this request
  bool capped = false;          // the prefix reached the last block of a whole-block prompt
  int tier = 0;                 // the tier the prefix walk reads: 0 host, 1 remote, 2 none
  BlockHash parent{};           // the previous block's hash
};

// Replays the requests of an expanded workload, in order, through one BlockPool.
class CacheReplayer {
 public:
  CacheReplayer(const ExpandedWorkload& w, BlockPool& pool, BeladyPolicy* belady,
                ChunkReuseTracker* tracker, ReplayTiers* tiers, CacheReplayResult& result)
      : w_(w), pool_(pool), belady_(belady), tracker_(tracker), tiers_(tiers), result_(result) {
    if (tiers_->host != nullptr && tiers_->host_store.rule == TierStoreRule::kWriteBack) {
      // As the engine's TierChain: evicted blocks are written back after the tier walk (or the
      // request), never in the middle of a tier lookup.
      pool_.AddEventListener([this](const KvEvent& e) {
        if (e.type == KvEventType::kBlockRemoved &&
            TierStoreGate::StoresWhenEvicted(tiers_->host_store, tiers_->gate.Hits(e.hash))) {
          written_back_.push_back(e.hash);
        }
      });
    }
  }

  // Looks up (and on a miss, inserts) every block of request r, counts its hits, then unpins
  // its blocks tail first.
  absl::Status ReplayRequest(size_t r) {
    table_.clear();
    RequestWalk walk;
    const int64_t begin = w_.request_begin[r];
    const int64_t end = w_.request_begin[r + 1];
    // Engine rules: a hit leaves the last prompt token to compute, so a prompt of whole blocks
    // cannot hit its last one.
    const bool last_capped =
        w_.engine_rules && end > begin && w_.input_tokens[r] == (end - begin) * w_.block_size;
    for (int64_t i = begin; i < end; ++i) {
      const int64_t tokens = i + 1 == end ? w_.last_block_tokens[r] : w_.block_size;
      if (last_capped && i + 1 == end && walk.prefix) {
        walk.prefix = false;
        walk.capped = true;
      }
      PAGEDKV_RETURN_IF_ERROR(VisitBlock(i, tokens, walk));
    }
    if (last_capped) walk.infinite_hits = std::min(walk.infinite_hits, end - begin - 1);
    PAGEDKV_RETURN_IF_ERROR(HoldPartialTail(r, end - begin, walk));
    PAGEDKV_RETURN_IF_ERROR(FlushWriteBack());
    PAGEDKV_RETURN_IF_ERROR(deferred_);
    result_.hit_blocks += walk.hits;
    const int64_t hit_tokens = walk.prefix_tokens;
    if (tracker_ != nullptr) {
      PAGEDKV_RETURN_IF_ERROR(CountChunks(w_, r, hit_tokens, *tracker_, result_));
    }
    result_.infinite_hit_blocks += walk.infinite_hits;
    result_.infinite_hit_tokens += PrefixTokens(w_, r, walk.infinite_hits);
    std::reverse(table_.begin(), table_.end());
    return pool_.Unpin(table_);
  }

  // Streaming: waits until request r is expanded, then lets the prefetch read up to the end of
  // the expanded requests.
  void WaitFor(const std::atomic<int64_t>& ready, size_t r) {
    int64_t n = ready.load(std::memory_order_acquire);
    while (n <= static_cast<int64_t>(r)) {
      std::this_thread::yield();
      n = ready.load(std::memory_order_acquire);
    }
    ready_end_ = w_.request_begin[static_cast<size_t>(n)];
  }

 private:
  absl::Status VisitBlock(int64_t i, int64_t tokens, RequestWalk& walk) {
    const BlockHash& key = w_.keys[i];
    // Keys are known ahead: start loading the index slots of a later block.
    if (i + kPrefetchDistance < ready_end_) pool_.PrefetchIndex(w_.keys[i + kPrefetchDistance]);
    walk.infinite_prefix = walk.infinite_prefix && w_.seen_before[i];
    walk.infinite_hits += walk.infinite_prefix;
    // A block no earlier request had cannot be cached: skip the lookup.
    BlockId block = w_.seen_before[i] ? pool_.FindCached(key) : kNullBlock;
    if (block != kNullBlock) {
      PAGEDKV_RETURN_IF_ERROR(pool_.Pin(block));
      if (!w_.priorities.empty()) {
        PAGEDKV_RETURN_IF_ERROR(pool_.RaisePriority(block, {.priority = w_.priorities[i]}));
      }
      if (walk.prefix) {
        ++walk.hits;
        walk.prefix_tokens += tokens;
        result_.hit_tokens += tokens;
        PAGEDKV_RETURN_IF_ERROR(NoteReuse(key));
      } else if (walk.capped) {
        ++result_.hit_capped_blocks;
      } else {
        ++result_.miss_after_miss;
      }
    } else if (walk.prefix && w_.seen_before[i] && LoadFromTiers(key, tokens, walk)) {
      PAGEDKV_ASSIGN_OR_RETURN(block, Place(i, walk));
    } else {
      PAGEDKV_ASSIGN_OR_RETURN(block, InsertMissed(i, walk));
      // Computed: write-through tiers get it even when the pool could not keep it.
      PAGEDKV_RETURN_IF_ERROR(StoreKey(tiers_->remote.get(), key));
      if (TierStoreGate::StoresWhenCached(tiers_->host_store)) {
        PAGEDKV_RETURN_IF_ERROR(StoreKey(tiers_->host.get(), key));
      }
    }
    if (block != kNullBlock) {
      if (belady_ != nullptr) belady_->SetNextUse(block, w_.next_use[i]);
      table_.push_back(block);
    }
    walk.parent = key;
    return absl::OkStatus();
  }

  // Engine rules: a request with a partial last block holds one more pool block, uncached, while
  // it runs (as vLLM allocates it, evicting when nothing is free, and frees it first); none when
  // every block is pinned already.
  absl::Status HoldPartialTail(size_t r, int64_t blocks, RequestWalk& walk) {
    if (!w_.engine_rules || w_.input_tokens[r] == blocks * w_.block_size || walk.pool_full) {
      return absl::OkStatus();
    }
    absl::StatusOr<BlockId> tail = pool_.Allocate();
    if (!tail.ok()) return absl::OkStatus();  // every block is pinned by this request
    table_.push_back(*tail);
    return absl::OkStatus();
  }

  // A pool prefix hit of `key`: counted for the host tier's threshold (a write-through tier with
  // threshold k stores the block at its k-th hit, as the engine does).
  absl::Status NoteReuse(const BlockHash& key) {
    if (tiers_->host == nullptr || tiers_->host_store.threshold <= 0) return absl::OkStatus();
    const int32_t hits = tiers_->gate.NoteHit(key);
    if (!TierStoreGate::StoresAtHit(tiers_->host_store, hits)) return absl::OkStatus();
    return StoreKey(tiers_->host.get(), key);
  }

  // Stores the blocks the pool evicted since the last call in the host tier (write-back).
  absl::Status FlushWriteBack() {
    std::vector<BlockHash> hashes = std::move(written_back_);
    written_back_.clear();
    for (const BlockHash& h : hashes) PAGEDKV_RETURN_IF_ERROR(StoreKey(tiers_->host.get(), h));
    return absl::OkStatus();
  }

  // A pool miss inside the prefix: true (counted) when the tier the walk is in has the block.
  // As in the engine's TierChain, the walk reads a run of blocks from the host tier, then a run
  // from the remote tier, and never goes back up. A remote hit is also stored in the host tier.
  bool LoadFromTiers(const BlockHash& key, int64_t tokens, RequestWalk& walk) {
    if (walk.tier == 0 && TierHas(tiers_->host.get(), key)) {
      ++result_.host_hit_blocks;
      result_.host_hit_tokens += tokens;
      walk.prefix_tokens += tokens;
      return true;
    }
    walk.tier = std::max(walk.tier, 1);  // past the host tier's run
    if (walk.tier == 1 && TierHas(tiers_->remote.get(), key)) {
      ++result_.remote_hit_blocks;
      result_.remote_hit_tokens += tokens;
      if (deferred_.ok()) deferred_ = StoreKey(tiers_->host.get(), key);
    } else {
      walk.tier = 2;
      return false;
    }
    walk.prefix_tokens += tokens;
    return true;
  }

  // Caches a tier hit in a free (or evicted) pool block; kNullBlock when every block is pinned.
  absl::StatusOr<BlockId> Place(int64_t i, RequestWalk& walk) {
    if (walk.pool_full) {
      ++result_.over_capacity_blocks;
      return kNullBlock;
    }
    absl::StatusOr<BlockId> allocated = pool_.Allocate();
    if (!allocated.ok()) {
      walk.pool_full = true;
      ++result_.over_capacity_blocks;
      return kNullBlock;
    }
    const CachePriority priority{.priority = w_.priorities.empty() ? kDefaultCachePriority
                                                                   : w_.priorities[i]};
    PAGEDKV_RETURN_IF_ERROR(pool_
                                .Insert({.block = *allocated,
                                         .hash = w_.keys[i],
                                         .parent_hash = walk.parent,
                                         .priority = priority})
                                .status());
    return *allocated;
  }

  // Counts a miss and caches the block in a free (or evicted) one; kNullBlock when every block
  // is pinned by this request.
  absl::StatusOr<BlockId> InsertMissed(int64_t i, RequestWalk& walk) {
    // The tier walk ends here: what it evicted is written back before the rest is computed.
    if (walk.prefix) PAGEDKV_RETURN_IF_ERROR(FlushWriteBack());
    walk.prefix = false;
    ++(w_.seen_before[i] ? result_.miss_evicted : result_.miss_never_seen);
    return Place(i, walk);
  }

  const ExpandedWorkload& w_;
  BlockPool& pool_;
  BeladyPolicy* const belady_;
  ChunkReuseTracker* const tracker_;
  ReplayTiers* const tiers_;
  CacheReplayResult& result_;
  absl::Status deferred_;                // the first error of a store made from a pool event
  std::vector<BlockId> table_;           // the current request's blocks
  std::vector<BlockHash> written_back_;  // evicted by the pool, to store in the host tier
  int64_t ready_end_ = w_.num_blocks();  // blocks whose keys may be read (streaming: fewer)
};

}  // namespace

double CacheReplayResult::block_hit_rate() const { return Ratio(hit_blocks, blocks); }
double CacheReplayResult::token_hit_rate() const { return Ratio(hit_tokens, total_tokens); }
double CacheReplayResult::host_block_hit_rate() const { return Ratio(host_hit_blocks, blocks); }
double CacheReplayResult::remote_block_hit_rate() const { return Ratio(remote_hit_blocks, blocks); }
double CacheReplayResult::tiered_block_hit_rate() const {
  return Ratio(hit_blocks + host_hit_blocks + remote_hit_blocks, blocks);
}
double CacheReplayResult::tiered_token_hit_rate() const {
  return Ratio(hit_tokens + host_hit_tokens + remote_hit_tokens, total_tokens);
}
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
  PAGEDKV_ASSIGN_OR_RETURN(ReplayPolicy policy, MakeReplayPolicy(w, options.policy));
  BeladyPolicy* const belady = policy.belady;
  // Priority spans need the pool's per-level policies; Belady (the clairvoyant bound, a policy
  // object) ignores them.
  const bool priorities = !w.priorities.empty() && belady == nullptr;
  std::unique_ptr<EvictionPolicy> plugged;
  if (!priorities) plugged = std::move(policy.policy);
  PAGEDKV_ASSIGN_OR_RETURN(
      std::unique_ptr<BlockPool> pool,
      BlockPool::Create({.num_blocks = static_cast<int32_t>(options.capacity_blocks),
                         .block_size = w.block_size,
                         .store_tokens = false,
                         .eviction_policy = options.policy,
                         .enable_priorities = priorities,
                         .max_high_priority_fraction = options.max_pinned_fraction},
                        std::move(plugged)));
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<ChunkReuseTracker> tracker,
                           MakeChunkTracker(w, options, pool.get(), belady));
  if (options.host_store_threshold < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--host-store-threshold must be >= 0 prefix hits (got %d)", options.host_store_threshold));
  }
  ReplayTiers tiers{
      .host_store = {.rule = options.host_store, .threshold = options.host_store_threshold}};
  PAGEDKV_ASSIGN_OR_RETURN(
      tiers.host, MakeSimulatedTier(options.host_capacity_blocks, options.tier_policy, "host"));
  PAGEDKV_ASSIGN_OR_RETURN(tiers.remote, MakeSimulatedTier(options.remote_capacity_blocks,
                                                           options.tier_policy, "remote"));
  CacheReplayResult res;
  res.host_capacity_blocks = std::max<int64_t>(0, options.host_capacity_blocks);
  res.remote_capacity_blocks = std::max<int64_t>(0, options.remote_capacity_blocks);
  res.host_store = tiers.host_store;
  res.shifted_counted = tracker != nullptr;
  res.policy = options.policy;
  res.capacity_blocks = options.capacity_blocks;
  res.requests = static_cast<int64_t>(w.num_requests());
  res.blocks = w.num_blocks();
  res.total_tokens = w.total_tokens;
  res.not_full_block_tokens = w.partial_tokens;
  CacheReplayer replayer(w, *pool, belady, tracker.get(), &tiers, res);
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = ThreadCpuSeconds();
  for (size_t r = 0; r < w.num_requests(); ++r) {
    if (options.requests_ready != nullptr) replayer.WaitFor(*options.requests_ready, r);
    PAGEDKV_RETURN_IF_ERROR(replayer.ReplayRequest(r));
    if (options.progress && (r & 1023) == 1023) options.progress(w.request_begin[r + 1]);
  }
  res.seconds = ThreadCpuSeconds() - cpu_start;
  res.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  res.evictions = pool->stats().evictions;
  if (options.progress) options.progress(w.num_blocks());
  return res;
}

}  // namespace pagedkv::replay
