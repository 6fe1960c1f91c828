// Copyright 2026 The pagedkv Authors.
//
// Engine step loop: Step (tier onboarding, Schedule, chunk moves, the model's forward pass, chunk
// registration, outputs, statistics) and Generate, which steps until its requests finish.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cache/tiers/tier_chain.h"
#include "engine/model/runner/model_runner.h"
#include "engine/runtime/engine_internal.h"
#include "engine/runtime/engine_request.h"
#include "engine/runtime/logit_edit_builder.h"
#include "engine/runtime/shift/cache_blend_hook.h"
#include "engine/runtime/shift/shifted_chunk_reuse.h"
#include "engine/runtime/step_batch.h"
#include "pagedkv/runtime/engine.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The slots of `chunk`'s tokens in `table` (one KV cache group's, blocks of `block_size`);
// kNoChunkSlot where a sliding-window group has released the block (its copy keeps the chunk's
// last tokens, never those).
std::vector<int64_t> ChunkSlots(std::span<const BlockId> table, const PromptChunk& chunk,
                                int64_t block_size) {
  std::vector<int64_t> slots;
  slots.reserve(static_cast<size_t>(chunk.length));
  for (int32_t pos = chunk.offset; pos < chunk.offset + chunk.length; ++pos) {
    const BlockId block = table[static_cast<size_t>(pos / block_size)];
    slots.push_back(block == kNullBlock
                        ? kNoChunkSlot
                        : static_cast<int64_t>(block) * block_size + pos % block_size);
  }
  return slots;
}

// Bucket of a batch of `num_tokens` (>= 1) tokens in EngineStats::step_num_tokens_histogram.
size_t HistogramBucket(int32_t num_tokens) {
  size_t bucket = 0;
  for (uint32_t n = static_cast<uint32_t>(num_tokens); n > 1; n >>= 1) ++bucket;
  return std::min(bucket, EngineStats::kHistogramBuckets - 1);
}

}  // namespace

absl::StatusOr<StepOutput> Engine::Step() {
  const Clock::time_point start = Clock::now();
  StepOutput out;
  out.finished = std::move(unclaimed_finished_);
  unclaimed_finished_.clear();
  TierChain* tiers = internals_->tiers.get();
  PAGEDKV_RETURN_IF_ERROR(OnboardWaiting());
  // Unpinned before scheduling: the scheduler cannot see pins, and blocks pinned for waiting
  // requests could leave a running request no room (it preempts itself, nobody is admitted, and
  // the next step pins them again). Released, the loaded blocks are the most recently used
  // cached blocks, evicted last.
  if (tiers != nullptr) PAGEDKV_RETURN_IF_ERROR(tiers->ReleasePins());
  PAGEDKV_RETURN_IF_ERROR(scheduler_->Schedule(&batch_));
  RequeuePreempted();
  out.batch = batch_.stats;
  ReportAborted(&out);
  ShiftedChunkReuse* reuse = internals_->reuse.get();
  if (reuse != nullptr) {
    const int64_t float_key_moves = reuse->stats().float_key_moves;
    PAGEDKV_RETURN_IF_ERROR(reuse->RunMoves(batch_.slot_moves, batch_.group_slot_moves));
    stats_.num_float_key_moves += reuse->stats().float_key_moves - float_key_moves;
  }
  for (const BlockCopy& copy : batch_.block_copies) {
    PAGEDKV_RETURN_IF_ERROR(internals_->copier->Copy(copy.src, copy.dst));
  }
  if (batch_.empty()) return out;

  const StepBatch step = BuildStepBatch();
  ModelOutput model_out;
  PAGEDKV_RETURN_IF_ERROR(RunModel(step, &model_out));
  out.logits = std::move(model_out.logits);
  // StepOutput::logits holds the sampling rows only, not the prompt-logprob rows after them.
  out.logits.resize(std::min(out.logits.size(), static_cast<size_t>(step.row_start.back()) *
                                                    static_cast<size_t>(config().vocab_size)));
  if (tiers != nullptr) PAGEDKV_RETURN_IF_ERROR(tiers->FlushWriteThrough());
  const int32_t n = batch_.num_sequences();
  if (reuse != nullptr) {
    if (!step.key_rows.empty()) StoreChunkKeys(step, model_out);
    for (int32_t i = 0; i < n; ++i) PAGEDKV_RETURN_IF_ERROR(RegisterChunks(i));
  }
  PAGEDKV_RETURN_IF_ERROR(CollectOutputs(step, model_out, &out));
  RecordStepStats(n, &out);
  out.seconds = SecondsSince(start);
  stats_.busy_seconds += out.seconds;
  return out;
}

