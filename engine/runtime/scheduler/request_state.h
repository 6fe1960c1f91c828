// Copyright 2026 The pagedkv Authors.
//
// The scheduler's per-request state: the cache-side CacheRequest (all tokens so far and their
// incremental block hashes), the sampling limits, and where the request stands (waiting or
// running, tokens computed in the current admission).
//
// Example:
//   internal::RequestState state(std::move(cache_request), request);
//   state.num_tokens();  // prompt + outputs so far
#ifndef PAGEDKV_ENGINE_RUNTIME_SCHEDULER_REQUEST_STATE_H_
#define PAGEDKV_ENGINE_RUNTIME_SCHEDULER_REQUEST_STATE_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/runtime/scheduler/waiting_queue.h"
#include "pagedkv/cache/cache_request.h"
#include "pagedkv/export.h"
#include "pagedkv/runtime/scheduler.h"
#include "pagedkv/types.h"

namespace pagedkv::internal {

struct PAGEDKV_EXPORT RequestState {
  RequestState(CacheRequest cache_request, const SchedulerRequest& request)
      : cache(std::move(cache_request)),
        id(request.id),
        max_new_tokens(request.max_new_tokens),
        priority(request.priority),
        arrival_time(request.arrival_time),
        eos_token(request.eos_token),
        stop_tokens(request.stop_tokens),
        min_new_tokens(request.min_new_tokens),
        num_prompt_tokens(static_cast<int32_t>(request.prompt.size())),
        cache_salt(request.cache_salt),
        adapter_id(request.adapter_id),
        chunks(request.chunks),
        skip_prefix_cache_lookup(request.skip_prefix_cache_lookup),
        prompt_source(request.prompt_source) {}

  // Prompt + outputs so far.
  int32_t num_tokens() const { return static_cast<int32_t>(cache.num_tokens()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  // True when sampling `token` ends the request (counted among the outputs already): a stop
  // token once min_new_tokens outputs are reached.
  bool IsStopToken(TokenId token) const {
    if (num_output_tokens() < min_new_tokens) return false;
    return (eos_token.has_value() && token == *eos_token) ||
           std::find(stop_tokens.begin(), stop_tokens.end(), token) != stop_tokens.end();
  }

  CacheRequest cache;  // tokens so far + block hashes; fed to the KvCacheManager
  RequestId id;
  int32_t max_new_tokens;
  int32_t priority;
  double arrival_time;
  std::optional<TokenId> eos_token;
  std::vector<TokenId> stop_tokens;
  int32_t min_new_tokens;
  int32_t num_prompt_tokens;
  std::string cache_salt;
  uint64_t adapter_id;
  std::vector<PromptChunk> chunks;  // sorted, non-overlapping, inside the prompt
  bool skip_prefix_cache_lookup;    // admissions ignore cached blocks (SchedulerRequest)
  RequestId prompt_source;          // takes its prompt's KV from this request (SchedulerRequest)

  RequestStatus status = RequestStatus::kWaiting;
  // Tokens whose KV is computed or scheduled in the current admission (0 while waiting).
  int32_t num_computed_tokens = 0;
  // Prefix-cache hits at the latest admission.
  int32_t num_prefix_hit_tokens = 0;
  int32_t num_preemptions = 0;
  // Written by WaitingQueue while queued.
  WaitingKey waiting_key;
  // The key of its first queuing; preemption picks the running request with the largest.
  WaitingKey rank;
  // Sampled in the last batch and waiting for its token in UpdateFromOutput.
  bool awaiting_sample = false;
  // Proposed by SetDraftTokens for the next step (speculative decoding).
  std::vector<TokenId> draft_tokens;
  // Drafts scheduled in the last batch, awaiting verification in UpdateFromOutput.
  std::vector<TokenId> scheduled_drafts;
  // UpdateFromOutput call that last saw this request (duplicate detection).
  uint64_t seen_in_update = 0;
};

}  // namespace pagedkv::internal

#endif  // PAGEDKV_ENGINE_RUNTIME_SCHEDULER_REQUEST_STATE_H_
