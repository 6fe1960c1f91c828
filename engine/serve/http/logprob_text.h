// Copyright 2026 The pagedkv Authors.
//
// The engine's log-probabilities (ids) turned into what a response shows (texts): the entries of
// generated tokens, the echoed prompt's entries (OpenAI's echo form: the first prompt token has
// no log-probability) and vLLM's prompt_logprobs. A token's text is Tokenizer::DecodeToken after
// its predecessor; a special token (BOS, EOS, a tokenizer.json special added token), which
// decodes to nothing, shows its vocabulary piece. Offsets count Unicode code points (Python's
// len()), accumulated over the entries' texts as vLLM does.
//
// Example:
//   LogprobTexts texts(tokenizer);
//   std::vector<TokenLogprobText> e = texts.Generated(prompt.back(), tokens, logprobs, &offset);
//
// Thread-safe: const methods over an immutable tokenizer.
#ifndef PAGEDKV_ENGINE_SERVE_HTTP_LOGPROB_TEXT_H_
#define PAGEDKV_ENGINE_SERVE_HTTP_LOGPROB_TEXT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/serve/http/openai_response.h"
#include "pagedkv/model/bpe_tokenizer.h"
#include "pagedkv/model/tokenizer.h"
#include "pagedkv/runtime/generation.h"

namespace pagedkv::server {

// Unicode code points of UTF-8 `text` (bytes that do not continue a sequence).
int64_t CodePoints(const std::string& text);

class LogprobTexts {
 public:
  // REQUIRES: `tokenizer` outlives this.
  explicit LogprobTexts(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // The text a response shows for `token` after `prev`.
  std::string TokenText(TokenId prev, TokenId token) const;

  // Entries of `tokens` (the first after `prev`), with their logprobs (one each; extra tokens
  // get none); text offsets from *offset, which advances past them.
  std::vector<TokenLogprobText> Generated(TokenId prev, const std::vector<TokenId>& tokens,
                                          const std::vector<TokenLogprobs>& logprobs,
                                          int64_t* offset) const;

  // Entries of the echoed prompt: the first token without a logprob, token i with
  // prompt_logprobs[i - 1] and its first `top_k` top tokens; offsets from 0, *offset set past.
  std::vector<TokenLogprobText> Prompt(const std::vector<TokenId>& prompt,
                                       const std::vector<TokenLogprobs>& prompt_logprobs,
                                       int32_t top_k, int64_t* offset) const;

  // vLLM's prompt_logprobs: null for the first token, then per token the token itself and its
  // first `top_k` top tokens, each with its logprob, rank and text.
  std::vector<std::vector<VllmLogprob>> Vllm(const std::vector<TokenId>& prompt,
                                             const std::vector<TokenLogprobs>& prompt_logprobs,
                                             int32_t top_k) const;

 private:
  TokenId FirstPrev(TokenId first) const;

  const Tokenizer& tokenizer_;
};

}  // namespace pagedkv::server

#endif  // PAGEDKV_ENGINE_SERVE_HTTP_LOGPROB_TEXT_H_
