// Copyright 2026 The pagedkv Authors.
//
// TierChain: the glue between a device pool and the KV tiers below it (host, then remote;
// pagedkv/tiers/kv_tier.h), used by the engine (engine/runtime) and by both replay modes (with
// tiers that hold no bytes; cache mode over its bare pool of workload keys): one walk for all.
// Block bytes move through a BlockValueIo (the engine's BlockKvCopier copies a block's K/V pages
// through the backend; a simulation moves nothing), so this file holds no device pointer. Three
// jobs, each called at a fixed point of a step:
//   Onboard(request)   - before scheduling, for a request waiting for admission (never admitted,
//                        or preempted: then its CacheRequest holds its generated tokens too):
//                        walks its chain past the device prefix hit through each tier in order,
//                        block by block; every tier hit is copied into a newly allocated device
//                        block that is indexed in the pool like a computed block (so the
//                        scheduler's GetComputedBlocks counts it as a prefix hit). The device hit
//                        and the loaded blocks stay pinned until ReleasePins(), so later Onboard
//                        calls cannot evict them. The engine releases them right before
//                        scheduling (then they are the most recently used cached blocks; pins the
//                        scheduler cannot see could starve its running requests); serve-mode
//                        replay right after. A block loaded from the remote tier is also stored
//                        in the host tier.
//   (pool events)      - write-through tiers queue every block the pool caches; write-back tiers
//                        copy a block out when the pool evicts it (its KV is intact then: the
//                        step that reuses the block has not run yet). Blocks cached in the
//                        current step are never written back before they are computed. Copies
//                        of shifted chunks (BlockDomain::kChunk) are keyed by content, not by a
//                        prefix, and never go to a tier.
//   FlushWriteThrough  - after the model ran: copies the queued blocks out to write-through tiers.
// Copies: a tier hit is loaded with the io's WriteAsync and every Onboard that loaded anything
// ends with one FenceWrites, so the forward pass (queued later) reads the loaded blocks and the
// blocks stay pinned (never read or reused) until then. FlushWriteThrough reads with ReadAsync
// (after the step's compute) and calls SynchronizeCopies before it hands any value to a tier.
// Stores read inside pool events (write-back, and threshold write-through in Onboard) use the
// synchronous Read: the evicted block is reused right after the event.
// Store threshold k > 0: a block goes to a tier only once it was a device prefix hit k times
// (counted in Onboard); write-through then stores it at that hit. The rule and the counts are a
// TierStoreGate (cache/tiers/tier_store_gate.h, shared with cache-mode replay's simulated tiers):
// counts are kept for at most kMaxTrackedHashes hashes (cleared when full, so a count can restart:
// a block then waits for k more hits).
//
// KV cache groups (a KvCacheManager with several): each group's blocks are stored and loaded
// under the group's hashes (GroupBlockHash), unlinked as the manager caches them. Onboard walks
// each full-attention group's prefix as above (the shortest sets the hit), then loads the blocks
// each sliding-window group needs before that hit (its window), skipping those on the device; the
// manager's GetComputedBlocks then decides the hit every group agrees on. TierHits counts the
// first full-attention group's blocks. The io's value is one block of any group.
//
// Not thread-safe. The io and the pool (its KvCacheManager) must outlive it; it owns the tiers.
//
// Example (engine_tiers.cc):
//   PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<TierChain> tiers,
//                            TierChain::Create(std::move(kv_tiers), &copier, manager));
//   PAGEDKV_ASSIGN_OR_RETURN(TierHits hits, tiers->Onboard(cache_request));
//   PAGEDKV_RETURN_IF_ERROR(scheduler->Schedule(&batch));
//   PAGEDKV_RETURN_IF_ERROR(tiers->ReleasePins());
//   ...  // run the model
//   PAGEDKV_RETURN_IF_ERROR(tiers->FlushWriteThrough());
#ifndef PAGEDKV_CACHE_TIERS_TIER_CHAIN_H_
#define PAGEDKV_CACHE_TIERS_TIER_CHAIN_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/tiers/tier_store_gate.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/cache/cache_request.h"
#include "pagedkv/cache/kv_cache_groups.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/export.h"
#include "pagedkv/tiers/kv_tier.h"

