// Copyright 2026 The pagedkv Authors.
//
// `pagedkv replay`: measures prefix-cache hit rates on built-in workloads or Mooncake traces by
// driving the real BlockPool (cache mode) or the real Scheduler + KvCacheManager with a simulated
// executor (serve mode). See docs/replay.md.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/tools/cli/commands.h"
#include "engine/tools/cli/flag_checks.h"
#include "engine/tools/cli/kv_events_flags.h"
#include "engine/tools/replay/cache_mode/cache_replay.h"
#include "engine/tools/replay/replay_runner.h"
#include "engine/tools/replay/serve_mode/cost_model.h"
#include "engine/tools/replay/workload/generators.h"

namespace pagedkv::cli {

namespace {

using replay::ReplayConfig;

// "1000,4000,16000" as capacities; throws CLI::ValidationError (reported by CLI11 as a usage
// error) for an empty item or one that is not an integer > 0.
std::vector<int64_t> ParseSweep(const std::string& text) {
  std::vector<int64_t> capacities;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    int64_t capacity = 0;
    if (!absl::SimpleAtoi(item, &capacity) || capacity <= 0) {
      throw CLI::ValidationError(
          "--sweep", absl::StrFormat("'%s' in '%s' is not a capacity in blocks > 0; give e.g. "
                                     "1000,4000,16000",
                                     item, text));
    }
    capacities.push_back(capacity);
  }
  return capacities;
}

void AddWorkloadFlags(CLI::App* sub, ReplayConfig* config) {
  sub->add_option("--trace", config->trace,
                  "Mooncake trace, JSON Lines, plain or .gz (timestamp, input_length, "
                  "output_length, hash_ids)");
  sub->add_option("--workload", config->workload,
                  "Built-in workload when no --trace: " +
                      absl::StrJoin(replay::BuiltinWorkloadNames(), ", "))
      ->capture_default_str();
  sub->add_option("--requests", config->requests,
                  "Approximate number of requests of the built-in workload (0 = its default)")
      ->check(NonNegativeNumber());
  sub->add_option("--seed", config->seed, "Seed of the built-in workload")->capture_default_str();
  sub->add_flag("--pin-system-prompts", config->pin_system_prompts,
                "Cache mode, built-in workloads: cache system prompts at eviction priority 90 "
                "(the rest at the default 35)");
  sub->add_option("--max-pinned-fraction", config->max_pinned_fraction,
                  "With --pin-system-prompts: the share of the pool pinned blocks may hold")
      ->capture_default_str();
  sub->add_option("--mode", config->mode,
                  "cache: hit rates, no timing, file order; serve: arrivals, scheduler, "
                  "simulated GPU, TTFT and throughput")
      ->capture_default_str();
  sub->add_option("--block-size", config->block_size, "Cache block size in tokens")
      ->capture_default_str()
      ->check(PositiveNumber());
  sub->add_option("--trace-block-size", config->trace_block_size,
                  "Tokens per trace hash id (Mooncake traces: 512)")
      ->capture_default_str()
      ->check(PositiveNumber());
  sub->add_flag("--skip-bad-lines", config->skip_bad_lines,
                "Skip (and count) malformed trace lines instead of stopping");
  sub->add_flag("--hybrid-kv", config->hybrid_kv,
                "Replay through the hybrid KV cache manager with the --model preset's "
                "sliding-window layers (gpt-oss-20b, gemma-3-27b) and report KV memory per "
                "request (serve mode: also throughput, TTFT, running requests) beside the same "
                "model treated as all full attention at the same KV memory");
  sub->add_flag("--cache-partial-tail", config->cache_partial_tail,
                "Cache mode: the block model before issue 29 (a trace's partial last hash id is "
                "a cached block, no hit cap); default: vLLM's rules (full blocks only, a hit "
                "covers at most input_length - 1 tokens)");
}

// The cache's size: blocks, or GiB of the preset's KV in its dtypes.
void AddCapacityFlags(CLI::App* sub, ReplayConfig* config) {
  auto* cap_blocks =
      sub->add_option("--capacity-blocks", config->capacity_blocks, "Cache capacity in blocks")
          ->check(PositiveNumber());
  sub->add_option("--capacity-gib", config->capacity_gib,
                  "Cache capacity in GiB of KV, with the --model's KV bytes per token")
      ->excludes(cap_blocks)
      ->check(PositiveNumber());
  sub->add_option("--kv-cache-dtype", config->kv_cache_dtype,
                  "KV storage of the --model preset (default bf16): f32, f16, bf16, int8, "
                  "fp8_e4m3, fp8_e5m2, q8_0, q4_0, q4_1; sets the blocks --capacity-gib and "
                  "serve mode's memory hold (scales included) and serve mode's KV bytes read");
  sub->add_option("--kv-cache-dtype-v", config->kv_cache_dtype_v,
                  "V's storage when it differs from K's (--kv-cache-dtype), as llama.cpp's -ctv");
}

void AddCacheFlags(CLI::App* sub, ReplayConfig* config) {
  AddCapacityFlags(sub, config);
  sub->add_option_function<std::string>(
      "--sweep", [config](const std::string& text) { config->sweep = ParseSweep(text); },
      "Cache mode: capacities (blocks) to sweep, e.g. 1000,4000,16000; writes a CSV and a plot");
  sub->add_option("--policies,--policy", config->policies,
                  "Eviction policies: " + absl::StrJoin(replay::CacheReplayPolicyNames(), ",") +
                      " (belady: cache mode only). Default: lru for one capacity, all of them "
                      "for a sweep")
      ->delimiter(',');
  sub->add_option("--host-capacity-blocks", config->host_capacity_blocks,
                  "A simulated host-memory KV tier of this many blocks below the pool (0 = none); "
                  "with --instances, one per instance")
      ->check(NonNegativeNumber());
  sub->add_option("--remote-capacity-blocks", config->remote_capacity_blocks,
                  "A simulated shared (remote) KV tier of this many blocks below the host tier "
                  "(0 = none); with --instances, one shared by all of them")
      ->check(NonNegativeNumber());
  sub->add_option("--disk-capacity-blocks", config->disk_capacity_blocks,
                  "A simulated disk KV tier (pagedkv serve --disk-cache) of this many blocks "
                  "between the host and the remote tier (0 = none); with --instances, one per "
                  "instance (machine)")
      ->check(NonNegativeNumber());
  sub->add_option("--tier-policy", config->tier_policy, "Eviction policy of the tiers: lru or arc")
      ->capture_default_str();
  // The words of `pagedkv generate`'s --host-cache-store / --host-cache-threshold (tier_flags.cc),
  // parsed by the same ParseTierStoreRule; those names are accepted too.
  sub->add_option("--host-store-policy,--host-store,--host-cache-store", config->host_store,
                  "When blocks go to the host tier: write-through (when computed) or write-back "
                  "(when the device pool evicts them)")
      ->capture_default_str();
  sub->add_option("--host-store-threshold,--host-cache-threshold", config->host_store_threshold,
                  "Store only blocks reused (device prefix hits) at least this many times in the "
                  "host tier (0 = all), as vLLM's CPU offloading")
      ->capture_default_str()
      ->check(NonNegativeNumber());
  sub->add_option("--host-link", config->host_link,
                  "Serve mode: link host-tier loads are charged on: pcie4, pcie5, 25gbe, 100gbe, "
                  "rdma, nvme, sata-ssd")
      ->capture_default_str();
  sub->add_option("--remote-link", config->remote_link,
                  "Serve mode: link remote-tier loads are charged on (same presets)")
      ->capture_default_str();
  sub->add_option("--disk-link", config->disk_link,
                  "Serve mode: the disk tier's reads are charged on (nvme: 6.5 GB/s, 80 us per "
                  "lookup; sata-ssd; or any preset above)")
      ->capture_default_str();
  sub->add_flag("!--no-shifted", config->count_shifted,
                "Do not count shifted hits of marked chunks (rag documents); in serve mode, do not "
                "reuse them (and skip the comparison run without reuse)");
}

void AddServeFlags(CLI::App* sub, ReplayConfig* config) {
  std::vector<std::string> gpus, models;
  for (const auto& g : replay::GpuPresets()) gpus.push_back(g.name);
  for (const auto& m : replay::ModelPresets()) models.push_back(m.name);
  sub->add_option("--model", config->model,
                  "Model preset (KV bytes per token, cost): " + absl::StrJoin(models, ", "))
      ->capture_default_str();
  sub->add_option("--gpu", config->gpu, "GPU preset (serve mode): " + absl::StrJoin(gpus, ", "))
      ->capture_default_str();
  sub->add_option("--hardware-profile", config->hardware_profile,
                  "Serve mode: a measured device profile (JSON, e.g. from "
                  "bench/serve/calibrate_serve.py) in place of --gpu: achieved FLOP/s and "
                  "bandwidth, per-step overhead, the model preset and its bytes")
      ->check(CLI::ExistingFile);
  sub->add_option("--gpu-memory-utilization", config->gpu_memory_utilization,
                  "Serve mode: share of GPU memory for weights + KV when no capacity is given, "
                  "in (0, 1]")
      ->capture_default_str()
      ->check(Fraction());
  sub->add_option("--max-num-seqs", config->max_num_seqs, "Serve mode: running sequences cap")
      ->capture_default_str()
      ->check(PositiveNumber());
  sub->add_option("--max-num-batched-tokens", config->max_num_batched_tokens,
                  "Serve mode: token budget per step")
      ->capture_default_str()
      ->check(PositiveNumber());
  sub->add_flag("--cache-aware", config->cache_aware,
                "Serve mode: admit the longest cached prefix first");
}

void AddRouterFlags(CLI::App* sub, ReplayConfig* config) {
  sub->add_option("--instances", config->instances,
                  "Serve mode: simulated instances behind one router (each with its own pool and "
                  "GPU); > 1 also runs the oracle router as the reference")
      ->capture_default_str()
      ->check(PositiveNumber());
  sub->add_option("--router", config->router,
                  "Serve mode: round-robin, least-loaded, prefix-aware (from KV events) or oracle")
      ->capture_default_str();
  sub->add_option("--router-prefill-weight", config->router_prefill_weight,
                  "prefix-aware / oracle cost: weight of one request block not cached")
      ->capture_default_str()
      ->check(NonNegativeNumber());
  sub->add_option("--router-load-weight", config->router_load_weight,
                  "prefix-aware / oracle cost: weight of one block of instance load")
      ->capture_default_str()
      ->check(NonNegativeNumber());
  sub->add_option("--kv-events-transport", config->kv_events_transport,
                  "--router prefix-aware: inproc (events encoded and decoded in process) or zmq "
                  "(over ipc:// sockets in a temporary directory)")
      ->capture_default_str();
}

void AddOutputFlags(CLI::App* sub, ReplayConfig* config) {
  sub->add_flag("--json", config->json, "Print one JSON object instead of the table");
  sub->add_flag("!--no-progress", config->progress, "Never draw the progress bar");
  sub->add_option("--max-memory-gib", config->max_memory_gib,
                  "Host memory the replay may use; loading, generation, expansion and the pools "
                  "are estimated first and refused past it (default: half the machine's memory)")
      ->check(PositiveNumber());
  sub->add_option("--out-dir", config->out_dir, "Directory for the sweep CSV and plot")
      ->capture_default_str();
  sub->add_option("--csv", config->csv, "Sweep CSV path (default: in --out-dir)");
  sub->add_option("--plot", config->plot,
                  "Plot path ending in .png or .svg (default: in --out-dir; .png with gnuplot)");
}

}  // namespace

