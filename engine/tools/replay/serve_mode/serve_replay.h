// Copyright 2026 The pagedkv Authors.
//
// Serve-mode replay: requests arrive at their timestamps and run through the real Scheduler and
// KvCacheManager (so running requests pin their blocks and prefix hits skip prefill), while a
// simulated executor advances a virtual clock by the roofline cost of each step (cost_model.h).
// Prompts are the workload's deterministic tokens (workload.h); each sampled token is synthetic.
// Reports TTFT, time per output token, throughput and the prefix hit rate.
//
// Shifted hits: when requests mark chunks (ChunkSpan, e.g. the rag workload's documents) and
// count_shifted is on, the scheduler gets the engine's provider, ShiftedChunkReuse
// (engine/runtime/shift/shifted_chunk_reuse.h) with no ChunkKvMover, over a ChunkIndex on the
// KvCacheManager's pool (one set of reference counts, one eviction order): a chunk cached at any
// position is acquired (pinned) at admission or when a running prefill reaches it, its tokens
// count as computed (shifted hits, separate from prefix hits), and the step is charged the
// re-rotation pass over their KV instead of their prefill (cost_model.h). Every chunk span a step
// finishes computing is registered as a copy in blocks of its own by the same code as in the
// engine (only the KV copy is left out), and its copy is charged as the same memory pass.
//
// Example:
//   ServeReplayOptions options;
//   options.gpu = *FindGpuPreset("H200");
//   options.model = *FindModelPreset("llama-3-8b");
//   PAGEDKV_ASSIGN_OR_RETURN(ServeReplayResult r, RunServeReplay(workload, options));
//   std::printf("TTFT p50 %.3f s\n", r.ttft_p50_s);
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_SERVE_REPLAY_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_SERVE_REPLAY_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tools/replay/serve_mode/cost_model.h"
#include "engine/tools/replay/serve_mode/serve_tiers.h"
#include "engine/tools/replay/workload/workload.h"
#include "nlohmann/json.hpp"
#include "pagedkv/cache/kv_cache_groups.h"
#include "pagedkv/events/kv_event_batch.h"
#include "pagedkv/export.h"
#include "pagedkv/runtime/scheduler.h"

namespace pagedkv::replay {

struct PAGEDKV_EXPORT ServeReplayOptions {
  int32_t block_size = 16;              // KV block size in tokens
  int64_t capacity_blocks = 0;          // KV blocks; 0 = what fits in the GPU after the weights
  double gpu_memory_utilization = 0.9;  // fraction of GPU memory for weights + KV (capacity 0)
  std::string policy = "lru";           // eviction policy of the cache library (lru, lfu, fifo)
  GpuPreset gpu;                        // simulated GPU (required)
  ModelPreset model;                    // simulated model (required)
  CostModelOptions cost;                // roofline efficiencies and per-step overhead
  // The simulated executor needs no block tables, so the scheduler skips copying them.
  SchedulerOptions scheduler = {
      .max_num_batched_tokens = 8192, .max_num_seqs = 256, .emit_block_tables = false};
  int32_t vocab_size = 128256;  // token ids of the synthetic prompts lie below this
  // Reuse marked chunks at shifted positions (see the banner). No effect on workloads whose
  // requests mark no chunk.
  bool count_shifted = true;
  int32_t chunk_first_k = 0;  // leading tokens of each chunk always recomputed (EPIC); >= 0
  // Called now and then with the number of finished (or rejected) requests (may be empty).
  std::function<void(int64_t requests_done)> progress;
  // When set, the KvCacheManager collects event batches and this gets each step's batch (only
  // batches with events), stamped with the simulated clock (e.g. a KvEventPublisher).
  std::function<void(KvEventBatch batch)> on_event_batch;
  // Simulated host / remote KV tiers below the pool and the links their loads are charged on
  // (serve_tiers.h); off by default.
  ServeTierOptions tiers = {};
  // Non-empty: the scheduler drives a KvCacheManager with these KV cache groups
  // (HybridGroupsFor / AllFullGroupsFor in hybrid_cache_replay.h) and capacity_blocks counts its
  // pages. Tiers work over the groups (each group's pages under its hashes), and so does shifted
  // reuse of marked chunks (ShiftedChunkReuse: a copy per group, a sliding-window group's
  // holding the chunk's last `window` tokens).
  std::vector<KvCacheGroupSpec> hybrid_groups;
};

struct PAGEDKV_EXPORT ServeReplayResult {
  int64_t requests = 0;           // requests in the workload
  int64_t finished = 0;           // requests that produced all their tokens
  int64_t rejected = 0;           // requests the scheduler refused (e.g. longer than the KV pool)
  int64_t capacity_blocks = 0;    // KV pool size used
  int64_t prompt_tokens = 0;      // prompt tokens of finished requests
  int64_t output_tokens = 0;      // tokens generated
  int64_t admitted_tokens = 0;    // prompt tokens at admissions (re-admissions included)
  int64_t prefix_hit_tokens = 0;  // of those, served from the prefix cache
  int64_t computed_tokens = 0;    // tokens the simulated GPU computed (prefill + decode)
  int64_t steps = 0;
  int64_t preemptions = 0;
  int64_t evictions = 0;
  int64_t stored_blocks = 0;     // blocks that entered the prefix index (BlockStored hashes)
  double simulated_seconds = 0;  // virtual time from the first arrival to the last finish
  double ttft_mean_s = 0, ttft_p50_s = 0, ttft_p99_s = 0;  // time to first token
  double tpot_mean_s = 0;                // mean time per output token after the first
  double e2e_mean_s = 0, e2e_p99_s = 0;  // arrival to last token
  double wall_seconds = 0;               // real time the replay took
  // Means over steps that ran a batch: running requests, and pool blocks (pages, for a hybrid
  // manager) held by them after scheduling. KV per running request = mean_used_blocks /
  // mean_running.
  double mean_running = 0;
  double mean_used_blocks = 0;
  bool hybrid = false;  // options.hybrid_groups was set
  // With hybrid: the groups (KvCacheGroupsText), and the KV a running request holds, in
  // full-model blocks (mean_used_blocks / mean_running pages of LayersPerPage layers each, over
  // the model's layers). FormatServeTable and ServeResultJson report them with the mean_* fields.
  std::string kv_cache_groups;
  double kv_blocks_per_running_request = 0;
  // Prefix hits of first admissions only (prefix_hit_tokens also counts re-admissions after
  // preemption, which mostly hit the request's own blocks), and their prompt tokens.
  int64_t first_admission_hit_tokens = 0;
  int64_t first_admission_prompt_tokens = 0;
  double first_admission_hit_rate() const {
    return first_admission_prompt_tokens > 0
               ? static_cast<double>(first_admission_hit_tokens) / first_admission_prompt_tokens
               : 0;
  }
  // Shifted-position reuse (all zero unless shifted_counted). Counted over admissions, like
  // admitted_tokens (a request re-admitted after preemption counts again).
  bool shifted_counted = false;          // chunks were marked and count_shifted was on
  int64_t chunks = 0;                    // marked chunks of admitted requests
  int64_t chunks_in_prefix = 0;          // of those, entirely inside the admission's prefix hit
  int64_t chunk_hits = 0;                // chunks reused from a cached copy (at any position)
  int64_t chunk_hits_moved = 0;          // of those, from a copy at another position
  int64_t shifted_hit_tokens = 0;        // prompt tokens reused from cached chunks
  int64_t shifted_hit_tokens_moved = 0;  // of those, from copies at another position
  int64_t shifted_hit_blocks = 0;        // full request blocks wholly inside reused tokens
  int64_t chunks_registered = 0;         // chunk spans copied into blocks of their own
  int64_t chunk_register_failures = 0;   // chunk spans not registered: no block to give
  int64_t rerotated_tokens = 0;   // tokens whose KV was re-rotated or copied (reuse + copies)
  double rerotation_seconds = 0;  // simulated time of those passes
  // Tiers (all zero unless options.tiers.enabled()). Hit tokens are counted at first admissions
  // (of prefix_hit_tokens); loaded blocks and seconds over every load.
  bool tiers_enabled = false;
  int64_t host_capacity_blocks = 0, remote_capacity_blocks = 0, disk_capacity_blocks = 0;
  TierStoreOptions host_store;  // the host tier's store rule and threshold
  int64_t host_hit_tokens = 0, remote_hit_tokens = 0, disk_hit_tokens = 0;
  int64_t host_loaded_blocks = 0, remote_loaded_blocks = 0, disk_loaded_blocks = 0;
  double tier_load_seconds = 0;  // simulated time charged for tier loads

