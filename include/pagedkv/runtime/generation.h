// Copyright 2026 The pagedkv Authors.
//
// What goes into an Engine and what comes out (pagedkv/runtime/engine.h): a GenerationRequest
// (prompt, sampling, chunks to reuse, cache salt and priority), the GenerationResult of a
// finished request, the StepOutput of one Engine::Step and the EngineStats since creation.
#ifndef PAGEDKV_RUNTIME_GENERATION_H_
#define PAGEDKV_RUNTIME_GENERATION_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pagedkv/cache/cache_metrics.h"
#include "pagedkv/cache/cache_priority.h"
#include "pagedkv/cache/kv_cache_groups.h"
#include "pagedkv/dtype.h"
#include "pagedkv/events/kv_events.h"
#include "pagedkv/export.h"
#include "pagedkv/kernels/activation_type.h"
#include "pagedkv/model/backend_kind.h"
#include "pagedkv/model/model_config.h"
#include "pagedkv/model/model_weights.h"
#include "pagedkv/model/tokenizer.h"
#include "pagedkv/rope_config.h"
#include "pagedkv/runtime/engine_options.h"
#include "pagedkv/runtime/scheduler.h"
#include "pagedkv/tiers/host_tier.h"
#include "pagedkv/tiers/kv_tier.h"
#include "pagedkv/types.h"

