// Copyright 2026 The pagedkv Authors.
//
// HybridKvCacheManager: one block table per KV cache group over one BlockPool. See
// include/pagedkv/hybrid_kv_cache_manager.h for the contract. Lookups live in
// hybrid_kv_cache_hit.cc, event batching in hybrid_kv_cache_events.cc.
//
// Invariants (checked by ValidateInvariants):
//   - every request's table of group g has NumBlocksFor(num_tokens, block_size) entries;
//   - entry i of a sliding-window table is kNullBlock exactly when i < FirstNeededBlock(g,
//     num_computed); full-attention tables have no null entry;
//   - each block's reference count equals the number of non-null table entries holding it;
//   - a cached block held by group g's table was cached for group g (block_group_).
#include "pagedkv/hybrid_kv_cache_manager.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache/debug_check.h"
#include "cache/ref_count_check.h"
#include "cache/request_check.h"
#include "pagedkv/checked_math.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

absl::Status CheckGroups(const std::vector<KvCacheGroupSpec>& groups) {
  if (groups.empty()) {
    return absl::InvalidArgumentError(
        "HybridKvCacheManagerOptions.groups is empty; give one KvCacheGroupSpec per layer kind");
  }
  bool has_full = false;
  for (size_t g = 0; g < groups.size(); ++g) {
    const KvCacheGroupSpec& s = groups[g];
    if (s.num_layers <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("group ", g, ": num_layers must be > 0, got ", s.num_layers));
    }
    if (s.kind == KvCacheGroupKind::kSlidingWindow && s.sliding_window <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("group ", g, ": a sliding-window group needs sliding_window > 0, got ",
                       s.sliding_window));
    }
    has_full |= s.kind == KvCacheGroupKind::kFullAttention;
  }
  if (!has_full) {
    return absl::InvalidArgumentError(
        "HybridKvCacheManagerOptions.groups has no full-attention group; a model of only "
        "sliding-window layers is not supported");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<HybridKvCacheManager>> HybridKvCacheManager::Create(
    HybridKvCacheManagerOptions options, std::unique_ptr<EvictionPolicy> policy) {
  if (options.num_blocks <= 0 || options.block_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("HybridKvCacheManagerOptions.num_blocks and block_size must be > 0, got ",
                     options.num_blocks, " and ", options.block_size));
  }
  PAGEDKV_RETURN_IF_ERROR(CheckGroups(options.groups));
  if (options.vocab_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HybridKvCacheManagerOptions.vocab_size must be >= 0, got ", options.vocab_size));
  }
  BlockPoolOptions pool_options{.num_blocks = options.num_blocks,
                                .block_size = options.block_size,
                                .store_tokens = options.enable_prefix_caching,
                                .eviction_policy = options.eviction_policy};
  auto pool = BlockPool::Create(pool_options, std::move(policy));
  if (!pool.ok()) return pool.status();
  return std::unique_ptr<HybridKvCacheManager>(
      new HybridKvCacheManager(std::move(options), *std::move(pool)));
}

HybridKvCacheManager::HybridKvCacheManager(HybridKvCacheManagerOptions options,
                                           std::unique_ptr<BlockPool> pool)
    : options_(std::move(options)), pool_(std::move(pool)), block_group_(pool_->num_blocks(), -1) {
  if (options_.collect_event_batches) {
    pool_->AddEventListener([this](const KvEvent& e) { OnPoolEvent(e); });
  }
}

absl::StatusOr<CacheRequest> HybridKvCacheManager::NewRequest(RequestId id,
                                                              std::span<const TokenId> prompt,
                                                              const RequestCacheKeys& keys) const {
  return CacheRequest::Create(CacheRequestOptions{.id = id,
                                                  .block_size = options_.block_size,
                                                  .cache_salt = keys.cache_salt,
                                                  .model_fingerprint = options_.model_fingerprint,
                                                  .adapter_id = keys.adapter_id,
                                                  .multimodal = keys.multimodal,
                                                  .vocab_size = options_.vocab_size,
                                                  .hasher = options_.hasher},
                              prompt);
}

absl::Status HybridKvCacheManager::CheckRequest(const CacheRequest& request) const {
  return CheckRequestMatchesManager(request, options_.block_size, options_.vocab_size);
}

int64_t HybridKvCacheManager::FirstNeededBlock(int32_t g, int64_t computed) const {
  const KvCacheGroupSpec& s = options_.groups[g];
  if (s.kind != KvCacheGroupKind::kSlidingWindow) return 0;
  // The next token to compute, at index `computed`, attends to [computed - window + 1, computed].
  const int64_t first_token = computed - s.sliding_window + 1;
  return first_token <= 0 ? 0 : first_token / options_.block_size;
}

