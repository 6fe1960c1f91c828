// Copyright 2026 The pagedkv Authors.
#include "engine/tools/replay/serve_mode/serve_simulation.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <utility>

#include "absl/strings/str_format.h"
#include "engine/tools/replay/cache_mode/hybrid_cache_replay.h"
#include "pagedkv/cache/chunk_index.h"
#include "pagedkv/status_macros.h"
#include "pagedkv/types.h"

namespace pagedkv::replay {
namespace {

// Bytes of one pool block: the full model's KV of block_size tokens, or with KV cache groups the
// layers one page holds (LayersPerPage of num_layers).
double PageBytes(const ServeReplayOptions& options) {
  double bytes = static_cast<double>(options.block_size) *
                 static_cast<double>(options.model.KvBytesPerToken());
  if (!options.hybrid_groups.empty() && options.model.num_layers > 0) {
    bytes = bytes * LayersPerPage(options.hybrid_groups) / options.model.num_layers;
  }
  return bytes;
}

// Nearest-rank percentile of sorted values (0 when empty).
double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

double Mean(const std::vector<double>& values) {
  double sum = 0;
  for (double value : values) sum += value;
  return values.empty() ? 0 : sum / static_cast<double>(values.size());
}

// The marked chunks of `request` as scheduler PromptChunks. InvalidArgument for a chunk whose
// offset or length does not fit an int32 (ValidateWorkload already keeps them inside the prompt).
absl::StatusOr<std::vector<PromptChunk>> PromptChunksOf(const ReplayRequest& request,
                                                        size_t index) {
  std::vector<PromptChunk> chunks;
  chunks.reserve(request.chunks.size());
  for (const ChunkSpan& chunk : request.chunks) {
    if (chunk.token_offset + chunk.length > INT32_MAX) {
      return absl::InvalidArgumentError(
          absl::StrFormat("request %d: chunk [%d, %d) lies past 2^31 - 1 tokens", index,
                          chunk.token_offset, chunk.token_offset + chunk.length));
    }
    chunks.push_back({.offset = static_cast<int32_t>(chunk.token_offset),
                      .length = static_cast<int32_t>(chunk.length)});
  }
  return chunks;
}

// Counts the shifted hits of one batch (the moves of sequence i are the next
// sequences[i].num_shifted_hit_tokens entries of slot_moves) and the chunks of newly admitted
// sequences; returns the number of moved tokens.
int64_t CountShiftedHits(const ScheduledBatch& batch,
                         const absl::flat_hash_map<RequestId, TrackedRequest>& live,
                         ServeReplayResult& result) {
  const int64_t block_size = batch.block_size;
  size_t move = 0;
  for (const ScheduledSequence& seq : batch.sequences) {
    if (seq.newly_admitted) {
      if (auto it = live.find(seq.request_id); it != live.end()) {
        for (const PromptChunk& chunk : it->second.chunks) {
          ++result.chunks;
          result.chunks_in_prefix += chunk.offset + chunk.length <= seq.num_prefix_hit_tokens;
        }
      }
    }
    const int64_t hit_tokens = seq.num_shifted_hit_tokens;
    if (hit_tokens == 0) continue;
    ++result.chunk_hits;
    result.shifted_hit_tokens += hit_tokens;
    if (batch.slot_moves[move].old_position != batch.slot_moves[move].new_position) {
      ++result.chunk_hits_moved;
      result.shifted_hit_tokens_moved += hit_tokens;
    }
    move += static_cast<size_t>(hit_tokens);
    const int64_t end = seq.num_computed_tokens;
    const int64_t start = end - hit_tokens;
    result.shifted_hit_blocks +=
        std::max<int64_t>(0, end / block_size - NumBlocksFor(start, block_size));
  }
  return static_cast<int64_t>(batch.slot_moves.size());
}

// Registers every chunk span of `seq` that this step finished computing, as the engine does
// (Engine::RegisterChunks); returns the tokens copied.
absl::StatusOr<int64_t> RegisterChunks(const ScheduledSequence& seq, const TrackedRequest& tracked,
                                       ShiftedChunkReuse& reuse, ServeReplayResult& result) {
  int64_t copied = 0;
  for (const PromptChunk& chunk : tracked.chunks) {
    const int32_t end = chunk.offset + chunk.length;
    if (end <= seq.num_computed_tokens || end > seq.seq_len()) continue;
    const auto tokens =
        std::span<const TokenId>(tracked.prompt)
            .subspan(static_cast<size_t>(chunk.offset), static_cast<size_t>(chunk.length));
    const int64_t failures = reuse.stats().register_failures;
    PAGEDKV_ASSIGN_OR_RETURN(bool registered,
                             reuse.Register(tokens, "", 0, chunk.offset, /*slots=*/{}));
    if (registered) {
      ++result.chunks_registered;
      copied += chunk.length;
    }
    result.chunk_register_failures += reuse.stats().register_failures - failures;
  }
  return copied;
}

bool AnyChunks(const Workload& workload) {
  return std::any_of(workload.requests.begin(), workload.requests.end(),
                     [](const ReplayRequest& request) { return !request.chunks.empty(); });
}

}  // namespace

ServeSimulation::ServeSimulation(const Workload& workload, const ServeReplayOptions& options,
                                 RooflineCostModel cost)
    : workload_(workload), options_(options), cost_(std::move(cost)) {}

absl::StatusOr<std::unique_ptr<ServeSimulation>> ServeSimulation::Create(
    const Workload& workload, const ServeReplayOptions& options, int64_t capacity_blocks) {
  auto sim = std::unique_ptr<ServeSimulation>(new ServeSimulation(
      workload, options, RooflineCostModel(options.gpu, options.model, options.cost)));
  PAGEDKV_RETURN_IF_ERROR(sim->CreateCacheAndScheduler(capacity_blocks));
  if (sim->manager_ != nullptr && options.count_shifted && AnyChunks(workload)) {
    PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<ChunkIndex> index, sim->manager_->AttachChunkIndex());
    PAGEDKV_ASSIGN_OR_RETURN(sim->reuse_,
                             ShiftedChunkReuse::Create(std::move(index), /*mover=*/nullptr,
                                                       {.first_k = options.chunk_first_k,
                                                        .model_fingerprint = options.model.name,
                                                        .groups = options.hybrid_groups}));
    sim->scheduler_->SetChunkReuseProvider(sim->reuse_.get());
  }
  if (options.tiers.enabled()) {
    PAGEDKV_ASSIGN_OR_RETURN(
        sim->tiers_,
        InstanceTiers::Create(options.tiers, sim->manager_.get(), PageBytes(options),
                              2 * int64_t{std::max(1, options.scheduler.max_num_batched_tokens)}));
  }
  sim->result_.tiers_enabled = sim->tiers_ != nullptr;
  sim->result_.host_capacity_blocks = options.tiers.host_capacity_blocks;
  sim->result_.remote_capacity_blocks = options.tiers.remote_capacity_blocks;
  sim->result_.disk_capacity_blocks = options.tiers.disk_capacity_blocks;
  sim->result_.host_store = {.rule = options.tiers.host_store,
                             .threshold = options.tiers.host_store_threshold};
  sim->result_.shifted_counted = sim->reuse_ != nullptr;
  sim->result_.hybrid = !options.hybrid_groups.empty();
  sim->result_.requests = static_cast<int64_t>(workload.requests.size());
  sim->result_.capacity_blocks = capacity_blocks;
  sim->ttft_.reserve(workload.requests.size());
  sim->e2e_.reserve(workload.requests.size());
  sim->wall_start_ = std::chrono::steady_clock::now();
  sim->start_s_ = workload.requests.empty() ? 0 : sim->ArrivalSeconds(0);
  sim->now_s_ = sim->start_s_;
  return sim;
}