namespace pagedkv {

// How to pick each next token.
struct PAGEDKV_EXPORT SamplingOptions {
  float temperature = 0.0f;  // < 1e-5 (incl. <= 0): greedy (argmax), as in vLLM
  float top_p = 1.0f;        // nucleus sampling mass in (0, 1]
  uint64_t seed = 0;         // random stream of this request (same seed, same tokens)
  // -1: none. 0..kMaxLogprobs: each generated token carries its log-probability and that many
  // most probable tokens of its row (TokenOutput::logprobs), taken from the raw logits (before
  // temperature and top-p, as vLLM's default and OpenAI report them).
  int32_t logprobs = -1;
  // -1: none. 0..kMaxLogprobs: the log-probability of every prompt token after the first given
  // the tokens before it, with that many most probable tokens (GenerationResult::prompt_logprobs;
  // vLLM's prompt_logprobs). The request then computes its whole prompt even when it is cached
  // (its blocks are still cached for others), as vLLM does. Not with GenerationRequest::chunks.
  int32_t prompt_logprobs = -1;
  static constexpr int32_t kMaxLogprobs = 20;  // vLLM's default max_logprobs
  // vLLM's sampling fields (vllm/sampling_params.py), applied in its v1 sampler's order:
  // min_tokens, logit_bias, then the penalties on the logits (engine/model/runner/logit_edits.h),
  // then temperature, min_p, top_k and top_p in the sample op. The defaults turn each off; top_k
  // and min_p do nothing for greedy requests. Logprobs stay those of the raw logits.
  int32_t top_k = 0;                // 0 or -1: off; k >= 1: tokens with logit >= the k-th largest
  float min_p = 0.0f;               // [0, 1]: drop tokens below min_p x the top probability
  float repetition_penalty = 1.0f;  // > 0: prompt and output tokens' logits / it if > 0, x it else
  float presence_penalty = 0.0f;    // [-2, 2]: subtracted from each token in the output
  float frequency_penalty = 0.0f;   // [-2, 2]: times the token's count in the output, subtracted
  int32_t min_tokens = 0;  // [0, max_new_tokens]: the stop tokens are banned until this many
  // vLLM's logit_bias is GenerationRequest::logit_bias (a vector here trips GCC 12's
  // -Wmaybe-uninitialized in callers that copy a designated-initialized request).
};

struct PAGEDKV_EXPORT GenerationRequest {
  // Prompt token ids; when empty, prompt_text is encoded (BOS first). Both empty: BOS alone.
  std::vector<TokenId> prompt_tokens = {};
  std::string prompt_text = {};  // needs a tokenizer
  int32_t max_new_tokens = 16;   // >= 1
  SamplingOptions sampling = {};
  std::string cache_salt = {};  // requests share cached blocks only with the same salt
  int32_t priority = 0;         // smaller = more important (with SchedulingPolicy::kPriority)
  // Eviction priority of the request's cached blocks and prompt spans with their own (a system
  // prompt), with EngineOptions::enable_cache_priorities (cache_priority.h).
  CachePriority cache_priority = {};
  std::vector<PrioritySpan> cache_priority_spans = {};
  // Stop at the model's stop tokens (ModelConfig::stop_token_ids): llama2.c's BOS (1) and EOS
  // (2), as run.c stops at BOS; a Hugging Face model's eos_token_id.
  bool stop_at_eos = true;
  std::vector<TokenId> stop_tokens = {};  // more tokens that end the request (kept in output)
  // vLLM's logit_bias: (token, finite bias) pairs, distinct tokens in the vocabulary, each bias
  // added to its token's logit after min_tokens and before the penalties (SamplingOptions).
  std::vector<std::pair<TokenId, float>> logit_bias = {};
  // Prompt spans (a document, a tool description) that may be reused from a chunk with the same
  // tokens and salt cached at another position (EngineOptions.chunk_reuse), and that are cached
  // as chunks once computed. Sorted by offset, non-overlapping, inside the prompt (offsets index
  // the prompt tokens, BOS included).
  std::vector<PromptChunk> chunks = {};
  // Another sample of the same prompt (OpenAI's `n`): the id of an unfinished request of this
  // engine with the same prompt and cache salt, whose prompt KV this request takes instead of
  // computing it (SchedulerRequest::prompt_source: the full blocks shared, the partial last block
  // copied, only the last token computed, once the source has computed the prompt). 0 = none; a
  // finished source is ignored. InvalidArgument for a source with another prompt or salt.
  RequestId prompt_source = 0;
};

struct PAGEDKV_EXPORT TokenLogprob {
  TokenId token = 0;
  float logprob = 0.0f;  // natural log, <= 0
};

// A generated token's log-probability and the most probable tokens of the row it was drawn from.
struct PAGEDKV_EXPORT TokenLogprobs {
  float logprob = 0.0f;           // of the generated token
  int32_t rank = 1;               // 1 + tokens of the row with a larger logit (vLLM's rank)
  std::vector<TokenLogprob> top;  // SamplingOptions::logprobs entries, descending (ties: lower id)
};

// One token produced by a step.
struct PAGEDKV_EXPORT TokenOutput {
  RequestId request_id = 0;
  TokenId token = 0;
  int32_t index = 0;                           // 0 for the request's first generated token
  std::optional<TokenLogprobs> logprobs = {};  // set when the request asked for logprobs
  // With SamplingOptions::prompt_logprobs, on the request's first token (index 0) only: its
  // prompt's log-probabilities, as GenerationResult::prompt_logprobs will hold them, so that a
  // stream can show them before the request ends. Unset otherwise.
  std::optional<std::vector<TokenLogprobs>> prompt_logprobs = {};
};

// A finished (or aborted) request.
struct PAGEDKV_EXPORT GenerationResult {
  RequestId request_id = 0;
  std::vector<TokenId> prompt_tokens;
  std::vector<TokenId> output_tokens;
  FinishReason finish_reason = FinishReason::kNone;
  std::string text;  // output_tokens decoded (when the engine has a tokenizer)
  // With SamplingOptions::prompt_logprobs: entry i is prompt token i + 1's (prompt.size() - 1
  // entries; fewer when the request was aborted before its prompt was computed).
  std::vector<TokenLogprobs> prompt_logprobs;
  // Prompt tokens served from the prefix cache at the first admission (OpenAI's cached_tokens),
  // split by tier: device + host + disk + remote = num_prefix_hit_tokens.
  int32_t num_prefix_hit_tokens = 0;
  int32_t num_device_hit_tokens = 0;   // of those, already in the device pool
  int32_t num_host_hit_tokens = 0;     // of those, loaded from the host tier
  int32_t num_remote_hit_tokens = 0;   // of those, loaded from the remote tier
  int32_t num_disk_hit_tokens = 0;     // of those, loaded from the disk tier
  int32_t num_shifted_hit_tokens = 0;  // prompt tokens reused from shifted chunks (1st admission)
  int32_t num_preemptions = 0;         // times it was preempted and recomputed
  // Over its re-admissions after preemption (each looks its prompt + generated tokens up again,
  // device -> host -> remote): tokens served from the cache instead of being recomputed, split
  // the same way (device + host + remote = num_readmission_hit_tokens). Never counted in
  // num_prefix_hit_tokens above, which stays the first admission's (as vLLM keeps preempted
  // requests' lookups apart: PrefixCacheStats.preempted_queries / preempted_hits).
  int32_t num_readmission_hit_tokens = 0;
  int32_t num_readmission_device_hit_tokens = 0;
  int32_t num_readmission_host_hit_tokens = 0;
  int32_t num_readmission_remote_hit_tokens = 0;
  int32_t num_readmission_disk_hit_tokens = 0;
  double time_to_first_token_s = 0.0;  // from AddRequest to its first token
  double latency_s = 0.0;              // from AddRequest to finishing
};

struct PAGEDKV_EXPORT StepOutput {
  std::vector<TokenOutput> tokens;         // tokens sampled in this step
  std::vector<GenerationResult> finished;  // requests that finished in (or before) this step
  // With EngineOptions.return_logits: [tokens.size(), vocab_size], row i for tokens[i].
  std::vector<float> logits;
  SchedulerStepStats batch;  // what the step computed (tokens, sequences, prefix hits, ...)
  double seconds = 0.0;      // wall time of the step
};

struct PAGEDKV_EXPORT EngineStats {
  int64_t num_steps = 0;
  int64_t num_requests = 0;            // added
  int64_t num_finished = 0;            // finished or aborted
  int64_t num_prompt_tokens = 0;       // over first admissions
  int64_t num_prefix_hit_tokens = 0;   // of those, served from the prefix cache (any tier)
  int64_t num_host_hit_tokens = 0;     // of those, loaded from the host tier
  int64_t num_remote_hit_tokens = 0;   // of those, loaded from the remote tier
  int64_t num_disk_hit_tokens = 0;     // of those, loaded from the disk tier
  int64_t num_shifted_hit_tokens = 0;  // of those, reused from chunks at another position
  // CacheBlend (every admission): reused chunk tokens recomputed through every layer, and reused
  // chunk tokens run only through layers 0..deviation_layer (re-rotated K/V kept above). Both are
  // in num_computed_tokens; layer-token work saved = partial * (n_layers - deviation_layer - 1).
  int64_t num_blend_recomputed_tokens = 0;
  int64_t num_blend_partial_tokens = 0;
  // ChunkReuseOptions::float_keys_memory: reused chunk tokens whose keys moved from the chunk's
  // kept float keys (rounded once), counted per KV cache group; the other reused tokens moved
  // from their stored, rounded keys.
  int64_t num_float_key_moves = 0;
  int64_t num_computed_tokens = 0;   // tokens run through the model (prefill + decode)
  int64_t num_generated_tokens = 0;  // tokens sampled
  int64_t num_preemptions = 0;
  // Re-admissions after preemption (see GenerationResult): how many, the tokens they looked up
  // (prompt + generated so far), and of those, served from the cache (any tier) and from the host
  // and remote tiers. Apart from the first-admission counters above.
  int64_t num_readmissions = 0;
  int64_t num_readmission_tokens = 0;
  int64_t num_readmission_hit_tokens = 0;
  int64_t num_readmission_host_hit_tokens = 0;
  int64_t num_readmission_remote_hit_tokens = 0;
  int64_t num_readmission_disk_hit_tokens = 0;
  // Speculative decoding: draft tokens run through the model (in num_computed_tokens), and of
  // those, accepted. Acceptance rate = accepted / draft.
  int64_t num_draft_tokens = 0;
  int64_t num_accepted_draft_tokens = 0;
  double busy_seconds = 0.0;  // wall time inside Step()
  // Batch sizes, bounded however long the engine runs: the first kMaxRecordedSteps steps one by
  // one, and every step in the maxima and the histogram.
  static constexpr size_t kMaxRecordedSteps = 4096;
  static constexpr size_t kHistogramBuckets = 32;
  std::vector<int32_t> step_num_tokens;  // per recorded step: tokens in the batch
  std::vector<int32_t> step_num_seqs;    // per recorded step: sequences in the batch
  int32_t max_step_num_tokens = 0;       // over every step
  int32_t max_step_num_seqs = 0;         // over every step
  // Steps by tokens in the batch: bucket 0 holds 1 token, bucket b >= 1 holds [2^b, 2^(b+1))
  // tokens (the last bucket everything from 2^31 up).
  std::array<int64_t, kHistogramBuckets> step_num_tokens_histogram = {};
};

}  // namespace pagedkv

#endif  // PAGEDKV_RUNTIME_GENERATION_H_
