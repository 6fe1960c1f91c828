// Copyright 2026 The pagedkv Authors.
//
// Prompt-lookup drafting (vLLM's n-gram speculator): the last n tokens of a request's context are
// searched earlier in the context, and the k tokens that followed the match are proposed as draft
// tokens. No draft model is needed; it pays off on text that repeats its context (quoting,
// summarising, code edits, loops of a small model). Verification against the model's argmax keeps
// greedy decoding exact whatever the drafts are.
//
// Example:
//   std::vector<TokenId> drafts = ProposeNgramDrafts(context, {.num_draft_tokens = 4});
//   // ... run the last token + drafts; argmax[j] = the model's token after position j
//   int32_t a = NumAcceptedDrafts(drafts, argmax);  // next token: argmax[a]
//
// Thread-safe (pure functions).
#ifndef PAGEDKV_ENGINE_RUNTIME_NGRAM_PROPOSER_H_
#define PAGEDKV_ENGINE_RUNTIME_NGRAM_PROPOSER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "pagedkv/export.h"
#include "pagedkv/types.h"

namespace pagedkv::internal {

struct PAGEDKV_EXPORT NgramProposerOptions {
  int32_t num_draft_tokens = 4;  // k: most drafts proposed, >= 1
  int32_t min_ngram = 1;         // shortest suffix searched, >= 1
  int32_t max_ngram = 3;         // longest suffix searched (tried first), >= min_ngram
};

// Up to options.num_draft_tokens drafts for `context` (prompt + generated tokens): for n from
// max_ngram down to min_ngram, the last n tokens are searched at earlier positions: the most
// recent match followed by at least k tokens gives the k tokens after it; when every match is
// closer to the end than that, the earliest match (the longest continuation) gives what follows
// it. Empty when no suffix of those lengths occurs earlier.
// Cost: O(max_ngram * context.size()) per call.
PAGEDKV_EXPORT std::vector<TokenId> ProposeNgramDrafts(std::span<const TokenId> context,
                                                       const NgramProposerOptions& options);

// Greedy verification: how many drafts, from the first, equal the model's argmax at the position
// before them (drafts[j] is accepted when argmax[j] == drafts[j] and every earlier one was).
// REQUIRES: argmax.size() == drafts.size() + 1 (the last row gives the bonus token).
PAGEDKV_EXPORT int32_t NumAcceptedDrafts(std::span<const TokenId> drafts,
                                         std::span<const TokenId> argmax);

}  // namespace pagedkv::internal

#endif  // PAGEDKV_ENGINE_RUNTIME_NGRAM_PROPOSER_H_
