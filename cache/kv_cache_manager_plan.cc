// Copyright 2026 The pagedkv Authors.
//
// KvCacheManager's planning (include/pagedkv/cache/kv_cache_manager.h): the checks of
// AllocateSlots' arguments and what the call would take and release, shared by AllocateSlots,
// NumBlocksToAllocate and PlanAllocation so that a plan never disagrees with the call.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/checked_math.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {

absl::Status KvCacheManager::CheckComputedGroup(const CacheRequest& request,
                                                const ComputedBlocks& computed, int32_t g,
                                                Plan& plan) const {
  const std::span<const BlockId> blocks = computed.group(g);
  const int64_t n = static_cast<int64_t>(computed.blocks.size());
  if (static_cast<int64_t>(blocks.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("group ", g, " lists ", blocks.size(), " computed blocks, expected ", n));
  }
  const bool window = IsSlidingWindow(g);
  const int64_t first = FirstNeededBlock(g, computed.num_computed_tokens);
  BlockId prev = kNullBlock;
  for (int64_t i = 0; i < n; ++i) {
    const BlockId block = blocks[i];
    if (window && (block == kNullBlock) != (i < first)) {
      return absl::InvalidArgumentError(absl::StrCat("computed block ", i, " of group ", g,
                                                     " must be ", i < first ? "null" : "a block",
                                                     "; pass what GetComputedBlocks returned"));
    }
    if (block == kNullBlock && window) continue;
    const std::optional<BlockHash> hash = pool_->CachedHash(block);
    if (!hash.has_value() || *hash != GroupBlockHash(request, g, i) ||
        (options_.verify_tokens && !Verify(block, request, g, i, prev))) {
      return absl::FailedPreconditionError(
          absl::StrCat("computed block ", i, g > 0 ? absl::StrCat(" of group ", g) : "",
                       " (block id ", block, ") of request ", request.id(),
                       " is no longer cached for it; call GetComputedBlocks again in the same "
                       "step"));
    }
    if (pool_->RefCount(block) == 0) ++plan.evictable_hits[g];
    prev = block;
  }
  return absl::OkStatus();
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
  const bool no_other_groups = computed.other_groups.empty() && num_computed == 0;
  if (!no_other_groups && computed.other_groups.size() + 1 != groups_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("computed blocks of request ", request.id(), " list ",
                     computed.other_groups.size() + 1, " KV cache groups but the manager has ",
                     groups_.size(), "; pass what GetComputedBlocks returned"));
  }
  const int32_t groups_to_check = no_other_groups ? 1 : num_groups();
  for (int32_t g = 0; g < groups_to_check; ++g) {
    PAGEDKV_RETURN_IF_ERROR(CheckComputedGroup(request, computed, g, plan));
  }
  return absl::OkStatus();
}

void KvCacheManager::PlanWindowReleases(const RequestState& state, Plan& plan) const {
  for (int32_t g = 0; g < num_groups(); ++g) {
    if (!IsSlidingWindow(g)) continue;
    const std::vector<BlockId>& table = state.groups[g].table;
    for (int64_t i = FirstNeededBlock(g, plan.computed_tokens) - 1;
         i >= 0 && table[i] != kNullBlock; --i) {
      ++plan.window_released[g];
      if (pool_->RefCount(table[i]) == 1) ++plan.releasable;
    }
  }
}

