// Copyright 2026 The pagedkv Authors.
//
// Pipeline (pipeline.h). A literal pattern is compiled as a regex of escaped characters, as
// tokenizers' Split does with a {"String": ...} pattern. A Split whose regex is GPT-2's, Llama-3's
// or Qwen2's, Isolated and not inverted, runs the hand-written splitter of byte_level.h (faster,
// same pieces: split_regex_test.cc checks it).
#include "engine/model/tokenizers/pipeline.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/model/tokenizers/byte_level.h"
#include "engine/model/tokenizers/unicode_categories.h"
#include "engine/model/tokenizers/unicode_nfc.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::model_internal {
namespace {

using PreKind = PreTokenizerStep::Kind;
using NormKind = NormalizerStep::Kind;

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // "▁"

// `literal` as a regex that matches exactly it.
std::string EscapeLiteral(std::string_view literal) {
  std::string out;
  for (size_t i = 0; i < literal.size();) {
    const char32_t c = NextCodePoint(literal, &i);
    const bool alnum = c < 0x80 && (IsLetter(c) || IsNumber(c));
    if (alnum) {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppendFormat(&out, "\\x{%X}", static_cast<uint32_t>(c));
    }
  }
  return out;
}

absl::StatusOr<SplitRegex> CompilePattern(std::string_view pattern, bool regex,
                                          const std::string& where) {
  if (!regex && pattern.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": an empty String pattern"));
  }
  absl::StatusOr<SplitRegex> re =
      SplitRegex::Compile(regex ? std::string(pattern) : EscapeLiteral(pattern));
  if (!re.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", re.status().message()));
  return re;
}

// Code points of `text` and the byte offset of each (then text.size()).
void Decode(std::string_view text, std::vector<char32_t>* cps, std::vector<size_t>* offsets) {
  cps->clear();
  offsets->clear();
  for (size_t i = 0; i < text.size();) {
    offsets->push_back(i);
    cps->push_back(NextCodePoint(text, &i));
  }
  offsets->push_back(text.size());
}

// tokenizers' find_matches for a regex: the matches and the gaps between them, in order.
std::vector<SplitSpan> RegexSpans(const SplitRegex& re, std::string_view text) {
  if (text.empty()) return {{0, 0, false}};
  std::vector<char32_t> cps;
  std::vector<size_t> off;
  Decode(text, &cps, &off);
  std::vector<SplitSpan> spans;
  size_t prev = 0;
  for (const auto& [b, e] : re.FindAll(cps)) {
    if (off[b] != prev) spans.push_back({prev, off[b], false});
    spans.push_back({off[b], off[e], true});
    prev = off[e];
  }
  if (prev != text.size()) spans.push_back({prev, text.size(), false});
  return spans;
}

// find_matches for a character predicate: each matching character is a match of its own.
template <typename Pred>
std::vector<SplitSpan> CharSpans(std::string_view text, Pred pred) {
  if (text.empty()) return {{0, 0, false}};
  std::vector<SplitSpan> spans;
  size_t last = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t b = i;
    if (!pred(NextCodePoint(text, &i))) continue;
    if (last < b) spans.push_back({last, b, false});
    spans.push_back({b, i, true});
    last = i;
  }
  if (last < text.size()) spans.push_back({last, text.size(), false});
  return spans;
}

// tokenizers' Whitespace: the matches of \w+|[^\w\s]+ (the Rust regex crate's classes, not
// Oniguruma's) kept, the whitespace between them dropped: runs of word characters and runs of
// other non-space characters.
std::vector<SplitSpan> WhitespaceSpans(std::string_view text) {
  std::vector<SplitSpan> spans;
  int run = -1;  // the class of the open run: 0 word, 1 other, -1 none (whitespace)
  for (size_t i = 0; i < text.size();) {
    const size_t b = i;
    const char32_t c = NextCodePoint(text, &i);
    const int cls = IsWhitespace(c) ? -1 : IsRustWordChar(c) ? 0 : 1;
    if (cls >= 0 && cls == run) {
      spans.back().end = i;
    } else if (cls >= 0) {
      spans.push_back({b, i, false});
    }
    run = cls;
  }
  return spans;
}

