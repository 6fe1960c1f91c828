// Copyright 2026 The pagedkv Authors.
//
// KvCacheManager: request-level prefix caching over a BlockPool. See
// include/pagedkv/kv_cache_manager.h for the contract.
#include "pagedkv/kv_cache_manager.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache/debug_check.h"
#include "cache/ref_count_check.h"
#include "cache/request_check.h"
#include "pagedkv/checked_math.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv {

absl::StatusOr<std::unique_ptr<KvCacheManager>> KvCacheManager::Create(
    KvCacheManagerOptions options, std::unique_ptr<EvictionPolicy> policy) {
  if (options.num_blocks <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KvCacheManagerOptions.num_blocks must be > 0, got ", options.num_blocks));
  }
  if (options.block_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KvCacheManagerOptions.block_size must be > 0, got ", options.block_size));
  }
  if (options.vocab_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "KvCacheManagerOptions.vocab_size must be >= 0 (0 = unchecked), got ", options.vocab_size));
  }
  BlockPoolOptions pool_options{
      .num_blocks = options.num_blocks,
      .block_size = options.block_size,
      .store_tokens = options.enable_prefix_caching && options.verify_tokens,
      .eviction_policy = options.eviction_policy,
      .enable_priorities = options.enable_priorities,
      .max_high_priority_fraction = options.max_high_priority_fraction,
      .clock = options.clock,
  };
  auto pool = BlockPool::Create(pool_options, std::move(policy));
  if (!pool.ok()) return pool.status();
  return std::unique_ptr<KvCacheManager>(new KvCacheManager(std::move(options), *std::move(pool)));
}

KvCacheManager::KvCacheManager(KvCacheManagerOptions options, std::unique_ptr<BlockPool> pool)
    : options_(std::move(options)), pool_(std::move(pool)) {
  if (options_.collect_event_batches) {
    batcher_ = std::make_unique<KvEventBatcher>(
        KvEventBatcherOptions{.data_parallel_rank = options_.data_parallel_rank});
    pool_->AddEventListener([batcher = batcher_.get()](const KvEvent& e) { batcher->Add(e); });
  }
  if (options_.collect_block_metrics) {
    block_metrics_ =
        std::make_unique<BlockLifecycleMetrics>(pool_->num_blocks(), options_.metrics_clock);
    pool_->SetLifecycleObserver(block_metrics_.get());
  }
}

KvEventBatch KvCacheManager::TakeEventBatch(double timestamp) {
  if (batcher_ == nullptr) {
    return KvEventBatch{.timestamp = timestamp, .data_parallel_rank = options_.data_parallel_rank};
  }
  return batcher_->Take(timestamp);
}

absl::StatusOr<CacheRequest> KvCacheManager::NewRequest(RequestId id,
                                                        std::span<const TokenId> prompt,
                                                        const RequestCacheKeys& keys) const {
  return CacheRequest::Create(
      CacheRequestOptions{
          .id = id,
          .block_size = options_.block_size,
          .cache_salt = keys.cache_salt,
          .model_fingerprint = options_.model_fingerprint,
          .adapter_id = keys.adapter_id,
          .multimodal = keys.multimodal,
          .vocab_size = options_.vocab_size,
          .hasher = options_.hasher,
          .priority = keys.priority,
          .priority_spans = keys.priority_spans,
      },
      prompt);
}

absl::Status KvCacheManager::CheckRequest(const CacheRequest& request) const {
  return CheckRequestMatchesManager(request, options_.block_size, options_.vocab_size);
}

bool KvCacheManager::Verify(BlockId block, const CacheRequest& request, int64_t i,
                            BlockId prev) const {
  return pool_->MatchesChain(block, request.ParentHashOf(i), request.BlockTokens(i),
                             request.BlockExtraDigest(i), prev);
}

