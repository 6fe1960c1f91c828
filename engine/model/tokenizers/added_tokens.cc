// Copyright 2026 The pagedkv Authors.
#include "engine/model/tokenizers/added_tokens.h"

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/model/tokenizers/unicode_categories.h"

namespace pagedkv::model_internal {
namespace {

// Bytes of whitespace ending at `end` (lstrip) / starting at `begin` (rstrip).
size_t SpacesBefore(std::string_view text, size_t begin, size_t end) {
  size_t i = end;
  while (i > begin) {
    size_t start = i - 1;
    while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    size_t k = start;
    if (!IsWhitespace(NextCodePoint(text, &k))) break;
    i = start;
  }
  return end - i;
}

size_t SpacesAfter(std::string_view text, size_t begin) {
  size_t i = begin;
  while (i < text.size()) {
    size_t k = i;
    if (!IsWhitespace(NextCodePoint(text, &k))) break;
    i = k;
  }
  return i - begin;
}

// Whether text[begin, end) has no word character right before or after it.
bool IsSingleWord(std::string_view text, size_t begin, size_t end) {
  if (end < text.size()) {
    size_t k = end;
    if (IsRustWordChar(NextCodePoint(text, &k))) return false;
  }
  if (begin == 0) return true;
  size_t start = begin - 1;  // back to the first byte of the code point before
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return !IsRustWordChar(NextCodePoint(text, &start));
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedPattern> patterns)
    : patterns_(std::move(patterns)) {
  for (size_t p = 0; p < patterns_.size(); ++p) {
    by_first_byte_[static_cast<uint8_t>(patterns_[p].text[0])].push_back(p);
  }
  for (std::vector<size_t>& list : by_first_byte_) {
    std::stable_sort(list.begin(), list.end(), [this](size_t a, size_t b) {
      return patterns_[a].text.size() > patterns_[b].text.size();
    });
  }
}

std::vector<TextPiece> AddedTokenMatcher::Split(std::string_view text) const {
  std::vector<TextPiece> pieces;
  size_t last = 0;  // start of the text not yet emitted
  for (size_t i = 0; i < text.size() && !patterns_.empty();) {
    const AddedPattern* hit = nullptr;
    for (size_t p : by_first_byte_[static_cast<uint8_t>(text[i])]) {
      if (text.substr(i).starts_with(patterns_[p].text)) {
        hit = &patterns_[p];
        break;
      }
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    if (hit->single_word && !IsSingleWord(text, i, i + hit->text.size())) {
      i += hit->text.size();
      continue;
    }
    const size_t begin = i - (hit->lstrip ? SpacesBefore(text, last, i) : 0);
    size_t end = i + hit->text.size();
    if (hit->rstrip) end += SpacesAfter(text, end);
    if (begin > last) pieces.push_back({text.substr(last, begin - last), -1});
    pieces.push_back({text.substr(begin, end - begin), hit->id});
    last = i = end;
  }
  if (last < text.size()) pieces.push_back({text.substr(last), -1});
  return pieces;
}

}  // namespace pagedkv::model_internal