std::vector<SplitSpan> Inverted(std::vector<SplitSpan> spans) {
  for (SplitSpan& s : spans) s.match = !s.match;
  return spans;
}

// `matched` spans merged into the span before (after, when walking backwards) them.
std::vector<SplitSpan> MergeMatches(const std::vector<SplitSpan>& spans, bool into_previous) {
  std::vector<SplitSpan> acc;
  bool previous_match = false;
  const size_t n = spans.size();
  for (size_t k = 0; k < n; ++k) {
    const SplitSpan& s = spans[into_previous ? k : n - 1 - k];
    if (s.match && !previous_match && !acc.empty()) {
      (into_previous ? acc.back().end : acc.back().begin) = into_previous ? s.end : s.begin;
    } else {
      acc.push_back({s.begin, s.end, false});
    }
    previous_match = s.match;
  }
  if (!into_previous) std::reverse(acc.begin(), acc.end());
  return acc;
}

}  // namespace

std::vector<SplitSpan> ApplySplitBehavior(std::vector<SplitSpan> spans, SplitBehavior behavior) {
  std::vector<SplitSpan> out;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      out = std::move(spans);
      break;
    case SplitBehavior::kIsolated:
      out = std::move(spans);
      for (SplitSpan& s : out) s.match = false;
      break;
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const SplitSpan& s : spans) {
        if (s.match == previous_match && !out.empty()) {
          out.back().end = s.end;
        } else {
          out.push_back({s.begin, s.end, false});
        }
        previous_match = s.match;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious:
      out = MergeMatches(spans, /*into_previous=*/true);
      break;
    case SplitBehavior::kMergedWithNext:
      out = MergeMatches(spans, /*into_previous=*/false);
      break;
  }
  std::erase_if(out, [](const SplitSpan& s) { return s.match || s.begin == s.end; });
  return out;
}

absl::StatusOr<Pipeline> Pipeline::Create(const std::vector<NormalizerStep>& normalizers,
                                          const std::vector<PreTokenizerStep>& pre_tokenizers) {
  Pipeline p;
  p.normalizers_ = normalizers;
  p.pre_tokenizers_ = pre_tokenizers;
  for (size_t k = 0; k < normalizers.size(); ++k) {
    const NormalizerStep& n = normalizers[k];
    std::optional<SplitRegex> re;
    if (n.kind == NormKind::kReplace) {
      PAGEDKV_ASSIGN_OR_RETURN(
          re, CompilePattern(n.pattern, n.regex, absl::StrCat("normalizer ", k, " (Replace)")));
    }
    p.normalizer_regex_.push_back(std::move(re));
  }
  for (size_t k = 0; k < pre_tokenizers.size(); ++k) {
    const PreTokenizerStep& t = pre_tokenizers[k];
    std::optional<SplitRegex> re;
    const std::string where = absl::StrCat("pre_tokenizer ", k);
    if (t.kind == PreKind::kSplit && !KnownByteLevelSplit(t).has_value()) {
      PAGEDKV_ASSIGN_OR_RETURN(re, CompilePattern(t.pattern, t.regex, where + " (Split)"));
    }
    p.pre_tokenizer_regex_.push_back(std::move(re));
  }
  return p;
}

std::optional<ByteLevelSplit> Pipeline::KnownByteLevelSplit(const PreTokenizerStep& t) {
  if (t.kind != PreKind::kSplit || !t.regex || t.invert || t.behavior != SplitBehavior::kIsolated)
    return std::nullopt;
  return ByteLevelSplitOf(t.pattern);
}

namespace {

std::string Lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t b = i;
    const char32_t c = NextCodePoint(s, &i);
    if (c == 0xFFFD && s.substr(b, i - b) != "\xEF\xBF\xBD") {
      out.append(s.substr(b, i - b));  // an invalid byte stays as it is
    } else {
      AppendLowercase(c, &out);
    }
  }
  return out;
}

