// Copyright 2026 The pagedkv Authors.
//
// ChunkIndex: cached chunks (a document, a tool description) that may be reused at ANOTHER
// position than the one they were computed at (shifted-position reuse).
//
// A chunk is keyed by a position-free content hash: XXH3-128 over its tokens, the cache salt, the
// adapter id, the RoPE configuration's fingerprint and the model fingerprint (ChunkKey). The index
// maps a key to a ChunkLocation: the pool blocks holding the chunk's KV, the slot offset of its
// first token in the first block (any alignment), and the position its first token was computed
// at (p0). A user re-rotates the keys from p0 to the new position p1 (k' = R(p1) R(p0)^T k) and
// copies the values; the index itself holds no KV and never touches device memory.
//
// The index shares the BlockPool with the prefix cache: one set of reference counts and one
// eviction order.
//   * Insert takes blocks the caller holds (reference count > 0). A block already cached in the
//     pool (e.g. a full prompt block the KvCacheManager cached under its prefix hash) is shared as
//     it is. An uncached block is cached under a chunk-domain hash, so once the caller unpins it,
//     it is evictable in the pool's order like any cached block. Pass uncached blocks only when
//     nobody else will cache them (e.g. blocks allocated to hold a copy of the chunk): a block
//     holds one hash at a time.
//   * The index holds no references. When the pool drops any block of a chunk from its index
//     (eviction, replacement, reset), the chunk is dropped at once (a pool event listener), so a
//     lookup never returns a location whose KV may have been overwritten.
//   * The blocks Insert cached under chunk-domain hashes (the chunk's own copy) can be reached only
//     through the chunk. When the chunk is dropped because the pool dropped one of its blocks,
//     its other copy blocks that nobody holds and no other chunk uses are uncached at once
//     (BlockPool::Uncache: they become free), so a partly evicted chunk never keeps dead blocks
//     cached. Shared prefix-cache blocks and held blocks are left as they are.
//   * Acquire pins a location's blocks (reference +1 each) for as long as they are read; Release
//     unpins them (tail first). A chunk evicted before Acquire is reported stale and never read.
//
// A drop listener (SetDropListener) learns each chunk the index forgets, so a holder of per-chunk
// data (ShiftedChunkReuse's float keys) frees it together with the chunk's KV.
//
// Not thread-safe. The pool must outlive the index.
//
// Example:
//   auto pool = pagedkv::BlockPool::Create({.num_blocks = 1024, .block_size = 16}).value();
//   auto index = pagedkv::ChunkIndex::Create(pool.get()).value();
//   pagedkv::BlockHash key = pagedkv::ChunkKey(doc_tokens, {.rope_fingerprint =
//   rope.Fingerprint()});
//   // ... compute the document's KV at positions 40.. into blocks {7, 8, 9} from slot offset 8:
//   const std::vector<pagedkv::BlockId> blocks = {7, 8, 9};
//   PAGEDKV_RETURN_IF_ERROR(index->Insert({.key = key, .tokens = doc_tokens, .position = 40,
//                                          .blocks = blocks, .start_offset = 8}).status());
//   // Later, a request holding the same document at position 300:
//   if (std::optional<pagedkv::ChunkLocation> hit = index->Find(key, doc_tokens)) {
//     PAGEDKV_RETURN_IF_ERROR(index->Acquire(*hit));   // pinned: cannot be evicted while read
//     ...  // re-rotate slot hit->SlotOf(i, 16) from hit->PositionOf(i) to 300 + i, copy V
//     PAGEDKV_RETURN_IF_ERROR(index->Release(*hit));
//   }
#ifndef PAGEDKV_CACHE_CHUNK_INDEX_H_
#define PAGEDKV_CACHE_CHUNK_INDEX_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/export.h"
#include "pagedkv/types.h"

