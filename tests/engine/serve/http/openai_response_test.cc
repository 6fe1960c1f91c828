// Copyright 2026 The pagedkv Authors.
#include "engine/serve/http/openai_response.h"

#include <string>

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
