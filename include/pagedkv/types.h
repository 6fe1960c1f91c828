// Copyright 2026 The pagedkv Authors.
//
// Common scalar types shared by every part of pagedkv.
//
// Example:
//   pagedkv::BlockId block = pagedkv::kNullBlock;  // "no block"
//   pagedkv::TokenId token = 42;                    // a vocabulary index
//   int64_t blocks = pagedkv::NumBlocksFor(33, 16);  // 3 blocks hold 33 tokens
#ifndef PAGEDKV_TYPES_H_
#define PAGEDKV_TYPES_H_

#include <cstdint>

namespace pagedkv {

// A token id: an index into the model's vocabulary (>= 0 for real tokens).
using TokenId = int32_t;

// A physical KV block index in [0, num_blocks) of a BlockPool / paged KV cache.
using BlockId = int32_t;

// An engine-chosen request identifier, unique among live requests.
using RequestId = uint64_t;

// "No block": an empty block-table entry or a failed lookup.
inline constexpr BlockId kNullBlock = -1;

// Blocks of `block_size` tokens needed to hold `num_tokens` tokens: ceil(num_tokens / block_size),
// the last one possibly partial. REQUIRES: num_tokens >= 0, block_size > 0.
constexpr int64_t NumBlocksFor(int64_t num_tokens, int64_t block_size) {
  return (num_tokens + block_size - 1) / block_size;
}

}  // namespace pagedkv

#endif  // PAGEDKV_TYPES_H_
