// Copyright 2026 The pagedkv Authors.
//
// Scheduler: request checks and lifecycle. AddRequest validates a request (prompt, budget, fit in
// the model and the pool, marked chunks) before it is queued; SetDraftTokens checks drafts; Finish
// and AbortRequest end a request; GetRequestInfo reports one.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/runtime/scheduler/scheduler_impl.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {

namespace {

// The prompt is non-empty with non-negative tokens, and at least one token is asked for.
absl::Status CheckPromptAndBudget(const SchedulerRequest& request) {
  if (request.prompt.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("request ", request.id, " has an empty prompt; give at least one token"));
  }
  for (size_t i = 0; i < request.prompt.size(); ++i) {
    if (request.prompt[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("request ", request.id, ": prompt token ", i,
                                                     " is negative (", request.prompt[i], ")"));
    }
  }
  if (request.max_new_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request ", request.id, ": max_new_tokens must be >= 1, got ", request.max_new_tokens));
  }
  return absl::OkStatus();
}

// The request's longest sequence fits the model, the pool and, without chunked prefill, one
// step's token budget.
absl::Status CheckFits(const SchedulerRequest& request, const SchedulerOptions& options,
                       const KvCacheManager& cache) {
  const int64_t prompt_len = static_cast<int64_t>(request.prompt.size());
  const int64_t max_len = prompt_len + request.max_new_tokens;
  if (options.max_model_len > 0 && max_len > options.max_model_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("request ", request.id, ": prompt (", prompt_len, ") + max_new_tokens (",
                     request.max_new_tokens, ") exceeds max_model_len ", options.max_model_len));
  }
  // The last sampled token is never computed, so KV holds at most max_len - 1 tokens.
  int64_t max_chunk = max_len - 1;
  if (options.enable_chunked_prefill) {
    max_chunk = std::min<int64_t>(max_chunk, options.max_num_batched_tokens);
    if (options.long_prefill_token_threshold > 0) {
      max_chunk = std::min<int64_t>(max_chunk, options.long_prefill_token_threshold);
    }
  }
  const int64_t max_blocks = cache.PeakBlocksFor(max_len - 1, max_chunk);
  if (max_blocks > cache.num_blocks()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request ", request.id, ": prompt (", prompt_len, ") + max_new_tokens (",
        request.max_new_tokens, ") needs up to ", max_blocks, " KV blocks but the pool has only ",
        cache.num_blocks(), "; shorten it or enlarge the pool"));
  }
  if (!options.enable_chunked_prefill && max_len - 1 > options.max_num_batched_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request ", request.id, ": prompt (", prompt_len, ") + max_new_tokens (",
        request.max_new_tokens, ") - 1 exceeds max_num_batched_tokens ",
        options.max_num_batched_tokens,
        " and chunked prefill is off, so it could never be (re)admitted; enable chunked prefill "
        "or raise the budget"));
  }
  return absl::OkStatus();
}

