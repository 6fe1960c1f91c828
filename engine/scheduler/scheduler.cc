// Copyright 2026 The pagedkv Authors.
//
// Scheduler: continuous batching over a KvCacheManager (see include/pagedkv/scheduler.h).
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
#include "pagedkv/scheduler.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/scheduler/request_state.h"
#include "engine/scheduler/waiting_queue.h"
#include "pagedkv/kv_cache_manager.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv {
namespace {

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
};

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

// A chunk span's part that may be reused: prompt tokens [begin, end).
struct ReusableRange {
  int32_t begin = 0;
  int32_t end = 0;
  const PromptChunk* chunk = nullptr;
};

}  // namespace

class Scheduler::Impl {
 public:
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
  // Step 2: admits waiting requests; returns the remaining budget.
  absl::StatusOr<int32_t> ScheduleWaiting(int32_t budget);
  // Tries to admit `request` with at most `budget` tokens. Returns false when it does not fit.
  absl::StatusOr<bool> TryAdmit(RequestState* request, int32_t* budget);
  // Waiting requests in admission order for this step.
  void OrderWaiting(std::vector<RequestState*>* order) const;
  // Leading full blocks of `request` found in the pool's hash index (hash only, no verification,
  // no statistics): the cache-aware order's estimate of its prefix hit.
  int64_t ProbeCachedBlocks(const RequestState& request) const;
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
  void EmitSlotMoves(const Decision& d, std::span<const BlockId> table,
                     ScheduledBatch* batch) const;
  void EmitTokens(const RequestState& r, std::span<const BlockId> table, int32_t start, int32_t end,
                  std::span<const TokenId> drafts, ScheduledBatch* batch) const;
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

  ChunkReuseProvider* reuse_ = nullptr;  // not owned; null: chunk reuse off
  SchedulerOptions options_;
  KvCacheManager& cache_;
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

// ---- AddRequest --------------------------------------------------------------------------------

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
  const int64_t max_blocks = NumBlocksFor(max_len - 1, cache.block_size());
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

// ---- Schedule ----------------------------------------------------------------------------------

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
    bool scheduled = false;
    while (true) {
      const absl::Status status = cache_.AllocateSlots(
          request->cache, d.num_reused + num_new, {},
          {.no_cache_from_token = d.num_reused > 0 ? request->num_computed_tokens : -1,
           .num_lookahead_tokens = d.num_drafts});
      if (status.ok()) {
        scheduled = true;
        break;
      }
      if (!absl::IsResourceExhausted(status)) return status;
      if (d.num_drafts > 0) {
        d.num_drafts = 0;  // speculation never preempts anyone: retry without the drafts
        continue;
      }
      // running_ is sorted by rank, so the victim (the largest rank) is at the back, never before
      // `request`: requests already scheduled this step are never preempted (their newly full
      // blocks are already in the prefix index and must be computed).
      RequestState* victim = running_.back();
      PAGEDKV_RETURN_IF_ERROR(Preempt(victim, batch));
      if (victim == request) break;
    }
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
    order->push_back(it->request);
  }
  if (!cache_aware) return;
  std::vector<std::pair<int64_t, RequestState*>> keyed;
  keyed.reserve(order->size());
  for (RequestState* r : *order) keyed.emplace_back(ProbeCachedBlocks(*r), r);
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; i < keyed.size(); ++i) (*order)[i] = keyed[i].second;
}

int64_t Scheduler::Impl::ProbeCachedBlocks(const RequestState& request) const {
  // Like GetComputedBlocks: never the whole request, at least one token is left to compute.
  const int64_t max_blocks = std::min<int64_t>(
      (request.cache.num_tokens() - 1) / cache_.block_size(), request.cache.num_full_blocks());
  const auto hashes = request.cache.block_hashes();
  int64_t n = 0;
  while (n < max_blocks && cache_.pool().FindCached(hashes[n]) != kNullBlock) ++n;
  return n;
}

