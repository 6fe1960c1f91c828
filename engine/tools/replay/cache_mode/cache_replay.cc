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
#include "cache/tiers/tier_chain.h"
#include "engine/tools/replay/cache_mode/belady_policy.h"
#include "engine/tools/replay/cache_mode/chunk_replay.h"
#include "engine/tools/replay/cache_mode/manager_replay.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/cache_request.h"
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

// The chunk reuse of marked chunks, or null when shifted hits are not counted.
absl::StatusOr<std::unique_ptr<ChunkReplay>> MakeChunkReplay(const ExpandedWorkload& w,
                                                             const CacheReplayOptions& options,
                                                             BlockPool* pool,
                                                             BeladyPolicy* belady) {
  if (!options.count_shifted || !w.has_chunks()) return nullptr;
  return ChunkReplay::Create(pool, belady);
}

// Hashes a replay block to its workload key. The requests the tier walk reads (KeyedRequest)
// carry, as each block's first token, the block's index in ExpandedWorkload::keys; the parent is
// not read (the keys chain already). Deterministic and thread-compatible, as BlockHasher asks.
class WorkloadKeyHasher final : public BlockHasher {
 public:
  explicit WorkloadKeyHasher(const ExpandedWorkload& w) : w_(w) {}
  BlockHash Hash(std::span<const std::byte> bytes) const override {
    // HashBlock's layout: the parent's 16 bytes, then the tokens, little-endian.
    if (bytes.size() < 20) return {};
    uint32_t index = 0;
    for (int k = 0; k < 4; ++k) index |= std::to_integer<uint32_t>(bytes[16 + k]) << (8 * k);
    return index < w_.keys.size() ? w_.keys[index] : BlockHash{};
  }

 private:
  const ExpandedWorkload& w_;
};

// Moves nothing: simulated tiers hold hashes, no bytes.
class NoBytesIo final : public BlockValueIo {
 public:
  int64_t value_bytes() const override { return 0; }
  absl::Status Read(BlockId, std::span<std::byte>) override { return absl::OkStatus(); }
  absl::Status Write(BlockId, std::span<const std::byte>) override { return absl::OkStatus(); }
};

// The simulated tiers of a replay: the engine's TierChain over the replay's pool (of bare
// workload keys), with HostTiers that hold no bytes.
struct ReplayTiers {
  NoBytesIo io;
  std::shared_ptr<const WorkloadKeyHasher> hasher;
  std::unique_ptr<TierChain> chain;
  std::vector<TokenId> tokens;  // the current request's tokens (see KeyedRequest)
};

// Keys are indexed by a token (a non-negative int32).
constexpr int64_t kMaxTieredKeys = int64_t{1} << 31;

// The replay's tiers over `pool`, or null when options configure none.
absl::StatusOr<std::unique_ptr<ReplayTiers>> MakeReplayTiers(const ExpandedWorkload& w,
                                                             const CacheReplayOptions& options,
                                                             BlockPool* pool) {
  if (options.host_capacity_blocks <= 0 && options.disk_capacity_blocks <= 0 &&
      options.remote_capacity_blocks <= 0) {
    return nullptr;
  }
  if (w.num_blocks() >= kMaxTieredKeys) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "tiers replay at most 2^31 - 1 blocks; the workload has %d (replay a shorter trace)",
        w.num_blocks()));
  }
  std::vector<std::unique_ptr<KvTier>> chain;
  const std::pair<int64_t, const char*> wanted[] = {{options.host_capacity_blocks, "host"},
                                                    {options.disk_capacity_blocks, "disk"},
                                                    {options.remote_capacity_blocks, "remote"}};
  for (const auto& [capacity, name] : wanted) {
    if (capacity <= 0) continue;
    HostTierOptions o{.capacity_blocks = capacity, .policy = options.tier_policy, .name = name};
    if (std::string(name) == "host") {
      o.store = {.rule = options.host_store, .threshold = options.host_store_threshold};
    }
    PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<HostTier> tier, HostTier::Create(std::move(o)));
    chain.push_back(std::move(tier));
  }
  auto tiers = std::make_unique<ReplayTiers>();
  tiers->hasher = std::make_shared<WorkloadKeyHasher>(w);
  tiers->chain =
      std::make_unique<TierChain>(std::move(chain), &tiers->io, pool, TierChain::PoolBlocks::kKeys);
  return tiers;
}

// One request's walk along its block chain.
struct RequestWalk {
  int64_t hits = 0;             // prefix hits the pool had (not loaded by the tier walk)
  int64_t prefix_tokens = 0;    // tokens of the leading hit blocks, in any tier
  int64_t infinite_hits = 0;    // leading blocks an infinite cache would have
  bool prefix = true;           // no miss yet
  bool infinite_prefix = true;  // no never-seen block yet
  bool pool_full = false;       // every block is pinned by this request
  bool capped = false;          // the prefix reached the last block of a whole-block prompt
  int64_t index = 0;            // the block's index in the request
  TierHits loaded;              // what the tier walk found before this walk (see CountPrefixHit)
  BlockHash parent = kEmptyRootHash;  // the previous block's hash (a KeyedRequest's root first)
};

