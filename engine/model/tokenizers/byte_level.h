// Copyright 2026 The pagedkv Authors.
//
// The byte-level BPE pre-tokenizer: GPT-2's byte-to-unicode alphabet (every byte is a printable
// character: bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF map to themselves, the other 68 to
// U+0100 onwards in byte order) and the split regexes of GPT-2, Llama-3 and Qwen2, implemented by
// hand over \p{L}, \p{N} and \s (engine/model/tokenizers/unicode_categories.h). The
// case-insensitive contractions of Llama-3 / Qwen2 fold as Oniguruma does ('S', and U+017F for
// 's').
//
// Example:
//   std::vector<std::string_view> pieces = SplitByteLevel("Hello world", ByteLevelSplit::kGpt2);
//   // {"Hello", " world"}
//   std::string mapped = ToByteLevelAlphabet(" world");  // "Ġworld"
#ifndef PAGEDKV_ENGINE_MODEL_TOKENIZERS_BYTE_LEVEL_H_
#define PAGEDKV_ENGINE_MODEL_TOKENIZERS_BYTE_LEVEL_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pagedkv/export.h"
#include "pagedkv/model/bpe_tokenizer.h"

namespace pagedkv::model_internal {

// The split regexes as tokenizer.json spells them.
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kLlama3SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen2SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The hand-written split of `pattern` when it is one of the three above.
PAGEDKV_EXPORT std::optional<ByteLevelSplit> ByteLevelSplitOf(std::string_view pattern);

// The pieces of `text` under `split` (views into text), in order; they concatenate to `text`.
PAGEDKV_EXPORT std::vector<std::string_view> SplitByteLevel(std::string_view text,
                                                            ByteLevelSplit split);

// Each byte of `bytes` as its byte-to-unicode character (UTF-8).
PAGEDKV_EXPORT std::string ToByteLevelAlphabet(std::string_view bytes);

// The bytes of a byte-level token: each character mapped back; a token with a character outside
// the alphabet (an added token such as "Ġx y") is kept whole as its UTF-8 bytes, as tokenizers'
// ByteLevel decoder does.
PAGEDKV_EXPORT std::string FromByteLevelAlphabet(std::string_view token);

}  // namespace pagedkv::model_internal

#endif  // PAGEDKV_ENGINE_MODEL_TOKENIZERS_BYTE_LEVEL_H_
