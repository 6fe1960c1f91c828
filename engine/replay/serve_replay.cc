// Copyright 2026 The pagedkv Authors.
#include "engine/replay/serve_replay.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cache/kv_cache_manager_internal.h"
#include "engine/replay/shifted_hit_json.h"
#include "engine/replay/simulated_chunk_reuse.h"
#include "pagedkv/kv_cache_manager.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv::replay {
namespace {

double Ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

// Nearest-rank percentile of sorted values (0 when empty).
double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

struct Tracked {
  double arrival_s = 0;
  double first_token_s = -1;
  int64_t prompt_tokens = 0;
  std::vector<PromptChunk> chunks;  // marked chunks (only with shifted reuse on)
  std::vector<TokenId> prompt;      // the prompt, kept only when chunks is not empty
};

// The marked chunks of `r` as scheduler PromptChunks. InvalidArgument for a chunk whose offset
// or length does not fit an int32 (ValidateWorkload already keeps them inside the prompt).
absl::StatusOr<std::vector<PromptChunk>> PromptChunksOf(const ReplayRequest& r, size_t index) {
  std::vector<PromptChunk> chunks;
  chunks.reserve(r.chunks.size());
  for (const ChunkSpan& c : r.chunks) {
    if (c.token_offset + c.length > INT32_MAX) {
      return absl::InvalidArgumentError(
          absl::StrFormat("request %d: chunk [%d, %d) lies past 2^31 - 1 tokens", index,
                          c.token_offset, c.token_offset + c.length));
    }
    chunks.push_back(
        {.offset = static_cast<int32_t>(c.token_offset), .length = static_cast<int32_t>(c.length)});
  }
  return chunks;
}

// Counts the shifted hits of one batch (the moves of sequence i are the next
// sequences[i].num_shifted_hit_tokens entries of slot_moves) and the chunks of newly admitted
// sequences; returns the number of moved tokens.
int64_t CountShiftedHits(const ScheduledBatch& batch,
                         const absl::flat_hash_map<RequestId, Tracked>& live,
                         ServeReplayResult& res) {
  const int64_t bs = batch.block_size;
  size_t move = 0;
  for (const ScheduledSequence& seq : batch.sequences) {
    if (seq.newly_admitted) {
      if (auto it = live.find(seq.request_id); it != live.end()) {
        for (const PromptChunk& c : it->second.chunks) {
          ++res.chunks;
          res.chunks_in_prefix += c.offset + c.length <= seq.num_prefix_hit_tokens;
        }
      }
    }
    const int64_t m = seq.num_shifted_hit_tokens;
    if (m == 0) continue;
    ++res.chunk_hits;
    res.shifted_hit_tokens += m;
    if (batch.slot_moves[move].old_position != batch.slot_moves[move].new_position) {
      ++res.chunk_hits_moved;
      res.shifted_hit_tokens_moved += m;
    }
    move += static_cast<size_t>(m);
    const int64_t end = seq.num_computed_tokens;
    const int64_t start = end - m;
    res.shifted_hit_blocks += std::max<int64_t>(0, end / bs - NumBlocksFor(start, bs));
  }
  return static_cast<int64_t>(batch.slot_moves.size());
}

// Registers every chunk span of `seq` that this step finished computing, as the engine does
// (Engine::RegisterChunks); returns the tokens copied.
absl::StatusOr<int64_t> RegisterChunks(const ScheduledSequence& seq, const Tracked& t,
                                       SimulatedChunkReuse& reuse, ServeReplayResult& res) {
  int64_t copied = 0;
  for (const PromptChunk& c : t.chunks) {
    const int32_t end = c.offset + c.length;
    if (end <= seq.num_computed_tokens || end > seq.seq_len()) continue;
    const auto tokens = std::span<const TokenId>(t.prompt).subspan(static_cast<size_t>(c.offset),
                                                                   static_cast<size_t>(c.length));
    const int64_t failures = reuse.stats().register_failures;
    PAGEDKV_ASSIGN_OR_RETURN(bool registered, reuse.Register(tokens, "", 0, c.offset));
    if (registered) {
      ++res.chunks_registered;
      copied += c.length;
    }
    res.chunk_register_failures += reuse.stats().register_failures - failures;
  }
  return copied;
}

}  // namespace

