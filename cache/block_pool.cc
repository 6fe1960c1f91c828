// Copyright 2026 The pagedkv Authors.
//
// BlockPool: flat per-block metadata, a LIFO stack of free blocks, a BlockIndex (hash -> block) and
// an EvictionPolicy over the evictable blocks. See include/pagedkv/cache/block_pool.h for the
// contract.
#include "pagedkv/cache/block_pool.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cache/policies/priority_policy.h"
#include "pagedkv/checked_math.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

absl::Status OutOfRange(BlockId block, int32_t num_blocks) {
  return absl::InvalidArgumentError(
      absl::StrCat("block id ", block, " is out of range [0, ", num_blocks, ")"));
}

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The eviction policy of a pool with priorities: one `options.eviction_policy` per level.
absl::StatusOr<std::unique_ptr<EvictionPolicy>> MakePriorityPolicy(const BlockPoolOptions& options,
                                                                   bool custom_policy) {
  if (custom_policy) {
    return absl::InvalidArgumentError(
        "BlockPoolOptions.enable_priorities needs a named eviction_policy (each priority level "
        "gets its own instance), not a policy object");
  }
  if (!(options.max_high_priority_fraction > 0 && options.max_high_priority_fraction <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("BlockPoolOptions.max_high_priority_fraction must be in (0, 1], got ",
                     options.max_high_priority_fraction));
  }
  const absl::Status known = MakeEvictionPolicy(options.eviction_policy).status();
  if (!known.ok()) return known;
  std::string name = options.eviction_policy;
  return std::unique_ptr<EvictionPolicy>(std::make_unique<PriorityPolicy>(
      [name] { return *MakeEvictionPolicy(name); }, options.max_high_priority_fraction,
      options.clock ? options.clock : std::function<double()>(SteadySeconds)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<BlockPool>> BlockPool::Create(
    const BlockPoolOptions& options, std::unique_ptr<EvictionPolicy> policy) {
  if (options.num_blocks <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("BlockPoolOptions.num_blocks must be > 0, got ", options.num_blocks));
  }
  if (options.block_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("BlockPoolOptions.block_size must be > 0, got ", options.block_size));
  }
  PriorityPolicy* priorities = nullptr;
  if (options.enable_priorities) {
    absl::StatusOr<std::unique_ptr<EvictionPolicy>> made =
        MakePriorityPolicy(options, policy != nullptr);
    if (!made.ok()) return made.status();
    priorities = static_cast<PriorityPolicy*>(made->get());
    policy = *std::move(made);
  } else if (policy == nullptr) {
    auto made = MakeEvictionPolicy(options.eviction_policy);
    if (!made.ok()) return made.status();
    policy = *std::move(made);
  }
  try {
    auto pool = std::unique_ptr<BlockPool>(new BlockPool(options, std::move(policy)));
    pool->priorities_ = priorities;
    return pool;
  } catch (const std::exception&) {  // bad_alloc, or length_error for sizes past max_size()
    return absl::ResourceExhaustedError(absl::StrCat(
        "BlockPool: cannot allocate the bookkeeping of ", options.num_blocks, " blocks (about ",
        EstimateBytes(options) >> 20, " MiB of host memory); use fewer blocks"));
  }
}

int64_t BlockPool::EstimateBytes(const BlockPoolOptions& options) {
  if (options.num_blocks <= 0 || options.block_size <= 0) return 0;
  const int64_t n = options.num_blocks;
  // Per block: hot and cold state, parent hash, free-stack entry, up to four index slots (the
  // table is the next power of two >= 2n) and the policy's links.
  constexpr int64_t kPolicyBytes = 32;
  constexpr int64_t kIndexSlotBytes = 8;
  // The free-stack entry and the four chain links are BlockIds.
  int64_t per_block = static_cast<int64_t>(sizeof(BlockMeta) + sizeof(BlockChain) +
                                           sizeof(BlockHash) + 5 * sizeof(BlockId)) +
                      4 * kIndexSlotBytes + kPolicyBytes;
  if (options.store_tokens) {
    per_block += int64_t{options.block_size} * static_cast<int64_t>(sizeof(TokenId));
  }
  int64_t total = 0;
  return CheckedMul(n, per_block, &total) ? total : INT64_MAX;
}

BlockPool::BlockPool(const BlockPoolOptions& options, std::unique_ptr<EvictionPolicy> policy)
    : num_blocks_(options.num_blocks),
      block_size_(options.block_size),
      store_tokens_(options.store_tokens),
      policy_(std::move(policy)),
      meta_(options.num_blocks),
      chain_(options.num_blocks),
      parent_hash_(options.num_blocks),
      parent_of_(options.num_blocks, kNullBlock),
      first_child_(options.num_blocks, kNullBlock),
      next_sibling_(options.num_blocks, kNullBlock),
      prev_sibling_(options.num_blocks, kNullBlock),
      index_(options.num_blocks),
      prefetch_victims_(options.num_blocks >= kVictimPrefetchMinBlocks) {
  if (store_tokens_) {
    // Over-allocate so every block's tokens can start on a 64-byte boundary (one cache line for
    // 16-token blocks).
    constexpr size_t kAlignTokens = 64 / sizeof(TokenId);
    token_storage_.resize(static_cast<size_t>(num_blocks_) * static_cast<size_t>(block_size_) +
                          kAlignTokens);
    const auto address = reinterpret_cast<uintptr_t>(token_storage_.data());
    tokens_ = token_storage_.data() + ((64 - address % 64) % 64) / sizeof(TokenId);
  }
  free_stack_.reserve(num_blocks_);
  for (BlockId b = num_blocks_ - 1; b >= 0; --b) free_stack_.push_back(b);
  policy_->Init(num_blocks_);
}

BlockPool::~BlockPool() = default;

bool BlockPool::TokensMatch(BlockId block, std::span<const TokenId> tokens) const {
  if (!InRange(block) || !meta_[block].cached) return false;
  if (!meta_[block].has_tokens) return true;
  if (tokens.size() != static_cast<size_t>(block_size_)) return false;
  const TokenId* stored = tokens_ + static_cast<size_t>(block) * block_size_;
  return std::equal(tokens.begin(), tokens.end(), stored);
}

bool BlockPool::ExtraKeysMatch(BlockId block, const BlockHash& extra_digest) const {
  if (!InRange(block) || !meta_[block].cached) return false;
  return meta_[block].has_extra ? chain_[block].extra_digest == extra_digest
                                : extra_digest == BlockHash{};
}

absl::Status BlockPool::Pin(BlockId block) {
  if (!InRange(block)) return OutOfRange(block, num_blocks_);
  BlockMeta& m = meta_[block];
  if (m.state == State::kFree) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot pin block ", block, ": it is free (neither used nor cached); Allocate it instead"));
  }
  if (m.state == State::kEvictable) {
    m.state = State::kUsed;
    --num_evictable_;
  }
  ++m.ref_count;
  if (m.cached) {
    policy_->OnAccess(block, m.hash);
    if (lifecycle_ != nullptr) lifecycle_->OnHit(block);
  }
  return absl::OkStatus();
}

