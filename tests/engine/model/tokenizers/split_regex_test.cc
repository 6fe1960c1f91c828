// Copyright 2026 The pagedkv Authors.
//
// SplitRegex: leftmost-first matching (alternation order, greedy and lazy quantifiers,
// lookahead, Oniguruma's empty-iteration rule, the onig crate's empty-match rule), case folding,
// refusals naming the construct, bounded work on patterns that make backtracking engines blow up,
// and the generic engine against the hand-written GPT-2 / Llama-3 / Qwen2 splitters on a
// generated corpus (tests/python/test_hf_tokenizer_families.py checks it against tokenizers).
#include "engine/model/tokenizers/split_regex.h"

#include <chrono>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/model/tokenizers/byte_level.h"
#include "engine/model/tokenizers/unicode_categories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagedkv::model_internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Spans = std::vector<std::pair<size_t, size_t>>;

std::vector<char32_t> CodePoints(std::string_view s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) out.push_back(NextCodePoint(s, &i));
  return out;
}

Spans Find(std::string_view pattern, std::string_view text) {
  absl::StatusOr<SplitRegex> re = SplitRegex::Compile(pattern);
  EXPECT_TRUE(re.ok()) << pattern << ": " << re.status();
  return re.ok() ? re->FindAll(CodePoints(text)) : Spans{};
}

// The matched substrings (text is ASCII or code point indices are byte indices).
std::vector<std::string> Matches(std::string_view pattern, std::string_view text) {
  std::vector<std::string> out;
  for (const auto& [b, e] : Find(pattern, text)) out.emplace_back(text.substr(b, e - b));
  return out;
}

TEST(SplitRegexTest, LeftmostFirstAlternationAndQuantifiers) {
  EXPECT_THAT(Matches("a|ab", "ab"), ElementsAre("a"));  // the first alternative wins
  EXPECT_THAT(Matches("ab|a", "ab"), ElementsAre("ab"));
  EXPECT_THAT(Matches("a+", "baaab"), ElementsAre("aaa"));
  EXPECT_THAT(Matches("a+?", "aa"), ElementsAre("a", "a"));  // lazy
  EXPECT_THAT(Matches("a{2,3}", "aaaaaaa"), ElementsAre("aaa", "aaa"));
  EXPECT_THAT(Matches("a{2}", "aaaaa"), ElementsAre("aa", "aa"));
  EXPECT_THAT(Matches("a{2,}?", "aaaaa"), ElementsAre("aa", "aa"));
  EXPECT_THAT(Matches("a{,2}b", "aaab"), ElementsAre("aab"));  // Oniguruma's {,n}
  EXPECT_THAT(Matches("x{y", "x{y"), ElementsAre("x{y"));      // not a bound: literal
  EXPECT_THAT(Matches(R"(\s+(?!\S)|\s+)", "a   b"), ElementsAre("  ", " "));
  EXPECT_THAT(Matches("a(?=b)", "acab"), ElementsAre("a"));
  EXPECT_THAT(Matches("^a|b$", "a\nab\nb"), ElementsAre("a", "a", "b", "b"));
  EXPECT_THAT(Matches(R"(\r\n|\n)", "a\r\n\nb"), ElementsAre("\r\n", "\n"));
  EXPECT_THAT(Matches(R"(\x41\x{42}\u0043\.)", "ABC.ABC"), ElementsAre("ABC."));
}

TEST(SplitRegexTest, EmptyMatchesAndEmptyIterations) {
  // As the onig crate's find_iter: an empty match right after the previous match is skipped.
  EXPECT_EQ(Find("x*", "bc"), (Spans{{0, 0}, {1, 1}, {2, 2}}));
  EXPECT_EQ(Find("a*", "aab"), (Spans{{0, 2}, {3, 3}}));
  // Oniguruma leaves a repeat after an iteration that matched empty: (?:|\S)* first takes the
  // empty alternative, so \w must follow at once; only after that fails does \S consume.
  EXPECT_EQ(Find(R"((?:|\S)*\w)", "$00"), (Spans{{0, 2}, {2, 3}}));
  // At 2 the first iteration is empty, so the match is empty (and skipped, right after the last).
  EXPECT_EQ(Find(R"((?:\S?|\s)+)", "ab c"), (Spans{{0, 2}, {3, 4}}));
  // The lookahead's empty iteration ends {2} before "\n" could be its second.
  EXPECT_THAT(Matches(R"((\n|(?!\p{L})){2})", "\nE"), ElementsAre("", ""));
}

TEST(SplitRegexTest, ClassesAndCaseFolding) {
  EXPECT_THAT(Matches(R"([^\s\p{L}\p{N}]+)", "ab!?  1.."), ElementsAre("!?", ".."));
  EXPECT_THAT(Matches(R"([\p{Lu}x-z]+)", "aBXyzw"), ElementsAre("BXyz"));
  EXPECT_THAT(Matches(R"(\p{Lu}\p{Ll}+)", "the Cat"), ElementsAre("Cat"));
  EXPECT_THAT(Matches(R"(\d+|\W)", "a1 2"), ElementsAre("1", " ", "2"));
  EXPECT_THAT(Matches("(?i:'s|'ll)", "'S 'lL 's"), ElementsAre("'S", "'lL", "'s"));
  EXPECT_THAT(Matches("(?i:[a-c]+)", "xAbCz"), ElementsAre("AbC"));
  EXPECT_THAT(Matches("(?i:a(?-i:b))", "AB Ab ab"), ElementsAre("Ab", "ab"));
  // Oniguruma folds letters but not a bare \p{..}: (?i:\p{Ll}) does not match "T".
  EXPECT_TRUE(Matches(R"((?i:\p{Ll}))", "T").empty());
  // One-to-one folds beyond ASCII: U+017F LONG S folds to 's', KELVIN SIGN to 'k'.
  EXPECT_EQ(Find("(?i:'s)", "'\xC5\xBF"), (Spans{{0, 2}}));
  EXPECT_EQ(Find("(?i:k)", "\xE2\x84\xAA"), (Spans{{0, 1}}));
  // \w as Oniguruma defines it: letters, marks, Nd, Pc, and the Latin-1 digits "²".
  EXPECT_EQ(Find(R"(\w+)", "a_\xC2\xB2\xCC\x81 "), (Spans{{0, 4}}));
}