double ServeReplayResult::prefix_hit_rate() const {
  return Ratio(static_cast<double>(prefix_hit_tokens), static_cast<double>(admitted_tokens));
}
double ServeReplayResult::shifted_hit_rate() const {
  return Ratio(static_cast<double>(shifted_hit_tokens), static_cast<double>(admitted_tokens));
}
double ServeReplayResult::prefix_plus_shifted_token_hit_rate() const {
  return Ratio(static_cast<double>(prefix_hit_tokens + shifted_hit_tokens),
               static_cast<double>(admitted_tokens));
}
double ServeReplayResult::output_tokens_per_second() const {
  return Ratio(static_cast<double>(output_tokens), simulated_seconds);
}
double ServeReplayResult::total_tokens_per_second() const {
  return Ratio(static_cast<double>(prompt_tokens + output_tokens), simulated_seconds);
}
double ServeReplayResult::requests_per_second() const {
  return Ratio(static_cast<double>(finished), simulated_seconds);
}

absl::StatusOr<int64_t> KvCapacityBlocks(const GpuPreset& gpu, const ModelPreset& model,
                                         double gpu_memory_utilization, int32_t block_size) {
  if (gpu_memory_utilization <= 0 || gpu_memory_utilization > 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--gpu-memory-utilization must be in (0, 1] (got %g)", gpu_memory_utilization));
  }
  if (block_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--block-size must be > 0 (got %d)", block_size));
  }
  const double budget = gpu.memory_bytes * gpu_memory_utilization - model.WeightBytes();
  if (budget <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model %s (%.0f GB of weights) does not fit in %.0f%% of a %s (%.0f GB)", model.name,
        model.WeightBytes() / 1e9, 100 * gpu_memory_utilization, gpu.name, gpu.memory_bytes / 1e9));
  }
  const double per_block = static_cast<double>(model.KvBytesPerToken()) * block_size;
  return static_cast<int64_t>(std::min(budget / per_block, 2147483647.0));
}

