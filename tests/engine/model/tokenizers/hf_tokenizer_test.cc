// Copyright 2026 The pagedkv Authors.
//
// tokenizer.json of both BPE families, hand-made: the expected ids are worked out in each test
// from the rules (normalizer, split regex, merges by rank, byte fallback, added tokens), by hand.
#include "pagedkv/model/hf_tokenizer.h"

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/tokenizers/byte_level.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "pagedkv/model/bpe_tokenizer.h"
#include "pagedkv/model/tokenizer.h"

namespace pagedkv {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

// SentencePiece style, as TinyStories-656K / Llama-2 (ids: <unk> 0, <s> 1, </s> 2, ▁ 3, a 4,
// b 5, c 6, ▁a 7, ab 8, ▁ab 9, <0xC3> 10, <0xA9> 11).
json SentencePieceJson() {
  return json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [
      {"id": 0, "content": "<unk>", "special": true, "normalized": false, "lstrip": false, "rstrip": false, "single_word": false},
      {"id": 1, "content": "<s>", "special": true, "normalized": false, "lstrip": false, "rstrip": false, "single_word": false},
      {"id": 2, "content": "</s>", "special": true, "normalized": false, "lstrip": false, "rstrip": false, "single_word": false}],
    "normalizer": {"type": "Sequence", "normalizers": [
      {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
    "pre_tokenizer": null,
    "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
      "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
    "decoder": {"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
      {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
      "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
      "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "▁": 3, "a": 4, "b": 5, "c": 6, "▁a": 7, "ab": 8,
                "▁ab": 9, "<0xC3>": 10, "<0xA9>": 11},
      "merges": ["▁ a", "a b", "▁a b"]}})");
}

Tokenizer Make(const json& j) {
  absl::StatusOr<BpeTokenizerSpec> spec = ParseHfTokenizerJson(j.dump(), "test.json");
  EXPECT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<BpeTokenizer> bpe = BpeTokenizer::Create(*spec);
  EXPECT_TRUE(bpe.ok()) << bpe.status();
  absl::StatusOr<Tokenizer> tok = Tokenizer::FromBpe(std::move(bpe).value(), std::nullopt, 2);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return std::move(tok).value();
}

std::vector<TokenId> Ids(const Tokenizer& t, std::string_view text, bool bos = true) {
  absl::StatusOr<std::vector<TokenId>> ids = t.Encode(text, {.add_bos = bos});
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.value_or(std::vector<TokenId>{});
}

TEST(HfTokenizerSentencePieceTest, MergesByRank) {
  const Tokenizer t = Make(SentencePieceJson());
  EXPECT_EQ(t.bos_id(), 1);  // from the template
  // "ab" -> "▁ab": ▁ a b; (▁,a) rank 0 first -> ▁a b; (▁a,b) rank 2 -> ▁ab.
  EXPECT_THAT(Ids(t, "ab"), ElementsAre(1, 9));
  // "ba" -> "▁ba": no listed pair among (▁,b), (b,a).
  EXPECT_THAT(Ids(t, "ba"), ElementsAre(1, 3, 5, 4));
  // " a b" -> "▁▁a▁b": (▁,a) at 1 merges; then nothing; -> ▁ ▁a ▁ b.
  EXPECT_THAT(Ids(t, " a b"), ElementsAre(1, 3, 7, 3, 5));
  // "bab" -> "▁bab": (a,b) rank 1 -> ▁ b ab.
  EXPECT_THAT(Ids(t, "bab", false), ElementsAre(3, 5, 8));
  EXPECT_THAT(Ids(t, ""), ElementsAre(1));
}

TEST(HfTokenizerSentencePieceTest, ByteFallbackAndFusedUnknowns) {
  const Tokenizer t = Make(SentencePieceJson());
  // é = C3 A9: not a token, both byte tokens exist.
  EXPECT_THAT(Ids(t, "\xC3\xA9", false), ElementsAre(3, 10, 11));
  // 'z' has no byte token: unknown; two in a row fuse into one <unk>.
  EXPECT_THAT(Ids(t, "zzc", false), ElementsAre(3, 0, 6));
  EXPECT_EQ(t.Decode({10, 11}, /*prev=*/5).value(), "\xC3\xA9");
  // A lone C3 is not UTF-8: one U+FFFD per byte token.
  EXPECT_EQ(t.Decode({4, 10, 4}, 5).value(),
            "a\xEF\xBF\xBD"
            "a");
}

TEST(HfTokenizerSentencePieceTest, AddedTokensMatchFirstAndDecodeSkipsSpecials) {
  const Tokenizer t = Make(SentencePieceJson());
  // Raw split: "a", <s>, "b"; each piece normalized on its own (▁ prepended to both).
  EXPECT_THAT(Ids(t, "a<s>b", false), ElementsAre(7, 1, 3, 5));
  EXPECT_EQ(t.Decode({1, 9, 3, 7}).value(), "ab  a");   // ▁ab ▁ ▁a, one space stripped
  EXPECT_EQ(t.Decode({9}, /*prev=*/5).value(), " ab");  // a continuation keeps its space
  EXPECT_EQ(t.DecodeToken(1, 9).value(), "ab");
  EXPECT_EQ(t.Decode(Ids(t, "ab  ba b")).value(), "ab  ba b");
}

TEST(HfTokenizerSentencePieceTest, NormalizedAddedTokenMatchesItsNormalizedForm) {
  json j = SentencePieceJson();
  j["added_tokens"].push_back({{"id", 12},
                               {"content", "ab"},
                               {"special", false},
                               {"normalized", true},
                               {"lstrip", false},
                               {"rstrip", false},
                               {"single_word", false}});
  const Tokenizer t = Make(j);
  // Its pattern is normalize("ab") = "▁ab": found in "▁ab▁ab" twice; "cab" -> "▁cab" has none.
  EXPECT_THAT(Ids(t, "ab ab", false), ElementsAre(12, 12));
  EXPECT_THAT(Ids(t, "cab", false), ElementsAre(3, 6, 8));
}

TEST(HfTokenizerSentencePieceTest, MetaspacePreTokenizerPrependsOnlyAtTheStart) {
  json j = SentencePieceJson();
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", false}};
  const Tokenizer t = Make(j);
  // "a" starts the text: "▁a"; "b" after <s> does not start it: no "▁".
  EXPECT_THAT(Ids(t, "a<s>b", false), ElementsAre(7, 1, 5));
  // " a": the space becomes "▁", which is not doubled.
  EXPECT_THAT(Ids(t, " a", false), ElementsAre(7));
  j["pre_tokenizer"]["prepend_scheme"] = "always";
  j["pre_tokenizer"]["split"] = true;
  // always: "b" gets its "▁" too; split: "▁a▁b" is two words, so (▁a, b) never meets.
  EXPECT_THAT(Ids(Make(j), "a<s>b", false), ElementsAre(7, 1, 3, 5));
  EXPECT_THAT(Ids(Make(j), "ab", false), ElementsAre(9));
}

// The decoders' leading-space rules, as tokenizers 0.23 applies them (checked there on this
// file): the Metaspace decoder (prepend_scheme first or always) drops every "▁" of the first
// token decoded, special tokens skipped first, and turns the other "▁" into spaces; "never"
// keeps them all; it has no byte fallback, so "<0xNN>" stays text. Llama-2's Sequence[Replace,
// ByteFallback, Fuse, Strip(start=1)] drops exactly one space of the fused text.
TEST(HfTokenizerSentencePieceTest, DecodersDropLeadingSpacesByTheirOwnRule) {
  json j = SentencePieceJson();  // ▁ 3, a 4, ▁a 7, ▁ab 9, <0xC3> 10, <0xA9> 11
  j["added_tokens"].push_back({{"id", 12},
                               {"content", "<x>"},
                               {"special", false},
                               {"normalized", false},
                               {"lstrip", false},
                               {"rstrip", false},
                               {"single_word", false}});
  const Tokenizer llama2 = Make(j);
  EXPECT_EQ(llama2.Decode({1, 3, 7}).value(), " a");  // "  a" less one space
  EXPECT_EQ(llama2.Decode({1, 3, 3, 3, 7}).value(), "   a");
  EXPECT_EQ(llama2.Decode({1, 12, 3, 7}).value(), "<x>  a");  // the added token starts the text
  EXPECT_EQ(llama2.Decode({3, 10, 11}).value(), "\xC3\xA9");  // " é" less one space
  for (const char* scheme : {"first", "always"}) {
    j["decoder"] = {
        {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", scheme}, {"split", false}};
    const Tokenizer t = Make(j);
    EXPECT_EQ(t.Decode({1, 3, 7}).value(), " a") << scheme;  // "▁" dropped, then " a"
    EXPECT_EQ(t.Decode({1, 3, 3, 7}).value(), "  a") << scheme;
    EXPECT_EQ(t.Decode({1, 9, 3, 7}).value(), "ab  a") << scheme;
    EXPECT_EQ(t.Decode({1, 12, 3, 7}).value(), "<x>  a") << scheme;
    EXPECT_EQ(t.Decode({3, 10, 11}).value(), "<0xC3><0xA9>") << scheme;
    EXPECT_EQ(t.Decode({9}, /*prev=*/5).value(), " ab") << scheme;  // a continuation
  }
  j["decoder"]["prepend_scheme"] = "never";
  const Tokenizer never = Make(j);
  EXPECT_EQ(never.Decode({1, 3, 7}).value(), "  a");
  EXPECT_EQ(never.Decode({1, 9, 3, 7}).value(), " ab  a");
  EXPECT_EQ(never.Decode({3, 10, 11}).value(), " <0xC3><0xA9>");
  // Strip before Fuse strips every token in tokenizers: refused rather than run otherwise.
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders",
                   {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                    {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}},
                    {{"type", "Fuse"}}}}};
  absl::StatusOr<BpeTokenizerSpec> spec = ParseHfTokenizerJson(j.dump(), "test.json");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(spec.status().message(), HasSubstr("Strip before Fuse"));
}

// Byte-level (GPT-2 style): alphabet characters as tokens; Ġ is the space byte, Ċ the newline.
json ByteLevelJson(bool ignore_merges) {
  json vocab = json::object();
  int id = 0;
  for (const char* t : {"<|endoftext|>",
                        "H",
                        "e",
                        "l",
                        "o",
                        "Ġ",
                        "w",
                        "r",
                        "d",
                        "'",
                        "s",
                        "1",
                        "2",
                        "3",
                        "4",
                        "!",
                        "Ċ",
                        "He",
                        "ll",
                        "Hell",
                        "Hello",
                        "Ġw",
                        "or",
                        "Ġwor",
                        "Ġworl",
                        "Ġworld",
                        "'s",
                        "Ġ1234"}) {
    vocab[t] = id++;
  }
  json j = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens",
       {{{"id", 0},
         {"content", "<|endoftext|>"},
         {"special", true},
         {"normalized", false},
         {"lstrip", false},
         {"rstrip", false},
         {"single_word", false}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"},
        {"add_prefix_space", false},
        {"trim_offsets", true},
        {"use_regex", true}}},
      {"post_processor", {{"type", "ByteLevel"}, {"trim_offsets", false}}},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", ignore_merges},
        {"vocab", vocab},
        {"merges",
         {"H e", "l l", "He ll", "Hell o", "Ġ w", "o r", "Ġw or", "Ġwor l", "Ġworl d", "' s"}}}}};
  return j;
}

