// Copyright 2026 The pagedkv Authors.
//
// ToGenerationRequest (see generation_request.h).
#include "engine/serve/http/generation_request.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "pagedkv/model/chat_template.h"
#include "pagedkv/status_macros.h"

namespace pagedkv::server {
namespace {

// A fresh seed for a request that sent none (vLLM samples such requests at random too).
uint64_t RandomSeed() {
  static std::atomic<uint64_t> counter{std::random_device{}()};
  return counter.fetch_add(0x9E3779B97F4A7C15ull);
}

// What parsing could not check without the model: logit_bias ids in the vocabulary (vLLM's
// "token_id(s) ... in logit_bias contain out-of-vocab token ids") and min_tokens <= the tokens
// the request may generate.
absl::Status CheckAgainstModel(const ApiRequest& api, const ServedModel& model,
                               int32_t max_new_tokens) {
  for (const auto& [token, bias] : api.logit_bias) {
    if (model.vocab_size > 0 && token >= model.vocab_size) {
      return FieldError("logit_bias",
                        absl::StrCat("has token id ", token, ", outside the vocabulary (size ",
                                     model.vocab_size, ")"));
    }
  }
  if (api.min_tokens > max_new_tokens) {
    return FieldError("min_tokens", absl::StrCat("must be <= max_tokens (", max_new_tokens,
                                                 " here), got ", api.min_tokens));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<TokenId>> PromptTokens(const ApiRequest& api, const ServedModel& model) {
  if (api.endpoint == ApiEndpoint::kCompletions && api.prompt_is_tokens) return api.prompt_tokens;
  if (model.tokenizer == nullptr) {
    return FieldError("prompt", "must be token ids: the model has no tokenizer");
  }
  std::string text = api.prompt_text;
  if (api.endpoint == ApiEndpoint::kChatCompletions) {
    absl::StatusOr<std::string> chat = FormatChatMessages(model.chat_template, api.messages);
    if (!chat.ok()) return FieldError("messages", chat.status().message());
    text = std::move(*chat);
  }
  absl::StatusOr<std::vector<TokenId>> ids = model.tokenizer->Encode(text);
  if (!ids.ok()) return FieldError("prompt", ids.status().message());
  return ids;
}

absl::StatusOr<GenerationRequest> ToGenerationRequest(const ApiRequest& api,
                                                      const ServedModel& model) {
  if (api.priority != 0 && !model.priority_scheduling) {
    return FieldError("priority",
                      "must be 0: the server schedules first come, first served (start it "
                      "with --scheduling-policy priority)");
  }
  GenerationRequest g;
  PAGEDKV_ASSIGN_OR_RETURN(g.prompt_tokens, PromptTokens(api, model));
  if (g.prompt_tokens.empty()) return FieldError("prompt", "encodes to no token; send some text");
  const int64_t prompt = static_cast<int64_t>(g.prompt_tokens.size());
  // Up to the end of the context and of the pool: the last sampled token needs no position.
  const int64_t room = std::min(model.context_length, model.pool_tokens) + 1 - prompt;
  g.max_new_tokens =
      api.max_tokens.value_or(static_cast<int32_t>(std::clamp<int64_t>(room, 1, INT32_MAX)));
  // max_tokens 0 (echo only): one token is generated, and the response leaves it out.
  g.max_new_tokens = std::max(g.max_new_tokens, 1);
  PAGEDKV_RETURN_IF_ERROR(CheckAgainstModel(api, model, g.max_new_tokens));
  g.sampling = {.temperature = api.temperature,
                .top_p = api.top_p,
                .seed = api.seed.has_value() ? static_cast<uint64_t>(*api.seed) : RandomSeed(),
                .logprobs = api.logprobs,
                .prompt_logprobs = std::max(api.prompt_logprobs, api.echo ? api.logprobs : -1),
                .top_k = api.top_k,
                .min_p = api.min_p,
                .repetition_penalty = api.repetition_penalty,
                .presence_penalty = api.presence_penalty,
                .frequency_penalty = api.frequency_penalty,
                .min_tokens = api.min_tokens};
  g.stop_at_eos = !api.ignore_eos;
  g.stop_tokens = api.stop_token_ids;
  g.logit_bias = api.logit_bias;
  g.cache_salt = api.cache_salt;
  g.priority = api.priority;
  return g;
}

}  // namespace pagedkv::server
