// Copyright 2026 The pagedkv Authors.
//
// BlockPool: a fixed set of KV blocks with reference counts and a hash -> block index.
//
// Every block is in exactly one state:
//   free       - reference count 0, not in the index; Allocate hands these out first;
//   used       - reference count > 0 (cached or not);
//   evictable  - reference count 0 but still in the index: a later request can Pin it (a prefix
//                hit); when no free block is left, Allocate evicts one chosen by the policy and
//                drops it from the index.
// The pool works at the hash level only (no requests, no prompts): the KvCacheManager drives it
// for an engine; the replay tool drives it directly with trace hash ids. All operations are O(1)
// (amortised hash-map cost) except the LFU/FIFO policies (O(log n)) and ResetPrefixCache (O(n)).
// Not thread-safe. Holds no device memory: block ids index the engine's paged KV storage.
//
// Chain links (for exact verification): Insert may name the parent block that currently holds the
// parent hash; the pool records the parent's link identity (fresh each time a block enters the
// index). IsLinkedTo(child, parent) later tells whether the child was computed on top of exactly
// that cached content, so a verifier that compares tokens block by block and follows links can
// never accept a block whose earlier context differed.
//
// Duplicates: when two requests compute the same block at once, only one copy is indexed. The
// caller records the other with AddDuplicate; when the indexed copy is evicted while a duplicate
// is still used, the duplicate takes its place (same hash, parent, tokens and link identity, so
// every block linked to the evicted copy stays linked). A prefix stays reachable as long as any
// request holds its KV, as in vLLM, whose index keeps every copy.
//
// Example (the replay "cache mode" access pattern):
//   auto pool = pagedkv::BlockPool::Create({.num_blocks = 4096, .block_size = 16}).value();
//   std::vector<pagedkv::BlockId> table;
//   for (const pagedkv::BlockHash& h : request_hashes) {
//     pagedkv::BlockId b = pool->FindCached(h);
//     if (b != pagedkv::kNullBlock) {
//       PAGEDKV_RETURN_IF_ERROR(pool->Pin(b));                  // hit
//     } else {
//       PAGEDKV_ASSIGN_OR_RETURN(b, pool->Allocate());          // may evict
//       PAGEDKV_RETURN_IF_ERROR(pool->Insert({.block = b, .hash = h, .parent_hash =
//       parent}).status());
//     }
//     table.push_back(b);
//   }
//   std::reverse(table.begin(), table.end());                   // free tail first
//   PAGEDKV_RETURN_IF_ERROR(pool->Unpin(table));
#ifndef PAGEDKV_CACHE_BLOCK_POOL_H_
#define PAGEDKV_CACHE_BLOCK_POOL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/cache/block_index.h"
#include "pagedkv/cache/block_lifecycle_observer.h"
#include "pagedkv/cache/cache_priority.h"
#include "pagedkv/cache/cache_stats.h"
#include "pagedkv/cache/eviction_policy.h"
#include "pagedkv/events/kv_events.h"
#include "pagedkv/export.h"
#include "pagedkv/types.h"

namespace pagedkv {

struct PAGEDKV_EXPORT BlockPoolOptions {
  int32_t num_blocks = 0;               // total blocks in the pool; must be > 0
  int32_t block_size = 16;              // tokens per block; must be > 0
  bool store_tokens = true;             // keep cached blocks' token ids so hits can be verified
  std::string eviction_policy = "lru";  // used when Create gets no policy: "lru", "lfu", "fifo"
  // Eviction priorities (cache_priority.h): victims come from the lowest priority that has an
  // evictable block, ordered there by `eviction_policy` (one instance per level in use; a policy
  // passed to Create is refused). Off: BlockInsert::priority is ignored.
  bool enable_priorities = false;
  // (0, 1]: blocks above the default priority hold at most this fraction of the pool's blocks;
  // past it a block is cached at the default priority.
  double max_high_priority_fraction = 0.5;
  // Seconds for retention durations (never decreasing); null: std::chrono::steady_clock.
  std::function<double()> clock;
};

// What BlockPool::Insert caches, by name.
struct PAGEDKV_EXPORT BlockInsert {
  BlockId block = kNullBlock;            // the used, uncached block to index
  BlockHash hash;                        // its chain hash
  BlockHash parent_hash;                 // the previous block's hash (the root for a first block)
  std::span<const TokenId> tokens = {};  // empty, or exactly block_size tokens (stored when
                                         // store_tokens)
  BlockId parent_block = kNullBlock;     // when set, cached under parent_hash: the chain link
  BlockHash extra_digest;       // ExtraKeysDigest of the block's extra keys (for ExtraKeysMatch)
  CachePriority priority = {};  // with enable_priorities (validated then)
  BlockDomain domain = BlockDomain::kPrefix;  // kChunk for the chunk index's blocks (not announced)
};

class PriorityPolicy;

class PAGEDKV_EXPORT BlockPool {
 public:
  // Validates `options` (InvalidArgument for zero/negative sizes or an unknown policy name) and
  // builds a pool with every block free. `policy`, when given, replaces options.eviction_policy.
  // ResourceExhausted when the bookkeeping cannot be allocated (see EstimateBytes).
  static absl::StatusOr<std::unique_ptr<BlockPool>> Create(
      const BlockPoolOptions& options, std::unique_ptr<EvictionPolicy> policy = nullptr);

