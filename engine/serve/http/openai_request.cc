// Copyright 2026 The pagedkv Authors.
//
// ParseApiRequest and friends (see openai_request.h). nlohmann-json in its non-throwing uses only:
// parse with allow_exceptions = false, and every value's type checked before it is read.
#include "engine/serve/http/openai_request.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "pagedkv/runtime/generation.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::server {
namespace {

using nlohmann::json;

constexpr char kParamPayload[] = "pagedkv.dev/openai-param";

// The object's value under `key`; null when absent or JSON null.
const json* Field(const json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::StatusOr<json> ParseObject(absl::string_view body) {
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(
        "the request body is not valid JSON (UTF-8, one object); check the quoting");
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError("the request body must be a JSON object");
  }
  return j;
}

// An integer field's value as pydantic's lax mode reads vLLM's `int` fields: a JSON integer, or
// a number with no fractional part (40.0; clients written in JavaScript send those). 40.5 is
// refused naming the field, as are strings and booleans (which pydantic would also take).
absl::StatusOr<std::optional<int64_t>> OptionalInteger(const json& object, const char* key,
                                                       int64_t min, int64_t max) {
  const json* v = Field(object, key);
  if (v == nullptr) return std::nullopt;
  const std::string range = absl::StrCat("must be an integer in [", min, ", ", max, "]");
  if (v->is_number_float()) {
    const double x = v->get<double>();
    if (std::isfinite(x) && std::trunc(x) != x) {
      return FieldError(key, absl::StrCat("must be an integer, got ", v->dump(),
                                          " (a number with a fractional part)"));
    }
    // [-2^63, 2^63): the doubles that convert to int64_t exactly.
    if (!std::isfinite(x) || x < -0x1p63 || x >= 0x1p63) return FieldError(key, range);
    const auto integral = static_cast<int64_t>(x);
    if (integral < min || integral > max) return FieldError(key, range);
    return integral;
  }
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(max)) {
    return FieldError(key, range);
  }
  if (!v->is_number_integer() || v->get<int64_t>() < min || v->get<int64_t>() > max) {
    return FieldError(key, range);
  }
  return v->get<int64_t>();
}

absl::StatusOr<std::optional<double>> OptionalNumber(const json& object, const char* key,
                                                     double min, double max) {
  const json* v = Field(object, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < min ||
      v->get<double>() > max) {
    return FieldError(key, absl::StrCat("must be a number in [", min, ", ", max, "]"));
  }
  return v->get<double>();
}

absl::StatusOr<bool> OptionalBool(const json& object, const char* key, bool default_value) {
  const json* v = Field(object, key);
  if (v == nullptr) return default_value;
  if (!v->is_boolean()) return FieldError(key, "must be true or false");
  return v->get<bool>();
}

absl::StatusOr<std::string> OptionalString(const json& object, const char* key) {
  const json* v = Field(object, key);
  if (v == nullptr) return std::string();
  if (!v->is_string()) return FieldError(key, "must be a string");
  return v->get_ref<const std::string&>();
}

absl::StatusOr<std::vector<TokenId>> TokenList(const json& list, absl::string_view key) {
  std::vector<TokenId> ids;
  ids.reserve(list.size());
  for (const json& id : list) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > std::numeric_limits<TokenId>::max()) {
      return FieldError(key, "must hold token ids: integers >= 0");
    }
    ids.push_back(static_cast<TokenId>(id.get<int64_t>()));
  }
  return ids;
}

// "prompt": a string, token ids, or a one-element list of either.
absl::Status ReadPrompt(const json& object, ApiRequest* r) {
  const json* p = Field(object, "prompt");
  if (p == nullptr) return FieldError("prompt", "is required");
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) {
    p = &(*p)[0];
  }
  if (p->is_string()) {
    r->prompt_text = p->get_ref<const std::string&>();
    return absl::OkStatus();
  }
  if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
    PAGEDKV_ASSIGN_OR_RETURN(r->prompt_tokens, TokenList(*p, "prompt"));
    r->prompt_is_tokens = true;
    return absl::OkStatus();
  }
  if (p->is_array() && p->size() > 1) {
    return FieldError("prompt", "holds several prompts; send one request per prompt");
  }
  return FieldError("prompt", "must be a string or a non-empty list of token ids");
}

