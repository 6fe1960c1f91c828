// Copyright 2026 The pagedkv Authors.
#include "engine/model/tokenizers/byte_level.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/tokenizers/unicode_categories.h"

namespace pagedkv::model_internal {
namespace {

struct ByteMap {
  std::array<char32_t, 256> to_unicode{};
  std::array<int16_t, 324> to_byte{};  // code points < 324 cover the whole alphabet
};

const ByteMap& Map() {
  static const ByteMap map = [] {
    ByteMap m;
    m.to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t cp =
          printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
      m.to_unicode[static_cast<size_t>(b)] = cp;
      m.to_byte[cp] = static_cast<int16_t>(b);
    }
    return m;
  }();
  return map;
}

bool IsOther(char32_t c) { return !IsWhitespace(c) && !IsLetter(c) && !IsNumber(c); }
bool IsNewline(char32_t c) { return c == '\r' || c == '\n'; }

// End of the contraction 's 't 're 've 'm 'll 'd at i, or i when none.
size_t MatchContraction(const std::vector<char32_t>& c, size_t i, bool fold_case) {
  const size_t n = c.size();
  if (c[i] != '\'' || i + 1 >= n) return i;
  auto low = [&](size_t k) -> char32_t {  // the one-to-one case folds onto s t r e v m l d
    if (!fold_case) return c[k];
    if (c[k] == 0x17F) return 's';  // LATIN SMALL LETTER LONG S, the only non-ASCII one
    return c[k] >= 'A' && c[k] <= 'Z' ? c[k] + 32 : c[k];
  };
  const char32_t a = low(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  if (i + 2 < n) {
    const char32_t b = low(i + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  }
  return i;
}

// \s*[\r\n]+ (Llama-3, Qwen2): up to the last newline of the whitespace run at i, or i.
size_t MatchNewlines(const std::vector<char32_t>& c, size_t i) {
  size_t end = i;
  for (size_t j = i; j < c.size() && IsWhitespace(c[j]); ++j) {
    if (IsNewline(c[j])) end = j + 1;
  }
  return end;
}

// \s+(?!\S)|\s+ at i (c[i] is whitespace): the run, less its last character when a
// non-space follows and the run is longer than one.
size_t MatchSpaces(const std::vector<char32_t>& c, size_t i) {
  size_t j = i;
  while (j < c.size() && IsWhitespace(c[j])) ++j;
  if (j == c.size() || j - i < 2) return j;
  return j - 1;
}

template <typename Pred>
size_t Run(const std::vector<char32_t>& c, size_t k, Pred pred, size_t max = SIZE_MAX) {
  size_t j = k;
  while (j < c.size() && j - k < max && pred(c[j])) ++j;
  return j;
}

size_t MatchGpt2(const std::vector<char32_t>& c, size_t i) {
  if (size_t e = MatchContraction(c, i, /*fold_case=*/false); e > i) return e;
  const size_t k = i + (c[i] == ' ' && i + 1 < c.size() ? 1 : 0);
  if (IsLetter(c[k])) return Run(c, k, IsLetter);
  if (IsNumber(c[k])) return Run(c, k, IsNumber);
  if (IsOther(c[k])) return Run(c, k, IsOther);
  return MatchSpaces(c, i);
}

size_t MatchLlama3(const std::vector<char32_t>& c, size_t i, size_t max_digits) {
  const size_t n = c.size();
  if (size_t e = MatchContraction(c, i, /*fold_case=*/true); e > i) return e;
  if (IsLetter(c[i])) return Run(c, i, IsLetter);
  if (!IsNewline(c[i]) && !IsLetter(c[i]) && !IsNumber(c[i])) {  // [^\r\n\p{L}\p{N}]?\p{L}+
    if (i + 1 < n && IsLetter(c[i + 1])) return Run(c, i + 1, IsLetter);
  }
  if (IsNumber(c[i])) return Run(c, i, IsNumber, max_digits);
  const size_t k = i + (c[i] == ' ' && i + 1 < n ? 1 : 0);
  if (IsOther(c[k])) return Run(c, Run(c, k, IsOther), IsNewline);
  if (size_t e = MatchNewlines(c, i); e > i) return e;
  return MatchSpaces(c, i);
}

}  // namespace

namespace {

// Appends the pieces of code points [begin, end) of cps (offsets as in SplitByteLevel).
void SplitRange(const std::vector<char32_t>& all, const std::vector<size_t>& offsets, size_t begin,
                size_t end, ByteLevelSplit split, std::string_view text,
                std::vector<std::string_view>* pieces) {
  const std::vector<char32_t> cps(all.begin() + static_cast<long>(begin),
                                  all.begin() + static_cast<long>(end));
  for (size_t i = 0; i < cps.size();) {
    size_t e = split == ByteLevelSplit::kLlama3  ? MatchLlama3(cps, i, 3)
               : split == ByteLevelSplit::kQwen2 ? MatchLlama3(cps, i, 1)
                                                 : MatchGpt2(cps, i);
    if (e <= i) e = i + 1;  // every character is matched by some alternative
    pieces->push_back(text.substr(offsets[begin + i], offsets[begin + e] - offsets[begin + i]));
    i = e;
  }
}

}  // namespace

std::vector<std::string_view> SplitByteLevel(std::string_view text, ByteLevelSplit split) {
  std::vector<char32_t> cps;
  std::vector<size_t> offsets;  // byte offset of each code point, then text.size()
  for (size_t i = 0; i < text.size();) {
    offsets.push_back(i);
    cps.push_back(NextCodePoint(text, &i));
  }
  offsets.push_back(text.size());
  std::vector<std::string_view> pieces;
  if (split != ByteLevelSplit::kGpt2Digits) {
    SplitRange(cps, offsets, 0, cps.size(), split, text, &pieces);
    return pieces;
  }
  size_t start = 0;  // start of the text since the last digit
  for (size_t i = 0; i < cps.size(); ++i) {
    if (!IsNumber(cps[i])) continue;
    SplitRange(cps, offsets, start, i, ByteLevelSplit::kGpt2, text, &pieces);
    pieces.push_back(text.substr(offsets[i], offsets[i + 1] - offsets[i]));
    start = i + 1;
  }
  SplitRange(cps, offsets, start, cps.size(), ByteLevelSplit::kGpt2, text, &pieces);
  return pieces;
}

std::optional<ByteLevelSplit> ByteLevelSplitOf(std::string_view pattern) {
  if (pattern == kGpt2SplitPattern) return ByteLevelSplit::kGpt2;
  if (pattern == kLlama3SplitPattern) return ByteLevelSplit::kLlama3;
  if (pattern == kQwen2SplitPattern) return ByteLevelSplit::kQwen2;
  return std::nullopt;
}

std::string ToByteLevelAlphabet(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char b : bytes) AppendUtf8(Map().to_unicode[static_cast<uint8_t>(b)], &out);
  return out;
}

std::string FromByteLevelAlphabet(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (size_t i = 0; i < token.size();) {
    const char32_t cp = NextCodePoint(token, &i);
    if (cp >= Map().to_byte.size() || Map().to_byte[cp] < 0) return std::string(token);
    out.push_back(static_cast<char>(Map().to_byte[cp]));
  }
  return out;
}

}  // namespace pagedkv::model_internal