  // Host memory a pool with `options` allocates (its per-block state, index, free stack and
  // stored tokens, with a built-in eviction policy), for memory budgets before Create. An upper
  // estimate; 0 for options Create refuses.
  static int64_t EstimateBytes(const BlockPoolOptions& options);

  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;
  ~BlockPool();

  // ---- Lookup ---------------------------------------------------------------------------------

  // The block cached under `hash` (used or evictable), or kNullBlock. Changes nothing.
  BlockId FindCached(const BlockHash& hash) const { return index_.Find(hash, KeyOf{this}); }

  // A hint with no effect on state: starts loading the index slot `hash` would be looked up in,
  // so a FindCached / Insert of it a few blocks later does not wait on memory.
  void PrefetchIndex(const BlockHash& hash) const { index_.Prefetch(hash); }

  // True when `block` is cached and either has no stored tokens (store_tokens off, or inserted
  // without tokens) or its stored tokens equal `tokens`.
  bool TokensMatch(BlockId block, std::span<const TokenId> tokens) const;

  // True when `block` is cached with extra-keys digest `extra_digest` (see Insert).
  bool ExtraKeysMatch(BlockId block, const BlockHash& extra_digest) const;

  // All of the above in one pass, as KvCacheManager checks every hit: `block` is cached with
  // parent hash `parent_hash`, TokensMatch(block, tokens), ExtraKeysMatch(block, extra_digest) and
  // IsLinkedTo(block, prev).
  // Inline: it runs once per prefix-hit block.
  bool MatchesChain(BlockId block, const BlockHash& parent_hash, std::span<const TokenId> tokens,
                    const BlockHash& extra_digest, BlockId prev) const {
    if (!InRange(block)) return false;
    const BlockMeta& m = meta_[block];
    if (!m.cached) return false;
    if (m.has_extra ? chain_[block].extra_digest != extra_digest : extra_digest != BlockHash{}) {
      return false;
    }
    if (prev == kNullBlock) {
      if (m.parent_link != 0 || parent_hash_[block] != parent_hash) return false;
    } else if (!InRange(prev) || !meta_[prev].cached || m.parent_link != meta_[prev].link ||
               meta_[prev].hash != parent_hash) {
      // A block linked to `prev`'s current content was inserted with `prev`'s hash as its parent
      // hash, so comparing `prev`'s (hot) hash stands for comparing the stored one.
      return false;
    }
    if (!m.has_tokens) return true;
    if (tokens.size() != static_cast<size_t>(block_size_)) return false;
    const TokenId* stored = tokens_ + static_cast<size_t>(block) * block_size_;
    uint32_t diff = 0;  // branch-free compare; vectorises
    for (size_t k = 0; k < tokens.size(); ++k) {
      diff |= static_cast<uint32_t>(tokens[k]) ^ static_cast<uint32_t>(stored[k]);
    }
    return diff == 0;
  }

  // ---- Reference counting ---------------------------------------------------------------------

  // Adds a reference to `block`, which must be used or cached (a free block is
  // FailedPrecondition: Allocate it instead; out of range is InvalidArgument). Pinning an
  // evictable block takes it off the evictable set; pinning a cached block tells the policy.
  absl::Status Pin(BlockId block);

  // Drops one reference. At zero a cached block becomes evictable (queued in call order), an
  // uncached one becomes free. FailedPrecondition when the count is already zero (double free).
  absl::Status Unpin(BlockId block);

  // Unpin of each block in order (pass a chain tail first). All-or-nothing: when any block would
  // drop below zero (counting repeats) nothing changes.
  absl::Status Unpin(std::span<const BlockId> blocks);

