// Copyright 2026 The pagedkv Authors.
//
// EngineOptions and its parts (chunk reuse, the remote tier, speculative decoding, the KV pool's
// size and the hybrid KV cache layout): how an Engine (pagedkv/runtime/engine.h) is configured.
// Every field has a working default; Engine::Create says what to fix in a bad one.
#ifndef PAGEDKV_RUNTIME_ENGINE_OPTIONS_H_
#define PAGEDKV_RUNTIME_ENGINE_OPTIONS_H_

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
  // With kReRotate: host memory, in bytes, that keeps registered chunks' float keys (as the KV
  // write rotated them, before the KV dtype's rounding) until they move, so a moved key of a
  // quantized (or 16-bit) cache is rounded once rather than twice (docs/kernels.md). Least
  // recently used chunks' keys go first; a chunk without them moves from its rounded keys.
  // >= 0; 0: off. Costs n_layers * n_kv_heads * head_dim * 4 bytes per chunk token, kept within
  // this budget; a request computing a chunk also holds its keys until the chunk registers.
  int64_t float_keys_memory = 0;
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

// The disk tier's settings (pagedkv/tiers/disk_tier.h's DiskTierOptions without what the engine
// sets: the model fingerprint and the value format come from the model). It sits below the host
// tier and above the remote one; what it holds survives a restart of the engine, and engines of
// one machine pointed at one folder share it.
struct PAGEDKV_EXPORT DiskCacheOptions {
  std::string directory = {};   // root folder (created if missing); empty: no disk tier
  int64_t capacity_bytes = 0;   // > 0 with a directory: bytes of this model's files
  std::string policy = "lru";   // "lru" or "arc"
  TierStoreOptions store = {};  // when blocks go to disk (write-through by default)
  int64_t max_pending_bytes = int64_t{256} << 20;  // > 0: queued writes beyond this are dropped
  // Values a lookup reads and checks at once, on the engine thread and read_threads - 1 helper
  // threads that sleep between lookups; in [1, 64] (DiskTierOptions::read_threads).
  int32_t read_threads = 2;
  // One line per incident and recovery; null: stderr.
  std::function<void(std::string_view)> report = nullptr;
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
  int64_t bytes = 0;            // K and V over every layer
  std::string reason;           // e.g. "room for this run's 42 tokens"
  DType dtype = DType::kF32;    // storage type of K (and V's unless v_dtype differs)
  DType v_dtype = DType::kF32;  // storage type of V (EngineOptions::KvDTypeV())
  int64_t bytes_per_token = 0;  // K and V of one token over every layer, scales included
  int64_t tokens = 0;           // tokens the pool holds (over every KV cache group)
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
  // windowed layers or whose groups don't fit, or CacheBlend's selective recompute
  // (chunk_reuse.recompute_fraction > 0: one group only). Tiers, priorities, speculative
  // decoding, metrics and shifted chunk reuse run over the groups.
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
  std::string reason;           // why hybrid is on or off, e.g. "auto: no sliding-window layers"
  DType dtype = DType::kF32;    // how the pages store K (EngineOptions::kv_dtype)
  DType v_dtype = DType::kF32;  // how the pages store V (EngineOptions::KvDTypeV())
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
  // Forces the CPU's int8 kernel for comparisons: "avx512vnni", "avx2", "portable" or "auto" (the
  // best this CPU runs). Every kernel gives the same bits; only the speed differs. The choice is
  // process-wide (it stays after this engine and applies to every engine of the process); empty
  // (the default) leaves it as it is. Init refuses a name this CPU cannot run.
  std::string int8_kernel;
  // KV blocks in the pool (per layer). 0: from kv_cache_memory, else automatic: room for
  // kv_token_budget tokens (else 32 sequences of the full context), capped at half of the memory
  // available at start. Engine::kv_pool() says which rule applied.
  int32_t num_kv_blocks = 0;
  int64_t kv_cache_memory = 0;  // bytes of K and V for the pool when num_kv_blocks is 0; 0: auto
  // Tokens this run's requests can hold at once (prompts + new tokens, an upper bound), for the
  // automatic size; 0: unknown.
  int64_t kv_token_budget = 0;
  // Storage type of cached K and V: f32, f16, bf16, or quantized (int8, fp8_e4m3, fp8_e5m2 with a
  // scale per token and head; q8_0, q4_0, q4_1 in GGUF's 32-value blocks, head_dim a multiple of
  // 32). Quantized KV holds 2-4x the tokens in the same kv_cache_memory (docs/kernels.md).
  DType kv_dtype = DType::kF32;
  // V's storage type when it differs from K's (llama.cpp's -ctk / -ctv: keys are the sensitive
  // half, e.g. K q8_0 with V q4_0); unset: kv_dtype.
  std::optional<DType> kv_dtype_v = std::nullopt;
  DType KvDTypeV() const { return kv_dtype_v.value_or(kv_dtype); }
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
  // KV tier of files on local storage, between the host and the remote tier; off while its
  // directory is empty. Needs prefix caching.
  DiskCacheOptions disk_tier = {};
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

}  // namespace pagedkv

#endif  // PAGEDKV_RUNTIME_ENGINE_OPTIONS_H_