// `s` without its combining marks (M*); invalid bytes stay.
std::string StripAccents(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t b = i;
    const GeneralCategory c = CategoryOf(NextCodePoint(s, &i));
    if (c != GeneralCategory::kMn && c != GeneralCategory::kMc && c != GeneralCategory::kMe) {
      out.append(s.substr(b, i - b));
    }
  }
  return out;
}

std::string_view Strip(std::string_view s, bool left, bool right) {
  size_t b = 0, e = s.size();
  while (left && b < e) {
    size_t i = b;
    if (!IsWhitespace(NextCodePoint(s, &i))) break;
    b = i;
  }
  while (right && e > b) {
    size_t start = e - 1;  // back to the first byte of the last code point
    while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t i = start;
    if (!IsWhitespace(NextCodePoint(s, &i)) || i != e) break;
    e = start;
  }
  return s.substr(b, e - b);
}

// Every match of `re` in s replaced by `content`; *kept false when an empty content removed the
// first character.
std::string ReplaceMatches(const SplitRegex& re, std::string_view s, std::string_view content,
                           bool* kept) {
  std::string out;
  const std::vector<SplitSpan> spans = RegexSpans(re, s);
  if (!s.empty() && spans[0].match && content.empty()) *kept = false;
  for (const SplitSpan& span : spans) {
    if (span.match) {
      out.append(content);
    } else {
      out.append(s.substr(span.begin, span.end - span.begin));
    }
  }
  return out;
}

}  // namespace

std::string Pipeline::Normalize(std::string_view segment, bool* lead_kept) const {
  std::string s(segment);
  bool kept = true;
  for (size_t k = 0; k < normalizers_.size(); ++k) {
    const NormalizerStep& n = normalizers_[k];
    switch (n.kind) {
      case NormKind::kNfc:
        s = UnicodeNormalize(s, NormalForm::kNfc);
        break;
      case NormKind::kNfd:
        s = UnicodeNormalize(s, NormalForm::kNfd);
        break;
      case NormKind::kNfkc:
        s = UnicodeNormalize(s, NormalForm::kNfkc);
        break;
      case NormKind::kNfkd:
        s = UnicodeNormalize(s, NormalForm::kNfkd);
        break;
      case NormKind::kLowercase:
        s = Lowercase(s);
        break;
      case NormKind::kStripAccents:
        s = StripAccents(s);
        break;
      case NormKind::kStrip: {
        const std::string_view stripped = Strip(s, n.strip_left, n.strip_right);
        kept = kept && stripped.data() == s.data();
        s = std::string(stripped);
        break;
      }
      case NormKind::kPrepend:
        if (!s.empty()) s = absl::StrCat(n.content, s);
        break;
      case NormKind::kReplace:
        s = ReplaceMatches(*normalizer_regex_[k], s, n.content, &kept);
        break;
    }
  }
  if (lead_kept != nullptr) *lead_kept = kept;
  return s;
}

std::vector<std::string> Pipeline::PreTokenize(std::string_view segment, bool at_start) const {
  std::vector<Piece> pieces = {{std::string(segment), at_start}};
  for (size_t k = 0; k < pre_tokenizers_.size(); ++k) {
    std::vector<Piece> next;
    for (const Piece& p : pieces) RunStep(k, p, &next);
    pieces = std::move(next);
  }
  std::vector<std::string> words;
  words.reserve(pieces.size());
  for (Piece& p : pieces) {
    if (!p.text.empty()) words.push_back(std::move(p.text));
  }
  return words;
}

void Pipeline::SplitBy(const Piece& piece, const std::vector<SplitSpan>& spans,
                       SplitBehavior behavior, std::vector<Piece>* out) const {
  for (const SplitSpan& s : ApplySplitBehavior(spans, behavior)) {
    out->push_back({piece.text.substr(s.begin, s.end - s.begin), piece.at_start && s.begin == 0});
  }
}