TEST(HfTokenizerByteLevelTest, Gpt2SplitThenMergesPerPiece) {
  const Tokenizer t = Make(ByteLevelJson(false));
  // Pieces "Hello", " world", "'s", " 1234", "!", "\n" -> Hello Ġworld 's Ġ 1 2 3 4 ! Ċ.
  EXPECT_THAT(Ids(t, "Hello world's 1234!\n"), ElementsAre(20, 25, 26, 5, 11, 12, 13, 14, 15, 16));
  // Merges never cross pieces: "lo" + " w" stay apart.
  EXPECT_THAT(Ids(t, "llo wor"), ElementsAre(18, 4, 23));
  EXPECT_THAT(Ids(t, "Hello<|endoftext|>Hello"), ElementsAre(20, 0, 20));
  EXPECT_EQ(t.Decode(Ids(t, "Hello world's 1234!\n")).value(), "Hello world's 1234!\n");
  EXPECT_EQ(t.Decode({20, 0, 25}).value(), "Hello world");  // special skipped
}

TEST(HfTokenizerByteLevelTest, IgnoreMergesTakesWholeWords) {
  // "Ġ1234" is a token but no merge builds it: only ignore_merges emits it whole.
  EXPECT_THAT(Ids(Make(ByteLevelJson(true)), " 1234"), ElementsAre(27));
  EXPECT_THAT(Ids(Make(ByteLevelJson(false)), " 1234"), ElementsAre(5, 11, 12, 13, 14));
}

