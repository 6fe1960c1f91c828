// Copyright 2026 The pagedkv Authors.
//
// The response bodies (see openai_response.h).
#include "engine/serve/http/openai_response.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace pagedkv::server {
namespace {

// Keys in insertion order: the fields as OpenAI lists them, top_logprobs most probable first.
using json = nlohmann::ordered_json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

bool IsChat(const ResponseMeta& meta) { return meta.endpoint == ApiEndpoint::kChatCompletions; }

json Envelope(const ResponseMeta& meta, bool chunk) {
  const char* object =
      IsChat(meta) ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return json{
      {"id", meta.id}, {"object", object}, {"created", meta.created}, {"model", meta.model}};
}

json FinishFields(const ChoiceDelta& c, json choice) {
  choice["finish_reason"] = c.finish_reason.empty() ? json() : json(c.finish_reason);
  if (c.stop_string.has_value()) {
    choice["stop_reason"] = *c.stop_string;
  } else if (c.stop_token.has_value()) {
    choice["stop_reason"] = *c.stop_token;
  } else {
    choice["stop_reason"] = nullptr;
  }
  return choice;
}

json LogprobJson(float logprob) { return std::isfinite(logprob) ? logprob : -9999.0f; }

json BytesJson(const std::string& text) {
  json bytes = json::array();
  for (const char c : text) bytes.push_back(static_cast<unsigned char>(c));
  return bytes;
}

json CompletionLogprobs(const std::vector<TokenLogprobText>& entries) {
  json tokens = json::array(), logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const TokenLogprobText& e : entries) {
    tokens.push_back(e.token);
    offsets.push_back(e.text_offset);
    if (!e.has_logprob) {
      logprobs.push_back(nullptr);
      top.push_back(nullptr);
      continue;
    }
    logprobs.push_back(LogprobJson(e.logprob));
    json alternatives = json::object();
    for (const auto& [text, logprob] : e.top) alternatives[text] = LogprobJson(logprob);
    alternatives[e.token] = LogprobJson(e.logprob);
    top.push_back(std::move(alternatives));
  }
  return json{{"tokens", std::move(tokens)},
              {"token_logprobs", std::move(logprobs)},
              {"top_logprobs", std::move(top)},
              {"text_offset", std::move(offsets)}};
}

json ChatLogprobs(const std::vector<TokenLogprobText>& entries) {
  json content = json::array();
  for (const TokenLogprobText& e : entries) {
    json top = json::array();
    for (const auto& [text, logprob] : e.top) {
      top.push_back(
          {{"token", text}, {"logprob", LogprobJson(logprob)}, {"bytes", BytesJson(text)}});
    }
    content.push_back({{"token", e.token},
                       {"logprob", LogprobJson(e.logprob)},
                       {"bytes", BytesJson(e.token)},
                       {"top_logprobs", std::move(top)}});
  }
  return json{{"content", std::move(content)}};
}

json VllmPromptLogprobs(const std::vector<std::vector<VllmLogprob>>& positions) {
  json out = json::array();
  for (const std::vector<VllmLogprob>& position : positions) {
    if (position.empty()) {
      out.push_back(nullptr);
      continue;
    }
    json tokens = json::object();
    for (const VllmLogprob& l : position) {
      tokens[std::to_string(l.token)] = {
          {"logprob", LogprobJson(l.logprob)}, {"rank", l.rank}, {"decoded_token", l.decoded}};
    }
    out.push_back(std::move(tokens));
  }
  return out;
}

// The choice's "logprobs": null unless the request asked for them.
json LogprobsJson(const ResponseMeta& meta, const ChoiceDelta& c) {
  if (!c.logprobs.has_value()) return nullptr;
  return IsChat(meta) ? ChatLogprobs(*c.logprobs) : CompletionLogprobs(*c.logprobs);
}

json UsageJson(const Usage& u) {
  return json{{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

json ChoiceJson(const ResponseMeta& meta, const ChoiceDelta& choice) {
  json c = {{"index", choice.index}, {"logprobs", LogprobsJson(meta, choice)}};
  if (IsChat(meta)) {
    c["message"] = {{"role", "assistant"}, {"content", choice.text}};
  } else {
    c["text"] = choice.text;
  }
  if (meta.return_token_ids) c["token_ids"] = choice.token_ids;
  // vLLM: a completion choice's field; a chat response's top-level one.
  if (choice.prompt_logprobs.has_value() && !IsChat(meta)) {
    c["prompt_logprobs"] = VllmPromptLogprobs(*choice.prompt_logprobs);
  }
  return FinishFields(choice, std::move(c));
}

}  // namespace

std::string ChoicesBody(const ResponseMeta& meta, const std::vector<ChoiceDelta>& choices,
                        const Usage& usage) {
  json body = Envelope(meta, /*chunk=*/false);
  body["choices"] = json::array();
  for (const ChoiceDelta& choice : choices) body["choices"].push_back(ChoiceJson(meta, choice));
  if (!choices.empty() && choices.front().prompt_logprobs.has_value() && IsChat(meta)) {
    body["prompt_logprobs"] = VllmPromptLogprobs(*choices.front().prompt_logprobs);
  }
  body["usage"] = UsageJson(usage);
  if (meta.return_token_ids) body["prompt_token_ids"] = meta.prompt_token_ids;
  return Dump(body);
}

std::string StreamChunk(const ResponseMeta& meta, const ChoiceDelta& delta) {
  json body = Envelope(meta, /*chunk=*/true);
  json c = {{"index", delta.index}, {"logprobs", LogprobsJson(meta, delta)}};
  if (IsChat(meta)) {
    c["delta"] = delta.first ? json{{"role", "assistant"}, {"content", delta.text}}
                             : json{{"content", delta.text}};
  } else {
    c["text"] = delta.text;
  }
  if (meta.return_token_ids) c["token_ids"] = delta.token_ids;
  if (delta.prompt_logprobs.has_value() && !IsChat(meta)) {
    c["prompt_logprobs"] = VllmPromptLogprobs(*delta.prompt_logprobs);
  }
  body["choices"] = json::array({FinishFields(delta, std::move(c))});
  if (delta.prompt_logprobs.has_value() && IsChat(meta)) {
    body["prompt_logprobs"] = VllmPromptLogprobs(*delta.prompt_logprobs);
  }
  if (meta.return_token_ids && delta.first) body["prompt_token_ids"] = meta.prompt_token_ids;
  return Dump(body);
}

std::string UsageChunk(const ResponseMeta& meta, const Usage& usage) {
  json body = Envelope(meta, /*chunk=*/true);
  body["choices"] = json::array();
  body["usage"] = UsageJson(usage);
  return Dump(body);
}

std::string SseEvent(absl::string_view json_text) {
  std::string event = "data: ";
  event.append(json_text.data(), json_text.size());
  event += "\n\n";
  return event;
}

std::string ErrorType(int http_status) {
  switch (http_status) {
    case 400:
    case 413:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 429:
      return "rate_limit_error";
    case 503:
      return "service_unavailable_error";
    default:
      return http_status >= 500 ? "internal_server_error" : "invalid_request_error";
  }
}

std::string ErrorBody(int http_status, absl::string_view message, absl::string_view param) {
  const json error = {{"message", std::string(message)},
                      {"type", ErrorType(http_status)},
                      {"param", param.empty() ? json() : json(std::string(param))},
                      {"code", http_status}};
  return Dump(json{{"error", error}});
}

}  // namespace pagedkv::server
