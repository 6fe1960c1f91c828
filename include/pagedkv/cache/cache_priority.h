// Copyright 2026 The pagedkv Authors.
//
// Eviction priorities for cached blocks, as TensorRT-LLM's KV cache retention and SGLang's
// priorities offer: a block cached with a higher priority is evicted only after every evictable
// block of lower priority (LRU, or the configured policy, among equals). A retention duration
// bounds the raised priority: once it has passed, the block falls back to the default priority
// (applied when the next victim is picked; it rejoins the default level as its most recently
// released block, since a policy instance cannot take a block back at an older position).
// A request carries one priority and optional spans of its prompt with their own (e.g. a system
// prompt kept for an hour). Priorities never change hashes: requests with different priorities
// share blocks, and a hit raises a cached block to the hitting request's priority when higher.
//
// Example:
//   pagedkv::RequestCacheKeys keys;
//   keys.priority_spans.push_back({.begin_token = 0, .end_token = system_prompt_tokens,
//                                  .priority = {.priority = 90, .retention_seconds = 3600}});
//   auto req = manager->NewRequest(id, prompt, keys);  // manager made with enable_priorities
#ifndef PAGEDKV_CACHE_CACHE_PRIORITY_H_
#define PAGEDKV_CACHE_CACHE_PRIORITY_H_

#include <cstdint>
#include <limits>
#include <span>

#include "absl/status/status.h"
#include "pagedkv/export.h"

namespace pagedkv {

inline constexpr int32_t kMinCachePriority = 0;
inline constexpr int32_t kMaxCachePriority = 100;
inline constexpr int32_t kDefaultCachePriority = 35;  // TensorRT-LLM's default

struct PAGEDKV_EXPORT CachePriority {
  int32_t priority = kDefaultCachePriority;  // [0, 100]; higher is evicted later
  // > 0; after this many seconds (of the manager's clock) from caching or the last raising hit,
  // the block falls back to the default priority. Infinity: never.
  double retention_seconds = std::numeric_limits<double>::infinity();

  bool operator==(const CachePriority&) const = default;
  // InvalidArgument naming `what` for a priority outside [0, 100] or a retention that is not > 0.
  absl::Status Validate(const char* what) const;
};

// Blocks lying wholly inside [begin_token, end_token) of a prompt get `priority` instead of the
// request's.
struct PAGEDKV_EXPORT PrioritySpan {
  int64_t begin_token = 0;
  int64_t end_token = 0;
  CachePriority priority;
};

// InvalidArgument unless each span has 0 <= begin < end, a valid priority, and the spans are
// sorted by begin and do not overlap.
PAGEDKV_EXPORT absl::Status ValidatePrioritySpans(std::span<const PrioritySpan> spans);

// The priority of the block [first_token, first_token + block_size): the span that holds it
// wholly, else `request`.
PAGEDKV_EXPORT CachePriority BlockPriority(const CachePriority& request,
                                           std::span<const PrioritySpan> spans, int64_t first_token,
                                           int32_t block_size);

}  // namespace pagedkv

#endif  // PAGEDKV_CACHE_CACHE_PRIORITY_H_