std::vector<std::string> Split(std::string_view text, ByteLevelSplit split) {
  std::vector<std::string> out;
  for (std::string_view p : model_internal::SplitByteLevel(text, split)) out.emplace_back(p);
  return out;
}

TEST(HfTokenizerByteLevelTest, SplitRegexes) {
  // GPT-2: the whitespace run before "x" leaves its last space to " x".
  EXPECT_THAT(Split("Hello world's 1234!\n  x  ", ByteLevelSplit::kGpt2),
              ElementsAre("Hello", " world", "'s", " 1234", "!", "\n ", " x", "  "));
  // Llama-3: case-insensitive contractions, digits in threes, newline runs apart, punctuation
  // takes the newlines after it.
  EXPECT_THAT(Split("HELLO'S  123456\n\nok", ByteLevelSplit::kLlama3),
              ElementsAre("HELLO", "'S", " ", " ", "123", "456", "\n\n", "ok"));
  EXPECT_THAT(Split("x!!\n\ny", ByteLevelSplit::kLlama3), ElementsAre("x", "!!\n\n", "y"));
  EXPECT_THAT(Split("(abc", ByteLevelSplit::kLlama3), ElementsAre("(abc"));
  // Qwen2: one digit per piece.
  EXPECT_THAT(Split("a 12", ByteLevelSplit::kQwen2), ElementsAre("a", " ", "1", "2"));
  // Letters and numbers beyond ASCII.
  EXPECT_THAT(Split("naïve ½ 日本語", ByteLevelSplit::kGpt2),
              ElementsAre("naïve", " ½", " 日本語"));
}

