// Copyright 2026 The pagedkv Authors.
//
// CheckRequestMatchesManager: the check KvCacheManager runs on every
// CacheRequest a caller hands them. A request made by another manager's NewRequest (another block
// size, or tokens checked against another vocabulary) would hash or index the wrong blocks; it
// gets InvalidArgument naming what differs, before anything changes.
//
// Example:
//   PAGEDKV_RETURN_IF_ERROR(CheckRequestMatchesManager(request, options_.block_size,
//                                                      options_.vocab_size));
#ifndef PAGEDKV_CACHE_REQUEST_CHECK_H_
#define PAGEDKV_CACHE_REQUEST_CHECK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/cache/cache_request.h"

namespace pagedkv {

// `vocab_size` 0 means the manager does not check tokens, and any request passes that part.
inline absl::Status CheckRequestMatchesManager(const CacheRequest& request, int32_t block_size,
                                               int32_t vocab_size) {
  if (request.block_size() != block_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("request ", request.id(), " was hashed with block size ", request.block_size(),
                     " but the manager uses ", block_size, "; create it with NewRequest"));
  }
  if (vocab_size > 0 && request.vocab_size() != vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request ", request.id(), " was checked against vocabulary size ", request.vocab_size(),
        " but the manager uses ", vocab_size, "; create it with NewRequest"));
  }
  return absl::OkStatus();
}

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_REQUEST_CHECK_H_
