// Copyright 2026 The pagedkv Authors.
//
// The tokenizer stored in a GGUF file's tokenizer.ggml.* metadata, built on the existing
// tokenizers (no second BPE implementation):
//   model "gpt2"   byte-level BPE (pagedkv/model/bpe_tokenizer.h) from `tokens` (the id is the
//   index)
//                  and `merges` ("left right" strings, rank = index); the split regex is chosen
//                  by `pre`: "default" / "gpt2" (GPT-2's), "llama-bpe" / "llama3" (Llama-3's),
//                  "qwen2", and "smollm" / "starcoder" / "refact" (digits alone, then GPT-2's);
//                  any other `pre` is refused by name.
//   model "llama"  SentencePiece BPE with `scores` (the highest-scoring adjacent pair merges
//                  first), byte fallback "<0xNN>" and the dummy-prefix space: exactly llama2.c's
//                  tokenizer (pagedkv/model/tokenizer.h), which is built from these pieces.
//                  Requires BOS 1, EOS 2 and add_space_prefix true (as llama.cpp's SPM
//                  vocabularies).
// token_type: 3 (control) tokens are special (matched in text, skipped by Decode), 4
// (user-defined) are matched in text and decoded; 6 (byte) are the "<0xNN>" pieces. BOS, EOS,
// padding ids and add_bos_token (default: true for "llama", false for "gpt2") are read; with
// add_bos_token, Encode(add_bos) prepends BOS.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(GgufFile f, GgufFile::Open("smollm2.gguf"));
//   PAGEDKV_ASSIGN_OR_RETURN(Tokenizer tok, LoadGgufTokenizer(f));
#ifndef PAGEDKV_ENGINE_MODEL_TOKENIZERS_GGUF_TOKENIZER_H_
#define PAGEDKV_ENGINE_MODEL_TOKENIZERS_GGUF_TOKENIZER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/formats/gguf_file.h"
#include "pagedkv/export.h"
#include "pagedkv/model/bpe_tokenizer.h"
#include "pagedkv/model/tokenizer.h"
#include "pagedkv/types.h"

namespace pagedkv::model_internal {

// True when the file has tokenizer.ggml.model.
PAGEDKV_EXPORT bool HasGgufTokenizer(const GgufFile& file);

// The tokenizer (see the banner); InvalidArgument naming the key for anything malformed or not
// supported.
PAGEDKV_EXPORT absl::StatusOr<Tokenizer> LoadGgufTokenizer(const GgufFile& file);

// The spec of a "gpt2" tokenizer (for tests that compare against the tokenizers package).
PAGEDKV_EXPORT absl::StatusOr<BpeTokenizerSpec> GgufByteLevelSpec(const GgufFile& file);

// Ids that end generation: EOS, tokenizer.ggml.eot_token_id / eom_token_id, and, as llama.cpp
// does, control tokens spelled "<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|end|>" or
// "<end_of_turn>". Empty when the file has no tokenizer.
PAGEDKV_EXPORT absl::StatusOr<std::vector<TokenId>> GgufStopTokens(const GgufFile& file);

}  // namespace pagedkv::model_internal

#endif  // PAGEDKV_ENGINE_MODEL_TOKENIZERS_GGUF_TOKENIZER_H_
