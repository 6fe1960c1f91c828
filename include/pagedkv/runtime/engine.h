// Copyright 2026 The pagedkv Authors.
//
// Engine: a Llama-family model (a llama2.c checkpoint, a Hugging Face directory or a GGUF file,
// see pagedkv/model/model_source.h) served on paged KV memory with prefix caching and continuous
// batching.
//
// Requests go in (prompt tokens or text, how many tokens to generate, sampling settings, cache
// salt, priority); each Step() asks the scheduler for one flat batch (prefill chunks and decode
// tokens of many requests, each token with its own position and KV slot), runs it through the
// model runner (CPU backend, or CUDA when built with it and a device is visible), samples one
// token for every sequence that completed its known tokens, and reports the new tokens and the
// requests that finished. Prefix caching is on by default: a request whose prompt starts with
// blocks another request computed reuses their KV instead of recomputing it. With
// EngineOptions.chunk_reuse (off by default), spans a request marks in GenerationRequest.chunks
// (a document, a tool description) are also reused when another request computed the same tokens
// at ANOTHER position: their keys are re-rotated to the new positions (docs/shifted_reuse.md).
// ChunkReuseOptions.recompute_fraction adds CacheBlend's selective recompute: the reused tokens
// also run through the first layers, and those whose K/V deviate most are recomputed fully.
//
// KV tiers (docs/tiers.md): with EngineOptions.host_tier given a capacity, blocks also live in
// a host-memory tier below the device pool. A request's lookup continues past its device prefix
// hit into the tier, block by block along the chain; tier hits are copied into device blocks and
// count as computed (GenerationResult::num_host_hit_tokens). A request preempted by recompute is
// looked up again before it is re-admitted (prompt + generated tokens), so it recomputes only what
// no tier holds (GenerationResult::num_readmission_host_hit_tokens). Blocks go to the tier when the
// pool caches them (write-through) or evicts them (write-back), per the tier's store options. With
// EngineOptions.remote_cache_url the lookup goes on into a Redis server shared by every engine
// pointed at it (pagedkv/tiers/redis_tier.h); its faults are misses, never errors.
//
// Hybrid KV cache (EngineOptions.hybrid_kv_cache, docs/prefix_cache.md): a model mixing full and
// sliding-window layers keeps KV in one KV cache group per kind of its KvCacheManager; the
// blocks a window group's requests have moved past are freed and a block holds one layer per
// group, so the same memory holds more tokens. Greedy outputs equal the all-full engine's.
// kv_cache_layout() says which layout was chosen and why.
//
// Requests that would use positions past the model's trained context (seq_len, or the extended
// context of a configured RoPE scaling) are refused unless EngineOptions.allow_context_overrun.
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<pagedkv::Engine> engine,
//                            pagedkv::Engine::Load("model.bin", "tok.bin", {}));
//   PAGEDKV_ASSIGN_OR_RETURN(pagedkv::RequestId id,
//                            engine->AddRequest({.prompt_text = "Echoes of", .max_new_tokens =
//                            32}));
//   while (engine->HasUnfinishedRequests()) {
//     PAGEDKV_ASSIGN_OR_RETURN(pagedkv::StepOutput step, engine->Step());
//     for (const pagedkv::GenerationResult& done : step.finished) Print(done.text);
//   }
//   // Or, blocking: engine->Generate({{.prompt_text = "a"}, {.prompt_text = "b"}}).
//
// Not thread-safe: one thread drives an Engine.
#ifndef PAGEDKV_RUNTIME_ENGINE_H_
#define PAGEDKV_RUNTIME_ENGINE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
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
#include "pagedkv/runtime/generation.h"
#include "pagedkv/runtime/scheduler.h"
#include "pagedkv/tiers/host_tier.h"
#include "pagedkv/tiers/kv_tier.h"
#include "pagedkv/types.h"

namespace pagedkv {

class KvCacheManager;
class ModelRunner;
struct ModelOutput;
struct ChunkFloatKeysInput;

class PAGEDKV_EXPORT Engine {
 public:
  // An engine over `weights` (shared, read-only) and an optional tokenizer (needed for text
  // prompts and GenerationResult::text). InvalidArgument for bad options (and a tokenizer whose
  // vocabulary size differs from the model's), Unavailable when the backend cannot be created.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(
      std::shared_ptr<const ModelWeights> weights, const EngineOptions& options,
      std::shared_ptr<const Tokenizer> tokenizer = nullptr);