  double prefix_hit_rate() const;  // prefix_hit_tokens / admitted_tokens
  // shifted_hit_tokens / admitted_tokens.
  double shifted_hit_rate() const;
  // (prefix_hit_tokens + shifted_hit_tokens) / admitted_tokens.
  double prefix_plus_shifted_token_hit_rate() const;
  int64_t shifted_hit_tokens_same_position() const {
    return shifted_hit_tokens - shifted_hit_tokens_moved;
  }
  double output_tokens_per_second() const;  // output_tokens / simulated_seconds
  double total_tokens_per_second() const;   // (prompt + output tokens) / simulated_seconds
  double requests_per_second() const;       // finished / simulated_seconds
};

// KV blocks that fit in gpu.memory_bytes * utilization after the model's weights.
// InvalidArgument when the weights alone do not fit.
PAGEDKV_EXPORT absl::StatusOr<int64_t> KvCapacityBlocks(const GpuPreset& gpu,
                                                        const ModelPreset& model,
                                                        double gpu_memory_utilization,
                                                        int32_t block_size);

// Replays `workload` in serve mode. InvalidArgument for bad options (unknown policy, "belady",
// block size, scheduler options, model that does not fit, negative chunk_first_k, a chunk longer
// than 2^31 - 1 tokens); Internal if the scheduler stalls or, at the end, a block is still held or
// the pool's or chunk index's invariants are broken.
PAGEDKV_EXPORT absl::StatusOr<ServeReplayResult> RunServeReplay(const Workload& workload,
                                                                const ServeReplayOptions& options);

// One line per metric (shifted-hit lines when shifted_counted; KV cache group lines when hybrid).
PAGEDKV_EXPORT std::string FormatServeTable(const ServeReplayResult& result);
// Every counter and rate; the shifted fields (named as in cache mode's JSON) when shifted_counted;
// with hybrid: pages, mean_running, mean_used_pages, kv_blocks_per_running_request and the
// first-admission hits.
PAGEDKV_EXPORT nlohmann::json ServeResultJson(const ServeReplayResult& result);

// The effect of shifted reuse: `with` against the same replay with count_shifted off.
PAGEDKV_EXPORT std::string FormatShiftedEffect(const ServeReplayResult& with,
                                               const ServeReplayResult& without);
// {"ttft_mean_s", "ttft_p50_s", "ttft_p99_s", "e2e_mean_s", "computed_tokens",
//  "simulated_seconds", "prefix_hit_rate"} of the run without shifted reuse.
PAGEDKV_EXPORT nlohmann::json WithoutShiftedJson(const ServeReplayResult& without);

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_SERVE_MODE_SERVE_REPLAY_H_