namespace pagedkv {

// What a chunk key covers besides the chunk's tokens. Chunks match only when every part is equal.
struct PAGEDKV_EXPORT ChunkKeyParts {
  std::string_view cache_salt = {};         // chunks are shared only within one salt
  uint64_t adapter_id = 0;                  // LoRA adapter id; 0 = none
  std::string_view rope_fingerprint = {};   // RopeConfig::Fingerprint() the keys were rotated with
  std::string_view model_fingerprint = {};  // model id / shape
};

// The position-free content hash of a chunk. Byte layout hashed with XXH3-128 (seed 0):
//   "pagedkv-chunk-v1" ‖ for each of model fingerprint, rope fingerprint, salt: u64 length ‖ bytes
//   ‖ u64 adapter_id ‖ u64 number of tokens ‖ tokens (i32 each), integers little-endian.
PAGEDKV_EXPORT BlockHash ChunkKey(std::span<const TokenId> tokens, const ChunkKeyParts& parts);

// Where a cached chunk's KV lives. Token i of the chunk is at slot SlotOf(i) and was computed at
// position PositionOf(i).
struct PAGEDKV_EXPORT ChunkLocation {
  BlockHash key;                // the chunk's key
  std::vector<BlockId> blocks;  // pool blocks holding the chunk's tokens, in order
  int32_t start_offset = 0;     // slot offset of token 0 in blocks[0], in [0, block_size)
  int32_t num_tokens = 0;       // tokens in the chunk (> 0)
  int32_t position = 0;         // position token 0 was computed at (p0, >= 0)

  // Slot of chunk token i (0 <= i < num_tokens) for a pool of `block_size`.
  int64_t SlotOf(int32_t i, int32_t block_size) const {
    const int32_t t = start_offset + i;
    return static_cast<int64_t>(blocks[static_cast<size_t>(t / block_size)]) * block_size +
           t % block_size;
  }
  // Position chunk token i was computed at.
  int32_t PositionOf(int32_t i) const { return position + i; }
};

struct PAGEDKV_EXPORT ChunkIndexOptions {
  bool verify_tokens = true;  // keep each chunk's tokens and compare them on Find (collisions)
};

struct PAGEDKV_EXPORT ChunkIndexStats {
  int64_t lookups = 0;        // Find calls
  int64_t hits = 0;           // Find calls that returned a location
  int64_t hit_tokens = 0;     // tokens of those chunks
  int64_t inserts = 0;        // chunks registered
  int64_t invalidations = 0;  // chunks dropped because the pool dropped one of their blocks
  int64_t orphans_freed = 0;  // copy blocks freed because their chunk was dropped (see banner)
};

// What ChunkIndex::Insert registers, by name.
struct PAGEDKV_EXPORT ChunkInsert {
  BlockHash key;                         // ChunkKey of the tokens
  std::span<const TokenId> tokens = {};  // the chunk's tokens; not empty
  int32_t position = 0;                  // position token 0 was computed at; >= 0
  std::span<const BlockId> blocks = {};  // blocks holding the chunk's KV, in order
  int32_t start_offset = 0;              // slot of token 0 in blocks[0]; in [0, block_size)
};

// What ChunkIndex::InsertCopy registers: a chunk whose KV the caller writes into blocks of its
// own that the index takes from the pool.
struct PAGEDKV_EXPORT ChunkCopy {
  BlockHash key;                         // ChunkKey of the tokens
  std::span<const TokenId> tokens = {};  // the chunk's tokens; not empty
  int32_t position = 0;                  // position token 0 was computed at; >= 0
};

// Called with the key of each chunk the index forgets: the pool dropped one of its blocks
// (eviction, replacement, reset) or Erase was called. It must not call the index.
using ChunkDropListener = std::function<void(const BlockHash& key)>;

// How ChunkIndex::InsertCopy ended when it returned no error.
enum class ChunkCopyResult {
  kInserted,           // registered in blocks of its own, now evictable in the pool's order
  kAlreadyRegistered,  // a chunk with this key is registered; nothing changed
  kNoRoom,             // the pool could not spare the blocks; nothing changed
};

class PAGEDKV_EXPORT ChunkIndex {
 public:
  // An empty index over `pool` (not owned; must outlive the index). Registers a pool event
  // listener. InvalidArgument when pool is null.
  static absl::StatusOr<std::unique_ptr<ChunkIndex>> Create(BlockPool* pool,
                                                            const ChunkIndexOptions& options = {});

  ~ChunkIndex();
  ChunkIndex(const ChunkIndex&) = delete;
  ChunkIndex& operator=(const ChunkIndex&) = delete;

  // Registers chunk `insert.key` (computed with ChunkKey from `tokens`) whose token 0 was computed
  // at `position` and whose tokens lie in `blocks` from slot offset `start_offset` on. Every block
  // must be held by the caller (reference count > 0); uncached ones are cached under chunk-domain
  // hashes (see the banner). Returns true when registered, false when a valid chunk with this key
  // is already registered (nothing changes). InvalidArgument (nothing changes) for an empty chunk,
  // a negative position or offset, an offset >= block_size, or blocks that are out of range,
  // repeated, free, or too few / too many for start_offset + tokens.size().
  absl::StatusOr<bool> Insert(const ChunkInsert& insert);

