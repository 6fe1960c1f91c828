// Copyright 2026 The pagedkv Authors.
//
// Pipeline: tokenizers' split behaviours worked out by hand on "the-final--countdown", each
// normalizer, each pre-tokenizer, their composition (ByteLevel's prefix on every piece,
// Metaspace's "first" after a Strip), invalid UTF-8 (kept, never a crash) and bad patterns; and
// the added-token matcher's single_word rule, which uses the same Rust \w as Whitespace.
#include "engine/model/tokenizers/pipeline.h"

#include <string>
#include <string_view>
#include <vector>

#include "engine/model/tokenizers/added_tokens.h"
#include "engine/model/tokenizers/byte_level.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/model/bpe_tokenizer.h"

namespace pagedkv::model_internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using N = NormalizerStep::Kind;
using P = PreTokenizerStep::Kind;

// The pieces `behavior` makes of "the-final--countdown" split on each "-".
std::vector<std::string> SplitDashes(SplitBehavior behavior) {
  const std::string text = "the-final--countdown";
  std::vector<SplitSpan> spans = {{0, 3, false}, {3, 4, true},   {4, 9, false},
                                  {9, 10, true}, {10, 11, true}, {11, 20, false}};
  std::vector<std::string> out;
  for (const SplitSpan& s : ApplySplitBehavior(spans, behavior)) {
    out.push_back(text.substr(s.begin, s.end - s.begin));
  }
  return out;
}

TEST(TokenizerPipelineTest, SplitBehaviors) {
  EXPECT_THAT(SplitDashes(SplitBehavior::kRemoved), ElementsAre("the", "final", "countdown"));
  EXPECT_THAT(SplitDashes(SplitBehavior::kIsolated),
              ElementsAre("the", "-", "final", "-", "-", "countdown"));
  EXPECT_THAT(SplitDashes(SplitBehavior::kMergedWithPrevious),
              ElementsAre("the-", "final-", "-", "countdown"));
  EXPECT_THAT(SplitDashes(SplitBehavior::kMergedWithNext),
              ElementsAre("the", "-final", "-", "-countdown"));
  EXPECT_THAT(SplitDashes(SplitBehavior::kContiguous),
              ElementsAre("the", "-", "final", "--", "countdown"));
}

std::vector<std::string> RunPipeline(const std::vector<NormalizerStep>& n,
                                     const std::vector<PreTokenizerStep>& p,
                                     std::string_view text) {
  absl::StatusOr<Pipeline> pipeline = Pipeline::Create(n, p);
  EXPECT_TRUE(pipeline.ok()) << pipeline.status();
  if (!pipeline.ok()) return {};
  bool lead_kept = true;
  const std::string normalized = pipeline->Normalize(text, &lead_kept);
  return pipeline->PreTokenize(normalized, lead_kept);
}

TEST(TokenizerPipelineTest, Normalizers) {
  auto normalize = [](std::vector<NormalizerStep> steps, std::string_view text) {
    return Pipeline::Create(steps, {})->Normalize(text);
  };
  // NFKC: the ligature U+FB01 and full-width letters become ASCII; NFC keeps them.
  EXPECT_EQ(normalize({{.kind = N::kNfkc}}, "\xEF\xAC\x81 \xEF\xBC\xA8i"), "fi Hi");
  EXPECT_EQ(normalize({{.kind = N::kNfc}}, "\xEF\xAC\x81"), "\xEF\xAC\x81");
  EXPECT_EQ(normalize({{.kind = N::kNfd}}, "\xC3\xA9"), "e\xCC\x81");
  // Lowercase is Rust's char::to_lowercase: U+0130 becomes "i" + U+0307, Σ becomes σ.
  EXPECT_EQ(normalize({{.kind = N::kLowercase}}, "AB\xC4\xB0\xCE\xA3"), "abi\xCC\x87\xCF\x83");
  EXPECT_EQ(normalize({{.kind = N::kStrip, .strip_left = true, .strip_right = true}},
                      "\xE3\x80\x80 a b\t\n"),
            "a b");
  EXPECT_EQ(normalize({{.kind = N::kPrepend, .content = "_"}}, ""), "");
  // StripAccents after NFD: "é" (e + U+0301) and "ṩ" lose their marks.
  EXPECT_EQ(normalize({{.kind = N::kNfd}, {.kind = N::kStripAccents}}, "caf\xC3\xA9 \xE1\xB9\xA9"),
            "cafe s");
  EXPECT_EQ(normalize({{.kind = N::kReplace, .pattern = R"(\s+)", .regex = true, .content = " "}},
                      "a \t\nb  c"),
            "a b c");
  // In order: Replace then Prepend differs from Prepend then Replace.
  EXPECT_EQ(normalize({{.kind = N::kReplace, .pattern = " ", .content = "_"},
                       {.kind = N::kPrepend, .content = " "}},
                      "a b"),
            " a_b");
}

