// Copyright 2026 The pagedkv Authors.
//
// Scheduler: UpdateFromOutput. Every sampled token is checked before any is appended (a bad call
// changes nothing); then each request gets its token and its accepted drafts, finishes on a stop
// token or its length limit, and keeps the KV of accepted drafts.
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

absl::Status Scheduler::Impl::CheckSampled(std::span<const SampledToken> sampled, uint64_t call) {
  update_targets_.clear();
  for (const SampledToken& s : sampled) {
    auto it = requests_.find(s.request_id);
    if (it == requests_.end()) {
      return absl::NotFoundError(absl::StrCat("UpdateFromOutput: unknown request ", s.request_id,
                                              " (never added, finished or aborted)"));
    }
    RequestState& r = *it->second;
    if (!r.awaiting_sample) {
      return absl::InvalidArgumentError(
          absl::StrCat("UpdateFromOutput: request ", s.request_id,
                       " did not sample in the last batch (ScheduledSequence.samples was false "
                       "or it was not scheduled)"));
    }
    if (r.seen_in_update == call) {
      return absl::InvalidArgumentError(
          absl::StrCat("UpdateFromOutput: request ", s.request_id, " appears more than once"));
    }
    r.seen_in_update = call;
    update_targets_.push_back(&r);
    if (s.num_accepted_draft_tokens < 0 ||
        s.num_accepted_draft_tokens > static_cast<int32_t>(r.scheduled_drafts.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "UpdateFromOutput: request ", s.request_id, " accepted ", s.num_accepted_draft_tokens,
          " draft tokens but ", r.scheduled_drafts.size(), " were scheduled"));
    }
    const int32_t vocab = r.cache.vocab_size();
    if (s.token < 0 || (vocab > 0 && s.token >= vocab)) {
      return absl::InvalidArgumentError(
          absl::StrCat("UpdateFromOutput: token ", s.token, " for request ", s.request_id,
                       " is outside the vocabulary [0, ", vocab > 0 ? vocab : INT32_MAX, ")"));
    }
  }
  if (static_cast<int32_t>(sampled.size()) == num_awaiting_samples_) return absl::OkStatus();
  RequestId missing = 0;
  for (RequestState* r : running_) {
    if (r->awaiting_sample && r->seen_in_update != call) {
      missing = r->id;
      break;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "UpdateFromOutput: got ", sampled.size(), " tokens but ", num_awaiting_samples_,
      " sequences sampled in the last batch; e.g. request ", missing, " has no token"));
}

absl::StatusOr<RequestOutput> Scheduler::Impl::AppendSampled(RequestState& r,
                                                             const SampledToken& sampled) {
  r.awaiting_sample = false;
  --num_awaiting_samples_;
  RequestOutput out;
  out.request_id = r.id;
  const int32_t accepted = sampled.num_accepted_draft_tokens;
  out.new_tokens.assign(r.scheduled_drafts.begin(), r.scheduled_drafts.begin() + accepted);
  out.new_tokens.push_back(sampled.token);
  size_t appended = 0;
  for (const TokenId token : out.new_tokens) {
    // Cannot fail: tokens were checked against the vocabulary (CheckSampled, SetDraftTokens).
    PAGEDKV_RETURN_IF_ERROR(r.cache.AppendToken(token));
    ++appended;
    out.token = token;
    if (r.IsStopToken(token)) {
      out.finish_reason = FinishReason::kStop;
    } else if (r.num_output_tokens() >= r.max_new_tokens ||
               (options_.max_model_len > 0 && r.num_tokens() >= options_.max_model_len)) {
      out.finish_reason = FinishReason::kLength;
    }
    if (out.finished()) break;
  }
  out.new_tokens.resize(appended);  // tokens after a stop are dropped
  const int32_t appended_drafts = std::min(static_cast<int32_t>(appended), accepted);
  out.num_output_tokens = r.num_output_tokens();
  stats_.num_accepted_draft_tokens += appended_drafts;
  if (out.finished()) {
    const auto tokens = r.cache.tokens();
    out.output_tokens.assign(tokens.begin() + r.num_prompt_tokens, tokens.end());
    r.scheduled_drafts.clear();
    PAGEDKV_RETURN_IF_ERROR(Finish(&r, out.finish_reason));
    return out;
  }
  PAGEDKV_RETURN_IF_ERROR(KeepAcceptedDrafts(r, appended_drafts));
  return out;
}

absl::Status Scheduler::Impl::KeepAcceptedDrafts(RequestState& r, int32_t num_accepted) {
  if (r.scheduled_drafts.empty()) return absl::OkStatus();
  r.scheduled_drafts.clear();
  // Cannot fail: the slots exist (lookahead), so no block is allocated, and the count is within
  // the request's tokens. Full blocks of accepted drafts are cached now: their KV was computed.
  PAGEDKV_RETURN_IF_ERROR(cache_.AllocateSlots(r.cache, num_accepted));
  r.num_computed_tokens += num_accepted;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RequestOutput>> Scheduler::Impl::UpdateFromOutput(
    std::span<const SampledToken> sampled) {
  // Validate everything first so that a bad call changes nothing.
  PAGEDKV_RETURN_IF_ERROR(CheckSampled(sampled, ++update_calls_));
  std::vector<RequestOutput> outputs;
  outputs.reserve(sampled.size());
  for (size_t k = 0; k < sampled.size(); ++k) {
    PAGEDKV_ASSIGN_OR_RETURN(RequestOutput out, AppendSampled(*update_targets_[k], sampled[k]));
    outputs.push_back(std::move(out));
  }
  return outputs;
}

}  // namespace pagedkv
