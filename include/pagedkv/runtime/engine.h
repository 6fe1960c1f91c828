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
#include "pagedkv/runtime/scheduler.h"
#include "pagedkv/tiers/host_tier.h"
#include "pagedkv/tiers/kv_tier.h"
#include "pagedkv/types.h"

namespace pagedkv {

class KvCacheManager;
class ModelRunner;

// Shifted-position reuse of GenerationRequest::chunks (see docs/shifted_reuse.md).
enum class ChunkReuseMode {
  kOff,       // chunks are ignored: every token not in the prefix cache is computed
  kReRotate,  // a chunk cached at another position is reused, keys re-rotated (V copied)
};

// CacheBlend (recompute_fraction > 0, with kReRotate): a step that reuses a chunk also puts its
// reused tokens in the batch (they use the token budget). They run through layers
// 0..deviation_layer in context, each at its own position, writing fresh K/V there; at
// deviation_layer their fresh K/V is compared with the re-rotated K/V, and the recompute_fraction
// of each chunk's reused tokens (ceil; of each part when the budget splits a chunk over steps)
// with the largest deviation (squared L2 of K and V) go on through every layer with the rest of the
// batch. The others stop there and keep their re-rotated K/V in the layers above. Fraction 1 gives
// the same KV (and greedy tokens) as computing the chunk; 0 is plain re-rotated reuse.
struct PAGEDKV_EXPORT ChunkReuseOptions {
  ChunkReuseMode mode = ChunkReuseMode::kOff;  // off by default
  // With kReRotate: the first k tokens of each reused chunk are recomputed (EPIC). >= 0.
  int32_t first_k = 0;
  // With kReRotate: CacheBlend's fraction of each reused chunk's tokens recomputed through every
  // layer, in [0, 1]; 0: off. Needs kReRotate when > 0.
  double recompute_fraction = 0.0;
  // The layer whose K/V deviation picks them (CacheBlend uses an early one); >= 0, and below the
  // model's n_layers when recompute_fraction > 0.
  int32_t deviation_layer = 1;
};

// The shared Redis tier's settings (pagedkv/tiers/redis_tier.h's RedisTierOptions without what the
// engine sets: the endpoint comes from EngineOptions.remote_cache_url, the model fingerprint and
// the value format from the model).
struct PAGEDKV_EXPORT RemoteCacheOptions {
  std::string key_prefix = "pagedkv";  // key-space prefix
  int64_t ttl_seconds = 0;             // > 0: keys expire; 0: never
  int32_t connect_timeout_ms = 200;    // > 0
  int32_t io_timeout_ms = 200;         // > 0: per reply
  int32_t backoff_initial_ms = 100;    // > 0: wait before the first reconnect attempt
  int32_t backoff_max_ms = 5000;       // >= backoff_initial_ms
  TierStoreOptions store = {};         // when blocks go to Redis (write-through by default)
  // One line per incident and recovery; null: stderr.
  std::function<void(std::string_view)> report = nullptr;
  // Monotonic milliseconds for the backoff; null: the steady clock (tests set it).
  std::function<int64_t()> now_ms = nullptr;
};

// Speculative decoding by prompt lookup (vLLM's n-gram speculator, no draft model): after each
// sampled token of a greedy request, the last n tokens of its context (n from
// prompt_lookup_max down to prompt_lookup_min) are searched earlier in the context and the tokens
// that followed are proposed as drafts. The next step runs the last token and the drafts
// together; drafts that match the model's argmax are accepted, plus the model's next token, and
// the rest are rolled back (their KV slots released, never cached). Greedy output ids are the same
// as without it. Requests that sample (temperature > 0) are never drafted for.
struct PAGEDKV_EXPORT SpeculativeOptions {
  int32_t num_speculative_tokens = 0;  // k: most drafts per step; 0 = off. In [0, 64].
  int32_t prompt_lookup_min = 1;       // shortest n-gram searched, >= 1
  int32_t prompt_lookup_max = 3;       // longest n-gram searched, >= prompt_lookup_min, <= 64
};

// The KV pool an engine allocated, and why that size (EngineOptions.num_kv_blocks).
struct PAGEDKV_EXPORT KvPoolSize {
  int64_t num_blocks = 0;
  int64_t bytes = 0;   // K and V over every layer
  std::string reason;  // e.g. "room for this run's 42 tokens"
};

// Whether the Engine's KvCacheManager keeps one KV cache group per
// kind of layer (full attention; each sliding window), sliding-window groups releasing the blocks
// that fall out of their window. Greedy outputs are identical either way; only KV memory differs.
enum class HybridKvCacheMode : uint8_t {
  // On when the model has sliding-window layers whose groups the hybrid layout can hold (at least
  // one full-attention layer, layer counts that split into equal groups) and no option needs a
  // single group (see kOn); else off. Engine::kv_cache_layout() says which and why.
  kAuto,
  // Always, or Engine creation fails (InvalidArgument) naming the reason: a model without
  // windowed layers or whose groups don't fit, KV tiers (host_tier, remote_cache_url) or chunk
  // reuse (they fill group 0's blocks only).
  kOn,
  kOff,  // one KV cache group: every layer keeps every block
};

// The KV cache layout the Engine chose (Engine::kv_cache_layout()).
struct PAGEDKV_EXPORT KvCacheLayout {
  bool hybrid = false;                   // a KvCacheManager over `groups`
  std::vector<KvCacheGroupSpec> groups;  // hybrid: group 0 full attention, equal num_layers
  std::vector<int32_t> layer_group;      // hybrid: [n_layers] each layer's group
  // Layers whose K/V one block holds (page arrays): n_layers, or hybrid the groups' num_layers.
  int32_t layers_per_block = 0;
  std::string reason;  // why hybrid is on or off, e.g. "auto: no sliding-window layers"
};

struct PAGEDKV_EXPORT EngineOptions {
  BackendKind backend = BackendKind::kAuto;  // CPU always; CUDA when built with it and visible
  // CPU backend threads (the engine's thread included); 0: every hardware thread. Greedy ids and
  // logits are bit-identical for any count. In [0, 1024].
  int32_t num_threads = 0;
  int32_t block_size = 16;  // tokens per KV block
  // How Engine::Load keeps a GGUF file's block-format matrices: kNative (the default) in their
  // blocks, which the CPU backend computes over (a sixth of fp32's memory for Q4_1, faster decode
  // and prefill: bench/RESULTS.md, issue #28); kF32 converted at load. A run that gets the CUDA
  // backend loads kF32 either way.
  WeightStorage weights = WeightStorage::kNative;
  // How those block-format weights (Q4_0 / Q4_1 / Q8_0) multiply the activations on the CPU
  // backend: kInt8 (the default: activations quantized per 32 values, exact integer dots; 1.4-1.9x
  // the prefill and batched-decode speed, a sequence's logits independent of its batch) or kF32
  // (decoded weights times fp32 activations, as before; closer to fp32 weights). docs/kernels.md
  // gives the measurements behind the default.
  ActivationType activations = ActivationType::kInt8;
  // KV blocks in the pool (per layer). 0: from kv_cache_memory, else automatic: room for
  // kv_token_budget tokens (else 32 sequences of the full context), capped at half of the memory
  // available at start. Engine::kv_pool() says which rule applied.
  int32_t num_kv_blocks = 0;
  int64_t kv_cache_memory = 0;  // bytes of K and V for the pool when num_kv_blocks is 0; 0: auto
  // Tokens this run's requests can hold at once (prompts + new tokens, an upper bound), for the
  // automatic size; 0: unknown.
  int64_t kv_token_budget = 0;
  DType kv_dtype = DType::kF32;         // storage type of cached K and V
  bool enable_prefix_caching = true;    // reuse cached prompt blocks across requests
  std::string eviction_policy = "lru";  // cached-block eviction: "lru", "lfu", "fifo"
  // Batching: token budget per step, running sequences, chunked prefill, policy. Its
  // max_model_len is set by the engine (the context limit, or 0 with allow_context_overrun).
  SchedulerOptions scheduler = {};
  // RoPE override (e.g. a scaling variant); unset: the model's (ModelConfig::rope for Hugging
  // Face checkpoints, else llama2.c's: interleaved, base 10000, none).
  std::optional<RopeConfig> rope = std::nullopt;
  // Allow requests whose positions pass the trained context (the model is then extrapolating).
  bool allow_context_overrun = false;
  // Return each sampled token's logits row in StepOutput::logits (for tests and studies).
  bool return_logits = false;
  // Model name hashed into the prefix cache's root (with the shape and RoPE fingerprint).
  std::string model_id = "llama2c";
  // Reuse of marked prompt chunks cached at other positions (off by default). Reused chunks'
  // keys are exact at layer 0 only, so blocks holding them (and every later block of that
  // request) are never offered to the prefix cache.
  ChunkReuseOptions chunk_reuse = {};
  // Host-memory KV tier below the device pool; off while both capacities are 0. The engine sets
  // value_bytes (one block's K/V pages of every layer) and block_size. Needs prefix caching.
  HostTierOptions host_tier = {};
  // Shared KV tier on a Redis server, below the host tier: "redis://[user:pass@]host[:port][/db]";
  // empty: none. Needs a build with PAGEDKV_BUILD_REDIS (Unimplemented otherwise).
  std::string remote_cache_url = {};
  // Its settings (key prefix, TTL, timeouts, store rule).
  RemoteCacheOptions remote_tier = {};
  // Speculative decoding by prompt lookup (off by default).
  SpeculativeOptions speculative = {};
  // Block lifetime / idle-before-evict / reuse-gap histograms in the cache manager
  // (KvCacheManager::WritePrometheus); costs a clock read per store, hit, release and eviction.
  bool collect_block_metrics = false;
  // Eviction priorities of cached blocks (GenerationRequest::cache_priority and its spans):
  // lowest first, the eviction policy's order among equals; blocks above the default may hold at
  // most max_high_priority_fraction of the pool.
  bool enable_cache_priorities = false;
  double max_high_priority_fraction = 0.5;
  // Hybrid KV cache for sliding-window models (see HybridKvCacheMode).
  HybridKvCacheMode hybrid_kv_cache = HybridKvCacheMode::kAuto;
};

// How to pick each next token.
struct PAGEDKV_EXPORT SamplingOptions {
  float temperature = 0.0f;  // < 1e-5 (incl. <= 0): greedy (argmax), as in vLLM
  float top_p = 1.0f;        // nucleus sampling mass in (0, 1]
  uint64_t seed = 0;         // random stream of this request (same seed, same tokens)
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
  // Prompt spans (a document, a tool description) that may be reused from a chunk with the same
  // tokens and salt cached at another position (EngineOptions.chunk_reuse), and that are cached
  // as chunks once computed. Sorted by offset, non-overlapping, inside the prompt (offsets index
  // the prompt tokens, BOS included).
  std::vector<PromptChunk> chunks = {};
};

// One token produced by a step.
struct PAGEDKV_EXPORT TokenOutput {
  RequestId request_id = 0;
  TokenId token = 0;
  int32_t index = 0;  // 0 for the request's first generated token
};

// A finished (or aborted) request.
struct PAGEDKV_EXPORT GenerationResult {
  RequestId request_id = 0;
  std::vector<TokenId> prompt_tokens;
  std::vector<TokenId> output_tokens;
  FinishReason finish_reason = FinishReason::kNone;
  std::string text;  // output_tokens decoded (when the engine has a tokenizer)
  // Prompt tokens served from the prefix cache at the first admission (OpenAI's cached_tokens),
  // split by tier: device + host + remote = num_prefix_hit_tokens.
  int32_t num_prefix_hit_tokens = 0;
  int32_t num_device_hit_tokens = 0;   // of those, already in the device pool
  int32_t num_host_hit_tokens = 0;     // of those, loaded from the host tier
  int32_t num_remote_hit_tokens = 0;   // of those, loaded from the remote tier
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
  int64_t num_shifted_hit_tokens = 0;  // of those, reused from chunks at another position
  // CacheBlend (every admission): reused chunk tokens recomputed through every layer, and reused
  // chunk tokens run only through layers 0..deviation_layer (re-rotated K/V kept above). Both are
  // in num_computed_tokens; layer-token work saved = partial * (n_layers - deviation_layer - 1).
  int64_t num_blend_recomputed_tokens = 0;
  int64_t num_blend_partial_tokens = 0;
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

  // Counters of each configured KV tier, top first ("host", then "remote"); empty without tiers.
  std::vector<std::pair<std::string, TierStats>> tier_stats() const;

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
  // Marks the chunk of `record` that sequence `s` reused tokens of in this step.
  static void MarkReusedChunk(const ScheduledSequence& s, RequestRecord& record);
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
  absl::Status RunModel(const StepBatch& step, std::vector<float>* logits,
                        std::vector<TokenId>* sampled);
  absl::Status CollectOutputs(const StepBatch& step, const std::vector<TokenId>& sampled,
                              StepOutput* out);
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