  // Loads a model with LoadModel (pagedkv/model/model_source.h): a llama2.c checkpoint and (when
  // tokenizer_path is not empty) its tokenizer, a Hugging Face directory (config.json,
  // safetensors, its tokenizer.json unless tokenizer_path names another), or a GGUF file (its
  // own tokenizer; tokenizer_path must be empty).
  static absl::StatusOr<std::unique_ptr<Engine>> Load(const std::string& model_path,
                                                      const std::string& tokenizer_path,
                                                      const EngineOptions& options);

  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request and returns its id. InvalidArgument (nothing queued) for a text prompt
  // without a tokenizer, tokens outside the vocabulary, max_new_tokens < 1, bad sampling
  // settings, or positions past the context limit (see the banner).
  absl::StatusOr<RequestId> AddRequest(GenerationRequest request);

  // Runs one scheduled batch. Returns the sampled tokens and the requests that finished. An empty
  // StepOutput when nothing is waiting or running. The batch comes from the scheduler, so an error
  // here is a backend failure (e.g. device out of memory), after which the engine is not usable.
  absl::StatusOr<StepOutput> Step();

  // Queues `requests`, steps until each has finished and returns their results in order. Other
  // requests already queued progress too; those that finish meanwhile are reported by the next
  // Step() in StepOutput::finished, as if that step had finished them. On an AddRequest error
  // nothing of this call stays queued.
  absl::StatusOr<std::vector<GenerationResult>> Generate(std::vector<GenerationRequest> requests);

  // Ends a waiting or running request; it shows up in the next StepOutput::finished with
  // FinishReason::kAborted. NotFound for an unknown or finished id.
  absl::Status AbortRequest(RequestId id);

  bool HasUnfinishedRequests() const;