absl::StatusOr<ServeReplayResult> RunServeReplay(const Workload& workload,
                                                 const ServeReplayOptions& options) {
  if (options.policy == "belady") {
    return absl::InvalidArgumentError(
        "the belady policy needs the future and exists in cache mode only (--mode cache)");
  }
  if (options.gpu.peak_flops <= 0 || options.model.num_parameters <= 0) {
    return absl::InvalidArgumentError("serve mode needs a GPU preset and a model preset");
  }
  if (options.vocab_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("vocab_size must be > 0 (got %d)", options.vocab_size));
  }
  if (options.chunk_first_k < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("chunk_first_k (tokens recomputed per reused chunk) must be >= 0 (got %d)",
                        options.chunk_first_k));
  }
  PAGEDKV_RETURN_IF_ERROR(ValidateWorkload(workload));
  PAGEDKV_RETURN_IF_ERROR(options.scheduler.Validate());
  int64_t capacity = options.capacity_blocks;
  if (capacity == 0) {
    PAGEDKV_ASSIGN_OR_RETURN(
        capacity, KvCapacityBlocks(options.gpu, options.model, options.gpu_memory_utilization,
                                   options.block_size));
  }
  if (capacity <= 0 || capacity >= (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("KV capacity must be between 1 and 2^31 - 1 blocks (got %d)", capacity));
  }
  KvCacheManagerOptions manager_options;
  manager_options.num_blocks = static_cast<int32_t>(capacity);
  manager_options.block_size = options.block_size;
  manager_options.eviction_policy = options.policy;
  manager_options.vocab_size = options.vocab_size;
  manager_options.model_fingerprint = options.model.name;
  manager_options.collect_event_batches = options.on_event_batch != nullptr;
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<KvCacheManager> manager,
                           KvCacheManager::Create(std::move(manager_options)));
  PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<Scheduler> scheduler,
                           Scheduler::Create(options.scheduler, *manager));
  const RooflineCostModel cost(options.gpu, options.model, options.cost);
  bool any_chunks = false;
  for (const ReplayRequest& r : workload.requests) any_chunks = any_chunks || !r.chunks.empty();
  std::unique_ptr<SimulatedChunkReuse> reuse;
  if (options.count_shifted && any_chunks) {
    PAGEDKV_ASSIGN_OR_RETURN(
        reuse, SimulatedChunkReuse::Create(
                   &KvCacheManagerInternal::MutablePool(*manager),
                   {.first_k = options.chunk_first_k, .model_fingerprint = options.model.name}));
    scheduler->SetChunkReuseProvider(reuse.get());
  }

  ServeReplayResult res;
  res.shifted_counted = reuse != nullptr;
  res.requests = static_cast<int64_t>(workload.requests.size());
  res.capacity_blocks = capacity;
  absl::flat_hash_map<RequestId, Tracked> live;
  std::vector<double> ttft, e2e, tpot;
  ttft.reserve(workload.requests.size());
  e2e.reserve(workload.requests.size());
  const auto wall_start = std::chrono::steady_clock::now();
  const double t0 = workload.requests.empty() ? 0 : workload.requests[0].arrival_ms / 1000.0;
  double now = t0;
  size_t next = 0;
  ScheduledBatch batch;
  std::vector<SampledToken> sampled;
  int64_t done = 0;
  while (next < workload.requests.size() || scheduler->HasUnfinishedRequests()) {
    if (!scheduler->HasUnfinishedRequests()) {
      now = std::max(now, workload.requests[next].arrival_ms / 1000.0);
    }
    for (; next < workload.requests.size() && workload.requests[next].arrival_ms / 1000.0 <= now;
         ++next) {
      const ReplayRequest& r = workload.requests[next];
      SchedulerRequest sr;
      sr.id = next;
      sr.prompt = MaterializePrompt(r, options.vocab_size);
      sr.max_new_tokens = static_cast<int32_t>(std::clamp<int64_t>(r.output_length, 1, 1 << 30));
      sr.arrival_time = r.arrival_ms / 1000.0;
      Tracked t{.arrival_s = r.arrival_ms / 1000.0, .prompt_tokens = r.input_length};
      if (reuse != nullptr && !r.chunks.empty()) {
        PAGEDKV_ASSIGN_OR_RETURN(t.chunks, PromptChunksOf(r, next));
        t.prompt = sr.prompt;
        sr.chunks = t.chunks;
      }
      if (absl::Status s = scheduler->AddRequest(std::move(sr)); !s.ok()) {
        if (s.code() != absl::StatusCode::kInvalidArgument) return s;
        ++res.rejected;  // e.g. a prompt longer than the whole KV pool
        ++done;
        continue;
      }
      live[next] = std::move(t);
    }
    PAGEDKV_RETURN_IF_ERROR(scheduler->Schedule(&batch));
    if (batch.empty()) {
      if (next < workload.requests.size()) {
        now = std::max(now, workload.requests[next].arrival_ms / 1000.0);
        continue;
      }
      return absl::InternalError(absl::StrFormat(
          "the scheduler made no progress with %d requests waiting and %d running at t=%.3f s",
          scheduler->num_waiting(), scheduler->num_running(), now - t0));
    }
    StepWork work;
    if (reuse != nullptr) {
      // The engine re-rotates the acquired chunks here, then releases them.
      work.num_rerotated_tokens += CountShiftedHits(batch, live, res);
      PAGEDKV_RETURN_IF_ERROR(reuse->ReleaseAcquired());
    }
    sampled.clear();
    for (const ScheduledSequence& seq : batch.sequences) {
      work.AddSequence(seq.num_computed_tokens, seq.num_scheduled_tokens);
      if (seq.samples) {
        // Any in-vocabulary token will do: the simulated model has no EOS.
        sampled.push_back(
            {.request_id = seq.request_id,
             .token = static_cast<TokenId>((seq.request_id * 7919 + seq.seq_len()) %
                                           static_cast<uint64_t>(options.vocab_size))});
      }
    }
    if (reuse != nullptr) {
      // After the forward pass the engine copies each chunk span the step completed.
      for (const ScheduledSequence& seq : batch.sequences) {
        auto it = live.find(seq.request_id);
        if (it == live.end() || it->second.chunks.empty()) continue;
        PAGEDKV_ASSIGN_OR_RETURN(int64_t copied, RegisterChunks(seq, it->second, *reuse, res));
        work.num_rerotated_tokens += copied;
      }
      res.rerotated_tokens += work.num_rerotated_tokens;
      res.rerotation_seconds += cost.RerotationSeconds(work.num_rerotated_tokens);
    }
    res.computed_tokens += work.num_tokens;
    now += cost.StepSeconds(work);
    PAGEDKV_ASSIGN_OR_RETURN(std::vector<RequestOutput> outputs,
                             scheduler->UpdateFromOutput(sampled));
    if (options.on_event_batch) {
      KvEventBatch events = manager->TakeEventBatch(now);
      if (!events.events.empty()) options.on_event_batch(std::move(events));
    }
    for (const RequestOutput& out : outputs) {
      auto it = live.find(out.request_id);
      if (it == live.end()) continue;
      Tracked& t = it->second;
      if (t.first_token_s < 0) {
        t.first_token_s = now;
        ttft.push_back(now - t.arrival_s);
      }
      if (out.finished()) {
        ++res.finished;
        res.prompt_tokens += t.prompt_tokens;
        res.output_tokens += out.num_output_tokens;
        e2e.push_back(now - t.arrival_s);
        if (out.num_output_tokens > 1) {
          tpot.push_back((now - t.first_token_s) / (out.num_output_tokens - 1));
        }
        live.erase(it);
        if ((++done & 255) == 0 && options.progress) options.progress(done);
      }
    }
  }
  const SchedulerStats& stats = scheduler->stats();
  res.steps = stats.num_steps;
  res.preemptions = stats.num_preemptions;
  res.admitted_tokens = stats.num_admitted_tokens;
  res.prefix_hit_tokens = stats.num_prefix_hit_tokens;
  res.evictions = manager->stats().evictions;
  res.stored_blocks = manager->stats().stored_blocks;
  if (res.shifted_hit_tokens != stats.num_shifted_hit_tokens) {
    return absl::InternalError(absl::StrFormat(
        "serve replay counted %d shifted-hit tokens in the batches but the scheduler %d",
        res.shifted_hit_tokens, stats.num_shifted_hit_tokens));
  }
  // Every request finished and every chunk was released: no block may still be held.
  PAGEDKV_RETURN_IF_ERROR(manager->ValidateInvariants());
  if (reuse != nullptr) PAGEDKV_RETURN_IF_ERROR(reuse->index().ValidateInvariants());
  if (manager->pool().NumUsedBlocks() != 0 || (reuse != nullptr && reuse->num_acquired() != 0)) {
    return absl::InternalError(absl::StrFormat("serve replay ended with %d blocks still held",
                                               manager->pool().NumUsedBlocks()));
  }
  res.simulated_seconds = now - t0;
  std::sort(ttft.begin(), ttft.end());
  std::sort(e2e.begin(), e2e.end());
  res.ttft_mean_s = Mean(ttft);
  res.ttft_p50_s = Percentile(ttft, 50);
  res.ttft_p99_s = Percentile(ttft, 99);
  res.tpot_mean_s = Mean(tpot);
  res.e2e_mean_s = Mean(e2e);
  res.e2e_p99_s = Percentile(e2e, 99);
  res.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  if (options.progress) options.progress(res.requests);
  return res;
}

