// Copyright 2026 The pagedkv Authors.
//
// The Scheduler's vocabulary (pagedkv/runtime/scheduler.h): its options and requests, the flat
// batch one Schedule() call emits (ScheduledBatch, with each sequence's tokens, positions, slots
// and block table, and the KV slot moves of shifted reuse), the sampled tokens fed back and what
// comes out of them, and the ChunkReuseProvider interface shifted reuse plugs in through.
#ifndef PAGEDKV_RUNTIME_SCHEDULER_TYPES_H_
#define PAGEDKV_RUNTIME_SCHEDULER_TYPES_H_

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
#include "pagedkv/types.h"

namespace pagedkv {

// A span of a prompt that may be reused from a cached chunk computed at another position
// (shifted-position reuse): prompt tokens [offset, offset + length).
struct PAGEDKV_EXPORT PromptChunk {
  int32_t offset = 0;  // first token, >= 0
  int32_t length = 0;  // tokens, >= 1
};

// AcquiredChunk::group_slots' entry for a chunk token whose KV a group does not keep.
inline constexpr int64_t kNoChunkSlot = -1;

// A cached chunk pinned for reuse by ChunkReuseProvider::Acquire.
struct PAGEDKV_EXPORT AcquiredChunk {
  int64_t handle = 0;          // passed back to Release
  std::vector<int64_t> slots;  // [chunk length] KV slot of each chunk token
  int32_t position = 0;        // position chunk token 0 was computed at (its keys' rotation)
  // Over a KvCacheManager of G > 1 KV cache groups, groups 1..G-1 (group 0 is `slots` and
  // `position`); both empty over one group. group_slots[g - 1] is [chunk length]: each token's
  // slot in group g's copy, kNoChunkSlot where the group keeps none (a sliding-window group keeps
  // only the chunk's last `window` tokens: no later token reads the others). group_positions[g - 1]
  // is the position group g's chunk token 0 was computed at (each group's copy has its own).
  std::vector<std::vector<int64_t>> group_slots;
  std::vector<int32_t> group_positions;
};

// Where the scheduler finds chunks to reuse at admission (shifted reuse, the engine's and replay's:
// engine/runtime/shift/shifted_chunk_reuse.h). When a request's computed tokens reach one
// of its PromptChunks (past the first num_leading_tokens_to_compute() tokens), the scheduler asks
// for the chunk; on a hit it allocates the request's slots for the chunk's remaining tokens,
// counts them as computed and lists one KvSlotMove per token in the batch. The owner runs the
// moves (re-rotating keys) before the step's forward pass and then releases every chunk acquired
// for that batch.
//
// When blend_reused_tokens() is true (CacheBlend's selective recompute), the reused tokens are
// ALSO scheduled: they are the first ScheduledSequence::num_blend_tokens tokens of the sequence in
// the batch (moved first, then partly recomputed by the model runner), they use the token budget,
// and a chunk whose reusable tokens exceed the request's share of the budget is reused over
// several steps (a step that starts inside a chunk's reusable range acquires it again).
class PAGEDKV_EXPORT ChunkReuseProvider {
 public:
  virtual ~ChunkReuseProvider() = default;
  // Leading tokens of every chunk that are always computed, never reused (EPIC's first-k).
  virtual int32_t num_leading_tokens_to_compute() const = 0;
  // True: reused tokens are also scheduled as blend tokens (see above). False by default.
  virtual bool blend_reused_tokens() const { return false; }
  // The cached chunk whose tokens equal `tokens` under `cache_salt` and `adapter_id`, pinned so
  // its KV stays until Release; nullopt when none is cached.
  virtual std::optional<AcquiredChunk> Acquire(std::span<const TokenId> tokens,
                                               std::string_view cache_salt,
                                               uint64_t adapter_id) = 0;
  // Unpins a chunk from Acquire (the scheduler calls it when it does not use the chunk).
  virtual void Release(int64_t handle) = 0;
};

// Order in which waiting requests are admitted.
enum class SchedulingPolicy {
  // First come, first served: the order of AddRequest calls; preempted requests go to the front.
  kFcfs,
  // Smallest `priority` value first, then earliest arrival_time, then AddRequest order. Preemption
  // picks the largest priority value (then latest arrival) as its victim.
  kPriority,
};

// Scheduler settings. Validate() says what is wrong with a setting.
struct PAGEDKV_EXPORT SchedulerOptions {
  // Most tokens (prefill + decode, all sequences) in one step's batch. >= 1.
  int32_t max_num_batched_tokens = 2048;
  // Most sequences running at once (and so in one batch). >= 1.
  int32_t max_num_seqs = 256;
  // Split long prompts over several steps. When false a prompt is admitted only when all of its
  // uncached tokens fit in the step's budget, and AddRequest rejects requests that never could.
  bool enable_chunked_prefill = true;
  // When > 0 (and chunked prefill is on), at most this many prefill tokens per request per step,
  // so one long prompt cannot take the whole budget from others. 0 = no per-request cap.
  int32_t long_prefill_token_threshold = 0;
  // Waiting-queue order (FCFS or priority).
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  // Cache-aware admission (SGLang's "longest prefix match"): each step, waiting requests are
  // admitted longest cached prefix first, ties broken by `policy`. Can starve requests whose
  // prefix is cold while hot ones keep arriving; use FCFS when fairness matters.
  bool cache_aware = false;
  // With cache_aware, the longest-prefix order is computed only while at most this many requests
  // wait (it probes the prefix cache for each); above it, `policy` order is used. >= 1.
  int32_t cache_aware_max_waiting = 256;
  // When > 0, a request's prompt + max_new_tokens may not exceed this (AddRequest rejects it);
  // generation also stops when a sequence reaches it. 0 = bounded only by the KV pool.
  int32_t max_model_len = 0;
  // Copy every scheduled sequence's block table into the batch (block_table_ids). false leaves
  // block_table_ids empty and block_table_start all zeros (num_blocks still counts the blocks):
  // for simulators such as replay's serve mode, which need no tables, on long contexts.
  bool emit_block_tables = true;

