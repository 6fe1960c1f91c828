// Copyright 2026 The pagedkv Authors.
//
// DebugCheckOk: marks a call whose status cannot be an error by construction (an internal
// invariant, never caller input). Debug builds assert it, naming `why`; release builds do
// nothing. Use it instead of dropping a status with (void); a call that can fail on caller input
// returns its status instead.
//
// Example:
//   DebugCheckOk(pool_->Unpin(block), "pinned just above in this call");
#ifndef PAGEDKV_CACHE_DEBUG_CHECK_H_
#define PAGEDKV_CACHE_DEBUG_CHECK_H_

#include <cassert>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pagedkv {

inline void DebugCheckOk([[maybe_unused]] const absl::Status& status,
                         [[maybe_unused]] const char* why) {
  assert(status.ok() && why);
}

template <typename T>
void DebugCheckOk(const absl::StatusOr<T>& result, const char* why) {
  DebugCheckOk(result.status(), why);
}

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_DEBUG_CHECK_H_
