// Copyright 2026 The pagedkv Authors.
#include "engine/serve/http/openai_request.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagedkv::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ApiRequest Completion(const std::string& body) {
  absl::StatusOr<ApiRequest> r = ParseApiRequest(body, ApiEndpoint::kCompletions);
  EXPECT_TRUE(r.ok()) << r.status() << " for " << body;
  return r.ok() ? *r : ApiRequest{};
}

// The error's field and message for a body that must be refused.
std::pair<std::string, std::string> Refusal(const std::string& body,
                                            ApiEndpoint endpoint = ApiEndpoint::kCompletions) {
  absl::StatusOr<ApiRequest> r = ParseApiRequest(body, endpoint);
  EXPECT_FALSE(r.ok()) << body;
  if (r.ok()) return {};
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  return {ErrorParam(r.status()), std::string(r.status().message())};
}

TEST(OpenAiRequestTest, ReadsEveryFieldOfACompletion) {
  const ApiRequest r = Completion(R"({"model": "m", "prompt": "Hi", "max_tokens": 7,
      "temperature": 0.5, "top_p": 0.9, "seed": -3, "stop": ["\n", "END"], "stream": true,
      "stream_options": {"include_usage": true}, "ignore_eos": true, "stop_token_ids": [2, 5],
      "return_token_ids": true, "cache_salt": "tenant-a", "priority": -2, "n": 1,
      "logprobs": null, "echo": false})");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt_text, "Hi");
  EXPECT_FALSE(r.prompt_is_tokens);
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.top_p, 0.9f);
  EXPECT_EQ(r.seed, -3);
  EXPECT_THAT(r.stop, ElementsAre("\n", "END"));
  EXPECT_TRUE(r.stream && r.include_usage && r.ignore_eos && r.return_token_ids);
  EXPECT_THAT(r.stop_token_ids, ElementsAre(2, 5));
  EXPECT_EQ(r.cache_salt, "tenant-a");
  EXPECT_EQ(r.priority, -2);
}

TEST(OpenAiRequestTest, DefaultsAreOpenAis) {
  const ApiRequest r = Completion(R"({"prompt": "Hi"})");
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_FLOAT_EQ(r.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.top_p, 1.0f);
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_FALSE(r.stream || r.include_usage || r.ignore_eos || r.return_token_ids);
  EXPECT_TRUE(r.stop.empty());
}

TEST(OpenAiRequestTest, PromptShapes) {
  EXPECT_THAT(Completion(R"({"prompt": [1, 5, 9]})").prompt_tokens, ElementsAre(1, 5, 9));
  EXPECT_TRUE(Completion(R"({"prompt": [1, 5, 9]})").prompt_is_tokens);
  EXPECT_EQ(Completion(R"({"prompt": ["one"]})").prompt_text, "one");
  EXPECT_THAT(Completion(R"({"prompt": [[4, 2]]})").prompt_tokens, ElementsAre(4, 2));
  EXPECT_EQ(Completion(R"({"prompt": "x", "stop": "\n"})").stop, std::vector<std::string>{"\n"});
}

TEST(OpenAiRequestTest, UnknownFieldsAreIgnored) {
  const ApiRequest r = Completion(
      R"({"prompt": "Hi", "router_hint": {"x": [1, 2]}, "user": "u", "frequency_penalty": 0})");
  EXPECT_EQ(r.prompt_text, "Hi");
}

TEST(OpenAiRequestTest, RefusesWhatItCannotServeNamingTheField) {
  EXPECT_EQ(Refusal(R"({"prompt": "a", "n": 17})").first, "n");  // past ApiLimits::max_n
  EXPECT_EQ(Refusal(R"({"prompt": "a", "n": 0})").first, "n");
  EXPECT_EQ(Refusal(R"({"prompt": "a", "best_of": 3})").first, "best_of");
  EXPECT_EQ(Refusal(R"({"prompt": "a", "n": 2, "best_of": 3})").first, "best_of");
  EXPECT_EQ(Completion(R"({"prompt": "a", "n": 4, "best_of": 4})").n, 4);
  EXPECT_EQ(Completion(R"({"prompt": "a"})").n, 1);
  EXPECT_EQ(Refusal(R"({"prompt": ["a", "b"]})").first, "prompt");
  EXPECT_THAT(Refusal(R"({"prompt": ["a", "b"]})").second, HasSubstr("one request per prompt"));
  EXPECT_EQ(Refusal(R"({"messages": [{"role": "user", "content": "x"}], "tools": [{}]})",
                    ApiEndpoint::kChatCompletions)
                .first,
            "tools");
}