absl::StatusOr<ComputedBlocks> KvCacheManager::GetComputedBlocks(const CacheRequest& request) {
  absl::Status ok = CheckRequest(request);
  if (!ok.ok()) return ok;
  ComputedBlocks result;
  ++stats_.lookups;
  stats_.queried_tokens += request.num_tokens();
  stats_.queried_blocks += request.num_full_blocks();
  if (!options_.enable_prefix_caching || request.num_tokens() == 0) return result;
  // At least one token must be computed, so the last token's block is never a hit.
  const int64_t max_blocks = std::min<int64_t>((request.num_tokens() - 1) / options_.block_size,
                                               request.num_full_blocks());
  const std::span<const BlockHash> hashes = request.block_hashes();
  // Two passes: probe every hash first, then verify, so the loads of independent blocks overlap.
  result.blocks.resize(max_blocks);
  BlockId* const out = result.blocks.data();
  int64_t found = 0;
  for (; found < max_blocks; ++found) {
    const BlockId block = pool_->FindCached(hashes[found]);
    if (block == kNullBlock) break;
    out[found] = block;
  }
  result.blocks.resize(found);
  if (options_.verify_tokens) {
    BlockId prev = kNullBlock;
    for (size_t i = 0; i < result.blocks.size(); ++i) {
      if (!Verify(result.blocks[i], request, static_cast<int64_t>(i), prev)) {
        ++stats_.verification_failures;
        result.blocks.resize(i);
        break;
      }
      prev = result.blocks[i];
    }
  }
  result.num_computed_tokens = static_cast<int64_t>(result.blocks.size()) * options_.block_size;
  stats_.hit_blocks += static_cast<int64_t>(result.blocks.size());
  stats_.hit_tokens += result.num_computed_tokens;
  return result;
}

absl::Status KvCacheManager::CheckComputed(const CacheRequest& request,
                                           const ComputedBlocks& computed, Plan& plan) const {
  const int64_t num_computed = static_cast<int64_t>(computed.blocks.size());
  if (num_computed > 0) {
    if (!plan.is_new) {
      return absl::InvalidArgumentError(absl::StrCat(
          "request ", request.id(),
          " already has blocks; pass computed blocks only on its first AllocateSlots"));
    }
    if (!options_.enable_prefix_caching) {
      return absl::InvalidArgumentError("prefix caching is off; there are no computed blocks");
    }
  }
  if (computed.num_computed_tokens != num_computed * options_.block_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("computed blocks hold ", num_computed, " blocks of ", options_.block_size,
                     " tokens but num_computed_tokens is ", computed.num_computed_tokens));
  }
  if (num_computed > request.num_full_blocks()) {
    return absl::InvalidArgumentError(absl::StrCat("request ", request.id(), " has ",
                                                   request.num_full_blocks(), " full blocks but ",
                                                   num_computed, " computed blocks were passed"));
  }
  BlockId prev = kNullBlock;
  for (int64_t i = 0; i < num_computed; ++i) {
    const BlockId block = computed.blocks[i];
    const std::optional<BlockHash> hash = pool_->CachedHash(block);
    if (!hash.has_value() || *hash != request.block_hashes()[i] ||
        (options_.verify_tokens && !Verify(block, request, i, prev))) {
      return absl::FailedPreconditionError(absl::StrCat(
          "computed block ", i, " (block id ", block, ") of request ", request.id(),
          " is no longer cached for it; call GetComputedBlocks again in the same step"));
    }
    if (pool_->RefCount(block) == 0) ++plan.evictable_hits;
    prev = block;
  }
  return absl::OkStatus();
}

