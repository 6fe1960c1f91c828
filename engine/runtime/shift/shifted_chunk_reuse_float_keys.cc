// Copyright 2026 The pagedkv Authors.
//
// ShiftedChunkReuse's float keys (options.float_keys_bytes > 0): keeping a registered copy's
// float keys, finding them for an acquired chunk, and moving its tokens from them.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/runtime/shift/shifted_chunk_reuse.h"
#include "pagedkv/status_macros.h"

namespace pagedkv {

absl::Status ShiftedChunkReuse::ValidateFloatKeys(int32_t num_tokens,
                                                  const ChunkFloatKeysInput& float_keys) const {
  if (float_keys.groups.empty()) return absl::OkStatus();
  const bool groups_fit = float_keys.groups.size() == static_cast<size_t>(num_groups());
  if (!groups_fit || float_keys.width < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ShiftedChunkReuse::Register: float keys need a width >= 1 and one key list per KV "
        "cache group (",
        num_groups(), "); got width ", float_keys.width, " and ", float_keys.groups.size()));
  }
  const int64_t per_layer = int64_t{num_tokens} * float_keys.width;
  for (size_t g = 0; g < float_keys.groups.size(); ++g) {
    const auto size = static_cast<int64_t>(float_keys.groups[g].size());
    if (size == 0 || size % per_layer != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("ShiftedChunkReuse::Register: group ", g, "'s float keys hold ", size,
                       " floats, not a whole number of layers of ", num_tokens, " tokens x width ",
                       float_keys.width));
    }
  }
  return absl::OkStatus();
}

void ShiftedChunkReuse::KeepFloatKeys(int32_t g, const BlockHash& key, int32_t position,
                                      int32_t num_tokens, const ChunkFloatKeysInput& float_keys) {
  if (float_keys_ == nullptr) return;
  const BlockHash group_key = GroupKey(key, g);
  if (float_keys.groups.empty()) {  // this copy's keys are not known: no older ones may move it
    float_keys_->Erase(group_key);
    return;
  }
  const std::vector<float>& all = float_keys.groups[static_cast<size_t>(g)];
  const int64_t width = float_keys.width;
  const int32_t first = FirstKeptToken(g, num_tokens);
  auto kept = std::make_shared<ChunkKeys>();
  kept->position = position + first;
  kept->num_tokens = num_tokens - first;
  kept->num_layers = static_cast<int32_t>(static_cast<int64_t>(all.size()) / (num_tokens * width));
  kept->width = width;
  kept->keys.reserve(static_cast<size_t>(kept->num_layers * kept->num_tokens * width));
  for (int32_t l = 0; l < kept->num_layers; ++l) {  // the copy's tokens of every layer
    const auto begin = all.begin() + (int64_t{l} * num_tokens + first) * width;
    kept->keys.insert(kept->keys.end(), begin, begin + int64_t{kept->num_tokens} * width);
  }
  float_keys_->Put(group_key, std::move(kept));
}

void ShiftedChunkReuse::AddFloatKeySources(const BlockHash& key, int32_t num_tokens,
                                           const AcquiredChunk& acquired) {
  for (int32_t g = 0; g < num_groups(); ++g) {
    const int32_t first = FirstKeptToken(g, num_tokens);
    // The position of the copy's first token (group_positions give chunk token 0's).
    const int32_t position =
        first + (g == 0 ? acquired.position : acquired.group_positions[static_cast<size_t>(g - 1)]);
    std::shared_ptr<const ChunkKeys> keys =
        float_keys_->Find(GroupKey(key, g), position, num_tokens - first);
    if (keys == nullptr) continue;
    const std::vector<int64_t>& slots =
        g == 0 ? acquired.slots : acquired.group_slots[static_cast<size_t>(g - 1)];
    float_key_sources_.Add(acquired.handle, g, std::move(keys),
                           std::span<const int64_t>(slots).subspan(static_cast<size_t>(first)));
  }
}

absl::Status ShiftedChunkReuse::MoveGroup(int32_t g, std::span<const KvSlotMove> moves) {
  if (float_key_sources_.empty()) return mover_->MoveSlots(g, moves);
  const FloatKeySources::Split split = float_key_sources_.SplitMoves(g, moves);
  if (!split.plain.empty()) PAGEDKV_RETURN_IF_ERROR(mover_->MoveSlots(g, split.plain));
  if (split.from_keys.empty()) return absl::OkStatus();
  PAGEDKV_RETURN_IF_ERROR(mover_->MoveSlotsFromKeys(g, split.from_keys, split.keys));
  stats_.float_key_moves += static_cast<int64_t>(split.from_keys.size());
  return absl::OkStatus();
}

}  // namespace pagedkv