void BlockPool::Release(BlockId block) {
  BlockMeta& m = meta_[block];
  if (m.cached && m.unreachable) {
    DropUnreachable(block, /*was_evictable=*/false);  // never kept: no lookup can reach it
  } else if (m.cached) {
    m.state = State::kEvictable;
    ++num_evictable_;
    policy_->OnRelease(block, m.hash);
    if (lifecycle_ != nullptr) lifecycle_->OnReleased(block);
  } else {
    m.state = State::kFree;
    free_stack_.push_back(block);
    if (m.is_duplicate) ForgetDuplicate(block);
  }
}

absl::Status BlockPool::Unpin(BlockId block) {
  if (!InRange(block)) return OutOfRange(block, num_blocks_);
  BlockMeta& m = meta_[block];
  if (m.ref_count == 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot unpin block ", block,
                                                      ": its reference count is already 0 (double "
                                                      "free?)"));
  }
  if (--m.ref_count == 0) Release(block);
  return absl::OkStatus();
}

absl::Status BlockPool::Unpin(std::span<const BlockId> blocks) {
  // Pass 1: decrement, rolling back on the first bad entry so a failure changes nothing.
  for (size_t i = 0; i < blocks.size(); ++i) {
    const BlockId b = blocks[i];
    absl::Status error;
    if (!InRange(b)) {
      error = OutOfRange(b, num_blocks_);
    } else if (meta_[b].ref_count == 0) {
      error = absl::FailedPreconditionError(absl::StrCat(
          "cannot unpin block ", b, " (entry ", i,
          "): its reference count would drop below 0 (double free or repeated entry?)"));
    }
    if (!error.ok()) {
      for (size_t j = 0; j < i; ++j) ++meta_[blocks[j]].ref_count;
      return error;
    }
    --meta_[b].ref_count;
  }
  // Pass 2: queue the blocks that reached zero, in the caller's order (each once).
  for (const BlockId b : blocks) {
    if (meta_[b].ref_count == 0 && meta_[b].state == State::kUsed) Release(b);
  }
  return absl::OkStatus();
}