namespace pagedkv {

// Moves one block's value between a pool block and host memory. value_bytes() 0: nothing moves
// (a simulation); Read and Write then get empty spans.
class PAGEDKV_EXPORT BlockValueIo {
 public:
  virtual ~BlockValueIo() = default;
  virtual int64_t value_bytes() const = 0;
  // REQUIRES: out.size() == value_bytes(). Copies block `block`'s value into `out`.
  virtual absl::Status Read(BlockId block, std::span<std::byte> out) = 0;
  // REQUIRES: value.size() == value_bytes(). Copies `value` into block `block`.
  virtual absl::Status Write(BlockId block, std::span<const std::byte> value) = 0;

  // Asynchronous forms (the engine's copier puts them on the backend's copy stream; the defaults
  // are the synchronous calls above):
  //   WriteAsync - like Write; `value` may be released when it returns (the io stages it), the
  //                block holds it for compute queued after the next FenceWrites().
  //   FenceWrites - compute queued from now on reads every block written so far.
  //   ReadAsync  - like Read, after the compute queued so far; `out` is readable only after
  //                SynchronizeCopies() and must stay alive until then.
  //   SynchronizeCopies - waits for every queued copy (and lets the io reuse its staging).
  virtual absl::Status WriteAsync(BlockId block, std::span<const std::byte> value) {
    return Write(block, value);
  }
  virtual absl::Status FenceWrites() { return absl::OkStatus(); }
  virtual absl::Status ReadAsync(BlockId block, std::span<std::byte> out) {
    return Read(block, out);
  }
  virtual absl::Status SynchronizeCopies() { return absl::OkStatus(); }
};

// Blocks of one request loaded from each tier by Onboard.
struct PAGEDKV_EXPORT TierHits {
  int64_t device_blocks = 0;  // already in the device pool
  int64_t host_blocks = 0;    // loaded from the tier named "host"
  int64_t remote_blocks = 0;  // loaded from the tier named "remote"
  int64_t disk_blocks = 0;    // loaded from the tier named "disk"
};

class PAGEDKV_EXPORT TierChain {
 public:
  // The tier glue over `manager`'s pool: how the engine and serve-mode replay attach tiers to a
  // KvCacheManager (its front door; code outside cache/ never reaches the pool). The chain pins
  // only the blocks Onboard allocates or hits (until ReleasePins) and listens to the pool's
  // events. `tiers`: top (host) first. InvalidArgument for a null io or manager.
  // REQUIRES: io and manager outlive the result.
  static absl::StatusOr<std::unique_ptr<TierChain>> Create(
      std::vector<std::unique_ptr<KvTier>> tiers, BlockValueIo* io, KvCacheManager* manager);
  // What the pool's blocks carry. kTokenChains: their tokens, and with one group a link to
  // their parent block (a KvCacheManager's), which a device hit must match. kKeys: a key and its
  // parent hash, nothing more (cache-mode replay: workload keys chain by construction); a device
  // hit is checked against its parent hash, and tiers store and load no tokens. Blocks the chain
  // loads are inserted the same way.
  enum class PoolBlocks { kTokenChains, kKeys };
  // Over a bare pool (cache-mode replay, tests, and Create). `tiers`: top (host) first.
  // REQUIRES: io and pool outlive the result.
  TierChain(std::vector<std::unique_ptr<KvTier>> tiers, BlockValueIo* io, BlockPool* pool,
            PoolBlocks blocks = PoolBlocks::kTokenChains);
  ~TierChain();
  TierChain(const TierChain&) = delete;
  TierChain& operator=(const TierChain&) = delete;

  // See the banner. `request` is the request's CacheRequest as the scheduler builds it. Errors
  // only from the io's copies (the engine is then unusable) or the pool's bookkeeping.
  absl::StatusOr<TierHits> Onboard(const CacheRequest& request);
  // Unpins what Onboard pinned (tail first).
  absl::Status ReleasePins();
  // See the banner; also returns an error a pool-event copy met.
  absl::Status FlushWriteThrough();

  const std::vector<std::unique_ptr<KvTier>>& tiers() const { return tiers_; }
  int64_t value_bytes() const { return io_->value_bytes(); }

  static constexpr size_t kMaxTrackedHashes = TierStoreGate::kDefaultMaxTracked;

