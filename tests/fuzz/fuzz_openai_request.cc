// Copyright 2026 The pagedkv Authors.
//
// Fuzz target: the bodies `pagedkv serve` parses (engine/serve/http/openai_request.h). The first
// byte picks the parser (completions, chat, tokenize, detokenize), the rest is the body. A body
// that parses must give values inside the documented ranges, and the response bodies built from it
// must be valid JSON (text is replaced, never thrown on, when not UTF-8).
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "engine/serve/http/openai_request.h"
#include "engine/serve/http/openai_response.h"
#include "nlohmann/json.hpp"

namespace {

using pagedkv::server::ApiEndpoint;
using pagedkv::server::ApiRequest;

void Check(bool ok) {
  if (!ok) std::abort();
}

void CheckRanges(const ApiRequest& r) {
  Check(!r.max_tokens.has_value() || *r.max_tokens >= 1);
  Check(r.temperature >= 0.0f && r.temperature <= 2.0f);
  Check(r.top_p > 0.0f && r.top_p <= 1.0f);
  for (const std::string& s : r.stop) Check(!s.empty() && s.size() <= 256);
  Check(r.stop.size() <= 16);
  for (pagedkv::TokenId id : r.prompt_tokens) Check(id >= 0);
  Check(r.endpoint != ApiEndpoint::kChatCompletions || !r.messages.empty());
  Check(!r.prompt_is_tokens || !r.prompt_tokens.empty());
}

void CheckResponses(const ApiRequest& r) {
  const pagedkv::server::ResponseMeta meta = {.id = "cmpl-fuzz",
                                              .model = r.model,
                                              .endpoint = r.endpoint,
                                              .return_token_ids = r.return_token_ids,
                                              .prompt_token_ids = r.prompt_tokens};
  const pagedkv::server::ChoiceDelta choice = {
      .text = r.prompt_text + (r.stop.empty() ? std::string() : r.stop[0]),
      .token_ids = r.stop_token_ids,
      .finish_reason = "stop",
      .stop_string = r.stop.empty() ? std::optional<std::string>() : r.stop[0]};
  for (const std::string& body : {pagedkv::server::CompletionBody(meta, choice, {}),
                                  pagedkv::server::StreamChunk(meta, choice),
                                  pagedkv::server::ErrorBody(400, r.prompt_text, r.model)}) {
    Check(nlohmann::json::accept(body));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
    case 1: {
      const ApiEndpoint endpoint =
          data[0] % 4 == 0 ? ApiEndpoint::kCompletions : ApiEndpoint::kChatCompletions;
      absl::StatusOr<ApiRequest> r = pagedkv::server::ParseApiRequest(body, endpoint);
      if (!r.ok()) {
        Check(r.status().code() == absl::StatusCode::kInvalidArgument);
        Check(nlohmann::json::accept(pagedkv::server::ErrorBody(
            400, r.status().message(), pagedkv::server::ErrorParam(r.status()))));
        return 0;
      }
      CheckRanges(*r);
      CheckResponses(*r);
      return 0;
    }
    case 2:
      Check(pagedkv::server::ParseTokenizeRequest(body).ok() ||
            !pagedkv::server::ParseTokenizeRequest(body).status().message().empty());
      return 0;
    default:
      Check(pagedkv::server::ParseDetokenizeRequest(body).ok() ||
            !pagedkv::server::ParseDetokenizeRequest(body).status().message().empty());
      return 0;
  }
}