TEST(TokenizerPipelineTest, PreTokenizers) {
  EXPECT_THAT(RunPipeline({}, {{.kind = P::kWhitespace}}, "Hi, you!  ok"),
              ElementsAre("Hi", ",", "you", "!", "ok"));
  // Whitespace's \w is the Rust regex crate's: ZERO WIDTH JOINER is a word character, "²" is not
  // (Oniguruma's \w, which Split uses, says the opposite of both).
  EXPECT_THAT(RunPipeline({}, {{.kind = P::kWhitespace}},
                          "a\u200D"
                          "b a\u00B2b"),
              ElementsAre("a\u200D"
                          "b",
                          "a", "\u00B2", "b"));
  EXPECT_THAT(RunPipeline({}, {{.kind = P::kWhitespaceSplit}}, " Hi,\u3000you "),
              ElementsAre("Hi,", "you"));
  EXPECT_THAT(RunPipeline({}, {{.kind = P::kPunctuation, .behavior = SplitBehavior::kContiguous}},
                          "a,b!!$c"),
              ElementsAre("a", ",", "b", "!!$", "c"));  // ASCII '$' counts as punctuation
  EXPECT_THAT(RunPipeline({}, {{.kind = P::kBert}}, "Hi, you!! a$b  ok"),
              ElementsAre("Hi", ",", "you", "!", "!", "a", "$", "b", "ok"));
  EXPECT_THAT(RunPipeline({}, {{.kind = P::kDigits}}, "a123b4"), ElementsAre("a", "123", "b", "4"));
  EXPECT_THAT(RunPipeline({}, {{.kind = P::kDigits, .individual_digits = true}}, "a12"),
              ElementsAre("a", "1", "2"));
  EXPECT_THAT(RunPipeline({},
                          {{.kind = P::kSplit,
                            .pattern = "ab",
                            .regex = false,
                            .behavior = SplitBehavior::kMergedWithNext,
                            .invert = true}},
                          "xxabyyabab"),
              ElementsAre("xxab", "yyab", "ab"));
}

TEST(TokenizerPipelineTest, ByteLevelPrefixesEveryPiece) {
  // tokenizers' ByteLevel adds its space to each piece an earlier step made ("Ġ" is the space).
  EXPECT_THAT(RunPipeline({},
                          {{.kind = P::kDigits, .individual_digits = true},
                           {.kind = P::kByteLevel, .add_prefix_space = true, .use_regex = false}},
                          "ab12 cd"),
              ElementsAre("\xC4\xA0"
                          "ab",
                          "\xC4\xA0"
                          "1",
                          "\xC4\xA0"
                          "2",
                          "\xC4\xA0"
                          "cd"));
}

TEST(TokenizerPipelineTest, MetaspaceFirstFollowsTheOriginalOffset) {
  const std::vector<PreTokenizerStep> meta = {
      {.kind = P::kMetaspace, .metaspace = MetaspaceMode::kFirst, .metaspace_split = true}};
  EXPECT_THAT(RunPipeline({}, meta, "a b"), ElementsAre("\xE2\x96\x81"
                                                        "a",
                                                        "\xE2\x96\x81"
                                                        "b"));
  // A Strip that removed the leading spaces moves the first character off offset 0: no "▁".
  EXPECT_THAT(RunPipeline({{.kind = N::kStrip, .strip_left = true}}, meta, "  a"),
              ElementsAre("a"));
}

TEST(TokenizerPipelineTest, InvalidUtf8IsKept) {
  const std::string bad = "A\xFF\xC3(b\xE2\x82";
  EXPECT_EQ(Pipeline::Create({{.kind = N::kLowercase}}, {})->Normalize(bad), "a\xFF\xC3(b\xE2\x82");
  // Byte-level: every byte, valid or not, reaches the model as its alphabet character.
  const std::vector<std::string> pieces = RunPipeline(
      {},
      {{.kind = P::kSplit, .pattern = R"(\p{L}+|\S)"}, {.kind = P::kByteLevel, .use_regex = false}},
      bad);
  std::string joined;
  for (const std::string& p : pieces) joined += p;
  EXPECT_EQ(joined, ToByteLevelAlphabet(bad));  // "\xFF" is "ÿ", "\x82" is "Ĥ"
}

TEST(TokenizerPipelineTest, BadPatternsNameTheStep) {
  absl::StatusOr<Pipeline> p = Pipeline::Create({}, {{.kind = P::kSplit, .pattern = "(?<=x)"}});
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("pre_tokenizer 0 (Split)"));
  EXPECT_THAT(p.status().message(), HasSubstr("lookbehind"));
  p = Pipeline::Create({{.kind = N::kReplace, .pattern = "", .regex = false}}, {});
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("empty String"));
}

TEST(AddedTokenMatcherTest, SingleWordNeedsNoWordCharacterBeside) {
  const AddedTokenMatcher m(
      {{.text = "the", .id = 7, .single_word = true}, {.text = "th", .id = 8}});
  auto ids = [&](std::string_view text) {
    std::vector<TokenId> out;
    for (const TextPiece& p : m.Split(text)) out.push_back(p.id);
    return out;
  };
  EXPECT_THAT(ids("the"), ElementsAre(7));
  EXPECT_THAT(ids("a the!"), ElementsAre(-1, 7, -1));
  // Beside a word character the match is dropped, and "th" is not tried in its place.
  EXPECT_THAT(ids("they"), ElementsAre(-1));
  EXPECT_THAT(ids("_the"), ElementsAre(-1));
  EXPECT_THAT(ids("\u200Dthe"), ElementsAre(-1));     // ZERO WIDTH JOINER: a Rust \w character
  EXPECT_THAT(ids("\u00B2the"), ElementsAre(-1, 7));  // "²" is not one
  EXPECT_THAT(ids("thy"), ElementsAre(8, -1));
}

}  // namespace
}  // namespace pagedkv::model_internal
