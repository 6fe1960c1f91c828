// Copyright 2026 The pagedkv Authors.
//
// "chain" eviction: dead ends first, then S3-FIFO. It uses what a prefix cache knows and a page
// cache does not: blocks form chains, and a block can only be hit through its whole prefix.
// A request's last block is almost never reused: the next turn of a conversation extends the
// prompt, so its last (partial) block comes back with other tokens and another hash (on the
// Mooncake conversation trace, 0.8% of requests' last blocks are used again, against 25-34% of
// their other new blocks; see docs/replay.md). A pool sees that shape without knowing requests: a
// block that never had a child in the index and was never hit is a **dead end**.
//   - Dead-end candidates (released, never hit, never a parent) are evicted first, least recently
//     released first. When one is evicted and its parent is left with no cached child, was never
//     hit and is a candidate, the parent becomes a dead end too, up to kMaxDeadLevel (3) levels
//     above the first (a trace's last 512-token block is many 16-token blocks).
//   - Every other block is managed by an inner S3-FIFO (cache/policies/s3fifo_policy.cc), which
//   filters
//     blocks used once and remembers evicted hashes. A dead end that is hit, or that gains a
//     child, goes back to the inner policy.
// The parent of a block comes from OnInsertInChain: the linked parent block, else the cached
// block of the parent hash (the policy keeps a hash -> block map, since hash-only callers do not
// link). Costs: O(1) per call plus a hash-map insert/erase per cached block.
// Where it loses: where a request's last cached block is what the next turn extends (a cache of
// full blocks only, with the answer cached too: the built-in "conversation" workload), dead ends
// are not dead, and LRU does better (docs/replay.md has the numbers). The Mooncake traces hash a
// prompt's partial last block as a block of its own, which is where dead ends come from there.
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "cache/policies/block_lists.h"
#include "pagedkv/cache/eviction_policy.h"

namespace pagedkv {
namespace {

class ChainPolicy final : public EvictionPolicy {
 public:
  explicit ChainPolicy(std::unique_ptr<EvictionPolicy> inner) : inner_(std::move(inner)) {}

  std::string_view Name() const override { return "chain"; }

  void Init(int32_t num_blocks) override {
    inner_->Init(num_blocks);
    dead_.Init(num_blocks, /*num_lists=*/1);
    meta_.assign(num_blocks, Meta{});
    block_of_.clear();
  }

  void OnInsert(BlockId block, const BlockHash& hash) override {
    OnInsertInChain(block, hash, BlockHash{}, kNullBlock);
  }

  void OnInsertInChain(BlockId block, const BlockHash& hash, const BlockHash& parent_hash,
                       BlockId parent_block) override;

  void OnAccess(BlockId block, const BlockHash& hash) override {
    Meta& m = meta_[block];
    m.hit = true;
    m.pinned = true;
    if (!m.in_inner) {
      dead_.Remove(block);
      Revive(block);
    }
    inner_->OnAccess(block, hash);
  }

  void OnRelease(BlockId block, const BlockHash& hash) override {
    Meta& m = meta_[block];
    m.pinned = false;
    if (!m.hit && !m.had_child) {
      MakeDead(block, /*level=*/0);
      return;
    }
    inner_->OnRelease(block, hash);
  }

  void OnRemove(BlockId block, const BlockHash&) override { Forget(block); }

  BlockId PickVictim() override {
    BlockId victim = dead_.Front(0);
    if (victim == kNullBlock) {
      victim = inner_->PickVictim();
      meta_[victim].in_inner = false;  // the inner policy forgot it
      Forget(victim);
      return victim;
    }
    const BlockId parent = Forget(victim);
    if (parent != kNullBlock) MaybeSpreadDeath(parent, meta_[victim].level + 1);
    return victim;
  }

  void Clear() override { Init(static_cast<int32_t>(meta_.size())); }

