// Copyright 2026 The pagedkv Authors.
#include "engine/serve/http/openai_response.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pagedkv::server {
namespace {

using nlohmann::json;

ResponseMeta Meta(ApiEndpoint endpoint, bool token_ids = false) {
  return {.id = "cmpl-1",
          .created = 1700000000,
          .model = "m",
          .endpoint = endpoint,
          .return_token_ids = token_ids,
          .prompt_token_ids = {1, 2, 3}};
}

TEST(OpenAiResponseTest, CompletionBodyHasOpenAisFields) {
  const json body = json::parse(
      CompletionBody(Meta(ApiEndpoint::kCompletions), {.text = "Paris", .finish_reason = "length"},
                     {.prompt_tokens = 3, .completion_tokens = 2, .cached_tokens = 2}));
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["id"], "cmpl-1");
  EXPECT_EQ(body["created"], 1700000000);
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["choices"][0]["index"], 0);
  EXPECT_EQ(body["choices"][0]["text"], "Paris");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(body["choices"][0]["stop_reason"].is_null());
  EXPECT_EQ(body["usage"]["total_tokens"], 5);
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
  EXPECT_FALSE(body.contains("prompt_token_ids"));
}

std::vector<TokenLogprobText> Entries() {
  return {{.token = " Pa", .logprob = -0.5f, .top = {{" Pa", -0.5f}, {" Lo", -1.25f}}},
          {.token = "ris\xc3\xa9", .logprob = -INFINITY, .top = {}, .text_offset = 3}};
}