// A message's content: a string, or a list of {"type": "text", "text": ...} parts (joined).
absl::StatusOr<std::string> MessageContent(const json& message) {
  const json* c = Field(message, "content");
  if (c == nullptr) return std::string();
  if (c->is_string()) return c->get_ref<const std::string&>();
  if (!c->is_array()) return FieldError("messages", "content must be a string or a list of parts");
  std::string text;
  for (const json& part : *c) {
    const json* type = part.is_object() ? Field(part, "type") : nullptr;
    const json* t = part.is_object() ? Field(part, "text") : nullptr;
    if (type == nullptr || !type->is_string() || *type != "text" || t == nullptr ||
        !t->is_string()) {
      return FieldError("messages", "content parts must be {\"type\": \"text\", \"text\": ...}");
    }
    text += t->get_ref<const std::string&>();
  }
  return text;
}

absl::StatusOr<std::vector<ChatMessage>> ReadMessages(const json& object) {
  const json* m = Field(object, "messages");
  if (m == nullptr || !m->is_array() || m->empty()) {
    return FieldError("messages", "must be a non-empty list of {\"role\", \"content\"}");
  }
  std::vector<ChatMessage> messages;
  for (const json& message : *m) {
    const json* role = message.is_object() ? Field(message, "role") : nullptr;
    if (role == nullptr || !role->is_string()) {
      return FieldError("messages", "each message needs a string \"role\"");
    }
    PAGEDKV_ASSIGN_OR_RETURN(std::string content, MessageContent(message));
    messages.push_back({.role = role->get<std::string>(), .content = std::move(content)});
  }
  return messages;
}

absl::Status ReadStop(const json& object, const ApiLimits& limits, ApiRequest* r) {
  const json* s = Field(object, "stop");
  if (s == nullptr) return absl::OkStatus();
  std::vector<const json*> items;
  if (s->is_string()) {
    items.push_back(s);
  } else if (s->is_array()) {
    for (const json& item : *s) items.push_back(&item);
  } else {
    return FieldError("stop", "must be a string or a list of strings");
  }
  if (static_cast<int64_t>(items.size()) > limits.max_stop_strings) {
    return FieldError("stop", absl::StrCat("has more than ", limits.max_stop_strings, " strings"));
  }
  for (const json* item : items) {
    if (!item->is_string() || item->get_ref<const std::string&>().empty() ||
        static_cast<int64_t>(item->get_ref<const std::string&>().size()) >
            limits.max_stop_string_bytes) {
      return FieldError("stop", absl::StrCat("entries must be non-empty strings of at most ",
                                             limits.max_stop_string_bytes, " bytes"));
    }
    r->stop.push_back(item->get<std::string>());
  }
  return absl::OkStatus();
}

// A sampling field vLLM's OpenAI server accepts and pagedkv does not implement, with the values
// that leave the output unchanged (its "off" values).
struct OffField {
  const char* name;
  bool (*is_off)(const json& value);
};

bool IsFalse(const json& v) { return v.is_boolean() && !v.get<bool>(); }
bool IsEmpty(const json& v) { return (v.is_object() || v.is_array()) && v.empty(); }
bool IsTextFormat(const json& v) {
  return v.is_object() && v.size() == 1 && v.value("type", json()) == json("text");
}

// Fields that change the tokens or the text vLLM returns. A value other than "off" is refused
// naming the field, never ignored (JSON null counts as absent).
constexpr OffField kUnimplementedFields[] = {
    {"bad_words", IsEmpty},
    {"allowed_token_ids", IsEmpty},
    {"response_format", IsTextFormat},
    {"guided_json", IsEmpty},
    {"guided_regex", IsEmpty},
    {"guided_choice", IsEmpty},
    {"guided_grammar", IsEmpty},
    {"structured_outputs", IsEmpty},
    {"use_beam_search", IsFalse},
    {"include_stop_str_in_output", IsFalse},
    {"truncate_prompt_tokens", IsEmpty},
};

absl::Status RefuseActiveSamplingFields(const json& object) {
  for (const OffField& f : kUnimplementedFields) {
    const json* v = Field(object, f.name);
    if (v != nullptr && !f.is_off(*v)) {
      std::string shown = v->dump();
      if (shown.size() > 40) shown = shown.substr(0, 37) + "...";
      return FieldError(f.name, absl::StrCat("is not supported: pagedkv serve would ignore ", shown,
                                             "; drop the field or send its off value "
                                             "(docs/serve.md lists them)"));
    }
  }
  return absl::OkStatus();
}

