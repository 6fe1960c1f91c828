// Copyright 2026 The pagedkv Authors.
//
// The KV tier flags of `pagedkv generate` and `serve` (--host-cache-*, --disk-cache*,
// --remote-cache*), the EngineOptions they set, and the --json report of a run (outputs,
// prefix-cache and per-tier statistics).
//
// Example:
//   auto flags = std::make_shared<TierFlags>();
//   AddTierFlags(cmd, flags.get());
//   ...  // in the callback:
//   PAGEDKV_RETURN_IF_ERROR(ApplyTierFlags(*flags, &engine_options));
//   std::cout << GenerateJson(*engine, results).dump(2) << "\n";
#ifndef PAGEDKV_ENGINE_TOOLS_CLI_TIER_FLAGS_H_
#define PAGEDKV_ENGINE_TOOLS_CLI_TIER_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "pagedkv/runtime/engine.h"

namespace pagedkv::cli {

struct TierFlags {
  int64_t host_cache_blocks = 0;                   // --host-cache-blocks: 0 = no host tier
  int64_t host_cache_bytes = 0;                    // --host-cache-bytes: 0 = not limited by bytes
  std::string host_cache_policy = "lru";           // --host-cache-policy: lru or arc
  std::string host_cache_store = "write-through";  // --host-cache-store: or write-back
  int32_t host_cache_threshold = 0;                // --host-cache-threshold: reuses before a store
  std::string remote_cache;                        // --remote-cache: redis://... ; empty = none
  std::string remote_cache_prefix = "pagedkv";     // --remote-cache-prefix: key-space prefix
  int64_t remote_cache_ttl = 0;                    // --remote-cache-ttl: seconds; 0 = no expiry
  int32_t remote_cache_timeout_ms = 200;           // --remote-cache-timeout-ms: connect and I/O
  std::string disk_cache;                          // --disk-cache: folder; empty = no disk tier
  std::string disk_cache_size = "10G";             // --disk-cache-size: byte budget
  std::string disk_cache_policy = "lru";           // --disk-cache-policy: lru or arc
  int32_t disk_cache_read_threads = 2;             // --disk-cache-read-threads
};

// Registers the flags on `cmd`; `flags` must outlive the parse.
void AddTierFlags(CLI::App* cmd, TierFlags* flags);

// EngineOptions{}, built out of line: g++ 12 reports its inlined default constructor as reading
// uninitialised strings (-Wmaybe-uninitialized, a false positive).
EngineOptions DefaultEngineOptions();

// Sets options->host_tier, disk_tier, remote_cache_url and remote_tier. InvalidArgument for a bad
// store rule name or disk size (policy names and the rest are checked by Engine::Create).
absl::Status ApplyTierFlags(const TierFlags& flags, EngineOptions* options);

// {"outputs": [{"prompt_ids", "output_ids", "text", "finish_reason", "prompt_tokens",
//   "prefix_cache_hit_tokens", "tier_hit_tokens": {"device", "host", "disk", "remote"},
//   "preemptions",
//   "readmission_hit_tokens": {...}}, ...],
//  "prompt_tokens", "prefix_cache_hit_tokens", "tier_hit_tokens": {...}, "readmissions",
//  "readmission_tokens", "readmission_hit_tokens": {...}, "computed_tokens",
//  "generated_tokens", "steps", "preemptions", "busy_seconds", "backend",
//  "tiers": {"host": {"hit_blocks", ...}}} for the run's results (in prompt order).
// prefix_cache_hit_tokens and tier_hit_tokens are first admissions' (prompt tokens);
// readmission_* are re-admissions' after preemption (prompt + generated tokens looked up again).
nlohmann::json GenerateJson(const Engine& engine, const std::vector<GenerationResult>& results);

}  // namespace pagedkv::cli

#endif  // PAGEDKV_ENGINE_TOOLS_CLI_TIER_FLAGS_H_
