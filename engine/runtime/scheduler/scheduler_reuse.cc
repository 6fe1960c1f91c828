// Copyright 2026 The pagedkv Authors.
//
// Scheduler: chunk reuse planning. With a ChunkReuseProvider, a step whose first token starts a
// marked chunk's reusable range acquires the chunk's cached KV (moved and re-rotated by the
// engine), and every step stops before the next reusable range.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

#include "engine/runtime/scheduler/scheduler_impl.h"

namespace pagedkv {
namespace {

// True when `hit` lists a slot per token of a chunk of `length` tokens in each of `num_groups`
// KV cache groups (and a position per group past the first).
bool FitsGroups(const AcquiredChunk& hit, int32_t length, int32_t num_groups) {
  const auto extra = static_cast<size_t>(num_groups - 1);
  if (static_cast<int32_t>(hit.slots.size()) != length || hit.group_slots.size() != extra ||
      hit.group_positions.size() != extra) {
    return false;
  }
  return std::all_of(
      hit.group_slots.begin(), hit.group_slots.end(),
      [&](const std::vector<int64_t>& s) { return static_cast<int32_t>(s.size()) == length; });
}

}  // namespace

Scheduler::Impl::ReusableRange Scheduler::Impl::RangeOf(const RequestState& request,
                                                        const PromptChunk& chunk) const {
  ReusableRange range;
  range.chunk = &chunk;
  range.begin = chunk.offset + std::min(chunk.length, reuse_->num_leading_tokens_to_compute());
  range.end = std::min(chunk.offset + chunk.length, request.num_prompt_tokens - 1);
  return range;
}

void Scheduler::Impl::PlanReuse(RequestState& request, int32_t from, int32_t* num_new,
                                Decision* d) {
  if (reuse_ == nullptr || request.chunks.empty()) return;
  // Blending schedules the reused tokens, so they share the budget: a chunk may then be reused
  // over several steps, each starting inside its range.
  const bool blend = reuse_->blend_reused_tokens();
  int32_t next = from;  // first token this step computes
  for (const PromptChunk& chunk : request.chunks) {
    const ReusableRange range = RangeOf(request, chunk);
    if (range.begin >= range.end) continue;
    if (blend ? (from < range.begin || from >= range.end) : range.begin != from) continue;
    const auto tokens = request.cache.tokens().subspan(static_cast<size_t>(chunk.offset),
                                                       static_cast<size_t>(chunk.length));
    std::optional<AcquiredChunk> hit =
        reuse_->Acquire(tokens, request.cache_salt, request.adapter_id);
    if (!hit.has_value()) break;
    if (!FitsGroups(*hit, chunk.length, cache_.num_groups())) {
      reuse_->Release(hit->handle);  // a provider bug; compute the chunk instead
      break;
    }
    d->chunk = *std::move(hit);
    d->num_reused = range.end - from;
    if (blend) {
      d->num_reused = std::min(d->num_reused, *num_new);
      d->blend = true;
      *num_new -= d->num_reused;
    }
    d->chunk_first = from - chunk.offset;
    next = from + d->num_reused;
    break;
  }
  // Stop before the next reusable range so that a later step can try it.
  *num_new = std::min(*num_new, request.num_tokens() - next);
  for (const PromptChunk& chunk : request.chunks) {
    const ReusableRange range = RangeOf(request, chunk);
    if (range.begin >= range.end || range.begin <= next) continue;
    *num_new = std::min(*num_new, range.begin - next);
    break;
  }
}

void Scheduler::Impl::ReleaseChunk(Decision* d) {
  if (d->num_reused == 0) return;
  reuse_->Release(d->chunk.handle);
  d->num_reused = 0;
  d->blend = false;
  d->chunk = {};
}

}  // namespace pagedkv