// Replays the requests of an expanded workload, in order, through one BlockPool.
class CacheReplayer {
 public:
  CacheReplayer(const ExpandedWorkload& w, BlockPool& pool, BeladyPolicy* belady,
                ChunkReplay* chunks, ReplayTiers* tiers, CacheReplayResult& result)
      : w_(w), pool_(pool), belady_(belady), chunks_(chunks), tiers_(tiers), result_(result) {}

  // Looks up (and on a miss, inserts) every block of request r, counts its hits, then unpins
  // its blocks tail first.
  absl::Status ReplayRequest(size_t r) {
    table_.clear();
    RequestWalk walk;
    const int64_t begin = w_.request_begin[r];
    const int64_t end = w_.request_begin[r + 1];
    if (tiers_ != nullptr) {
      PAGEDKV_ASSIGN_OR_RETURN(walk.loaded, OnboardFromTiers(r));
    }
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
      ++walk.index;
    }
    if (last_capped) walk.infinite_hits = std::min(walk.infinite_hits, end - begin - 1);
    PAGEDKV_RETURN_IF_ERROR(HoldPartialTail(r, end - begin, walk));
    // The walk holds its own pins on what the tier walk loaded.
    if (tiers_ != nullptr) PAGEDKV_RETURN_IF_ERROR(tiers_->chain->ReleasePins());
    result_.hit_blocks += walk.hits;
    const int64_t hit_tokens = walk.prefix_tokens;
    if (chunks_ != nullptr) {
      const auto first = static_cast<size_t>(w_.chunk_begin[r]);
      const auto count = static_cast<size_t>(w_.chunk_begin[r + 1]) - first;
      PAGEDKV_RETURN_IF_ERROR(chunks_->CountRequest(std::span(w_.chunks).subspan(first, count),
                                                    hit_tokens, w_.block_size, result_));
    }
    result_.infinite_hit_blocks += walk.infinite_hits;
    result_.infinite_hit_tokens += PrefixTokens(w_, r, walk.infinite_hits);
    std::reverse(table_.begin(), table_.end());
    PAGEDKV_RETURN_IF_ERROR(pool_.Unpin(table_));
    // The blocks this request computed go to the write-through tiers, as after an engine step.
    return tiers_ != nullptr ? tiers_->chain->FlushWriteThrough() : absl::OkStatus();
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
  // Request r as the tier walk reads it: a CacheRequest whose block i hashes to the workload key
  // of the request's block i (WorkloadKeyHasher). Engine rules: the prompt's tokens, so the walk
  // leaves the last token to compute; otherwise (every key a block, a partial tail included)
  // whole blocks and one token more, so the walk may load every block.
  absl::StatusOr<CacheRequest> KeyedRequest(size_t r) {
    const int64_t begin = w_.request_begin[r];
    const int64_t blocks = w_.request_begin[r + 1] - begin;
    const int64_t bs = w_.block_size;
    const int64_t n = w_.engine_rules ? w_.input_tokens[r] : blocks * bs + 1;
    std::vector<TokenId>& tokens = tiers_->tokens;
    tokens.assign(static_cast<size_t>(std::max<int64_t>(n, 0)), 0);
    for (int64_t j = 0; j < blocks && j * bs < n; ++j) {
      tokens[static_cast<size_t>(j * bs)] = static_cast<TokenId>(begin + j);
    }
    return CacheRequest::Create(
        {.id = static_cast<RequestId>(r), .block_size = w_.block_size, .hasher = tiers_->hasher},
        tokens);
  }

  // The engine's tier walk for request r (TierChain::Onboard): loads the blocks past the pool's
  // prefix hit that the host, then the remote tier holds into pool blocks, pinned.
  absl::StatusOr<TierHits> OnboardFromTiers(size_t r) {
    PAGEDKV_ASSIGN_OR_RETURN(const CacheRequest request, KeyedRequest(r));
    return tiers_->chain->Onboard(request);
  }

  // Counts a prefix hit of `tokens` tokens at the walk's block: the tier walk loaded blocks
  // [device, device + host) from the host tier and the next `remote` from the remote tier;
  // every other prefix hit was in the pool already.
  void CountPrefixHit(int64_t tokens, RequestWalk& walk) {
    const TierHits& t = walk.loaded;
    const int64_t j = walk.index - t.device_blocks;
    walk.prefix_tokens += tokens;
    if (j >= 0 && j < t.host_blocks) {
      ++result_.host_hit_blocks;
      result_.host_hit_tokens += tokens;
    } else if (j >= t.host_blocks && j < t.host_blocks + t.disk_blocks) {
      ++result_.disk_hit_blocks;
      result_.disk_hit_tokens += tokens;
    } else if (j >= t.host_blocks + t.disk_blocks &&
               j < t.host_blocks + t.disk_blocks + t.remote_blocks) {
      ++result_.remote_hit_blocks;
      result_.remote_hit_tokens += tokens;
    } else {
      ++walk.hits;
      result_.hit_tokens += tokens;
    }
  }

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
        CountPrefixHit(tokens, walk);
      } else if (walk.capped) {
        ++result_.hit_capped_blocks;
      } else {
        ++result_.miss_after_miss;
      }
    } else {
      PAGEDKV_ASSIGN_OR_RETURN(block, InsertMissed(i, walk));
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

  // Caches block i in a free (or evicted) pool block; kNullBlock when every block is pinned.
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
    walk.prefix = false;
    ++(w_.seen_before[i] ? result_.miss_evicted : result_.miss_never_seen);
    return Place(i, walk);
  }

  const ExpandedWorkload& w_;
  BlockPool& pool_;
  BeladyPolicy* const belady_;
  ChunkReplay* const chunks_;  // null: shifted hits not counted
  ReplayTiers* const tiers_;   // null: no tiers
  CacheReplayResult& result_;
  std::vector<BlockId> table_;           // the current request's blocks
  int64_t ready_end_ = w_.num_blocks();  // blocks whose keys may be read (streaming: fewer)
};

}  // namespace