absl::StatusOr<KvCacheManager::Plan> KvCacheManager::MakePlan(
    const CacheRequest& request, int64_t num_new_tokens, const ComputedBlocks& new_computed_blocks,
    int64_t num_lookahead) const {
  PAGEDKV_RETURN_IF_ERROR(CheckRequest(request));
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
  plan.evictable_hits.assign(groups_.size(), 0);
  plan.window_released.assign(groups_.size(), 0);
  PAGEDKV_RETURN_IF_ERROR(CheckComputed(request, new_computed_blocks, plan));
  plan.computed_tokens =
      plan.is_new ? new_computed_blocks.num_computed_tokens : it->second.num_tokens;
  if (!CheckedAdd(plan.computed_tokens, num_new_tokens, &plan.total_tokens) ||
      plan.total_tokens > request.num_tokens()) {
    return absl::InvalidArgumentError(
        absl::StrCat("request ", request.id(), " has ", request.num_tokens(),
                     " tokens; cannot allocate slots for ", plan.computed_tokens, " + ",
                     num_new_tokens, "; append tokens to the CacheRequest first"));
  }
  int64_t slots = 0;
  if (!CheckedAdd(plan.total_tokens, num_lookahead, &slots)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request ", request.id(), " cannot reserve ", num_lookahead, " lookahead tokens past ",
        plan.total_tokens, " tokens (overflow); propose fewer draft tokens"));
  }
  const int64_t blocks_needed = NumBlocksFor(slots, options_.block_size);
  const int64_t blocks_held = plan.is_new ? static_cast<int64_t>(new_computed_blocks.blocks.size())
                                          : static_cast<int64_t>(it->second.groups[0].table.size());
  // Saturated: more than the pool holds is ResourceExhausted in AllocateSlots.
  plan.new_blocks = static_cast<int32_t>(
      std::clamp<int64_t>(blocks_needed - blocks_held, 0, options_.num_blocks + int64_t{1}));
  plan.release_blocks = static_cast<int32_t>(std::max<int64_t>(0, blocks_held - blocks_needed));
  if (!plan.is_new) PlanWindowReleases(it->second, plan);
  int64_t taken = 0;
  for (int32_t g = 0; g < num_groups(); ++g) taken += plan.new_blocks + plan.evictable_hits[g];
  plan.taken = static_cast<int32_t>(std::min<int64_t>(taken, INT32_MAX));
  return plan;
}

absl::StatusOr<int32_t> KvCacheManager::NumBlocksToAllocate(
    const CacheRequest& request, int64_t num_new_tokens, const ComputedBlocks& new_computed_blocks,
    const AllocateOptions& options) const {
  PAGEDKV_ASSIGN_OR_RETURN(const Plan plan, MakePlan(request, num_new_tokens, new_computed_blocks,
                                                     options.num_lookahead_tokens));
  return plan.taken;
}

absl::StatusOr<AllocationPlan> KvCacheManager::PlanAllocation(
    const CacheRequest& request, int64_t num_new_tokens, const ComputedBlocks& new_computed_blocks,
    const AllocateOptions& options) const {
  PAGEDKV_ASSIGN_OR_RETURN(const Plan plan, MakePlan(request, num_new_tokens, new_computed_blocks,
                                                     options.num_lookahead_tokens));
  const int64_t cap = options_.num_blocks + int64_t{1};
  AllocationPlan out;
  for (int32_t g = 0; g < num_groups(); ++g) {
    out.per_group.push_back(static_cast<int32_t>(
        std::min<int64_t>(int64_t{plan.new_blocks} + plan.evictable_hits[g], cap)));
    out.total = static_cast<int32_t>(std::min<int64_t>(int64_t{out.total} + out.per_group[g], cap));
    out.released.push_back(plan.window_released[g]);
    out.total_released += plan.window_released[g];
  }
  return out;
}

int64_t KvCacheManager::PeakBlocksFor(int64_t num_tokens, int64_t max_chunk) const {
  const int64_t bs = options_.block_size;
  const int64_t all = NumBlocksFor(num_tokens, options_.block_size);
  int64_t total = 0;
  for (int32_t g = 0; g < num_groups(); ++g) {
    if (!IsSlidingWindow(g)) {
      total += all;
      continue;
    }
    // Blocks from the first one the window needs (partial at both ends) through the chunk's end.
    const int64_t window = (groups_[g].sliding_window - 1 + bs - 1) / bs + 1;
    total += std::min(all, window + (max_chunk + bs - 1) / bs + 1);
  }
  return total;
}

}  // namespace pagedkv
