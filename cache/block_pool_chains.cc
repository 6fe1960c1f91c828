// Copyright 2026 The pagedkv Authors.
//
// BlockPool's chain links (include/pagedkv/cache/block_pool.h): which cached block is the parent of
// which, so that a block whose chain can no longer be reached from its root is never kept in
// preference to a reachable one.
//
// Invariants (checked by CheckChains):
//   - parent_of_[b] != kNullBlock only for a cached b inserted with a parent block that is still
//     cached under the same link; b is then on that parent's child list (first_child_ /
//     next_sibling_ / prev_sibling_, doubly linked).
//   - A cached block inserted with a parent block whose parent left the index is `unreachable`
//     and on no list; so is everything below it. An unreachable block is never evictable: it is
//     dropped from the index the moment it is (or becomes) unreferenced, counted in evictions and
//     unreachable_evictions.
//   - A promoted duplicate takes over its holder's place in the tree (same link, same children).
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pagedkv/cache/block_pool.h"

namespace pagedkv {

void BlockPool::LinkChild(BlockId parent, BlockId child) {
  parent_of_[child] = parent;
  prev_sibling_[child] = kNullBlock;
  next_sibling_[child] = first_child_[parent];
  if (first_child_[parent] != kNullBlock) prev_sibling_[first_child_[parent]] = child;
  first_child_[parent] = child;
}

void BlockPool::UnlinkFromParent(BlockId child) {
  const BlockId parent = parent_of_[child];
  if (parent == kNullBlock) return;
  const BlockId prev = prev_sibling_[child];
  const BlockId next = next_sibling_[child];
  if (prev != kNullBlock) {
    next_sibling_[prev] = next;
  } else {
    first_child_[parent] = next;
  }
  if (next != kNullBlock) prev_sibling_[next] = prev;
  parent_of_[child] = prev_sibling_[child] = next_sibling_[child] = kNullBlock;
}

void BlockPool::MoveChildren(BlockId from, BlockId to) {
  for (BlockId c = first_child_[from]; c != kNullBlock; c = next_sibling_[c]) parent_of_[c] = to;
  first_child_[to] = first_child_[from];
  first_child_[from] = kNullBlock;
}

void BlockPool::OrphanChildren(BlockId block) {
  std::vector<BlockId> stack;
  const auto detach_children = [&](BlockId b) {
    while (first_child_[b] != kNullBlock) {
      const BlockId c = first_child_[b];
      UnlinkFromParent(c);
      stack.push_back(c);
    }
  };
  detach_children(block);
  while (!stack.empty()) {
    const BlockId b = stack.back();
    stack.pop_back();
    BlockMeta& m = meta_[b];
    if (!m.cached || m.unreachable) continue;
    m.unreachable = true;
    detach_children(b);
    // Evictable: dropped now. Used: dropped when released (Release). A picked victim (marked
    // free, still indexed) is about to be evicted by the caller.
    if (m.state == State::kEvictable) DropUnreachable(b, /*was_evictable=*/true);
  }
}

void BlockPool::DropUnreachable(BlockId block, bool was_evictable) {
  BlockMeta& m = meta_[block];
  if (was_evictable) {
    policy_->OnRemove(block, m.hash);
    --num_evictable_;
  }
  if (m.has_duplicates) ForgetDuplicatesOf(block);
  m.state = State::kFree;
  free_stack_.push_back(block);
  ++stats_.evictions;
  ++stats_.unreachable_evictions;
  if (lifecycle_ != nullptr) lifecycle_->OnEvicted(block);
  RemoveFromIndex(block);
}

absl::Status BlockPool::CheckChains() const {
  for (BlockId b = 0; b < num_blocks_; ++b) {
    const BlockMeta& m = meta_[b];
    const BlockId p = parent_of_[b];
    if (p != kNullBlock) {
      if (!m.cached || !meta_[p].cached || meta_[p].link != m.parent_link || m.unreachable) {
        return absl::InternalError(
            absl::StrCat("block ", b, " links to parent block ", p, " that does not hold it"));
      }
    } else if (m.cached && m.parent_link != 0 && !m.unreachable) {
      return absl::InternalError(
          absl::StrCat("cached block ", b, " lost its parent but is not marked unreachable"));
    }
    if (m.unreachable && (!m.cached || m.state == State::kEvictable)) {
      return absl::InternalError(absl::StrCat("unreachable block ", b, " is kept evictable"));
    }
    for (BlockId c = first_child_[b]; c != kNullBlock; c = next_sibling_[c]) {
      if (parent_of_[c] != b) {
        return absl::InternalError(absl::StrCat("child list of block ", b, " holds block ", c));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace pagedkv