  // ---- Allocation -----------------------------------------------------------------------------

  // A block with reference count 1, not cached: a free block if any, else an evicted one (removed
  // from the index, kBlockRemoved emitted). ResourceExhausted when every block is used.
  absl::StatusOr<BlockId> Allocate();

  // Appends `count` (>= 0) allocated blocks to `*out`. All-or-nothing: ResourceExhausted (nothing
  // allocated, nothing evicted) when fewer than `count` blocks are available, Internal (nothing
  // allocated) when the eviction policy picks a block that is not an evictable cached one. With
  // no event listener, every victim is checked before the first eviction, so nothing is evicted
  // either (the valid picks are offered back to the policy); with listeners (which may react to
  // an eviction, e.g. a ChunkIndex freeing a chunk's other blocks) blocks are allocated one by
  // one as by Allocate(), and evictions made before the bad pick stay made.
  absl::Status Allocate(int32_t count, std::vector<BlockId>* out);

  // ---- Index ----------------------------------------------------------------------------------

  // Records used, uncached `dup.block` as a duplicate of the block cached under `dup.hash` (the
  // holder): the caller computed the same KV in it. `dup.parent_hash`, `dup.tokens` and
  // `dup.extra_digest` describe it as for Insert; `dup.parent_block` is ignored (a promoted
  // duplicate keeps the holder's link). Nothing is indexed now. When the holder is evicted while
  // the duplicate is still used, the earliest recorded duplicate is indexed in its place
  // (kBlockRemoved then kBlockStored are emitted; stats().promoted_duplicates counts it) and the
  // holder's other duplicates become its duplicates. A duplicate whose reference count drops to
  // zero is freed and forgotten; Uncache of the holder (its content was wrong) and
  // ResetPrefixCache forget its duplicates. Insert of a duplicate block forgets it as one.
  // Returns true when recorded; false (nothing changes) when no block holds `dup.hash` or the
  // holder's parent hash, extra-keys digest or stored tokens differ from `dup`'s.
  // InvalidArgument / FailedPrecondition (nothing changes) for a block out of range, not used,
  // cached, already a duplicate, or a token count other than 0 or block_size.
  absl::StatusOr<bool> AddDuplicate(const BlockInsert& dup);

  // With enable_priorities: cached `block` moves up to `priority` when that is higher than its
  // own (equal: its retention is renewed when that extends it). InvalidArgument for a bad
  // priority, FailedPrecondition when `block` is not cached; nothing changes then. Without
  // priorities: validation only.
  absl::Status RaisePriority(BlockId block, const CachePriority& priority);
  // The priority cached `block` has now (default without priorities or when not cached). A
  // retention that ran out is applied when the next victim is picked.
  int32_t Priority(BlockId block) const;

  // Whether `block` is recorded as a duplicate.
  bool IsDuplicate(BlockId block) const { return InRange(block) && meta_[block].is_duplicate; }
  // Forgets `block` as a duplicate (its content is about to change, e.g. a rollback cut into it);
  // nothing happens when it is not one. InvalidArgument for a block out of range.
  absl::Status DropDuplicate(BlockId block);

  // Used, uncached blocks recorded as duplicates (see AddDuplicate).
  int32_t NumDuplicateBlocks() const { return static_cast<int32_t>(duplicate_holder_.size()); }

  // Caches used, uncached `insert.block` under `insert.hash` (see BlockInsert for the other
  // fields). Returns true when indexed (kBlockStored emitted, policy told), false when another
  // block already holds the hash (then nothing changes). InvalidArgument / FailedPrecondition for
  // a bad block, state, token count or parent; nothing changes then.
  absl::StatusOr<bool> Insert(const BlockInsert& insert);

  // Drops cached `block` from the index (kBlockRemoved emitted). A used block stays used; an
  // evictable one becomes free. FailedPrecondition when it is not cached.
  absl::Status Uncache(BlockId block);

  // Drops the whole index: evictable blocks become free, used blocks stay used but uncached.
  // Emits one kAllBlocksCleared. Reference counts are untouched.
  void ResetPrefixCache();

