// Copyright 2026 The pagedkv Authors.
//
// Eviction policies: which cached, unreferenced block a BlockPool evicts when it runs out of free
// blocks.
//
// A BlockPool owns one policy and tells it about every cached block's life:
//   OnInsert  - the block entered the hash index (it is in use: not a candidate); the pool calls
//               it through OnInsertInChain, which also passes the chain link (parent);
//   OnAccess  - a cached block was pinned (a prefix hit or a share); if it was a candidate it no
//               longer is one;
//   OnRelease - a cached block's reference count dropped to zero: it is now a candidate. Called in
//               the order the caller unpinned blocks (requests free tail first, so under LRU a
//               chain's tail is evicted before its parents);
//   OnRemove  - the block left the index other than through PickVictim (it may be a candidate);
//   PickVictim- choose one candidate, forget it, return it (the pool then drops it from the index);
//   Clear     - forget everything (the pool dropped its whole index).
// Block ids are in [0, num_blocks) as given to Init; the hash identifies the block's content
// (outside code, e.g. a Belady policy with future knowledge, keys on it).
//
// Built in: "lru" (default; O(1), intrusive list over flat arrays), "lfu" (fewest accesses since
// insertion first, ties least recently released first; O(log n)), "fifo" (earliest inserted
// first; O(log n)), "arc" (Adaptive Replacement Cache, ghost lists adapt recency vs frequency;
// O(1)), "s3fifo" (S3-FIFO: a small queue filters blocks used once, a ghost queue remembers
// them; amortised O(1)), "wtinylfu" (W-TinyLFU: a window LRU and a main SLRU, admission by a
// count-min frequency sketch; O(1)), "chain" (pagedkv's own: chain ends that were never hit nor
// extended go first, then S3-FIFO; uses OnInsertInChain). How each departs from its paper, and
// where "chain" helps and where it loses: see its cache/policies/*_policy.cc and docs/replay.md.
//
// Example (plugging a custom policy):
//   class MyPolicy : public pagedkv::EvictionPolicy { ... };
//   auto pool = pagedkv::BlockPool::Create({.num_blocks = 1024}, std::make_unique<MyPolicy>());
//   auto lfu = pagedkv::MakeEvictionPolicy("lfu");  // StatusOr<std::unique_ptr<EvictionPolicy>>
#ifndef PAGEDKV_CACHE_EVICTION_POLICY_H_
#define PAGEDKV_CACHE_EVICTION_POLICY_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/export.h"
#include "pagedkv/types.h"

namespace pagedkv {

// The pool calls these from a single thread; implementations need no locking. The pool never calls
// OnRelease for a block that is already a candidate, nor OnAccess/OnRemove/OnRelease for a block
// that is not in the index.
// Pools with at least this many blocks (metadata beyond a core's L2 cache) prefetch what upcoming
// evictions will touch, through EvictionPolicy::PeekVictim; smaller ones find it all in cache, so
// neither the pool nor a policy should spend instructions looking ahead for them.
inline constexpr int32_t kVictimPrefetchMinBlocks = 32768;

class PAGEDKV_EXPORT EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;

  // A short lowercase name, e.g. "lru".
  virtual std::string_view Name() const = 0;

  // Called once before any other call; later calls use block ids in [0, num_blocks).
  // May be called again (by a new pool); then the policy starts empty.
  virtual void Init(int32_t num_blocks) = 0;

  // `block` entered the hash index under `hash`; it is referenced (not a candidate).
  virtual void OnInsert(BlockId block, const BlockHash& hash) = 0;

  // What the pool calls when a block enters the index: OnInsert plus the chain link.
  // `parent_hash` is the hash of the block before it in its chain (a chain's first block: the
  // root hash, derived from the cache salt, so it names the tenant); `parent_block` is the cached
  // parent when the caller linked it, kNullBlock otherwise (hash-only callers never link, so a
  // policy that needs the parent should find it by `parent_hash`). The default forwards to
  // OnInsert: policies that ignore chains implement only that.
  virtual void OnInsertInChain(BlockId block, const BlockHash& hash,
                               [[maybe_unused]] const BlockHash& parent_hash,
                               [[maybe_unused]] BlockId parent_block) {
    OnInsert(block, hash);
  }

  // Cached `block` was pinned; if it was a candidate it is not one any more.
  virtual void OnAccess(BlockId block, const BlockHash& hash) = 0;

  // Cached `block`'s reference count dropped to zero: it becomes a candidate.
  virtual void OnRelease(BlockId block, const BlockHash& hash) = 0;

  // Cached `block` left the index without being picked (e.g. replaced after a failed
  // verification); forget it whether or not it was a candidate.
  virtual void OnRemove(BlockId block, const BlockHash& hash) = 0;

  // Chooses a candidate to evict, forgets it and returns it.
  // REQUIRES: at least one candidate (the pool checks its own count first).
  virtual BlockId PickVictim() = 0;

  // Forgets every block (the pool emptied its index).
  virtual void Clear() = 0;

  // A hint for prefetching, with no effect on state: the block that the (ahead + 1)-th
  // PickVictim from now would return if nothing else changed, when the policy can tell in O(1)
  // without a cache miss of its own; kNullBlock otherwise (the default). The pool only prefetches
  // memory with it; any answer, even a wrong one, keeps every result correct.
  virtual BlockId PeekVictim([[maybe_unused]] int32_t ahead) const { return kNullBlock; }
};

// Least recently released first. O(1) per call.
PAGEDKV_EXPORT std::unique_ptr<EvictionPolicy> MakeLruPolicy();
// Fewest accesses (pins while cached) since insertion first; ties: least recently released.
PAGEDKV_EXPORT std::unique_ptr<EvictionPolicy> MakeLfuPolicy();
// Earliest inserted first, regardless of accesses.
PAGEDKV_EXPORT std::unique_ptr<EvictionPolicy> MakeFifoPolicy();

// Adaptive Replacement Cache (Megiddo and Modha, FAST 2003) over candidates; O(1).
PAGEDKV_EXPORT std::unique_ptr<EvictionPolicy> MakeArcPolicy();
// S3-FIFO (Yang et al., SOSP 2023): small, main and ghost FIFO queues; amortised O(1).
PAGEDKV_EXPORT std::unique_ptr<EvictionPolicy> MakeS3FifoPolicy();
// W-TinyLFU (Einziger et al., ACM TOS 2017): window LRU, main SLRU, sketch admission; O(1).
PAGEDKV_EXPORT std::unique_ptr<EvictionPolicy> MakeWTinyLfuPolicy();
// pagedkv's own: dead ends of chains (never hit, never a parent) first, then S3-FIFO; O(1).
PAGEDKV_EXPORT std::unique_ptr<EvictionPolicy> MakeChainPolicy();

// A name of EvictionPolicyNames() (case-sensitive); InvalidArgument naming the choices otherwise.
PAGEDKV_EXPORT absl::StatusOr<std::unique_ptr<EvictionPolicy>> MakeEvictionPolicy(
    std::string_view name);

// The names MakeEvictionPolicy accepts.
PAGEDKV_EXPORT std::vector<std::string_view> EvictionPolicyNames();

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_EVICTION_POLICY_H_