Engine::StepBatch Engine::BuildStepBatch() {
  StepBatch step;
  const int32_t n = batch_.num_sequences();
  for (const ScheduledSequence& s : batch_.sequences) {
    step.max_blocks = std::max(step.max_blocks, s.num_blocks);
  }
  step.tables.assign(static_cast<size_t>(n) * static_cast<size_t>(step.max_blocks), 0);
  step.kv_lens.resize(static_cast<size_t>(n));
  const auto extra_groups = static_cast<size_t>(batch_.num_kv_cache_groups() - 1);
  step.group_tables.assign(extra_groups * step.tables.size(), 0);
  for (const std::vector<int64_t>& slots : batch_.group_slot_mapping) {
    step.group_slots.insert(step.group_slots.end(), slots.begin(), slots.end());
  }
  for (int32_t i = 0; i < n; ++i) {
    const ScheduledSequence& s = batch_.sequences[static_cast<size_t>(i)];
    const auto table = batch_.BlockTable(i);
    std::copy(table.begin(), table.end(),
              step.tables.begin() + static_cast<ptrdiff_t>(i) * step.max_blocks);
    step.kv_lens[static_cast<size_t>(i)] = s.seq_len();
    for (int32_t g = 1; g < batch_.num_kv_cache_groups(); ++g) {
      const auto group_table = batch_.GroupBlockTable(g, i);
      std::copy(
          group_table.begin(), group_table.end(),
          step.group_tables.begin() + (static_cast<ptrdiff_t>(g - 1) * n + i) * step.max_blocks);
    }
    RequestRecord& record = *requests_.at(s.request_id);
    RecordAdmission(s, record);
    PlanKeyRows(s, record, &step);
    if (!s.samples) continue;
    // One row per draft token too: row j predicts the token after the j-th scheduled draft.
    const int32_t rows = 1 + s.num_draft_tokens;
    for (int32_t j = 0; j < rows; ++j) {
      const bool copy = record.sampling.logprobs >= 0;
      step.copied_index.push_back(copy ? static_cast<int32_t>(step.copy_rows.size()) : -1);
      if (copy) step.copy_rows.push_back(static_cast<int32_t>(step.logits_indices.size()));
      if (internal::NeedsLogitEdits(record.sampling, record.logit_bias)) {
        AddLogitEdits(s, record, j, &step);
      }
      step.logits_indices.push_back(s.query_start + s.num_scheduled_tokens - rows + j);
      step.sampling.push_back(
          SamplingParams{.temperature = record.sampling.temperature,
                         .top_p = record.sampling.top_p,
                         .seed = record.sampling.seed,
                         .counter = static_cast<uint64_t>(record.num_generated + j),
                         .top_k = std::max(record.sampling.top_k, 0),
                         .min_p = record.sampling.min_p});
    }
    step.sampled_ids.push_back(s.request_id);
    step.sampled_seqs.push_back(i);
    step.row_start.push_back(step.row_start.back() + rows);
  }
  AddPromptRows(&step);
  return step;
}