  // ---- Queries --------------------------------------------------------------------------------

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size() const { return block_size_; }
  bool store_tokens() const { return store_tokens_; }
  int32_t NumFreeBlocks() const { return static_cast<int32_t>(free_stack_.size()); }
  int32_t NumEvictableBlocks() const { return num_evictable_; }
  // Free + evictable: how many blocks Allocate can hand out now.
  int32_t NumAvailableBlocks() const { return NumFreeBlocks() + num_evictable_; }
  int32_t NumUsedBlocks() const { return num_blocks_ - NumAvailableBlocks(); }
  int32_t NumCachedBlocks() const { return static_cast<int32_t>(index_.size()); }

  // Reference count of `block`; -1 when out of range.
  int32_t RefCount(BlockId block) const;
  // Whether `block` is in the index.
  bool IsCached(BlockId block) const;
  // The hash / parent hash `block` is cached under; nullopt when not cached.
  std::optional<BlockHash> CachedHash(BlockId block) const;
  std::optional<BlockHash> ParentHash(BlockId block) const;
  // The stored tokens of cached `block` (empty when none are stored). Valid until it changes.
  std::span<const TokenId> CachedTokens(BlockId block) const;
  // How many times `block` has entered the index (0 for out of range).
  uint32_t Generation(BlockId block) const;
  // True when `child` is cached and was linked to the content `parent` holds now (inserted with
  // `parent`, or with the evicted block whose place `parent` took as a promoted duplicate, in
  // that block's current stay in the index) and `parent` is cached; for parent == kNullBlock:
  // `child` is cached and was inserted with no parent block.
  bool IsLinkedTo(BlockId child, BlockId parent) const;

  // Pool counters: stored_blocks, evictions, resets (the lookup counters stay zero here).
  const CacheStats& stats() const { return stats_; }
  void ResetStats() { stats_ = CacheStats{}; }
  const EvictionPolicy& policy() const { return *policy_; }

  // ---- Events ---------------------------------------------------------------------------------

  // Registers a listener (see kv_events.h); returns its id for RemoveEventListener.
  int AddEventListener(KvEventListener listener);
  // Unregisters; false when `id` is unknown.
  bool RemoveEventListener(int id);

  // ---- Debugging ------------------------------------------------------------------------------

  // O(num_blocks) consistency check of every internal structure (free + evictable + used = total,
  // index <-> block states, evictable count); Internal with a description when broken.
  absl::Status ValidateInvariants() const;

  // ---- Lifecycle hooks (metrics) ----------------------------------------------------------------

  // Calls `observer` (not owned; null = none) at store, hit, release and eviction from now on.
  void SetLifecycleObserver(BlockLifecycleObserver* observer) { lifecycle_ = observer; }

 private:
  // ValidateInvariants' steps: one block's state, reference count and index entry; the counts
  // against the free stack, the evictable count and the index; the free stack's entries; the
  // index's entries.
  absl::Status CheckBlock(BlockId block) const;
  absl::Status CheckCounts(int32_t num_free, int32_t num_evictable, int32_t num_cached) const;
  absl::Status CheckFreeStack() const;
  absl::Status CheckIndexEntries() const;
  enum class State : uint8_t { kFree, kUsed, kEvictable };

  // Hot per-block state (48 bytes), touched by pins, allocations and verification.
  struct BlockMeta {
    BlockHash hash;  // valid when cached
    // The identity of the cached content (unique per entry into the index; a promoted duplicate
    // inherits the evicted holder's), and the parent's at Insert (0: no parent block). Valid
    // when cached.
    uint64_t link = 0;
    uint64_t parent_link = 0;
    int32_t ref_count = 0;
    uint32_t generation = 0;  // times this block entered the index
    State state = State::kFree;
    bool cached = false;
    bool has_tokens = false;
    bool has_extra = false;       // extra-keys digest is non-zero (see chain_)
    bool has_duplicates = false;  // cached, with duplicates recorded (see AddDuplicate)
    bool is_duplicate = false;    // used and uncached, recorded as a duplicate
    bool chunk_domain = false;    // cached under BlockDomain::kChunk
    bool unreachable = false;     // cached, but its parent left the index (block_pool_chains.cc)
  };
  // Cold per-block state of cached blocks, read only when extra keys are in play.
  struct BlockChain {
    BlockHash extra_digest;
  };

  // The index's key accessor: the hash a cached block is indexed under.
  struct KeyOf {
    const BlockPool* pool;
    const BlockHash& operator()(BlockId block) const { return pool->meta_[block].hash; }
  };

  BlockPool(const BlockPoolOptions& options, std::unique_ptr<EvictionPolicy> policy);

