// Copyright 2026 The pagedkv Authors.
//
// Hugging Face tokenizer.json -> BpeTokenizerSpec (pagedkv/model/bpe_tokenizer.h).
//
// Accepted components (anything else is refused with InvalidArgument naming its type or field):
//   model          BPE (vocab, merges as "a b" strings or [a, b] pairs, unk_token, fuse_unk,
//                  byte_fallback, ignore_merges; dropout null, no subword prefix / suffix)
//   normalizer     null, NFC, Prepend("▁"), Replace(" " -> "▁"), or a Sequence of them
//   pre_tokenizer  null or Metaspace("▁", prepend_scheme, split) (SentencePiece family);
//                  ByteLevel (use_regex: GPT-2's split); or a
//                  Sequence of Split(GPT-2's / Llama-3's / Qwen2's regex, Isolated) and
//                  ByteLevel(use_regex false) (byte-level family)
//   post_processor null, TemplateProcessing (single: special tokens around $A), ByteLevel, or a
//                  Sequence of them
//   decoder        null; Replace("▁" -> " "), ByteFallback, Fuse, Strip(" ", start, 0),
//                  Metaspace (approximated: "▁" -> " " and one leading space stripped, where
//                  tokenizers drops every "▁" of the first token) or a Sequence of them;
//                  ByteLevel
//   added_tokens   id, content, special, normalized, lstrip, rstrip (single_word refused)
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