  // OK when every field is in range; otherwise InvalidArgument naming the field.
  absl::Status Validate() const;
};

// What the caller submits. Tokens are copied in.
struct PAGEDKV_EXPORT SchedulerRequest {
  // Caller-chosen id, unique among requests not yet finished or aborted.
  RequestId id = 0;
  // Prompt token ids; non-empty, each >= 0.
  std::vector<TokenId> prompt;
  // Most tokens to generate; >= 1. Generation stops earlier at eos_token or a stop token.
  int32_t max_new_tokens = 16;
  // Smaller = more important (vLLM's convention). Used by SchedulingPolicy::kPriority only.
  int32_t priority = 0;
  // Arrival time in the caller's clock (seconds; replay supplies a simulated one). Used for
  // priority tie-breaks and preemption order; FCFS uses AddRequest order.
  double arrival_time = 0.0;
  // Isolates prefix-cache sharing: requests share cached blocks only with the same salt.
  std::string cache_salt;
  // Adapter (e.g. LoRA) id; part of every block hash, so adapters never share blocks. 0 = none.
  uint64_t adapter_id = 0;
  // Multimodal inputs (sorted by offset), hashed into the blocks they overlap.
  std::vector<MultimodalInput> multimodal;
  // Eviction priority of the request's cached blocks, and prompt spans with their own (a system
  // prompt); used when the KvCacheManager enables priorities (cache_priority.h).
  CachePriority cache_priority;
  std::vector<PrioritySpan> cache_priority_spans;
  // Sampling this token finishes the request (the token is kept as its last output).
  std::optional<TokenId> eos_token;
  // More tokens that finish the request when sampled (kept as the last output).
  std::vector<TokenId> stop_tokens;
  // eos_token and stop_tokens finish the request only once it has this many outputs (vLLM's
  // min_tokens; its check_stop skips them before).
  int32_t min_new_tokens = 0;
  // Spans that may be reused from cached chunks at another position (with a ChunkReuseProvider);
  // sorted by offset, non-overlapping, inside the prompt.
  std::vector<PromptChunk> chunks;
  // Computes the whole prompt at every admission even when its blocks are cached (they are still
  // cached for other requests): for a caller that needs the logits of every prompt position
  // (prompt logprobs), as vLLM skips reading the prefix cache for such requests.
  bool skip_prefix_cache_lookup = false;
  // The n samples of one prompt (OpenAI's `n`): a request with the same prompt (tokens, cache
  // salt and adapter; no multimodal inputs or chunks on either), whose KV this one takes (0 =
  // none). This request is then admitted only once the source has computed its prompt (all but
  // the last token), and takes it from the source instead of computing it: the full blocks
  // through the prefix cache (shared, reference-counted), the partial last block copied into a
  // block of its own (batch.block_copies, copy on write), and only the last prompt token is
  // computed, for its own logits. Ignored when the source has finished (or is unknown, or does
  // not share the prompt), over several KV cache groups and with skip_prefix_cache_lookup: the
  // prompt is then computed (or found in the prefix cache) as usual.
  RequestId prompt_source = 0;
};

// One token whose KV is moved before a step's forward pass (shifted-position reuse): its key is
// re-rotated from old_position to new_position, its value copied.
struct PAGEDKV_EXPORT KvSlotMove {
  int64_t src_slot = 0;
  int64_t dst_slot = 0;
  int32_t old_position = 0;
  int32_t new_position = 0;
};

// One sequence of a ScheduledBatch. Its tokens are batch.token_ids[query_start ..
// query_start + num_scheduled_tokens), at positions num_computed_tokens onward.
struct PAGEDKV_EXPORT ScheduledSequence {
  RequestId request_id = 0;
  // Offset of this sequence's first token in the flat batch (== batch.query_start_loc[i]).
  int32_t query_start = 0;
  // Tokens computed for this sequence in this step (>= 1).
  int32_t num_scheduled_tokens = 0;
  // Tokens whose KV was already in the cache before this step (prefix hits included; blend tokens
  // excluded: they are scheduled).
  int32_t num_computed_tokens = 0;
  // Offset of this sequence's block table in batch.block_table_ids (== block_table_start[i]).
  int32_t block_table_start = 0;
  // Blocks in its table: ceil((num_computed_tokens + num_scheduled_tokens) / block_size) (also
  // when SchedulerOptions::emit_block_tables is false and the table itself is not in the batch).
  int32_t num_blocks = 0;
  // True when this step computes the sequence's last known token, so the caller samples one token
  // from the logits of its last scheduled position (false for a prompt chunk that is not the end).
  bool samples = false;
  // True when the request was admitted from the waiting queue in this step (new or resumed after
  // preemption); the model runner must forget any state it holds for it.
  bool newly_admitted = false;
  // For newly admitted sequences: prompt tokens found in the prefix cache (counted as computed).
  int32_t num_prefix_hit_tokens = 0;
  // Tokens reused from a cached chunk at another position in this step (moved by
  // batch.slot_moves): the last tokens before this step's, counted in num_computed_tokens; or,
  // with a blending provider, this step's first num_blend_tokens tokens.
  int32_t num_shifted_hit_tokens = 0;
  // With a provider whose blend_reused_tokens() is true: the first num_blend_tokens scheduled
  // tokens are reused chunk tokens (== num_shifted_hit_tokens), moved before the forward pass and
  // then run through the first layers for CacheBlend; their logits are never wanted. 0 otherwise.
  int32_t num_blend_tokens = 0;
  // Speculative decoding (Scheduler::SetDraftTokens): the last num_draft_tokens tokens of the
  // sequence are draft tokens at positions past the request's tokens, in lookahead slots. The
  // caller verifies them from the logits of all 1 + num_draft_tokens positions and reports the
  // accepted ones in SampledToken::num_accepted_draft_tokens. 0 otherwise.
  int32_t num_draft_tokens = 0;