  bool InRange(BlockId block) const { return block >= 0 && block < num_blocks_; }
  // Evicts the policy's victim; returns it (reference count 0, uncached, not on the free stack).
  absl::StatusOr<BlockId> EvictOne();
  // Allocate(count, out) with event listeners: one Allocate() at a time; on a bad victim the
  // blocks taken are handed back.
  absl::Status AllocateOneByOne(int32_t count, std::vector<BlockId>* out);
  // Picks `count` victims into victims_, each checked and marked free (still indexed). Internal
  // with nothing changed (picks offered back) when the policy picks a bad or repeated block.
  absl::Status PickVictims(int32_t count);
  // Reference count of used `block` reached zero: queue it as evictable or return it to free.
  void Release(BlockId block);
  void RemoveFromIndex(BlockId block);
  // Every reason Insert refuses `insert`, checked before it changes anything.
  absl::Status CheckInsertable(const BlockInsert& insert) const;
  // True only when CheckInsertable would pass (false: ask it). Without priorities; cheap enough
  // for Insert's hot path, where the checks with their messages stay out of line.
  bool SurelyInsertable(const BlockInsert& insert) const;
  // Victim `block`, already marked free, leaves the index; its earliest duplicate takes its place.
  void EvictFromIndex(BlockId block);
  // Duplicates (block_pool_duplicates.cc): index `holder`'s earliest duplicate in its place and
  // hand it the others; forget one duplicate / all of one holder's / all.
  // Returns the promoted block, or kNullBlock when none took the holder's place.
  BlockId PromoteDuplicate(BlockId holder, bool holder_had_tokens);
  void ForgetDuplicate(BlockId block);
  void ForgetDuplicatesOf(BlockId holder);
  void ForgetAllDuplicates();
  absl::Status CheckDuplicates() const;
  // Chain links (block_pool_chains.cc): link `child` under `parent`, unlink it, hand `from`'s
  // children to `to` (a promoted duplicate); mark everything below `block` unreachable, dropping
  // what is evictable; drop one unreachable block from the index to the free stack.
  void LinkChild(BlockId parent, BlockId child);
  void UnlinkFromParent(BlockId child);
  void MoveChildren(BlockId from, BlockId to);
  void OrphanChildren(BlockId block);
  void DropUnreachable(BlockId block, bool was_evictable);
  absl::Status CheckChains() const;
  // Prefetches what the next evictions will touch (see EvictionPolicy::PeekVictim).
  void PrefetchNextVictims() const;
  void Emit(const KvEvent& event);

  BlockLifecycleObserver* lifecycle_ = nullptr;  // SetLifecycleObserver; not owned
  int32_t num_blocks_;
  int32_t block_size_;
  bool store_tokens_;
  std::unique_ptr<EvictionPolicy> policy_;
  PriorityPolicy* priorities_ = nullptr;  // policy_ itself when priorities are enabled
  std::vector<BlockMeta> meta_;           // [num_blocks]
  std::vector<BlockChain> chain_;         // [num_blocks]
  std::vector<BlockHash> parent_hash_;    // [num_blocks], valid when cached
  // Chain links of cached blocks inserted with a parent block: [num_blocks] each, kNullBlock
  // when none (see block_pool_chains.cc).
  std::vector<BlockId> parent_of_;
  std::vector<BlockId> first_child_;
  std::vector<BlockId> next_sibling_;
  std::vector<BlockId> prev_sibling_;
  std::vector<TokenId> token_storage_;  // backing store of tokens_ (+ alignment slack)
  TokenId* tokens_ = nullptr;           // [num_blocks * block_size] if stored, 64-byte aligned
  std::vector<BlockId> free_stack_;     // free blocks, popped from the back
  std::vector<BlockId> victims_;        // scratch of Allocate(count, out): picked victims
  BlockIndex index_;                    // hash -> cached block; keys live in meta_[block].hash
  bool prefetch_victims_;               // num_blocks >= kVictimPrefetchMinBlocks
  int32_t num_evictable_ = 0;
  uint64_t next_link_ = 1;  // link identities handed out (0 means "no parent block")
  // Duplicates: holder -> its duplicates in the order recorded; duplicate -> holder.
  absl::flat_hash_map<BlockId, std::vector<BlockId>> duplicates_;
  absl::flat_hash_map<BlockId, BlockId> duplicate_holder_;
  CacheStats stats_;
  std::vector<std::pair<int, KvEventListener>> listeners_;
  int next_listener_id_ = 1;
};

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_BLOCK_POOL_H_
