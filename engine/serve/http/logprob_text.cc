// Copyright 2026 The pagedkv Authors.
//
// LogprobTexts (see logprob_text.h).
#include "engine/serve/http/logprob_text.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace pagedkv::server {

int64_t CodePoints(const std::string& text) {
  return std::count_if(text.begin(), text.end(),
                       [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

std::string LogprobTexts::TokenText(TokenId prev, TokenId token) const {
  if (token < 0 || token >= tokenizer_.vocab_size()) return "";
  const bool special = token == tokenizer_.bos_id() || token == tokenizer_.eos_id() ||
                       (tokenizer_.bpe() != nullptr && tokenizer_.bpe()->is_special(token));
  if (special) return tokenizer_.piece(token);
  absl::StatusOr<std::string> text = tokenizer_.DecodeToken(prev, token);
  return text.ok() ? *std::move(text) : std::string();
}

TokenId LogprobTexts::FirstPrev(TokenId first) const {
  return tokenizer_.bos_id() >= 0 ? tokenizer_.bos_id() : first;
}

std::vector<TokenLogprobText> LogprobTexts::Generated(TokenId prev,
                                                      const std::vector<TokenId>& tokens,
                                                      const std::vector<TokenLogprobs>& logprobs,
                                                      int64_t* offset) const {
  std::vector<TokenLogprobText> out;
  for (size_t i = 0; i < tokens.size() && i < logprobs.size(); ++i) {
    TokenLogprobText& entry = out.emplace_back();
    entry.token = TokenText(prev, tokens[i]);
    entry.logprob = logprobs[i].logprob;
    for (const TokenLogprob& alternative : logprobs[i].top) {
      entry.top.emplace_back(TokenText(prev, alternative.token), alternative.logprob);
    }
    entry.text_offset = *offset;
    *offset += CodePoints(entry.token);
    prev = tokens[i];
  }
  return out;
}

std::vector<TokenLogprobText> LogprobTexts::Prompt(
    const std::vector<TokenId>& prompt, const std::vector<TokenLogprobs>& prompt_logprobs,
    int32_t top_k, int64_t* offset) const {
  std::vector<TokenLogprobText> out;
  *offset = 0;
  if (prompt.empty()) return out;
  TokenLogprobText& first = out.emplace_back();
  first.token = TokenText(FirstPrev(prompt[0]), prompt[0]);
  first.has_logprob = false;
  *offset = CodePoints(first.token);
  std::vector<TokenLogprobs> rest(prompt_logprobs);
  for (TokenLogprobs& l : rest) l.top.resize(std::min(l.top.size(), static_cast<size_t>(top_k)));
  const std::vector<TokenId> tail(prompt.begin() + 1, prompt.end());
  std::vector<TokenLogprobText> entries = Generated(prompt[0], tail, rest, offset);
  out.insert(out.end(), std::make_move_iterator(entries.begin()),
             std::make_move_iterator(entries.end()));
  return out;
}

std::vector<std::vector<VllmLogprob>> LogprobTexts::Vllm(
    const std::vector<TokenId>& prompt, const std::vector<TokenLogprobs>& prompt_logprobs,
    int32_t top_k) const {
  std::vector<std::vector<VllmLogprob>> out(1);  // the first token: null
  for (size_t i = 0; i < prompt_logprobs.size() && i + 1 < prompt.size(); ++i) {
    const TokenLogprobs& l = prompt_logprobs[i];
    const TokenId prev = prompt[i];
    std::vector<VllmLogprob>& position = out.emplace_back();
    position.push_back({prompt[i + 1], l.logprob, l.rank, TokenText(prev, prompt[i + 1])});
    for (size_t k = 0; k < l.top.size() && k < static_cast<size_t>(top_k); ++k) {
      if (l.top[k].token == prompt[i + 1]) continue;
      position.push_back({l.top[k].token, l.top[k].logprob, static_cast<int32_t>(k) + 1,
                          TokenText(prev, l.top[k].token)});
    }
  }
  return out;
}

}  // namespace pagedkv::server