// Marked chunks are non-empty, inside the prompt, sorted and disjoint.
absl::Status CheckChunks(const SchedulerRequest& request) {
  const int64_t prompt_len = static_cast<int64_t>(request.prompt.size());
  int64_t chunk_end = 0;
  for (size_t i = 0; i < request.chunks.size(); ++i) {
    const PromptChunk& c = request.chunks[i];
    if (c.offset < chunk_end || c.length < 1 ||
        static_cast<int64_t>(c.offset) + c.length > prompt_len) {
      return absl::InvalidArgumentError(absl::StrCat(
          "request ", request.id, ": chunk ", i, " (offset ", c.offset, ", length ", c.length,
          ") must have length >= 1, lie inside the prompt of ", prompt_len,
          " tokens, and start at or after the previous chunk's end (", chunk_end, ")"));
    }
    chunk_end = static_cast<int64_t>(c.offset) + c.length;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Scheduler::Impl::AddRequest(SchedulerRequest request) {
  if (requests_.contains(request.id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("request ", request.id,
                     " is already queued or running; ids must be unique among "
                     "unfinished requests"));
  }
  PAGEDKV_RETURN_IF_ERROR(CheckPromptAndBudget(request));
  PAGEDKV_RETURN_IF_ERROR(CheckFits(request, options_, cache_));
  PAGEDKV_RETURN_IF_ERROR(CheckChunks(request));
  RequestCacheKeys keys;
  keys.cache_salt = request.cache_salt;
  keys.adapter_id = request.adapter_id;
  keys.multimodal = request.multimodal;
  keys.priority = request.cache_priority;
  keys.priority_spans = request.cache_priority_spans;
  PAGEDKV_ASSIGN_OR_RETURN(CacheRequest cache_request,
                           cache_.NewRequest(request.id, request.prompt, keys));

  auto state = std::make_unique<RequestState>(std::move(cache_request), request);
  RequestState* raw = state.get();
  requests_.emplace(request.id, std::move(state));
  waiting_.PushBack(raw, raw->priority, raw->arrival_time);
  raw->rank = raw->waiting_key;
  return absl::OkStatus();
}

absl::Status Scheduler::Impl::Finish(RequestState* request, FinishReason reason) {
  if (request->status == RequestStatus::kRunning) {
    if (cache_.HasRequest(request->id)) PAGEDKV_RETURN_IF_ERROR(cache_.Free(request->id));
    RemoveFromRunning(request);
  } else {
    waiting_.Erase(request);
  }
  if (request->awaiting_sample) --num_awaiting_samples_;
  if (reason == FinishReason::kAborted) {
    ++stats_.num_aborted;
  } else {
    ++stats_.num_finished;
  }
  pending_finished_.push_back(request->id);
  requests_.erase(request->id);
  return absl::OkStatus();
}

absl::Status Scheduler::Impl::AbortRequest(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) {
    return absl::NotFoundError(
        absl::StrCat("AbortRequest: unknown request ", id, " (never added, finished or aborted)"));
  }
  return Finish(it->second.get(), FinishReason::kAborted);
}

absl::Status Scheduler::Impl::SetDraftTokens(RequestId id, std::span<const TokenId> draft_tokens) {
  auto it = requests_.find(id);
  if (it == requests_.end()) {
    return absl::NotFoundError(absl::StrCat("SetDraftTokens: unknown request ", id,
                                            " (never added, finished or aborted)"));
  }
  RequestState& r = *it->second;
  if (r.status != RequestStatus::kRunning || r.awaiting_sample ||
      r.num_computed_tokens != r.num_tokens() - 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "SetDraftTokens: request ", id,
        " is not decoding (waiting, still in prefill, or its sampled token is not fed back yet); "
        "propose drafts after UpdateFromOutput for a running request"));
  }
  const int32_t vocab = r.cache.vocab_size();
  for (size_t i = 0; i < draft_tokens.size(); ++i) {
    if (draft_tokens[i] < 0 || (vocab > 0 && draft_tokens[i] >= vocab)) {
      return absl::InvalidArgumentError(absl::StrCat("SetDraftTokens: draft token ", i, " (",
                                                     draft_tokens[i], ") of request ", id,
                                                     " is outside the vocabulary"));
    }
  }
  r.draft_tokens.assign(draft_tokens.begin(), draft_tokens.end());
  return absl::OkStatus();
}

absl::StatusOr<RequestInfo> Scheduler::Impl::GetRequestInfo(RequestId id) const {
  auto it = requests_.find(id);
  if (it == requests_.end()) {
    return absl::NotFoundError(absl::StrCat("GetRequestInfo: unknown request ", id,
                                            " (never added, finished or aborted)"));
  }
  const RequestState& r = *it->second;
  RequestInfo info;
  info.id = r.id;
  info.status = r.status;
  info.num_prompt_tokens = r.num_prompt_tokens;
  info.num_output_tokens = r.num_output_tokens();
  info.num_computed_tokens = r.num_computed_tokens;
  info.num_prefix_hit_tokens = r.num_prefix_hit_tokens;
  info.num_preemptions = r.num_preemptions;
  return info;
}

}  // namespace pagedkv