TEST(OpenAiResponseTest, CompletionLogprobsInOpenAisShape) {
  ChoiceDelta choice{.text = " Paris\xc3\xa9"};
  EXPECT_TRUE(json::parse(CompletionBody(Meta(ApiEndpoint::kCompletions), choice,
                                         {}))["choices"][0]["logprobs"]
                  .is_null());
  choice.logprobs = Entries();
  const json lp = json::parse(
      CompletionBody(Meta(ApiEndpoint::kCompletions), choice, {}))["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json::array({" Pa", "ris\xc3\xa9"}));
  EXPECT_EQ(lp["token_logprobs"], json::array({-0.5, -9999.0}));  // -inf as vLLM writes it
  EXPECT_EQ(lp["text_offset"], json::array({0, 3}));
  EXPECT_EQ(lp["top_logprobs"][0], json({{" Pa", -0.5}, {" Lo", -1.25}}));
  EXPECT_EQ(lp["top_logprobs"][1], json({{"ris\xc3\xa9", -9999.0}}));  // the sampled one
  // The top tokens stay most probable first in the text (an object's keys keep their order).
  const std::string text = StreamChunk(Meta(ApiEndpoint::kCompletions), choice);
  EXPECT_LT(text.find("\" Pa\":-0.5"), text.find("\" Lo\":-1.25"));
}

TEST(OpenAiResponseTest, EchoedFirstTokenAndVllmPromptLogprobs) {
  ChoiceDelta choice{.text = "ab"};
  choice.logprobs = {{.token = "a", .has_logprob = false},
                     {.token = "b", .logprob = -2.0f, .text_offset = 1}};
  choice.prompt_logprobs = {{}, {{.token = 7, .logprob = -2.0f, .rank = 3, .decoded = "b"}}};
  const json c =
      json::parse(CompletionBody(Meta(ApiEndpoint::kCompletions), choice, {}))["choices"][0];
  EXPECT_TRUE(c["logprobs"]["token_logprobs"][0].is_null());
  EXPECT_TRUE(c["logprobs"]["top_logprobs"][0].is_null());
  EXPECT_EQ(c["logprobs"]["token_logprobs"][1], -2.0);
  EXPECT_EQ(c["logprobs"]["text_offset"], json::array({0, 1}));
  EXPECT_TRUE(c["prompt_logprobs"][0].is_null());
  EXPECT_EQ(c["prompt_logprobs"][1]["7"],
            json({{"logprob", -2.0}, {"rank", 3}, {"decoded_token", "b"}}));
  // Chat: vLLM puts prompt_logprobs in the response, not in the choice.
  const json chat = json::parse(CompletionBody(Meta(ApiEndpoint::kChatCompletions), choice, {}));
  EXPECT_FALSE(chat["choices"][0].contains("prompt_logprobs"));
  EXPECT_EQ(chat["prompt_logprobs"][1]["7"]["rank"], 3);
}

// A stream's first chunk carries vLLM's prompt_logprobs where the whole body does: in the
// completion choice, at the chat chunk's top level.
TEST(OpenAiResponseTest, StreamChunkCarriesPromptLogprobs) {
  ChoiceDelta first{.text = "ab", .first = true};
  first.prompt_logprobs = {{}, {{.token = 7, .logprob = -2.0f, .rank = 3, .decoded = "b"}}};
  const json completion = json::parse(StreamChunk(Meta(ApiEndpoint::kCompletions), first));
  EXPECT_EQ(completion["choices"][0]["prompt_logprobs"][1]["7"]["rank"], 3);
  EXPECT_FALSE(completion.contains("prompt_logprobs"));
  const json chat = json::parse(StreamChunk(Meta(ApiEndpoint::kChatCompletions), first));
  EXPECT_EQ(chat["prompt_logprobs"][1]["7"]["logprob"], -2.0);
  EXPECT_FALSE(chat["choices"][0].contains("prompt_logprobs"));
  const json later = json::parse(StreamChunk(Meta(ApiEndpoint::kCompletions), {.text = "c"}));
  EXPECT_FALSE(later["choices"][0].contains("prompt_logprobs"));
}

TEST(OpenAiResponseTest, ChatLogprobsInOpenAisShape) {
  const ChoiceDelta choice{.text = " Paris", .logprobs = Entries()};
  const json lp = json::parse(CompletionBody(Meta(ApiEndpoint::kChatCompletions), choice,
                                             {}))["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(lp.size(), 2u);
  EXPECT_EQ(lp[0]["token"], " Pa");
  EXPECT_EQ(lp[0]["logprob"], -0.5);
  EXPECT_EQ(lp[0]["bytes"], json::array({32, 80, 97}));
  EXPECT_EQ(lp[0]["top_logprobs"][1],
            json({{"token", " Lo"}, {"logprob", -1.25}, {"bytes", {32, 76, 111}}}));
  EXPECT_EQ(lp[1]["bytes"], json::array({114, 105, 115, 0xc3, 0xa9}));
  EXPECT_EQ(lp[1]["logprob"], -9999.0);
  EXPECT_TRUE(lp[1]["top_logprobs"].empty());
}

TEST(OpenAiResponseTest, ChatBodyAndChunks) {
  const ResponseMeta meta = Meta(ApiEndpoint::kChatCompletions, /*token_ids=*/true);
  const json body = json::parse(CompletionBody(
      meta, {.text = "Hi", .token_ids = {7}, .finish_reason = "stop", .stop_string = "\n"}, {}));
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "Hi");
  EXPECT_EQ(body["choices"][0]["stop_reason"], "\n");
  EXPECT_EQ(body["choices"][0]["token_ids"], json::array({7}));
  EXPECT_EQ(body["prompt_token_ids"], json::array({1, 2, 3}));

  const json first = json::parse(StreamChunk(meta, {.text = "H", .token_ids = {5}, .first = true}));
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(first["choices"][0]["delta"]["content"], "H");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(first["prompt_token_ids"], json::array({1, 2, 3}));
  const json later = json::parse(StreamChunk(meta, {.text = "i", .stop_token = 2}));
  EXPECT_FALSE(later["choices"][0]["delta"].contains("role"));
  EXPECT_EQ(later["choices"][0]["stop_reason"], 2);
  EXPECT_FALSE(later.contains("prompt_token_ids"));

  const json usage = json::parse(UsageChunk(meta, {.prompt_tokens = 4, .completion_tokens = 1}));
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 5);
}

TEST(OpenAiResponseTest, InvalidUtf8IsReplacedNotThrown) {
  const json body = json::parse(CompletionBody(Meta(ApiEndpoint::kCompletions),
                                               {.text = "a\xff"
                                                        "b"},
                                               {}));
  EXPECT_EQ(body["choices"][0]["text"],
            "a\xEF\xBF\xBD"
            "b");
}

TEST(OpenAiResponseTest, ErrorObjectAndSseFraming) {
  const json e = json::parse(ErrorBody(400, "'n' must be 1", "n"));
  EXPECT_EQ(e["error"]["message"], "'n' must be 1");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["param"], "n");
  EXPECT_EQ(e["error"]["code"], 400);
  EXPECT_TRUE(json::parse(ErrorBody(429, "full"))["error"]["param"].is_null());
  EXPECT_EQ(ErrorType(401), "authentication_error");
  EXPECT_EQ(SseEvent("{}"), "data: {}\n\n");
}

}  // namespace
}  // namespace pagedkv::server
