// Copyright 2026 The pagedkv Authors.
//
// ApplyLogitEdits (see logit_edits.h).
#include "engine/model/runner/logit_edits.h"

#include <cstddef>
#include <limits>

namespace pagedkv {

void ApplyLogitEdits(const RowLogitEdits& edits, absl::Span<float> row) {
  const float r = edits.repetition_penalty;
  for (const LogitEdit& e : edits.edits) {
    float& logit = row[static_cast<size_t>(e.token)];
    if (e.banned) logit = -std::numeric_limits<float>::infinity();
    logit += e.bias;
    if (e.repeated) logit = logit > 0.0f ? logit / r : logit * r;
    if (e.output_count > 0) {
      logit -= edits.frequency_penalty * static_cast<float>(e.output_count);
      logit -= edits.presence_penalty;
    }
  }
}

}  // namespace pagedkv
