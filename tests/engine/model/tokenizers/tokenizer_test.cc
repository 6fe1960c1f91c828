// Copyright 2026 The pagedkv Authors.
#include "pagedkv/model/tokenizer.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model/tiny_llama2c.h"
#include "tests/shared_data.h"

namespace pagedkv {
namespace {

using ::pagedkv::testing::WriteTempFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Entry {
  float score;
  std::string piece;
};

std::string TokenizerBytes(int32_t max_len, const std::vector<Entry>& entries) {
  std::string out(reinterpret_cast<const char*>(&max_len), 4);
  for (const Entry& e : entries) {
    const auto len = static_cast<int32_t>(e.piece.size());
    out.append(reinterpret_cast<const char*>(&e.score), 4);
    out.append(reinterpret_cast<const char*>(&len), 4);
    out += e.piece;
  }
  return out;
}

// <unk>, BOS, EOS, the 256 byte pieces, then `extra`.
std::vector<Entry> VocabWith(const std::vector<Entry>& extra) {
  std::vector<Entry> v = {{0, "<unk>"}, {0, "\n<s>\n"}, {0, "\n</s>\n"}};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    v.push_back({0, buf});
  }
  v.insert(v.end(), extra.begin(), extra.end());
  return v;
}

// run.c's encode, literally: linear lookups, rescanning every pair after each merge.
std::vector<TokenId> BruteForceEncode(const std::vector<Entry>& vocab, const std::string& text) {
  auto lookup = [&](const std::string& s) -> int {
    for (size_t i = 0; i < vocab.size(); ++i) {
      if (vocab[i].piece == s) return static_cast<int>(i);
    }
    return -1;
  };
  std::vector<TokenId> tokens = {1};
  if (!text.empty()) tokens.push_back(lookup(" "));
  std::string buf;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) buf.clear();
    buf += text[i];
    if (i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80 &&
        buf.size() < 4) {
      continue;
    }
    const int id = lookup(buf);
    if (id >= 0) {
      tokens.push_back(id);
    } else {
      for (char c : buf) tokens.push_back(static_cast<unsigned char>(c) + 3);
    }
    buf.clear();
  }
  while (true) {
    float best = -1e10f;
    int best_id = -1, best_idx = -1;
    for (size_t i = 0; i + 1 < tokens.size(); ++i) {
      const int id = lookup(vocab[static_cast<size_t>(tokens[i])].piece +
                            vocab[static_cast<size_t>(tokens[i + 1])].piece);
      if (id >= 0 && vocab[static_cast<size_t>(id)].score > best) {
        best = vocab[static_cast<size_t>(id)].score;
        best_id = id;
        best_idx = static_cast<int>(i);
      }
    }
    if (best_idx < 0) break;
    tokens[static_cast<size_t>(best_idx)] = best_id;
    tokens.erase(tokens.begin() + best_idx + 1);
  }
  return tokens;
}

Tokenizer MustParse(const std::vector<Entry>& vocab, int32_t max_len = 16) {
  absl::StatusOr<Tokenizer> tok =
      Tokenizer::Parse(TokenizerBytes(max_len, vocab), static_cast<int32_t>(vocab.size()), "test");
  EXPECT_TRUE(tok.ok()) << tok.status();
  return std::move(tok).value();
}

const std::vector<Entry>& SmallVocab() {
  static const std::vector<Entry> v = VocabWith({
      {-9, " "},
      {-1, "a"},
      {-1, "b"},
      {-1, "c"},
      {-1, "d"},
      {-2, "\xC3\xA9"},
      {-3, "ab"},
      {-3, "ba"},
      {-2, " a"},
      {-4, "abc"},
      {-3, "cab"},
      {-5, " ab"},
      {-3, "aa"},
      {-6, "aab"},
      {-7, "bc"},
      {-3, " b"},
      {-8, "d d"},
      {-2,
       "\xC3\xA9"
       "a"},
      {-1, "dd"},
      {-1, "cd"},
      {-1, "d "},
  });
  return v;
}

TEST(TokenizerTest, EmptyPromptIsBosAlone) {
  const Tokenizer tok = MustParse(SmallVocab());
  absl::StatusOr<std::vector<TokenId>> ids = tok.Encode("");
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(*ids, ElementsAre(1));
  ids = tok.Encode("", {.add_bos = false});
  ASSERT_TRUE(ids.ok());
  EXPECT_TRUE(ids->empty());
  ids = tok.Encode("a", {.add_bos = true, .add_eos = true});
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->front(), 1);
  EXPECT_EQ(ids->back(), 2);
}

