// Copyright 2026 The pagedkv Authors.
//
// RunnerKvMover: the ChunkKvMover of the Engine's shifted-position reuse, over the ModelRunner's
// KV pages. Slot moves re-rotate K from the old to the new position and copy V (ReRotateSlots,
// whatever the block alignment); a chunk copy re-rotates from and to the same positions, i.e.
// copies K and V. CreateRunnerChunkReuse builds the Engine's ShiftedChunkReuse with one, after
// checking what only the runner knows (its layer count, its pages' shape).
//
// Example:
//   PAGEDKV_ASSIGN_OR_RETURN(std::unique_ptr<pagedkv::ChunkIndex> index, cache.AttachChunkIndex());
//   PAGEDKV_ASSIGN_OR_RETURN(auto reuse, pagedkv::CreateRunnerChunkReuse(
//       &runner, std::move(index), {.model_fingerprint = fingerprint}));
//   scheduler.SetChunkReuseProvider(reuse.get());
//   PAGEDKV_RETURN_IF_ERROR(scheduler.Schedule(&batch));
//   PAGEDKV_RETURN_IF_ERROR(reuse->RunMoves(batch.slot_moves));   // re-rotated on the pages
//   ...  // forward pass (with MakeBlendHook's hook under CacheBlend), then Register the spans
//
// Not thread-safe; the runner must outlive the mover.
#ifndef PAGEDKV_ENGINE_RUNTIME_SHIFT_RUNNER_KV_MOVER_H_
#define PAGEDKV_ENGINE_RUNTIME_SHIFT_RUNNER_KV_MOVER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/runner/model_runner.h"
#include "engine/runtime/shift/chunk_kv_mover.h"
#include "engine/runtime/shift/shifted_chunk_reuse.h"
#include "pagedkv/cache/chunk_index.h"
#include "pagedkv/export.h"
#include "pagedkv/runtime/scheduler.h"

namespace pagedkv {

class PAGEDKV_EXPORT RunnerKvMover final : public ChunkKvMover {
 public:
  // `runner`: not owned, not null.
  explicit RunnerKvMover(ModelRunner* runner);

  // The runner's RopeConfig fingerprint.
  std::string RopeFingerprint() const override;
  // ReRotateSlots over the layers of KV cache group `group` (ModelRunnerOptions::layer_kv_group;
  // every layer over one group); backend errors are passed through. InvalidArgument for a group
  // the runner does not have.
  absl::Status MoveSlots(int32_t group, std::span<const KvSlotMove> moves) override;
  // MoveSlots with the keys re-rotated from `keys` (ReRotateSlots' src_keys).
  absl::Status MoveSlotsFromKeys(int32_t group, std::span<const KvSlotMove> moves,
                                 std::span<const float> keys) override;
  // ReRotateSlots from and to positions first_position..: K and V copied on group `group`'s
  // layers.
  absl::Status CopySlots(int32_t group, std::span<const int64_t> src, std::span<const int64_t> dst,
                         int32_t first_position) override;

 private:
  // Group `group`'s layers; InvalidArgument for a group the runner does not have.
  absl::StatusOr<std::span<const int32_t>> LayersOf(int32_t group) const;

  ModelRunner* runner_;
  std::vector<std::vector<int32_t>> group_layers_;  // [groups] layers of each, ascending
};

// The Engine's provider: a ShiftedChunkReuse over `index` (the KvCacheManager's, from
// AttachChunkIndex) with a RunnerKvMover on `runner`; options.groups are the manager's KV cache
// groups. InvalidArgument for a null runner, the option errors of ShiftedChunkReuse::Create, a
// deviation_layer outside [0, n_layers) with blending on, an index whose pool's shape differs
// from the runner's KV pages, or groups whose count or layer counts differ from the runner's.
PAGEDKV_EXPORT absl::StatusOr<std::unique_ptr<ShiftedChunkReuse>> CreateRunnerChunkReuse(
    ModelRunner* runner, std::unique_ptr<ChunkIndex> index,
    const ShiftedChunkReuseOptions& options);

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_RUNTIME_SHIFT_RUNNER_KV_MOVER_H_
