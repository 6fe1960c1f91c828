// Copyright 2026 The pagedkv Authors.
//
// Per-request logits processing before the sample op, as vLLM's v1 sampler applies it
// (vllm/v1/sample/sampler.py apply_logits_processors, vllm/v1/sample/logits_processor/builtin.py,
// vllm/model_executor/layers/utils.py apply_penalties): for each token that one of them touches,
// in this order,
//   1. min_tokens: a token that would end the request, while fewer than min_tokens tokens were
//      generated, becomes -inf;
//   2. logit_bias: its bias is added;
//   3. repetition_penalty r, for a token in the prompt or the output: a positive logit is divided
//      by r, any other multiplied by r (vLLM's CUDA kernel, csrc/sampler.cu);
//   4. frequency_penalty f and presence_penalty p, for a token in the output c >= 1 times:
//      l -= f * c (in float), then l -= p.
// Tokens touched by none are left as they are, so the cost is O(tokens touched) per row, never
// O(vocabulary x history). Temperature, min_p, top_k and top_p follow in the sample op.
//
// The model runner copies each edited row to the host, applies the edits there and writes it back
// (ModelRunner: ForwardOptions::logit_edits): one function serves both backends, and rows of
// requests that ask for none of this are never touched.
//
// Example:
//   RowLogitEdits r{.row = 0, .repetition_penalty = 1.3f};
//   r.edits.push_back({.token = 42, .repeated = true});
//   ApplyLogitEdits(r, row_span);
//
// Thread-safe: pure functions.
#ifndef PAGEDKV_ENGINE_MODEL_RUNNER_LOGIT_EDITS_H_
#define PAGEDKV_ENGINE_MODEL_RUNNER_LOGIT_EDITS_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "pagedkv/export.h"
#include "pagedkv/types.h"

namespace pagedkv {

// What happens to one token of one row.
struct PAGEDKV_EXPORT LogitEdit {
  TokenId token = 0;
  bool banned = false;       // min_tokens not reached and the token ends the request: -inf
  float bias = 0.0f;         // logit_bias, added
  bool repeated = false;     // in the prompt or the output: the repetition penalty applies
  int32_t output_count = 0;  // times in the output: frequency and presence penalties apply
};

// The edits of one logits row and the request's penalties.
struct PAGEDKV_EXPORT RowLogitEdits {
  int32_t row = 0;                  // index into ModelInput::logits_indices
  std::vector<LogitEdit> edits;     // tokens strictly increasing, each in [0, vocab_size)
  float repetition_penalty = 1.0f;  // > 0; 1: none
  float frequency_penalty = 0.0f;   // 0: none
  float presence_penalty = 0.0f;    // 0: none
};

// Applies `edits` to `row` (one row of logits) in the order above.
// REQUIRES: every edit's token < row.size().
PAGEDKV_EXPORT void ApplyLogitEdits(const RowLogitEdits& edits, absl::Span<float> row);

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_MODEL_RUNNER_LOGIT_EDITS_H_
