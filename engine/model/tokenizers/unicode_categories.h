// Copyright 2026 The pagedkv Authors.
//
// Unicode helpers for tokenizers: UTF-8 decoding and the character classes of the byte-level BPE
// split regexes: \p{L} (general category L*), \p{N} (N*), \s (White_Space). Categories come from
// a generated range table (scripts/gen_unicode_categories.py, Python's unicodedata; its Unicode
// version is in the table's first line).
//
// Example:
//   size_t i = 0;
//   char32_t cp = NextCodePoint("é!", &i);  // U+00E9, i == 2
//   IsLetter(cp);                           // true
#ifndef PAGEDKV_ENGINE_MODEL_TOKENIZERS_UNICODE_CATEGORIES_H_
#define PAGEDKV_ENGINE_MODEL_TOKENIZERS_UNICODE_CATEGORIES_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "pagedkv/export.h"

namespace pagedkv::model_internal {

PAGEDKV_EXPORT bool IsLetter(char32_t cp);      // \p{L}
PAGEDKV_EXPORT bool IsNumber(char32_t cp);      // \p{N}
PAGEDKV_EXPORT bool IsWhitespace(char32_t cp);  // \s (Unicode White_Space)

// Decodes the code point at s[*i] and advances *i past it. An invalid or truncated sequence
// yields U+FFFD and advances one byte. REQUIRES: *i < s.size().
PAGEDKV_EXPORT char32_t NextCodePoint(std::string_view s, size_t* i);

// Byte length of the UTF-8 sequence starting at s[i] (1 for an invalid byte).
// REQUIRES: i < s.size().
PAGEDKV_EXPORT size_t CodePointLength(std::string_view s, size_t i);

// Appends the UTF-8 encoding of `cp` to *out.
PAGEDKV_EXPORT void AppendUtf8(char32_t cp, std::string* out);

// `bytes` with every invalid UTF-8 sequence replaced by U+FFFD (as Rust's from_utf8_lossy).
PAGEDKV_EXPORT std::string Utf8Lossy(std::string_view bytes);

}  // namespace pagedkv::model_internal

#endif  // PAGEDKV_ENGINE_MODEL_TOKENIZERS_UNICODE_CATEGORIES_H_