// Known fields pagedkv does not implement: refused unless at their "off" value.
absl::Status RefuseUnsupported(const json& object, ApiEndpoint endpoint) {
  PAGEDKV_RETURN_IF_ERROR(RefuseActiveSamplingFields(object));
  if (endpoint == ApiEndpoint::kChatCompletions) {
    const json* tools = Field(object, "tools");
    if (tools != nullptr && !(tools->is_array() && tools->empty())) {
      return FieldError("tools", "are not supported");
    }
  }
  return absl::OkStatus();
}

absl::Status ReadSampling(const json& object, ApiRequest* r) {
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<double> temperature,
                           OptionalNumber(object, "temperature", 0.0, 2.0));
  if (temperature.has_value()) r->temperature = static_cast<float>(*temperature);
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<double> top_p, OptionalNumber(object, "top_p", 0.0, 1.0));
  if (top_p.has_value()) {
    if (*top_p <= 0.0) return FieldError("top_p", "must be in (0, 1]");
    r->top_p = static_cast<float>(*top_p);
  }
  PAGEDKV_ASSIGN_OR_RETURN(r->seed,
                           OptionalInteger(object, "seed", std::numeric_limits<int64_t>::min(),
                                           std::numeric_limits<int64_t>::max()));
  return absl::OkStatus();
}

// logit_bias: {"token id": bias}, ids as decimal strings (vLLM's int(key)), biases clamped to
// [-100, 100] as vLLM clamps them. The ids are checked against the vocabulary later
// (ToGenerationRequest).
absl::Status ReadLogitBias(const json& object, ApiRequest* r) {
  const json* bias = Field(object, "logit_bias");
  if (bias == nullptr) return absl::OkStatus();
  if (!bias->is_object()) return FieldError("logit_bias", "must be an object {\"token id\": bias}");
  for (const auto& [key, value] : bias->items()) {
    int64_t id = 0;
    const bool digits = !key.empty() && key.size() <= 10 &&
                        key.find_first_not_of("0123456789") == std::string::npos;
    if (digits) id = std::stoll(key);
    if (!digits || id > std::numeric_limits<TokenId>::max()) {
      return FieldError("logit_bias", absl::StrCat("keys must be token ids (\"42\"), got \"",
                                                   key.substr(0, 20), "\""));
    }
    if (!value.is_number() || !std::isfinite(value.get<double>())) {
      return FieldError("logit_bias", absl::StrCat("values must be numbers, got ",
                                                   value.dump().substr(0, 20), " for ", key));
    }
    r->logit_bias.emplace_back(static_cast<TokenId>(id),
                               static_cast<float>(std::clamp(value.get<double>(), -100.0, 100.0)));
  }
  return absl::OkStatus();
}

// vLLM's sampling fields in its ranges (vllm/sampling_params.py _verify_args): top_k -1, 0 or
// >= 1; min_p [0, 1]; repetition_penalty > 0; presence and frequency [-2, 2]; min_tokens >= 0 and
// <= max_tokens; logit_bias as above.
absl::Status ReadVllmSampling(const json& object, ApiRequest* r) {
  constexpr int64_t kMaxInt = std::numeric_limits<int32_t>::max();
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<int64_t> top_k,
                           OptionalInteger(object, "top_k", -1, kMaxInt));
  r->top_k = static_cast<int32_t>(std::max<int64_t>(top_k.value_or(0), 0));
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<double> min_p, OptionalNumber(object, "min_p", 0.0, 1.0));
  r->min_p = static_cast<float>(min_p.value_or(0.0));
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<double> repetition,
                           OptionalNumber(object, "repetition_penalty", 0.0, 1e30));
  if (repetition.has_value() && *repetition <= 0.0) {
    return FieldError("repetition_penalty", "must be > 0 (1 is off)");
  }
  r->repetition_penalty = static_cast<float>(repetition.value_or(1.0));
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<double> presence,
                           OptionalNumber(object, "presence_penalty", -2.0, 2.0));
  r->presence_penalty = static_cast<float>(presence.value_or(0.0));
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<double> frequency,
                           OptionalNumber(object, "frequency_penalty", -2.0, 2.0));
  r->frequency_penalty = static_cast<float>(frequency.value_or(0.0));
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<int64_t> min_tokens,
                           OptionalInteger(object, "min_tokens", 0, kMaxInt));
  r->min_tokens = static_cast<int32_t>(min_tokens.value_or(0));
  if (r->max_tokens.has_value() && r->min_tokens > *r->max_tokens) {
    return FieldError("min_tokens", absl::StrCat("must be <= max_tokens (", *r->max_tokens,
                                                 "), got ", r->min_tokens));
  }
  return ReadLogitBias(object, r);
}

