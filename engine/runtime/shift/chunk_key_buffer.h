// Copyright 2026 The pagedkv Authors.
//
// ChunkKeyBuffer: one prompt chunk's float keys, gathered from the forward passes that compute
// its tokens (ModelOutput::rotated_keys: each key as the KV write rotated it, before the KV
// dtype's rounding), for the Engine to hand to ShiftedChunkReuse::Register with chunk float keys
// on (ChunkReuseOptions::float_keys_memory). A chunk may be computed over several steps (chunked
// prefill); its keys are complete once every token was stored (a token found in the prefix cache
// never is, and the chunk then registers without float keys).
//
// Example:
//   ChunkKeyBuffer buffer;
//   buffer.Store(/*token=*/j, model_out.rotated_keys, /*row=*/r, key_rows.size(), shape);
//   if (buffer.complete()) reuse->Register(..., {.width = shape.width,
//                                              .groups = buffer.ByGroup(layer_group, 1)});
#ifndef PAGEDKV_ENGINE_RUNTIME_SHIFT_CHUNK_KEY_BUFFER_H_
#define PAGEDKV_ENGINE_RUNTIME_SHIFT_CHUNK_KEY_BUFFER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "pagedkv/export.h"

namespace pagedkv {

// The shape of a chunk's keys.
struct PAGEDKV_EXPORT ChunkKeyShape {
  int32_t num_layers = 0;
  int32_t num_tokens = 0;  // the chunk's length
  int64_t width = 0;       // n_kv_heads * head_dim
};

class PAGEDKV_EXPORT ChunkKeyBuffer {
 public:
  // Stores chunk token `token`'s keys from row `row` of `rotated` ([num_layers, num_rows,
  // width]), sizing the buffer for `shape` at the first call. REQUIRES: token and row in range;
  // every call with the same shape.
  void Store(int32_t token, std::span<const float> rotated, int64_t row, int64_t num_rows,
             const ChunkKeyShape& shape);
  // True when every token of the chunk was stored.
  bool complete() const { return !captured_.empty() && num_captured_ == shape_.num_tokens; }
  // The keys by KV cache group: [num_groups] of [layers l with layer_group[l] == g (ascending),
  // num_tokens, width]; an empty layer_group puts every layer in group 0. REQUIRES: complete().
  std::vector<std::vector<float>> ByGroup(std::span<const int32_t> layer_group,
                                          int32_t num_groups) const;
  int64_t width() const { return shape_.width; }
  // Frees the keys.
  void Clear() { *this = ChunkKeyBuffer(); }

 private:
  ChunkKeyShape shape_;
  std::vector<float> keys_;     // [num_layers, num_tokens, width]
  std::vector<char> captured_;  // [num_tokens]
  int32_t num_captured_ = 0;
};

}  // namespace pagedkv

#endif  // PAGEDKV_ENGINE_RUNTIME_SHIFT_CHUNK_KEY_BUFFER_H_