 private:
  // A write-back store read in a pool event, written to the tiers by FlushDeferred (outside
  // any tier call, so a tier is never re-entered).
  struct DeferredStore {
    BlockHash hash;
    int32_t hits = 0;
    std::vector<TokenId> tokens;
    std::vector<std::byte> value;
  };
  void OnPoolEvent(const KvEvent& event);
  void WriteBack(const KvEvent& event);
  absl::Status FlushDeferred();
  // Group g's blocks [0, limit) of `request`: the device prefix hit, then each tier's
  // continuation in order.
  absl::StatusOr<TierHits> OnboardPrefix(const CacheRequest& request, int32_t g, int64_t limit);
  // Several groups: every full-attention group's prefix, then each sliding-window group's window
  // before the shortest (OnboardWindow).
  absl::StatusOr<TierHits> OnboardGroups(const CacheRequest& request, int64_t limit);
  // Sliding-window group g's blocks [begin, end): device hits and tier loads in turn, until a
  // block is nowhere.
  absl::Status OnboardWindow(const CacheRequest& request, int32_t g, int64_t begin, int64_t end);
  // Group g's device hits from block `begin` up to `limit` (verified like KvCacheManager's),
  // counting each for the threshold; each is noted in unpinned_hits_ (Place pins them).
  absl::StatusOr<int64_t> DeviceHits(const CacheRequest& request, int32_t g, int64_t begin,
                                     int64_t limit);
  // Loads group g's blocks [*next, limit) from `tier`; advances *next past the blocks it took.
  absl::StatusOr<int64_t> LoadFrom(KvTier& tier, const CacheRequest& request, int32_t g,
                                   int64_t limit, int64_t* next);
  // Allocates a device block for group g's block `i` of `request`, writes `value` and indexes it.
  // False (nothing changed) when the pool has no room to spare or the hash is already cached.
  absl::StatusOr<bool> Place(const CacheRequest& request, int32_t g, int64_t i,
                             std::span<const std::byte> value);
  // Stores `block`'s KV in `tier` now (reading it from the device).
  absl::Status StoreFromDevice(KvTier& tier, BlockId block, const BlockHash& hash,
                               std::span<const TokenId> tokens);
  KvTier* Host() const;

  std::vector<std::unique_ptr<KvTier>> tiers_;
  BlockValueIo* io_;
  BlockPool* pool_;
  // Tokens of cached block `block` as its stored event gave them (empty when none did).
  std::span<const TokenId> TokensOf(BlockId block) const;
  // The tokens of `request`'s block i that tiers and the pool see (none over kKeys).
  std::span<const TokenId> BlockTokens(const CacheRequest& request, int64_t i) const;
  // Device hits and loaded blocks link to the previous block (kTokenChains, one group).
  bool Linked() const { return pool_blocks_ == PoolBlocks::kTokenChains && groups_.empty(); }

  KvCacheManager* manager_ = nullptr;     // set by Create; null over a bare pool (one group)
  std::vector<KvCacheGroupSpec> groups_;  // the manager's groups; empty: one full group
  PoolBlocks pool_blocks_;
  int listener_id_ = -1;
  bool placing_ = false;                // inside Place: the pool's stored events are ours
  bool unfenced_writes_ = false;        // WriteAsync issued since the last FenceWrites
  std::vector<BlockId> pins_;           // pinned by Onboard, in pin order
  BlockId last_placed_ = kNullBlock;    // the chain's last block during Onboard
  std::vector<BlockId> unpinned_hits_;  // device hits of this Onboard not pinned yet
  std::vector<DeferredStore> deferred_stores_;
  std::vector<std::pair<BlockId, BlockHash>> pending_;  // cached this step, not computed yet
  absl::flat_hash_set<BlockId> pending_ids_;
  // [num_blocks, block_size]: tokens of cached blocks; allocated by the first stored event that
  // carries tokens (a pool of bare keys, as in replay, never pays for it).
  std::vector<TokenId> block_tokens_;
  TierStoreGate gate_;              // device prefix hits per hash (threshold)
  std::vector<std::byte> scratch_;  // one value
  absl::Status deferred_;           // first error met in a pool event
};

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_TIERS_TIER_CHAIN_H_
