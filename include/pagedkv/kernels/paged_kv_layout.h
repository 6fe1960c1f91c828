// Copyright 2026 The pagedkv Authors.
//
// PagedKvLayout: one layer's K and V page pools as plain pointers plus the offset arithmetic shared
// by the CPU reference and the CUDA kernels. Pages are contiguous:
//   k, v: [num_blocks, block_size, num_kv_heads, head_dim] of `dtype`
//   slot = block_id * block_size + offset_in_block
//   element (slot, head, d) at slot * TokenStride() + head * head_dim + d
// The struct does not own memory; host memory for pagedkv::cpu ops, device memory for
// pagedkv::cuda ops.
//
// Example:
//   pagedkv::PagedKvLayout cache{.k = k_pages, .v = v_pages, .dtype = pagedkv::DType::kBF16,
//                                .num_blocks = 1024, .block_size = 16, .num_kv_heads = 8,
//                                .head_dim = 128};
//   int64_t slot = cache.SlotForPosition(block_table, /*position=*/37);
//   float k0 = pagedkv::LoadElement(cache.k, cache.dtype, cache.ElementOffset(slot, 0, 0));
#ifndef PAGEDKV_KERNELS_PAGED_KV_LAYOUT_H_
#define PAGEDKV_KERNELS_PAGED_KV_LAYOUT_H_

#include <cstdint>

#include "pagedkv/dtype.h"
#include "pagedkv/hd.h"

namespace pagedkv {

struct PagedKvLayout {
  void* k = nullptr;          // key pages [num_blocks, block_size, num_kv_heads, head_dim]
  void* v = nullptr;          // value pages, same shape
  DType dtype = DType::kF32;  // storage type of k and v
  int32_t num_blocks = 0;     // physical blocks in the pool
  int32_t block_size = 0;     // tokens per block
  int32_t num_kv_heads = 0;   // KV heads per token
  int32_t head_dim = 0;       // elements per head

  // Elements between consecutive slots.
  PAGEDKV_HD int64_t TokenStride() const { return static_cast<int64_t>(num_kv_heads) * head_dim; }
  // Elements between consecutive blocks.
  PAGEDKV_HD int64_t BlockStride() const { return TokenStride() * block_size; }
  // Number of slots (valid slots are [0, NumSlots())).
  PAGEDKV_HD int64_t NumSlots() const { return static_cast<int64_t>(num_blocks) * block_size; }
  // Elements in each of k and v.
  PAGEDKV_HD int64_t NumElements() const { return NumSlots() * TokenStride(); }
  // Bytes in each of k and v.
  PAGEDKV_HD int64_t NumBytes() const { return NumElements() * DTypeSize(dtype); }
  // Slot of token `offset` in block `block_id`.
  PAGEDKV_HD int64_t Slot(int32_t block_id, int32_t offset) const {
    return static_cast<int64_t>(block_id) * block_size + offset;
  }
  // Slot holding logical position `position` of a sequence with block table `block_table`.
  // REQUIRES: block_table has at least position / block_size + 1 entries.
  PAGEDKV_HD int64_t SlotForPosition(const int32_t* block_table, int64_t position) const {
    return Slot(block_table[position / block_size], static_cast<int32_t>(position % block_size));
  }
  // Element offset of (slot, head, d) in k or v.
  PAGEDKV_HD int64_t ElementOffset(int64_t slot, int32_t head, int32_t d) const {
    return slot * TokenStride() + static_cast<int64_t>(head) * head_dim + d;
  }
};

}  // namespace pagedkv

#endif  // PAGEDKV_KERNELS_PAGED_KV_LAYOUT_H_