absl::StatusOr<KvCacheManager::Plan> KvCacheManager::MakePlan(
    const CacheRequest& request, int64_t num_new_tokens, const ComputedBlocks& new_computed_blocks,
    int64_t num_lookahead) const {
  absl::Status ok = CheckRequest(request);
  if (!ok.ok()) return ok;
  if (num_new_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_new_tokens must be >= 0, got ", num_new_tokens));
  }
  if (num_lookahead < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("AllocateOptions.num_lookahead_tokens must be >= 0, got ", num_lookahead));
  }
  const auto it = requests_.find(request.id());
  Plan plan;
  plan.is_new = it == requests_.end();
  plan.lookahead = num_lookahead;
  PAGEDKV_RETURN_IF_ERROR(CheckComputed(request, new_computed_blocks, plan));
  const int64_t have_tokens =
      plan.is_new ? new_computed_blocks.num_computed_tokens : it->second.num_tokens;
  if (!CheckedAdd(have_tokens, num_new_tokens, &plan.total_tokens) ||
      plan.total_tokens > request.num_tokens()) {
    return absl::InvalidArgumentError(
        absl::StrCat("request ", request.id(), " has ", request.num_tokens(),
                     " tokens; cannot allocate slots for ", have_tokens, " + ", num_new_tokens,
                     "; append tokens to the CacheRequest first"));
  }
  const int64_t bs = options_.block_size;
  int64_t slots = 0;
  if (!CheckedAdd(plan.total_tokens, num_lookahead, &slots)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request ", request.id(), " cannot reserve ", num_lookahead, " lookahead tokens past ",
        plan.total_tokens, " tokens (overflow); propose fewer draft tokens"));
  }
  const int64_t blocks_needed = NumBlocksFor(slots, bs);
  const int64_t blocks_held = plan.is_new ? static_cast<int64_t>(new_computed_blocks.blocks.size())
                                          : static_cast<int64_t>(it->second.table.size());
  // Saturated: more than the pool holds is ResourceExhausted in AllocateSlots.
  plan.new_blocks = static_cast<int32_t>(
      std::clamp<int64_t>(blocks_needed - blocks_held, 0, options_.num_blocks + int64_t{1}));
  plan.release_blocks = static_cast<int32_t>(std::max<int64_t>(0, blocks_held - blocks_needed));
  return plan;
}

absl::StatusOr<int32_t> KvCacheManager::NumBlocksToAllocate(
    const CacheRequest& request, int64_t num_new_tokens, const ComputedBlocks& new_computed_blocks,
    const AllocateOptions& options) const {
  auto plan = MakePlan(request, num_new_tokens, new_computed_blocks, options.num_lookahead_tokens);
  if (!plan.ok()) return plan.status();
  return plan->new_blocks + plan->evictable_hits;
}

absl::Status KvCacheManager::AllocateSlots(const CacheRequest& request, int64_t num_new_tokens,
                                           const ComputedBlocks& new_computed_blocks,
                                           const AllocateOptions& options) {
  auto plan_or =
      MakePlan(request, num_new_tokens, new_computed_blocks, options.num_lookahead_tokens);
  if (!plan_or.ok()) return plan_or.status();
  const Plan& plan = *plan_or;
  if (plan.new_blocks + plan.evictable_hits > pool_->NumAvailableBlocks()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "request ", request.id(), " needs ", plan.new_blocks + plan.evictable_hits,
        " more KV blocks but only ", pool_->NumAvailableBlocks(), " of ", pool_->num_blocks(),
        " are free or evictable; wait for requests to finish or preempt one"));
  }
  // Nothing below can fail on caller input: every check is done. Only a misbehaving eviction
  // policy can make the pool's Allocate fail; then the computed blocks pinned here are unpinned
  // and a new request's state is dropped, so nothing has changed.
  std::vector<BlockId> table;
  if (plan.is_new) {
    if (batcher_ != nullptr) batcher_->NoteRoot(request.root_hash());
    table.reserve(new_computed_blocks.blocks.size() + plan.new_blocks);
    for (const BlockId block : new_computed_blocks.blocks) {
      DebugCheckOk(pool_->Pin(block), "MakePlan checked that each computed block is cached");
      if (options_.enable_priorities) {
        DebugCheckOk(pool_->RaisePriority(block, request.BlockPriorityOf(table.size())),
                     "the request's priorities were validated and the block is cached");
      }
      table.push_back(block);
    }
  } else {
    table = std::move(requests_.find(request.id())->second.table);
  }
  const size_t held = table.size();
  if (absl::Status allocated = pool_->Allocate(plan.new_blocks, &table); !allocated.ok()) {
    if (plan.is_new) {
      std::reverse(table.begin(), table.end());  // tail first, as Free does
      DebugCheckOk(pool_->Unpin(table), "the computed blocks were pinned just above");
    } else {
      table.resize(held);
      requests_.find(request.id())->second.table = std::move(table);
    }
    return allocated;
  }
  RequestState& state =
      plan.is_new ? requests_[request.id()] : requests_.find(request.id())->second;
  state.table = std::move(table);
  if (plan.is_new) StartState(new_computed_blocks, state);
  // Blocks past the new coverage held only old lookahead slots: never cached, released here.
  if (plan.release_blocks > 0) ReleaseTail(state, state.table.size() - plan.release_blocks);
  state.num_tokens = plan.total_tokens;
  state.num_lookahead = plan.lookahead;
  if (options.no_cache_from_token >= 0) {
    state.max_cached_blocks =
        std::min(state.max_cached_blocks, options.no_cache_from_token / options_.block_size);
  }
  if (options_.enable_prefix_caching) CacheFullBlocks(request, state);
  return absl::OkStatus();
}

