// Copyright 2026 The pagedkv Authors.
//
// BlockLists: a fixed number of intrusive doubly linked lists over block ids in [0, num_blocks),
// stored in flat arrays (one sentinel per list after the blocks). A block is on at most one list.
// Every operation is O(1) and allocation-free after Init. Eviction policies keep their queues
// (ARC's T1/T2, S3-FIFO's small and main queues, TinyLFU's segments) in it.
//
// Example:
//   internal::BlockLists lists;
//   lists.Init(/*num_blocks=*/8, /*num_lists=*/2);
//   lists.PushBack(0, 5);          // list 0: [5]
//   lists.PushBack(0, 3);          // list 0: [5, 3]  (oldest at the front)
//   lists.Front(0);                // 5
//   lists.Remove(5);               // list 0: [3]
#ifndef PAGEDKV_CACHE_POLICIES_BLOCK_LISTS_H_
#define PAGEDKV_CACHE_POLICIES_BLOCK_LISTS_H_

#include <cstdint>
#include <vector>

#include "pagedkv/types.h"

namespace pagedkv::internal {

class BlockLists {
 public:
  static constexpr int32_t kNoList = -1;

  // Empties every list. REQUIRES: num_blocks >= 0, num_lists >= 1.
  void Init(int32_t num_blocks, int32_t num_lists) {
    num_blocks_ = num_blocks;
    links_.assign(num_blocks + num_lists, Links{});
    list_of_.assign(num_blocks, kNoList);
    sizes_.assign(num_lists, 0);
    for (int32_t l = 0; l < num_lists; ++l) {
      const int32_t s = num_blocks + l;
      links_[s] = Links{s, s};
    }
  }

  // Appends `block` at the back (newest end) of `list`, first removing it from any list.
  void PushBack(int32_t list, BlockId block) {
    Remove(block);
    const int32_t s = num_blocks_ + list;
    const int32_t last = links_[s].prev;
    links_[block] = Links{last, s};
    links_[last].next = block;
    links_[s].prev = block;
    list_of_[block] = list;
    ++sizes_[list];
  }

  // Takes `block` off its list; no-op when it is on none.
  void Remove(BlockId block) {
    const int32_t list = list_of_[block];
    if (list == kNoList) return;
    const Links l = links_[block];
    links_[l.prev].next = l.next;
    links_[l.next].prev = l.prev;
    list_of_[block] = kNoList;
    --sizes_[list];
  }

  // The oldest block of `list`, kNullBlock when it is empty.
  BlockId Front(int32_t list) const {
    const int32_t first = links_[num_blocks_ + list].next;
    return first >= num_blocks_ ? kNullBlock : first;
  }
  // The block after `block` on its list (towards the newest end), kNullBlock at the end.
  // REQUIRES: ListOf(block) != kNoList.
  BlockId Next(BlockId block) const {
    const int32_t next = links_[block].next;
    return next >= num_blocks_ ? kNullBlock : next;
  }

  int32_t ListOf(BlockId block) const { return list_of_[block]; }
  int32_t Size(int32_t list) const { return sizes_[list]; }

 private:
  struct Links {
    int32_t prev = 0;
    int32_t next = 0;
  };
  int32_t num_blocks_ = 0;
  std::vector<Links> links_;      // [num_blocks + num_lists]; sentinels after the blocks
  std::vector<int32_t> list_of_;  // [num_blocks] kNoList when on none
  std::vector<int32_t> sizes_;    // [num_lists]
};

}  // namespace pagedkv::internal

#endif  // PAGEDKV_CACHE_POLICIES_BLOCK_LISTS_H_