TEST(HfTokenizerJsonTest, UnknownComponentsAreRefusedByName) {
  json j = SentencePieceJson();
  j["normalizer"] = {{"type", "BertNormalizer"}};
  absl::StatusOr<BpeTokenizerSpec> s = ParseHfTokenizerJson(j.dump(), "t.json");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("BertNormalizer"));
  j = SentencePieceJson();
  j["model"]["type"] = "WordPiece";
  s = ParseHfTokenizerJson(j.dump(), "t.json");
  EXPECT_THAT(s.status().message(), HasSubstr("WordPiece"));
  j = SentencePieceJson();
  j["pre_tokenizer"] = {{"type", "UnicodeScripts"}};
  s = ParseHfTokenizerJson(j.dump(), "t.json");
  EXPECT_THAT(s.status().message(), HasSubstr("UnicodeScripts"));
  j = SentencePieceJson();
  j["decoder"] = {{"type", "WordPiece"}};
  s = ParseHfTokenizerJson(j.dump(), "t.json");
  EXPECT_THAT(s.status().message(), HasSubstr("WordPiece"));
  j = SentencePieceJson();
  j["model"]["merges"].push_back("a zz");
  s = ParseHfTokenizerJson(j.dump(), "t.json");
  ASSERT_TRUE(s.ok());
  EXPECT_THAT(BpeTokenizer::Create(*s).status().message(), HasSubstr("zz"));
  EXPECT_FALSE(ParseHfTokenizerJson("{not json", "t.json").ok());
}