void KvCacheManager::ReleaseTail(RequestState& state, size_t keep) {
  for (size_t i = state.table.size(); i > keep; --i) {
    DebugCheckOk(pool_->Unpin(state.table[i - 1]), "the table holds one reference per entry");
  }
  state.table.resize(keep);
}

absl::Status KvCacheManager::TruncateRequest(CacheRequest& request, int64_t num_tokens) {
  PAGEDKV_RETURN_IF_ERROR(CheckRequest(request));
  const auto it = requests_.find(request.id());
  if (it == requests_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", request.id(), " holds no KV blocks"));
  }
  if (num_tokens < 0 || num_tokens > request.num_tokens()) {
    return absl::InvalidArgumentError(absl::StrCat("request ", request.id(), " has ",
                                                   request.num_tokens(),
                                                   " tokens; cannot truncate it to ", num_tokens));
  }
  RequestState& state = it->second;
  const int64_t bs = options_.block_size;
  const int64_t kept_slots = std::min(state.num_tokens, num_tokens);
  const size_t keep = static_cast<size_t>(NumBlocksFor(kept_slots, bs));
  const size_t first_dirty = static_cast<size_t>(num_tokens / bs);  // holds token num_tokens
  if (first_dirty < keep && pool_->RefCount(state.table[first_dirty]) > 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "block ", first_dirty, " of request ", request.id(), " holds kept and rejected tokens and ",
        "is shared with another request; truncate at a multiple of ", bs,
        " tokens or past the shared prefix"));
  }
  DebugCheckOk(request.Truncate(num_tokens), "the length was checked above");
  // Blocks other requests also hold keep their index entry: those tokens are theirs too. A
  // duplicate cut into no longer holds its holder's content.
  for (size_t i = first_dirty; i < state.table.size(); ++i) {
    if (pool_->IsCached(state.table[i]) && pool_->RefCount(state.table[i]) == 1) {
      DebugCheckOk(pool_->Uncache(state.table[i]), "IsCached just said so");
    }
    DebugCheckOk(pool_->DropDuplicate(state.table[i]), "the block is in the table");
  }
  ReleaseTail(state, keep);
  state.num_tokens = kept_slots;
  state.num_lookahead = 0;
  if (state.num_cached_blocks > static_cast<int64_t>(first_dirty)) {
    state.num_cached_blocks = static_cast<int64_t>(first_dirty);
    ResetCanonical(request, state);
  }
  return absl::OkStatus();
}

void KvCacheManager::ResetCanonical(const CacheRequest& request, RequestState& state) {
  state.last_canonical = kNullBlock;
  if (state.num_cached_blocks == 0 || !options_.verify_tokens) return;
  const int64_t i = state.num_cached_blocks - 1;
  const BlockId holder = pool_->FindCached(request.block_hashes()[i]);
  const BlockId prev = i > 0 ? pool_->FindCached(request.block_hashes()[i - 1]) : kNullBlock;
  if (holder == kNullBlock || !Verify(holder, request, i, prev)) {
    // The chain cannot be followed from here: later blocks of this request are not cached.
    state.chain_broken = true;
    return;
  }
  state.last_canonical = holder;
  state.last_canonical_generation = pool_->Generation(holder);
}

