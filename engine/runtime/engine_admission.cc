// Copyright 2026 The pagedkv Authors.
//
// Engine admission: requests in (AddRequest: the prompt, its checks, the scheduler request and the
// engine's record), AbortRequest, and the accounting when the scheduler admits a request
// (RecordAdmission: prefix hits by tier, re-admissions, reused chunks).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/runtime/context_limit.h"
#include "engine/runtime/engine_internal.h"
#include "engine/runtime/engine_request.h"
#include "engine/runtime/logit_edit_builder.h"
#include "pagedkv/runtime/engine.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {

namespace {

// The request's tokens: prompt_tokens, else the encoded prompt_text, else BOS alone.
absl::StatusOr<std::vector<TokenId>> PromptOf(GenerationRequest& request,
                                              const Tokenizer* tokenizer, TokenId bos) {
  if (!request.prompt_tokens.empty()) return std::move(request.prompt_tokens);
  if (request.prompt_text.empty()) return std::vector<TokenId>{bos};
  if (tokenizer == nullptr) {
    return absl::InvalidArgumentError(
        "AddRequest: a text prompt needs an engine with a tokenizer; pass prompt_tokens or "
        "create the engine with one");
  }
  return tokenizer->Encode(request.prompt_text);
}

// vLLM's sampling fields (SamplingOptions::top_k ... min_tokens) in vLLM's ranges
// (vllm/sampling_params.py _verify_args), GenerationRequest::logit_bias's tokens in the vocabulary
// and distinct.
absl::Status CheckVllmSampling(const SamplingOptions& s, internal::LogitBias logit_bias,
                               int32_t max_new_tokens, int32_t vocab_size) {
  auto error = [](absl::string_view field, auto value, absl::string_view range) {
    return absl::InvalidArgumentError(
        absl::StrCat("AddRequest: sampling.", field, " must be ", range, ", got ", value));
  };
  if (s.top_k < -1) return error("top_k", s.top_k, "0 or -1 (off) or >= 1");
  if (!(s.min_p >= 0.0f && s.min_p <= 1.0f)) return error("min_p", s.min_p, "in [0, 1]");
  if (!(s.repetition_penalty > 0.0f) || !std::isfinite(s.repetition_penalty)) {
    return error("repetition_penalty", s.repetition_penalty, "finite and > 0");
  }
  if (!(std::abs(s.presence_penalty) <= 2.0f)) {
    return error("presence_penalty", s.presence_penalty, "in [-2, 2]");
  }
  if (!(std::abs(s.frequency_penalty) <= 2.0f)) {
    return error("frequency_penalty", s.frequency_penalty, "in [-2, 2]");
  }
  if (s.min_tokens < 0 || s.min_tokens > max_new_tokens) {
    return error("min_tokens", s.min_tokens,
                 absl::StrCat("in [0, max_new_tokens = ", max_new_tokens, "]"));
  }
  std::vector<TokenId> tokens;
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0 || token >= vocab_size || !std::isfinite(bias)) {
      return error("logit_bias", absl::StrCat(token, ": ", bias),
                   absl::StrCat("token ids in [0, ", vocab_size, ") with finite biases"));
    }
    tokens.push_back(token);
  }
  std::sort(tokens.begin(), tokens.end());
  if (std::adjacent_find(tokens.begin(), tokens.end()) != tokens.end()) {
    return error("logit_bias", *std::adjacent_find(tokens.begin(), tokens.end()),
                 "one entry per token id");
  }
  return absl::OkStatus();
}

// max_new_tokens, the sampling options and the prompt's tokens are in range.
absl::Status CheckGenerationRequest(const GenerationRequest& request,
                                    const std::vector<TokenId>& prompt, int32_t vocab_size) {
  if (request.max_new_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("AddRequest: max_new_tokens must be >= 1, got ", request.max_new_tokens));
  }
  const SamplingOptions& s = request.sampling;
  if (!std::isfinite(s.temperature) || !(s.top_p > 0.0f && s.top_p <= 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AddRequest: sampling needs a finite temperature and top_p in (0, 1], got "
                     "temperature ",
                     s.temperature, ", top_p ", s.top_p));
  }
  for (const auto& [name, value] :
       {std::pair{"logprobs", s.logprobs}, std::pair{"prompt_logprobs", s.prompt_logprobs}}) {
    if (value < -1 || value > SamplingOptions::kMaxLogprobs) {
      return absl::InvalidArgumentError(
          absl::StrCat("AddRequest: sampling.", name, " must be -1 (none) or in [0, ",
                       SamplingOptions::kMaxLogprobs, "], got ", value));
    }
  }
  PAGEDKV_RETURN_IF_ERROR(
      CheckVllmSampling(s, request.logit_bias, request.max_new_tokens, vocab_size));
  if (s.prompt_logprobs >= 0 && !request.chunks.empty()) {
    return absl::InvalidArgumentError(
        "AddRequest: sampling.prompt_logprobs needs the whole prompt computed in place; drop "
        "the chunks (shifted reuse) or the prompt logprobs");
  }
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("AddRequest: prompt token ", i, " (",
                                                     prompt[i], ") is outside the vocabulary [0, ",
                                                     vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RequestId> Engine::AddRequest(GenerationRequest request) {
  const ModelConfig& c = config();
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<TokenId> prompt,
                           PromptOf(request, tokenizer_.get(), c.bos_token_id));
  PAGEDKV_RETURN_IF_ERROR(CheckGenerationRequest(request, prompt, c.vocab_size));
  PAGEDKV_RETURN_IF_ERROR(CheckContext(prompt.size(), request.max_new_tokens, internals_->context,
                                       options_.allow_context_overrun));
  PAGEDKV_ASSIGN_OR_RETURN(const RequestId prompt_source, PromptSourceOf(request, prompt));
  const RequestId id = next_id_;
  SchedulerRequest sr;
  sr.id = id;
  sr.prompt_source = prompt_source;
  sr.prompt = prompt;
  sr.max_new_tokens = request.max_new_tokens;
  sr.priority = request.priority;
  sr.cache_salt = request.cache_salt;
  sr.cache_priority = request.cache_priority;
  sr.cache_priority_spans = request.cache_priority_spans;
  sr.stop_tokens = std::move(request.stop_tokens);
  sr.chunks = request.chunks;
  sr.skip_prefix_cache_lookup = request.sampling.prompt_logprobs >= 0;
  if (request.stop_at_eos) {
    for (TokenId stop : c.stop_token_ids) sr.stop_tokens.push_back(stop);
  }
  sr.min_new_tokens = request.sampling.min_tokens;
  auto record = std::make_unique<RequestRecord>();
  if (request.sampling.min_tokens > 0)
    record->stop_tokens = internal::DistinctTokens(sr.stop_tokens);
  if (request.sampling.repetition_penalty != 1.0f) {
    record->prompt_set = internal::DistinctTokens(prompt);
  }
  PAGEDKV_RETURN_IF_ERROR(scheduler_->AddRequest(std::move(sr)));
  record->context = prompt;
  record->prompt = std::move(prompt);
  record->sampling = request.sampling;
  record->logit_bias = std::move(request.logit_bias);
  record->cache_salt = std::move(request.cache_salt);
  record->chunks = std::move(request.chunks);
  record->chunk_reused.assign(record->chunks.size(), 0);
  record->added = std::chrono::steady_clock::now();
  requests_.emplace(id, std::move(record));
  if (internals_->tiers != nullptr) internals_->onboard_queue.push_back(id);
  ++next_id_;
  ++stats_.num_requests;
  return id;
}