double CacheReplayResult::block_hit_rate() const { return Ratio(hit_blocks, blocks); }
double CacheReplayResult::token_hit_rate() const { return Ratio(hit_tokens, total_tokens); }
double CacheReplayResult::host_block_hit_rate() const { return Ratio(host_hit_blocks, blocks); }
double CacheReplayResult::remote_block_hit_rate() const { return Ratio(remote_hit_blocks, blocks); }
double CacheReplayResult::disk_block_hit_rate() const { return Ratio(disk_hit_blocks, blocks); }
double CacheReplayResult::tiered_block_hit_rate() const {
  return Ratio(hit_blocks + host_hit_blocks + disk_hit_blocks + remote_hit_blocks, blocks);
}
double CacheReplayResult::tiered_token_hit_rate() const {
  return Ratio(hit_tokens + host_hit_tokens + disk_hit_tokens + remote_hit_tokens, total_tokens);
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

namespace {

// The result fields every replay sets from its options and workload.
CacheReplayResult StartResult(const ExpandedWorkload& w, const CacheReplayOptions& options) {
  CacheReplayResult res;
  res.host_capacity_blocks = std::max<int64_t>(0, options.host_capacity_blocks);
  res.remote_capacity_blocks = std::max<int64_t>(0, options.remote_capacity_blocks);
  res.disk_capacity_blocks = std::max<int64_t>(0, options.disk_capacity_blocks);
  res.host_store = {.rule = options.host_store, .threshold = options.host_store_threshold};
  res.policy = options.policy;
  res.capacity_blocks = options.capacity_blocks;
  res.requests = static_cast<int64_t>(w.num_requests());
  res.blocks = w.num_blocks();
  res.total_tokens = w.total_tokens;
  res.not_full_block_tokens = w.partial_tokens;
  return res;
}

// The one replay loop: every request, in order, through `replayer` (a CacheReplayer over the bare
// pool or a ManagerReplayer over KV cache groups), waiting for streamed requests and reporting
// progress; its CPU and wall time go to `res`.
template <typename Replayer>
absl::Status ReplayAll(const ExpandedWorkload& w, const CacheReplayOptions& options,
                       Replayer& replayer, CacheReplayResult& res) {
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
  return absl::OkStatus();
}

// RunCacheReplay through a bare BlockPool.
absl::StatusOr<CacheReplayResult> RunPoolReplay(const ExpandedWorkload& w,
                                                const CacheReplayOptions& options) {
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
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<ChunkReplay> chunks,
                           MakeChunkReplay(w, options, pool.get(), belady));
  if (options.host_store_threshold < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--host-store-threshold must be >= 0 prefix hits (got %d)", options.host_store_threshold));
  }
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<ReplayTiers> tiers,
                           MakeReplayTiers(w, options, pool.get()));
  CacheReplayResult res = StartResult(w, options);
  res.shifted_counted = chunks != nullptr;
  CacheReplayer replayer(w, *pool, belady, chunks.get(), tiers.get(), res);
  PAGEDKV_RETURN_IF_ERROR(ReplayAll(w, options, replayer, res));
  res.evictions = pool->stats().evictions;
  if (options.progress) options.progress(w.num_blocks());
  return res;
}

// RunCacheReplay through a KvCacheManager over options.groups.
absl::StatusOr<CacheReplayResult> RunManagerReplay(const ExpandedWorkload& w,
                                                   const CacheReplayOptions& options) {
  CacheReplayResult res = StartResult(w, options);
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<ManagerReplayer> replayer,
                           ManagerReplayer::Create(w, options, res));
  PAGEDKV_RETURN_IF_ERROR(ReplayAll(w, options, *replayer, res));
  replayer->Finish();
  if (options.progress) options.progress(w.num_blocks());
  return res;
}

}  // namespace

absl::StatusOr<CacheReplayResult> RunCacheReplay(const ExpandedWorkload& w,
                                                 const CacheReplayOptions& options) {
  if (options.capacity_blocks <= 0 || options.capacity_blocks >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cache capacity must be between 1 and 2^31 - 1 blocks (got %d)", options.capacity_blocks));
  }
  return options.groups.empty() ? RunPoolReplay(w, options) : RunManagerReplay(w, options);
}

}  // namespace pagedkv::replay