std::string FormatServeTable(const ServeReplayResult& r) {
  std::string out;
  auto row = [&out](std::string_view name, const std::string& value) {
    absl::StrAppendFormat(&out, "  %-28s %s\n", name, value);
  };
  row("requests (finished/rejected)",
      absl::StrFormat("%d (%d / %d)", r.requests, r.finished, r.rejected));
  row("KV capacity", absl::StrFormat("%d blocks", r.capacity_blocks));
  row("prefix hit rate (tokens)",
      absl::StrFormat("%.2f%% (%d of %d admitted prompt tokens)", 100 * r.prefix_hit_rate(),
                      r.prefix_hit_tokens, r.admitted_tokens));
  if (r.shifted_counted) {
    row("shifted hit rate (tokens)",
        absl::StrFormat("%.2f%% (%d tokens; %d from copies at another position)",
                        100 * r.shifted_hit_rate(), r.shifted_hit_tokens,
                        r.shifted_hit_tokens_moved));
    row("prefix + shifted hit rate",
        absl::StrFormat("%.2f%%", 100 * r.prefix_plus_shifted_token_hit_rate()));
    row("chunks (hits / registered)",
        absl::StrFormat("%d marked: %d in prefix hit, %d hits (%d moved), %d registered, %d "
                        "without room",
                        r.chunks, r.chunks_in_prefix, r.chunk_hits, r.chunk_hits_moved,
                        r.chunks_registered, r.chunk_register_failures));
    row("re-rotation pass",
        absl::StrFormat("%d tokens, %.3f s simulated", r.rerotated_tokens, r.rerotation_seconds));
  }
  row("TTFT mean / p50 / p99",
      absl::StrFormat("%.3f / %.3f / %.3f s", r.ttft_mean_s, r.ttft_p50_s, r.ttft_p99_s));
  row("time per output token", absl::StrFormat("%.2f ms", 1000 * r.tpot_mean_s));
  row("end-to-end mean / p99", absl::StrFormat("%.3f / %.3f s", r.e2e_mean_s, r.e2e_p99_s));
  row("throughput", absl::StrFormat("%.0f output tok/s, %.0f total tok/s, %.2f req/s",
                                    r.output_tokens_per_second(), r.total_tokens_per_second(),
                                    r.requests_per_second()));
  row("simulated time", absl::StrFormat("%.1f s in %d steps", r.simulated_seconds, r.steps));
  row("preemptions / evictions", absl::StrFormat("%d / %d", r.preemptions, r.evictions));
  row("replay wall time", absl::StrFormat("%.2f s", r.wall_seconds));
  return out;
}