// SentencePieceJson with `pre` as its pre-tokenizer (and ByteLevel's decoder when it has one).
absl::StatusOr<BpeTokenizerSpec> WithPre(json pre) {
  json j = SentencePieceJson();
  if (pre.dump().find("ByteLevel") != std::string::npos) j["decoder"] = {{"type", "ByteLevel"}};
  j["pre_tokenizer"] = std::move(pre);
  return ParseHfTokenizerJson(j.dump(), "t.json");
}

TEST(HfTokenizerJsonTest, GenericComponentsInAnyOrder) {
  json j = SentencePieceJson();
  j["normalizer"] = json::parse(R"({"type": "Sequence", "normalizers": [
      {"type": "Strip", "strip_left": true, "strip_right": false},
      {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]},
      {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "},
      {"type": "Prepend", "prepend": "▁"}]})");
  absl::StatusOr<BpeTokenizerSpec> s = ParseHfTokenizerJson(j.dump(), "t.json");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->normalizers.size(), 5u);  // the nested Sequence flattened
  EXPECT_EQ(s->normalizers[0].kind, NormalizerStep::Kind::kStrip);
  EXPECT_FALSE(s->normalizers[0].strip_right);
  EXPECT_EQ(s->normalizers[2].kind, NormalizerStep::Kind::kLowercase);
  EXPECT_TRUE(s->normalizers[3].regex);
  s = WithPre(json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Punctuation", "behavior": "Contiguous"}, {"type": "Whitespace"},
      {"type": "Split", "pattern": {"String": "-"}, "behavior": "MergedWithNext", "invert": true},
      {"type": "Digits", "individual_digits": false}, {"type": "WhitespaceSplit"},
      {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}]})"));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->pre_tokenizers.size(), 6u);
  EXPECT_EQ(s->pre_tokenizers[0].behavior, SplitBehavior::kContiguous);
  EXPECT_FALSE(s->pre_tokenizers[2].regex);
  EXPECT_TRUE(s->pre_tokenizers[2].invert);
  EXPECT_EQ(s->family, BpeFamily::kSentencePiece);
}

