// Copyright 2026 The pagedkv Authors.
#include "engine/tools/cli/tier_flags.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tools/cli/engine_flags.h"
#include "nlohmann/json.hpp"
#include "pagedkv/status_macros.h"
#include "pagedkv/tiers/disk_tier.h"
#include "pagedkv/tiers/kv_tier.h"

namespace pagedkv::cli {
namespace {

nlohmann::json TierHitJson(int64_t hit, int64_t host, int64_t disk, int64_t remote) {
  return {
      {"device", hit - host - disk - remote}, {"host", host}, {"disk", disk}, {"remote", remote}};
}

nlohmann::json TierStatsJson(const TierStats& s) {
  return {{"lookups", s.lookups},
          {"queried_blocks", s.queried_blocks},
          {"hit_blocks", s.hit_blocks},
          {"loaded_bytes", s.loaded_bytes},
          {"stored_blocks", s.stored_blocks},
          {"stored_bytes", s.stored_bytes},
          {"store_skipped", s.store_skipped},
          {"evictions", s.evictions},
          {"faults", s.faults},
          {"incidents", s.incidents},
          {"resident_blocks", s.resident_blocks},
          {"resident_bytes", s.resident_bytes},
          {"shared_resident_bytes", s.shared_resident_bytes}};
}

}  // namespace

EngineOptions DefaultEngineOptions() { return EngineOptions{}; }

void AddTierFlags(CLI::App* cmd, TierFlags* flags) {
  cmd->add_option("--host-cache-blocks", flags->host_cache_blocks,
                  "KV blocks in a host-memory tier below the device pool (0 = none)");
  cmd->add_option("--host-cache-bytes", flags->host_cache_bytes,
                  "also (or instead) cap the host tier at this many bytes of KV");
  cmd->add_option("--host-cache-policy", flags->host_cache_policy,
                  "host tier eviction policy: lru or arc");
  cmd->add_option("--host-cache-store", flags->host_cache_store,
                  "when blocks go to the host tier: write-through (when cached) or write-back "
                  "(when the device pool evicts them)");
  cmd->add_option("--host-cache-threshold", flags->host_cache_threshold,
                  "store only blocks reused (prefix hits) at least this many times (0 = all)");
  cmd->add_option("--remote-cache", flags->remote_cache,
                  "shared KV tier on Redis: redis://[user:password@]host[:port][/db]; engines "
                  "pointed at one server share their prefixes");
  cmd->add_option("--remote-cache-prefix", flags->remote_cache_prefix,
                  "key-space prefix of the remote tier's keys");
  cmd->add_option("--remote-cache-ttl", flags->remote_cache_ttl,
                  "seconds before a remote block expires (0 = never)");
  cmd->add_option("--remote-cache-timeout-ms", flags->remote_cache_timeout_ms,
                  "connect and reply timeout of the remote tier (a slow server is a miss)");
  cmd->add_option("--disk-cache", flags->disk_cache,
                  "KV tier of files in this folder, below the host tier: survives restarts, "
                  "shared by the engines of one machine pointed at it (docs/tiers.md)");
  cmd->add_option("--disk-cache-size", flags->disk_cache_size,
                  "byte budget of the disk tier's files for this model (K, M, G suffixes), "
                  "shared by every process using the folder: give them all the same");
  cmd->add_option("--disk-cache-policy", flags->disk_cache_policy,
                  "disk tier eviction policy: lru or arc");
  cmd->add_option("--disk-cache-read-threads", flags->disk_cache_read_threads,
                  "values a disk tier lookup reads and checks at once (1-64; threads beyond "
                  "the engine's own sleep between lookups)");
}

absl::Status ApplyTierFlags(const TierFlags& flags, EngineOptions* options) {
  HostTierOptions& host = options->host_tier;
  host.capacity_blocks = flags.host_cache_blocks;
  host.capacity_bytes = flags.host_cache_bytes;
  host.policy = flags.host_cache_policy;
  PAGEDKV_ASSIGN_OR_RETURN(host.store.rule, ParseTierStoreRule(flags.host_cache_store));
  host.store.threshold = flags.host_cache_threshold;
  if (!flags.disk_cache.empty()) {
    options->disk_tier.directory = flags.disk_cache;
    PAGEDKV_ASSIGN_OR_RETURN(options->disk_tier.capacity_bytes,
                             ParseByteSize("--disk-cache-size", flags.disk_cache_size));
    options->disk_tier.policy = flags.disk_cache_policy;
    if (flags.disk_cache_read_threads < 1 || flags.disk_cache_read_threads > kMaxDiskReadThreads) {
      return absl::InvalidArgumentError(absl::StrCat("--disk-cache-read-threads must be in [1, ",
                                                     kMaxDiskReadThreads, "], got ",
                                                     flags.disk_cache_read_threads));
    }
    options->disk_tier.read_threads = flags.disk_cache_read_threads;
  }
  options->remote_cache_url = flags.remote_cache;
  options->remote_tier.key_prefix = flags.remote_cache_prefix;
  options->remote_tier.ttl_seconds = flags.remote_cache_ttl;
  options->remote_tier.connect_timeout_ms = flags.remote_cache_timeout_ms;
  options->remote_tier.io_timeout_ms = flags.remote_cache_timeout_ms;
  return absl::OkStatus();
}

nlohmann::json GenerateJson(const Engine& engine, const std::vector<GenerationResult>& results) {
  nlohmann::json outputs = nlohmann::json::array();
  for (const GenerationResult& r : results) {
    outputs.push_back(
        {{"prompt_ids", r.prompt_tokens},
         {"output_ids", r.output_tokens},
         {"text", r.text},
         {"finish_reason", FinishReasonName(r.finish_reason)},
         {"prompt_tokens", r.prompt_tokens.size()},
         {"prefix_cache_hit_tokens", r.num_prefix_hit_tokens},
         {"tier_hit_tokens", TierHitJson(r.num_prefix_hit_tokens, r.num_host_hit_tokens,
                                         r.num_disk_hit_tokens, r.num_remote_hit_tokens)},
         {"preemptions", r.num_preemptions},
         {"readmission_hit_tokens",
          TierHitJson(r.num_readmission_hit_tokens, r.num_readmission_host_hit_tokens,
                      r.num_readmission_disk_hit_tokens, r.num_readmission_remote_hit_tokens)},
         // OpenAI's usage block: prompt tokens served from any cache tier.
         {"usage",
          {{"prompt_tokens", r.prompt_tokens.size()},
           {"completion_tokens", r.output_tokens.size()},
           {"prompt_tokens_details", {{"cached_tokens", r.num_prefix_hit_tokens}}}}}});
  }
  const EngineStats& s = engine.stats();
  nlohmann::json tiers = nlohmann::json::object();
  for (const auto& [name, stats] : engine.tier_stats()) tiers[name] = TierStatsJson(stats);
  const KvPoolSize& pool = engine.kv_pool();
  return {{"outputs", outputs},
          {"kv_pool",
           {{"num_blocks", pool.num_blocks},
            {"bytes", pool.bytes},
            {"reason", pool.reason},
            {"dtype", DTypeName(pool.dtype)},
            {"v_dtype", DTypeName(pool.v_dtype)},
            {"bytes_per_token", pool.bytes_per_token},
            {"tokens", pool.tokens}}},
          {"prompt_tokens", s.num_prompt_tokens},
          {"prefix_cache_hit_tokens", s.num_prefix_hit_tokens},
          {"tier_hit_tokens", TierHitJson(s.num_prefix_hit_tokens, s.num_host_hit_tokens,
                                          s.num_disk_hit_tokens, s.num_remote_hit_tokens)},
          {"readmissions", s.num_readmissions},
          {"readmission_tokens", s.num_readmission_tokens},
          {"readmission_hit_tokens",
           TierHitJson(s.num_readmission_hit_tokens, s.num_readmission_host_hit_tokens,
                       s.num_readmission_disk_hit_tokens, s.num_readmission_remote_hit_tokens)},
          {"computed_tokens", s.num_computed_tokens},
          {"generated_tokens", s.num_generated_tokens},
          {"steps", s.num_steps},
          {"preemptions", s.num_preemptions},
          {"draft_tokens", s.num_draft_tokens},
          {"accepted_draft_tokens", s.num_accepted_draft_tokens},
          {"busy_seconds", s.busy_seconds},
          {"backend", engine.backend_name()},
          {"tiers", tiers}};
}

}  // namespace pagedkv::cli