TEST(OpenAiRequestTest, LogprobsAreReadPerEndpoint) {
  EXPECT_EQ(Completion(R"({"prompt": "a"})").logprobs, -1);
  EXPECT_EQ(Completion(R"({"prompt": "a", "logprobs": null})").logprobs, -1);
  EXPECT_EQ(Completion(R"({"prompt": "a", "logprobs": false})").logprobs, -1);
  EXPECT_EQ(Completion(R"({"prompt": "a", "logprobs": 0})").logprobs, 0);
  EXPECT_EQ(Completion(R"({"prompt": "a", "logprobs": 20})").logprobs, 20);
  for (const char* bad :
       {R"({"prompt": "a", "logprobs": 21})", R"({"prompt": "a", "logprobs": -1})",
        R"({"prompt": "a", "logprobs": true})", R"({"prompt": "a", "logprobs": 1.5})"}) {
    EXPECT_EQ(Refusal(bad).first, "logprobs") << bad;
  }
  EXPECT_EQ(Refusal(R"({"prompt": "a", "top_logprobs": 3})").first, "top_logprobs");
  const auto chat = [](const std::string& fields) {
    return R"({"messages": [{"role": "user", "content": "a"}])" + fields + "}";
  };
  auto parsed = [](const std::string& body) {
    return ParseApiRequest(body, ApiEndpoint::kChatCompletions);
  };
  EXPECT_EQ(parsed(chat(""))->logprobs, -1);
  EXPECT_EQ(parsed(chat(R"(, "logprobs": false, "top_logprobs": 0)"))->logprobs, -1);
  EXPECT_EQ(parsed(chat(R"(, "logprobs": true)"))->logprobs, 0);
  EXPECT_EQ(parsed(chat(R"(, "logprobs": true, "top_logprobs": 5)"))->logprobs, 5);
  EXPECT_EQ(Refusal(chat(R"(, "top_logprobs": 5)"), ApiEndpoint::kChatCompletions).first,
            "top_logprobs");
  EXPECT_EQ(
      Refusal(chat(R"(, "logprobs": true, "top_logprobs": 21)"), ApiEndpoint::kChatCompletions)
          .first,
      "top_logprobs");
  EXPECT_EQ(Refusal(chat(R"(, "logprobs": 3)"), ApiEndpoint::kChatCompletions).first, "logprobs");
}

TEST(OpenAiRequestTest, EchoAndPromptLogprobs) {
  const ApiRequest echo = Completion(R"({"prompt": "a", "echo": true, "max_tokens": 0})");
  EXPECT_TRUE(echo.echo);
  EXPECT_EQ(echo.max_tokens, 0);
  EXPECT_EQ(Completion(R"({"prompt": "a", "prompt_logprobs": 3})").prompt_logprobs, 3);
  EXPECT_EQ(Completion(R"({"prompt": "a"})").prompt_logprobs, -1);
  EXPECT_EQ(Refusal(R"({"prompt": "a", "max_tokens": 0})").first, "max_tokens");
  // Streamed too (the prompt's part leads the stream).
  const ApiRequest streamed =
      Completion(R"({"prompt": "a", "echo": true, "max_tokens": 0, "stream": true,
                     "logprobs": 1, "prompt_logprobs": 2})");
  EXPECT_TRUE(streamed.echo && streamed.stream);
  EXPECT_EQ(streamed.max_tokens, 0);
  EXPECT_EQ(streamed.prompt_logprobs, 2);
  EXPECT_EQ(Refusal(R"({"prompt": "a", "prompt_logprobs": 21})").first, "prompt_logprobs");
  EXPECT_EQ(Refusal(R"({"messages": [{"role": "user", "content": "a"}], "echo": true})",
                    ApiEndpoint::kChatCompletions)
                .first,
            "echo");
}

