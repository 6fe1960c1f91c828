// Copyright 2026 The pagedkv Authors.
//
// Hugging Face tokenizer.json -> BpeTokenizerSpec (pagedkv/model/bpe_tokenizer.h).
//
// Accepted components (anything else is refused with InvalidArgument naming its type or field):
//   model          BPE (vocab, merges as "a b" strings or [a, b] pairs, unk_token, fuse_unk,
//                  byte_fallback, ignore_merges; dropout null, no subword prefix / suffix)
//   normalizer     null, NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Prepend,
//                  Replace (String or Regex pattern), or a Sequence of them in any order
//   pre_tokenizer  null, Metaspace("▁", prepend_scheme, split), ByteLevel(add_prefix_space,
//                  use_regex), Split(String or Regex pattern, any behavior, invert), Digits,
//                  Punctuation(behavior), Whitespace, WhitespaceSplit, BertPreTokenizer, or a
//                  Sequence of them in any order (the regex constructs Split accepts:
//                  docs/models.md); with a ByteLevel step the tokenizer is byte-level, else
//                  SentencePiece-style
//   post_processor null, TemplateProcessing (single: special tokens around $A), ByteLevel, or a
//                  Sequence of them
//   decoder        null (the tokens joined with spaces, as tokenizers does);
//                  Replace("▁" -> " "), ByteFallback, Fuse, Strip(" ", start, 0) after Fuse,
//                  Metaspace ("▁" -> " "; with prepend_scheme first / always every "▁" of the
//                  first decoded token dropped, as tokenizers does), or a Sequence of them;
//                  ByteLevel (a token with a character outside the byte alphabet kept whole)
//   added_tokens   id, content, special, normalized, lstrip, rstrip, single_word
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(pagedkv::BpeTokenizerSpec spec,
//                            pagedkv::ParseHfTokenizerJson(text, "tokenizer.json"));
//   PAGEDKV_ASSIGN_OR_RETURN(pagedkv::BpeTokenizer tok, pagedkv::BpeTokenizer::Create(spec));
#ifndef PAGEDKV_MODEL_HF_TOKENIZER_H_
#define PAGEDKV_MODEL_HF_TOKENIZER_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "pagedkv/export.h"
#include "pagedkv/model/bpe_tokenizer.h"

namespace pagedkv {

// Parses tokenizer.json's text; `where` (e.g. the path) prefixes error messages.
PAGEDKV_EXPORT absl::StatusOr<BpeTokenizerSpec> ParseHfTokenizerJson(const std::string& json_text,
                                                                     const std::string& where);

// Reads and parses the file at `path`. NotFound when it cannot be opened.
PAGEDKV_EXPORT absl::StatusOr<BpeTokenizerSpec> LoadHfTokenizerJson(const std::string& path);

}  // namespace pagedkv

#endif  // PAGEDKV_MODEL_HF_TOKENIZER_H_