void KvCacheManager::StartState(const ComputedBlocks& computed, RequestState& state) const {
  state.num_cached_blocks = static_cast<int64_t>(computed.blocks.size());
  if (!computed.blocks.empty()) {
    state.last_canonical = computed.blocks.back();
    state.last_canonical_generation = pool_->Generation(state.last_canonical);
  }
}

void KvCacheManager::CacheFullBlocks(const CacheRequest& request, RequestState& state) {
  const int64_t full = std::min({state.num_tokens / options_.block_size, request.num_full_blocks(),
                                 std::max(state.num_cached_blocks, state.max_cached_blocks)});
  for (int64_t i = state.num_cached_blocks; i < full; ++i) {
    if (!options_.verify_tokens) {
      CacheHashOnly(request, state, i);
    } else if (!state.chain_broken) {
      CacheVerified(request, state, i);
    }
  }
  state.num_cached_blocks = std::max(state.num_cached_blocks, full);
}

void KvCacheManager::CacheHashOnly(const CacheRequest& request, const RequestState& state,
                                   int64_t i) {
  // Index the block unless its hash is already present (Insert's false); then it is recorded as
  // a duplicate of the holder, which it replaces if the holder is evicted first.
  const BlockInsert insert{.block = state.table[i],
                           .hash = request.block_hashes()[i],
                           .parent_hash = request.ParentHashOf(i),
                           .tokens = request.BlockTokens(i),
                           .parent_block = kNullBlock,
                           .extra_digest = request.BlockExtraDigest(i),
                           .priority = request.BlockPriorityOf(i)};
  const absl::StatusOr<bool> indexed = pool_->Insert(insert);
  DebugCheckOk(indexed.status(), "the block is in this request's table and was never cached");
  if (indexed.ok() && !*indexed) {
    DebugCheckOk(pool_->AddDuplicate(insert).status(), "the block is used and uncached");
  }
}

void KvCacheManager::RelinkToOwnBlock(const CacheRequest& request, int64_t i,
                                      RequestState& state) const {
  // The verified block before block i left the cache; if this request's own copy of it was
  // promoted into its place (a duplicate), the chain continues from there.
  const BlockId own = state.table[i - 1];
  if (pool_->FindCached(request.block_hashes()[i - 1]) != own) return;
  state.last_canonical = own;
  state.last_canonical_generation = pool_->Generation(own);
}

void KvCacheManager::CacheVerified(const CacheRequest& request, RequestState& state, int64_t i) {
  const BlockId block = state.table[i];
  const BlockHash& hash = request.block_hashes()[i];
  BlockId prev = kNullBlock;
  if (i > 0) {
    if (state.last_canonical == kNullBlock || !pool_->IsCached(state.last_canonical) ||
        pool_->Generation(state.last_canonical) != state.last_canonical_generation) {
      RelinkToOwnBlock(request, i, state);
    }
    prev = state.last_canonical;
    if (prev == kNullBlock || !pool_->IsCached(prev) ||
        pool_->Generation(prev) != state.last_canonical_generation) {
      // The verified block before this one left the cache: this block's context cannot be
      // linked any more, so neither it nor its successors are offered to the index.
      state.chain_broken = true;
      return;
    }
  }
  BlockId canonical = block;
  const BlockId holder = pool_->FindCached(hash);
  if (holder != kNullBlock && holder == prev) {
    // The block's hash collides with its own parent's: it cannot be indexed without dropping
    // the parent, so the chain ends here.
    state.chain_broken = true;
    return;
  }
  if (holder != kNullBlock) {
    if (Verify(holder, request, i, prev)) {
      // Same content already cached (e.g. computed concurrently): this block is a duplicate that
      // keeps the hash reachable should the holder be evicted while this request runs.
      canonical = holder;
      DebugCheckOk(pool_
                       ->AddDuplicate({.block = block,
                                       .hash = hash,
                                       .parent_hash = request.ParentHashOf(i),
                                       .tokens = request.BlockTokens(i),
                                       .extra_digest = request.BlockExtraDigest(i)})
                       .status(),
                   "the block is used and uncached");
    } else {
      // A different block (hash collision, or a block whose parent changed) holds the hash:
      // replace it with this request's verified block.
      ++stats_.replaced_blocks;
      DebugCheckOk(pool_->Uncache(holder), "FindCached just returned the holder");
    }
  }
  if (canonical == block) {
    // The hash is free now (no holder, or the holder was uncached) and prev is cached under
    // parent_hash (checked above): the block is indexed.
    DebugCheckOk(pool_->Insert({.block = block,
                                .hash = hash,
                                .parent_hash = request.ParentHashOf(i),
                                .tokens = request.BlockTokens(i),
                                .parent_block = prev,
                                .extra_digest = request.BlockExtraDigest(i),
                                .priority = request.BlockPriorityOf(i)}),
                 "the block is in use, uncached, its hash free and its parent cached");
  }
  state.last_canonical = canonical;
  state.last_canonical_generation = pool_->Generation(canonical);
}

