// Copyright 2026 The pagedkv Authors.
#include "pagedkv/cache/cache_priority.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace pagedkv {

absl::Status CachePriority::Validate(const char* what) const {
  if (priority < kMinCachePriority || priority > kMaxCachePriority) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": priority ", priority, " is outside [",
                                                   kMinCachePriority, ", ", kMaxCachePriority,
                                                   "]"));
  }
  if (!(retention_seconds > 0)) {  // also refuses NaN
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": retention_seconds must be > 0 (infinity: no limit), got ", retention_seconds));
  }
  return absl::OkStatus();
}

absl::Status ValidatePrioritySpans(std::span<const PrioritySpan> spans) {
  int64_t previous_end = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    const PrioritySpan& s = spans[i];
    if (s.begin_token < 0 || s.end_token <= s.begin_token) {
      return absl::InvalidArgumentError(absl::StrCat("priority span ", i, " [", s.begin_token, ", ",
                                                     s.end_token, ") must have 0 <= begin < end"));
    }
    if (i > 0 && s.begin_token < previous_end) {
      return absl::InvalidArgumentError(absl::StrCat(
          "priority span ", i, " starts at ", s.begin_token, " inside the previous one (ending at ",
          previous_end, "); sort the spans and make them disjoint"));
    }
    const absl::Status valid = s.priority.Validate("priority span");
    if (!valid.ok()) return valid;
    previous_end = s.end_token;
  }
  return absl::OkStatus();
}

CachePriority BlockPriority(const CachePriority& request, std::span<const PrioritySpan> spans,
                            int64_t first_token, int32_t block_size) {
  const int64_t end = first_token + block_size;
  for (const PrioritySpan& s : spans) {
    if (s.begin_token > first_token) break;
    if (end <= s.end_token) return s.priority;
  }
  return request;
}

}  // namespace pagedkv