absl::StatusOr<bool> Scheduler::Impl::TryAdmit(RequestState* request, int32_t* budget) {
  PAGEDKV_ASSIGN_OR_RETURN(ComputedBlocks hit, cache_.GetComputedBlocks(request->cache));
  const int32_t num_hit = static_cast<int32_t>(hit.num_computed_tokens);
  int32_t num_new = request->num_tokens() - num_hit;
  if (!options_.enable_chunked_prefill) {
    if (num_new > *budget) return false;
  } else {
    if (options_.long_prefill_token_threshold > 0) {
      num_new = std::min(num_new, options_.long_prefill_token_threshold);
    }
    num_new = std::min(num_new, *budget);
  }
  Decision d{request, 0, /*newly_admitted=*/true};
  PlanReuse(*request, num_hit, &num_new, &d);
  const absl::Status status =
      cache_.AllocateSlots(request->cache, d.num_reused + num_new, hit,
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
  return true;
}

ReusableRange Scheduler::Impl::RangeOf(const RequestState& request,
                                       const PromptChunk& chunk) const {
  ReusableRange range;
  range.chunk = &chunk;
  range.begin = chunk.offset + std::min(chunk.length, reuse_->num_leading_tokens_to_compute());
  range.end = std::min(chunk.offset + chunk.length, request.num_prompt_tokens - 1);
  return range;
}

void Scheduler::Impl::PlanReuse(RequestState& request, int32_t from, int32_t* num_new,
                                Decision* d) {
  if (reuse_ == nullptr || request.chunks.empty()) return;
  // Blending schedules the reused tokens, so they share the budget: a chunk may then be reused
  // over several steps, each starting inside its range.
  const bool blend = reuse_->blend_reused_tokens();
  int32_t next = from;  // first token this step computes
  for (const PromptChunk& chunk : request.chunks) {
    const ReusableRange range = RangeOf(request, chunk);
    if (range.begin >= range.end) continue;
    if (blend ? (from < range.begin || from >= range.end) : range.begin != from) continue;
    const auto tokens = request.cache.tokens().subspan(static_cast<size_t>(chunk.offset),
                                                       static_cast<size_t>(chunk.length));
    std::optional<AcquiredChunk> hit =
        reuse_->Acquire(tokens, request.cache_salt, request.adapter_id);
    if (!hit.has_value()) break;
    if (static_cast<int32_t>(hit->slots.size()) != chunk.length) {
      reuse_->Release(hit->handle);  // a provider bug; compute the chunk instead
      break;
    }
    d->chunk = *std::move(hit);
    d->num_reused = range.end - from;
    if (blend) {
      d->num_reused = std::min(d->num_reused, *num_new);
      d->blend = true;
      *num_new -= d->num_reused;
    }
    d->chunk_first = from - chunk.offset;
    next = from + d->num_reused;
    break;
  }
  // Stop before the next reusable range so that a later step can try it.
  *num_new = std::min(*num_new, request.num_tokens() - next);
  for (const PromptChunk& chunk : request.chunks) {
    const ReusableRange range = RangeOf(request, chunk);
    if (range.begin >= range.end || range.begin <= next) continue;
    *num_new = std::min(*num_new, range.begin - next);
    break;
  }
}

void Scheduler::Impl::ReleaseChunk(Decision* d) {
  if (d->num_reused == 0) return;
  reuse_->Release(d->chunk.handle);
  d->num_reused = 0;
  d->blend = false;
  d->chunk = {};
}

absl::Status Scheduler::Impl::EmitBatch(ScheduledBatch* batch) {
  ReserveBatch(batch);
  for (const Decision& d : decisions_) PAGEDKV_RETURN_IF_ERROR(EmitSequence(d, batch));
  FinishStepStats(batch);
  return absl::OkStatus();
}

void Scheduler::Impl::ReserveBatch(ScheduledBatch* batch) const {
  int64_t total_tokens = 0;
  for (const Decision& d : decisions_) {
    total_tokens += d.num_new_tokens + d.num_drafts + (d.blend ? d.num_reused : 0);
  }
  batch->token_ids.reserve(static_cast<size_t>(total_tokens));
  batch->positions.reserve(static_cast<size_t>(total_tokens));
  batch->slot_mapping.reserve(static_cast<size_t>(total_tokens));
  batch->sequences.reserve(decisions_.size());
  batch->query_start_loc.reserve(decisions_.size() + 1);
  batch->block_table_start.reserve(decisions_.size() + 1);
  batch->query_start_loc.push_back(0);
  batch->block_table_start.push_back(0);
}

void Scheduler::Impl::EmitSlotMoves(const Decision& d, std::span<const BlockId> table,
                                    ScheduledBatch* batch) const {
  const int32_t bs = cache_.block_size();
  const RequestState& r = *d.request;
  for (int32_t t = 0; t < d.num_reused; ++t) {
    const int32_t pos = r.num_computed_tokens + t;
    const int32_t c = d.chunk_first + t;
    batch->slot_moves.push_back(
        KvSlotMove{.src_slot = d.chunk.slots[static_cast<size_t>(c)],
                   .dst_slot = static_cast<int64_t>(table[pos / bs]) * bs + pos % bs,
                   .old_position = d.chunk.position + c,
                   .new_position = pos});
  }
}

void Scheduler::Impl::EmitTokens(const RequestState& r, std::span<const BlockId> table,
                                 int32_t start, int32_t end, std::span<const TokenId> drafts,
                                 ScheduledBatch* batch) const {
  const int32_t bs = cache_.block_size();
  const std::span<const TokenId> tokens = r.cache.tokens();
  batch->token_ids.insert(batch->token_ids.end(), tokens.begin() + start, tokens.begin() + end);
  batch->token_ids.insert(batch->token_ids.end(), drafts.begin(), drafts.end());
  const int32_t last = end + static_cast<int32_t>(drafts.size());
  for (int32_t pos = start; pos < last; ++pos) {
    batch->positions.push_back(pos);
    batch->slot_mapping.push_back(static_cast<int64_t>(table[pos / bs]) * bs + pos % bs);
  }
  if (options_.emit_block_tables) {
    batch->block_table_ids.insert(batch->block_table_ids.end(), table.begin(), table.end());
  }
  batch->query_start_loc.push_back(static_cast<int32_t>(batch->token_ids.size()));
  batch->block_table_start.push_back(static_cast<int32_t>(batch->block_table_ids.size()));
}

void Scheduler::Impl::CountSequence(const Decision& d, const ScheduledSequence& seq,
                                    SchedulerStepStats& st) {
  const RequestState& r = *d.request;
  st.num_shifted_hit_tokens += d.num_reused;
  st.num_blend_tokens += seq.num_blend_tokens;
  stats_.num_shifted_hit_tokens += d.num_reused;
  st.num_draft_tokens += d.num_drafts;
  stats_.num_draft_tokens += d.num_drafts;
  const bool decode = !d.newly_admitted && seq.num_scheduled_tokens == 1 + d.num_drafts &&
                      seq.num_computed_tokens >= r.num_prompt_tokens;
  (decode ? st.num_decode_tokens : st.num_prefill_tokens) += seq.num_scheduled_tokens;
  if (d.newly_admitted) {
    ++st.num_newly_admitted;
    st.num_prefix_hit_tokens += seq.num_prefix_hit_tokens;
    st.num_admitted_prompt_tokens += r.num_tokens();
  }
}

absl::Status Scheduler::Impl::EmitSequence(const Decision& d, ScheduledBatch* batch) {
  const int32_t bs = cache_.block_size();
  RequestState& r = *d.request;
  PAGEDKV_ASSIGN_OR_RETURN(std::span<const BlockId> table, cache_.GetBlockTable(r.id));
  EmitSlotMoves(d, table, batch);
  // The first scheduled token: the first reused one when blending, else the first new one.
  const int32_t start = r.num_computed_tokens + (d.blend ? 0 : d.num_reused);
  const int32_t end = r.num_computed_tokens + d.num_reused + d.num_new_tokens;
  if (static_cast<int64_t>(table.size()) != NumBlocksFor(end + d.num_drafts, bs)) {
    return absl::InternalError(absl::StrCat("scheduler: request ", r.id, " has ", table.size(),
                                            " blocks for ", end, " tokens + ", d.num_drafts,
                                            " drafts of block size ", bs));
  }
  r.scheduled_drafts.assign(r.draft_tokens.begin(), r.draft_tokens.begin() + d.num_drafts);
  r.draft_tokens.clear();
  ScheduledSequence seq;
  seq.request_id = r.id;
  seq.query_start = static_cast<int32_t>(batch->token_ids.size());
  seq.num_scheduled_tokens = end - start + d.num_drafts;
  seq.num_computed_tokens = start;
  seq.block_table_start = static_cast<int32_t>(batch->block_table_ids.size());
  seq.num_blocks = static_cast<int32_t>(table.size());
  seq.samples = end == r.num_tokens();
  seq.newly_admitted = d.newly_admitted;
  seq.num_prefix_hit_tokens = d.newly_admitted ? r.num_prefix_hit_tokens : 0;
  seq.num_shifted_hit_tokens = d.num_reused;
  seq.num_blend_tokens = d.blend ? d.num_reused : 0;
  seq.num_draft_tokens = d.num_drafts;
  EmitTokens(r, table, start, end, r.scheduled_drafts, batch);
  CountSequence(d, seq, batch->stats);
  if (seq.samples) {
    r.awaiting_sample = true;
    ++num_awaiting_samples_;
  }
  r.num_computed_tokens = end;
  batch->sequences.push_back(seq);
  return absl::OkStatus();
}

void Scheduler::Impl::FinishStepStats(ScheduledBatch* batch) {
  SchedulerStepStats& st = batch->stats;
  batch->finished_request_ids = std::move(pending_finished_);
  pending_finished_.clear();
  st.step = stats_.num_steps;
  st.num_scheduled_tokens = static_cast<int32_t>(batch->token_ids.size());
  st.num_scheduled_seqs = static_cast<int32_t>(batch->sequences.size());
  st.num_running = num_running();
  st.num_waiting = num_waiting();
  st.num_preempted = static_cast<int32_t>(batch->preempted_request_ids.size());
  st.num_finished = static_cast<int32_t>(batch->finished_request_ids.size());
  st.num_total_blocks = cache_.num_blocks();
  st.num_used_blocks = cache_.num_blocks() - cache_.NumAvailableBlocks();
  ++stats_.num_steps;
  stats_.num_scheduled_tokens += st.num_scheduled_tokens;
}

// ---- UpdateFromOutput --------------------------------------------------------------------------

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

// ---- Scheduler (forwarding) --------------------------------------------------------------------

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