absl::Status KvCacheManager::Free(RequestId id) {
  const auto it = requests_.find(id);
  if (it == requests_.end()) {
    return absl::NotFoundError(
        absl::StrCat("request ", id, " holds no KV blocks (never allocated, or already freed)"));
  }
  const std::vector<BlockId>& table = it->second.table;
  // Tail first, so a chain's tail becomes evictable before its parents.
  for (auto b = table.rbegin(); b != table.rend(); ++b) {
    DebugCheckOk(pool_->Unpin(*b), "the table holds one reference per entry");
  }
  requests_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<std::span<const BlockId>> KvCacheManager::GetBlockTable(RequestId id) const {
  const auto it = requests_.find(id);
  if (it == requests_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", id, " holds no KV blocks"));
  }
  return std::span<const BlockId>(it->second.table);
}

absl::StatusOr<int64_t> KvCacheManager::NumLookaheadTokens(RequestId id) const {
  const auto it = requests_.find(id);
  if (it == requests_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", id, " holds no KV blocks"));
  }
  return it->second.num_lookahead;
}

absl::StatusOr<int64_t> KvCacheManager::NumAllocatedTokens(RequestId id) const {
  const auto it = requests_.find(id);
  if (it == requests_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", id, " holds no KV blocks"));
  }
  return it->second.num_tokens;
}

void KvCacheManager::ResetPrefixCache() { pool_->ResetPrefixCache(); }

absl::StatusOr<std::unique_ptr<ChunkIndex>> KvCacheManager::AttachChunkIndex(
    const ChunkIndexOptions& options) {
  return ChunkIndex::Create(pool_.get(), options);
}

double KvCacheManager::Usage() const {
  return static_cast<double>(pool_->NumUsedBlocks()) / pool_->num_blocks();
}

CacheStats KvCacheManager::stats() const {
  CacheStats s = stats_;
  const CacheStats& p = pool_->stats();
  s.stored_blocks = p.stored_blocks;
  s.evictions = p.evictions;
  s.unreachable_evictions = p.unreachable_evictions;
  s.resets = p.resets;
  s.promoted_duplicates = p.promoted_duplicates;
  return s;
}

void KvCacheManager::ResetStats() {
  stats_ = CacheStats{};
  pool_->ResetStats();
  if (block_metrics_ != nullptr) block_metrics_->Clear();
}

absl::Status KvCacheManager::ValidateInvariants() const {
  absl::Status pool_ok = pool_->ValidateInvariants();
  if (!pool_ok.ok()) return pool_ok;
  std::vector<int32_t> refs(pool_->num_blocks(), 0);
  const int64_t bs = options_.block_size;
  for (const auto& [id, state] : requests_) {
    const int64_t expected_blocks = NumBlocksFor(state.num_tokens + state.num_lookahead, bs);
    if (static_cast<int64_t>(state.table.size()) != expected_blocks) {
      return absl::InternalError(absl::StrCat(
          "request ", id, " covers ", state.num_tokens, " tokens + ", state.num_lookahead,
          " lookahead slots with ", state.table.size(), " blocks"));
    }
    for (const BlockId b : state.table) {
      if (b < 0 || b >= pool_->num_blocks()) {
        return absl::InternalError(absl::StrCat("request ", id, " holds invalid block ", b));
      }
      ++refs[b];
    }
  }
  return CheckRefCounts(*pool_, refs);
}

}  // namespace pagedkv