void AddReplayCommand(CLI::App& app, int* exit_code) {
  auto config = std::make_shared<ReplayConfig>();
  CLI::App* sub = app.add_subcommand(
      "replay",
      "Replay a workload through the prefix cache and report hit rates. With no arguments: the "
      "built-in mixed workload, a capacity sweep over every policy, a table, a CSV and a plot.");
  AddWorkloadFlags(sub, config.get());
  AddCacheFlags(sub, config.get());
  AddServeFlags(sub, config.get());
  AddRouterFlags(sub, config.get());
  AddOutputFlags(sub, config.get());
  auto events = std::make_shared<KvEventsFlags>();
  AddKvEventsFlags(sub, events.get());

  sub->callback([config, events, exit_code] {
    absl::StatusOr<std::unique_ptr<KvEventPublisher>> publisher = MakeKvEventPublisher(*events);
    absl::Status status = publisher.status();
    if (status.ok()) {
      config->kv_events = publisher->get();
      status = replay::RunReplay(*config, std::cout, std::cerr);
      std::cout.flush();  // before holding the sockets open: subscribers read the counts
      FinishKvEventPublisher(*events, publisher->get());
    }
    if (!status.ok()) {
      std::cerr << "pagedkv replay: error: " << status.message() << "\n";
      *exit_code = 1;
      return;
    }
    *exit_code = 0;
  });
}

}  // namespace pagedkv::cli