absl::Status ServeSimulation::CreateCacheAndScheduler(int64_t capacity_blocks) {
  KvCacheManagerOptions manager_options;
  manager_options.num_blocks = static_cast<int32_t>(capacity_blocks);
  manager_options.block_size = options_.block_size;
  manager_options.eviction_policy = options_.policy;
  manager_options.vocab_size = options_.vocab_size;
  manager_options.model_fingerprint = options_.model.name;
  manager_options.collect_event_batches = options_.on_event_batch != nullptr;
  manager_options.groups = options_.hybrid_groups;
  PAGEDKV_ASSIGN_OR_RETURN(manager_, KvCacheManager::Create(std::move(manager_options)));
  PAGEDKV_ASSIGN_OR_RETURN(scheduler_, Scheduler::Create(options_.scheduler, *manager_));
  return absl::OkStatus();
}

CacheStats ServeSimulation::ManagerStats() const { return manager_->stats(); }

const BlockPool& ServeSimulation::Pool() const { return manager_->pool(); }

absl::Status ServeSimulation::ValidateManager() const { return manager_->ValidateInvariants(); }

KvEventBatch ServeSimulation::TakeEventBatch(double timestamp) {
  return manager_->TakeEventBatch(timestamp);
}

bool ServeSimulation::HasWork() const {
  return next_ < workload_.requests.size() || scheduler_->HasUnfinishedRequests();
}

