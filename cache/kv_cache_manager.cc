// Copyright 2026 The pagedkv Authors.
//
// KvCacheManager: request-level prefix caching over a BlockPool, for one KV cache group or
// several. See include/pagedkv/cache/kv_cache_manager.h for the contract. This file holds creation,
// AllocateSlots and Free; planning and checks live in kv_cache_manager_plan.cc, lookups in
// kv_cache_manager_hit.cc, indexing in kv_cache_manager_caching.cc, rollback and invariants in
// kv_cache_manager_rollback.cc.
//
// Invariants (checked by ValidateInvariants):
//   - every group's table of a request has NumBlocksFor(num_tokens + num_lookahead) entries;
//   - entry i of a sliding-window table is kNullBlock exactly when i < FirstNeededBlock(g,
//     num_computed); full-attention tables have no null entry;
//   - each block's reference count equals the number of non-null table entries holding it;
//   - with several groups, a cached block held by group g's table was cached for group g.
#include "pagedkv/cache/kv_cache_manager.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache/debug_check.h"
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
  PAGEDKV_RETURN_IF_ERROR(CheckKvCacheGroups(options.groups));
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
  groups_ = options_.groups;
  if (groups_.empty()) groups_.push_back(KvCacheGroupSpec{});
  if (num_groups() > 1) block_group_.assign(pool_->num_blocks(), -1);
  if (options_.collect_event_batches) {
    batcher_ = std::make_unique<KvEventBatcher>(
        KvEventBatcherOptions{.data_parallel_rank = options_.data_parallel_rank});
    if (num_groups() > 1) {
      pool_->AddEventListener([this](const KvEvent& e) { batcher_->Add(StampGroup(e)); });
    } else {
      pool_->AddEventListener([batcher = batcher_.get()](const KvEvent& e) { batcher->Add(e); });
    }
  }
  if (options_.collect_block_metrics) {
    block_metrics_ =
        std::make_unique<BlockLifecycleMetrics>(pool_->num_blocks(), options_.metrics_clock);
    pool_->SetLifecycleObserver(block_metrics_.get());
  }
}

KvEvent KvCacheManager::StampGroup(const KvEvent& event) const {
  KvEvent stamped = event;
  if (event.type != KvEventType::kAllBlocksCleared) {
    const int32_t g = BlockGroup(event.block);
    stamped.group_idx = g;
    if (event.type == KvEventType::kBlockStored && g >= 0) {
      stamped.kv_cache_spec_kind = KvCacheGroupKindName(groups_[g].kind);
      if (IsSlidingWindow(g)) stamped.kv_cache_spec_sliding_window = groups_[g].sliding_window;
    }
  }
  return stamped;
}