  // Registers a copy of chunk `copy.key` in blocks of its own: takes ceil(tokens / block_size)
  // blocks from the pool (evicting through its policy), calls `fill(blocks)` to write the chunk's
  // KV into them (token i at slot blocks[i / block_size] * block_size + i % block_size), registers
  // them as Insert does (start_offset 0) and unpins them tail first, so they are evictable in the
  // pool's order. This is how a holder of an index from KvCacheManager::AttachChunkIndex caches
  // a chunk: it never touches the pool. Errors: InvalidArgument (nothing changes) for an empty
  // chunk or a negative position; an error `fill` returns, or Insert's, is returned after the
  // blocks are unpinned again (then free: nothing registered). `fill` must not call this index.
  absl::StatusOr<ChunkCopyResult> InsertCopy(
      const ChunkCopy& copy, absl::FunctionRef<absl::Status(std::span<const BlockId>)> fill);

  // The location of chunk `key` when it is registered and every block still holds its KV (and,
  // with verify_tokens, its tokens equal `tokens`); nullopt otherwise. Pins nothing: call Acquire
  // before reading the blocks. Counts a lookup.
  std::optional<ChunkLocation> Find(const BlockHash& key, std::span<const TokenId> tokens);

  // Pins every block of `location` so it cannot be evicted while it is read. FailedPrecondition
  // (nothing pinned) when the chunk is no longer registered with exactly these blocks (evicted or
  // replaced since Find): the caller must compute the tokens instead.
  absl::Status Acquire(const ChunkLocation& location);

  // Unpins the blocks pinned by Acquire (tail first, so the chunk's tail is evicted first).
  // FailedPrecondition (nothing changes) when a block is not pinned.
  absl::Status Release(const ChunkLocation& location);

  // Forgets chunk `key` (its blocks stay cached in the pool). NotFound when it is not registered.
  absl::Status Erase(const BlockHash& key);

  // Replaces the drop listener (see ChunkDropListener); an empty one: nobody is told.
  void SetDropListener(ChunkDropListener listener) { drop_listener_ = std::move(listener); }

  // Registered chunks.
  int32_t size() const { return static_cast<int32_t>(chunks_.size()); }
  bool Contains(const BlockHash& key) const { return chunks_.contains(key); }
  // Number of registered chunks whose location includes `block`.
  int32_t NumChunksUsing(BlockId block) const;

  const ChunkIndexStats& stats() const { return stats_; }
  const BlockPool& pool() const { return *pool_; }

  // Every registered chunk's blocks are cached in the pool under the generation recorded at
  // registration, and the block -> chunk map matches. Internal with a description when broken.
  absl::Status ValidateInvariants() const;

 private:
  struct Entry {
    ChunkLocation location;
    std::vector<uint32_t> generations;  // pool generation of each block at registration
    std::vector<uint8_t> own_copy;      // 1 where Insert cached the block (chunk-domain hash)
    std::vector<TokenId> tokens;        // when verify_tokens
  };

  ChunkIndex(BlockPool* pool, const ChunkIndexOptions& options);
  void OnPoolEvent(const KvEvent& event);
  // Removes `key` from chunks_ and block_chunks_ and tells the drop listener.
  void Drop(const BlockHash& key);
  // Insert's argument checks (nothing changes).
  absl::Status ValidateInsert(const ChunkInsert& insert) const;
  // Caches `blocks` not yet cached under chunk-domain hashes of `key`; returns 1 for each block it
  // cached. Rolls back on a (never expected) hash clash.
  absl::StatusOr<std::vector<uint8_t>> CacheChunkBlocks(const BlockHash& key,
                                                        std::span<const BlockId> blocks);
  // Uncaches `entry`'s own copy blocks (other than `removed`) that are still cached in their
  // registration generation, held by nobody and used by no other chunk. Call after Drop.
  void FreeOrphanedCopies(const Entry& entry, BlockId removed);
  // True when every block of `entry` is still cached under its recorded generation.
  bool StillValid(const Entry& entry) const;

  BlockPool* pool_;
  ChunkIndexOptions options_;
  int listener_id_ = 0;
  uint64_t next_serial_ = 1;  // makes every chunk-domain block hash unique
  absl::flat_hash_map<BlockHash, Entry, BlockHashMix> chunks_;
  absl::flat_hash_map<BlockId, std::vector<BlockHash>> block_chunks_;  // block -> chunk keys
  ChunkIndexStats stats_;
  ChunkDropListener drop_listener_;
};

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_CHUNK_INDEX_H_