nlohmann::json ServeResultJson(const ServeReplayResult& r) {
  nlohmann::json j = {
      {"requests", r.requests},
      {"finished", r.finished},
      {"rejected", r.rejected},
      {"capacity_blocks", r.capacity_blocks},
      {"prompt_tokens", r.prompt_tokens},
      {"output_tokens", r.output_tokens},
      {"admitted_tokens", r.admitted_tokens},
      {"prefix_hit_tokens", r.prefix_hit_tokens},
      {"prefix_hit_rate", r.prefix_hit_rate()},
      {"computed_tokens", r.computed_tokens},
      {"steps", r.steps},
      {"preemptions", r.preemptions},
      {"evictions", r.evictions},
      {"stored_blocks", r.stored_blocks},
      {"simulated_seconds", r.simulated_seconds},
      {"ttft_mean_s", r.ttft_mean_s},
      {"ttft_p50_s", r.ttft_p50_s},
      {"ttft_p99_s", r.ttft_p99_s},
      {"tpot_mean_s", r.tpot_mean_s},
      {"e2e_mean_s", r.e2e_mean_s},
      {"e2e_p99_s", r.e2e_p99_s},
      {"output_tokens_per_second", r.output_tokens_per_second()},
      {"total_tokens_per_second", r.total_tokens_per_second()},
      {"requests_per_second", r.requests_per_second()},
      {"wall_seconds", r.wall_seconds},
      {"shifted_counted", r.shifted_counted},
  };
  if (r.shifted_counted) {
    AddShiftedHitJson(r, j);
    j["rerotated_tokens"] = r.rerotated_tokens;
    j["rerotation_seconds"] = r.rerotation_seconds;
  }
  return j;
}

std::string FormatShiftedEffect(const ServeReplayResult& with, const ServeReplayResult& without) {
  std::string out;
  auto row = [&out](std::string_view name, const std::string& value) {
    absl::StrAppendFormat(&out, "  %-28s %s\n", name, value);
  };
  auto change = [](double a, double b) { return b > 0 ? 100 * (a - b) / b : 0.0; };
  out += "without shifted reuse (same replay, --no-shifted):\n";
  row("TTFT mean / p50 / p99",
      absl::StrFormat("%.3f / %.3f / %.3f s (mean %+.1f%% with shifted reuse)", without.ttft_mean_s,
                      without.ttft_p50_s, without.ttft_p99_s,
                      change(with.ttft_mean_s, without.ttft_mean_s)));
  row("end-to-end mean", absl::StrFormat("%.3f s", without.e2e_mean_s));
  row("computed tokens", absl::StrFormat("%d (%+.1f%% with shifted reuse)", without.computed_tokens,
                                         change(static_cast<double>(with.computed_tokens),
                                                static_cast<double>(without.computed_tokens))));
  row("prefix hit rate (tokens)", absl::StrFormat("%.2f%%", 100 * without.prefix_hit_rate()));
  row("simulated time", absl::StrFormat("%.1f s", without.simulated_seconds));
  return out;
}

nlohmann::json WithoutShiftedJson(const ServeReplayResult& without) {
  return {{"ttft_mean_s", without.ttft_mean_s},
          {"ttft_p50_s", without.ttft_p50_s},
          {"ttft_p99_s", without.ttft_p99_s},
          {"e2e_mean_s", without.e2e_mean_s},
          {"computed_tokens", without.computed_tokens},
          {"simulated_seconds", without.simulated_seconds},
          {"prefix_hit_rate", without.prefix_hit_rate()}};
}

}  // namespace pagedkv::replay