// n (1..limits.max_n) and best_of (absent or n: every sample is returned, none is ranked away).
absl::Status ReadChoiceCount(const json& object, const ApiLimits& limits, ApiRequest* r) {
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<int64_t> n, OptionalInteger(object, "n", 1, limits.max_n));
  r->n = static_cast<int32_t>(n.value_or(1));
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<int64_t> best_of,
                           OptionalInteger(object, "best_of", 1, limits.max_n));
  if (best_of.has_value() && *best_of != r->n) {
    return FieldError("best_of", "must equal n (pagedkv returns every sample; none is ranked)");
  }
  return absl::OkStatus();
}

// echo (completions) and vLLM's prompt_logprobs (0..20), streamed or not.
absl::Status ReadPromptLogprobs(const json& object, ApiRequest* r) {
  constexpr int64_t kMax = SamplingOptions::kMaxLogprobs;
  PAGEDKV_ASSIGN_OR_RETURN(r->echo, OptionalBool(object, "echo", false));
  if (r->echo && r->endpoint == ApiEndpoint::kChatCompletions) {
    return FieldError("echo", "is a completions field");
  }
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<int64_t> prompt,
                           OptionalInteger(object, "prompt_logprobs", 0, kMax));
  if (prompt.has_value()) r->prompt_logprobs = static_cast<int32_t>(*prompt);
  return absl::OkStatus();
}

// Completions: logprobs = the number of top tokens (0..20). Chat: logprobs = true, with
// top_logprobs (0..20) top tokens. Unset or false: none (-1).
absl::Status ReadLogprobs(const json& object, ApiRequest* r) {
  constexpr int64_t kMax = SamplingOptions::kMaxLogprobs;
  const json* logprobs = Field(object, "logprobs");
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<int64_t> top,
                           OptionalInteger(object, "top_logprobs", 0, kMax));
  if (r->endpoint == ApiEndpoint::kCompletions) {
    if (top.has_value() && *top != 0) {
      return FieldError("top_logprobs", "is a chat field; completions take logprobs: N");
    }
    if (logprobs != nullptr && logprobs->is_boolean() && !logprobs->get<bool>()) return {};
    PAGEDKV_ASSIGN_OR_RETURN(std::optional<int64_t> n,
                             OptionalInteger(object, "logprobs", 0, kMax));
    if (n.has_value()) r->logprobs = static_cast<int32_t>(*n);
    return absl::OkStatus();
  }
  PAGEDKV_ASSIGN_OR_RETURN(bool wanted, OptionalBool(object, "logprobs", false));
  if (top.value_or(0) > 0 && !wanted) {
    return FieldError("top_logprobs", "needs \"logprobs\": true");
  }
  if (wanted) r->logprobs = static_cast<int32_t>(top.value_or(0));
  return absl::OkStatus();
}

absl::Status ReadMaxTokens(const json& object, ApiRequest* r) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<int64_t> max_tokens,
                           OptionalInteger(object, "max_tokens", 0, kMax));
  if (max_tokens == 0 && !r->echo) {
    return FieldError("max_tokens", "must be >= 1 (0 only with echo: true)");
  }
  if (r->endpoint == ApiEndpoint::kChatCompletions) {
    PAGEDKV_ASSIGN_OR_RETURN(std::optional<int64_t> completion,
                             OptionalInteger(object, "max_completion_tokens", 1, kMax));
    if (completion.has_value()) max_tokens = completion;
  }
  if (max_tokens.has_value()) r->max_tokens = static_cast<int32_t>(*max_tokens);
  return absl::OkStatus();
}