// vLLM's integer fields are pydantic ints (lax mode): an integral number such as 40.0 is the
// integer, 40.5 is refused naming the field, and the range still applies.
TEST(OpenAiRequestTest, IntegerFieldsTakeIntegralNumbers) {
  const ApiRequest c = Completion(R"({"prompt": "a", "top_k": 40.0, "n": 2.0, "best_of": 2.0,
      "max_tokens": 16.0, "min_tokens": 3.0, "seed": -7.0, "logprobs": 2.0,
      "prompt_logprobs": 1.0, "priority": 0.0})");
  EXPECT_EQ(c.top_k, 40);
  EXPECT_EQ(c.n, 2);
  EXPECT_EQ(c.max_tokens, 16);
  EXPECT_EQ(c.min_tokens, 3);
  EXPECT_EQ(c.seed, -7);
  EXPECT_EQ(c.logprobs, 2);
  EXPECT_EQ(c.prompt_logprobs, 1);
  EXPECT_EQ(Completion(R"({"prompt": "a", "seed": 1e18})").seed, 1000000000000000000);
  absl::StatusOr<ApiRequest> chat = ParseApiRequest(
      R"({"messages": [{"role": "user", "content": "a"}], "logprobs": true, "top_logprobs": 3.0,
          "max_completion_tokens": 5.0, "top_k": 1.0})",
      ApiEndpoint::kChatCompletions);
  ASSERT_TRUE(chat.ok()) << chat.status();
  EXPECT_EQ(chat->logprobs, 3);
  EXPECT_EQ(chat->max_tokens, 5);
  EXPECT_EQ(chat->top_k, 1);
  for (const char* field : {"top_k", "n", "best_of", "max_tokens", "min_tokens", "seed", "logprobs",
                            "prompt_logprobs", "priority"}) {
    const auto [param, message] =
        Refusal(absl::StrCat(R"({"prompt": "a", ")", field, R"(": 2.5})"));
    EXPECT_EQ(param, field);
    EXPECT_THAT(message, HasSubstr("fractional part")) << field;
    EXPECT_EQ(Refusal(absl::StrCat(R"({"prompt": "a", ")", field, R"(": 1e30})")).first, field);
    EXPECT_EQ(Refusal(absl::StrCat(R"({"prompt": "a", ")", field, R"(": "2"})")).first, field);
  }
  EXPECT_EQ(Refusal(R"({"messages": [{"role": "user", "content": "a"}], "logprobs": true,
                        "top_logprobs": 2.5})",
                    ApiEndpoint::kChatCompletions)
                .first,
            "top_logprobs");
  EXPECT_EQ(Refusal(R"({"prompt": "a", "top_k": -2.0})").first, "top_k");  // still in range
}

// Fields vLLM accepts and pagedkv does not implement: their off values pass, any other
// value is refused naming the field (never silently ignored).
TEST(OpenAiRequestTest, UnimplementedSamplingFieldsPassOnlyAtTheirOffValues) {
  const std::pair<const char*, const char*> off_and_on[][2] = {
      {{"bad_words", "[]"}, {"bad_words", R"(["x"])"}},
      {{"allowed_token_ids", "[]"}, {"allowed_token_ids", "[1, 2]"}},
      {{"response_format", R"({"type": "text"})"},
       {"response_format", R"({"type": "json_object"})"}},
      {{"guided_json", "{}"}, {"guided_json", R"({"type": "object"})"}},
      {{"guided_choice", "[]"}, {"guided_choice", R"(["a", "b"])"}},
      {{"use_beam_search", "false"}, {"use_beam_search", "true"}},
      {{"include_stop_str_in_output", "false"}, {"include_stop_str_in_output", "true"}},
      {{"truncate_prompt_tokens", "null"}, {"truncate_prompt_tokens", "100"}},
  };
  for (const auto& [off, on] : off_and_on) {
    for (ApiEndpoint e : {ApiEndpoint::kCompletions, ApiEndpoint::kChatCompletions}) {
      const std::string head = e == ApiEndpoint::kCompletions
                                   ? R"({"prompt": "a", ")"
                                   : R"({"messages": [{"role": "user", "content": "a"}], ")";
      const std::string passes = head + off.first + "\": " + off.second + "}";
      EXPECT_TRUE(ParseApiRequest(passes, e).ok()) << passes;
      const std::string refused = head + on.first + "\": " + on.second + "}";
      const auto [field, message] = Refusal(refused, e);
      EXPECT_EQ(field, on.first) << refused;
      EXPECT_THAT(message, HasSubstr("is not supported")) << refused;
    }
  }
  // A long value is cut in the message.
  std::string words = R"({"prompt": "a", "bad_words": [)";
  for (int i = 0; i < 500; ++i) words += (i ? ", \"" : "\"") + std::to_string(i) + "\"";
  EXPECT_LT(Refusal(words + "]}").second.size(), 200u);
}