void Engine::AddLogitEdits(const ScheduledSequence& s, const RequestRecord& record, int32_t j,
                           StepBatch* step) const {
  // Row j follows the generated tokens and the first j of the drafts scheduled now (the drafts
  // are the last num_draft_tokens tokens scheduled), as vLLM counts drafts as output.
  const std::span<const TokenId> drafts =
      std::span<const TokenId>(batch_.token_ids)
          .subspan(static_cast<size_t>(s.query_start + s.num_scheduled_tokens - s.num_draft_tokens),
                   static_cast<size_t>(j));
  const std::span<const TokenId> output =
      std::span<const TokenId>(record.context).subspan(record.prompt.size());
  step->logit_edits.push_back(
      internal::BuildLogitEdits({.sampling = &record.sampling,
                                 .logit_bias = record.logit_bias,
                                 .prompt_set = record.prompt_set,
                                 .output = output,
                                 .drafts = drafts,
                                 .stop_tokens = record.stop_tokens},
                                static_cast<int32_t>(step->logits_indices.size())));
}

void Engine::AddPromptRows(StepBatch* step) const {
  for (const ScheduledSequence& s : batch_.sequences) {
    const RequestRecord& record = *requests_.at(s.request_id);
    if (record.sampling.prompt_logprobs < 0) continue;
    // Position p predicts prompt token p + 1: the positions scheduled now whose next token is in
    // the prompt and not yet done (a re-admission recomputes positions done before).
    const auto num_prompt = static_cast<int32_t>(record.prompt.size());
    const int32_t end = std::min(s.num_computed_tokens + s.num_scheduled_tokens, num_prompt - 1);
    const int32_t begin =
        std::max(s.num_computed_tokens, static_cast<int32_t>(record.prompt_logprobs.size()));
    for (int32_t p = begin; p < end; ++p) {
      step->prompt_rows.push_back({.request_id = s.request_id,
                                   .position = p,
                                   .copied = static_cast<int32_t>(step->copy_rows.size())});
      step->copied_index.push_back(static_cast<int32_t>(step->copy_rows.size()));
      step->copy_rows.push_back(static_cast<int32_t>(step->logits_indices.size()));
      step->logits_indices.push_back(s.query_start + p - s.num_computed_tokens);
      step->sampling.push_back(SamplingParams{});  // greedy; the sampled token is not used
    }
  }
}

absl::Status Engine::RunModel(const StepBatch& step, ModelOutput* model_out) {
  // CacheBlend: the reused tokens scheduled in this batch are recomputed selectively.
  std::optional<CacheBlendHook> blend;
  if (internals_->reuse != nullptr && batch_.stats.num_blend_tokens > 0) {
    blend = MakeBlendHook(batch_, internals_->reuse->options());
  }
  const ModelInput input{.token_ids = batch_.token_ids,
                         .positions = batch_.positions,
                         .slot_mapping = batch_.slot_mapping,
                         .query_start_loc = batch_.query_start_loc,
                         .kv_lens = step.kv_lens,
                         .block_tables = step.tables,
                         .max_blocks_per_seq = step.max_blocks,
                         .logits_indices = step.logits_indices,
                         .group_slot_mapping = step.group_slots,
                         .group_block_tables = step.group_tables};
  PAGEDKV_RETURN_IF_ERROR(
      internals_->runner->Forward(input,
                                  {.return_logits = options_.return_logits,
                                   .sampling = step.sampling,
                                   .copy_rows = step.copy_rows,
                                   .logit_edits = step.logit_edits,
                                   .hook = blend.has_value() ? &*blend : nullptr,
                                   .key_rows = step.key_rows},
                                  model_out));
  const auto num_kept = blend.has_value() ? static_cast<int64_t>(blend->kept_rows().size()) : 0;
  stats_.num_blend_recomputed_tokens += num_kept;
  stats_.num_blend_partial_tokens += batch_.stats.num_blend_tokens - num_kept;
  return absl::OkStatus();
}