absl::Status ReadStreamAndExtensions(const json& object, ApiRequest* r) {
  PAGEDKV_ASSIGN_OR_RETURN(r->stream, OptionalBool(object, "stream", false));
  const json* options = Field(object, "stream_options");
  if (options != nullptr) {
    if (!options->is_object()) return FieldError("stream_options", "must be an object");
    PAGEDKV_ASSIGN_OR_RETURN(r->include_usage, OptionalBool(*options, "include_usage", false));
  }
  PAGEDKV_ASSIGN_OR_RETURN(r->ignore_eos, OptionalBool(object, "ignore_eos", false));
  PAGEDKV_ASSIGN_OR_RETURN(r->return_token_ids, OptionalBool(object, "return_token_ids", false));
  PAGEDKV_ASSIGN_OR_RETURN(r->cache_salt, OptionalString(object, "cache_salt"));
  PAGEDKV_ASSIGN_OR_RETURN(std::optional<int64_t> priority,
                           OptionalInteger(object, "priority", std::numeric_limits<int32_t>::min(),
                                           std::numeric_limits<int32_t>::max()));
  r->priority = static_cast<int32_t>(priority.value_or(0));
  const json* stop_ids = Field(object, "stop_token_ids");
  if (stop_ids != nullptr) {
    if (!stop_ids->is_array()) return FieldError("stop_token_ids", "must be a list of token ids");
    PAGEDKV_ASSIGN_OR_RETURN(r->stop_token_ids, TokenList(*stop_ids, "stop_token_ids"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ApiRequest> ParseApiRequest(absl::string_view body, ApiEndpoint endpoint,
                                           const ApiLimits& limits) {
  PAGEDKV_ASSIGN_OR_RETURN(const json object, ParseObject(body));
  ApiRequest r;
  r.endpoint = endpoint;
  PAGEDKV_ASSIGN_OR_RETURN(r.model, OptionalString(object, "model"));
  if (endpoint == ApiEndpoint::kCompletions) {
    PAGEDKV_RETURN_IF_ERROR(ReadPrompt(object, &r));
  } else {
    PAGEDKV_ASSIGN_OR_RETURN(r.messages, ReadMessages(object));
  }
  PAGEDKV_RETURN_IF_ERROR(RefuseUnsupported(object, endpoint));
  PAGEDKV_RETURN_IF_ERROR(ReadChoiceCount(object, limits, &r));
  PAGEDKV_RETURN_IF_ERROR(ReadStreamAndExtensions(object, &r));
  PAGEDKV_RETURN_IF_ERROR(ReadPromptLogprobs(object, &r));
  PAGEDKV_RETURN_IF_ERROR(ReadMaxTokens(object, &r));
  PAGEDKV_RETURN_IF_ERROR(ReadSampling(object, &r));
  PAGEDKV_RETURN_IF_ERROR(ReadVllmSampling(object, &r));
  PAGEDKV_RETURN_IF_ERROR(ReadLogprobs(object, &r));
  PAGEDKV_RETURN_IF_ERROR(ReadStop(object, limits, &r));
  return r;
}

absl::StatusOr<TokenizeRequest> ParseTokenizeRequest(absl::string_view body) {
  PAGEDKV_ASSIGN_OR_RETURN(const json object, ParseObject(body));
  TokenizeRequest r;
  PAGEDKV_ASSIGN_OR_RETURN(r.model, OptionalString(object, "model"));
  PAGEDKV_ASSIGN_OR_RETURN(r.add_special_tokens, OptionalBool(object, "add_special_tokens", true));
  if (Field(object, "messages") != nullptr) {
    PAGEDKV_ASSIGN_OR_RETURN(r.messages, ReadMessages(object));
    return r;
  }
  const json* prompt = Field(object, "prompt");
  if (prompt == nullptr || !prompt->is_string()) {
    return FieldError("prompt", "must be a string (or send \"messages\")");
  }
  r.prompt = prompt->get<std::string>();
  return r;
}

absl::StatusOr<std::vector<TokenId>> ParseDetokenizeRequest(absl::string_view body) {
  PAGEDKV_ASSIGN_OR_RETURN(const json object, ParseObject(body));
  const json* tokens = Field(object, "tokens");
  if (tokens == nullptr || !tokens->is_array()) {
    return FieldError("tokens", "must be a list of token ids");
  }
  return TokenList(*tokens, "tokens");
}

absl::Status FieldError(absl::string_view field, absl::string_view message) {
  const std::string name(field);
  absl::Status status =
      absl::InvalidArgumentError(absl::StrCat("'", name, "' ", std::string(message)));
  status.SetPayload(kParamPayload, absl::Cord(name));
  return status;
}

std::string ErrorParam(const absl::Status& status) {
  const auto param = status.GetPayload(kParamPayload);
  return param.has_value() ? std::string(*param) : std::string();
}

}  // namespace pagedkv::server
