// Copyright 2026 The pagedkv Authors.
//
// CheckRefCounts: the ValidateInvariants step of KvCacheManager (every layout).
// `table_refs[b]` is how many block-table entries of the manager's requests hold block b; every
// block's reference count in the pool must equal it.
//
// Example:
//   std::vector<int32_t> refs(pool.num_blocks(), 0);
//   for (BlockId b : every_table_entry) ++refs[b];
//   PAGEDKV_RETURN_IF_ERROR(CheckRefCounts(pool, refs));
#ifndef PAGEDKV_CACHE_REF_COUNT_CHECK_H_
#define PAGEDKV_CACHE_REF_COUNT_CHECK_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/types.h"

namespace pagedkv {

// Internal with the first block whose count differs. REQUIRES: table_refs.size() ==
// pool.num_blocks().
inline absl::Status CheckRefCounts(const BlockPool& pool, std::span<const int32_t> table_refs) {
  for (BlockId b = 0; b < pool.num_blocks(); ++b) {
    if (pool.RefCount(b) != table_refs[b]) {
      return absl::InternalError(absl::StrCat("block ", b, " has reference count ",
                                              pool.RefCount(b), " but ", table_refs[b],
                                              " block-table entries"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_REF_COUNT_CHECK_H_
