// Copyright 2026 The pagedkv Authors.
//
// SplitBatch: one step's flat batch cut into parts of whole, consecutive sequences of about equal
// work, so the CPU backend can run each part through a layer on its own thread (the model runner's
// split pass, Backend::RunParts). A sequence's work is its tokens' projections and MLP plus their
// attention over the keys each one sees (causal: a chunk of n tokens ending at kv_len sees
// n * kv_len - n (n - 1) / 2 keys in all).
//
// Example: four decode tokens of equal context, two parts:
//   std::vector<int32_t> qsl = {0, 1, 2, 3, 4}, lens = {9, 9, 9, 9};
//   std::vector<BatchPart> parts = SplitBatch(qsl, lens, 2, {.per_token = 100, .per_key = 8});
//   // parts: sequences [0, 2) with tokens [0, 2), sequences [2, 4) with tokens [2, 4)
#ifndef PAGEDKV_ENGINE_MODEL_RUNNER_BATCH_PARTS_H_
#define PAGEDKV_ENGINE_MODEL_RUNNER_BATCH_PARTS_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "pagedkv/export.h"

namespace pagedkv {

// Sequences [first_seq, end_seq) of a batch and their tokens [first_token, end_token).
struct PAGEDKV_EXPORT BatchPart {
  int32_t first_seq = 0;
  int32_t end_seq = 0;
  int32_t first_token = 0;
  int32_t end_token = 0;
  bool operator==(const BatchPart&) const = default;
};

// Relative cost of a token (projections, MLP: its multiply-adds) and of one key it attends to.
struct PAGEDKV_EXPORT PartCosts {
  double per_token = 1.0;
  double per_key = 0.0;
};

// At most max_parts parts, in sequence order, covering every sequence; none is empty of tokens
// unless the whole batch is (then one part holds every sequence). Each cut falls at the sequence
// boundary nearest the next multiple of total / max_parts of the work. REQUIRES: query_start_loc
// non-decreasing with kv_lens.size() + 1 entries, kv_len >= the sequence's token count,
// max_parts >= 1.
PAGEDKV_EXPORT std::vector<BatchPart> SplitBatch(absl::Span<const int32_t> query_start_loc,
                                                 absl::Span<const int32_t> kv_lens,
                                                 int32_t max_parts, const PartCosts& costs);

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_MODEL_RUNNER_BATCH_PARTS_H_
