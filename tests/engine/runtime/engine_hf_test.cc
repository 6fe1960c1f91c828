// Copyright 2026 The pagedkv Authors.
//
// The engine on a real Hugging Face checkpoint: TinyStories-656K (../shared/data/tinystories656K,
// a LlamaForCausalLM with half-split RoPE, GQA, tied embeddings and a SentencePiece-style
// tokenizer.json). Skipped when the shared data is absent.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pagedkv/model/model_source.h"
#include "pagedkv/model/tokenizer.h"
#include "pagedkv/runtime/engine.h"
#include "tests/shared_data.h"

namespace pagedkv {
namespace {

using ::testing::StartsWith;

std::optional<std::string> TinyStoriesDir() {
  auto dir = testing::SharedDataDir();
  if (!dir || !std::filesystem::exists(*dir / "tinystories656K" / "config.json")) {
    return std::nullopt;
  }
  return (*dir / "tinystories656K").string();
}

TEST(EngineHfTest, LoadsTinyStoriesAsHuggingFace) {
  const auto dir = TinyStoriesDir();
  if (!dir) GTEST_SKIP() << testing::kNoSharedDataMessage;
  absl::StatusOr<LoadedModel> model = LoadModel(*dir);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->format, "huggingface");
  const ModelConfig& c = model->weights->config();
  EXPECT_EQ(c.dim, 128);
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.vocab_size, 2048);
  EXPECT_EQ(c.seq_len, 512);
  EXPECT_TRUE(c.shared_classifier);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-6f);
  ASSERT_TRUE(c.rope.has_value());
  EXPECT_EQ(c.rope->layout, RopeLayout::kHalfSplit);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.stop_token_ids, std::vector<int32_t>({2}));
  ASSERT_NE(model->tokenizer, nullptr);
  EXPECT_EQ(model->tokenizer->vocab_size(), 2048);
}

TEST(EngineHfTest, GreedyFromBosWritesTheStory) {
  const auto dir = TinyStoriesDir();
  if (!dir) GTEST_SKIP() << testing::kNoSharedDataMessage;
  EngineOptions options;
  options.backend = BackendKind::kCpu;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Load(*dir, "", options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->context_length(), 512);
  absl::StatusOr<std::vector<GenerationResult>> out =
      (*engine)->Generate({{.prompt_tokens = {}, .max_new_tokens = 16}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].prompt_tokens, std::vector<TokenId>({1}));
  EXPECT_THAT((*out)[0].text, StartsWith("Once upon a time, there was a little girl named Lily."));
}

TEST(EngineHfTest, PromptsRoundTrip) {
  const auto dir = TinyStoriesDir();
  if (!dir) GTEST_SKIP() << testing::kNoSharedDataMessage;
  absl::StatusOr<LoadedModel> model = LoadModel(*dir);
  ASSERT_TRUE(model.ok()) << model.status();
  const Tokenizer& tok = *model->tokenizer;
  for (const std::string text : {"Once upon a time", "The dog ran to the park.", "  two spaces",
                                 "Tom said, \"Hi!\"\nBye.", "numbers 123 and 4.5", ""}) {
    absl::StatusOr<std::vector<TokenId>> ids = tok.Encode(text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    ASSERT_FALSE(ids->empty());
    EXPECT_EQ((*ids)[0], tok.bos_id()) << text;
    absl::StatusOr<std::string> back = tok.Decode(*ids);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, text);
  }
}

TEST(EngineHfTest, StopsAtEos) {
  const auto dir = TinyStoriesDir();
  if (!dir) GTEST_SKIP() << testing::kNoSharedDataMessage;
  EngineOptions options;
  options.backend = BackendKind::kCpu;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Load(*dir, "", options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  // A whole story ends with <|end_story|> (id 2) well within the 512 context.
  absl::StatusOr<std::vector<GenerationResult>> out =
      (*engine)->Generate({{.prompt_tokens = {}, .max_new_tokens = 500}});
  ASSERT_TRUE(out.ok()) << out.status();
  const GenerationResult& r = (*out)[0];
  ASSERT_FALSE(r.output_tokens.empty());
  EXPECT_EQ(r.output_tokens.back(), 2);
  EXPECT_LT(r.output_tokens.size(), 500u);
}

}  // namespace
}  // namespace pagedkv
