// Copyright 2026 The pagedkv Authors.
//
// Scheduler: continuous batching over a KvCacheManager of any layout (see
// include/pagedkv/runtime/scheduler.h).
//
// One step (Schedule):
//   1. Running requests, in rank order (priority under kPriority, then arrival order), get their
//      next tokens (decode token or next prompt chunk) within the token budget. When AllocateSlots
//      is short of blocks, the running request with the largest rank (lowest priority, then
//      latest) is preempted and the allocation retried; a request that is itself the victim is
//      not scheduled. Rank order guarantees the victim was not scheduled earlier in the step.
//   2. If nothing was preempted, waiting requests are admitted in queue order (or longest cached
//      prefix first), each with its prefix hits counted as computed, until the budget, the
//      sequence cap or the pool runs out (the first that does not fit stops admission).
//   3. The decisions are written out as one flat batch and each request's num_computed_tokens
//      advances past its scheduled tokens.
//
// This file: the public Scheduler, forwarding to Scheduler::Impl
// (engine/runtime/scheduler/scheduler_impl.h, which lists the files of each part).
#include "pagedkv/runtime/scheduler.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/runtime/scheduler/scheduler_impl.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {

Scheduler::Scheduler(const SchedulerOptions& options, KvCacheManager& cache)
    : options_(options), impl_(std::make_unique<Impl>(options, cache)) {}

Scheduler::~Scheduler() = default;

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(const SchedulerOptions& options,
                                                             KvCacheManager& cache) {
  PAGEDKV_RETURN_IF_ERROR(options.Validate());
  return std::unique_ptr<Scheduler>(new Scheduler(options, cache));
}

absl::Status Scheduler::AddRequest(SchedulerRequest request) {
  return impl_->AddRequest(std::move(request));
}

absl::Status Scheduler::Schedule(ScheduledBatch* batch) { return impl_->Schedule(batch); }

absl::StatusOr<ScheduledBatch> Scheduler::Schedule() {
  ScheduledBatch batch;
  PAGEDKV_RETURN_IF_ERROR(Schedule(&batch));
  return batch;
}

absl::StatusOr<std::vector<RequestOutput>> Scheduler::UpdateFromOutput(
    std::span<const SampledToken> sampled) {
  return impl_->UpdateFromOutput(sampled);
}

absl::Status Scheduler::AbortRequest(RequestId id) { return impl_->AbortRequest(id); }

absl::Status Scheduler::SetDraftTokens(RequestId id, std::span<const TokenId> draft_tokens) {
  return impl_->SetDraftTokens(id, draft_tokens);
}

bool Scheduler::HasUnfinishedRequests() const { return impl_->HasUnfinishedRequests(); }
int32_t Scheduler::num_waiting() const { return impl_->num_waiting(); }
int32_t Scheduler::num_running() const { return impl_->num_running(); }
absl::StatusOr<RequestInfo> Scheduler::GetRequestInfo(RequestId id) const {
  return impl_->GetRequestInfo(id);
}
const SchedulerStats& Scheduler::stats() const { return impl_->stats(); }
void Scheduler::SetChunkReuseProvider(ChunkReuseProvider* provider) {
  impl_->SetChunkReuseProvider(provider);
}

}  // namespace pagedkv
