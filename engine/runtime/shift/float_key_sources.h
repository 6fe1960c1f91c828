// Copyright 2026 The pagedkv Authors.
//
// FloatKeySources: within one step, the tokens of acquired chunks whose float keys are kept
// (ChunkFloatKeys entries found when the chunk was acquired), by KV cache group and source slot.
// ShiftedChunkReuse adds each acquired chunk's sources, removes a released chunk's, and splits
// the step's slot moves into those that start from a float key and the rest.
//
// Example:
//   FloatKeySources sources;
//   sources.Add(handle, /*group=*/0, keys, chunk.slots);
//   FloatKeySources::Split split = sources.SplitMoves(0, batch.slot_moves);
//   // split.plain: MoveSlots; split.from_keys with split.keys: MoveSlotsFromKeys
//   sources.Clear();
//
// Not thread-safe.
#ifndef PAGEDKV_ENGINE_RUNTIME_SHIFT_FLOAT_KEY_SOURCES_H_
#define PAGEDKV_ENGINE_RUNTIME_SHIFT_FLOAT_KEY_SOURCES_H_

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "engine/runtime/shift/chunk_float_keys.h"
#include "pagedkv/export.h"
#include "pagedkv/runtime/scheduler.h"

namespace pagedkv {

class PAGEDKV_EXPORT FloatKeySources {
 public:
  // The moves of one group, split.
  struct Split {
    std::vector<KvSlotMove> plain;      // sources without a float key
    std::vector<KvSlotMove> from_keys;  // sources with one
    std::vector<float> keys;            // [layers of the group, from_keys.size(), width]
  };

  // Token j of `keys`' copy sits in slots[j] of group `group`, for the chunk acquired under
  // `handle`. REQUIRES: slots.size() == keys->num_tokens.
  void Add(int64_t handle, int32_t group, std::shared_ptr<const ChunkKeys> keys,
           std::span<const int64_t> slots);
  // Forgets the sources of `handle`'s chunk (those another handle of the same chunk added stay).
  void Remove(int64_t handle);
  void Clear();
  bool empty() const { return held_.empty(); }

  // Group `group`'s `moves` split: a move goes from its float key when its source slot holds a
  // token with one, computed at the move's old position.
  Split SplitMoves(int32_t group, std::span<const KvSlotMove> moves) const;

 private:
  struct Source {
    const ChunkKeys* keys = nullptr;  // owned by held_
    int32_t token = 0;
    int32_t handles = 0;  // acquisitions of the chunk that added it (one chunk, several handles)
  };
  struct Held {
    std::vector<std::shared_ptr<const ChunkKeys>> keys;
    std::vector<std::pair<int32_t, int64_t>> slots;  // (group, slot) of every source added
  };

  std::vector<absl::flat_hash_map<int64_t, Source>> by_group_;  // [group]: slot -> source
  absl::flat_hash_map<int64_t, Held> held_;                     // by handle
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_RUNTIME_SHIFT_FLOAT_KEY_SOURCES_H_
