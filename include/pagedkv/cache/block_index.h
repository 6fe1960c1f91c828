// Copyright 2026 The pagedkv Authors.
//
// BlockIndex: the BlockPool's hash -> block index. Public only because BlockPool holds it by
// value; engines use BlockPool::FindCached, not this class.
//
// An open-addressing table with linear probing and backward-shift deletion (no tombstones), sized
// once for the pool's block count at a load factor of at most 1/2, so it never rehashes. A slot is
// 8 bytes: the block id and a 32-bit tag of the key's mixed hash. The full 128-bit key is NOT
// stored here: it lives in the pool's per-block metadata, and every operation that must compare
// keys takes a `key_of(block)` callable returning the key block is cached under. A tag match is
// confirmed with one key_of call; a false tag match costs one extra read, never a wrong answer.
//
// Compared with absl::flat_hash_map<BlockHash, BlockId> (24-byte slots, tombstones and their
// periodic clean-up), the table is 3x smaller and erase never leaves work behind, which is what
// the replay's miss-heavy streams (one erase and one insert per missed block) spend their time on.
//
// Contracts: at most `max_entries` entries (the pool has that many blocks, each cached at most
// once); keys are unique (Insert refuses a present key); block ids are >= 0.
//
// Example (what BlockPool does):
//   BlockIndex index(num_blocks);
//   auto key_of = [&](BlockId b) -> const BlockHash& { return meta[b].hash; };
//   if (index.Insert(hash, block, key_of)) { /* cached */ }
//   BlockId hit = index.Find(hash, key_of);   // kNullBlock when absent
//   index.Erase(hash, block);                 // block must be indexed under hash
#ifndef PAGEDKV_CACHE_BLOCK_INDEX_H_
#define PAGEDKV_CACHE_BLOCK_INDEX_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "pagedkv/cache/block_hash.h"
#include "pagedkv/export.h"
#include "pagedkv/types.h"

namespace pagedkv {

class PAGEDKV_EXPORT BlockIndex {
 public:
  // A table for up to `max_entries` (>= 0) entries.
  explicit BlockIndex(int64_t max_entries)
      : slots_(SlotCount(max_entries), Slot{0, kNullBlock}), mask_(slots_.size() - 1) {}

  int64_t size() const { return size_; }
  int64_t num_slots() const { return static_cast<int64_t>(slots_.size()); }

  // The block indexed under `key`, or kNullBlock.
  template <typename KeyOf>
  BlockId Find(const BlockHash& key, const KeyOf& key_of) const {
    const uint32_t tag = TagOf(key);
    for (uint64_t i = tag & mask_;; i = (i + 1) & mask_) {
      const Slot s = slots_[i];
      if (s.block == kNullBlock) return kNullBlock;
      if (s.tag == tag && key_of(s.block) == key) return s.block;
    }
  }

  // Indexes `block` under `key`; false (and no change) when `key` is already present.
  // REQUIRES: block >= 0; size() < max_entries.
  template <typename KeyOf>
  bool Insert(const BlockHash& key, BlockId block, const KeyOf& key_of) {
    return TryInsert(key, block, key_of).second;
  }

  // Like Insert, and also says which block holds `key` afterwards: {block, true} when inserted,
  // {the present block, false} when `key` was already there (then nothing changes).
  template <typename KeyOf>
  std::pair<BlockId, bool> TryInsert(const BlockHash& key, BlockId block, const KeyOf& key_of) {
    const uint32_t tag = TagOf(key);
    for (uint64_t i = tag & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.block == kNullBlock) {
        s = Slot{tag, block};
        ++size_;
        return {block, true};
      }
      if (s.tag == tag && key_of(s.block) == key) return {s.block, false};
    }
  }

  // Removes the entry of `block`. REQUIRES: `key` is the key `block` was inserted under (the pool
  // passes the hash it keeps for the block). False, with no change, when `block` is not indexed.
  bool Erase(const BlockHash& key, BlockId block) {
    const uint32_t tag = TagOf(key);
    uint64_t hole = tag & mask_;
    for (;; hole = (hole + 1) & mask_) {
      if (slots_[hole].block == kNullBlock) return false;
      if (slots_[hole].block == block && slots_[hole].tag == tag) break;
    }
    // Backward-shift deletion: pull later entries of the probe run into the hole when their home
    // slot does not lie cyclically in (hole, j], so every entry stays reachable from its home.
    for (uint64_t j = (hole + 1) & mask_; slots_[j].block != kNullBlock; j = (j + 1) & mask_) {
      const uint64_t home = slots_[j].tag & mask_;
      const bool home_in_gap = ((j - home) & mask_) < ((j - hole) & mask_);
      if (home_in_gap) continue;
      slots_[hole] = slots_[j];
      hole = j;
    }
    slots_[hole] = Slot{0, kNullBlock};
    --size_;
    return true;
  }

  void Clear() {
    for (Slot& s : slots_) s = Slot{0, kNullBlock};
    size_ = 0;
  }

  // Hints the CPU to load the home slot of `key`: a caller that knows its next keys (a replay, a
  // long prompt's block hashes) calls this a few keys ahead so Find / Insert do not stall on DRAM.
  void Prefetch(const BlockHash& key) const { __builtin_prefetch(&slots_[TagOf(key) & mask_]); }

  // Calls fn(block) for every indexed block, in table order.
  template <typename Fn>
  void ForEach(const Fn& fn) const {
    for (const Slot& s : slots_) {
      if (s.block != kNullBlock) fn(s.block);
    }
  }

 private:
  struct Slot {
    uint32_t tag;   // high 32 bits of BlockHashMix(key); its low bits pick the home slot
    BlockId block;  // kNullBlock when empty
  };
  static_assert(sizeof(Slot) == 8);

  static uint32_t TagOf(const BlockHash& key) {
    return static_cast<uint32_t>(BlockHashMix{}(key) >> 32);
  }
  // A power of two >= 2 * max_entries (load <= 1/2), at least 16, at most 2^32 so a tag's bits
  // cover every slot.
  static size_t SlotCount(int64_t max_entries) {
    const uint64_t wanted = std::max<uint64_t>(16, 2 * static_cast<uint64_t>(max_entries));
    return static_cast<size_t>(std::min<uint64_t>(std::bit_ceil(wanted), uint64_t{1} << 32));
  }

  std::vector<Slot> slots_;
  uint64_t mask_;
  int64_t size_ = 0;
};

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_BLOCK_INDEX_H_