absl::StatusOr<BlockId> BlockPool::EvictOne() {
  const BlockId victim = policy_->PickVictim();
  if (!InRange(victim) || meta_[victim].state != State::kEvictable || !meta_[victim].cached) {
    return absl::InternalError(absl::StrCat("eviction policy \"", std::string(policy_->Name()),
                                            "\" picked block ", victim,
                                            ", which is not an evictable cached block"));
  }
  --num_evictable_;
  meta_[victim].state = State::kFree;
  if (lifecycle_ != nullptr) lifecycle_->OnEvicted(victim);
  EvictFromIndex(victim);
  if (prefetch_victims_) PrefetchNextVictims();
  return victim;
}

void BlockPool::PrefetchNextVictims() const {
  // A pipeline over the policy's upcoming victims, advanced one step per eviction: the metadata
  // of the victim three evictions ahead is prefetched now; two evictions later that victim is one
  // ahead, its hash is in cache and its index slot is prefetched; two evictions after that it is
  // evicted. Each load thus gets a few blocks' work to arrive. Hints only: a stale answer (the
  // candidate was pinned meanwhile) costs a wasted load, never a wrong result.
  const BlockId slot_next = policy_->PeekVictim(1);
  if (!InRange(slot_next)) return;
  index_.Prefetch(meta_[slot_next].hash);
  const BlockId meta_next = policy_->PeekVictim(3);
  if (InRange(meta_next)) __builtin_prefetch(&meta_[meta_next]);
}

absl::StatusOr<BlockId> BlockPool::Allocate() {
  BlockId block;
  if (!free_stack_.empty()) {
    block = free_stack_.back();
    free_stack_.pop_back();
  } else if (num_evictable_ > 0) {
    auto victim = EvictOne();
    if (!victim.ok()) return victim.status();
    block = *victim;
  } else {
    return absl::ResourceExhaustedError(
        absl::StrCat("no free or evictable KV block: all ", num_blocks_,
                     " blocks are in use; free requests or configure more blocks"));
  }
  BlockMeta& m = meta_[block];
  m.ref_count = 1;
  m.state = State::kUsed;
  return block;
}

absl::Status BlockPool::PickVictims(int32_t count) {
  victims_.clear();
  for (int32_t i = 0; i < count; ++i) {
    const BlockId victim = policy_->PickVictim();
    // A picked victim is marked free until it is evicted, so a repeated pick fails this check.
    if (!InRange(victim) || meta_[victim].state != State::kEvictable || !meta_[victim].cached) {
      // Offer the valid picks back: the policy forgot them, the pool has not changed.
      for (const BlockId b : victims_) {
        meta_[b].state = State::kEvictable;
        policy_->OnRelease(b, meta_[b].hash);
      }
      victims_.clear();
      return absl::InternalError(absl::StrCat(
          "eviction policy \"", std::string(policy_->Name()), "\" picked block ", victim,
          ", which is not an evictable cached block (or was picked twice); fix the policy's "
          "PickVictim: nothing was allocated or evicted"));
    }
    meta_[victim].state = State::kFree;
    victims_.push_back(victim);
    if (prefetch_victims_) PrefetchNextVictims();
  }
  return absl::OkStatus();
}

