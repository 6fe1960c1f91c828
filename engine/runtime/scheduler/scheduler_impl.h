// Copyright 2026 The pagedkv Authors.
//
// Scheduler::Impl, the scheduler's state and steps, shared by its files (internal):
//   scheduler.cc           the public Scheduler, forwarding to Impl
//   scheduler_requests.cc  request checks and lifecycle: AddRequest, SetDraftTokens, AbortRequest,
//                          GetRequestInfo, Finish
//   scheduler_schedule.cc  one step's decisions: running requests (with drafts), preemption,
//                          admission of waiting requests
//   scheduler_reuse.cc     chunk reuse planning through the ChunkReuseProvider
//   scheduler_fork.cc      prompt sources: a request's prompt KV taken from another's (n samples)
//   scheduler_emit.cc      the decisions written out as one flat ScheduledBatch
//   scheduler_output.cc    UpdateFromOutput: sampled tokens checked, appended, drafts kept
#ifndef PAGEDKV_ENGINE_RUNTIME_SCHEDULER_SCHEDULER_IMPL_H_
#define PAGEDKV_ENGINE_RUNTIME_SCHEDULER_SCHEDULER_IMPL_H_

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/runtime/scheduler/request_state.h"
#include "engine/runtime/scheduler/waiting_queue.h"
#include "pagedkv/cache/kv_cache_manager.h"
#include "pagedkv/runtime/scheduler.h"
#include "pagedkv/types.h"

namespace pagedkv {
namespace scheduler_internal {

using internal::RequestState;

// One request's share of a step, decided before the batch is written out.
struct Decision {
  RequestState* request;
  int32_t num_new_tokens;
  bool newly_admitted;
  int32_t num_reused = 0;  // tokens reused from `chunk` before the new ones
  bool blend = false;      // the reused tokens are scheduled too (CacheBlend), before the new ones
  AcquiredChunk chunk = {};
  int32_t chunk_first = 0;  // chunk token moved to the request's token num_computed_tokens
  int32_t num_drafts = 0;   // draft tokens scheduled after the new ones (lookahead slots)
  // Prompt tokens before the new ones whose KV is copied from `copy_source`'s blocks.
  int32_t num_copied = 0;
  RequestId copy_source = 0;
};

// A chunk span's part that may be reused: prompt tokens [begin, end).
struct ReusableRange {
  int32_t begin = 0;
  int32_t end = 0;
  const PromptChunk* chunk = nullptr;
};

}  // namespace scheduler_internal

class Scheduler::Impl {
 public:
  using Decision = scheduler_internal::Decision;
  using RequestState = internal::RequestState;
  using ReusableRange = scheduler_internal::ReusableRange;

  // REQUIRES: `cache` outlives this.
  Impl(const SchedulerOptions& options, KvCacheManager& cache)
      : options_(options), cache_(cache), waiting_(options.policy) {}

  absl::Status AddRequest(SchedulerRequest request);
  absl::Status Schedule(ScheduledBatch* batch);
  absl::StatusOr<std::vector<RequestOutput>> UpdateFromOutput(
      std::span<const SampledToken> sampled);
  absl::Status AbortRequest(RequestId id);
  absl::Status SetDraftTokens(RequestId id, std::span<const TokenId> draft_tokens);
  absl::StatusOr<RequestInfo> GetRequestInfo(RequestId id) const;

