// Copyright 2026 The pagedkv Authors.
//
// The JSON bodies pagedkv serve answers with, in the shapes of OpenAI's API as vLLM writes them:
//   completion:  {"id", "object": "text_completion", "created", "model",
//                 "choices": [{"index": 0, "text", "logprobs" (null unless asked), "finish_reason",
//                              "stop_reason"}],
//                 "usage": {"prompt_tokens", "completion_tokens", "total_tokens",
//                           "prompt_tokens_details": {"cached_tokens"}}}
//   chat:        "object": "chat.completion", choices[0].message = {"role": "assistant", "content"}
//   stream chunk: "object": "text_completion" / "chat.completion.chunk", choices[0].text or .delta
//                 ({"role": "assistant", "content": ""} first, then {"content"}), finish_reason
//                 null until the last; a usage chunk has "choices": [] and "usage".
//   error:       {"error": {"message", "type", "param", "code"}} (OpenAI's error object).
// With return_token_ids (vLLM's extension) choices also carry "token_ids" and the response (the
// first chunk when streaming) "prompt_token_ids". Invalid UTF-8 in text is replaced by U+FFFD.
//
// Example:
//   std::string body = CompletionBody(meta, {.text = "Paris", .finish_reason = "stop"}, usage);
//   std::string event = SseEvent(StreamChunk(meta, {.text = "Par"}));  // "data: {...}\n\n"
//
// Thread-safe: pure functions.
#ifndef PAGEDKV_ENGINE_SERVE_HTTP_OPENAI_RESPONSE_H_
#define PAGEDKV_ENGINE_SERVE_HTTP_OPENAI_RESPONSE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "engine/serve/http/openai_request.h"
#include "pagedkv/types.h"

namespace pagedkv::server {

// What every body of one response repeats.
struct ResponseMeta {
  std::string id;       // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
  ApiEndpoint endpoint = ApiEndpoint::kCompletions;
  bool return_token_ids = false;
  std::vector<TokenId> prompt_token_ids;  // sent with return_token_ids
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens served from the prefix cache
};

// One generated token's logprobs as a response shows them: texts, not ids (a token's text is
// Tokenizer::DecodeToken after its predecessor; one that decodes to nothing, such as EOS, shows
// its vocabulary piece). A non-finite logprob is written as -9999.0, as vLLM does.
struct TokenLogprobText {
  std::string token;
  float logprob = 0.0f;
  std::vector<std::pair<std::string, float>> top;  // most probable first
  int64_t text_offset = 0;  // completions: the token's start in the choice's text (code points)
  bool has_logprob = true;  // false: an echoed prompt's first token (null logprob and top)
};

// One token of one prompt position in vLLM's prompt_logprobs.
struct VllmLogprob {
  TokenId token = 0;
  float logprob = 0.0f;
  int32_t rank = 1;
  std::string decoded;
};

// One choice, or the part of it a stream chunk carries.
struct ChoiceDelta {
  int32_t index = 0;  // among the request's n choices
  std::string text;
  std::vector<TokenId> token_ids;  // with return_token_ids
  std::string finish_reason;       // "stop", "length", "abort"; empty: not finished
  // vLLM's stop_reason: the stop string or token that ended it; unset: EOS or not stopped.
  std::optional<std::string> stop_string;
  std::optional<TokenId> stop_token;
  bool first = false;  // stream: the first chunk (chat sends the assistant role in it)
  // Set when the request asked for logprobs: completions' {"tokens", "token_logprobs",
  // "top_logprobs" (the top tokens and the sampled one, as vLLM), "text_offset"}; chat's
  // {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]}.
  std::optional<std::vector<TokenLogprobText>> logprobs;
  // vLLM's prompt_logprobs when asked (in the choice; chat: in the response, or in the stream
  // chunk that carries it, the first of the stream): per prompt
  // position, null where empty (the first), else {"<id>": {"logprob", "rank",
  // "decoded_token"}} for the prompt token and the top ones.
  std::optional<std::vector<std::vector<VllmLogprob>>> prompt_logprobs;
};

// The non-streaming response body: the choices in order, one usage.
std::string ChoicesBody(const ResponseMeta& meta, const std::vector<ChoiceDelta>& choices,
                        const Usage& usage);
inline std::string CompletionBody(const ResponseMeta& meta, const ChoiceDelta& choice,
                                  const Usage& usage) {
  return ChoicesBody(meta, std::vector<ChoiceDelta>{choice}, usage);
}
// One streamed chunk's JSON (without the "data: " framing).
std::string StreamChunk(const ResponseMeta& meta, const ChoiceDelta& delta);
// The last chunk of a stream with stream_options.include_usage.
std::string UsageChunk(const ResponseMeta& meta, const Usage& usage);
// "data: <json>\n\n".
std::string SseEvent(absl::string_view json);
inline constexpr char kSseDone[] = "data: [DONE]\n\n";

// OpenAI's error object for an HTTP status; `param` empty: null.
std::string ErrorBody(int http_status, absl::string_view message, absl::string_view param = "");
// The error object's "type" for an HTTP status ("invalid_request_error", ...).
std::string ErrorType(int http_status);

}  // namespace pagedkv::server

#endif  // PAGEDKV_ENGINE_SERVE_HTTP_OPENAI_RESPONSE_H_