absl::Status BlockPool::Allocate(int32_t count, std::vector<BlockId>* out) {
  if (count < 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot allocate ", count, " blocks"));
  }
  if (count > NumAvailableBlocks()) {
    return absl::ResourceExhaustedError(absl::StrCat("need ", count, " KV blocks but only ",
                                                     NumAvailableBlocks(), " of ", num_blocks_,
                                                     " are free or evictable"));
  }
  out->reserve(out->size() + count);
  if (!listeners_.empty()) return AllocateOneByOne(count, out);
  // No listener can react to an eviction (and, say, free more blocks), so every victim can be
  // picked and checked before anything changes: a misbehaving policy leaves the pool as it was.
  const auto from_free = static_cast<int32_t>(std::min<size_t>(count, free_stack_.size()));
  if (count > from_free) PAGEDKV_RETURN_IF_ERROR(PickVictims(count - from_free));
  for (int32_t i = 0; i < from_free; ++i) {
    out->push_back(free_stack_.back());
    free_stack_.pop_back();
  }
  for (const BlockId victim : victims_) {
    --num_evictable_;
    if (lifecycle_ != nullptr) lifecycle_->OnEvicted(victim);
    EvictFromIndex(victim);
    out->push_back(victim);
  }
  victims_.clear();
  for (auto b = out->end() - count; b != out->end(); ++b) {
    meta_[*b].ref_count = 1;
    meta_[*b].state = State::kUsed;
  }
  return absl::OkStatus();
}

absl::Status BlockPool::AllocateOneByOne(int32_t count, std::vector<BlockId>* out) {
  const size_t first = out->size();
  for (int32_t i = 0; i < count; ++i) {
    absl::StatusOr<BlockId> block = Allocate();
    if (block.ok()) {
      out->push_back(*block);
      continue;
    }
    // A misbehaving policy: hand back what this call took (evictions already made stay made).
    for (size_t j = out->size(); j > first; --j) {
      const BlockId b = (*out)[j - 1];
      meta_[b].ref_count = 0;
      meta_[b].state = State::kFree;
      free_stack_.push_back(b);
    }
    out->resize(first);
    return block.status();
  }
  return absl::OkStatus();
}

absl::Status BlockPool::CheckInsertable(const BlockInsert& insert) const {
  const BlockId block = insert.block;
  const BlockId parent_block = insert.parent_block;
  if (!InRange(block)) return OutOfRange(block, num_blocks_);
  const BlockMeta& m = meta_[block];
  if (m.state != State::kUsed) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot cache block ", block, ": it is not in use (allocate or pin it first)"));
  }
  if (m.cached) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot cache block ", block, ": it is already cached"));
  }
  if (priorities_ != nullptr) PAGEDKV_RETURN_IF_ERROR(insert.priority.Validate("BlockInsert"));
  if (!insert.tokens.empty() && insert.tokens.size() != static_cast<size_t>(block_size_)) {
    return absl::InvalidArgumentError(absl::StrCat("cannot cache block ", block, " with ",
                                                   insert.tokens.size(),
                                                   " tokens: pass none or exactly ", block_size_));
  }
  if (parent_block == kNullBlock) return absl::OkStatus();
  if (!InRange(parent_block)) return OutOfRange(parent_block, num_blocks_);
  // A parent link to the block itself would outlive the entry it names.
  if (parent_block == block) {
    return absl::InvalidArgumentError(
        absl::StrCat("block ", block, " cannot be its own parent block"));
  }
  if (!meta_[parent_block].cached || meta_[parent_block].hash != insert.parent_hash) {
    return absl::InvalidArgumentError(absl::StrCat("parent block ", parent_block,
                                                   " is not cached under the parent hash ",
                                                   insert.parent_hash.ToString()));
  }
  return absl::OkStatus();
}