  // For newly admitted sequences: prompt tokens whose KV was copied from the prompt source's
  // blocks (SchedulerRequest::prompt_source, batch.block_copies), counted in num_computed_tokens.
  int32_t num_copied_tokens = 0;

  // KV length after this step: num_computed_tokens + num_scheduled_tokens.
  int32_t seq_len() const { return num_computed_tokens + num_scheduled_tokens; }
};

// Per-step counters, filled by Schedule() (the `finished` counts by the UpdateFromOutput and
// AbortRequest calls since the previous Schedule()).
struct PAGEDKV_EXPORT SchedulerStepStats {
  int64_t step = 0;                        // 0-based step index
  int32_t num_scheduled_tokens = 0;        // token_ids.size()
  int32_t num_prefill_tokens = 0;          // tokens of sequences not in plain decode
  int32_t num_decode_tokens = 0;           // tokens of sequences decoding their next token
  int32_t num_scheduled_seqs = 0;          // sequences.size()
  int32_t num_running = 0;                 // running requests after scheduling
  int32_t num_waiting = 0;                 // waiting requests after scheduling
  int32_t num_newly_admitted = 0;          // admitted from the waiting queue this step
  int32_t num_preempted = 0;               // preempted this step
  int32_t num_finished = 0;                // finished or aborted since the previous step
  int64_t num_prefix_hit_tokens = 0;       // prefix hits of the requests admitted this step
  int64_t num_admitted_prompt_tokens = 0;  // all tokens of the requests admitted this step
  int64_t num_shifted_hit_tokens = 0;      // tokens reused from chunks at another position
  int32_t num_blend_tokens = 0;            // of those, scheduled for CacheBlend (in the batch)
  int32_t num_draft_tokens = 0;            // draft tokens scheduled for verification
  int64_t num_copied_tokens = 0;           // prompt tokens copied from a prompt source
  int32_t num_used_blocks = 0;             // KV blocks held by running requests after scheduling
  int32_t num_total_blocks = 0;            // KV pool size
};

// Totals since construction.
struct PAGEDKV_EXPORT SchedulerStats {
  int64_t num_steps = 0;
  int64_t num_scheduled_tokens = 0;
  int64_t num_preemptions = 0;
  int64_t num_finished = 0;  // finished by EOS/stop/length (aborts not counted)
  int64_t num_aborted = 0;
  int64_t num_admissions = 0;             // admissions, re-admissions after preemption included
  int64_t num_admitted_tokens = 0;        // tokens of those admissions
  int64_t num_prefix_hit_tokens = 0;      // of those, found in the prefix cache
  int64_t num_shifted_hit_tokens = 0;     // tokens reused from chunks at another position
  int64_t num_draft_tokens = 0;           // draft tokens scheduled (speculative decoding)
  int64_t num_accepted_draft_tokens = 0;  // of those, accepted by UpdateFromOutput
  int64_t num_copied_tokens = 0;          // prompt tokens copied from a prompt source
};

// One block's KV copied into another before a step's forward pass (every layer's K and V pages,
// quantization scales included): the partial last prompt block of a request that takes its prompt
// from a prompt source (SchedulerRequest::prompt_source), copied on write.
struct PAGEDKV_EXPORT BlockCopy {
  BlockId src = 0;
  BlockId dst = 0;
};

// One step's work, flat (the layout the model runner and kernels use). n = sequences.size().
// A newly admitted sequence's prefix hit may cover blocks whose KV an earlier sequence of the same
// batch computes in this step (blocks are cached when allocated, as in vLLM): the model runner
// must write the KV of sequences 0..i-1 before sequence i's attention reads it, e.g. by writing
// the whole batch's KV per layer before that layer's attention (the usual order).
struct PAGEDKV_EXPORT ScheduledBatch {
  // One entry per scheduled token, sequences one after another.
  std::vector<TokenId> token_ids;
  // Position id of each token (its index in its sequence).
  std::vector<int32_t> positions;
  // KV slot of each token: block_id * block_size + position % block_size.
  std::vector<int64_t> slot_mapping;
  std::vector<ScheduledSequence> sequences;
  // [n + 1]: sequence i's tokens are [query_start_loc[i], query_start_loc[i + 1]).
  std::vector<int32_t> query_start_loc;
  // Block tables, concatenated (CSR): sequence i's table is
  // block_table_ids[block_table_start[i], block_table_start[i + 1]).
  std::vector<BlockId> block_table_ids;
  // [n + 1] offsets into block_table_ids (all zeros when emit_block_tables is false).
  std::vector<int32_t> block_table_start;
  // Requests that finished (EOS, stop token, length) or were aborted since the previous step.
  std::vector<RequestId> finished_request_ids;
  // Requests preempted in this step (blocks freed, back in the waiting queue).
  std::vector<RequestId> preempted_request_ids;
  // Scheduling over a KvCacheManager of G > 1 KV cache groups: groups 1..G-1 (group 0 is
  // block_table_ids and slot_mapping above). group_block_table_ids[g - 1] is group g's tables in
  // block_table_ids' layout (same block_table_start offsets; kNullBlock for blocks released out
  // of a sliding window, never for a block a scheduled token is written to; empty when
  // emit_block_tables is false); group_slot_mapping[g - 1][t] is token t's slot in group g.
  // Both empty (size 0) over a manager of one group.
  std::vector<std::vector<BlockId>> group_block_table_ids;
  std::vector<std::vector<int64_t>> group_slot_mapping;
  // KV to move (re-rotate) before the forward pass: shifted-position reuse of cached chunks.
  std::vector<KvSlotMove> slot_moves;
  // The same over G > 1 KV cache groups, groups 1..G-1 (slot_moves is group 0's):
  // group_slot_moves[g - 1] holds group g's moves, in its slots (a sliding-window group moves
  // only the chunk tokens it keeps). Empty (size 0) over a manager of one group.
  std::vector<std::vector<KvSlotMove>> group_slot_moves;
  // Blocks to copy before the forward pass (group 0's; prompt sources are used over one group).
  std::vector<BlockCopy> block_copies;
  // Tokens per block of the KV cache (for slot arithmetic).
  int32_t block_size = 0;
  SchedulerStepStats stats;

