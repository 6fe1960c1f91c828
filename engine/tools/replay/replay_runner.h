// Copyright 2026 The pagedkv Authors.
//
// RunReplay: everything `pagedkv replay` does after parsing its flags - load or generate the
// workload, expand it into blocks, run cache mode (one capacity or a sweep, one or several
// policies) or serve mode, and print the table or JSON, the sweep CSV and the plot.
//
// Example:
//   ReplayConfig config;            // defaults: built-in "mixed" workload, cache mode, a sweep
//   config.sweep = {1000, 4000};
//   absl::Status s = RunReplay(config, std::cout, std::cerr);
#ifndef PAGEDKV_ENGINE_TOOLS_REPLAY_REPLAY_RUNNER_H_
#define PAGEDKV_ENGINE_TOOLS_REPLAY_REPLAY_RUNNER_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "pagedkv/events/kv_event_publisher.h"
#include "pagedkv/export.h"

namespace pagedkv::replay {

struct PAGEDKV_EXPORT ReplayConfig {
  std::string trace;               // Mooncake JSONL(.gz) file; empty = built-in workload
  std::string workload = "mixed";  // built-in workload when no trace is given
  int32_t requests = 0;            // built-in workload size (0 = its default)
  uint64_t seed = 1;               // built-in workload seed
  // Built-in system-prompt / conversation / mixed workloads: cache system prompts at priority
  // kPinnedSystemPromptPriority (cache mode), holding at most max_pinned_fraction of the pool.
  bool pin_system_prompts = false;
  double max_pinned_fraction = 0.5;
  std::string mode = "cache";      // "cache" or "serve"
  int32_t block_size = 16;         // cache block size in tokens
  int32_t trace_block_size = 512;  // tokens per Mooncake hash id
  bool skip_bad_lines = false;     // skip malformed trace lines instead of failing
  // Cache mode: the block model before issue 29 (a partial last hash id is a full block, no hit
  // cap, no pool block held for a partial tail); default: the serving engine's (vLLM's) rules.
  bool cache_partial_tail = false;
  int64_t capacity_blocks = -1;       // cache capacity in blocks (-1 = unset)
  double capacity_gib = -1;           // cache capacity in GiB of KV (-1 = unset; uses `model`)
  std::vector<int64_t> sweep;         // capacities (blocks) to sweep in cache mode
  std::vector<std::string> policies;  // eviction policies; empty = lru (one capacity) or all
  // Cache mode: replay through KvCacheManager (several groups) with the --model preset's layer
  // windows (hybrid_cache_replay.h), beside the same preset treated as all full attention.
  bool hybrid_kv = false;
  bool count_shifted = true;  // count (serve mode: reuse) shifted hits of chunks
  // Cache mode: simulated KV tiers below the pool (cache_replay.h); 0 = none.
  int64_t host_capacity_blocks = 0;          // host tier blocks
  int64_t remote_capacity_blocks = 0;        // shared (remote) tier blocks
  int64_t disk_capacity_blocks = 0;          // disk tier blocks (between host and remote)
  std::string tier_policy = "lru";           // the tiers' eviction policy: lru or arc
  std::string host_store = "write-through";  // write-through or write-back (ParseTierStoreRule)
  int32_t host_store_threshold = 0;          // host tier: store blocks with this many prefix hits
  std::string host_link = "pcie5";           // serve mode: link of host-tier loads (serve_tiers.h)
  std::string remote_link = "100gbe";        // serve mode: link of remote-tier loads
  std::string disk_link = "nvme";            // serve mode: the disk tier's read bandwidth
  std::string model = "llama-3-8b";          // model preset (KV bytes per token, serve-mode cost)
  std::string kv_cache_dtype;           // KV storage of the preset ("": its bf16; int8, q4_0, ...)
  std::string kv_cache_dtype_v;         // V's storage when it differs ("": kv_cache_dtype's)
  std::string gpu = "H200";             // GPU preset (serve mode)
  std::string hardware_profile;         // serve mode: measured profile file in place of gpu
  double gpu_memory_utilization = 0.9;  // serve mode: memory share for weights + KV
  int32_t max_num_seqs = 256;           // serve mode scheduler: running sequences cap
  int32_t max_num_batched_tokens = 8192;  // serve mode scheduler: tokens per step
  bool cache_aware = false;               // serve mode scheduler: longest cached prefix first
  bool json = false;                      // print one JSON object instead of the table
  bool progress = true;                   // progress bar on stderr (only on a terminal, long runs)
  std::string out_dir = "out/replay";     // where the sweep CSV and plot go
  std::string csv;                        // sweep CSV path (default <out_dir>/<workload>_sweep.csv)
  std::string plot;                       // plot path, .svg or .png (default <out_dir>/<...>.png)
  // Host memory the replay may use (estimated before each step: loading, generating, expanding,
  // the pools); 0 = half the machine's memory. Over it, the step is refused with a message
  // naming the trace line or flag responsible.
  double max_memory_gib = 0;
  // Serve mode with several instances (multi_instance_replay.h): one router over N instances,
  // each with the capacity above (or one GPU's). instances > 1 also runs the oracle router and
  // reports it under "oracle".
  int32_t instances = 1;                       // simulated instances
  std::string router = "round-robin";          // round-robin, least-loaded, prefix-aware, oracle
  double router_prefill_weight = 1.0;          // cost of one uncached request block
  double router_load_weight = 1.0;             // cost of one block of instance load
  std::string kv_events_transport = "inproc";  // prefix-aware: "inproc" or "zmq" (ipc sockets)
  // Serve mode: publish every step's KV event batch here (not owned; null = no events). The
  // JSON then has a "kv_events" object with the publisher's counters.
  KvEventPublisher* kv_events = nullptr;
};

// Runs the replay; writes results to `out` and notes (files written, skipped lines) to `err`.
// Returns the first error (a message for the user) with nothing printed to `out`.
PAGEDKV_EXPORT absl::Status RunReplay(const ReplayConfig& config, std::ostream& out,
                                      std::ostream& err);

}  // namespace pagedkv::replay

#endif  // PAGEDKV_ENGINE_TOOLS_REPLAY_REPLAY_RUNNER_H_