 private:
  static constexpr int kMaxDeadLevel = 3;  // chosen on the sweep in docs/replay.md (0-31 tried)
  struct Meta {
    BlockHash hash;
    BlockId parent = kNullBlock;  // cached parent when inserted (valid while its generation holds)
    uint32_t parent_generation = 0;
    uint32_t generation = 0;  // bumped on every insert of this block id
    int32_t cached_children = 0;
    uint8_t level = 0;  // dead-end level (0: the chain's end)
    bool cached = false;
    bool pinned = false;
    bool hit = false;        // pinned again since it entered the index
    bool had_child = false;  // some block was inserted with this one as parent
    bool in_inner = false;   // the inner policy knows it (false: a dead end, or not cached)
  };

  // Moves released `block` to the dead-end list; the inner policy forgets it.
  void MakeDead(BlockId block, uint8_t level) {
    Meta& m = meta_[block];
    if (m.in_inner) inner_->OnRemove(block, m.hash);
    m.in_inner = false;
    m.level = level;
    dead_.PushBack(0, block);
  }

  // A dead end that is pinned, or gains a child, rejoins the inner policy (as a new entry).
  void Revive(BlockId block) {
    Meta& m = meta_[block];
    m.in_inner = true;
    inner_->OnInsert(block, m.hash);
    if (!m.pinned) inner_->OnRelease(block, m.hash);
  }

  // The parent of a dead block that was just evicted: dead too if nothing below it is cached, it
  // was never hit, it is a candidate, and the chain of dead ends is not too long.
  void MaybeSpreadDeath(BlockId parent, int level) {
    const Meta& p = meta_[parent];
    if (level > kMaxDeadLevel || p.cached_children > 0 || p.hit || p.pinned || !p.in_inner) return;
    MakeDead(parent, static_cast<uint8_t>(level));
  }

  // Drops every trace of cached `block` (the inner policy's too, when it still knows it);
  // returns its still-linked parent (kNullBlock when none).
  BlockId Forget(BlockId block);

  BlockId LinkedParent(const Meta& m) const {
    if (m.parent == kNullBlock) return kNullBlock;
    const Meta& p = meta_[m.parent];
    return p.cached && p.generation == m.parent_generation ? m.parent : kNullBlock;
  }

  std::unique_ptr<EvictionPolicy> inner_;
  internal::BlockLists dead_;  // list 0: dead-end candidates, least recently released first
  std::vector<Meta> meta_;     // [num_blocks]
  absl::flat_hash_map<BlockHash, BlockId> block_of_;  // cached hash -> block
};

void ChainPolicy::OnInsertInChain(BlockId block, const BlockHash& hash,
                                  const BlockHash& parent_hash, BlockId parent_block) {
  Meta& m = meta_[block];
  const uint32_t generation = m.generation + 1;
  m = Meta{
      .hash = hash, .generation = generation, .cached = true, .pinned = true, .in_inner = true};
  block_of_[hash] = block;
  if (parent_block == kNullBlock) {
    auto it = block_of_.find(parent_hash);
    if (it != block_of_.end() && it->second != block) parent_block = it->second;
  }
  inner_->OnInsert(block, hash);
  if (parent_block == kNullBlock) return;
  Meta& p = meta_[parent_block];
  m.parent = parent_block;
  m.parent_generation = p.generation;
  ++p.cached_children;
  p.had_child = true;
  if (!p.in_inner && !p.pinned) {
    dead_.Remove(parent_block);
    Revive(parent_block);
  }
}

BlockId ChainPolicy::Forget(BlockId block) {
  Meta& m = meta_[block];
  if (m.in_inner) inner_->OnRemove(block, m.hash);
  dead_.Remove(block);
  auto it = block_of_.find(m.hash);
  if (it != block_of_.end() && it->second == block) block_of_.erase(it);
  const BlockId parent = LinkedParent(m);
  if (parent != kNullBlock) --meta_[parent].cached_children;
  m.cached = false;
  m.in_inner = false;
  return parent;
}

}  // namespace

std::unique_ptr<EvictionPolicy> MakeChainPolicy() {
  return std::make_unique<ChainPolicy>(MakeS3FifoPolicy());
}

}  // namespace pagedkv
