// Copyright 2026 The pagedkv Authors.
//
// BuildLogitEdits (see logit_edit_builder.h).
#include "engine/runtime/logit_edit_builder.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace pagedkv::internal {

bool NeedsLogitEdits(const SamplingOptions& s, LogitBias logit_bias) {
  return s.min_tokens > 0 || !logit_bias.empty() || s.repetition_penalty != 1.0f ||
         s.frequency_penalty != 0.0f || s.presence_penalty != 0.0f;
}

std::vector<TokenId> DistinctTokens(std::span<const TokenId> tokens) {
  std::vector<TokenId> set(tokens.begin(), tokens.end());
  std::sort(set.begin(), set.end());
  set.erase(std::unique(set.begin(), set.end()), set.end());
  return set;
}

RowLogitEdits BuildLogitEdits(const LogitEditInputs& in, int32_t row) {
  const SamplingOptions& s = *in.sampling;
  RowLogitEdits out{.row = row,
                    .repetition_penalty = s.repetition_penalty,
                    .frequency_penalty = s.frequency_penalty,
                    .presence_penalty = s.presence_penalty};
  absl::flat_hash_map<TokenId, LogitEdit> by_token;
  auto edit = [&by_token](TokenId token) -> LogitEdit& {
    LogitEdit& e = by_token[token];
    e.token = token;
    return e;
  };
  // vLLM's MinTokensLogitsProcessor: while fewer than min_tokens tokens precede the row.
  const auto seen = static_cast<int64_t>(in.output.size() + in.drafts.size());
  if (seen < s.min_tokens) {
    for (TokenId t : in.stop_tokens) edit(t).banned = true;
  }
  for (const auto& [token, bias] : in.logit_bias) edit(token).bias = bias;
  const bool repetition = s.repetition_penalty != 1.0f;
  if (repetition) {
    for (TokenId t : in.prompt_set) edit(t).repeated = true;
  }
  if (repetition || s.frequency_penalty != 0.0f || s.presence_penalty != 0.0f) {
    for (const std::span<const TokenId> part : {in.output, in.drafts}) {
      for (TokenId t : part) {
        LogitEdit& e = edit(t);
        if (repetition) e.repeated = true;
        ++e.output_count;
      }
    }
  }
  out.edits.reserve(by_token.size());
  for (auto& [token, e] : by_token) out.edits.push_back(e);
  std::sort(out.edits.begin(), out.edits.end(),
            [](const LogitEdit& a, const LogitEdit& b) { return a.token < b.token; });
  return out;
}

}  // namespace pagedkv::internal