  int32_t num_sequences() const { return static_cast<int32_t>(sequences.size()); }
  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  // Sequence i's block table (empty when emit_block_tables is false).
  // REQUIRES: 0 <= i < num_sequences().
  std::span<const BlockId> BlockTable(int32_t i) const;
  // Sequence i's block table in KV cache group g (group 0: BlockTable(i)).
  // REQUIRES: 0 <= i < num_sequences(), 0 <= g < num_kv_cache_groups().
  std::span<const BlockId> GroupBlockTable(int32_t g, int32_t i) const;
  // 1 + group_slot_mapping.size().
  int32_t num_kv_cache_groups() const {
    return 1 + static_cast<int32_t>(group_slot_mapping.size());
  }
  // True when no token is scheduled (nothing to run this step).
  bool empty() const { return token_ids.empty(); }
  // Empties every field, keeping capacity.
  void Clear();
};

// The token sampled for one sequence of the last batch.
struct PAGEDKV_EXPORT SampledToken {
  RequestId request_id = 0;
  // The sampled token; after draft tokens, the one sampled after the last accepted draft (the
  // bonus token, or the correction of the first rejected draft).
  TokenId token = 0;
  // For a sequence with draft tokens: how many of its drafts, from the first, were accepted
  // (0 .. ScheduledSequence::num_draft_tokens). They are appended before `token`.
  int32_t num_accepted_draft_tokens = 0;
};

enum class FinishReason {
  kNone,     // still running
  kStop,     // sampled eos_token or a stop token
  kLength,   // reached max_new_tokens (or max_model_len)
  kAborted,  // AbortRequest
};

// "none", "stop", "length" or "aborted" (OpenAI's and vLLM's finish_reason strings).
PAGEDKV_EXPORT const char* FinishReasonName(FinishReason reason);

// What UpdateFromOutput did with one sampled token.
struct PAGEDKV_EXPORT RequestOutput {
  RequestId request_id = 0;
  TokenId token = 0;
  // Output tokens so far, this one included.
  int32_t num_output_tokens = 0;
  FinishReason finish_reason = FinishReason::kNone;
  // When finished: every generated token, in order (empty otherwise).
  std::vector<TokenId> output_tokens;
  // Every token this update appended, in order: the accepted draft tokens, then `token` (which
  // is then new_tokens.back()). Generation stops at the first stop token or at the length limit,
  // so tokens past it are dropped.
  std::vector<TokenId> new_tokens;

  bool finished() const { return finish_reason != FinishReason::kNone; }
};

// Where a request is.
enum class RequestStatus { kWaiting, kRunning };

// A snapshot of one unfinished request (GetRequestInfo).
struct PAGEDKV_EXPORT RequestInfo {
  RequestId id = 0;
  RequestStatus status = RequestStatus::kWaiting;
  int32_t num_prompt_tokens = 0;
  int32_t num_output_tokens = 0;
  // Tokens whose KV is computed (or scheduled to be) in the current admission.
  int32_t num_computed_tokens = 0;
  // Prefix-cache hits at the latest admission.
  int32_t num_prefix_hit_tokens = 0;
  int32_t num_preemptions = 0;
};

}  // namespace pagedkv

#endif  // PAGEDKV_RUNTIME_SCHEDULER_TYPES_H_