  bool HasUnfinishedRequests() const { return !requests_.empty(); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  const SchedulerStats& stats() const { return stats_; }
  void SetChunkReuseProvider(ChunkReuseProvider* provider) { reuse_ = provider; }

 private:
  // Step 1: serves running requests; returns the remaining budget.
  absl::StatusOr<int32_t> ScheduleRunning(int32_t budget, ScheduledBatch* batch);
  // Allocates the slots of running `request`'s decision `d` (`num_new` new tokens after its reused
  // ones, d->num_drafts lookahead slots). When the pool is short: first drops the drafts, then
  // preempts from the back of running_. Returns false when `request` itself was preempted.
  absl::StatusOr<bool> AllocateOrPreempt(RequestState* request, int32_t num_new, Decision* d,
                                         ScheduledBatch* batch);
  // Step 2: admits waiting requests; returns the remaining budget.
  absl::StatusOr<int32_t> ScheduleWaiting(int32_t budget);
  // Tries to admit `request` with at most `budget` tokens. Returns false when it does not fit.
  absl::StatusOr<bool> TryAdmit(RequestState* request, int32_t* budget);
  // Waiting requests in admission order for this step.
  void OrderWaiting(std::vector<RequestState*>* order) const;
  // Preempts `victim` (REQUIRES: not scheduled in this step): frees its blocks and queues it at
  // the front.
  absl::Status Preempt(RequestState* victim, ScheduledBatch* batch);
  // Inserts `request` into running_, keeping it sorted by rank.
  void InsertRunning(RequestState* request);
  // Writes decisions_ into `batch` and advances num_computed_tokens: reserves the arrays, emits
  // each decision's sequence, then the step statistics.
  absl::Status EmitBatch(ScheduledBatch* batch);
  void ReserveBatch(ScheduledBatch* batch) const;
  // Slot moves, tokens, positions, slots and block table of decision `d`; its statistics.
  absl::Status EmitSequence(const Decision& d, ScheduledBatch* batch);
  // EmitSequence's parts: the reused tokens' slot moves; the scheduled tokens [start, end) with
  // their positions, slots and the block table; the step statistics of one sequence.
  absl::Status EmitSlotMoves(const Decision& d, std::span<const BlockId> table,
                             ScheduledBatch* batch) const;
  // Group g's (>= 1) slot moves of decision `d` over that group's `table`: the chunk tokens the
  // group's copy keeps (AcquiredChunk::group_slots).
  absl::Status EmitGroupSlotMoves(const Decision& d, int32_t g, std::span<const BlockId> table,
                                  ScheduledBatch* batch) const;
  void EmitTokens(const RequestState& r, std::span<const BlockId> table, int32_t start, int32_t end,
                  std::span<const TokenId> drafts, ScheduledBatch* batch) const;
  // Groups 1.. of a hybrid cache: slots of positions [start, last) and the tables.
  absl::Status EmitGroupTokens(const RequestState& r, int32_t start, int32_t last,
                               ScheduledBatch* batch) const;
  void CountSequence(const Decision& d, const ScheduledSequence& seq, SchedulerStepStats& st);
  // UpdateFromOutput's parts: every sampled token is checked (and its request collected in
  // update_targets_) before any is appended; then each is appended and its output reported.
  absl::Status CheckSampled(std::span<const SampledToken> sampled, uint64_t call);
  absl::StatusOr<RequestOutput> AppendSampled(RequestState& r, const SampledToken& sampled);
  // After AppendSampled appended `num_accepted` drafts of `r`: their KV is in the lookahead
  // slots, which become the request's own; the rejected drafts' slots are released.
  absl::Status KeepAcceptedDrafts(RequestState& r, int32_t num_accepted);
  void FinishStepStats(ScheduledBatch* batch);
  // Ends a request: frees its blocks, forgets it, reports it in the next batch.
  absl::Status Finish(RequestState* request, FinishReason reason);
  void RemoveFromRunning(RequestState* request);
  // The reusable part of `chunk` in `request` (begin >= end when none: the last prompt token is
  // always computed, and the first num_leading_tokens_to_compute() tokens of the chunk).
  ReusableRange RangeOf(const RequestState& request, const PromptChunk& chunk) const;
  // With a provider: when a chunk's reusable range of `request` starts at token `from`, acquires
  // the chunk and fills d->num_reused / chunk / chunk_first. Then caps `*num_new` so that the
  // step stops before the next reusable range, which is tried on a later step.
  void PlanReuse(RequestState& request, int32_t from, int32_t* num_new, Decision* d);
  void ReleaseChunk(Decision* d);
  // scheduler_fork.cc: the running or waiting request whose prompt KV `request` may take
  // (SchedulerRequest::prompt_source), or null.
  const RequestState* PromptSource(const RequestState& request) const;
  // True while `request`'s prompt source has yet to compute the prompt: admission waits for it.
  bool WaitsForPromptSource(const RequestState& request) const;
  // Tokens from `num_hit` on that admitting `request` copies from its prompt source (filling
  // d->copy_source): all of the prompt but its last token, once the source has computed them.
  int32_t CopyablePromptTokens(const RequestState& request, int32_t num_hit, Decision* d) const;
  // The block copies of decision `d` (its copied tokens' blocks of `table`, from the source's).
  absl::Status EmitBlockCopies(const Decision& d, std::span<const BlockId> table,
                               ScheduledBatch* batch) const;

  ChunkReuseProvider* reuse_ = nullptr;  // not owned; null: chunk reuse off
  SchedulerOptions options_;
  KvCacheManager& cache_;  // not owned
  absl::flat_hash_map<RequestId, std::unique_ptr<RequestState>> requests_;
  internal::WaitingQueue<RequestState> waiting_;
  // Sorted by rank (priority, then arrival order): served in this order, preempted from the back.
  std::vector<RequestState*> running_;
  std::vector<Decision> decisions_;            // this step's, reused
  std::vector<RequestState*> order_;           // this step's admission order, reused
  std::vector<RequestState*> update_targets_;  // UpdateFromOutput's requests, reused
  std::vector<RequestId> pending_finished_;
  int32_t num_awaiting_samples_ = 0;
  uint64_t update_calls_ = 0;
  bool preempted_this_step_ = false;
  SchedulerStats stats_;
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_RUNTIME_SCHEDULER_SCHEDULER_IMPL_H_
