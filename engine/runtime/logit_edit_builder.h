// Copyright 2026 The pagedkv Authors.
//
// The logit edits (engine/model/runner/logit_edits.h) of one request's logits row, from its
// SamplingOptions and the tokens it has seen: vLLM's min_tokens, logit_bias and repetition /
// frequency / presence penalties. Built per step in O(distinct prompt tokens + output tokens +
// bias entries + stop tokens) for the requests that ask for them; a request that asks for none
// gets no edits and its rows are never touched. Internal to the engine.
//
// Example:
//   if (NeedsLogitEdits(record.sampling, record.logit_bias)) {
//     step.logit_edits.push_back(BuildLogitEdits({.sampling = &record.sampling, ...}, row));
//   }
#ifndef PAGEDKV_ENGINE_RUNTIME_LOGIT_EDIT_BUILDER_H_
#define PAGEDKV_ENGINE_RUNTIME_LOGIT_EDIT_BUILDER_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/model/runner/logit_edits.h"
#include "pagedkv/runtime/generation.h"
#include "pagedkv/types.h"

namespace pagedkv::internal {

// A request's logit_bias (GenerationRequest::logit_bias).
using LogitBias = std::span<const std::pair<TokenId, float>>;

// True when a request asks for logits processing before sampling: min_tokens or a penalty in
// `s`, or a logit_bias.
bool NeedsLogitEdits(const SamplingOptions& s, LogitBias logit_bias);

// What the edits of one row read.
struct LogitEditInputs {
  const SamplingOptions* sampling = nullptr;  // not owned
  LogitBias logit_bias;
  std::span<const TokenId> prompt_set;   // the prompt's distinct tokens, ascending (DistinctTokens)
  std::span<const TokenId> output;       // tokens generated so far
  std::span<const TokenId> drafts;       // draft tokens scheduled before the row (count as output)
  std::span<const TokenId> stop_tokens;  // tokens that end the request (banned by min_tokens)
};

// The edits of logits row `row`, tokens ascending.
RowLogitEdits BuildLogitEdits(const LogitEditInputs& in, int32_t row);

// The distinct tokens of `tokens`, ascending.
std::vector<TokenId> DistinctTokens(std::span<const TokenId> tokens);

}  // namespace pagedkv::internal

#endif  // PAGEDKV_ENGINE_RUNTIME_LOGIT_EDIT_BUILDER_H_