absl::Status HybridKvCacheManager::CheckComputed(const CacheRequest& request,
                                                 const HybridComputedBlocks& computed,
                                                 Plan& plan) const {
  const int64_t bs = options_.block_size;
  if (computed.blocks.empty() && computed.num_computed_tokens == 0) return absl::OkStatus();
  if (!plan.is_new) {
    return absl::InvalidArgumentError(
        absl::StrCat("request ", request.id(),
                     " already has blocks; pass computed blocks only on its first "
                     "AllocateSlots"));
  }
  const int64_t n = computed.num_computed_tokens / bs;
  if (computed.blocks.size() != options_.groups.size() || computed.num_computed_tokens % bs != 0 ||
      n > request.num_full_blocks()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "computed blocks of request ", request.id(), " must hold one list per group (",
        options_.groups.size(), ") for a multiple of ", bs, " tokens within its full blocks; got ",
        computed.blocks.size(), " lists for ", computed.num_computed_tokens, " tokens"));
  }
  for (int32_t g = 0; g < num_groups(); ++g) {
    const std::vector<BlockId>& list = computed.blocks[g];
    const int64_t first = FirstNeededBlock(g, computed.num_computed_tokens);
    if (static_cast<int64_t>(list.size()) != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("group ", g, " lists ", list.size(), " computed blocks, expected ", n));
    }
    for (int64_t i = 0; i < n; ++i) {
      const BlockId b = list[i];
      if ((b == kNullBlock) != (i < first)) {
        return absl::InvalidArgumentError(absl::StrCat("computed block ", i, " of group ", g,
                                                       " must be ", i < first ? "null" : "a block",
                                                       "; pass what GetComputedBlocks returned"));
      }
      if (b == kNullBlock) continue;
      if (!Verify(b, request, g, i)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "computed block ", i, " of group ", g, " (block id ", b, ") of request ", request.id(),
            " is no longer cached for it; call GetComputedBlocks again in the same step"));
      }
      if (pool_->RefCount(b) == 0) ++plan.counts.per_group[g];
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<HybridKvCacheManager::Plan> HybridKvCacheManager::MakePlan(
    const CacheRequest& request, int64_t num_new_tokens,
    const HybridComputedBlocks& computed) const {
  PAGEDKV_RETURN_IF_ERROR(CheckRequest(request));
  if (num_new_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_new_tokens must be >= 0, got ", num_new_tokens));
  }
  const auto it = requests_.find(request.id());
  Plan plan;
  plan.is_new = it == requests_.end();
  plan.counts.per_group.assign(options_.groups.size(), 0);
  plan.counts.released.assign(options_.groups.size(), 0);
  PAGEDKV_RETURN_IF_ERROR(CheckComputed(request, computed, plan));
  plan.computed_tokens = plan.is_new ? computed.num_computed_tokens : it->second.num_tokens;
  if (!CheckedAdd(plan.computed_tokens, num_new_tokens, &plan.total_tokens) ||
      plan.total_tokens > request.num_tokens()) {
    return absl::InvalidArgumentError(
        absl::StrCat("request ", request.id(), " has ", request.num_tokens(),
                     " tokens; cannot allocate slots "
                     "for ",
                     plan.computed_tokens, " + ", num_new_tokens, "; append tokens first"));
  }
  const int64_t needed = NumBlocksFor(plan.total_tokens, options_.block_size);
  const int64_t held = NumBlocksFor(plan.computed_tokens, options_.block_size);
  plan.new_per_group = std::max<int64_t>(0, needed - held);
  for (int32_t g = 0; g < num_groups(); ++g) {
    const int64_t count = plan.counts.per_group[g] + plan.new_per_group;
    plan.counts.per_group[g] =
        static_cast<int32_t>(std::min<int64_t>(count, options_.num_blocks + int64_t{1}));
    plan.counts.total = static_cast<int32_t>(std::min<int64_t>(
        int64_t{plan.counts.total} + plan.counts.per_group[g], options_.num_blocks + int64_t{1}));
    if (plan.is_new) continue;
    const std::vector<BlockId>& table = it->second.tables[g];
    for (int64_t i = FirstNeededBlock(g, plan.computed_tokens) - 1;
         i >= 0 && table[i] != kNullBlock; --i) {
      ++plan.counts.released[g];
      if (pool_->RefCount(table[i]) == 1) ++plan.releasable;
    }
    plan.counts.total_released += plan.counts.released[g];
  }
  return plan;
}

absl::StatusOr<HybridAllocationPlan> HybridKvCacheManager::NumBlocksToAllocate(
    const CacheRequest& request, int64_t num_new_tokens,
    const HybridComputedBlocks& computed) const {
  PAGEDKV_ASSIGN_OR_RETURN(Plan plan, MakePlan(request, num_new_tokens, computed));
  return plan.counts;
}

