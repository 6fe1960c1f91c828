// Copyright 2026 The pagedkv Authors.
#include "engine/serve/http/text_stream.h"

#include <cstdio>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/model/tokenizer.h"

namespace pagedkv::server {
namespace {

// A llama2.c tokenizer: <unk>, BOS, EOS, then `pieces` (ids 3, 4, ...), then the 256 byte pieces
// (id 3 + pieces.size() + byte).
Tokenizer MakeTokenizer(const std::vector<std::string>& pieces) {
  std::vector<std::string> vocab = {"<unk>", "\n<s>\n", "\n</s>\n"};
  vocab.insert(vocab.end(), pieces.begin(), pieces.end());
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    vocab.push_back(buf);
  }
  const int32_t max_len = 16;
  std::string bytes(reinterpret_cast<const char*>(&max_len), 4);
  for (const std::string& piece : vocab) {
    const float score = 0;
    const auto len = static_cast<int32_t>(piece.size());
    bytes.append(reinterpret_cast<const char*>(&score), 4);
    bytes.append(reinterpret_cast<const char*>(&len), 4);
    bytes += piece;
  }
  return std::move(
      Tokenizer::Parse(bytes, static_cast<int32_t>(vocab.size()), "test tokenizer").value());
}

class TextStreamTest : public ::testing::Test {
 protected:
  static constexpr TokenId kHello = 3, kWorld = 4, kNewline = 5, kEn = 6, kD = 7;
  static constexpr TokenId kBytes = 8;  // id of byte 0x00
  TextStreamTest() : tok_(MakeTokenizer({"Hello", " world", "\n", "EN", "D"})) {}
  Tokenizer tok_;
};

TEST_F(TextStreamTest, DeltasConcatenateToTheDecodedText) {
  TextStream text(tok_, /*prev=*/kHello, {});
  std::string streamed;
  for (TokenId t : {kWorld, kNewline, kHello, kWorld}) {
    ASSERT_TRUE(text.Add(t).ok());
    streamed += text.TakeDelta();
  }
  text.Finish();
  streamed += text.TakeDelta();
  EXPECT_EQ(streamed, " world\nHello world");
  EXPECT_EQ(streamed, *tok_.Decode({kWorld, kNewline, kHello, kWorld}, kHello));
  EXPECT_FALSE(text.stopped());
}

TEST_F(TextStreamTest, NeverSplitsAUtf8Sequence) {
  TextStream text(tok_, kHello, {});
  // "é" is C3 A9; "€" is E2 82 AC.
  ASSERT_TRUE(text.Add(kBytes + 0xC3).ok());
  EXPECT_EQ(text.TakeDelta(), "");
  ASSERT_TRUE(text.Add(kBytes + 0xA9).ok());
  EXPECT_EQ(text.TakeDelta(), "\xC3\xA9");
  ASSERT_TRUE(text.Add(kBytes + 0xE2).ok());
  ASSERT_TRUE(text.Add(kBytes + 0x82).ok());
  EXPECT_EQ(text.TakeDelta(), "");
  ASSERT_TRUE(text.Add(kBytes + 0xAC).ok());
  EXPECT_EQ(text.TakeDelta(), "\xE2\x82\xAC");
  // An unfinished sequence at the end is released by Finish.
  ASSERT_TRUE(text.Add(kBytes + 0xF0).ok());
  EXPECT_EQ(text.TakeDelta(), "");
  text.Finish();
  EXPECT_EQ(text.TakeDelta(), "\xF0");
}

TEST_F(TextStreamTest, CutsAtTheFirstStopStringAcrossTokens) {
  TextStream text(tok_, kHello, {"END", "\nH"});
  std::string streamed;
  for (TokenId t : {kWorld, kEn, kD, kHello}) {
    ASSERT_TRUE(text.Add(t).ok());
    streamed += text.TakeDelta();
  }
  EXPECT_TRUE(text.stopped());
  EXPECT_EQ(text.stop_string(), "END");
  EXPECT_EQ(streamed, " world");
  EXPECT_EQ(text.text(), " world");
  EXPECT_EQ(text.num_tokens(), 3);  // the token after the stop string is not counted
}

TEST_F(TextStreamTest, HoldsBackWhatCouldStartAStopString) {
  TextStream text(tok_, kHello, {"END"});
  ASSERT_TRUE(text.Add(kWorld).ok());
  EXPECT_EQ(text.TakeDelta(), " wor");  // the last 2 bytes could start "END"
  ASSERT_TRUE(text.Add(kEn).ok());
  EXPECT_EQ(text.TakeDelta(), "ld");  // "EN" held back
  ASSERT_TRUE(text.Add(kNewline).ok());
  EXPECT_EQ(text.TakeDelta(), "E");  // "EN\n" is not a stop; "N\n" still held
  text.Finish();
  EXPECT_EQ(text.TakeDelta(), "N\n");
  EXPECT_FALSE(text.stopped());
  EXPECT_EQ(text.text(), " worldEN\n");
}

TEST_F(TextStreamTest, EarliestStopStringWins) {
  TextStream text(tok_, kHello, {"world", "wo"});
  ASSERT_TRUE(text.Add(kWorld).ok());
  EXPECT_TRUE(text.stopped());
  EXPECT_EQ(text.stop_string(), "world");  // both start at 1; the first listed is kept
  EXPECT_EQ(text.text(), " ");
}

TEST_F(TextStreamTest, RefusesIdsOutsideTheVocabulary) {
  TextStream text(tok_, kHello, {});
  EXPECT_FALSE(text.Add(100000).ok());
  EXPECT_EQ(text.num_tokens(), 0);
}

}  // namespace
}  // namespace pagedkv::server