  // Positions [0, context_length()) are within the trained context (or a RoPE scaling's longer
  // one; under per-step dynamic RoPE with key reuse on, max_position_embeddings: keys written past
  // it depend on the step and are never reused, engine/runtime/context_limit.h).
  int64_t context_length() const;
  const ModelConfig& config() const;
  // The compute backend, e.g. "cpu" or "cuda:0 (NVIDIA H100)".
  // The backend and its dispatch, e.g. "cpu (2 threads, AVX2), native weights x int8 activations
  // (avx2)" (the activations part only for native block weights on the CPU).
  std::string backend_name() const;
  const EngineOptions& options() const { return options_; }
  // The KV pool's size and the rule that chose it.
  const KvPoolSize& kv_pool() const { return kv_pool_; }
  const EngineStats& stats() const { return stats_; }
  // Null when created without a tokenizer.
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }

  // Counters of each configured KV tier, top first ("host", "disk", then "remote"); empty
  // without tiers.
  std::vector<std::pair<std::string, TierStats>> tier_stats() const;

  // Named saves in the disk tier (llama.cpp's slot save; DiskTier::Pin): pins the full blocks of
  // `prompt` (under `cache_salt`) that the disk tier holds, in chain order, under `name`, so they
  // outlive eviction and restarts. Run the prompt first: its blocks reach the disk tier when the
  // pool caches them (the default write-through rule). Returns the tokens pinned (whole blocks).
  // FailedPrecondition without a disk tier or with several KV cache groups; InvalidArgument for
  // a bad name (DiskTier::Pin).
  absl::StatusOr<int64_t> SavePrefix(std::string_view name, std::span<const TokenId> prompt,
                                     std::string_view cache_salt = "");
  // Whether the disk tier holds a save `name` (false without a disk tier).
  bool HasSavedPrefix(std::string_view name) const;

  // Registers `listener` with the device pool (events with an empty medium) and every tier
  // (events with the tier's medium); see kv_events.h. Returns an id for RemoveEventListener.
  int AddEventListener(const KvEventListener& listener);
  // False when `id` is unknown.
  bool RemoveEventListener(int id);

  // The cache (one KV cache group, or one per kind of layer when kv_cache_layout().hybrid) and
  // the scheduler, for engines that build on this one (e.g. their statistics).
  KvCacheManager& kv_cache_manager() { return *cache_; }
  // The KV cache groups and why (EngineOptions::hybrid_kv_cache).
  const KvCacheLayout& kv_cache_layout() const { return kv_layout_; }
  // The prefix cache's model fingerprint (hashed into every chain root).
  const std::string& kv_cache_fingerprint() const;
  // The KV cache's metrics in Prometheus text: KvCacheManager::WritePrometheus (with
  // pagedkv_kv_cache_groups for several groups). InvalidArgument for a bad label.
  absl::Status WriteKvCachePrometheus(std::string* out,
                                      const PrometheusOptions& options = {}) const;
  Scheduler& scheduler() { return *scheduler_; }

 private:
  friend class EngineInternal;  // engine/runtime/engine_internal.h: tests reach the model runner
  struct RequestRecord;
  struct Internals;  // the model runner and the chunk reuse (engine/runtime/engine_internal.h)
  // One step's flattened batch and what it samples (engine/runtime/step_batch.h).
  struct StepBatch;
  Engine();
  absl::Status Init(std::shared_ptr<const ModelWeights> weights);
  // With EngineOptions.chunk_reuse on: the reuse provider on the cache's pool, given to the
  // scheduler.
  absl::Status CreateChunkReuse();
  // The KV cache manager for kv_layout_ and the scheduler over it.
  absl::Status CreateKvCache(const std::string& fingerprint);
  // Registers every chunk span that sequence `i` of batch_ finished computing in this step.
  absl::Status RegisterChunks(int32_t i);
  // With chunk float keys on: the rows of sequence `s` (of `record`) holding tokens of chunks it
  // will register, appended to step->key_rows / key_targets.
  void PlanKeyRows(const ScheduledSequence& s, RequestRecord& record, StepBatch* step) const;
  // Those rows' float keys (model_out.rotated_keys) into their requests' chunk key buffers.
  void StoreChunkKeys(const StepBatch& step, const ModelOutput& model_out);
  // The float keys chunk `c` of `record` registers with (none unless every token's is known).
  ChunkFloatKeysInput FloatKeysOf(RequestRecord& record, size_t c,
                                  std::vector<std::vector<float>>* storage) const;
  // Marks the chunk of `record` that sequence `s` reused tokens of in this step.
  static void MarkReusedChunk(const ScheduledSequence& s, RequestRecord& record);
  // The scheduler's prompt source for `request` (its prompt encoded as `prompt`): its
  // prompt_source while that request is unfinished, 0 once it has finished. InvalidArgument when
  // the source has another prompt or cache salt.
  absl::StatusOr<RequestId> PromptSourceOf(const GenerationRequest& request,
                                           std::span<const TokenId> prompt) const;
  GenerationResult MakeResult(RequestId id, const RequestRecord& record,
                              std::vector<TokenId> output_tokens, FinishReason reason) const;
  // Step's parts, in order.
  void ReportAborted(StepOutput* out);
  void RecordAdmission(const ScheduledSequence& s, RequestRecord& record);
  // With tiers: loads tier hits of waiting requests (never admitted, or preempted) into device
  // blocks (Onboard).
  absl::Status OnboardWaiting();
  // Blocks the running requests may take in the next step (their next tokens within the budget).
  int64_t BlocksForRunning() const;
  // With tiers: queues the requests the last Schedule preempted for onboarding again.
  void RequeuePreempted();
  // The tiers named by options_ (none, host); empty when none is configured.
  absl::Status CreateTiers();
  absl::StatusOr<std::unique_ptr<KvTier>> CreateRemoteTier(ModelRunner* runner) const;
  StepBatch BuildStepBatch();
  // Appends the logit edits (min_tokens, logit_bias, penalties) of the j-th logits row of `s`,
  // the row about to be appended.
  void AddLogitEdits(const ScheduledSequence& s, const RequestRecord& record, int32_t j,
                     StepBatch* step) const;
  // Appends the prompt positions of requests that asked for prompt logprobs as logits rows.
  void AddPromptRows(StepBatch* step) const;
  // Turns those rows into the requests' prompt logprobs.
  void CollectPromptLogprobs(const StepBatch& step, const ModelOutput& model_out);
  absl::Status RunModel(const StepBatch& step, ModelOutput* model_out);
  absl::Status CollectOutputs(const StepBatch& step, const ModelOutput& model_out, StepOutput* out);
  // The logprobs of the j-th token appended for sampled sequence k (a copied row).
  TokenLogprobs LogprobsOf(const StepBatch& step, const ModelOutput& model_out, size_t k, int32_t j,
                           TokenId token, int32_t top_k) const;
  // What sequence `i` of the step sampled, drafts verified (engine/runtime/ngram_proposer.h).
  SampledToken VerifySampled(const StepBatch& step, size_t i,
                             const std::vector<TokenId>& sampled) const;
  // With speculative decoding: proposes drafts for a greedy request that just sampled.
  absl::Status ProposeDrafts(RequestId id, const RequestRecord& record);
  void RecordStepStats(int32_t num_seqs, StepOutput* out);

  EngineOptions options_;
  KvPoolSize kv_pool_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  KvCacheLayout kv_layout_;
  std::unique_ptr<KvCacheManager> cache_;  // over kv_layout_.groups when hybrid
  std::unique_ptr<Scheduler> scheduler_;
  // Declared after cache_ and scheduler_: its chunk reuse goes before the pool it pins blocks of.
  std::unique_ptr<Internals> internals_;
  absl::flat_hash_map<RequestId, std::unique_ptr<RequestRecord>> requests_;
  // Results of requests that finished inside Generate() without being its own; the next Step()
  // reports them.
  std::vector<GenerationResult> unclaimed_finished_;
  RequestId next_id_ = 1;
  EngineStats stats_;
  ScheduledBatch batch_;  // reused between steps
};

}  // namespace pagedkv

#endif  // PAGEDKV_RUNTIME_ENGINE_H_