inline bool BlockPool::SurelyInsertable(const BlockInsert& insert) const {
  const BlockId block = insert.block;
  if (!InRange(block) || meta_[block].state != State::kUsed || meta_[block].cached) return false;
  if (priorities_ != nullptr) return false;
  if (!insert.tokens.empty() && insert.tokens.size() != static_cast<size_t>(block_size_)) {
    return false;
  }
  const BlockId parent = insert.parent_block;
  return parent == kNullBlock || (InRange(parent) && parent != block && meta_[parent].cached &&
                                  meta_[parent].hash == insert.parent_hash);
}

absl::StatusOr<bool> BlockPool::Insert(const BlockInsert& insert) {
  if (!SurelyInsertable(insert)) [[unlikely]] {
    PAGEDKV_RETURN_IF_ERROR(CheckInsertable(insert));
  }
  const BlockId block = insert.block;
  const BlockHash& hash = insert.hash;
  const BlockHash& parent_hash = insert.parent_hash;
  const std::span<const TokenId> tokens = insert.tokens;
  const BlockId parent_block = insert.parent_block;
  const BlockHash& extra_digest = insert.extra_digest;
  BlockMeta& m = meta_[block];
  if (!index_.Insert(hash, block, KeyOf{this})) return false;
  if (m.is_duplicate) ForgetDuplicate(block);
  m.hash = hash;
  m.cached = true;
  parent_hash_[block] = parent_hash;
  m.has_extra = extra_digest != BlockHash{};
  m.chunk_domain = insert.domain == BlockDomain::kChunk;
  if (m.has_extra) chain_[block].extra_digest = extra_digest;  // cold: read only when has_extra
  ++m.generation;
  m.link = next_link_++;
  m.parent_link = parent_block == kNullBlock ? 0 : meta_[parent_block].link;
  m.unreachable = parent_block != kNullBlock && meta_[parent_block].unreachable;
  if (parent_block != kNullBlock && !m.unreachable) LinkChild(parent_block, block);
  m.has_tokens = store_tokens_ && !tokens.empty();
  if (m.has_tokens) {
    std::copy(tokens.begin(), tokens.end(), tokens_ + static_cast<ptrdiff_t>(block) * block_size_);
  }
  ++stats_.stored_blocks;
  if (priorities_ != nullptr) priorities_->SetNext(block, insert.priority);
  policy_->OnInsertInChain(block, hash, parent_hash, parent_block);
  if (lifecycle_ != nullptr) lifecycle_->OnStored(block);
  if (!listeners_.empty()) {
    Emit(KvEvent{.type = KvEventType::kBlockStored,
                 .hash = hash,
                 .parent_hash = parent_hash,
                 .token_count = block_size_,
                 .block = block,
                 .token_ids = tokens,
                 .domain = insert.domain});
  }
  return true;
}

void BlockPool::EvictFromIndex(BlockId block) {
  const bool had_tokens = meta_[block].has_tokens;
  const BlockId parent = parent_of_[block];
  UnlinkFromParent(block);
  RemoveFromIndex(block);
  ++stats_.evictions;
  const BlockId heir =
      meta_[block].has_duplicates ? PromoteDuplicate(block, had_tokens) : kNullBlock;
  if (heir == kNullBlock) {
    OrphanChildren(block);
    return;
  }
  // Same content under the same link: the chain goes on through the heir.
  if (parent != kNullBlock && meta_[parent].cached && !meta_[parent].unreachable) {
    LinkChild(parent, heir);
  }
  MoveChildren(block, heir);
}

void BlockPool::RemoveFromIndex(BlockId block) {
  BlockMeta& m = meta_[block];
  index_.Erase(m.hash, block);
  m.cached = false;
  m.has_tokens = false;
  m.unreachable = false;
  if (!listeners_.empty()) {
    Emit(KvEvent{.type = KvEventType::kBlockRemoved,
                 .hash = m.hash,
                 .parent_hash = parent_hash_[block],
                 .token_count = block_size_,
                 .block = block,
                 .token_ids = {},
                 .domain = m.chunk_domain ? BlockDomain::kChunk : BlockDomain::kPrefix});
  }
}

