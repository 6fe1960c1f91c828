// Copyright 2026 The pagedkv Authors.
#include "engine/runtime/shift/runner_kv_mover.h"

#include <algorithm>
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

namespace {

// The layers of each KV cache group of `runner` (one group of every layer without
// layer_kv_group).
std::vector<std::vector<int32_t>> GroupLayers(const ModelRunner& runner) {
  const std::vector<int32_t>& layer_group = runner.options().layer_kv_group;
  const int32_t num_layers = runner.config().n_layers;
  std::vector<std::vector<int32_t>> layers(
      static_cast<size_t>(std::max(1, runner.num_kv_groups())));
  for (int32_t l = 0; l < num_layers; ++l) {
    const size_t g =
        layer_group.empty() ? 0 : static_cast<size_t>(layer_group[static_cast<size_t>(l)]);
    if (g < layers.size()) layers[g].push_back(l);
  }
  return layers;
}

// InvalidArgument when `groups` (empty: one full group of every layer) do not match the runner's
// KV cache groups in count and layers.
absl::Status CheckGroups(const ModelRunner& runner, const std::vector<KvCacheGroupSpec>& groups) {
  const std::vector<std::vector<int32_t>> layers = GroupLayers(runner);
  const size_t count = std::max<size_t>(1, groups.size());
  bool match = count == layers.size();
  for (size_t g = 0; match && g < groups.size(); ++g) {
    match = static_cast<size_t>(groups[g].num_layers) == layers[g].size();
  }
  if (match) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "CreateRunnerChunkReuse: options.groups (", count,
      " KV cache groups) must be the KvCacheManager's groups over this model runner, which has ",
      layers.size(), " (pass KvCacheManager::options().groups)"));
}

}  // namespace

RunnerKvMover::RunnerKvMover(ModelRunner* runner)
    : runner_(runner), group_layers_(GroupLayers(*runner)) {}

std::string RunnerKvMover::RopeFingerprint() const { return runner_->rope_config().Fingerprint(); }

absl::StatusOr<std::span<const int32_t>> RunnerKvMover::LayersOf(int32_t group) const {
  if (group < 0 || static_cast<size_t>(group) >= group_layers_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("RunnerKvMover: KV cache group ", group,
                                                   " outside the runner's ", group_layers_.size()));
  }
  return std::span<const int32_t>(group_layers_[static_cast<size_t>(group)]);
}

absl::Status RunnerKvMover::MoveSlots(int32_t group, std::span<const KvSlotMove> moves) {
  return MoveSlotsFromKeys(group, moves, {});
}

absl::Status RunnerKvMover::MoveSlotsFromKeys(int32_t group, std::span<const KvSlotMove> moves,
                                              std::span<const float> keys) {
  PAGEDKV_ASSIGN_OR_RETURN(const std::span<const int32_t> layers, LayersOf(group));
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
  return ReRotateSlots(*runner_, {.src = src,
                                  .dst = dst,
                                  .old_positions = old_pos,
                                  .new_positions = new_pos,
                                  .layers = layers,
                                  .src_keys = keys});
}

absl::Status RunnerKvMover::CopySlots(int32_t group, std::span<const int64_t> src,
                                      std::span<const int64_t> dst, int32_t first_position) {
  PAGEDKV_ASSIGN_OR_RETURN(const std::span<const int32_t> layers, LayersOf(group));
  std::vector<int32_t> pos;
  pos.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) pos.push_back(first_position + static_cast<int32_t>(i));
  return ReRotateSlots(
      *runner_,
      {.src = src, .dst = dst, .old_positions = pos, .new_positions = pos, .layers = layers});
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
  PAGEDKV_RETURN_IF_ERROR(CheckGroups(*runner, options.groups));
  return ShiftedChunkReuse::Create(std::move(index), std::make_unique<RunnerKvMover>(runner),
                                   options);
}

}  // namespace pagedkv