TEST(TokenizerTest, DummyPrefixMergesAndByteFallback) {
  const Tokenizer tok = MustParse(SmallVocab());
  const auto& v = SmallVocab();
  auto id_of = [&](const std::string& piece) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i].piece == piece) return static_cast<TokenId>(i);
    }
    return TokenId{-1};
  };
  // " ab": " "+"a" -> " a" (score -2), then " a"+"b" -> " ab".
  absl::StatusOr<std::vector<TokenId>> ids = tok.Encode("ab");
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(*ids, ElementsAre(1, id_of(" ab")));
  // 'z' is not a piece: byte fallback <0x7A> = 0x7A + 3.
  ids = tok.Encode("z");
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(*ids, ElementsAre(1, id_of(" "), 0x7A + 3));
  // Euro sign (3 bytes, not a piece): three byte pieces.
  ids = tok.Encode("\xE2\x82\xAC");
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(*ids, ElementsAre(1, id_of(" "), 0xE2 + 3, 0x82 + 3, 0xAC + 3));
}

TEST(TokenizerTest, EncodeMatchesRunCOnRandomText) {
  const Tokenizer tok = MustParse(SmallVocab());
  const std::vector<std::string> alphabet = {
      "a", "b", "c", "d", " ", "\xC3\xA9", "z", "\xE2\x82\xAC", "\x80", "\n", "\xF0\x9F\x98\x80"};
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 400; ++trial) {
    std::string text;
    const int n = static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    absl::StatusOr<std::vector<TokenId>> ids = tok.Encode(text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    ASSERT_EQ(*ids, BruteForceEncode(SmallVocab(), text)) << "text: '" << text << "'";
    absl::StatusOr<std::string> back = tok.Decode(*ids);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, text);
  }
}

// Random vocabularies of merged pieces with many equal scores (the leftmost merge must win a
// tie), against run.c's rescan on longer texts: the heap of merges picks the same pair each time.
TEST(TokenizerTest, HeapMergeMatchesRunCOnRandomVocabularies) {
  std::mt19937 rng(77);
  const std::string letters = "abcd ";
  for (int vocab_trial = 0; vocab_trial < 40; ++vocab_trial) {
    std::vector<Entry> extra = {{-1, " "}, {-1, "a"}, {-1, "b"}, {-1, "c"}, {-1, "d"}};
    for (int i = 0; i < 30; ++i) {
      std::string piece;
      const int len = 2 + static_cast<int>(rng() % 3);
      for (int j = 0; j < len; ++j) piece += letters[rng() % letters.size()];
      extra.push_back({-static_cast<float>(rng() % 4), piece});  // scores 0..-3: many ties
    }
    const std::vector<Entry> vocab = VocabWith(extra);
    const Tokenizer tok = MustParse(vocab);
    for (int trial = 0; trial < 20; ++trial) {
      std::string text;
      const int n = static_cast<int>(rng() % 80);
      for (int i = 0; i < n; ++i) text += letters[rng() % letters.size()];
      absl::StatusOr<std::vector<TokenId>> ids = tok.Encode(text);
      ASSERT_TRUE(ids.ok()) << ids.status();
      ASSERT_EQ(*ids, BruteForceEncode(vocab, text)) << "text: '" << text << "'";
    }
  }
}

