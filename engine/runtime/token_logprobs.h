// Copyright 2026 The pagedkv Authors.
//
// TokenLogprobsOf: a sampled token's log-probability and the most probable tokens of its logits
// row, under log_softmax(row) of the raw logits: before temperature and top-p, as vLLM's default
// (logprobs_mode "raw_logprobs") and OpenAI report them. The sum of exp is taken in float64
// around the row's maximum, so a logprob is exact to about 1e-6 absolute for any vocabulary.
//
// Example:
//   TokenLogprobs lp = TokenLogprobsOf(row, /*token=*/42, /*top_k=*/5);
//   // lp.logprob <= 0; lp.top: 5 entries, most probable first
//
// Thread-safe: pure function.
#ifndef PAGEDKV_ENGINE_RUNTIME_TOKEN_LOGPROBS_H_
#define PAGEDKV_ENGINE_RUNTIME_TOKEN_LOGPROBS_H_

#include <cstdint>

#include "absl/types/span.h"
#include "pagedkv/runtime/generation.h"

namespace pagedkv {

// REQUIRES: row is non-empty, token indexes it, 0 <= top_k. rank counts the logits above the
// token's, plus one. top holds min(top_k, row.size())
// entries, descending by logprob, ties by the lower token id. A row with a NaN or +inf logit
// gives NaN logprobs (the model produced no distribution).
TokenLogprobs TokenLogprobsOf(absl::Span<const float> row, TokenId token, int32_t top_k);

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_RUNTIME_TOKEN_LOGPROBS_H_
