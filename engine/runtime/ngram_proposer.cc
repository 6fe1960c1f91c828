// Copyright 2026 The pagedkv Authors.
//
// Prompt-lookup drafting; see engine/runtime/ngram_proposer.h.
#include "engine/runtime/ngram_proposer.h"

#include <algorithm>
#include <cstddef>

namespace pagedkv::internal {

std::vector<TokenId> ProposeNgramDrafts(std::span<const TokenId> context,
                                        const NgramProposerOptions& options) {
  const size_t len = context.size();
  const size_t k = static_cast<size_t>(std::max(options.num_draft_tokens, 0));
  for (int32_t n = options.max_ngram; n >= std::max(options.min_ngram, 1); --n) {
    const size_t un = static_cast<size_t>(n);
    if (len < un + 1) continue;
    const std::span<const TokenId> suffix = context.subspan(len - un);
    // Matches start at `start` < len - n (strictly earlier than the suffix itself), latest first;
    // the first with k tokens after it wins, else the earliest (the longest continuation).
    size_t best = len;
    for (size_t start = len - un; start-- > 0;) {
      if (!std::equal(suffix.begin(), suffix.end(), context.begin() + start)) continue;
      best = start;
      if (len - (start + un) >= k) break;
    }
    if (best == len) continue;
    const size_t from = best + un;  // first token after the match, < len
    const size_t count = std::min(k, len - from);
    return std::vector<TokenId>(context.begin() + from, context.begin() + from + count);
  }
  return {};
}

int32_t NumAcceptedDrafts(std::span<const TokenId> drafts, std::span<const TokenId> argmax) {
  int32_t accepted = 0;
  while (static_cast<size_t>(accepted) < drafts.size() && argmax[accepted] == drafts[accepted]) {
    ++accepted;
  }
  return accepted;
}

}  // namespace pagedkv::internal
