// Copyright 2026 The pagedkv Authors.
//
// ToGenerationRequest: a checked OpenAI request (openai_request.h) turned into the Engine's
// GenerationRequest for the model being served: the prompt encoded (a chat through the model's
// chat template), max_tokens defaulted as vLLM does (up to the end of the context, here also of
// the KV pool), the sampling settings, and vLLM's extensions (ignore_eos, stop_token_ids,
// cache_salt, priority). What the engine checks itself (ids in the vocabulary, prompt +
// max_tokens within the context and the pool) is left to Engine::AddRequest.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(GenerationRequest g, ToGenerationRequest(api, model));
//
// Thread-safe: the model's tokenizer is immutable.
#ifndef PAGEDKV_ENGINE_SERVE_HTTP_GENERATION_REQUEST_H_
#define PAGEDKV_ENGINE_SERVE_HTTP_GENERATION_REQUEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/serve/http/openai_request.h"
#include "pagedkv/model/tokenizer.h"
#include "pagedkv/runtime/engine.h"

namespace pagedkv::server {

// What the server knows of the model it serves.
struct ServedModel {
  std::string name;                      // the "model" clients send (/v1/models)
  const Tokenizer* tokenizer = nullptr;  // not owned
  std::string chat_template;             // empty: chat completions are refused
  int64_t context_length = 0;            // positions [0, context_length) may run
  int32_t vocab_size = 0;                // logit_bias token ids must be below it (0: unchecked)
  int64_t pool_tokens = 0;               // KV pool capacity in tokens (blocks * block size)
  bool priority_scheduling = false;      // priority != 0 is refused otherwise (as vLLM does)
};

// The prompt's token ids: the text encoded (BOS first, as `pagedkv generate` encodes it), the ids
// as sent, or the chat rendered by the chat template and encoded. InvalidArgument naming the
// field ("messages" when the model has no supported chat template).
absl::StatusOr<std::vector<TokenId>> PromptTokens(const ApiRequest& api, const ServedModel& model);

// The engine request for `api`. InvalidArgument naming the field.
absl::StatusOr<GenerationRequest> ToGenerationRequest(const ApiRequest& api,
                                                      const ServedModel& model);

}  // namespace pagedkv::server

#endif  // PAGEDKV_ENGINE_SERVE_HTTP_GENERATION_REQUEST_H_
