// Copyright 2026 The pagedkv Authors.
//
// Scheduler: the step's decisions written out as one flat ScheduledBatch (step 3 of the banner in
// scheduler.cc): slot moves, tokens, positions, slots and block tables per sequence, then the step
// statistics; each request's num_computed_tokens advances past its scheduled tokens.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/runtime/scheduler/scheduler_impl.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {

absl::Status Scheduler::Impl::EmitBatch(ScheduledBatch* batch) {
  ReserveBatch(batch);
  for (const Decision& d : decisions_) PAGEDKV_RETURN_IF_ERROR(EmitSequence(d, batch));
  FinishStepStats(batch);
  return absl::OkStatus();
}

void Scheduler::Impl::ReserveBatch(ScheduledBatch* batch) const {
  int64_t total_tokens = 0;
  for (const Decision& d : decisions_) {
    total_tokens += d.num_new_tokens + d.num_drafts + (d.blend ? d.num_reused : 0);
  }
  batch->token_ids.reserve(static_cast<size_t>(total_tokens));
  batch->positions.reserve(static_cast<size_t>(total_tokens));
  batch->slot_mapping.reserve(static_cast<size_t>(total_tokens));
  batch->sequences.reserve(decisions_.size());
  batch->query_start_loc.reserve(decisions_.size() + 1);
  batch->block_table_start.reserve(decisions_.size() + 1);
  batch->query_start_loc.push_back(0);
  batch->block_table_start.push_back(0);
  const auto extra_groups = static_cast<size_t>(cache_.num_groups() - 1);
  batch->group_block_table_ids.resize(extra_groups);
  batch->group_slot_mapping.resize(extra_groups);
  batch->group_slot_moves.resize(extra_groups);
  for (std::vector<int64_t>& slots : batch->group_slot_mapping) {
    slots.reserve(static_cast<size_t>(total_tokens));
  }
}

absl::Status Scheduler::Impl::EmitGroupTokens(const RequestState& r, int32_t start, int32_t last,
                                              ScheduledBatch* batch) const {
  const int32_t bs = cache_.block_size();
  for (int32_t g = 1; g < cache_.num_groups(); ++g) {
    PAGEDKV_ASSIGN_OR_RETURN(std::span<const BlockId> table, cache_.GetBlockTable(r.id, g));
    std::vector<int64_t>& slots = batch->group_slot_mapping[static_cast<size_t>(g - 1)];
    for (int32_t pos = start; pos < last; ++pos) {
      const BlockId block = table[static_cast<size_t>(pos / bs)];
      if (block == kNullBlock) {
        return absl::InternalError(absl::StrCat("scheduler: request ", r.id, " group ", g,
                                                " has no block for scheduled position ", pos));
      }
      slots.push_back(static_cast<int64_t>(block) * bs + pos % bs);
    }
    if (options_.emit_block_tables) {
      std::vector<BlockId>& ids = batch->group_block_table_ids[static_cast<size_t>(g - 1)];
      ids.insert(ids.end(), table.begin(), table.end());
    }
  }
  return absl::OkStatus();
}

absl::Status Scheduler::Impl::EmitSlotMoves(const Decision& d, std::span<const BlockId> table,
                                            ScheduledBatch* batch) const {
  const int32_t bs = cache_.block_size();
  const RequestState& r = *d.request;
  for (int32_t t = 0; t < d.num_reused; ++t) {
    const int32_t pos = r.num_computed_tokens + t;
    const int32_t c = d.chunk_first + t;
    batch->slot_moves.push_back(
        KvSlotMove{.src_slot = d.chunk.slots[static_cast<size_t>(c)],
                   .dst_slot = static_cast<int64_t>(table[pos / bs]) * bs + pos % bs,
                   .old_position = d.chunk.position + c,
                   .new_position = pos});
  }
  for (int32_t g = 1; g < cache_.num_groups() && d.num_reused > 0; ++g) {
    PAGEDKV_ASSIGN_OR_RETURN(std::span<const BlockId> group_table, cache_.GetBlockTable(r.id, g));
    PAGEDKV_RETURN_IF_ERROR(EmitGroupSlotMoves(d, g, group_table, batch));
  }
  return absl::OkStatus();
}

absl::Status Scheduler::Impl::EmitGroupSlotMoves(const Decision& d, int32_t g,
                                                 std::span<const BlockId> table,
                                                 ScheduledBatch* batch) const {
  const int32_t bs = cache_.block_size();
  const RequestState& r = *d.request;
  const std::vector<int64_t>& src = d.chunk.group_slots[static_cast<size_t>(g - 1)];
  std::vector<KvSlotMove>& moves = batch->group_slot_moves[static_cast<size_t>(g - 1)];
  for (int32_t t = 0; t < d.num_reused; ++t) {
    const int32_t pos = r.num_computed_tokens + t;
    const int32_t c = d.chunk_first + t;
    if (src[static_cast<size_t>(c)] == kNoChunkSlot) continue;  // the group keeps no KV for it
    const BlockId block = table[static_cast<size_t>(pos / bs)];
    if (block == kNullBlock) {
      return absl::InternalError(absl::StrCat("scheduler: request ", r.id, " group ", g,
                                              " has no block for reused position ", pos));
    }
    moves.push_back(
        KvSlotMove{.src_slot = src[static_cast<size_t>(c)],
                   .dst_slot = static_cast<int64_t>(block) * bs + pos % bs,
                   .old_position = d.chunk.group_positions[static_cast<size_t>(g - 1)] + c,
                   .new_position = pos});
  }
  return absl::OkStatus();
}

