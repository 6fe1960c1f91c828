// Copyright 2026 The pagedkv Authors.
//
// Splits text on added tokens, leftmost-longest, as tokenizers' AddedVocabulary does: a match
// with lstrip (rstrip) also takes the whitespace before (after) it; a single_word match with a
// word character (the Rust regex crate's \w) right before or after it is dropped and its text
// stays plain (no shorter token is tried there).
//
// Example:
//   AddedTokenMatcher m({{"<s>", 1, false, false}});
//   m.Split("a<s>b");  // {{"a", -1}, {"<s>", 1}, {"b", -1}}
#ifndef PAGEDKV_ENGINE_MODEL_TOKENIZERS_ADDED_TOKENS_H_
#define PAGEDKV_ENGINE_MODEL_TOKENIZERS_ADDED_TOKENS_H_

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "pagedkv/export.h"
#include "pagedkv/types.h"

namespace pagedkv::model_internal {

struct PAGEDKV_EXPORT AddedPattern {
  std::string text;  // non-empty
  TokenId id = 0;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;  // a match beside a word character is left as text
};

// A piece of split text: an added token (id >= 0) or text for the model (id == -1).
struct PAGEDKV_EXPORT TextPiece {
  std::string_view text;
  TokenId id = -1;
};

class PAGEDKV_EXPORT AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedPattern> patterns);

  // `text` cut at every match; empty text pieces are left out. Views into `text`.
  std::vector<TextPiece> Split(std::string_view text) const;
  bool empty() const { return patterns_.empty(); }

 private:
  std::vector<AddedPattern> patterns_;
  // Patterns by first byte, longest first.
  std::array<std::vector<size_t>, 256> by_first_byte_;
};

}  // namespace pagedkv::model_internal

#endif  // PAGEDKV_ENGINE_MODEL_TOKENIZERS_ADDED_TOKENS_H_