absl::Status BlockPool::Uncache(BlockId block) {
  if (!InRange(block)) return OutOfRange(block, num_blocks_);
  BlockMeta& m = meta_[block];
  if (!m.cached) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot uncache block ", block, ": it is not cached"));
  }
  policy_->OnRemove(block, m.hash);
  if (m.has_duplicates) ForgetDuplicatesOf(block);
  if (m.state == State::kEvictable) {
    --num_evictable_;
    m.state = State::kFree;
    free_stack_.push_back(block);
  }
  UnlinkFromParent(block);
  RemoveFromIndex(block);
  ++stats_.evictions;
  OrphanChildren(block);
  return absl::OkStatus();
}

void BlockPool::ResetPrefixCache() {
  policy_->Clear();
  ForgetAllDuplicates();
  for (BlockId b = 0; b < num_blocks_; ++b) {
    BlockMeta& m = meta_[b];
    parent_of_[b] = first_child_[b] = next_sibling_[b] = prev_sibling_[b] = kNullBlock;
    if (!m.cached) continue;
    m.cached = false;
    m.has_tokens = false;
    m.unreachable = false;
    if (m.state == State::kEvictable) {
      m.state = State::kFree;
      free_stack_.push_back(b);
    }
  }
  index_.Clear();
  num_evictable_ = 0;
  ++stats_.resets;
  if (!listeners_.empty()) {
    Emit(KvEvent{.type = KvEventType::kAllBlocksCleared,
                 .hash = {},
                 .parent_hash = {},
                 .token_count = 0,
                 .block = kNullBlock,
                 .token_ids = {}});
  }
}

absl::Status BlockPool::RaisePriority(BlockId block, const CachePriority& priority) {
  PAGEDKV_RETURN_IF_ERROR(priority.Validate("RaisePriority"));
  if (!IsCached(block)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot raise the priority of block ", block, ": it is not cached"));
  }
  if (priorities_ != nullptr) priorities_->Raise(block, priority);
  return absl::OkStatus();
}

int32_t BlockPool::Priority(BlockId block) const {
  return priorities_ != nullptr && IsCached(block) ? priorities_->LevelOf(block)
                                                   : kDefaultCachePriority;
}

int32_t BlockPool::RefCount(BlockId block) const {
  return InRange(block) ? meta_[block].ref_count : -1;
}

bool BlockPool::IsCached(BlockId block) const { return InRange(block) && meta_[block].cached; }

std::optional<BlockHash> BlockPool::CachedHash(BlockId block) const {
  if (!IsCached(block)) return std::nullopt;
  return meta_[block].hash;
}

std::optional<BlockHash> BlockPool::ParentHash(BlockId block) const {
  if (!IsCached(block)) return std::nullopt;
  return parent_hash_[block];
}

std::span<const TokenId> BlockPool::CachedTokens(BlockId block) const {
  if (!IsCached(block) || !meta_[block].has_tokens) return {};
  return std::span<const TokenId>(tokens_ + static_cast<size_t>(block) * block_size_, block_size_);
}

uint32_t BlockPool::Generation(BlockId block) const {
  return InRange(block) ? meta_[block].generation : 0;
}

bool BlockPool::IsLinkedTo(BlockId child, BlockId parent) const {
  if (!IsCached(child)) return false;
  const BlockMeta& c = meta_[child];
  if (parent == kNullBlock) return c.parent_link == 0;
  return IsCached(parent) && c.parent_link == meta_[parent].link;
}

int BlockPool::AddEventListener(KvEventListener listener) {
  const int id = next_listener_id_++;
  listeners_.emplace_back(id, std::move(listener));
  return id;
}

bool BlockPool::RemoveEventListener(int id) {
  const auto it = std::find_if(listeners_.begin(), listeners_.end(),
                               [id](const auto& entry) { return entry.first == id; });
  if (it == listeners_.end()) return false;
  listeners_.erase(it);
  return true;
}