absl::Status ServeSimulation::Step() {
  if (!scheduler_->HasUnfinishedRequests()) now_s_ = std::max(now_s_, ArrivalSeconds(next_));
  PAGEDKV_RETURN_IF_ERROR(AdmitArrivals());
  // Every arrival may have been rejected: nothing to schedule until the next one.
  if (!scheduler_->HasUnfinishedRequests()) return absl::OkStatus();
  if (tiers_ != nullptr) PAGEDKV_RETURN_IF_ERROR(tiers_->BeforeSchedule());
  PAGEDKV_RETURN_IF_ERROR(scheduler_->Schedule(&batch_));
  if (tiers_ != nullptr) {
    PAGEDKV_RETURN_IF_ERROR(tiers_->AfterSchedule());
    // The tier walk pins what it loaded for several waiting requests; in a small pool that can
    // leave the first of them no room. Its blocks stay cached: schedule again with them unpinned.
    if (batch_.empty()) PAGEDKV_RETURN_IF_ERROR(scheduler_->Schedule(&batch_));
  }
  if (!batch_.empty()) return RunBatch();
  if (next_ < workload_.requests.size()) {
    now_s_ = std::max(now_s_, ArrivalSeconds(next_));
    return absl::OkStatus();
  }
  return absl::InternalError(absl::StrFormat(
      "the scheduler made no progress with %d requests waiting and %d running at t=%.3f s",
      scheduler_->num_waiting(), scheduler_->num_running(), now_s_ - start_s_));
}

absl::Status ServeSimulation::AdmitArrivals() {
  for (; next_ < workload_.requests.size() && ArrivalSeconds(next_) <= now_s_; ++next_) {
    PAGEDKV_RETURN_IF_ERROR(AdmitRequest(next_));
  }
  return absl::OkStatus();
}

// Adds one request to the scheduler; one it refuses as invalid (e.g. a prompt longer than the
// whole KV pool) is counted as rejected.
absl::Status ServeSimulation::AdmitRequest(size_t index) {
  const ReplayRequest& request = workload_.requests[index];
  if (request.input_length > result_.capacity_blocks * options_.block_size) {
    // Longer than the whole pool: refused without materializing its prompt.
    ++result_.rejected;
    CountDone();
    return absl::OkStatus();
  }
  SchedulerRequest scheduled;
  scheduled.id = index;
  scheduled.prompt = MaterializePrompt(request, options_.vocab_size);
  scheduled.max_new_tokens =
      static_cast<int32_t>(std::clamp<int64_t>(request.output_length, 1, 1 << 30));
  scheduled.arrival_time = ArrivalSeconds(index);
  TrackedRequest tracked{.arrival_s = ArrivalSeconds(index), .prompt_tokens = request.input_length};
  if (reuse_ != nullptr && !request.chunks.empty()) {
    PAGEDKV_ASSIGN_OR_RETURN(tracked.chunks, PromptChunksOf(request, index));
    tracked.prompt = scheduled.prompt;
    scheduled.chunks = tracked.chunks;
  }
  std::vector<TokenId> prompt = tiers_ != nullptr ? scheduled.prompt : std::vector<TokenId>{};
  if (absl::Status status = scheduler_->AddRequest(std::move(scheduled)); !status.ok()) {
    if (status.code() != absl::StatusCode::kInvalidArgument) return status;
    ++result_.rejected;
    CountDone();
    return absl::OkStatus();
  }
  if (tiers_ != nullptr) tiers_->AddWaiting(index, std::move(prompt));
  live_[index] = std::move(tracked);
  return absl::OkStatus();
}