void Engine::RecordStepStats(int32_t num_seqs, StepOutput* out) {
  const int32_t num_tokens = batch_.num_tokens();
  ++stats_.num_steps;
  stats_.num_computed_tokens += num_tokens;
  stats_.num_generated_tokens += static_cast<int64_t>(out->tokens.size());
  stats_.num_preemptions += batch_.stats.num_preempted;
  stats_.num_draft_tokens = scheduler_->stats().num_draft_tokens;
  stats_.num_accepted_draft_tokens = scheduler_->stats().num_accepted_draft_tokens;
  if (stats_.step_num_tokens.size() < EngineStats::kMaxRecordedSteps) {
    stats_.step_num_tokens.push_back(num_tokens);
    stats_.step_num_seqs.push_back(num_seqs);
  }
  stats_.max_step_num_tokens = std::max(stats_.max_step_num_tokens, num_tokens);
  stats_.max_step_num_seqs = std::max(stats_.max_step_num_seqs, num_seqs);
  ++stats_.step_num_tokens_histogram[HistogramBucket(num_tokens)];
}

absl::Status Engine::RegisterChunks(int32_t i) {
  const ScheduledSequence& s = batch_.sequences[static_cast<size_t>(i)];
  RequestRecord& record = *requests_.at(s.request_id);
  for (size_t c = 0; c < record.chunks.size(); ++c) {
    const PromptChunk& chunk = record.chunks[c];
    const int32_t end = chunk.offset + chunk.length;
    if (record.chunk_reused[c] || end <= s.num_computed_tokens || end > s.seq_len()) continue;
    const std::vector<int64_t> slots = ChunkSlots(batch_.BlockTable(i), chunk, batch_.block_size);
    std::vector<std::vector<int64_t>> group_slots;
    for (int32_t g = 1; g < batch_.num_kv_cache_groups(); ++g) {
      group_slots.push_back(ChunkSlots(batch_.GroupBlockTable(g, i), chunk, batch_.block_size));
    }
    const auto tokens =
        std::span<const TokenId>(record.prompt)
            .subspan(static_cast<size_t>(chunk.offset), static_cast<size_t>(chunk.length));
    std::vector<std::vector<float>> keys;
    const ChunkFloatKeysInput float_keys = FloatKeysOf(record, c, &keys);
    PAGEDKV_RETURN_IF_ERROR(internals_->reuse
                                ->Register(tokens, record.cache_salt, /*adapter_id=*/0,
                                           chunk.offset, slots, group_slots, float_keys)
                                .status());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<GenerationResult>> Engine::Generate(
    std::vector<GenerationRequest> requests) {
  std::vector<RequestId> ids;
  ids.reserve(requests.size());
  for (GenerationRequest& r : requests) {
    absl::StatusOr<RequestId> id = AddRequest(std::move(r));
    if (!id.ok()) {
      for (RequestId added : ids) {
        if (scheduler_->AbortRequest(added).ok()) {
          requests_.erase(added);
          --stats_.num_requests;
        }
      }
      return id.status();
    }
    ids.push_back(*id);
  }
  absl::flat_hash_map<RequestId, size_t> slot_of;
  for (size_t i = 0; i < ids.size(); ++i) slot_of[ids[i]] = i;
  std::vector<GenerationResult> results(ids.size());
  std::vector<GenerationResult> others;  // finished requests of other callers
  size_t remaining = ids.size();
  absl::Status status;
  while (remaining > 0 && status.ok()) {
    absl::StatusOr<StepOutput> step = Step();
    if (!step.ok()) {
      status = step.status();
      break;
    }
    for (GenerationResult& r : step->finished) {
      auto it = slot_of.find(r.request_id);
      if (it == slot_of.end()) {
        others.push_back(std::move(r));
        continue;
      }
      results[it->second] = std::move(r);
      --remaining;
    }
    if (remaining > 0 && step->batch.num_scheduled_tokens == 0 && step->finished.empty()) {
      status =
          absl::InternalError(absl::StrCat("Engine::Generate: the scheduler made no progress with ",
                                           remaining, " request(s) unfinished"));
    }
  }
  // Reported by the next Step(), after any a failed Step() left there.
  others.insert(others.end(), std::make_move_iterator(unclaimed_finished_.begin()),
                std::make_move_iterator(unclaimed_finished_.end()));
  unclaimed_finished_ = std::move(others);
  if (!status.ok()) return status;
  return results;
}

}  // namespace pagedkv