TEST(SplitRegexTest, UnsupportedConstructsAreRefusedByName) {
  const std::pair<std::string_view, std::string_view> cases[] = {
      {"(?<=a)b", "lookbehind"},       {"(?<!a)b", "lookbehind"},
      {"(?>ab)", "atomic group"},      {"a*+", "possessive"},
      {"(a)\\1", "backreference"},     {"\\bword", "escape \\b"},
      {"\\p{Han}", "\\p{Han}"},        {"[[:alpha:]]", "nested class"},
      {"[a-z&&[^b]]", "intersection"}, {"(ab", "missing ')'"},
      {"ab)", "unmatched ')'"},        {"[ab", "missing ']'"},
      {"*a", "nothing to repeat"},     {"a**", "nested quantifier"},
      {"[z-a]", "out of order"},       {"(?x)a", "group flag"},
      {"a{2000}", "bound over"},       {"(?:a{999}){999}", "instructions"},
      {"abc\\", "trailing backslash"},
  };
  for (const auto& [pattern, what] : cases) {
    absl::StatusOr<SplitRegex> re = SplitRegex::Compile(pattern);
    ASSERT_FALSE(re.ok()) << pattern;
    EXPECT_EQ(re.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(re.status().message(), HasSubstr(what)) << pattern;
  }
  EXPECT_THAT(SplitRegex::Compile(std::string(200, '(')).status().message(),
              HasSubstr("nested deeper"));
  EXPECT_THAT(SplitRegex::Compile(std::string(70000, 'a')).status().message(),
              HasSubstr("longer than"));
  std::string folds;
  for (int k = 0; k < 300; ++k) folds += R"((?i:[\x{1}-\x{2FFF}]))";
  EXPECT_THAT(SplitRegex::Compile(folds).status().message(), HasSubstr("too large"));
}

TEST(SplitRegexTest, PathologicalPatternsStayBounded) {
  // Exponential for a backtracking engine (Oniguruma gives up with its retry limit); a Pike VM
  // keeps one thread per instruction per position.
  const std::string as(20000, 'a');
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(Find("(a*)*b", as).empty());
  EXPECT_TRUE(Find("(a|a)*b", as).empty());
  EXPECT_TRUE(Find("(?:a+a+)+b", as).empty());
  EXPECT_EQ(Find("(a|aa)+$", as).size(), 1u);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0);
}

// Random texts over the classes the split regexes tell apart.
std::vector<std::string> Corpus(uint32_t seed, int n) {
  const std::vector<std::string> parts = {
      "the",         "The",
      "HELLO",       "don't",
      "I'M",         "we'LL",
      "it'S",        "'re",
      "'VE",         "'d",
      "'",           "''",
      "12345",       "3.14",
      "٣٤٥",         "½",
      "café",        "日本語",
      "Ελληνικά",    "naïve",
      "e\xCC\x81",   "\xF0\x9F\x99\x82",
      " ",           " ",
      "  ",          "   ",
      "\t",          "\n",
      "\n\n",        "\r\n",
      " \n ",        "\xE3\x80\x80",
      "!",           "?!",
      ",",           "...",
      "(",           ")",
      "-",           "$",
      "#",           "\"",
      "\xC2\xA0",    "x",
      "\xFF",        "\xC5\xBF",
      "\xE2\x84\xAA"};  // U+017F LONG S, U+212A KELVIN SIGN (fold to s, k)
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (int k = 0; k < n; ++k) {
    std::string t;
    const int len = static_cast<int>(rng() % 16);
    for (int j = 0; j < len; ++j) t += parts[rng() % parts.size()];
    out.push_back(t);
  }
  return out;
}

TEST(SplitRegexTest, GenericEngineMatchesTheHandWrittenSplitters) {
  const std::pair<std::string_view, ByteLevelSplit> known[] = {
      {kGpt2SplitPattern, ByteLevelSplit::kGpt2},
      {kLlama3SplitPattern, ByteLevelSplit::kLlama3},
      {kQwen2SplitPattern, ByteLevelSplit::kQwen2}};
  for (const auto& [pattern, split] : known) {
    absl::StatusOr<SplitRegex> re = SplitRegex::Compile(pattern);
    ASSERT_TRUE(re.ok()) << re.status();
    for (const std::string& text : Corpus(7, 3000)) {
      std::vector<size_t> offsets;
      for (size_t i = 0; i < text.size();) {
        offsets.push_back(i);
        NextCodePoint(text, &i);
      }
      offsets.push_back(text.size());
      std::vector<std::string_view> generic;
      size_t prev = 0;
      for (const auto& [b, e] : re->FindAll(CodePoints(text))) {
        if (offsets[b] != prev)
          generic.push_back(std::string_view(text).substr(prev, offsets[b] - prev));
        if (e != b)
          generic.push_back(std::string_view(text).substr(offsets[b], offsets[e] - offsets[b]));
        prev = offsets[e];
      }
      if (prev != text.size()) generic.push_back(std::string_view(text).substr(prev));
      ASSERT_EQ(generic, SplitByteLevel(text, split)) << pattern << " on \"" << text << "\"";
    }
  }
}

}  // namespace
}  // namespace pagedkv::model_internal
