// Copyright 2026 The pagedkv Authors.
//
// Serve-mode replay: requests arrive at their timestamps and run through the real Scheduler and
// KvCacheManager (so running requests pin their blocks and prefix hits skip prefill), while a
// simulated executor advances a virtual clock by the roofline cost of each step (cost_model.h).
// Prompts are the workload's deterministic tokens (workload.h); each sampled token is synthetic.
// Reports TTFT, time per output token, throughput and the prefix hit rate.
//
// Example:
//   ServeReplayOptions options;
//   options.gpu = *FindGpuPreset("H200");
//   options.model = *FindModelPreset("llama-3-8b");
//   PAGEDKV_ASSIGN_OR_RETURN(ServeReplayResult r, RunServeReplay(workload, options));
//   std::printf("TTFT p50 %.3f s\n", r.ttft_p50_s);
#ifndef PAGEDKV_ENGINE_REPLAY_SERVE_REPLAY_H_
#define PAGEDKV_ENGINE_REPLAY_SERVE_REPLAY_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/replay/cost_model.h"
#include "engine/replay/workload.h"
#include "nlohmann/json.hpp"
#include "pagedkv/scheduler.h"

namespace pagedkv::replay {

struct ServeReplayOptions {
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
  // Called now and then with the number of finished (or rejected) requests (may be empty).
  std::function<void(int64_t requests_done)> progress;
};

struct ServeReplayResult {
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
  double simulated_seconds = 0;  // virtual time from the first arrival to the last finish
  double ttft_mean_s = 0, ttft_p50_s = 0, ttft_p99_s = 0;  // time to first token
  double tpot_mean_s = 0;                // mean time per output token after the first
  double e2e_mean_s = 0, e2e_p99_s = 0;  // arrival to last token
  double wall_seconds = 0;               // real time the replay took

  double prefix_hit_rate() const;           // prefix_hit_tokens / admitted_tokens
  double output_tokens_per_second() const;  // output_tokens / simulated_seconds
  double total_tokens_per_second() const;   // (prompt + output tokens) / simulated_seconds
  double requests_per_second() const;       // finished / simulated_seconds
};

// KV blocks that fit in gpu.memory_bytes * utilization after the model's weights.
// InvalidArgument when the weights alone do not fit.
absl::StatusOr<int64_t> KvCapacityBlocks(const GpuPreset& gpu, const ModelPreset& model,
                                         double gpu_memory_utilization, int32_t block_size);

// Replays `workload` in serve mode. InvalidArgument for bad options (unknown policy, "belady",
// block size, scheduler options, model that does not fit); Internal if the scheduler stalls.
absl::StatusOr<ServeReplayResult> RunServeReplay(const Workload& workload,
                                                 const ServeReplayOptions& options);

// One line per metric.
std::string FormatServeTable(const ServeReplayResult& result);
nlohmann::json ServeResultJson(const ServeReplayResult& result);

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_REPLAY_SERVE_REPLAY_H_
