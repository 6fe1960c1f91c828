// Copyright 2026 The pagedkv Authors.
//
// ReRotateSlots: moves cached K/V between slots of a ModelRunner's pages on every layer (or a
// range of layers), re-rotating each key from its old to its new position (kernels' ReRotate:
// K' = R(new) R(old)^T K in fp32, one rounding to the storage dtype; V copied). Tokens whose old
// and new positions are equal are moved with R(0), the identity: an exact copy. Slot and position
// lists are host arrays; they are uploaded when the runner computes on a device. In place when a
// token's source is its destination.
//
// Example (shift a 3-token chunk from positions 10.. to 40.., on all layers):
//   std::vector<int64_t> src = {160, 161, 162}, dst = {320, 321, 322};
//   std::vector<int32_t> old_pos = {10, 11, 12}, new_pos = {40, 41, 42};
//   PAGEDKV_RETURN_IF_ERROR(pagedkv::ReRotateSlots(
//       runner, {.src = src, .dst = dst, .old_positions = old_pos, .new_positions = new_pos}));
#ifndef PAGEDKV_ENGINE_RUNTIME_SHIFT_REROTATE_SLOTS_H_
#define PAGEDKV_ENGINE_RUNTIME_SHIFT_REROTATE_SLOTS_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "engine/model/runner/model_runner.h"
#include "pagedkv/export.h"
#include "pagedkv/kernels/rope_table.h"

namespace pagedkv {

struct PAGEDKV_EXPORT SlotMove {
  std::span<const int64_t> src = {};            // [n] source slots
  std::span<const int64_t> dst = {};            // [n] destination slots (no dst is another's src)
  std::span<const int32_t> old_positions = {};  // [n] positions the keys were rotated to
  std::span<const int32_t> new_positions = {};  // [n] positions to rotate them to
  ReRotateMode mode = ReRotateMode::kCompose;   // R(new) R(old)^T, or R(new - old)
  int32_t first_layer = 0;                      // layers [first_layer, first_layer + num_layers)
  int32_t num_layers = -1;                      // -1: through the last layer
  // When not empty, these layers instead of the range above (e.g. one KV cache group's).
  std::span<const int32_t> layers = {};
  // When not empty: [layers moved, n, n_kv_heads * head_dim], layer by layer in the order moved,
  // each token's float key rotated for its old position (ModelOutput::rotated_keys): the keys
  // are re-rotated from these and rounded once, rather than from src's rounded keys
  // (ReRotateArgs::src_keys); V is still copied from src.
  std::span<const float> src_keys = {};
};

// InvalidArgument for lists of different sizes, src_keys of another size, a bad layer range or
// a layer outside the model;
// kernel errors (slots out of
// range, negative positions) are passed through before anything is written.
PAGEDKV_EXPORT absl::Status ReRotateSlots(ModelRunner& runner, const SlotMove& move);

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_RUNTIME_SHIFT_REROTATE_SLOTS_H_