void Scheduler::Impl::EmitTokens(const RequestState& r, std::span<const BlockId> table,
                                 int32_t start, int32_t end, std::span<const TokenId> drafts,
                                 ScheduledBatch* batch) const {
  const int32_t bs = cache_.block_size();
  const std::span<const TokenId> tokens = r.cache.tokens();
  batch->token_ids.insert(batch->token_ids.end(), tokens.begin() + start, tokens.begin() + end);
  batch->token_ids.insert(batch->token_ids.end(), drafts.begin(), drafts.end());
  const int32_t last = end + static_cast<int32_t>(drafts.size());
  for (int32_t pos = start; pos < last; ++pos) {
    batch->positions.push_back(pos);
    batch->slot_mapping.push_back(static_cast<int64_t>(table[pos / bs]) * bs + pos % bs);
  }
  if (options_.emit_block_tables) {
    batch->block_table_ids.insert(batch->block_table_ids.end(), table.begin(), table.end());
  }
  batch->query_start_loc.push_back(static_cast<int32_t>(batch->token_ids.size()));
  batch->block_table_start.push_back(static_cast<int32_t>(batch->block_table_ids.size()));
}

void Scheduler::Impl::CountSequence(const Decision& d, const ScheduledSequence& seq,
                                    SchedulerStepStats& st) {
  const RequestState& r = *d.request;
  st.num_shifted_hit_tokens += d.num_reused;
  st.num_blend_tokens += seq.num_blend_tokens;
  stats_.num_shifted_hit_tokens += d.num_reused;
  st.num_draft_tokens += d.num_drafts;
  stats_.num_draft_tokens += d.num_drafts;
  const bool decode = !d.newly_admitted && seq.num_scheduled_tokens == 1 + d.num_drafts &&
                      seq.num_computed_tokens >= r.num_prompt_tokens;
  (decode ? st.num_decode_tokens : st.num_prefill_tokens) += seq.num_scheduled_tokens;
  if (d.newly_admitted) {
    ++st.num_newly_admitted;
    st.num_prefix_hit_tokens += seq.num_prefix_hit_tokens;
    st.num_copied_tokens += seq.num_copied_tokens;
    st.num_admitted_prompt_tokens += r.num_tokens();
  }
}

absl::Status Scheduler::Impl::EmitSequence(const Decision& d, ScheduledBatch* batch) {
  const int32_t bs = cache_.block_size();
  RequestState& r = *d.request;
  PAGEDKV_ASSIGN_OR_RETURN(std::span<const BlockId> table, cache_.GetBlockTable(r.id));
  PAGEDKV_RETURN_IF_ERROR(EmitSlotMoves(d, table, batch));
  PAGEDKV_RETURN_IF_ERROR(EmitBlockCopies(d, table, batch));
  // The first scheduled token: the first reused one when blending, else the first new one
  // (copied tokens and reused ones never meet in one decision).
  const int32_t start = r.num_computed_tokens + d.num_copied + (d.blend ? 0 : d.num_reused);
  const int32_t end = r.num_computed_tokens + d.num_copied + d.num_reused + d.num_new_tokens;
  if (static_cast<int64_t>(table.size()) != NumBlocksFor(end + d.num_drafts, bs)) {
    return absl::InternalError(absl::StrCat("scheduler: request ", r.id, " has ", table.size(),
                                            " blocks for ", end, " tokens + ", d.num_drafts,
                                            " drafts of block size ", bs));
  }
  r.scheduled_drafts.assign(r.draft_tokens.begin(), r.draft_tokens.begin() + d.num_drafts);
  r.draft_tokens.clear();
  ScheduledSequence seq;
  seq.request_id = r.id;
  seq.query_start = static_cast<int32_t>(batch->token_ids.size());
  seq.num_scheduled_tokens = end - start + d.num_drafts;
  seq.num_computed_tokens = start;
  seq.block_table_start = static_cast<int32_t>(batch->block_table_ids.size());
  seq.num_blocks = static_cast<int32_t>(table.size());
  seq.samples = end == r.num_tokens();
  seq.newly_admitted = d.newly_admitted;
  seq.num_prefix_hit_tokens = d.newly_admitted ? r.num_prefix_hit_tokens : 0;
  seq.num_shifted_hit_tokens = d.num_reused;
  seq.num_copied_tokens = d.num_copied;
  seq.num_blend_tokens = d.blend ? d.num_reused : 0;
  seq.num_draft_tokens = d.num_drafts;
  PAGEDKV_RETURN_IF_ERROR(EmitGroupTokens(r, start, end + d.num_drafts, batch));
  EmitTokens(r, table, start, end, r.scheduled_drafts, batch);
  CountSequence(d, seq, batch->stats);
  if (seq.samples) {
    r.awaiting_sample = true;
    ++num_awaiting_samples_;
  }
  r.num_computed_tokens = end;
  batch->sequences.push_back(seq);
  return absl::OkStatus();
}

void Scheduler::Impl::FinishStepStats(ScheduledBatch* batch) {
  SchedulerStepStats& st = batch->stats;
  batch->finished_request_ids = std::move(pending_finished_);
  pending_finished_.clear();
  st.step = stats_.num_steps;
  st.num_scheduled_tokens = static_cast<int32_t>(batch->token_ids.size());
  st.num_scheduled_seqs = static_cast<int32_t>(batch->sequences.size());
  st.num_running = num_running();
  st.num_waiting = num_waiting();
  st.num_preempted = static_cast<int32_t>(batch->preempted_request_ids.size());
  st.num_finished = static_cast<int32_t>(batch->finished_request_ids.size());
  st.num_total_blocks = cache_.num_blocks();
  st.num_used_blocks = cache_.num_blocks() - cache_.NumAvailableBlocks();
  ++stats_.num_steps;
  stats_.num_scheduled_tokens += st.num_scheduled_tokens;
}

}  // namespace pagedkv