// Charges the scheduled batch to the clock, samples its tokens and records the outputs.
absl::Status ServeSimulation::RunBatch() {
  StepWork work;
  ++batches_run_;
  CountFirstAdmissions();
  sum_running_ += batch_.stats.num_running;
  sum_used_blocks_ += batch_.stats.num_used_blocks;
  if (reuse_ != nullptr) {
    // The engine re-rotates the acquired chunks here, then releases them; with no mover nothing
    // moves (the cost model charges the re-rotation), and the chunks are released.
    work.num_rerotated_tokens += CountShiftedHits(batch_, live_, result_);
    PAGEDKV_RETURN_IF_ERROR(reuse_->RunMoves(batch_.slot_moves, batch_.group_slot_moves));
  }
  SampleTokens(work);
  if (reuse_ != nullptr) PAGEDKV_RETURN_IF_ERROR(RegisterFinishedChunks(work));
  result_.computed_tokens += work.num_tokens;
  if (tiers_ != nullptr) {
    // The step's tier loads run before it (not overlapped), then its blocks are written through.
    PAGEDKV_ASSIGN_OR_RETURN(const double load_s, tiers_->AfterBatch(batch_));
    result_.tier_load_seconds += load_s;
    now_s_ += load_s;
  }
  now_s_ += cost_.StepSeconds(work);
  PAGEDKV_ASSIGN_OR_RETURN(std::vector<RequestOutput> outputs,
                           scheduler_->UpdateFromOutput(sampled_));
  if (options_.on_event_batch) {
    KvEventBatch events = TakeEventBatch(now_s_);
    if (!events.events.empty()) options_.on_event_batch(std::move(events));
  }
  RecordOutputs(outputs);
  return absl::OkStatus();
}

void ServeSimulation::CountFirstAdmissions() {
  for (const ScheduledSequence& seq : batch_.sequences) {
    if (!seq.newly_admitted) continue;
    auto it = live_.find(seq.request_id);
    if (it == live_.end() || it->second.admitted) continue;
    it->second.admitted = true;
    result_.first_admission_prompt_tokens += it->second.prompt_tokens;
    result_.first_admission_hit_tokens += seq.num_prefix_hit_tokens;
  }
}

// Adds each sequence's work and one synthetic token per sampling sequence.
void ServeSimulation::SampleTokens(StepWork& work) {
  sampled_.clear();
  for (const ScheduledSequence& seq : batch_.sequences) {
    work.AddSequence(seq.num_computed_tokens, seq.num_scheduled_tokens);
    if (!seq.samples) continue;
    // Any in-vocabulary token will do: the simulated model has no EOS.
    sampled_.push_back({.request_id = seq.request_id,
                        .token = static_cast<TokenId>((seq.request_id * 7919 + seq.seq_len()) %
                                                      static_cast<uint64_t>(options_.vocab_size))});
  }
}

// After the forward pass the engine copies each chunk span the step completed.
absl::Status ServeSimulation::RegisterFinishedChunks(StepWork& work) {
  for (const ScheduledSequence& seq : batch_.sequences) {
    auto it = live_.find(seq.request_id);
    if (it == live_.end() || it->second.chunks.empty()) continue;
    PAGEDKV_ASSIGN_OR_RETURN(int64_t copied, RegisterChunks(seq, it->second, *reuse_, result_));
    work.num_rerotated_tokens += copied;
  }
  result_.rerotated_tokens += work.num_rerotated_tokens;
  result_.rerotation_seconds += cost_.RerotationSeconds(work.num_rerotated_tokens);
  return absl::OkStatus();
}

