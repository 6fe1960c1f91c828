// Copyright 2026 The pagedkv Authors.
//
// BlockPool's duplicates: used, uncached blocks holding the same KV as an indexed block, promoted
// into the index when that block is evicted. See AddDuplicate in
// include/pagedkv/cache/block_pool.h.
#include <algorithm>
#include <cstddef>
#include <new>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache/policies/priority_policy.h"
#include "pagedkv/cache/block_pool.h"

namespace pagedkv {

absl::StatusOr<bool> BlockPool::AddDuplicate(const BlockInsert& dup) {
  const BlockId block = dup.block;
  if (!InRange(block)) {
    return absl::InvalidArgumentError(
        absl::StrCat("block id ", block, " is out of range [0, ", num_blocks_, ")"));
  }
  BlockMeta& m = meta_[block];
  if (m.state != State::kUsed || m.cached || m.is_duplicate) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot record block ", block, " as a duplicate: it must be in use and uncached",
        m.is_duplicate ? " and is already a duplicate" : ""));
  }
  if (!dup.tokens.empty() && dup.tokens.size() != static_cast<size_t>(block_size_)) {
    return absl::InvalidArgumentError(absl::StrCat("duplicate block ", block, " has ",
                                                   dup.tokens.size(), " tokens: pass none or ",
                                                   block_size_));
  }
  const BlockId holder = FindCached(dup.hash);
  if (holder == kNullBlock || parent_hash_[holder] != dup.parent_hash ||
      !ExtraKeysMatch(holder, dup.extra_digest) ||
      (!dup.tokens.empty() && !TokensMatch(holder, dup.tokens))) {
    return false;  // nothing cached under the hash, or different content
  }
  try {
    duplicates_[holder].push_back(block);
    duplicate_holder_[block] = holder;
  } catch (const std::bad_alloc&) {
    const auto it = duplicates_.find(holder);
    if (it != duplicates_.end() && !it->second.empty() && it->second.back() == block) {
      it->second.pop_back();
      if (it->second.empty()) duplicates_.erase(it);
    }
    return absl::ResourceExhaustedError("BlockPool: out of memory recording a duplicate block");
  }
  m.is_duplicate = true;
  meta_[holder].has_duplicates = true;
  return true;
}

BlockId BlockPool::PromoteDuplicate(BlockId holder, bool holder_had_tokens) {
  const auto it = duplicates_.find(holder);
  BlockMeta& h = meta_[holder];
  h.has_duplicates = false;
  if (it == duplicates_.end()) return kNullBlock;
  std::vector<BlockId> dups = std::move(it->second);
  duplicates_.erase(it);
  const BlockId x = dups.front();
  duplicate_holder_.erase(x);
  BlockMeta& m = meta_[x];
  m.is_duplicate = false;
  m.hash = h.hash;
  if (!index_.Insert(m.hash, x, KeyOf{this})) {
    // An event listener re-used the hash meanwhile: the duplicates are not needed any more.
    for (size_t i = 1; i < dups.size(); ++i) {
      duplicate_holder_.erase(dups[i]);
      meta_[dups[i]].is_duplicate = false;
    }
    return kNullBlock;
  }
  m.cached = true;
  parent_hash_[x] = parent_hash_[holder];
  m.has_extra = h.has_extra;
  m.chunk_domain = h.chunk_domain;
  if (m.has_extra) chain_[x] = chain_[holder];
  ++m.generation;
  m.link = h.link;  // same content: whatever was linked to the holder is linked to x
  m.parent_link = h.parent_link;
  m.has_tokens = holder_had_tokens;
  const ptrdiff_t bs = block_size_;
  if (m.has_tokens) std::copy_n(tokens_ + holder * bs, bs, tokens_ + x * bs);
  ++stats_.promoted_duplicates;
  ++stats_.stored_blocks;  // it entered the index: stored_blocks - evictions stays the count
  m.unreachable = false;
  if (priorities_ != nullptr) priorities_->InheritNext(x, holder);
  policy_->OnInsertInChain(x, m.hash, parent_hash_[x], kNullBlock);
  if (dups.size() > 1) {
    for (size_t i = 1; i < dups.size(); ++i) duplicate_holder_[dups[i]] = x;
    dups.erase(dups.begin());
    duplicates_[x] = std::move(dups);
    m.has_duplicates = true;
  }
  if (!listeners_.empty()) {
    Emit(KvEvent{.type = KvEventType::kBlockStored,
                 .hash = m.hash,
                 .parent_hash = parent_hash_[x],
                 .token_count = block_size_,
                 .block = x,
                 .token_ids = CachedTokens(x),
                 .domain = m.chunk_domain ? BlockDomain::kChunk : BlockDomain::kPrefix});
  }
  return x;
}

absl::Status BlockPool::DropDuplicate(BlockId block) {
  if (!InRange(block)) {
    return absl::InvalidArgumentError(
        absl::StrCat("block id ", block, " is out of range [0, ", num_blocks_, ")"));
  }
  if (meta_[block].is_duplicate) ForgetDuplicate(block);
  return absl::OkStatus();
}

void BlockPool::ForgetDuplicate(BlockId block) {
  const auto holder_it = duplicate_holder_.find(block);
  meta_[block].is_duplicate = false;
  if (holder_it == duplicate_holder_.end()) return;
  const BlockId holder = holder_it->second;
  duplicate_holder_.erase(holder_it);
  const auto it = duplicates_.find(holder);
  if (it == duplicates_.end()) return;
  std::erase(it->second, block);
  if (it->second.empty()) {
    duplicates_.erase(it);
    meta_[holder].has_duplicates = false;
  }
}

void BlockPool::ForgetDuplicatesOf(BlockId holder) {
  meta_[holder].has_duplicates = false;
  const auto it = duplicates_.find(holder);
  if (it == duplicates_.end()) return;
  for (const BlockId d : it->second) {
    duplicate_holder_.erase(d);
    meta_[d].is_duplicate = false;
  }
  duplicates_.erase(it);
}

void BlockPool::ForgetAllDuplicates() {
  for (const auto& [dup, holder] : duplicate_holder_) {
    meta_[dup].is_duplicate = false;
    meta_[holder].has_duplicates = false;
  }
  duplicate_holder_.clear();
  duplicates_.clear();
}

absl::Status BlockPool::CheckDuplicates() const {
  int32_t flagged = 0, holders = 0;
  for (BlockId b = 0; b < num_blocks_; ++b) {
    flagged += meta_[b].is_duplicate;
    holders += meta_[b].has_duplicates;
  }
  if (flagged != NumDuplicateBlocks() || holders != static_cast<int32_t>(duplicates_.size())) {
    return absl::InternalError(absl::StrCat(flagged, " blocks are flagged duplicates and ", holders,
                                            " holders, but ", NumDuplicateBlocks(), " / ",
                                            duplicates_.size(), " are recorded"));
  }
  for (const auto& [dup, holder] : duplicate_holder_) {
    const BlockMeta& d = meta_[dup];
    const auto it = duplicates_.find(holder);
    if (d.state != State::kUsed || d.cached || !meta_[holder].cached || it == duplicates_.end() ||
        std::find(it->second.begin(), it->second.end(), dup) == it->second.end()) {
      return absl::InternalError(absl::StrCat("duplicate block ", dup, " of holder ", holder,
                                              " is not a used, uncached block of a cached one"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pagedkv
