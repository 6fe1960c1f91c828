// Copyright 2026 The pagedkv Authors.
//
// Scheduler: prompt sources (SchedulerRequest::prompt_source). The n samples of one prompt take
// its KV from the first sample instead of computing it: each waits until the source has computed
// the prompt, then finds the full blocks in the prefix cache (shared by reference count) and gets
// the partial last block copied into a block of its own before the step (copy on write: it writes
// its own tokens there next). Only the last prompt token is computed again, for the sample's own
// logits row.
#include <algorithm>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/runtime/scheduler/scheduler_impl.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {
namespace {

using internal::RequestState;

// True when `source`'s KV of `request`'s prompt is the KV `request` would compute: the same
// prompt tokens under the same salt and adapter, nothing else hashed into the blocks, and no
// chunk whose KV may have been reused at another position.
bool SharesPrompt(const RequestState& source, const RequestState& request) {
  if (source.num_prompt_tokens != request.num_prompt_tokens ||
      source.cache_salt != request.cache_salt || source.adapter_id != request.adapter_id ||
      !source.cache.multimodal().empty() || !request.cache.multimodal().empty() ||
      !source.chunks.empty() || !request.chunks.empty()) {
    return false;
  }
  const auto n = static_cast<size_t>(request.num_prompt_tokens);
  const std::span<const TokenId> a = source.cache.tokens().first(n);
  const std::span<const TokenId> b = request.cache.tokens().first(n);
  return std::equal(a.begin(), a.end(), b.begin());
}

}  // namespace

const internal::RequestState* Scheduler::Impl::PromptSource(const RequestState& request) const {
  if (request.prompt_source == 0 || request.prompt_source == request.id ||
      request.skip_prefix_cache_lookup || cache_.num_groups() != 1 ||
      request.num_tokens() != request.num_prompt_tokens) {
    return nullptr;  // resumed after preemption, its outputs are its own
  }
  const auto it = requests_.find(request.prompt_source);
  if (it == requests_.end() || !SharesPrompt(*it->second, request)) return nullptr;
  return it->second.get();
}

bool Scheduler::Impl::WaitsForPromptSource(const RequestState& request) const {
  const RequestState* source = PromptSource(request);
  return source != nullptr && source->num_computed_tokens < request.num_prompt_tokens - 1;
}

int32_t Scheduler::Impl::CopyablePromptTokens(const RequestState& request, int32_t num_hit,
                                              Decision* d) const {
  const RequestState* source = PromptSource(request);
  const int32_t wanted = request.num_prompt_tokens - 1 - num_hit;
  // Running, the source holds the blocks of the tokens it computed in earlier steps (KV written).
  if (source == nullptr || source->status != RequestStatus::kRunning || wanted <= 0 ||
      num_hit % cache_.block_size() != 0 ||  // whole blocks are copied
      source->num_computed_tokens < request.num_prompt_tokens - 1) {
    return 0;
  }
  d->copy_source = source->id;
  return wanted;
}

absl::Status Scheduler::Impl::EmitBlockCopies(const Decision& d, std::span<const BlockId> table,
                                              ScheduledBatch* batch) const {
  if (d.num_copied == 0) return absl::OkStatus();
  PAGEDKV_ASSIGN_OR_RETURN(std::span<const BlockId> source, cache_.GetBlockTable(d.copy_source));
  const int32_t bs = cache_.block_size();
  const int32_t first = d.request->num_computed_tokens;
  const size_t begin = static_cast<size_t>(first / bs);
  const size_t end = static_cast<size_t>((first + d.num_copied - 1) / bs) + 1;
  if (end > source.size() || end > table.size()) {
    return absl::InternalError(absl::StrCat("scheduler: request ", d.request->id, " copies ", end,
                                            " blocks' KV from request ", d.copy_source,
                                            ", which holds ", source.size()));
  }
  for (size_t j = begin; j < end; ++j) batch->block_copies.push_back({source[j], table[j]});
  return absl::OkStatus();
}

}  // namespace pagedkv
