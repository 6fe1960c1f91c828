// Copyright 2026 The pagedkv Authors.
//
// ChunkKvMover: the data movement behind shifted-position chunk reuse. ShiftedChunkReuse
// (shifted_chunk_reuse.h) does the bookkeeping (chunk keys, pins, block allocation, stats) and
// calls a mover, when it has one, for the two things that touch KV: running the scheduler's slot
// moves (keys re-rotated from the old to the new position, values copied) and copying a computed
// chunk span into the blocks a registered chunk gets. The engine's mover works on the model
// runner's pages (runner_kv_mover.h); serve-mode replay has no KV and passes no mover.
//
// Example (a mover that records what it was asked to do, as in the tests):
//   class RecordingMover final : public ChunkKvMover {
//    public:
//     std::string RopeFingerprint() const override { return "rope"; }
//     absl::Status MoveSlots(int32_t group, std::span<const KvSlotMove> moves) override { ... }
//     absl::Status MoveSlotsFromKeys(int32_t group, std::span<const KvSlotMove> moves,
//                                    std::span<const float> keys) override { ... }
//     absl::Status CopySlots(int32_t group, std::span<const int64_t> src,
//                            std::span<const int64_t> dst, int32_t first_position) override { ... }
//
// Over a KvCacheManager of several KV cache groups, the slots of group g are in the pages of the
// layers of group g (one block id names one page per layer of its group); every call names the
// group its slots belong to (0 over one group).
//   };
//
// Implementations say their own thread safety; ShiftedChunkReuse calls a mover from one thread.
#ifndef PAGEDKV_ENGINE_RUNTIME_SHIFT_CHUNK_KV_MOVER_H_
#define PAGEDKV_ENGINE_RUNTIME_SHIFT_CHUNK_KV_MOVER_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "pagedkv/export.h"
#include "pagedkv/runtime/scheduler.h"

namespace pagedkv {

class PAGEDKV_EXPORT ChunkKvMover {
 public:
  virtual ~ChunkKvMover() = default;

  // Names the rotation the mover's keys carry (RoPE variant, base, scaling); hashed into every
  // chunk key, so KV computed under another rotation is another chunk.
  virtual std::string RopeFingerprint() const = 0;

  // Writes the KV of each move's src_slot (keys rotated for old_position) into its dst_slot with
  // the keys re-rotated to new_position, on the layers of KV cache group `group`; values copied.
  // REQUIRES: `moves` is not empty; 0 <= group < the manager's groups.
  virtual absl::Status MoveSlots(int32_t group, std::span<const KvSlotMove> moves) = 0;

  // MoveSlots with each key re-rotated from its float key in `keys` ([layers of group `group`
  // (ascending), moves.size(), n_kv_heads * head_dim]: the key as the KV write rotated it for
  // old_position, before the storage rounding) instead of the rounded key in src_slot: a key of
  // a quantized cache is then rounded once, as when it was written. Values are copied from
  // src_slot. REQUIRES: as MoveSlots; keys has that size (InvalidArgument otherwise).
  virtual absl::Status MoveSlotsFromKeys(int32_t group, std::span<const KvSlotMove> moves,
                                         std::span<const float> keys) = 0;

  // Copies the KV of `src` into `dst` unchanged ([n] slots each) on the layers of group `group`;
  // token i was computed at position first_position + i. REQUIRES: src.size() == dst.size() > 0;
  // 0 <= group < the manager's groups.
  virtual absl::Status CopySlots(int32_t group, std::span<const int64_t> src,
                                 std::span<const int64_t> dst, int32_t first_position) = 0;
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_RUNTIME_SHIFT_CHUNK_KV_MOVER_H_