void BlockPool::Emit(const KvEvent& event) {
  for (const auto& [id, listener] : listeners_) listener(event);
}

absl::Status BlockPool::CheckBlock(BlockId b) const {
  const BlockMeta& m = meta_[b];
  if (m.state != State::kFree && m.state != State::kUsed && m.state != State::kEvictable) {
    return absl::InternalError(absl::StrCat("block ", b, " has no valid state"));
  }
  switch (m.state) {
    case State::kFree:
      if (m.ref_count != 0 || m.cached) {
        return absl::InternalError(
            absl::StrCat("free block ", b, " has ref_count ", m.ref_count, " cached=", m.cached));
      }
      break;
    case State::kUsed:
      if (m.ref_count <= 0) {
        return absl::InternalError(absl::StrCat("used block ", b, " has ref_count ", m.ref_count));
      }
      break;
    case State::kEvictable:
      if (m.ref_count != 0 || !m.cached) {
        return absl::InternalError(absl::StrCat("evictable block ", b, " has ref_count ",
                                                m.ref_count, " cached=", m.cached));
      }
      break;
  }
  if (m.cached) {
    const BlockId indexed = FindCached(m.hash);
    if (indexed != b) {
      return absl::InternalError(absl::StrCat("cached block ", b, " hash ", m.hash.ToString(),
                                              " maps to block ", indexed));
    }
  }
  if (m.has_tokens && !m.cached) {
    return absl::InternalError(absl::StrCat("uncached block ", b, " claims stored tokens"));
  }
  return absl::OkStatus();
}

absl::Status BlockPool::CheckCounts(int32_t num_free, int32_t num_evictable,
                                    int32_t num_cached) const {
  if (num_free != NumFreeBlocks()) {
    return absl::InternalError(
        absl::StrCat(num_free, " blocks are free but the free stack holds ", free_stack_.size()));
  }
  if (num_evictable != num_evictable_) {
    return absl::InternalError(
        absl::StrCat(num_evictable, " blocks are evictable but the count is ", num_evictable_));
  }
  if (num_cached != NumCachedBlocks()) {
    return absl::InternalError(
        absl::StrCat(num_cached, " blocks are cached but the index holds ", index_.size()));
  }
  return absl::OkStatus();
}

absl::Status BlockPool::CheckFreeStack() const {
  std::vector<bool> seen(num_blocks_, false);
  for (const BlockId b : free_stack_) {
    if (!InRange(b) || meta_[b].state != State::kFree || seen[b]) {
      return absl::InternalError(absl::StrCat("free stack entry ", b, " is invalid or repeated"));
    }
    seen[b] = true;
  }
  return absl::OkStatus();
}

absl::Status BlockPool::CheckIndexEntries() const {
  absl::Status bad_entry;
  index_.ForEach([&](BlockId b) {
    if (bad_entry.ok() && (!InRange(b) || !meta_[b].cached || FindCached(meta_[b].hash) != b)) {
      bad_entry = absl::InternalError(
          absl::StrCat("index entry -> block ", b, " does not match a cached block"));
    }
  });
  return bad_entry;
}

absl::Status BlockPool::ValidateInvariants() const {
  int32_t num_free = 0, num_evictable = 0, num_cached = 0;
  for (BlockId b = 0; b < num_blocks_; ++b) {
    PAGEDKV_RETURN_IF_ERROR(CheckBlock(b));
    num_free += meta_[b].state == State::kFree;
    num_evictable += meta_[b].state == State::kEvictable;
    num_cached += meta_[b].cached;
  }
  PAGEDKV_RETURN_IF_ERROR(CheckCounts(num_free, num_evictable, num_cached));
  PAGEDKV_RETURN_IF_ERROR(CheckFreeStack());
  PAGEDKV_RETURN_IF_ERROR(CheckDuplicates());
  PAGEDKV_RETURN_IF_ERROR(CheckChains());
  return CheckIndexEntries();
}

}  // namespace pagedkv