TEST(TokenizerTest, DecodeStripsSpaceOnlyAfterBos) {
  const Tokenizer tok = MustParse(SmallVocab());
  const TokenId space_a = 3 + 256 + 8;  // " a"
  ASSERT_EQ(tok.piece(space_a), " a");
  EXPECT_EQ(*tok.DecodeToken(1, space_a), "a");
  EXPECT_EQ(*tok.DecodeToken(space_a, space_a), " a");
  EXPECT_EQ(*tok.DecodeToken(5, 0x41 + 3), "A");  // <0x41>
  EXPECT_EQ(*tok.DecodeToken(5, 1), "");
  EXPECT_EQ(*tok.DecodeToken(5, 2), "");
  EXPECT_EQ(*tok.Decode({space_a, space_a}, /*prev=*/space_a), " a a");
  EXPECT_EQ(tok.DecodeToken(1, tok.vocab_size()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tok.Decode({1, -1}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TokenizerTest, MissingPiecesAreInvalidArgument) {
  // No " " piece: non-empty text cannot get its dummy prefix.
  std::vector<Entry> no_space = VocabWith({{-1, "a"}});
  const Tokenizer a = MustParse(no_space);
  EXPECT_EQ(a.Encode("a").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(a.Encode("").ok());
  // No byte pieces: an unknown character cannot fall back.
  const Tokenizer b = MustParse({{0, "<unk>"}, {0, "<s>"}, {0, "</s>"}, {0, " "}, {0, "a"}});
  EXPECT_TRUE(b.Encode("a a").ok());
  absl::StatusOr<std::vector<TokenId>> bad = b.Encode("ab");
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("<0x62>"));
}

TEST(TokenizerTest, TruncatedFilesNameTheFileAndToken) {
  const std::string bytes = TokenizerBytes(16, SmallVocab());
  const auto n = static_cast<int32_t>(SmallVocab().size());
  for (size_t cut = 0; cut < bytes.size(); cut += 37) {
    const auto path = WriteTempFile("tok_truncated.bin", bytes.substr(0, cut));
    absl::StatusOr<Tokenizer> tok = Tokenizer::Load(path.string(), n);
    ASSERT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument) << cut;
    EXPECT_THAT(tok.status().message(), HasSubstr(path.string()));
    EXPECT_THAT(tok.status().message(), HasSubstr("truncated"));
  }
  EXPECT_TRUE(Tokenizer::Parse(bytes, n, "whole").ok());
}

TEST(TokenizerTest, CorruptFilesAreRejected) {
  const std::vector<Entry> vocab = SmallVocab();
  const auto n = static_cast<int32_t>(vocab.size());
  // More tokens in the file than the model has.
  absl::StatusOr<Tokenizer> tok = Tokenizer::Parse(TokenizerBytes(16, vocab), n - 1, "big");
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tok.status().message(), HasSubstr("vocab_size"));
  // A piece longer than max_token_length.
  tok = Tokenizer::Parse(TokenizerBytes(2, vocab), n, "long");
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tok.status().message(), HasSubstr("max_token_length"));
  // Non-positive max_token_length.
  tok = Tokenizer::Parse(TokenizerBytes(0, vocab), n, "zero");
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  // Negative length field.
  std::string bytes = TokenizerBytes(16, vocab);
  const int32_t minus = -7;
  std::memcpy(bytes.data() + 4 + 4, &minus, 4);
  tok = Tokenizer::Parse(bytes, n, "negative");
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tok.status().message(), HasSubstr("token 0"));
  // NaN score.
  bytes = TokenizerBytes(16, vocab);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bytes.data() + 4, &nan, 4);
  tok = Tokenizer::Parse(bytes, n, "nan");
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tok.status().message(), HasSubstr("score"));
  // Too small a vocabulary and a missing file.
  EXPECT_EQ(Tokenizer::Parse(TokenizerBytes(16, vocab), 2, "tiny").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Tokenizer::Load("/nonexistent/tok.bin", n).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(TokenizerTest, Tok512MatchesRunCAndRoundTrips) {
  auto dir = pagedkv::testing::SharedDataDir();
  if (!dir) GTEST_SKIP() << pagedkv::testing::kNoSharedDataMessage;
  const auto path = *dir / "aidreams260K" / "tok512.bin";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
  absl::StatusOr<Tokenizer> tok = Tokenizer::Load(path.string(), 512);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(tok->max_token_length(), 10);
  std::vector<Entry> vocab;
  for (TokenId i = 0; i < 512; ++i) vocab.push_back({tok->score(i), tok->piece(i)});
  for (const std::string text :
       {"Echoes of vectors unfold,", "In the dream, a machine learns to sing.",
        "caf\xC3\xA9 \xE2\x82\xAC 42!", "  double  spaces\nand a newline", "x"}) {
    absl::StatusOr<std::vector<TokenId>> ids = tok->Encode(text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, BruteForceEncode(vocab, text)) << text;
    EXPECT_EQ(*tok->Decode(*ids), text);
  }
}

}  // namespace
}  // namespace pagedkv

namespace pagedkv {
namespace {

// A vocabulary size the file cannot hold is a truncation error, not a reservation of 2^31 pieces.
TEST(TokenizerHostileTest, HugeVocabSizeOnATinyFileIsTruncated) {
  const std::string bytes("\x10\x00\x00\x00", 4);  // max_token_length 16, no entries
  absl::StatusOr<Tokenizer> tok = Tokenizer::Parse(bytes, INT32_MAX, "tiny.bin");
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tok.status().message().find("truncated"), std::string::npos) << tok.status();
}

}  // namespace
}  // namespace pagedkv
