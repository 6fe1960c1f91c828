// Copyright 2026 The pagedkv Authors.
//
// Continuous-batching scheduler in the style of vLLM's v1 scheduler. It decides, step by step,
// which tokens of which requests the model computes, allocates their KV blocks through a
// KvCacheManager of any layout (one full-attention group, or groups with sliding windows; prefix-
// cache hits count as already computed) and emits one flat batch per step:
// every token with its own position id and KV slot, plus each sequence's block table.
//
// Each step has a token budget (max_num_batched_tokens) and a cap on running sequences
// (max_num_seqs). Running requests are served first (their decode token, or the next chunk of a
// long prompt), then waiting requests are admitted in the queue order (FCFS, priority, or longest
// cached prefix first). When the KV pool runs out of blocks, the lowest-priority, latest-arrived
// running request is preempted by recompute: its blocks are freed (they stay in the prefix cache)
// and it goes back to the front of the waiting queue with every token it has so far.
//
// The scheduler runs without a model: the caller computes the batch (or simulates it) and feeds
// back one sampled token per sequence that samples.
//
// Example:
//   auto cache = pagedkv::KvCacheManager::Create({.num_blocks = 4096, .block_size = 16}).value();
//   auto scheduler = pagedkv::Scheduler::Create({.max_num_batched_tokens = 2048}, *cache).value();
//   PAGEDKV_RETURN_IF_ERROR(scheduler.AddRequest({.id = 7, .prompt = {1, 2, 3},
//                                                 .max_new_tokens = 16, .eos_token = 2}));
//   pagedkv::ScheduledBatch batch;
//   while (scheduler.HasUnfinishedRequests()) {
//     PAGEDKV_RETURN_IF_ERROR(scheduler.Schedule(&batch));
//     std::vector<pagedkv::SampledToken> sampled = RunModel(batch);  // one per sampling sequence
//     PAGEDKV_ASSIGN_OR_RETURN(auto outputs, scheduler.UpdateFromOutput(sampled));
//     for (const pagedkv::RequestOutput& out : outputs) Emit(out.request_id, out.token);
//   }
//
// Thread safety: none; one thread drives a Scheduler and its KvCacheManager.
#ifndef PAGEDKV_RUNTIME_SCHEDULER_H_
#define PAGEDKV_RUNTIME_SCHEDULER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/cache/block_hash.h"
#include "pagedkv/cache/cache_priority.h"
#include "pagedkv/export.h"
#include "pagedkv/runtime/scheduler_types.h"
#include "pagedkv/types.h"

namespace pagedkv {

class KvCacheManager;

class PAGEDKV_EXPORT Scheduler {
 public:
  // A scheduler over `cache`, which must outlive it; nothing else may allocate for or free the
  // scheduler's requests in it. InvalidArgument (options.Validate()'s error) for bad options.
  // Over several KV cache groups (sliding-window layers), admission and preemption go by
  // AllocateSlots, so the pool budget counts every group's blocks (and the out-of-window blocks
  // it releases); prefix hits follow the coordinator's rule, and the cache-aware order probes it
  // on the hash index. The batch carries every group's tables (group_block_table_ids) and, with
  // a ChunkReuseProvider, every group's slot moves (group_slot_moves): the provider's chunks list
  // each group's slots (AcquiredChunk::group_slots), or they are not used.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(const SchedulerOptions& options,
                                                           KvCacheManager& cache);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. AlreadyExists for an id not yet finished; InvalidArgument for an empty
  // prompt, a token that is negative or outside the cache's vocabulary, max_new_tokens < 1,
  // malformed multimodal inputs, or a request that could never fit (prompt + max_new_tokens
  // longer than max_model_len, than the whole KV pool, or than the token budget without chunked
  // prefill). On error nothing changes.
  absl::Status AddRequest(SchedulerRequest request);

  // Plans the next step into `*batch` (cleared first; its capacity is reused).
  // FailedPrecondition when the previous batch had sampling sequences and UpdateFromOutput was not
  // called for it (nothing changes then). The batch may be empty when nothing can run.
  absl::Status Schedule(ScheduledBatch* batch);
  // Same, returning a fresh batch.
  absl::StatusOr<ScheduledBatch> Schedule();

  // Feeds back the tokens sampled for the last batch: exactly one for each sequence with
  // samples == true (requests aborted since then excepted), in any order, with its count of
  // accepted draft tokens. Appends each token to its
  // request (its filled blocks become cacheable), finishes requests at EOS / stop token / length
  // and frees their blocks. Returns one RequestOutput per token, in the given order.
  // Errors, with nothing changed: NotFound for an unknown (or finished) id; InvalidArgument for a
  // sequence that did not sample in the last batch, a duplicate, a token that is negative or
  // outside the vocabulary, a missing token, or more accepted drafts than were scheduled. An empty
  // span is fine when nothing sampled.
  absl::StatusOr<std::vector<RequestOutput>> UpdateFromOutput(
      std::span<const SampledToken> sampled);

  // Proposes draft tokens (speculative decoding, e.g. n-gram prompt lookup) for a running request
  // in decode: its next step schedules its last token plus the drafts, 1 + k tokens, with k
  // capped by the step's token budget, max_new_tokens and max_model_len, and dropped for the step
  // when the pool is short of blocks for them (drafts never cause a preemption). The drafts get
  // lookahead slots (never cached); UpdateFromOutput appends the accepted ones and releases the
  // rest. Replaces earlier drafts; an empty span clears them. Errors, with nothing changed:
  // NotFound for an unknown id; FailedPrecondition when the request is waiting, awaits its sample,
  // or is still in prefill; InvalidArgument for a token outside the vocabulary or negative.
  absl::Status SetDraftTokens(RequestId id, std::span<const TokenId> draft_tokens);

  // Finishes a waiting or running request and frees its blocks; it is reported in the next
  // batch's finished_request_ids. NotFound for an unknown (or already finished) id. Blocks are
  // cached when allocated (as in vLLM), so a request aborted after Schedule() must still have that
  // batch run; its token is then not expected by UpdateFromOutput.
  absl::Status AbortRequest(RequestId id);

  // True while any request is waiting or running.
  bool HasUnfinishedRequests() const;
  int32_t num_waiting() const;
  int32_t num_running() const;
  // NotFound for an unknown (or finished) id.
  absl::StatusOr<RequestInfo> GetRequestInfo(RequestId id) const;
  const SchedulerStats& stats() const;
  const SchedulerOptions& options() const { return options_; }

  // Turns shifted-position reuse of requests' PromptChunks on (`provider`, not owned, must
  // outlive its use) or off (null). Off by default: chunks are then ignored.
  void SetChunkReuseProvider(ChunkReuseProvider* provider);

 private:
  class Impl;
  Scheduler(const SchedulerOptions& options, KvCacheManager& cache);
  SchedulerOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagedkv

#endif  // PAGEDKV_RUNTIME_SCHEDULER_H_