absl::StatusOr<RequestId> Engine::PromptSourceOf(const GenerationRequest& request,
                                                 std::span<const TokenId> prompt) const {
  if (request.prompt_source == 0) return 0;
  const auto it = requests_.find(request.prompt_source);
  if (it == requests_.end()) return 0;  // finished: its full blocks may still be cached
  const RequestRecord& source = *it->second;
  if (!std::equal(prompt.begin(), prompt.end(), source.prompt.begin(), source.prompt.end()) ||
      source.cache_salt != request.cache_salt) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AddRequest: prompt_source ", request.prompt_source,
        " has another prompt or cache salt; a prompt source must be a sample of the same prompt"));
  }
  return request.prompt_source;
}

absl::Status Engine::AbortRequest(RequestId id) {
  if (!requests_.contains(id)) {
    return absl::NotFoundError(
        absl::StrCat("AbortRequest: unknown request ", id, " (never added, or already finished)"));
  }
  return scheduler_->AbortRequest(id);
}

void Engine::RecordAdmission(const ScheduledSequence& s, RequestRecord& record) {
  if (s.newly_admitted) {
    const TierHitTokens tier =
        AttributeTierHits(s.num_prefix_hit_tokens, options_.block_size, record.block_sources);
    if (record.num_admissions == 0) {
      record.num_prefix_hit_tokens = s.num_prefix_hit_tokens;
      record.num_host_hit_tokens = tier.host;
      record.num_remote_hit_tokens = tier.remote;
      record.num_disk_hit_tokens = tier.disk;
      stats_.num_prompt_tokens += static_cast<int64_t>(record.prompt.size());
      stats_.num_prefix_hit_tokens += s.num_prefix_hit_tokens;
      stats_.num_host_hit_tokens += tier.host;
      stats_.num_remote_hit_tokens += tier.remote;
      stats_.num_disk_hit_tokens += tier.disk;
    } else {
      record.num_readmission_hit_tokens += s.num_prefix_hit_tokens;
      record.num_readmission_host_hit_tokens += tier.host;
      record.num_readmission_remote_hit_tokens += tier.remote;
      record.num_readmission_disk_hit_tokens += tier.disk;
      ++stats_.num_readmissions;
      stats_.num_readmission_tokens += static_cast<int64_t>(record.context.size());
      stats_.num_readmission_hit_tokens += s.num_prefix_hit_tokens;
      stats_.num_readmission_host_hit_tokens += tier.host;
      stats_.num_readmission_remote_hit_tokens += tier.remote;
      stats_.num_readmission_disk_hit_tokens += tier.disk;
    }
    ++record.num_admissions;
    record.awaiting_admission = false;
    record.block_sources.clear();
    std::fill(record.chunk_reused.begin(), record.chunk_reused.end(), 0);
  }
  if (s.num_shifted_hit_tokens > 0) MarkReusedChunk(s, record);
  if (record.num_admissions == 1) {
    record.num_shifted_hit_tokens += s.num_shifted_hit_tokens;
    stats_.num_shifted_hit_tokens += s.num_shifted_hit_tokens;
  }
}

void Engine::MarkReusedChunk(const ScheduledSequence& s, RequestRecord& record) {
  // The reused tokens precede the step's tokens, or open them when they are blended.
  const int32_t first = s.num_blend_tokens > 0 ? s.num_computed_tokens
                                               : s.num_computed_tokens - s.num_shifted_hit_tokens;
  for (size_t c = 0; c < record.chunks.size(); ++c) {
    const PromptChunk& chunk = record.chunks[c];
    if (first >= chunk.offset && first < chunk.offset + chunk.length) record.chunk_reused[c] = 1;
  }
}

}  // namespace pagedkv
