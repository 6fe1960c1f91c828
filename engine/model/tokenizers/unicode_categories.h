// Copyright 2026 The pagedkv Authors.
//
// Unicode helpers for tokenizers: UTF-8 decoding, the character classes of split regexes and
// pre-tokenizers (\p{L} (general category L*), \p{N} (N*), \s (White_Space), \w as Oniguruma
// defines it, every general category for \p{..}), Rust's char::to_lowercase and one-to-one case
// folding. Tables are generated (scripts/gen_unicode_categories.py, Python's unicodedata; its
// Unicode version is in the table's first line).
//
// Example:
//   size_t i = 0;
//   char32_t cp = NextCodePoint("é!", &i);  // U+00E9, i == 2
//   IsLetter(cp);                           // true
#ifndef PAGEDKV_ENGINE_MODEL_TOKENIZERS_UNICODE_CATEGORIES_H_
#define PAGEDKV_ENGINE_MODEL_TOKENIZERS_UNICODE_CATEGORIES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "pagedkv/export.h"

namespace pagedkv::model_internal {

PAGEDKV_EXPORT bool IsLetter(char32_t cp);      // \p{L}
PAGEDKV_EXPORT bool IsNumber(char32_t cp);      // \p{N}
PAGEDKV_EXPORT bool IsWhitespace(char32_t cp);  // \s (Unicode White_Space)
PAGEDKV_EXPORT bool IsWordChar(char32_t cp);    // Oniguruma's \w (see the generator)
// The Rust regex crate's \w (tokenizers' Whitespace pre-tokenizer and single_word check):
// IsWordChar without the Latin-1 digits such as "²", with ZERO WIDTH (NON-)JOINER.
PAGEDKV_EXPORT bool IsRustWordChar(char32_t cp);
// tokenizers' Punctuation pre-tokenizer: ASCII punctuation or a P* general category.
PAGEDKV_EXPORT bool IsPunctuation(char32_t cp);

// General categories, in the generator's order; kCn for unassigned code points.
enum class GeneralCategory : uint8_t {
  kCc,
  kCf,
  kCn,
  kCo,
  kCs,
  kLl,
  kLm,
  kLo,
  kLt,
  kLu,
  kMc,
  kMe,
  kMn,
  kNd,
  kNl,
  kNo,
  kPc,
  kPd,
  kPe,
  kPf,
  kPi,
  kPo,
  kPs,
  kSc,
  kSk,
  kSm,
  kSo,
  kZl,
  kZp,
  kZs,
};
inline constexpr int kNumGeneralCategories = 30;
PAGEDKV_EXPORT GeneralCategory CategoryOf(char32_t cp);
// The two-letter name of category `c` ("Lu").
PAGEDKV_EXPORT std::string_view CategoryName(GeneralCategory c);

// Appends Rust's char::to_lowercase of `cp` (one to three code points) as UTF-8.
PAGEDKV_EXPORT void AppendLowercase(char32_t cp, std::string* out);
// The one-to-one case folding of `cp` (itself when it has none), as (?i:...) compares.
PAGEDKV_EXPORT char32_t SimpleFold(char32_t cp);

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