// vLLM's sampling fields pagedkv implements: read in vLLM's ranges (top_k -1 meaning 0, logit_bias
// clamped to [-100, 100]); values out of range are refused naming the field.
TEST(OpenAiRequestTest, ReadsVllmSamplingFieldsInVllmsRanges) {
  absl::StatusOr<ApiRequest> r = ParseApiRequest(
      R"({"prompt": "a", "max_tokens": 8, "top_k": 40, "min_p": 0.05, "repetition_penalty": 1.3,
          "presence_penalty": -0.5, "frequency_penalty": 2, "min_tokens": 8,
          "logit_bias": {"5": 100, "7": -250.5, "0": 1e9}})",
      ApiEndpoint::kCompletions);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->top_k, 40);
  EXPECT_FLOAT_EQ(r->min_p, 0.05f);
  EXPECT_FLOAT_EQ(r->repetition_penalty, 1.3f);
  EXPECT_FLOAT_EQ(r->presence_penalty, -0.5f);
  EXPECT_FLOAT_EQ(r->frequency_penalty, 2.0f);
  EXPECT_EQ(r->min_tokens, 8);
  EXPECT_EQ(r->logit_bias,
            (std::vector<std::pair<TokenId, float>>{{0, 100.0f}, {5, 100.0f}, {7, -100.0f}}));
  absl::StatusOr<ApiRequest> off = ParseApiRequest(
      R"({"messages": [{"role": "user", "content": "a"}], "top_k": -1, "logit_bias": {}})",
      ApiEndpoint::kChatCompletions);
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->top_k, 0);
  EXPECT_TRUE(off->logit_bias.empty());
  EXPECT_FLOAT_EQ(off->repetition_penalty, 1.0f);
  for (const auto& [body, field] : std::vector<std::pair<std::string, std::string>>{
           {R"("top_k": -2)", "top_k"},
           {R"("top_k": 1.5)", "top_k"},
           {R"("min_p": 1.01)", "min_p"},
           {R"("min_p": -0.1)", "min_p"},
           {R"("repetition_penalty": 0)", "repetition_penalty"},
           {R"("repetition_penalty": -1)", "repetition_penalty"},
           {R"("presence_penalty": 2.5)", "presence_penalty"},
           {R"("frequency_penalty": -3)", "frequency_penalty"},
           {R"("min_tokens": -1)", "min_tokens"},
           {R"("max_tokens": 4, "min_tokens": 5)", "min_tokens"},
           {R"("logit_bias": [1, 2])", "logit_bias"},
           {R"("logit_bias": {"a": 1})", "logit_bias"},
           {R"("logit_bias": {"-1": 1})", "logit_bias"},
           {R"("logit_bias": {"99999999999": 1})", "logit_bias"},
           {R"("logit_bias": {"5": "x"})", "logit_bias"},
       }) {
    const std::string refused = R"({"prompt": "a", )" + body + "}";
    EXPECT_EQ(Refusal(refused).first, field) << refused;
  }
}

