// Copyright 2026 The pagedkv Authors.
//
// Scheduler: one step's decisions (steps 1 and 2 of the banner in scheduler.cc). Running requests
// get their next tokens, with draft tokens in lookahead slots when they fit, preempting from the
// back of the rank order when the pool is short; then waiting requests are admitted.
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

using internal::RequestState;

// Draft tokens of `r` that fit its next step: within the budget left after its one decode token,
// and short enough that accepting all of them plus the bonus token stays within max_new_tokens
// and max_model_len.
int32_t DraftsThatFit(const RequestState& r, int32_t budget, int32_t max_model_len) {
  int64_t k = static_cast<int64_t>(r.draft_tokens.size());
  k = std::min<int64_t>(k, budget - 1);
  k = std::min<int64_t>(k, r.max_new_tokens - r.num_output_tokens() - 1);
  if (max_model_len > 0) k = std::min<int64_t>(k, max_model_len - r.num_tokens() - 1);
  return static_cast<int32_t>(std::max<int64_t>(k, 0));
}

}  // namespace

absl::Status Scheduler::Impl::Schedule(ScheduledBatch* batch) {
  if (num_awaiting_samples_ > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Schedule() called while ", num_awaiting_samples_,
        " sequence(s) of the previous batch await their sampled token; call UpdateFromOutput "
        "first"));
  }
  batch->Clear();
  batch->block_size = cache_.block_size();
  decisions_.clear();
  preempted_this_step_ = false;

  int32_t budget = options_.max_num_batched_tokens;
  PAGEDKV_ASSIGN_OR_RETURN(budget, ScheduleRunning(budget, batch));
  // Like vLLM: a step that had to preempt admits nobody (the pool is under pressure).
  if (!preempted_this_step_) {
    PAGEDKV_ASSIGN_OR_RETURN(budget, ScheduleWaiting(budget));
  }
  return EmitBatch(batch);
}

absl::StatusOr<int32_t> Scheduler::Impl::ScheduleRunning(int32_t budget, ScheduledBatch* batch) {
  size_t i = 0;
  while (i < running_.size() && budget > 0) {
    RequestState* request = running_[i];
    int32_t num_new = request->num_tokens() - request->num_computed_tokens;
    if (options_.enable_chunked_prefill && options_.long_prefill_token_threshold > 0) {
      num_new = std::min(num_new, options_.long_prefill_token_threshold);
    }
    num_new = std::min(num_new, budget);
    if (num_new <= 0) {
      ++i;
      continue;
    }
    Decision d{request, 0, /*newly_admitted=*/false};
    PlanReuse(*request, request->num_computed_tokens, &num_new, &d);
    if (num_new == 1 && d.num_reused == 0 && !request->draft_tokens.empty()) {
      d.num_drafts = DraftsThatFit(*request, budget, options_.max_model_len);
    }
    PAGEDKV_ASSIGN_OR_RETURN(const bool scheduled, AllocateOrPreempt(request, num_new, &d, batch));
    if (scheduled) {
      d.num_new_tokens = num_new;
      budget -= num_new + d.num_drafts + (d.blend ? d.num_reused : 0);
      decisions_.push_back(std::move(d));
      ++i;
    } else {
      ReleaseChunk(&d);
    }
    // When the request preempted itself it left running_, and running_[i] is the next one.
  }
  return budget;
}

absl::StatusOr<bool> Scheduler::Impl::AllocateOrPreempt(RequestState* request, int32_t num_new,
                                                        Decision* d, ScheduledBatch* batch) {
  while (true) {
    const absl::Status status = cache_.AllocateSlots(
        request->cache, d->num_reused + num_new, {},
        {.no_cache_from_token = d->num_reused > 0 ? request->num_computed_tokens : -1,
         .num_lookahead_tokens = d->num_drafts});
    if (status.ok()) return true;
    if (!absl::IsResourceExhausted(status)) return status;
    if (d->num_drafts > 0) {
      d->num_drafts = 0;  // speculation never preempts anyone: retry without the drafts
      continue;
    }
    // running_ is sorted by rank, so the victim (the largest rank) is at the back, never before
    // `request`: requests already scheduled this step are never preempted (their newly full
    // blocks are already in the prefix index and must be computed).
    RequestState* victim = running_.back();
    PAGEDKV_RETURN_IF_ERROR(Preempt(victim, batch));
    if (victim == request) return false;
  }
}