TEST(HfTokenizerJsonTest, KnownShapesKeepTheHandWrittenPath) {
  const std::string llama3 = std::string(model_internal::kLlama3SplitPattern);
  json split = {{"type", "Split"},
                {"pattern", {{"Regex", llama3}}},
                {"behavior", "Isolated"},
                {"invert", false}};
  json bl = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  absl::StatusOr<BpeTokenizerSpec> s =
      WithPre({{"type", "Sequence"}, {"pretokenizers", {split, bl}}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->pre_tokenizers.empty());
  EXPECT_EQ(s->split, ByteLevelSplit::kLlama3);
  EXPECT_EQ(s->family, BpeFamily::kByteLevel);
  // With add_prefix_space tokenizers prefixes every piece: the generic steps do that.
  bl["add_prefix_space"] = true;
  s = WithPre({{"type", "Sequence"}, {"pretokenizers", {split, bl}}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->pre_tokenizers.size(), 2u);
  // Another regex runs on the generic engine.
  split["pattern"]["Regex"] = "(?:" + llama3 + ")";
  bl["add_prefix_space"] = false;
  s = WithPre({{"type", "Sequence"}, {"pretokenizers", {split, bl}}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->pre_tokenizers.size(), 2u);
}

TEST(HfTokenizerJsonTest, BadGenericComponentsAreRefusedWithTheReason) {
  absl::StatusOr<BpeTokenizerSpec> s =
      WithPre({{"type", "Split"}, {"pattern", {{"Regex", "(?<=a)b"}}}, {"behavior", "Isolated"}});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("pre_tokenizer"));
  EXPECT_THAT(s.status().message(), HasSubstr("lookbehind"));
  s = WithPre({{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Sideways"}});
  EXPECT_THAT(s.status().message(), HasSubstr("Sideways"));
  s = WithPre({{"type", "Split"}, {"pattern", {{"Glob", "a"}}}, {"behavior", "Isolated"}});
  EXPECT_THAT(s.status().message(), HasSubstr("pattern must be"));
  s = WithPre({{"type", "Split"}, {"pattern", {{"String", ""}}}, {"behavior", "Isolated"}});
  EXPECT_THAT(s.status().message(), HasSubstr("empty String"));
}

TEST(HfTokenizerJsonTest, GenericPipelineEncodes) {
  // Lowercase + Whitespace over the SentencePiece vocabulary: "AB  a" -> words "ab", "a".
  json j = SentencePieceJson();
  j["normalizer"] = {{"type", "Lowercase"}};
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  const Tokenizer t = Make(j);
  EXPECT_EQ(Ids(t, "AB  a", /*bos=*/false), (std::vector<TokenId>{8, 4}));
}

TEST(HfTokenizerByteLevelTest, TokensOutsideTheAlphabetDecodeWhole) {
  using model_internal::FromByteLevelAlphabet;
  EXPECT_EQ(FromByteLevelAlphabet("\xC4\xA0x\xC4\xA0y"), " x y");  // "ĠxĠy"
  // One character outside the alphabet (the space): the whole token stays as it is, "Ġ" too.
  EXPECT_EQ(FromByteLevelAlphabet("\xC4\xA0x y"), "\xC4\xA0x y");
  EXPECT_EQ(FromByteLevelAlphabet("\xC3\xA9"), "\xE9");  // "é" is byte 0xE9
}

TEST(HfTokenizerJsonTest, NoDecoderJoinsTokensWithSpaces) {
  json j = SentencePieceJson();
  j["decoder"] = nullptr;  // tokenizers' decode then joins the token strings with " "
  absl::StatusOr<BpeTokenizerSpec> spec = ParseHfTokenizerJson(j.dump(), "t.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->decode_joins_with_spaces);
  absl::StatusOr<BpeTokenizer> tok = BpeTokenizer::Create(*spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  // <s> (special) skipped; "▁ab" and "▁a" joined; a continuation starts with the space.
  EXPECT_EQ(tok->Decode({1, 9, 7, 10}, /*at_start=*/true, /*replace_invalid_utf8=*/true).value(),
            "\xE2\x96\x81"
            "ab \xE2\x96\x81"
            "a <0xC3>");
  EXPECT_EQ(tok->Decode({4}, /*at_start=*/false, /*replace_invalid_utf8=*/true).value(), " a");
}

TEST(HfTokenizerJsonTest, NormalizedAddedTokensKeepTheirNameAndDecodeNormalized) {
  json j = SentencePieceJson();
  j["added_tokens"].push_back({{"id", 12},
                               {"content", "XY"},
                               {"special", false},
                               {"normalized", true},
                               {"lstrip", false},
                               {"rstrip", false}});
  absl::StatusOr<BpeTokenizerSpec> spec = ParseHfTokenizerJson(j.dump(), "t.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<BpeTokenizer> tok = BpeTokenizer::Create(*spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(tok->token(12), "XY");
  EXPECT_EQ(tok->token(1), "<s>");
  // tokenizers decodes it as its normalized content "▁XY" (Prepend), so the decoder's Replace
  // gives " XY", as for any word.
  EXPECT_EQ(tok->Decode({4, 12}, /*at_start=*/false, /*replace_invalid_utf8=*/true).value(),
            "a XY");
}

}  // namespace
}  // namespace pagedkv
