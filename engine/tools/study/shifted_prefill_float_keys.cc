// Copyright 2026 The pagedkv Authors.
//
// ShiftedPrefill's float keys: which rows of the compute pass hand back their keys, keeping a
// registered span's float keys, and moving a hit from them (ShiftedReuseOptions::from_float_keys).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/runtime/shift/rerotate_slots.h"
#include "engine/tools/study/shifted_prefill.h"
#include "engine/tools/study/shifted_prefill_state.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {

std::vector<int32_t> ShiftedPrefill::KeyRows(RunState& run,
                                             std::span<const int32_t> indices) const {
  run.key_tokens.clear();
  std::vector<int32_t> rows;
  if (!run.options.register_chunks) return rows;
  for (size_t r = 0; r < indices.size(); ++r) {
    const int32_t t = indices[r];
    for (size_t s = 0; s < run.input.chunks.size(); ++s) {
      const ChunkSpan& span = run.input.chunks[s];
      if (run.result.chunks[s].hit || t < span.begin || t >= span.begin + span.length) continue;
      rows.push_back(static_cast<int32_t>(r));
      run.key_tokens.push_back(t);
      break;
    }
  }
  return rows;
}

void ShiftedPrefill::KeepFloatKeys(const RunState& run, const ChunkSpan& span,
                                   const BlockHash& key) {
  const auto first = std::lower_bound(run.key_tokens.begin(), run.key_tokens.end(), span.begin);
  const auto row = static_cast<int64_t>(first - run.key_tokens.begin());
  const auto num_rows = static_cast<int64_t>(run.key_tokens.size());
  // The pass computed the whole span: its tokens are consecutive key rows.
  if (num_rows - row < span.length ||
      run.key_tokens[row + span.length - 1] != span.begin + span.length - 1) {
    float_keys_.Erase(key);
    return;
  }
  const ModelConfig& c = runner_->config();
  auto kept = std::make_shared<ChunkKeys>(ChunkKeys{.position = span.begin,
                                                    .num_tokens = span.length,
                                                    .num_layers = c.n_layers,
                                                    .width = c.kv_dim()});
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const auto begin = run.rotated_keys.begin() + (l * num_rows + row) * kept->width;
    kept->keys.insert(kept->keys.end(), begin, begin + int64_t{span.length} * kept->width);
  }
  float_keys_.Put(key, std::move(kept));
}

absl::StatusOr<bool> ShiftedPrefill::MoveFromFloatKeys(const RunState& run, const Hit& hit) {
  if (!run.options.from_float_keys || !run.options.rerotate || hit.reused.empty()) return false;
  const std::shared_ptr<const ChunkKeys> keys =
      float_keys_.Find(hit.location.key, hit.location.position, hit.location.num_tokens);
  if (keys == nullptr) return false;
  const int32_t bs = pool_->block_size();
  const int32_t begin = run.input.chunks[hit.span].begin;
  std::vector<int64_t> src, dst;
  std::vector<int32_t> old_pos, new_pos;
  std::vector<float> src_keys;  // [layers, reused tokens, width]
  for (int32_t i : hit.reused) {
    src.push_back(hit.location.SlotOf(i, bs));
    dst.push_back(SlotAt(run.input.block_table, bs, begin + i));
    old_pos.push_back(hit.location.PositionOf(i));
    new_pos.push_back(begin + i);
  }
  for (int32_t l = 0; l < keys->num_layers; ++l) {
    for (int32_t i : hit.reused) {
      src_keys.insert(src_keys.end(), keys->Key(l, i), keys->Key(l, i) + keys->width);
    }
  }
  PAGEDKV_RETURN_IF_ERROR(ReRotateSlots(*runner_, {.src = src,
                                                   .dst = dst,
                                                   .old_positions = old_pos,
                                                   .new_positions = new_pos,
                                                   .mode = run.options.rotation,
                                                   .src_keys = src_keys}));
  return true;
}

}  // namespace pagedkv
