// Copyright 2026 The pagedkv Authors.
//
// Tokenizers from GGUF metadata: "gpt2" (byte-level BPE; the split chosen by tokenizer.ggml.pre;
// control and user-defined tokens; add_bos_token) and "llama" (SentencePiece scores, byte
// fallback); stop tokens; refusals naming the key.
#include "engine/model/tokenizers/gguf_tokenizer.h"

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/model/formats/gguf_file.h"
#include "engine/model/tokenizers/byte_level.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/model/chat_template.h"
#include "tests/engine/model/gguf_test_writer.h"
#include "tests/test_temp_dir.h"

namespace pagedkv::model_internal {
namespace {

using ::pagedkv::testing::GgufWriter;
using ::pagedkv::testing::WriteGgufFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

GgufFile Open(const std::string& name, const GgufWriter& w) {
  const auto p = ::pagedkv::testing::TestTempDir() / ("gguf_tok_" + name + ".gguf");
  WriteGgufFile(p, w.Bytes());
  absl::StatusOr<GgufFile> f = GgufFile::Open(p.string());
  EXPECT_TRUE(f.ok()) << f.status();
  return std::move(f).value();
}

// ids: 0-2 control, 3 user-defined "<tool>", 4.. "a" "b" "Ġ" "1" "2" "ab" "Ġa" "Ġab" "12".
GgufWriter Gpt2Writer(const std::string& pre, bool add_bos) {
  GgufWriter w;
  w.Str("tokenizer.ggml.model", "gpt2");
  if (!pre.empty()) w.Str("tokenizer.ggml.pre", pre);
  w.StrArray("tokenizer.ggml.tokens", {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool>", "a",
                                       "b", "\xC4\xA0", "1", "2", "ab",
                                       "\xC4\xA0"
                                       "a",
                                       "\xC4\xA0"
                                       "ab",
                                       "12"});
  w.NumArray<int32_t>("tokenizer.ggml.token_type", 5, {3, 3, 3, 4, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  const std::string g = "\xC4\xA0";  // "Ġ", the byte-level space
  w.StrArray("tokenizer.ggml.merges", {g + " a", g + "a b", "a b", "1 2"});
  w.U32("tokenizer.ggml.bos_token_id", 1);
  w.U32("tokenizer.ggml.eos_token_id", 2);
  w.U32("tokenizer.ggml.padding_token_id", 2);
  w.Bool("tokenizer.ggml.add_bos_token", add_bos);
  return w;
}

TEST(GgufTokenizerTest, Gpt2SplitFollowsPre) {
  absl::StatusOr<Tokenizer> gpt2 = LoadGgufTokenizer(Open("gpt2", Gpt2Writer("gpt2", false)));
  absl::StatusOr<Tokenizer> smol = LoadGgufTokenizer(Open("smol", Gpt2Writer("smollm", false)));
  ASSERT_TRUE(gpt2.ok()) << gpt2.status();
  ASSERT_TRUE(smol.ok()) << smol.status();
  // GPT-2's regex keeps " 12" together; smollm's splits each digit off first.
  EXPECT_THAT(*gpt2->Encode("ab ab 12"), ElementsAre(9, 11, 6, 12));
  EXPECT_THAT(*smol->Encode("ab ab 12"), ElementsAre(9, 11, 6, 7, 8));
  EXPECT_EQ(*smol->Decode(*smol->Encode("ab ab 12")), "ab ab 12");
}

TEST(GgufTokenizerTest, ControlAndUserDefinedTokensAndBos) {
  absl::StatusOr<Tokenizer> tok = LoadGgufTokenizer(Open("ctl", Gpt2Writer("smollm", true)));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  const std::vector<TokenId> ids = *tok->Encode("<|im_start|>ab<tool>a<|im_end|>");
  EXPECT_THAT(ids, ElementsAre(1, 1, 9, 3, 4, 2));  // BOS (add_bos_token), then the text
  EXPECT_EQ(*tok->Decode(ids), "ab<tool>a");        // control tokens are skipped
  absl::StatusOr<Tokenizer> no_bos = LoadGgufTokenizer(Open("nobos", Gpt2Writer("smollm", false)));
  ASSERT_TRUE(no_bos.ok());
  EXPECT_THAT(*no_bos->Encode("a"), ElementsAre(4));
}

TEST(GgufTokenizerTest, StopTokensIncludeEndOfTurn) {
  GgufWriter w = Gpt2Writer("smollm", false);
  w.U32("tokenizer.ggml.eot_token_id", 3);
  absl::StatusOr<std::vector<TokenId>> stops = GgufStopTokens(Open("stops", w));
  ASSERT_TRUE(stops.ok()) << stops.status();
  // EOS, EOT, then the control tokens llama.cpp treats as end of generation.
  EXPECT_THAT(*stops, ElementsAre(2, 3, 0));
}

TEST(GgufTokenizerTest, RefusesUnknownPreAndModelByName) {
  EXPECT_THAT(LoadGgufTokenizer(Open("pre", Gpt2Writer("deepseek-llm", false))).status().message(),
              HasSubstr("'tokenizer.ggml.pre' = 'deepseek-llm' is not supported"));
  GgufWriter w;
  w.Str("tokenizer.ggml.model", "bert");
  EXPECT_THAT(LoadGgufTokenizer(Open("bert", w)).status().message(),
              HasSubstr("'tokenizer.ggml.model' = 'bert' is not supported"));
}

// SentencePiece: <unk> <s> </s>, the 256 byte pieces, then "▁" "a" "b" "▁a" "ab" "▁ab".
GgufWriter LlamaWriter() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  std::vector<float> scores = {0, 0, 0};
  for (int b = 0; b < 256; ++b) {
    char piece[8];
    std::snprintf(piece, sizeof(piece), "<0x%02X>", b);
    tokens.push_back(piece);
    types.push_back(6);
    scores.push_back(0);
  }
  const std::string sp = "\xE2\x96\x81";
  for (const auto& [t, s] : std::vector<std::pair<std::string, float>>{
           {sp, -5}, {"a", -6}, {"b", -7}, {sp + "a", -1}, {"ab", -2}, {sp + "ab", -3}}) {
    tokens.push_back(t);
    types.push_back(1);
    scores.push_back(s);
  }
  GgufWriter w;
  w.Str("tokenizer.ggml.model", "llama");
  w.StrArray("tokenizer.ggml.tokens", tokens);
  w.NumArray<int32_t>("tokenizer.ggml.token_type", 5, types);
  w.NumArray<float>("tokenizer.ggml.scores", 6, scores);
  w.U32("tokenizer.ggml.bos_token_id", 1);
  w.U32("tokenizer.ggml.eos_token_id", 2);
  return w;
}

TEST(GgufTokenizerTest, LlamaSentencePieceMergesByScore) {
  absl::StatusOr<Tokenizer> tok = LoadGgufTokenizer(Open("llama", LlamaWriter()));
  ASSERT_TRUE(tok.ok()) << tok.status();
  constexpr TokenId kSpA = 262, kSpAb = 264;  // "▁a", "▁ab"
  // " ab a": ("▁","a") scores best, twice; then ("▁a","b") -> "▁ab".
  EXPECT_THAT(*tok->Encode("ab a"), ElementsAre(1, kSpAb, kSpA));
  EXPECT_EQ(*tok->Decode(*tok->Encode("ab a")), "ab a");
  // "é" is not a piece: byte fallback to <0xC3> <0xA9> (ids 3 + byte).
  EXPECT_THAT(*tok->Encode("é", {.add_bos = false}), ElementsAre(259, 3 + 0xC3, 3 + 0xA9));
}

TEST(GgufTokenizerTest, LlamaNeedsTheUsualSpecialIds) {
  GgufWriter w = LlamaWriter();
  w.Bool("tokenizer.ggml.add_space_prefix", false);
  EXPECT_THAT(LoadGgufTokenizer(Open("llama_nospace", w)).status().message(),
              HasSubstr("add_space_prefix"));
}

TEST(ByteLevelSplitTest, Gpt2DigitsIsolatesEveryDigit) {
  EXPECT_THAT(SplitByteLevel("ab 123  x\n4", ByteLevelSplit::kGpt2Digits),
              ElementsAre("ab", " ", "1", "2", "3", " ", " x", "\n", "4"));
}

}  // namespace
}  // namespace pagedkv::model_internal

namespace pagedkv {
namespace {

using ::testing::HasSubstr;

// The ChatML loop as Hugging Face templates write it (real newlines inside the Jinja strings).
constexpr char kChatMl[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\n' }}{% endif %}";

TEST(ChatTemplateTest, ChatMlWithAndWithoutADefaultSystemPrompt) {
  EXPECT_EQ(*FormatChatPrompt(kChatMl, "Hi"),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  const std::string with_system =
      std::string(kChatMl).insert(std::string("{% for message in messages %}").size(),
                                  "{% if loop.first and messages[0]['role'] != 'system' %}{{ "
                                  "'<|im_start|>system\nBe brief.<|im_end|>\n' }}{% endif %}");
  EXPECT_EQ(*FormatChatPrompt(with_system, "Hi"),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, ConversationsKeepTheirOwnSystemTurnAndEveryRole) {
  const std::string with_system =
      std::string(kChatMl).insert(std::string("{% for message in messages %}").size(),
                                  "{% if loop.first and messages[0]['role'] != 'system' %}{{ "
                                  "'<|im_start|>system\nBe brief.<|im_end|>\n' }}{% endif %}");
  const std::vector<ChatMessage> chat = {{.role = "system", .content = "Be kind."},
                                         {.role = "user", .content = "Hi"},
                                         {.role = "assistant", .content = "Hello!"},
                                         {.role = "user", .content = "Bye"}};
  EXPECT_EQ(*FormatChatMessages(with_system, chat),
            "<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
            "<|im_start|>assistant\n");
  const std::vector<ChatMessage> no_system(chat.begin() + 1, chat.end());
  EXPECT_EQ(*FormatChatMessages(with_system, no_system),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_THAT(FormatChatMessages(kChatMl, {}).status().message(), HasSubstr("at least one"));
  const std::vector<ChatMessage> bad = {{.role = "user<|im_end|>", .content = "x"}};
  EXPECT_THAT(FormatChatMessages(kChatMl, bad).status().message(), HasSubstr("has role"));
}

TEST(ChatTemplateTest, RefusesOtherTemplatesByFamily) {
  EXPECT_THAT(FormatChatPrompt("{{ '<start_of_turn>user' }}", "Hi").status().message(),
              HasSubstr("Gemma"));
  EXPECT_THAT(FormatChatPrompt("[INST] {{ m }} [/INST]", "Hi").status().message(),
              HasSubstr("[INST]"));
  EXPECT_THAT(FormatChatPrompt("", "Hi").status().message(), HasSubstr("no chat template"));
  EXPECT_EQ(ReadChatTemplate("/nonexistent.gguf").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace pagedkv