void ServeSimulation::RecordOutputs(const std::vector<RequestOutput>& outputs) {
  for (const RequestOutput& output : outputs) {
    auto it = live_.find(output.request_id);
    if (it == live_.end()) continue;
    TrackedRequest& tracked = it->second;
    if (tracked.first_token_s < 0) {
      tracked.first_token_s = now_s_;
      ttft_.push_back(now_s_ - tracked.arrival_s);
    }
    if (!output.finished()) continue;
    ++result_.finished;
    result_.prompt_tokens += tracked.prompt_tokens;
    result_.output_tokens += output.num_output_tokens;
    e2e_.push_back(now_s_ - tracked.arrival_s);
    if (output.num_output_tokens > 1) {
      tpot_.push_back((now_s_ - tracked.first_token_s) / (output.num_output_tokens - 1));
    }
    live_.erase(it);
    CountDone();
  }
}

void ServeSimulation::CountDone() {
  if ((++done_ & 255) == 0 && options_.progress) options_.progress(done_);
}

absl::StatusOr<ServeReplayResult> ServeSimulation::Finish() {
  const SchedulerStats& stats = scheduler_->stats();
  result_.steps = stats.num_steps;
  result_.preemptions = stats.num_preemptions;
  result_.admitted_tokens = stats.num_admitted_tokens;
  result_.prefix_hit_tokens = stats.num_prefix_hit_tokens;
  result_.evictions = ManagerStats().evictions;
  result_.stored_blocks = ManagerStats().stored_blocks;
  if (tiers_ != nullptr) {
    const InstanceTierCounts counts = tiers_->counts();
    result_.host_hit_tokens = counts.host_hit_tokens;
    result_.remote_hit_tokens = counts.remote_hit_tokens;
    result_.host_loaded_blocks = counts.host_loaded_blocks;
    result_.remote_loaded_blocks = counts.remote_loaded_blocks;
    result_.disk_hit_tokens = counts.disk_hit_tokens;
    result_.disk_loaded_blocks = counts.disk_loaded_blocks;
  }
  if (result_.shifted_hit_tokens != stats.num_shifted_hit_tokens) {
    return absl::InternalError(absl::StrFormat(
        "serve replay counted %d shifted-hit tokens in the batches but the scheduler %d",
        result_.shifted_hit_tokens, stats.num_shifted_hit_tokens));
  }
  // Every request finished and every chunk was released: no block may still be held.
  PAGEDKV_RETURN_IF_ERROR(ValidateManager());
  if (reuse_ != nullptr) PAGEDKV_RETURN_IF_ERROR(reuse_->index().ValidateInvariants());
  if (Pool().NumUsedBlocks() != 0 || (reuse_ != nullptr && reuse_->num_acquired() != 0)) {
    return absl::InternalError(
        absl::StrFormat("serve replay ended with %d blocks still held", Pool().NumUsedBlocks()));
  }
  result_.simulated_seconds = now_s_ - start_s_;
  if (batches_run_ > 0) {
    result_.mean_running = sum_running_ / static_cast<double>(batches_run_);
    result_.mean_used_blocks = sum_used_blocks_ / static_cast<double>(batches_run_);
  }
  std::sort(ttft_.begin(), ttft_.end());
  std::sort(e2e_.begin(), e2e_.end());
  result_.ttft_mean_s = Mean(ttft_);
  result_.ttft_p50_s = Percentile(ttft_, 50);
  result_.ttft_p99_s = Percentile(ttft_, 99);
  result_.tpot_mean_s = Mean(tpot_);
  result_.e2e_mean_s = Mean(e2e_);
  result_.e2e_p99_s = Percentile(e2e_, 99);
  result_.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
  if (options_.progress) options_.progress(result_.requests);
  return result_;
}

}  // namespace pagedkv::replay