void HybridKvCacheManager::PinComputed(const HybridComputedBlocks& computed, RequestState& state) {
  const int64_t n = computed.num_computed_tokens / options_.block_size;
  for (int32_t g = 0; g < num_groups(); ++g) {
    std::vector<BlockId>& table = state.tables[g];
    if (!computed.blocks.empty()) table = computed.blocks[g];
    for (const BlockId b : table) {
      if (b != kNullBlock) DebugCheckOk(pool_->Pin(b), "MakePlan checked the block is cached");
    }
    state.num_cached[g] = n;
  }
}

void HybridKvCacheManager::ReleaseSkipped(RequestState& state, int64_t computed) {
  for (int32_t g = 0; g < num_groups(); ++g) {
    std::vector<BlockId>& table = state.tables[g];
    for (int64_t i = FirstNeededBlock(g, computed) - 1; i >= 0 && table[i] != kNullBlock; --i) {
      DebugCheckOk(pool_->Unpin(table[i]), "the table holds one reference per entry");
      table[i] = kNullBlock;
    }
  }
}

absl::Status HybridKvCacheManager::AllocateSlots(const CacheRequest& request,
                                                 int64_t num_new_tokens,
                                                 const HybridComputedBlocks& computed) {
  PAGEDKV_ASSIGN_OR_RETURN(Plan plan, MakePlan(request, num_new_tokens, computed));
  if (plan.counts.total > pool_->NumAvailableBlocks() + plan.releasable) {
    return absl::ResourceExhaustedError(
        absl::StrCat("request ", request.id(), " needs ", plan.counts.total,
                     " more KV blocks over ", num_groups(), " groups but only ",
                     pool_->NumAvailableBlocks() + plan.releasable, " of ", pool_->num_blocks(),
                     " are free, evictable or released by this call; wait for requests "
                     "to finish or preempt one"));
  }
  RequestState fresh_state;
  RequestState* state = &fresh_state;
  if (plan.is_new) {
    fresh_state.tables.resize(options_.groups.size());
    fresh_state.num_cached.assign(options_.groups.size(), 0);
    PinComputed(computed, fresh_state);
    for (int32_t g = 0; g < num_groups(); ++g) {
      roots_.insert(FoldGroupHash(request.root_hash(), g));
    }
  } else {
    state = &requests_.find(request.id())->second;
    ReleaseSkipped(*state, plan.computed_tokens);
  }
  const int32_t new_blocks = static_cast<int32_t>(plan.new_per_group) * num_groups();
  std::vector<BlockId> fresh;
  if (absl::Status allocated = pool_->Allocate(new_blocks, &fresh); !allocated.ok()) {
    for (int32_t g = num_groups() - 1; g >= 0 && plan.is_new; --g) {
      std::vector<BlockId>& t = state->tables[g];
      for (auto b = t.rbegin(); b != t.rend(); ++b) {
        if (*b != kNullBlock) DebugCheckOk(pool_->Unpin(*b), "pinned just above");
      }
    }
    return allocated;
  }
  const int64_t per_group = plan.new_per_group;
  for (int32_t g = 0; g < num_groups(); ++g) {
    state->tables[g].insert(state->tables[g].end(), fresh.begin() + g * per_group,
                            fresh.begin() + (g + 1) * per_group);
  }
  state->num_tokens = plan.total_tokens;
  state->num_computed = plan.computed_tokens;
  if (plan.is_new) state = &(requests_[request.id()] = std::move(fresh_state));
  if (options_.enable_prefix_caching) {
    for (int32_t g = 0; g < num_groups(); ++g) CacheFullBlocks(request, *state, g);
  }
  return absl::OkStatus();
}

void HybridKvCacheManager::CacheFullBlocks(const CacheRequest& request, RequestState& state,
                                           int32_t g) {
  const int64_t full = std::min(state.num_tokens / options_.block_size, request.num_full_blocks());
  for (int64_t i = state.num_cached[g]; i < full; ++i) {
    const BlockId b = state.tables[g][i];
    if (b == kNullBlock) continue;
    const BlockInsert insert{.block = b,
                             .hash = FoldGroupHash(request.block_hashes()[i], g),
                             .parent_hash = FoldGroupHash(request.ParentHashOf(i), g),
                             .tokens = request.BlockTokens(i),
                             .parent_block = kNullBlock,
                             .extra_digest = request.BlockExtraDigest(i)};
    block_group_[b] = g;  // before Insert: its kBlockStored event reads it
    const absl::StatusOr<bool> indexed = pool_->Insert(insert);
    DebugCheckOk(indexed.status(), "the block is in this request's table and was never cached");
    if (indexed.ok() && !*indexed) {
      // Same hash already cached (computed concurrently): keep this copy as a duplicate.
      DebugCheckOk(pool_->AddDuplicate(insert).status(), "the block is used and uncached");
    }
  }
  state.num_cached[g] = std::max(state.num_cached[g], full);
}

