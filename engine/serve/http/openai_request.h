// Copyright 2026 The pagedkv Authors.
//
// The bodies of OpenAI's /v1/completions and /v1/chat/completions (and vLLM's /tokenize and
// /detokenize), parsed and checked into plain structs. Pure: no engine, no sockets, so the
// libFuzzer target tests/fuzz/fuzz_openai_request.cc drives it directly.
//
// What is read (everything else is ignored, as vLLM ignores fields it does not know, so routers
// may add their own):
//   completions: model, prompt (a string, a list of token ids, or a one-element list of either),
//     max_tokens, temperature, top_p, seed, stop (a string or a list), stream,
//     stream_options.include_usage, logprobs (0..20 top tokens), echo (then max_tokens may be
//     0), n (1..max_n; best_of only equal to n);
//   chat: model, messages (role + content as a string or a list of {"type": "text"} parts),
//     max_completion_tokens (before max_tokens), the sampling and stream fields above, logprobs
//     (true / false) with top_logprobs (0..20), tools and
//     response_format (absent or plain text only);
//   vLLM's extensions: cache_salt, priority, ignore_eos, stop_token_ids, return_token_ids,
//     prompt_logprobs (streamed too: in the first chunk, where vLLM refuses it), and the
//     sampling fields top_k, min_p, repetition_penalty,
//     presence_penalty, frequency_penalty (also OpenAI's), logit_bias (OpenAI's) and min_tokens.
// vLLM fields that would change the output and are not implemented (bad_words, allowed_token_ids,
// response_format other than text, guided decoding, beam search, ...) are refused naming the field
// unless sent with their "off" value.
// A field present with JSON null counts as absent. Integer fields take integral numbers too
// (40.0), as vLLM's pydantic models do; 40.5 is refused naming the field.
//
// Errors are InvalidArgument whose message names the field; ErrorParam() gives that field's name
// for OpenAI's error object ({"error": {"message", "type", "param", "code"}}).
//
// Example:
//   absl::StatusOr<ApiRequest> r = ParseApiRequest(body, ApiEndpoint::kCompletions);
//   if (!r.ok()) return ErrorResponse(400, r.status(), ErrorParam(r.status()));
//
// Thread-safe: pure functions.
#ifndef PAGEDKV_ENGINE_SERVE_HTTP_OPENAI_REQUEST_H_
#define PAGEDKV_ENGINE_SERVE_HTTP_OPENAI_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pagedkv/model/chat_template.h"
#include "pagedkv/types.h"

namespace pagedkv::server {

enum class ApiEndpoint {
  kCompletions,      // POST /v1/completions
  kChatCompletions,  // POST /v1/chat/completions
};

// A checked completion or chat request.
struct ApiRequest {
  ApiEndpoint endpoint = ApiEndpoint::kCompletions;
  std::string model;  // as sent; empty when absent
  // Completions: the prompt as text, or as token ids (prompt_is_tokens).
  std::string prompt_text;
  std::vector<TokenId> prompt_tokens;
  bool prompt_is_tokens = false;
  std::vector<ChatMessage> messages;  // chat: the conversation
  std::optional<int32_t> max_tokens;  // >= 1 (0 with echo); unset: up to the context
  float temperature = 1.0f;           // [0, 2]; OpenAI's default 1
  float top_p = 1.0f;                 // (0, 1]
  std::optional<int64_t> seed;
  int32_t logprobs = -1;          // -1: none; else each token's logprob and this many top tokens
  int32_t n = 1;                  // choices: n samples of the prompt (its blocks shared)
  bool echo = false;              // completions: the prompt precedes the text (and its logprobs)
  int32_t prompt_logprobs = -1;   // vLLM: -1 none; else the prompt's logprobs, this many top
  std::vector<std::string> stop;  // non-empty strings that end the text (not included)
  std::vector<TokenId> stop_token_ids;  // vLLM: tokens that end the request
  bool ignore_eos = false;              // vLLM: do not stop at the model's end-of-sequence tokens
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage: a last chunk with usage
  bool return_token_ids = false;  // vLLM: prompt_token_ids and token_ids in the choices
  // vLLM's sampling fields (SamplingOptions has their meaning), in vLLM's ranges.
  int32_t top_k = 0;                                  // 0 or -1 (sent) off, else >= 1
  float min_p = 0.0f;                                 // [0, 1]
  float repetition_penalty = 1.0f;                    // > 0
  float presence_penalty = 0.0f;                      // [-2, 2]
  float frequency_penalty = 0.0f;                     // [-2, 2]
  std::vector<std::pair<TokenId, float>> logit_bias;  // ids as sent, biases clamped to [-100, 100]
  int32_t min_tokens = 0;                             // <= max_tokens
  std::string cache_salt;  // vLLM: requests share cached blocks only with the same salt
  int32_t priority = 0;    // vLLM: smaller runs first under priority scheduling
};

// A /tokenize body: {"prompt": "..."} or {"messages": [...]}, add_special_tokens (default true).
struct TokenizeRequest {
  std::string model;
  std::optional<std::string> prompt;
  std::vector<ChatMessage> messages;
  bool add_special_tokens = true;
};

// Limits of a request (the server's, so parsing can refuse what could never be served).
struct ApiLimits {
  int32_t max_stop_strings = 16;        // entries of "stop"
  int32_t max_stop_string_bytes = 256;  // bytes of one stop string
  int32_t max_n = 16;                   // choices per request (n, best_of)
};

// InvalidArgument naming the field for malformed JSON, a wrong type, or a value out of range.
absl::StatusOr<ApiRequest> ParseApiRequest(absl::string_view body, ApiEndpoint endpoint,
                                           const ApiLimits& limits = {});
absl::StatusOr<TokenizeRequest> ParseTokenizeRequest(absl::string_view body);
// {"tokens": [ids]}: the ids (range checked by the tokenizer).
absl::StatusOr<std::vector<TokenId>> ParseDetokenizeRequest(absl::string_view body);

// InvalidArgument "'field' message", carrying `field` for ErrorParam.
absl::Status FieldError(absl::string_view field, absl::string_view message);

// The request field an error of the parsers above is about ("" when none, e.g. bad JSON).
std::string ErrorParam(const absl::Status& status);

}  // namespace pagedkv::server

#endif  // PAGEDKV_ENGINE_SERVE_HTTP_OPENAI_REQUEST_H_
