// Copyright 2026 The pagedkv Authors.
#include "engine/runtime/shift/runner_kv_mover.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/runtime/shift/rerotate_slots.h"
#include "pagedkv/cache/block_pool.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {

std::string RunnerKvMover::RopeFingerprint() const { return runner_->rope_config().Fingerprint(); }

absl::Status RunnerKvMover::MoveSlots(std::span<const KvSlotMove> moves) {
  std::vector<int64_t> src, dst;
  std::vector<int32_t> old_pos, new_pos;
  src.reserve(moves.size());
  dst.reserve(moves.size());
  old_pos.reserve(moves.size());
  new_pos.reserve(moves.size());
  for (const KvSlotMove& m : moves) {
    src.push_back(m.src_slot);
    dst.push_back(m.dst_slot);
    old_pos.push_back(m.old_position);
    new_pos.push_back(m.new_position);
  }
  return ReRotateSlots(
      *runner_, {.src = src, .dst = dst, .old_positions = old_pos, .new_positions = new_pos});
}

absl::Status RunnerKvMover::CopySlots(std::span<const int64_t> src, std::span<const int64_t> dst,
                                      int32_t first_position) {
  std::vector<int32_t> pos;
  pos.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) pos.push_back(first_position + static_cast<int32_t>(i));
  return ReRotateSlots(*runner_,
                       {.src = src, .dst = dst, .old_positions = pos, .new_positions = pos});
}

absl::StatusOr<std::unique_ptr<ShiftedChunkReuse>> CreateRunnerChunkReuse(
    ModelRunner* runner, std::unique_ptr<ChunkIndex> index,
    const ShiftedChunkReuseOptions& options) {
  if (runner == nullptr || index == nullptr) {
    return absl::InvalidArgumentError("CreateRunnerChunkReuse: runner and index are required");
  }
  const int32_t num_layers = runner->config().n_layers;
  if (options.recompute_fraction > 0.0 && options.deviation_layer >= num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("CreateRunnerChunkReuse: deviation_layer must be in [0, ", num_layers,
                     ") (the model's layers), got ", options.deviation_layer));
  }
  const BlockPool& pool = index->pool();
  if (pool.num_blocks() != runner->options().num_blocks ||
      pool.block_size() != runner->options().block_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("CreateRunnerChunkReuse: the pool has ", pool.num_blocks(), " blocks of ",
                     pool.block_size(), " tokens but the model runner's KV pages have ",
                     runner->options().num_blocks, " blocks of ", runner->options().block_size));
  }
  return ShiftedChunkReuse::Create(std::move(index), std::make_unique<RunnerKvMover>(runner),
                                   options);
}

}  // namespace pagedkv
