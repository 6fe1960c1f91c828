// Copyright 2026 The pagedkv Authors.
//
// Engine chunk float keys (ChunkReuseOptions::float_keys_memory): which rows of a step carry
// tokens of chunks their requests will register, their keys as the forward pass hands them back
// into each request's chunk key buffers, and the keys a chunk registers with.
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/model/runner/model_runner.h"
#include "engine/runtime/engine_internal.h"
#include "engine/runtime/engine_request.h"
#include "engine/runtime/shift/shifted_chunk_reuse.h"
#include "engine/runtime/step_batch.h"
#include "pagedkv/runtime/engine.h"

namespace pagedkv {

void Engine::PlanKeyRows(const ScheduledSequence& s, RequestRecord& record, StepBatch* step) const {
  if (options_.chunk_reuse.float_keys_memory == 0 || record.chunks.empty()) return;
  record.chunk_keys.resize(record.chunks.size());
  // Row query_start + i holds the token at position num_computed_tokens + i (blend rows
  // included: they belong to reused chunks, which never register).
  const int32_t begin = s.num_computed_tokens;
  const int32_t end = begin + s.num_scheduled_tokens - s.num_draft_tokens;
  for (int32_t p = begin; p < end && p < static_cast<int32_t>(record.prompt.size()); ++p) {
    for (size_t c = 0; c < record.chunks.size(); ++c) {
      const PromptChunk& chunk = record.chunks[c];
      if (record.chunk_reused[c] || p < chunk.offset || p >= chunk.offset + chunk.length) continue;
      step->key_rows.push_back(s.query_start + p - begin);
      step->key_targets.push_back({.request_id = s.request_id,
                                   .chunk = static_cast<int32_t>(c),
                                   .token = p - chunk.offset});
      break;  // chunks do not overlap
    }
  }
}

void Engine::StoreChunkKeys(const StepBatch& step, const ModelOutput& model_out) {
  const ModelConfig& c = config();
  const auto num_rows = static_cast<int64_t>(step.key_rows.size());
  for (int64_t r = 0; r < num_rows; ++r) {
    const StepBatch::KeyTarget& target = step.key_targets[static_cast<size_t>(r)];
    RequestRecord& record = *requests_.at(target.request_id);
    const PromptChunk& chunk = record.chunks[static_cast<size_t>(target.chunk)];
    record.chunk_keys[static_cast<size_t>(target.chunk)].Store(
        target.token, model_out.rotated_keys, r, num_rows,
        {.num_layers = c.n_layers, .num_tokens = chunk.length, .width = c.kv_dim()});
  }
}

ChunkFloatKeysInput Engine::FloatKeysOf(RequestRecord& record, size_t c,
                                        std::vector<std::vector<float>>* storage) const {
  if (c >= record.chunk_keys.size()) return {};
  ChunkKeyBuffer& buffer = record.chunk_keys[c];
  if (!buffer.complete()) {
    buffer.Clear();
    return {};
  }
  const ModelRunner& runner = *internals_->runner;
  *storage =
      buffer.ByGroup(runner.options().layer_kv_group, std::max<int32_t>(1, runner.num_kv_groups()));
  const int64_t width = buffer.width();
  buffer.Clear();
  return {.width = width, .groups = *storage};
}

}  // namespace pagedkv