void Pipeline::RunStep(size_t step, const Piece& piece, std::vector<Piece>* out) const {
  const PreTokenizerStep& t = pre_tokenizers_[step];
  const std::string& text = piece.text;
  switch (t.kind) {
    case PreKind::kSplit:
      if (const std::optional<ByteLevelSplit> known = KnownByteLevelSplit(t); known.has_value()) {
        for (std::string_view v : SplitByteLevel(text, *known)) {
          const auto begin = static_cast<size_t>(v.data() - text.data());
          out->push_back({std::string(v), piece.at_start && begin == 0});
        }
        return;
      }
      return SplitBy(piece,
                     t.invert ? Inverted(RegexSpans(*pre_tokenizer_regex_[step], text))
                              : RegexSpans(*pre_tokenizer_regex_[step], text),
                     t.behavior, out);
    case PreKind::kWhitespace:
      return SplitBy(piece, WhitespaceSpans(text), SplitBehavior::kRemoved, out);
    case PreKind::kWhitespaceSplit:
      return SplitBy(piece, CharSpans(text, IsWhitespace), SplitBehavior::kRemoved, out);
    case PreKind::kPunctuation:
      return SplitBy(piece, CharSpans(text, IsPunctuation), t.behavior, out);
    case PreKind::kDigits:
      return SplitBy(piece, CharSpans(text, IsNumber),
                     t.individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous,
                     out);
    case PreKind::kBert:
      return Bert(piece, out);
    case PreKind::kByteLevel:
      return ByteLevel(t, piece, out);
    case PreKind::kMetaspace:
      return Metaspace(t, piece, out);
  }
}

// BertPreTokenizer: White_Space dropped, then each punctuation character a piece of its own.
void Pipeline::Bert(const Piece& piece, std::vector<Piece>* out) const {
  std::vector<Piece> words;
  SplitBy(piece, CharSpans(piece.text, IsWhitespace), SplitBehavior::kRemoved, &words);
  for (const Piece& w : words) {
    SplitBy(w, CharSpans(w.text, IsPunctuation), SplitBehavior::kIsolated, out);
  }
}

void Pipeline::ByteLevel(const PreTokenizerStep& t, const Piece& piece,
                         std::vector<Piece>* out) const {
  const std::string text = t.add_prefix_space && !piece.text.starts_with(' ')
                               ? absl::StrCat(" ", piece.text)
                               : piece.text;
  if (!t.use_regex) {
    out->push_back({ToByteLevelAlphabet(text), piece.at_start});
    return;
  }
  for (std::string_view v : SplitByteLevel(text, ByteLevelSplit::kGpt2)) {
    out->push_back({ToByteLevelAlphabet(v), piece.at_start && v.data() == text.data()});
  }
}

void Pipeline::Metaspace(const PreTokenizerStep& t, const Piece& piece,
                         std::vector<Piece>* out) const {
  std::string s;
  for (char c : piece.text) {
    if (c == ' ') {
      s.append(kSpaceMarker);
    } else {
      s.push_back(c);
    }
  }
  const bool prepend = t.metaspace == MetaspaceMode::kAlways ||
                       (t.metaspace == MetaspaceMode::kFirst && piece.at_start);
  if (prepend && !std::string_view(s).starts_with(kSpaceMarker)) s = std::string(kSpaceMarker) + s;
  if (!t.metaspace_split) {
    out->push_back({std::move(s), piece.at_start});
    return;
  }
  const Piece marked{std::move(s), piece.at_start};
  std::vector<SplitSpan> spans;  // every "▁" is a match
  size_t last = 0;
  for (size_t i = marked.text.find(kSpaceMarker); i != std::string::npos;
       i = marked.text.find(kSpaceMarker, i + kSpaceMarker.size())) {
    if (last < i) spans.push_back({last, i, false});
    spans.push_back({i, i + kSpaceMarker.size(), true});
    last = i + kSpaceMarker.size();
  }
  if (last < marked.text.size() || spans.empty())
    spans.push_back({last, marked.text.size(), false});
  SplitBy(marked, spans, SplitBehavior::kMergedWithNext, out);
}

}  // namespace pagedkv::model_internal