absl::Status Scheduler::Impl::Preempt(RequestState* victim, ScheduledBatch* batch) {
  if (cache_.HasRequest(victim->id)) PAGEDKV_RETURN_IF_ERROR(cache_.Free(victim->id));
  RemoveFromRunning(victim);
  victim->status = RequestStatus::kWaiting;
  victim->num_computed_tokens = 0;
  victim->draft_tokens.clear();  // proposed for the context it had; drafted again after resuming
  ++victim->num_preemptions;
  waiting_.PushPreempted(victim, victim->priority, victim->arrival_time, victim->rank.order);
  batch->preempted_request_ids.push_back(victim->id);
  preempted_this_step_ = true;
  ++stats_.num_preemptions;
  return absl::OkStatus();
}

void Scheduler::Impl::InsertRunning(RequestState* request) {
  running_.insert(std::upper_bound(running_.begin(), running_.end(), request,
                                   [](const RequestState* a, const RequestState* b) {
                                     return a->rank < b->rank;
                                   }),
                  request);
}

void Scheduler::Impl::RemoveFromRunning(RequestState* request) {
  auto it = std::find(running_.begin(), running_.end(), request);
  if (it != running_.end()) running_.erase(it);
}

absl::StatusOr<int32_t> Scheduler::Impl::ScheduleWaiting(int32_t budget) {
  if (waiting_.empty()) return budget;
  OrderWaiting(&order_);
  for (RequestState* request : order_) {
    if (budget <= 0 || static_cast<int32_t>(running_.size()) >= options_.max_num_seqs) break;
    PAGEDKV_ASSIGN_OR_RETURN(bool admitted, TryAdmit(request, &budget));
    if (!admitted) break;
  }
  return budget;
}

void Scheduler::Impl::OrderWaiting(std::vector<RequestState*>* order) const {
  order->clear();
  // Admission stops at the first request that does not fit, so at most max_num_seqs candidates
  // matter under the queue order; the cache-aware order needs them all.
  const bool cache_aware =
      options_.cache_aware && cache_.options().enable_prefix_caching &&
      static_cast<int32_t>(waiting_.size()) <= options_.cache_aware_max_waiting;
  const size_t limit =
      cache_aware ? waiting_.size()
                  : std::min<size_t>(waiting_.size(), static_cast<size_t>(options_.max_num_seqs));
  for (auto it = waiting_.begin(); it != waiting_.end() && order->size() < limit; ++it) {
    // A sample waiting for its prompt source is no candidate yet (nor does it take the place of
    // one: the source may be behind it).
    if (!WaitsForPromptSource(*it->request)) order->push_back(it->request);
  }
  if (!cache_aware) return;
  std::vector<std::pair<int64_t, RequestState*>> keyed;
  keyed.reserve(order->size());
  for (RequestState* r : *order) keyed.emplace_back(cache_.ProbeCachedBlocks(r->cache), r);
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; i < keyed.size(); ++i) (*order)[i] = keyed[i].second;
}

absl::StatusOr<bool> Scheduler::Impl::TryAdmit(RequestState* request, int32_t* budget) {
  ComputedBlocks hit;
  if (request->skip_prefix_cache_lookup) {
    hit.other_groups.resize(static_cast<size_t>(cache_.num_groups() - 1));
  } else {
    PAGEDKV_ASSIGN_OR_RETURN(hit, cache_.GetComputedBlocks(request->cache));
  }
  const int32_t num_hit = static_cast<int32_t>(hit.num_computed_tokens);
  Decision d{request, 0, /*newly_admitted=*/true};
  d.num_copied = CopyablePromptTokens(*request, num_hit, &d);
  int32_t num_new = request->num_tokens() - num_hit - d.num_copied;
  if (!options_.enable_chunked_prefill) {
    if (num_new > *budget) return false;
  } else {
    if (options_.long_prefill_token_threshold > 0) {
      num_new = std::min(num_new, options_.long_prefill_token_threshold);
    }
    num_new = std::min(num_new, *budget);
  }
  PlanReuse(*request, num_hit, &num_new, &d);  // never with copies: they exclude chunks
  const absl::Status status =
      cache_.AllocateSlots(request->cache, d.num_copied + d.num_reused + num_new, hit,
                           {.no_cache_from_token = d.num_reused > 0 ? num_hit : -1});
  if (!status.ok()) ReleaseChunk(&d);
  if (absl::IsResourceExhausted(status)) return false;
  PAGEDKV_RETURN_IF_ERROR(status);

  waiting_.Erase(request);
  InsertRunning(request);
  request->status = RequestStatus::kRunning;
  request->num_computed_tokens = num_hit;
  request->num_prefix_hit_tokens = num_hit;
  d.num_new_tokens = num_new;
  *budget -= num_new + (d.blend ? d.num_reused : 0);
  decisions_.push_back(std::move(d));
  ++stats_.num_admissions;
  stats_.num_admitted_tokens += request->num_tokens();
  stats_.num_prefix_hit_tokens += num_hit;
  stats_.num_copied_tokens += d.num_copied;
  return true;
}

}  // namespace pagedkv
