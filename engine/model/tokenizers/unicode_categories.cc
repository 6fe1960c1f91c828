// Copyright 2026 The pagedkv Authors.
#include "engine/model/tokenizers/unicode_categories.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>

namespace pagedkv::model_internal {
namespace {

struct CodePointRange {
  char32_t first, last;
};
struct CategoryRange {
  char32_t first, last;
  uint8_t category;  // a GeneralCategory
};
struct LowercaseMapping {
  char32_t cp;
  char32_t to[3];  // zero-padded
};
struct FoldMapping {
  char32_t cp, fold;
};

#include "engine/model/tokenizers/unicode_categories_table.inc"

template <size_t N>
bool InRanges(const CodePointRange (&ranges)[N], char32_t cp) {
  const auto* it =
      std::upper_bound(std::begin(ranges), std::end(ranges), cp,
                       [](char32_t c, const CodePointRange& r) { return c < r.first; });
  return it != std::begin(ranges) && cp <= std::prev(it)->last;
}

// Length of the valid UTF-8 sequence at s[i], or the length of its maximal valid prefix negated
// (at least -1) when the sequence is invalid or truncated. Writes the code point when valid.
int DecodeAt(std::string_view s, size_t i, char32_t* cp) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  int len = 0;
  char32_t value = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF)
    len = 2, value = b0 & 0x1F;
  else if (b0 >= 0xE0 && b0 <= 0xEF)
    len = 3, value = b0 & 0x0F;
  else if (b0 >= 0xF0 && b0 <= 0xF4)
    len = 4, value = b0 & 0x07;
  else
    return -1;
  if (b0 == 0xE0) lo = 0xA0;
  if (b0 == 0xED) hi = 0x9F;  // no surrogates
  if (b0 == 0xF0) lo = 0x90;
  if (b0 == 0xF4) hi = 0x8F;  // <= U+10FFFF
  for (int k = 1; k < len; ++k) {
    if (i + k >= s.size()) return -k;
    const auto b = static_cast<uint8_t>(s[i + k]);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return -k;
    value = (value << 6) | (b & 0x3F);
  }
  *cp = value;
  return len;
}

}  // namespace

bool IsLetter(char32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return InRanges(kLetterRanges, cp);
}

bool IsNumber(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return InRanges(kNumberRanges, cp);
}

bool IsWhitespace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

bool IsWordChar(char32_t cp) {
  if (cp < 0x80) return IsLetter(cp) || IsNumber(cp) || cp == '_';
  return InRanges(kWordRanges, cp);
}

bool IsRustWordChar(char32_t cp) {
  if (cp == 0x200C || cp == 0x200D) return true;
  if (cp >= 0x80 && cp < 0x100 && CategoryOf(cp) == GeneralCategory::kNo) return false;
  return IsWordChar(cp);
}

bool IsPunctuation(char32_t cp) {
  if (cp < 0x80) return cp > 0x20 && cp < 0x7F && !IsLetter(cp) && !IsNumber(cp);
  const GeneralCategory c = CategoryOf(cp);
  return c >= GeneralCategory::kPc && c <= GeneralCategory::kPs;
}

GeneralCategory CategoryOf(char32_t cp) {
  const auto* it = std::upper_bound(std::begin(kCategoryRanges), std::end(kCategoryRanges), cp,
                                    [](char32_t c, const CategoryRange& r) { return c < r.first; });
  if (it == std::begin(kCategoryRanges) || cp > std::prev(it)->last) return GeneralCategory::kCn;
  return static_cast<GeneralCategory>(std::prev(it)->category);
}

std::string_view CategoryName(GeneralCategory c) {
  static constexpr std::string_view kNames[kNumGeneralCategories] = {
      "Cc", "Cf", "Cn", "Co", "Cs", "Ll", "Lm", "Lo", "Lt", "Lu", "Mc", "Me", "Mn", "Nd", "Nl",
      "No", "Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps", "Sc", "Sk", "Sm", "So", "Zl", "Zp", "Zs"};
  return kNames[static_cast<size_t>(c)];
}

void AppendLowercase(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
    return;
  }
  const auto* it = std::lower_bound(std::begin(kLowercase), std::end(kLowercase), cp,
                                    [](const LowercaseMapping& m, char32_t x) { return m.cp < x; });
  if (it == std::end(kLowercase) || it->cp != cp) {
    AppendUtf8(cp, out);
    return;
  }
  for (char32_t c : it->to) {
    if (c != 0) AppendUtf8(c, out);
  }
}

char32_t SimpleFold(char32_t cp) {
  if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
  const auto* it = std::lower_bound(std::begin(kSimpleFold), std::end(kSimpleFold), cp,
                                    [](const FoldMapping& m, char32_t x) { return m.cp < x; });
  return it != std::end(kSimpleFold) && it->cp == cp ? it->fold : cp;
}

char32_t NextCodePoint(std::string_view s, size_t* i) {
  char32_t cp = 0;
  const int n = DecodeAt(s, *i, &cp);
  *i += static_cast<size_t>(n > 0 ? n : -n);
  return n > 0 ? cp : char32_t{0xFFFD};
}

size_t CodePointLength(std::string_view s, size_t i) {
  char32_t cp = 0;
  const int n = DecodeAt(s, i, &cp);
  return static_cast<size_t>(n > 0 ? n : -n);
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string Utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    char32_t cp = 0;
    const int n = DecodeAt(bytes, i, &cp);
    if (n > 0) {
      out.append(bytes.substr(i, static_cast<size_t>(n)));
      i += static_cast<size_t>(n);
    } else {
      out.append("\xEF\xBF\xBD");
      i += static_cast<size_t>(-n);
    }
  }
  return out;
}

}  // namespace pagedkv::model_internal