int KvCacheManager::AddEventListener(KvEventListener listener) {
  if (num_groups() == 1) return pool_->AddEventListener(std::move(listener));
  return pool_->AddEventListener(
      [this, listener = std::move(listener)](const KvEvent& e) { listener(StampGroup(e)); });
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

int64_t KvCacheManager::FirstNeededBlock(int32_t g, int64_t computed) const {
  if (!IsSlidingWindow(g)) return 0;
  const int64_t first_token = computed - groups_[g].sliding_window + 1;
  return first_token <= 0 ? 0 : first_token / options_.block_size;
}

bool KvCacheManager::Verify(BlockId block, const CacheRequest& request, int32_t g, int64_t i,
                            BlockId prev) const {
  if (!linked_chains()) {
    // Inserted with no parent block: the stored parent hash, tokens and extra keys are compared
    // (no chain link: a sliding-window group's chain has holes).
    if (pool_->CachedHash(block) != GroupBlockHash(request, g, i)) return false;
    if (!options_.verify_tokens) return true;
    prev = kNullBlock;
  }
  return pool_->MatchesChain(block, GroupParentHash(request, g, i), request.BlockTokens(i),
                             request.BlockExtraDigest(i), prev);
}

absl::Status KvCacheManager::AllocateSlots(const CacheRequest& request, int64_t num_new_tokens,
                                           const ComputedBlocks& new_computed_blocks,
                                           const AllocateOptions& options) {
  PAGEDKV_ASSIGN_OR_RETURN(const Plan plan, MakePlan(request, num_new_tokens, new_computed_blocks,
                                                     options.num_lookahead_tokens));
  const int32_t available = pool_->NumAvailableBlocks() + plan.releasable;
  if (plan.taken > available) {
    return absl::ResourceExhaustedError(
        absl::StrCat("request ", request.id(), " needs ", plan.taken, " more KV blocks but only ",
                     available, " of ", pool_->num_blocks(), " are free or evictable",
                     plan.releasable > 0 ? " (counting those this call releases)" : "",
                     "; wait for requests to finish or preempt one"));
  }
  // Nothing below can fail on caller input: every check is done. Only a misbehaving eviction
  // policy can make the pool's Allocate fail; then the computed blocks pinned here are unpinned
  // and a new request's state is dropped (the window releases of a running request stay).
  RequestState fresh_state;
  RequestState* state = &fresh_state;
  if (plan.is_new) {
    fresh_state = PinComputed(request, new_computed_blocks);
  } else {
    state = &requests_.find(request.id())->second;
    ReleaseWindow(*state, plan.computed_tokens);
  }
  if (absl::Status allocated = AllocateNewBlocks(plan.new_blocks, *state); !allocated.ok()) {
    if (plan.is_new) UnpinAll(fresh_state);
    return allocated;
  }
  if (plan.is_new) state = &(requests_[request.id()] = std::move(fresh_state));
  // Blocks past the new coverage held only old lookahead slots: never cached, released here.
  if (plan.release_blocks > 0) {
    ReleaseTail(*state, state->groups[0].table.size() - plan.release_blocks);
  }
  state->num_tokens = plan.total_tokens;
  state->num_computed = plan.computed_tokens;
  state->num_lookahead = plan.lookahead;
  if (options.no_cache_from_token >= 0) {
    state->max_cached_blocks =
        std::min(state->max_cached_blocks, options.no_cache_from_token / options_.block_size);
  }
  if (options_.enable_prefix_caching) CacheFullBlocks(request, *state);
  return absl::OkStatus();
}

absl::Status KvCacheManager::AllocateNewBlocks(int32_t per_group, RequestState& state) {
  // One group: straight into its table (the pool appends all or nothing).
  if (num_groups() == 1) return pool_->Allocate(per_group, &state.groups[0].table);
  fresh_.clear();
  PAGEDKV_RETURN_IF_ERROR(pool_->Allocate(per_group * num_groups(), &fresh_));
  for (int32_t g = 0; g < num_groups(); ++g) {
    const auto from = fresh_.begin() + static_cast<int64_t>(g) * per_group;
    std::vector<BlockId>& table = state.groups[g].table;
    table.insert(table.end(), from, from + per_group);
  }
  return absl::OkStatus();
}

KvCacheManager::RequestState KvCacheManager::PinComputed(const CacheRequest& request,
                                                         const ComputedBlocks& computed) {
  RequestState state;
  state.groups.resize(num_groups());
  const int64_t n = static_cast<int64_t>(computed.blocks.size());
  for (int32_t g = 0; g < num_groups(); ++g) {
    if (batcher_ != nullptr) batcher_->NoteRoot(FoldGroupHash(request.root_hash(), g));
    GroupState& group = state.groups[g];
    if (n == 0) continue;
    const std::span<const BlockId> blocks = computed.group(g);
    group.table.reserve(blocks.size());
    for (const BlockId block : blocks) {
      if (block != kNullBlock) {
        DebugCheckOk(pool_->Pin(block), "MakePlan checked that each computed block is cached");
        if (options_.enable_priorities) {
          DebugCheckOk(pool_->RaisePriority(block, request.BlockPriorityOf(group.table.size())),
                       "the request's priorities were validated and the block is cached");
        }
      }
      group.table.push_back(block);
    }
    group.num_cached_blocks = n;
    if (linked_chains()) {
      group.last_canonical = group.table.back();
      group.last_canonical_generation = pool_->Generation(group.last_canonical);
    }
  }
  return state;
}

void KvCacheManager::UnpinAll(RequestState& state) {
  for (int32_t g = num_groups() - 1; g >= 0; --g) {
    const std::vector<BlockId>& table = state.groups[g].table;
    for (auto b = table.rbegin(); b != table.rend(); ++b) {  // tail first
      if (*b != kNullBlock) DebugCheckOk(pool_->Unpin(*b), "the table holds one reference");
    }
  }
}

void KvCacheManager::ReleaseWindow(RequestState& state, int64_t computed) {
  for (int32_t g = 0; g < num_groups(); ++g) {
    if (!IsSlidingWindow(g)) continue;
    std::vector<BlockId>& table = state.groups[g].table;
    for (int64_t i = FirstNeededBlock(g, computed) - 1; i >= 0 && table[i] != kNullBlock; --i) {
      DebugCheckOk(pool_->Unpin(table[i]), "the table holds one reference per entry");
      table[i] = kNullBlock;
    }
  }
}

void KvCacheManager::ReleaseTail(RequestState& state, size_t keep) {
  for (GroupState& group : state.groups) {
    for (size_t i = group.table.size(); i > keep; --i) {
      const BlockId block = group.table[i - 1];
      if (block != kNullBlock) DebugCheckOk(pool_->Unpin(block), "one reference per entry");
    }
    group.table.resize(keep);
  }
}

absl::Status KvCacheManager::Free(RequestId id) {
  const auto it = requests_.find(id);
  if (it == requests_.end()) {
    return absl::NotFoundError(
        absl::StrCat("request ", id, " holds no KV blocks (never allocated, or already freed)"));
  }
  // Tail first, so a chain's tail becomes evictable before its parents.
  for (const GroupState& group : it->second.groups) {
    for (auto b = group.table.rbegin(); b != group.table.rend(); ++b) {
      if (*b != kNullBlock) DebugCheckOk(pool_->Unpin(*b), "one reference per entry");
    }
  }
  requests_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<std::span<const BlockId>> KvCacheManager::GetBlockTable(RequestId id,
                                                                       int32_t group) const {
  if (group < 0 || group >= num_groups()) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV cache group ", group, " is out of range [0, ", num_groups(), ")"));
  }
  const auto it = requests_.find(id);
  if (it == requests_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", id, " holds no KV blocks"));
  }
  return std::span<const BlockId>(it->second.groups[group].table);
}

absl::StatusOr<int64_t> KvCacheManager::NumHeldBlocks(RequestId id) const {
  const auto it = requests_.find(id);
  if (it == requests_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", id, " holds no KV blocks"));
  }
  int64_t n = 0;
  for (const GroupState& group : it->second.groups) {
    n += std::count_if(group.table.begin(), group.table.end(),
                       [](BlockId b) { return b != kNullBlock; });
  }
  return n;
}

absl::StatusOr<int64_t> KvCacheManager::NumHeldLayerBlocks(RequestId id) const {
  const auto it = requests_.find(id);
  if (it == requests_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", id, " holds no KV blocks"));
  }
  int64_t n = 0;
  for (int32_t g = 0; g < num_groups(); ++g) {
    const std::vector<BlockId>& t = it->second.groups[g].table;
    n += std::count_if(t.begin(), t.end(), [](BlockId b) { return b != kNullBlock; }) *
         int64_t{groups_[g].num_layers};
  }
  return n;
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

int32_t KvCacheManager::BlockGroup(BlockId block) const {
  if (block < 0 || block >= pool_->num_blocks()) return -1;
  if (block_group_.empty()) return 0;
  return block_group_[block];
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

}  // namespace pagedkv