absl::Status HybridKvCacheManager::Free(RequestId id) {
  const auto it = requests_.find(id);
  if (it == requests_.end()) {
    return absl::NotFoundError(
        absl::StrCat("request ", id, " holds no KV blocks (never allocated, or already freed)"));
  }
  for (const std::vector<BlockId>& table : it->second.tables) {
    for (auto b = table.rbegin(); b != table.rend(); ++b) {  // tail first
      if (*b != kNullBlock) DebugCheckOk(pool_->Unpin(*b), "one reference per entry");
    }
  }
  requests_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<std::span<const BlockId>> HybridKvCacheManager::GetBlockTable(RequestId id,
                                                                             int32_t group) const {
  if (group < 0 || group >= num_groups()) {
    return absl::InvalidArgumentError(
        absl::StrCat("group ", group, " is out of range [0, ", num_groups(), ")"));
  }
  const auto it = requests_.find(id);
  if (it == requests_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", id, " holds no KV blocks"));
  }
  return std::span<const BlockId>(it->second.tables[group]);
}

absl::StatusOr<int64_t> HybridKvCacheManager::NumHeldBlocks(RequestId id) const {
  const auto it = requests_.find(id);
  if (it == requests_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", id, " holds no KV blocks"));
  }
  int64_t n = 0;
  for (const std::vector<BlockId>& t : it->second.tables) {
    n += static_cast<int64_t>(t.size() - std::count(t.begin(), t.end(), kNullBlock));
  }
  return n;
}

absl::StatusOr<int64_t> HybridKvCacheManager::NumHeldLayerBlocks(RequestId id) const {
  const auto it = requests_.find(id);
  if (it == requests_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", id, " holds no KV blocks"));
  }
  int64_t n = 0;
  for (int32_t g = 0; g < num_groups(); ++g) {
    const std::vector<BlockId>& t = it->second.tables[g];
    n += static_cast<int64_t>(t.size() - std::count(t.begin(), t.end(), kNullBlock)) *
         options_.groups[g].num_layers;
  }
  return n;
}

absl::StatusOr<int64_t> HybridKvCacheManager::NumAllocatedTokens(RequestId id) const {
  const auto it = requests_.find(id);
  if (it == requests_.end()) {
    return absl::NotFoundError(absl::StrCat("request ", id, " holds no KV blocks"));
  }
  return it->second.num_tokens;
}

int32_t HybridKvCacheManager::BlockGroup(BlockId block) const {
  if (block < 0 || block >= pool_->num_blocks()) return -1;
  return block_group_[block];
}

CacheStats HybridKvCacheManager::stats() const {
  CacheStats s = stats_;
  const CacheStats& p = pool_->stats();
  s.stored_blocks = p.stored_blocks;
  s.evictions = p.evictions;
  s.resets = p.resets;
  s.promoted_duplicates = p.promoted_duplicates;
  return s;
}

absl::Status HybridKvCacheManager::CheckTables(RequestId id, const RequestState& state,
                                               std::vector<int32_t>& refs) const {
  const int64_t expected = NumBlocksFor(state.num_tokens, options_.block_size);
  for (int32_t g = 0; g < num_groups(); ++g) {
    const std::vector<BlockId>& t = state.tables[g];
    if (static_cast<int64_t>(t.size()) != expected) {
      return absl::InternalError(absl::StrCat("request ", id, " group ", g, " covers ",
                                              state.num_tokens, " tokens with ", t.size(),
                                              " blocks"));
    }
    const int64_t first = FirstNeededBlock(g, state.num_computed);
    for (int64_t i = 0; i < expected; ++i) {
      const BlockId b = t[i];
      if ((b == kNullBlock) != (i < first)) {
        return absl::InternalError(absl::StrCat("request ", id, " group ", g, " entry ", i, " is ",
                                                b, " but the window starts at block ", first));
      }
      if (b == kNullBlock) continue;
      if (b < 0 || b >= pool_->num_blocks()) {
        return absl::InternalError(absl::StrCat("request ", id, " holds invalid block ", b));
      }
      if (pool_->IsCached(b) && block_group_[b] != g) {
        return absl::InternalError(absl::StrCat("block ", b, " in group ", g, " of request ", id,
                                                " is cached for group ", block_group_[b]));
      }
      ++refs[b];
    }
  }
  return absl::OkStatus();
}

absl::Status HybridKvCacheManager::ValidateInvariants() const {
  PAGEDKV_RETURN_IF_ERROR(pool_->ValidateInvariants());
  std::vector<int32_t> refs(pool_->num_blocks(), 0);
  for (const auto& [id, state] : requests_) {
    PAGEDKV_RETURN_IF_ERROR(CheckTables(id, state, refs));
  }
  return CheckRefCounts(*pool_, refs);
}

}  // namespace pagedkv