TEST(OpenAiRequestTest, RefusesWrongTypesAndRanges) {
  EXPECT_EQ(Refusal(R"({})").first, "prompt");
  EXPECT_EQ(Refusal(R"({"prompt": 3})").first, "prompt");
  EXPECT_EQ(Refusal(R"({"prompt": []})").first, "prompt");
  EXPECT_EQ(Refusal(R"({"prompt": [1, -2]})").first, "prompt");
  EXPECT_EQ(Refusal(R"({"prompt": [1, 2.5]})").first, "prompt");
  EXPECT_EQ(Refusal(R"({"prompt": [1, 99999999999]})").first, "prompt");
  EXPECT_EQ(Refusal(R"({"prompt": "a", "max_tokens": 0})").first, "max_tokens");
  EXPECT_EQ(Refusal(R"({"prompt": "a", "max_tokens": "5"})").first, "max_tokens");
  EXPECT_EQ(Refusal(R"({"prompt": "a", "max_tokens": 1e30})").first, "max_tokens");
  EXPECT_EQ(Refusal(R"({"prompt": "a", "max_tokens": 18446744073709551615})").first, "max_tokens");
  EXPECT_EQ(Refusal(R"({"prompt": "a", "temperature": -1})").first, "temperature");
  EXPECT_EQ(Refusal(R"({"prompt": "a", "temperature": 2.5})").first, "temperature");
  EXPECT_EQ(Refusal(R"({"prompt": "a", "top_p": 0})").first, "top_p");
  EXPECT_EQ(Refusal(R"({"prompt": "a", "stream": "yes"})").first, "stream");
  EXPECT_EQ(Refusal(R"({"prompt": "a", "stop": [""]})").first, "stop");
  EXPECT_EQ(Refusal(R"({"prompt": "a", "stop": [1]})").first, "stop");
  EXPECT_EQ(Refusal(R"({"prompt": "a", "stop": ["a","b","c","d","e","f","g","h","i","j","k",
      "l","m","n","o","p","q"]})")
                .first,
            "stop");
  EXPECT_EQ(Refusal(R"({"prompt": "a", "cache_salt": 5})").first, "cache_salt");
  EXPECT_EQ(Refusal(R"({"prompt": "a", "priority": 1.5})").first, "priority");
  EXPECT_EQ(Refusal(R"({"prompt": "a", "stream_options": true})").first, "stream_options");
}

TEST(OpenAiRequestTest, RefusesMalformedBodiesWithoutAField) {
  for (const char* body : {"", "{", "[1, 2]", "\"text\"", "{\"prompt\": \"a\",}", "nul",
                           "{\"prompt\": \"\xff\xfe\"}"}) {
    absl::StatusOr<ApiRequest> r = ParseApiRequest(body, ApiEndpoint::kCompletions);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(ErrorParam(r.status()), "") << body;
  }
}

TEST(OpenAiRequestTest, ChatMessagesAndTheirContentParts) {
  absl::StatusOr<ApiRequest> r = ParseApiRequest(
      R"({"messages": [{"role": "system", "content": "Be brief."},
          {"role": "user", "content": [{"type": "text", "text": "Hi "},
                                       {"type": "text", "text": "there"}]}],
          "max_tokens": 9, "max_completion_tokens": 4})",
      ApiEndpoint::kChatCompletions);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->messages.size(), 2u);
  EXPECT_EQ(r->messages[0].role, "system");
  EXPECT_EQ(r->messages[1].content, "Hi there");
  EXPECT_EQ(r->max_tokens, 4);  // max_completion_tokens wins
  EXPECT_EQ(Refusal(R"({"messages": []})", ApiEndpoint::kChatCompletions).first, "messages");
  EXPECT_EQ(Refusal(R"({"messages": [{"content": "x"}]})", ApiEndpoint::kChatCompletions).first,
            "messages");
  EXPECT_EQ(Refusal(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
                    ApiEndpoint::kChatCompletions)
                .first,
            "messages");
}

TEST(OpenAiRequestTest, TokenizeAndDetokenizeBodies) {
  absl::StatusOr<TokenizeRequest> t =
      ParseTokenizeRequest(R"({"prompt": "Hi", "add_special_tokens": false})");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->prompt, "Hi");
  EXPECT_FALSE(t->add_special_tokens);
  EXPECT_FALSE(ParseTokenizeRequest(R"({"prompt": 1})").ok());
  absl::StatusOr<std::vector<TokenId>> d = ParseDetokenizeRequest(R"({"tokens": [1, 2]})");
  ASSERT_TRUE(d.ok());
  EXPECT_THAT(*d, ElementsAre(1, 2));
  EXPECT_EQ(ErrorParam(ParseDetokenizeRequest(R"({"tokens": "x"})").status()), "tokens");
}

}  // namespace
}  // namespace pagedkv::server
