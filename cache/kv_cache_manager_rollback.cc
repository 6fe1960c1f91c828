// Copyright 2026 The pagedkv Authors.
//
// KvCacheManager's rollback of rejected draft tokens (TruncateRequest) and its invariant check
// (include/pagedkv/cache/kv_cache_manager.h), over every group of a request.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache/debug_check.h"
#include "cache/ref_count_check.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {

absl::Status KvCacheManager::CheckTruncation(const CacheRequest& request, const RequestState& state,
                                             int64_t num_tokens) const {
  const int64_t bs = options_.block_size;
  const int64_t kept_slots = std::min(state.num_tokens, num_tokens);
  const int64_t keep = NumBlocksFor(kept_slots, bs);
  const int64_t first_dirty = num_tokens / bs;  // holds token num_tokens
  for (int32_t g = 0; g < num_groups(); ++g) {
    const std::vector<BlockId>& table = state.groups[g].table;
    if (first_dirty < keep && table[first_dirty] != kNullBlock &&
        pool_->RefCount(table[first_dirty]) > 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "block ", first_dirty, " of request ", request.id(),
          " holds kept and rejected tokens and is shared with another request; truncate at a "
          "multiple of ",
          bs, " tokens or past the shared prefix"));
    }
    for (int64_t i = FirstNeededBlock(g, kept_slots); i < keep; ++i) {
      if (table[i] != kNullBlock) continue;
      return absl::FailedPreconditionError(
          absl::StrCat("request ", request.id(), " cannot be truncated to ", num_tokens,
                       " tokens: its sliding-window group ", g, " already released block ", i,
                       ", which that window needs; roll back fewer tokens than the window"));
    }
  }
  return absl::OkStatus();
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
  PAGEDKV_RETURN_IF_ERROR(CheckTruncation(request, state, num_tokens));
  const int64_t bs = options_.block_size;
  const int64_t kept_slots = std::min(state.num_tokens, num_tokens);
  const size_t first_dirty = static_cast<size_t>(num_tokens / bs);
  DebugCheckOk(request.Truncate(num_tokens), "the length was checked above");
  // Blocks other requests also hold keep their index entry: those tokens are theirs too. A
  // duplicate cut into no longer holds its holder's content.
  for (GroupState& group : state.groups) {
    for (size_t i = first_dirty; i < group.table.size(); ++i) {
      const BlockId block = group.table[i];
      if (block == kNullBlock) continue;
      if (pool_->IsCached(block) && pool_->RefCount(block) == 1) {
        DebugCheckOk(pool_->Uncache(block), "IsCached just said so");
      }
      DebugCheckOk(pool_->DropDuplicate(block), "the block is in the table");
    }
  }
  ReleaseTail(state, static_cast<size_t>(NumBlocksFor(kept_slots, bs)));
  state.num_tokens = kept_slots;
  state.num_computed = std::min(state.num_computed, kept_slots);
  state.num_lookahead = 0;
  for (int32_t g = 0; g < num_groups(); ++g) {
    GroupState& group = state.groups[g];
    if (group.num_cached_blocks <= static_cast<int64_t>(first_dirty)) continue;
    group.num_cached_blocks = static_cast<int64_t>(first_dirty);
    if (linked_chains()) ResetCanonical(request, g, group);
  }
  return absl::OkStatus();
}

void KvCacheManager::ResetCanonical(const CacheRequest& request, int32_t g, GroupState& state) {
  state.last_canonical = kNullBlock;
  if (state.num_cached_blocks == 0 || !options_.verify_tokens) return;
  const int64_t i = state.num_cached_blocks - 1;
  const BlockId holder = pool_->FindCached(GroupBlockHash(request, g, i));
  const BlockId prev = i > 0 ? pool_->FindCached(GroupBlockHash(request, g, i - 1)) : kNullBlock;
  if (holder == kNullBlock || !Verify(holder, request, g, i, prev)) {
    // The chain cannot be followed from here: later blocks of this request are not cached.
    state.chain_broken = true;
    return;
  }
  state.last_canonical = holder;
  state.last_canonical_generation = pool_->Generation(holder);
}

absl::Status KvCacheManager::CheckTables(RequestId id, const RequestState& state,
                                         std::vector<int32_t>& refs) const {
  const int64_t expected =
      NumBlocksFor(state.num_tokens + state.num_lookahead, options_.block_size);
  for (int32_t g = 0; g < num_groups(); ++g) {
    const std::vector<BlockId>& table = state.groups[g].table;
    if (static_cast<int64_t>(table.size()) != expected) {
      return absl::InternalError(absl::StrCat("request ", id, " group ", g, " covers ",
                                              state.num_tokens, " tokens + ", state.num_lookahead,
                                              " lookahead slots with ", table.size(), " blocks"));
    }
    const int64_t first = FirstNeededBlock(g, state.num_computed);
    for (int64_t i = 0; i < expected; ++i) {
      const BlockId b = table[i];
      if (IsSlidingWindow(g) && (b == kNullBlock) != (i < first)) {
        return absl::InternalError(absl::StrCat("request ", id, " group ", g, " entry ", i, " is ",
                                                b, " but the window starts at block ", first));
      }
      if (b == kNullBlock && IsSlidingWindow(g)) continue;
      if (b < 0 || b >= pool_->num_blocks()) {
        return absl::InternalError(absl::StrCat("request ", id, " holds invalid block ", b));
      }
      if (!block_group_.empty() && pool_->IsCached(b) && block_group_[b] != g) {
        return absl::InternalError(absl::StrCat("block ", b, " in group ", g, " of request ", id,
                                                " is cached for group ", block_group_[b]));
      }
      ++refs[b];
    }
  }
  return absl::OkStatus();
}

absl::Status KvCacheManager::ValidateInvariants() const {
  PAGEDKV_RETURN_IF_ERROR(pool_->ValidateInvariants());
  std::vector<int32_t> refs(pool_->num_blocks(), 0);
  for (const auto& [id, state] : requests_) {
    PAGEDKV_RETURN_IF_ERROR(CheckTables(id, state, refs));
  }
  return CheckRefCounts(*pool_, refs);
}

}  // namespace pagedkv
